import ArgumentParser
import CofferStore
import Foundation

extension Coffer {
    /// `coffer conflict list|show|resolve`: the offline changes a sync could not merge.
    struct ConflictCommand: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "conflict",
            abstract: "Your offline changes that the server's version also changed.",
            discussion: """
                When a sync pushes a change you made offline, it is merged with the server's version of the \
                record: changes to different fields merge. Where both changed the same field (or one side \
                deleted the record, or created it under the same name), the server's version is kept, and \
                yours is kept here until you resolve it. Needs --server (or COFFER_SERVER); works offline, from \
                your replica.
                """,
            subcommands: [List.self, Show.self, Resolve.self])

        /// The replica's conflicts, with the context to show them.
        static func conflicts(_ global: GlobalOptions) async throws -> (SessionContext, Replica, [Replica.Conflict]) {
            guard try global.serverURL() != nil else { throw CLIError.usage("conflicts are kept in a server's replica: give --server (or COFFER_SERVER)") }
            let context = try await SessionContext(global, createStore: false, readsLocally: true)
            let replica = context.replica!
            return (context, replica, try await replica.pendingConflicts())
        }

        static func label(_ zone: ZoneID, _ context: SessionContext) -> String {
            zone.ownerID == context.session.userID ? zone.name : "\(zone.name)@\(zone.ownerID)"
        }

        /// One side of a conflict in `--json`: its change tag, modifier and time.
        struct Side: Encodable {
            let changeTag: String?, modifier: String?, modified: String?, deleted: Bool
            init(_ record: Record?, mine: Date?, userID: String) {
                changeTag = record?.changeTag
                modifier = record == nil && mine == nil ? nil : (mine != nil ? userID : record?.modifierID)
                modified = (mine ?? record?.modified).map(Output.iso)
                deleted = record == nil
            }
        }

        struct List: AsyncParsableCommand {
            static let configuration = CommandConfiguration(abstract: "List the conflicts kept in your replica (of ZONE, or every zone).")

            @Argument(help: "A zone (NAME or NAME@OWNER).") var zone: String?
            @OptionGroup var global: GlobalOptions

            func run() async throws {
                let (context, _, all) = try await ConflictCommand.conflicts(global)
                var conflicts = all
                if let zone {
                    let id = try await context.zone(zone)
                    conflicts = conflicts.filter { $0.zone == id }
                }
                let me = context.session.userID
                if global.json {
                    struct Item: Encodable { let zone: String, owner: String, name: String, kind: String, server: Side, local: Side }
                    try Output.json(["conflicts": conflicts.map {
                        Item(zone: $0.zone.name, owner: $0.zone.ownerID, name: $0.name, kind: $0.kind,
                             server: Side($0.server, mine: nil, userID: me), local: Side($0.local, mine: $0.made, userID: me))
                    }])
                    return
                }
                guard !conflicts.isEmpty else {
                    Output.line("No conflicts.")
                    return
                }
                Table.print([["ZONE", "RECORD", "KIND", "SERVER", "LOCAL (YOURS)"]] + conflicts.map {
                    [ConflictCommand.label($0.zone, context), $0.name, $0.kind,
                     $0.server.map { "\($0.changeTag ?? "-") by \(context.displayName($0.modifierID)) \($0.modified.map(Output.iso) ?? "")" } ?? "deleted",
                     $0.local == nil ? "deleted \(Output.iso($0.made))" : "changed \(Output.iso($0.made))"]
                })
            }
        }

        struct Show: AsyncParsableCommand {
            static let configuration = CommandConfiguration(abstract: "Show both versions of a record in conflict, with their authors and dates.")

            @Argument(help: "The zone (NAME or NAME@OWNER).") var zone: String
            @Argument(help: "The record name.") var name: String
            @OptionGroup var global: GlobalOptions

            func run() async throws {
                let (context, _, all) = try await ConflictCommand.conflicts(global)
                let id = try await context.zone(zone)
                guard let conflict = all.last(where: { $0.zone == id && $0.name == name }) else {
                    throw CLIError(ExitStatus.notFound, "no conflict is kept for record '\(name)' in zone '\(id.name)'")
                }
                if global.json {
                    var writer = JSONWriter(pretty: true)
                    writer.beginObject()
                    writer.key("kind"); writer.string(conflict.kind)
                    for (key, record) in [("local", conflict.local), ("server", conflict.server)] {
                        writer.key(key)
                        if let record { try RecordOutput.write(record, context: context, into: &writer) } else { writer.null() }
                    }
                    writer.key("localMade"); writer.string(Output.iso(conflict.made))
                    writer.endObject()
                    RecordOutput.print(writer)
                    return
                }
                Output.line("Conflict (\(conflict.kind)) on \(name) in \(ConflictCommand.label(id, context)):")
                Output.line("")
                Output.line("Server's version (kept):")
                if let server = conflict.server { RecordOutput.printText(server, context: context) } else { Output.line("  deleted") }
                Output.line("")
                Output.line("Your version (made offline \(Output.iso(conflict.made))):")
                if let local = conflict.local { RecordOutput.printText(local, context: context) } else { Output.line("  deleted") }
            }
        }

        struct Resolve: AsyncParsableCommand {
            static let configuration = CommandConfiguration(
                abstract: "Resolve a conflict: take the server's version, yours, or a merged one.",
                discussion: """
                    --take server drops your change. --take local, or a merged version given with --set, --secret \
                    and --secret-file (the record's fields become exactly those), is saved over the server's \
                    version: pushed now when the server answers, else at the next sync.
                    """)

            enum Side: String, ExpressibleByArgument { case server, local }

            @Argument(help: "The zone (NAME or NAME@OWNER).") var zone: String
            @Argument(help: "The record name.") var name: String
            @Option(help: "server or local.") var take: Side?
            @Option(name: .customLong("set"), help: ArgumentHelp("A plain field of the merged version: key=value or key:TYPE=value.", valueName: "field"))
            var plain: [String] = []
            @Option(name: .customLong("secret"), help: ArgumentHelp("An encrypted field of the merged version (prefer --secret-file).", valueName: "field"))
            var secret: [String] = []
            @Option(name: .customLong("secret-file"), help: ArgumentHelp("An encrypted field of the merged version read from a file.", valueName: "key[:TYPE]=PATH"))
            var secretFiles: [String] = []
            @OptionGroup var global: GlobalOptions

            func validate() throws {
                let merged = !plain.isEmpty || !secret.isEmpty || !secretFiles.isEmpty
                guard (take != nil) != merged else {
                    throw CLIError.usage("give --take server|local, or the merged version's fields (--set, --secret, --secret-file), not both")
                }
            }

            func run() async throws {
                let plainGiven = try plain.map { try FieldAssignment.parsePending($0, encrypted: false) }
                let secretGiven = try secret.map { try FieldAssignment.parsePending($0, encrypted: true) }
                let files = try secretFiles.map(FieldAssignment.secretFile)
                try Coffer.RecordCommand.Put.checkEachFieldOnce(plainGiven.map { ($0.key, "--set") } + secretGiven.map { ($0.key, "--secret") }
                                                                + files.map { ($0.key, "--secret-file") })
                var fileBytes = try files.map(FieldAssignment.read)
                let (context, replica, all) = try await ConflictCommand.conflicts(global)
                let id = try await context.zone(zone)
                guard let conflict = all.last(where: { $0.zone == id && $0.name == name }) else {
                    throw CLIError(ExitStatus.notFound, "no conflict is kept for record '\(name)' in zone '\(id.name)'")
                }
                var chosen: Record?
                switch take {
                case .server?: chosen = nil
                case .local?:
                    guard let local = conflict.local else {
                        throw CLIError(ExitStatus.dataError, "your change deleted '\(name)'; delete it with 'coffer record delete' after resolving with --take server")
                    }
                    chosen = local
                case nil:
                    let type = conflict.local?.recordType ?? conflict.server?.recordType ?? ""
                    let fields = try await context.db(id).schema(in: id)[type] ?? [:]
                    var record = Record(type: type, name: name, zone: id)
                    for given in plainGiven { record.values[given.key] = try given.typed(by: fields[given.key], recordType: type).value }
                    for given in secretGiven { record.encryptedValues[given.key] = try given.typed(by: fields[given.key], recordType: type).value }
                    for i in files.indices {
                        let typed = try FieldAssignment.value(files[i], bytes: &fileBytes[i], schemaType: fields[files[i].key]?.type, recordType: type)
                        record.encryptedValues[typed.key] = typed.value
                    }
                    record.parent = conflict.local?.parent ?? conflict.server?.parent
                    chosen = record
                }
                try await replica.resolveConflict(zone: id, name: name, with: chosen)
                var pushed = false
                if chosen != nil, replica.isOnline {
                    let report = try await replica.push([id])
                    SessionContext.notePushed(report, replica: replica)
                    pushed = !report.confirmed.isEmpty
                }
                let outcome = chosen == nil ? "the server's version is kept" : pushed ? "your version is saved on the server" : "your version is saved locally, pushed at the next sync"
                if global.json {
                    struct Resolved: Encodable { let zone: String, name: String, took: String, pending: Bool }
                    try Output.json(Resolved(zone: id.name, name: name, took: take?.rawValue ?? "merged", pending: chosen != nil && !pushed))
                } else {
                    Output.line("Resolved \(name) in \(ConflictCommand.label(id, context)): \(outcome).")
                }
            }
        }
    }
}

import ArgumentParser
import CofferStore
import Foundation

extension Coffer {
    struct ZoneCommand: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "zone",
            abstract: "Zones: the units of atomic commits, keys and sharing.",
            subcommands: [Create.self, List.self, Delete.self, Rekey.self, Push.self]
        )
    }
}

extension Coffer.ZoneCommand {
    struct Create: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Create a zone with a fresh zone key.")

        @Argument(help: "The zone name (ASCII, at most 255 characters, no leading '_', no '@').") var name: String
        @OptionGroup var quiet: QuietOption
        @OptionGroup var global: GlobalOptions

        func run() async throws {
            let context = try await SessionContext(global, createStore: true, queuesOffline: true)
            let zone = try await context.db.createZone(named: name)
            quiet.apply()
            context.notePending(1)
            if global.json {
                struct Created: Encodable { let zone: String, owner: String, database: String, pending: Bool? }
                try Output.json(Created(zone: zone.name, owner: zone.ownerID, database: "private", pending: context.writesPending ? true : nil))
            } else {
                Output.line("Created zone \(zone.name).")
            }
        }
    }

    struct List: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "List the zones you own (private) and those shared with you (shared).",
            discussion: """
                A zone that fails verification (its log was changed, or does not reach what you saw before) is listed as refused, \
                with why; the command then fails with exit 65, unless --allow-refused is given.
                """)

        @Flag(help: "Exit 0 when zones fail verification (each is still listed as refused, with a warning).")
        var allowRefused = false
        @OptionGroup var global: GlobalOptions

        func run() async throws {
            let context = try await SessionContext(global, createStore: false, readsLocally: true)
            // Through a server: every zone it shows is pulled first; one it holds that fails
            // verification is listed as refused, whatever the replica's older copy says.
            let failed = try await context.pullAll()
            let owned = try await context.db.zoneList(), shared = try await context.session.sharedDatabase.zoneList()
            let zones = (owned.zones + shared.zones).filter { zone in !failed.contains { $0.id == zone.id } }
            let refused = owned.refused + shared.refused + failed
            func database(_ id: ZoneID) -> String { id.ownerID == context.session.userID ? "private" : "shared" }
            func name(_ id: ZoneID) -> String {
                id.ownerID == context.session.userID ? id.name : "\(id.name)@\(context.displayName(id.ownerID))"
            }
            if global.json {
                struct Entry: Encodable {
                    let name: String, owner: String, database: String, records: Int, keyEpoch: Int64, created: Date
                }
                struct Refused: Encodable {
                    let name: String, owner: String, database: String, message: String
                }
                struct Listing: Encodable {
                    let zones: [Entry]
                    let refused: [Refused]
                }
                try Output.json(Listing(zones: zones.map {
                    Entry(name: $0.id.name, owner: $0.id.ownerID, database: database($0.id), records: $0.recordCount, keyEpoch: $0.keyEpoch,
                          created: $0.created)
                }, refused: refused.map {
                    Refused(name: $0.id.name, owner: $0.id.ownerID, database: database($0.id), message: Output.oneLine($0.error.message))
                }))
            } else if zones.isEmpty && refused.isEmpty {
                Output.line("No zones. Create one with 'coffer zone create NAME'.")
            } else {
                Table.print([["ZONE", "DATABASE", "OWNER", "RECORDS", "CREATED"]] + zones.map {
                    [name($0.id), database($0.id), context.displayName($0.id.ownerID), String($0.recordCount), Output.iso($0.created)]
                } + refused.map {
                    [name($0.id), database($0.id), context.displayName($0.id.ownerID), "refused", "-"]
                })
            }
            guard let first = refused.first else { return }
            if allowRefused {
                for zone in refused { Output.note("warning: \(Output.oneLine(zone.error.message)) (listed as refused; run 'coffer audit')") }
                return
            }
            let more = refused.count > 1 ? " (and \(refused.count - 1) more zone\(refused.count > 2 ? "s" : ""))" : ""
            throw CLIError(ExitStatus.dataError, "\(Output.oneLine(first.error.message))\(more); run 'coffer audit' to see why, or pass --allow-refused to list the zones without failing")
        }
    }

    struct Delete: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Delete a zone you own, with its records and keys.",
            discussion: """
                On a terminal, deleting a zone that holds records asks first (y/N); --yes skips the question. \
                Without a terminal (a script), it deletes as asked.
                """)

        @Argument(help: "The zone.") var zone: String
        @Flag(help: "Do not ask, even on a terminal.") var yes = false
        @OptionGroup var quiet: QuietOption
        @OptionGroup var global: GlobalOptions

        func run() async throws {
            let context = try await SessionContext(global, createStore: false)
            let id = try await context.zone(zone)
            if !yes, let tty = Terminal.open() {
                defer { tty.close() }
                if let count = try await context.db.zones().first(where: { $0.id == id })?.recordCount, count > 0,
                   !tty.confirm("Delete zone \(id.name) and its \(count == 1 ? "record" : "\(count) records") for good? [y/N] ") {
                    throw CLIError(ExitStatus.failure, "zone \(id.name) was not deleted")
                }
            }
            try await context.db(id).deleteZone(id)
            quiet.apply()
            if global.json {
                try Output.json(["deleted": id.name])
            } else {
                Output.line("Deleted zone \(id.name) with its records and keys.")
            }
        }
    }
}

extension Coffer.ZoneCommand {
    struct Rekey: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Re-seal every record under the current key epoch and drop older keys (owner).",
            discussion: "After a participant was removed, this makes older records unreadable with keys they may still hold.")

        @Argument(help: "The zone.") var zone: String
        @OptionGroup var quiet: QuietOption
        @OptionGroup var global: GlobalOptions

        func run() async throws {
            let context = try await SessionContext(global, createStore: false)
            let id = try await context.zone(zone)
            let progress = isatty(STDERR_FILENO) != 0
            let count = try await context.session.rekey(zone: id) { done, total in
                if progress { Output.err(Data("\rRe-sealed \(done) of \(total) records".utf8)) }
            }
            if progress { Output.note("") }
            quiet.apply()
            if global.json { try RecordOutput.printJSON(["zone": id.name, "resealed": count] as [String: Any]); return }
            Output.line("Re-sealed \(count) records of \(id.name) under the current key; older keys are gone.")
        }
    }
}

extension Coffer.ZoneCommand {
    struct Push: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Move a zone you own, whole, from the local store onto a Coffer server.",
            discussion: """
                The zone's signed log, keys, schema and records move as they are: nothing is sealed or \
                signed again, and every signature stays valid. The zone is verified first; once the server \
                shows the copy at the zone's head, the local copy is deleted (its pages zeroed), and the \
                local store keeps a mark naming the server: a command on the zone there says where it went, \
                and making a zone of that name there again is refused, so that the zone is never written in \
                two places. Participants reach it on the server with the same share URL's zone.
                """)

        @Argument(help: "The zone (one you own).") var zone: String
        @Option(name: .customLong("to"), help: ArgumentHelp("The server's URL (default: COFFER_SERVER).", valueName: "url"))
        var target: String?
        @OptionGroup var quiet: QuietOption
        @OptionGroup var global: GlobalOptions

        func validate() throws {
            if global.server != nil { throw CLIError.usage("zone push reads a local store (--store); give the server with --to") }
        }

        func run() async throws {
            var local = global
            local.localOnly = true
            guard let text = target ?? ProcessInfo.processInfo.environment["COFFER_SERVER"], !text.isEmpty else {
                throw CLIError.usage("zone push needs the server: --to URL (or COFFER_SERVER)")
            }
            var serverOptions = global
            serverOptions.storeFlags.server = text
            guard let server = try serverOptions.serverURL() else { throw CLIError.usage("zone push needs the server: --to URL") }
            let context = try await SessionContext(local, createStore: false)
            let named = ZoneID(name: zone, ownerID: context.session.userID)
            if !zone.contains("@"), let origin = try await context.store.movedZoneOrigin(named) {
                throw CLIError(ExitStatus.alreadyExists, "the server at \(origin) already has zone '\(zone)': it was moved there with 'coffer zone push'")
            }
            let zoneID = try await context.zone(zone)
            let target = try await Store(server: server, vault: context.session.vault, logger: CLILog.logger)
            let progress = isatty(STDERR_FILENO) != 0 && !global.json
            let origin = try ServerOrigin(server).text
            let result = try await context.session.moveZone(zoneID, to: target, origin: origin) { done, total in
                if progress { Output.err(Data("\rPushing: batch \(done) of \(total)\u{1b}[K".utf8)) }
            }
            if progress { Output.err(Data("\r\u{1b}[K".utf8)) }
            let shown = server.absoluteString
            quiet.apply()
            if global.json {
                struct Pushed: Encodable { let zone: String, server: String, entries: Int, records: Int }
                try Output.json(Pushed(zone: zoneID.name, server: shown, entries: result.entries, records: result.records))
            } else {
                Output.line("Moved zone \(zoneID.name) to \(shown): \(result.entries) log entries, \(result.records) records, signatures intact.")
                Output.line("The local copy is deleted; work on it with --server \(shown).")
            }
        }
    }
}

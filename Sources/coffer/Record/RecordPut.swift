import ArgumentParser
import CofferStore
import Foundation

extension Coffer.RecordCommand {
    struct Put: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Create or replace a record.",
            discussion: """
                Without --merge the record's fields become exactly those given. With --merge the given fields \
                are set and the others kept. With --if-match TAG the save fails (exit 75) unless the stored \
                record is still at that change tag. It prints the saved record with its encrypted fields by name \
                only (--json: encryptedFields, their sorted names): a write prints no secret.

                A field given without a type (key=value) takes the type the zone's schema has for it \
                (due=2026-01-01 for a date field); a field the schema does not have is a string. A save that \
                adds a record type or a field to the schema says so on stderr (note: ..., with a "did you mean" \
                for a name close to one the schema has; --json: newType, newFields); --strict refuses it instead.
                """)

        @Argument(help: "The zone.") var zone: String
        @Argument(help: "The record name.") var name: String
        @Option(help: "The record type.") var type: String
        @Option(name: .customLong("set"), help: ArgumentHelp("A plain field: key=value or key:TYPE=value.", valueName: "field"))
        var plain: [String] = []
        @Option(name: .customLong("secret"), help: ArgumentHelp(
            "An encrypted field: key=value or key:TYPE=value. The value is visible to other local users (ps) and kept in shell history; prefer --secret-file.",
            valueName: "field"))
        var secret: [String] = []
        @Option(name: .customLong("secret-file"), help: ArgumentHelp(
            "An encrypted field read from a file ('-': standard input, for one field): key=PATH or key:TYPE=PATH. bytes takes the file as it is; other types read its UTF-8 text without one trailing newline.",
            valueName: "key[:TYPE]=PATH"))
        var secretFiles: [String] = []
        @Option(help: ArgumentHelp("The parent record's name (in the same zone).", valueName: "name")) var parent: String?
        @Option(name: .customLong("if-match"), help: ArgumentHelp("Save only if the record is at this change tag.", valueName: "tag"))
        var ifMatch: String?
        @Flag(help: "Keep the fields not given (otherwise they are removed).") var merge = false
        @Flag(help: "Refuse (exit 65) a save that would add a record type or a field to the zone's schema.") var strict = false
        @OptionGroup var quiet: QuietOption
        @OptionGroup var global: GlobalOptions

        func run() async throws {
            // Syntax, and the values of the fields that write a type, before the passphrase.
            let plainGiven = try plain.map { try FieldAssignment.parsePending($0, encrypted: false) }
            let secretGiven = try secret.map { try FieldAssignment.parsePending($0, encrypted: true) } // errors never quote these
            let files = try secretFiles.map(FieldAssignment.secretFile)
            try Self.checkEachFieldOnce(plainGiven.map { ($0.key, "--set") } + secretGiven.map { ($0.key, "--secret") }
                                        + files.map { ($0.key, "--secret-file") })
            guard files.filter({ $0.path == "-" }).count <= 1 else {
                throw CLIError.usage("standard input ('-') can be read for one --secret-file only")
            }
            var fileBytes = try files.map(FieldAssignment.read)
            let context = try await SessionContext(global, createStore: false, queuesOffline: true)
            let zoneID = try await context.zone(zone)
            let db = context.db(zoneID)
            // A field without a written type takes the type the zone's schema gives it.
            let zoneSchema = try await db.schema(in: zoneID)
            let fields = zoneSchema[type] ?? [:]
            let plainTyped = try plainGiven.map { try $0.typed(by: fields[$0.key], recordType: type) }
            var secretTyped = try secretGiven.map { try $0.typed(by: fields[$0.key], recordType: type) }
            for i in files.indices {
                secretTyped.append(try FieldAssignment.value(files[i], bytes: &fileBytes[i], schemaType: fields[files[i].key]?.type, recordType: type))
            }
            let plainFields = plainTyped.map { ($0.key, $0.value) }
            let secretFields = secretTyped.map { ($0.key, $0.value) }
            var record: Record
            var policy = SavePolicy.allKeys
            if merge && ifMatch == nil {
                // The store merges the given fields over the stored record (or makes it) in its
                // write transaction: concurrent merges each keep their fields, and none conflicts.
                record = Record(type: type, name: name, zone: zoneID)
                policy = .changedKeys
            } else if merge, let ifMatch {
                // Only if the record is still at the tag given: merged here, saved only if unchanged.
                record = try await db.record(named: name, in: zoneID)
                guard record.changeTag == ifMatch else {
                    throw CLIError(ExitStatus.conflict, "record '\(name)' is at change tag \(record.changeTag ?? "?"), not \(ifMatch); get it again and retry")
                }
                policy = .ifServerRecordUnchanged
                guard record.recordType == type else {
                    throw CLIError(ExitStatus.dataError, "record '\(name)' is of type \(record.recordType), not \(type)")
                }
            } else {
                record = Record(type: type, name: name, zone: zoneID)
                if let ifMatch {
                    record = try Self.withTag(record, ifMatch, db: db)
                    policy = .ifServerRecordUnchanged
                }
            }
            if let parent { record.parent = parent }
            // An empty list carries no element type: the save fixes the field's type from the
            // syntax, in its own transaction (a refused save fixes nothing).
            let emptyLists = plainTyped.filter { if case .list(let items) = $0.value { return items.isEmpty }; return false }.map { ($0, false) }
                + secretTyped.filter { if case .list(let items) = $0.value { return items.isEmpty }; return false }.map { ($0, true) }
            let declarations = emptyLists.map { FieldDeclaration($0.key, of: type, type: $0.type, encrypted: $1) }
            for (key, value) in plainFields {
                record.encryptedValues[key] = nil
                record.values[key] = value
            }
            for (key, value) in secretFields {
                record.values[key] = nil
                record.encryptedValues[key] = value
            }
            // What the save would add to the schema: named, or refused with --strict.
            let delta = SchemaDelta(records: [record], schema: zoneSchema)
            if strict, !delta.isEmpty {
                throw CLIError(ExitStatus.dataError, "--strict: " + SchemaNotes.describe(delta, zone: zoneID.name).joined(separator: "; ") + "; nothing was saved")
            }
            let saved = try await db.save(record, policy: policy, declaring: declarations)
            let schema = try await db.schema(of: saved.recordType, in: zoneID)
            for line in SchemaNotes.describe(delta, zone: zoneID.name) { Output.note("note: " + line) }
            quiet.apply()
            context.notePending(1)
            // A write prints no secret: encrypted fields by name only.
            if global.json {
                try RecordOutput.printJSON(saved, context: context, schema: schema, secrets: false,
                                           news: (!delta.newTypes.isEmpty, delta.newFields.map(\.name)))
            } else {
                RecordOutput.printText(saved, context: context, schema: schema, secrets: false)
            }
        }

        /// Each field once, across --set, --secret and --secret-file (`given`: key and flag, in order).
        static func checkEachFieldOnce(_ given: [(key: String, option: String)]) throws {
            var first = [String: String]()
            for (key, option) in given {
                if let earlier = first[key] {
                    throw CLIError(ExitStatus.dataError, earlier == option
                        ? "field '\(key)' is given twice with \(option); give each field once"
                        : "field '\(key)' is given both with \(earlier) and \(option); "
                            + ([earlier, option].contains("--set") ? "a field is either plain or encrypted" : "give each field once"))
                }
                first[key] = option
            }
        }

        /// A fresh record value that carries the caller's change tag, so the store checks it.
        static func withTag(_ record: Record, _ tag: String, db: RecordDatabase) throws -> Record {
            var copy = record
            try copy.setChangeTag(tag)
            return copy
        }
    }
}

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
                """)

        @Argument(help: "The zone.") var zone: String
        @Argument(help: "The record name.") var name: String
        @Option(help: "The record type.") var type: String
        @Option(name: .customLong("set"), help: ArgumentHelp("A plain field: key=value or key:TYPE=value.", valueName: "field"))
        var plain: [String] = []
        @Option(name: .customLong("secret"), help: ArgumentHelp("An encrypted field: key=value or key:TYPE=value.", valueName: "field"))
        var secret: [String] = []
        @Option(help: ArgumentHelp("The parent record's name (in the same zone).", valueName: "name")) var parent: String?
        @Option(name: .customLong("if-match"), help: ArgumentHelp("Save only if the record is at this change tag.", valueName: "tag"))
        var ifMatch: String?
        @Flag(help: "Keep the fields not given (otherwise they are removed).") var merge = false
        @OptionGroup var global: GlobalOptions

        func run() async throws {
            let plainTyped = try plain.map { try FieldAssignment.parseTyped($0, encrypted: false) }
            let secretTyped = try secret.map { try FieldAssignment.parseTyped($0, encrypted: true) } // errors never quote these
            for (assignments, option) in [(plainTyped, "--set"), (secretTyped, "--secret")] {
                var given = Set<String>()
                if let twice = assignments.map(\.key).first(where: { !given.insert($0).inserted }) {
                    throw CLIError(ExitStatus.dataError, "field '\(twice)' is given twice with \(option); give each field once")
                }
            }
            if let both = Set(plainTyped.map(\.key)).intersection(secretTyped.map(\.key)).sorted().first {
                throw CLIError(ExitStatus.dataError, "field '\(both)' is given both with --set and --secret; a field is either plain or encrypted")
            }
            let plainFields = plainTyped.map { ($0.key, $0.value) }
            let secretFields = secretTyped.map { ($0.key, $0.value) }
            let context = try SessionContext(global, createStore: false)
            let zoneID = try context.zone(zone)
            let db = context.db
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
            let saved = try await db.save(record, policy: policy, declaring: declarations)
            let schema = try await db.schema(of: saved.recordType, in: zoneID)
            // A write prints no secret: encrypted fields by name only.
            if global.json {
                try RecordOutput.printJSON(RecordOutput.savedJSONObject(saved, context: context, schema: schema))
            } else {
                RecordOutput.printText(saved, context: context, schema: schema, secrets: false)
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

import ArgumentParser
import CofferStore
import Foundation

extension Coffer.RecordCommand {
    struct Get: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Show a record: plain and decrypted fields, change tag, creator, modifier, dates.",
            discussion: """
                --field NAME prints that one field's value alone (plain or encrypted), for scripts: text as it \
                is, bytes as base64, a list one item a line, then a newline. With --raw, nothing is added or \
                escaped: text comes out as its UTF-8 bytes and bytes as themselves, with no newline, for pipes \
                (coffer record get Files logo --field png --raw > logo.png). With --json, --field prints \
                {"field", "type", "encrypted", "value"}.
                """)

        @Argument(help: "The zone.") var zone: String
        @Argument(help: "The record name.") var name: String
        @Option(help: ArgumentHelp("Print only this field's value.", valueName: "name")) var field: String?
        @Flag(help: "With --field: the value's bytes exactly, with no newline (bytes raw, text as UTF-8).") var raw = false
        @OptionGroup var global: GlobalOptions

        func validate() throws {
            if raw && field == nil { throw CLIError.usage("--raw goes with --field NAME") }
            if raw && global.json { throw CLIError.usage("give --raw or --json, not both") }
        }

        func run() async throws {
            let context = try await SessionContext(global, createStore: false, readsLocally: true)
            // A change the server refused stays readable: the user's version, flagged (also when
            // the zone itself is gone from the replica: deleted upstream, or the user removed).
            let named = try await context.zoneID(naming: zone)
            let refused = try await context.refusedChanges(in: named).last { $0.name == name }
            let record: Record, zoneID: ZoneID
            if let refused, let local = refused.local {
                (record, zoneID) = (local, named)
                Output.note("refused: this is your change of \(name), which the server refused (\(Output.oneLine(refused.note))); it is kept in your replica only")
            } else {
                zoneID = try await context.zone(zone)
                record = try await context.db(zoneID).record(named: name, in: zoneID)
            }
            let schema = refused?.local == nil ? try await context.db(zoneID).schema(of: record.recordType, in: zoneID)
                : (try? await context.db(zoneID).schema(of: record.recordType, in: zoneID)) ?? [:]
            if let field {
                try printField(field, of: record, schema: schema)
            } else if global.json {
                try RecordOutput.printJSON(record, context: context, schema: schema, refused: refused?.local == nil ? nil : refused?.note)
            } else {
                RecordOutput.printText(record, context: context, schema: schema)
            }
        }

        private func printField(_ field: String, of record: Record, schema: [String: FieldSchema]) throws {
            let encrypted = record.encryptedValues[field] != nil
            guard let value = record.values[field] ?? record.encryptedValues[field] else {
                let names = (Array(record.values.keys) + Array(record.encryptedValues.keys)).sorted()
                var message = "record '\(record.name)' has no field '\(field)'"
                if let close = CommandSuggestion.closest(to: field, among: names) { message += "; did you mean '\(close)'?" }
                throw CLIError(ExitStatus.notFound, message + (names.isEmpty ? " (it has no fields)" : " (fields: \(names.joined(separator: ", ")))"))
            }
            let type = schema[field]?.type ?? value.fieldType
            if global.json {
                var w = JSONWriter(pretty: true)
                w.beginObject()
                w.key("field"); w.string(field)
                w.key("type"); w.string(type.description)
                w.key("encrypted"); w.bool(encrypted)
                w.key("value"); try RecordJSON.value(value, into: &w)
                w.endObject()
                RecordOutput.print(w)
                return
            }
            if raw {
                switch value {
                case .bytes(let bytes): bytes.withUnsafeBytes(RecordOutput.write)
                default: Array(Self.text(value).utf8).withUnsafeBytes(RecordOutput.write)
                }
                return
            }
            Output.line(Self.text(value))
        }

        /// A value as a script wants it: text as is, bytes as base64, a date in ISO 8601, a list one item a line.
        static func text(_ value: RecordValue) -> String {
            switch value {
            case .string(let s), .reference(let s): return s
            case .date(let d): return ISODate.format(d)
            case .bytes(let b): return Data(b).base64EncodedString()
            case .list(let items): return items.map(text).joined(separator: "\n")
            default: return value.description
            }
        }
    }
}

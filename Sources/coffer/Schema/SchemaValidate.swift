import ArgumentParser
import CofferStore
import Foundation

extension Coffer.SchemaCommand {
    struct Validate: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Check a schema file; with --zone, also against a zone's schema.",
            discussion: """
                Alone, it needs no vault or store: the file must follow the grammar of Sources/CofferStore/CofferStore.docc/Schema.md (an error is \
                FILE:LINE:COLUMN: what is wrong, exit 65). With --zone, each field the file declares that the zone \
                has with another type or encryption is a conflict (exit 65, naming the first and counting the \
                others), as 'coffer schema import' would refuse it. --json: file, valid, types, fields, and with \
                --zone, zone and newFields (the fields an import would add: type, field).
                """)

        @Argument(help: ArgumentHelp("The schema file ('-' for standard input).", valueName: "file")) var file: String
        @Option(help: "Also check the file against this zone's schema.") var zone: String?
        @OptionGroup var global: GlobalOptions

        func run() async throws {
            let parsed = try SchemaFileInput.read(file)
            let fields = parsed.types.reduce(0) { $0 + $1.fields.count }
            var newFields: [(recordType: String, field: SchemaFile.Field)]?
            var zoneName: String?
            if let zone {
                let context = try await SessionContext(global, createStore: false)
                let zoneID = try await context.zone(zone)
                let schema = try await context.db(zoneID).schema(in: zoneID)
                let conflicts = parsed.conflicts(with: schema)
                guard conflicts.isEmpty else { throw SchemaFileInput.refuse(conflicts, path: file).withoutChangeNote }
                newFields = parsed.newFields(comparedWith: schema)
                zoneName = SchemaFileInput.zoneName(zoneID, context: context)
            }
            if global.json {
                struct NewField: Encodable { let type: String, field: String }
                struct ValidJSON: Encodable {
                    let file: String, valid: Bool, types: Int, fields: Int
                    let zone: String?, newFields: [NewField]?
                }
                try Output.json(ValidJSON(file: file, valid: true, types: parsed.types.count, fields: fields, zone: zoneName,
                                          newFields: newFields?.map { NewField(type: $0.recordType, field: $0.field.name) }))
                return
            }
            let counts = "\(parsed.types.count == 1 ? "1 record type" : "\(parsed.types.count) record types"), \(fields == 1 ? "1 field" : "\(fields) fields")"
            if let newFields, let zone {
                Output.line("\(file): valid (\(counts)); agrees with zone \(zone), where an import would add \(newFields.count == 1 ? "1 field" : "\(newFields.count) fields").")
            } else {
                Output.line("\(file): valid (\(counts)).")
            }
        }
    }
}

extension CLIError {
    /// The error without the closing "; nothing was changed" (for a check that changes nothing anyway).
    var withoutChangeNote: CLIError {
        CLIError(status, message.hasSuffix("; nothing was changed") ? String(message.dropLast("; nothing was changed".count)) : message)
    }
}

import ArgumentParser
import CofferStore
import Foundation

extension Coffer.SchemaCommand {
    struct Show: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Show a zone's record types and their fields.",
            discussion: """
                Each field with its type, whether it is encrypted, and whether it can be queried (a plain field of \
                type string, int, double, bool, date or ref; record query --where and --sort take those). --json: \
                zone, types (each name and fields: name, type, encrypted, queryable).
                """)

        @Argument(help: "The zone.") var zone: String
        @Option(help: "Only this record type.") var type: String?
        @OptionGroup var global: GlobalOptions

        func run() async throws {
            let context = try await SessionContext(global, createStore: false, readsLocally: true)
            let zoneID = try await context.zone(zone)
            var schema = try await context.db(zoneID).schema(in: zoneID)
            if let type {
                guard let fields = schema[type] else {
                    throw CLIError(ExitStatus.notFound, "zone '\(zoneID.name)' has no record type \(Output.oneLine(type)) in its schema")
                }
                schema = [type: fields]
            }
            let file = SchemaFile(schema: schema)
            if global.json {
                struct FieldJSON: Encodable { let name: String, type: String, encrypted: Bool, queryable: Bool }
                struct TypeJSON: Encodable { let name: String, fields: [FieldJSON] }
                struct ShowJSON: Encodable { let zone: String, types: [TypeJSON] }
                try Output.json(ShowJSON(zone: SchemaFileInput.zoneName(zoneID, context: context), types: file.types.map { type in
                    TypeJSON(name: type.name, fields: type.fields.map {
                        FieldJSON(name: $0.name, type: $0.type.description, encrypted: $0.encrypted, queryable: $0.queryable)
                    })
                }))
                return
            }
            if file.types.isEmpty {
                Output.line("Zone \(zoneID.name) has no record types yet: the first save of a field fixes it, or 'coffer schema import'.")
                return
            }
            for (i, type) in file.types.enumerated() {
                if i > 0 { Output.line() }
                Output.line("\(type.name) (\(type.fields.count == 1 ? "1 field" : "\(type.fields.count) fields"))")
                Table.print([["  FIELD", "TYPE", "ENCRYPTED", "QUERYABLE"]] + type.fields.map {
                    ["  " + $0.name, $0.type.description, $0.encrypted ? "yes" : "no", $0.queryable ? "yes" : "no"]
                })
            }
        }
    }
}

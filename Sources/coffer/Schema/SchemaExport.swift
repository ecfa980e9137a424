import ArgumentParser
import CofferStore
import Foundation

extension Coffer.SchemaCommand {
    struct Export: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Write a zone's schema as a schema file.",
            discussion: """
                The file has one RECORD TYPE statement a type, types and fields sorted by name, in the grammar \
                of Sources/CofferStore/CofferStore.docc/Schema.md (e.g. RECORD TYPE Note ( body STRING ENCRYPTED, due TIMESTAMP, tags LIST<STRING>, \
                title STRING QUERYABLE );). Every plain field that can be queried is marked QUERYABLE. \
                'coffer schema import' reads it back. --json: zone, types, fields, and file (with --output) or text.
                """)

        @Argument(help: "The zone.") var zone: String
        @Option(help: ArgumentHelp("Write to this file (which must not exist) instead of standard output.", valueName: "file"))
        var output: String?
        @OptionGroup var global: GlobalOptions

        func run() async throws {
            let context = try await SessionContext(global, createStore: false, readsLocally: true)
            let zoneID = try await context.zone(zone)
            let file = SchemaFile(schema: try await context.db(zoneID).schema(in: zoneID))
            let fields = file.types.reduce(0) { $0 + $1.fields.count }
            let name = SchemaFileInput.zoneName(zoneID, context: context)
            if global.json {
                if let output {
                    try Output.file(Data(file.text.utf8), to: output)
                    try Output.json(["zone": .string(name), "file": .string(output), "types": .int(file.types.count), "fields": .int(fields)] as [String: JSONScalar])
                } else {
                    try Output.json(["zone": .string(name), "text": .string(file.text), "types": .int(file.types.count), "fields": .int(fields)] as [String: JSONScalar])
                }
                return
            }
            if try Output.file(Data(file.text.utf8), to: output) {
                Output.line("Wrote the schema of \(zoneID.name) (\(file.types.count) record types, \(fields) fields) to \(output!).")
            }
        }
    }
}

/// A string or a number in a JSON object of mixed values.
enum JSONScalar: Encodable {
    case string(String)
    case int(Int)

    func encode(to encoder: any Encoder) throws {
        var c = encoder.singleValueContainer()
        switch self {
        case .string(let s): try c.encode(s)
        case .int(let n): try c.encode(n)
        }
    }
}

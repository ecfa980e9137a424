import ArgumentParser
import CofferStore
import Foundation

extension Coffer.RecordCommand {
    struct List: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "List a zone's records of every type, by name: name, type, change tag, modified; no secret.",
            discussion: """
                Prints no encrypted value: --json gives each record in the 'record put' shape (encryptedFields, the \
                names of its encrypted fields). 'record get' or 'record export' show the secrets.
                """)

        @Argument(help: "The zone.") var zone: String
        @Option(help: ArgumentHelp("Only records of this type.", valueName: "type")) var type: String?
        @Option(help: "At most this many records.") var limit: Int?
        @OptionGroup var global: GlobalOptions

        func validate() throws {
            if let limit, limit < 1 { throw CLIError.usage("--limit is at least 1") }
        }

        func run() async throws {
            let context = try await SessionContext(global, createStore: false, readsLocally: true)
            let zoneID = try await context.zone(zone)
            let db = context.db(zoneID)
            var records = [Record]()
            var after: String?
            while limit.map({ records.count < $0 }) ?? true {
                let page = try await db.records(in: zoneID, after: after, limit: 400)
                guard let last = page.last else { break }
                after = last.name
                records += page.filter { type == nil || $0.recordType == type }
            }
            if let limit, records.count > limit { records.removeLast(records.count - limit) }
            if global.json {
                var schemas = [String: [String: FieldSchema]]()
                var w = JSONWriter(pretty: true)
                w.beginObject()
                w.key("records")
                w.beginArray()
                for record in records {
                    if schemas[record.recordType] == nil { schemas[record.recordType] = try await db.schema(of: record.recordType, in: zoneID) }
                    try RecordOutput.write(record, context: context, schema: schemas[record.recordType], secrets: false, into: &w)
                }
                w.endArray()
                w.endObject()
                RecordOutput.print(w)
                return
            }
            if records.isEmpty {
                Output.line("No records in \(zoneID.name)\(type.map { " of type \($0)" } ?? "").")
                return
            }
            Table.print([["NAME", "TYPE", "CHANGE TAG", "MODIFIED"]] + records.map {
                [Output.oneLine($0.name), $0.recordType, $0.changeTag ?? "-", $0.modified.map(Output.iso) ?? "-"]
            })
        }
    }
}

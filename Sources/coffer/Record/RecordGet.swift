import ArgumentParser
import CofferStore

extension Coffer.RecordCommand {
    struct Get: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Show a record: plain and decrypted fields, change tag, creator, modifier, dates.")

        @Argument(help: "The zone.") var zone: String
        @Argument(help: "The record name.") var name: String
        @OptionGroup var global: GlobalOptions

        func run() async throws {
            let context = try await SessionContext(global, createStore: false)
            let zoneID = try await context.zone(zone)
            let record = try await context.db(zoneID).record(named: name, in: zoneID)
            let schema = try await context.db(zoneID).schema(of: record.recordType, in: zoneID)
            if global.json {
                try RecordOutput.printJSON(record, context: context, schema: schema)
            } else {
                RecordOutput.printText(record, context: context, schema: schema)
            }
        }
    }
}

import ArgumentParser
import CofferStore
import Foundation

extension Coffer.RecordCommand {
    struct Export: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Print every record of a zone as JSON lines of the 'record get' shape, decrypted (for backup or migration).",
            discussion: "The output holds the decrypted secrets: keep it as safe as the vault.")

        @Argument(help: "The zone.") var zone: String
        @OptionGroup var global: GlobalOptions

        func run() async throws {
            let context = try SessionContext(global, createStore: false)
            let zoneID = try context.zone(zone)
            var after: String?
            var count = 0
            var schemas = [String: [String: FieldSchema]]()
            while true {
                let page = try await context.db(zoneID).records(in: zoneID, after: after, limit: 400)
                guard let last = page.last else { break }
                var out = Data()
                for record in page {
                    if schemas[record.recordType] == nil {
                        schemas[record.recordType] = try await context.db(zoneID).schema(of: record.recordType, in: zoneID)
                    }
                    out += try RecordOutput.data(RecordOutput.jsonObject(record, context: context, schema: schemas[record.recordType]), pretty: false)
                    out.append(0x0a)
                }
                FileHandle.standardOutput.write(out)
                count += page.count
                after = last.name
            }
            if isatty(STDERR_FILENO) != 0 { Output.note("Exported \(count) records from \(zoneID.name).") }
        }
    }
}

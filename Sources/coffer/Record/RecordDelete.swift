import ArgumentParser
import CofferStore

extension Coffer.RecordCommand {
    struct Delete: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Delete a record.")

        @Argument(help: "The zone.") var zone: String
        @Argument(help: "The record name.") var name: String
        @Option(name: .customLong("if-match"), help: ArgumentHelp("Delete only if the record is at this change tag.", valueName: "tag"))
        var ifMatch: String?
        @OptionGroup var quiet: QuietOption
        @OptionGroup var global: GlobalOptions

        func run() async throws {
            let context = try await SessionContext(global, createStore: false, queuesOffline: true)
            let zoneID = try await context.zone(zone)
            try await context.db(zoneID).delete(recordNamed: name, in: zoneID, ifMatch: ifMatch)
            quiet.apply()
            context.notePending(1)
            if global.json {
                struct Deleted: Encodable { let deleted: String, zone: String, pending: Bool? }
                try Output.json(Deleted(deleted: name, zone: zoneID.name, pending: context.writesPending ? true : nil))
            } else {
                Output.line("Deleted record \(name) from \(zoneID.name).")
            }
        }
    }
}

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
            let context = try await SessionContext(global, createStore: false)
            let zoneID = try await context.zone(zone)
            let count = try await context.db(zoneID).exportRecords(in: zoneID) { FileHandle.standardOutput.write($0) }
            if isatty(STDERR_FILENO) != 0 { Output.note("Exported \(count) records from \(zoneID.name).") }
        }
    }
}

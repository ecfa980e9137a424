import ArgumentParser
import CofferStore
import Foundation

extension Coffer.SchemaCommand {
    struct DropType: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "drop-type",
            abstract: "Remove a record type that no record has from the schema of a zone you own.",
            discussion: """
                All its fields go; afterwards the type and its field names can be fixed again. Refused while the \
                zone has a record of the type: exit 65, with how many (delete them first). Only the zone's owner \
                drops (77 otherwise); the drop is signed, as an empty commit of the owner in the zone's log. \
                --json: zone, type.
                """)

        @Argument(help: "The zone (one you own).") var zone: String
        @Option(help: "The record type to remove.") var type: String
        @OptionGroup var global: GlobalOptions

        func run() async throws {
            let context = try await SessionContext(global, createStore: false)
            let zoneID = try await context.zone(zone)
            try await context.db(zoneID).dropRecordType(type, in: zoneID)
            if global.json {
                try Output.json(["zone": SchemaFileInput.zoneName(zoneID, context: context), "type": type])
            } else {
                Output.line("Dropped record type \(type) from the schema of \(zoneID.name).")
            }
        }
    }
}

import ArgumentParser
import CofferStore
import Foundation

extension Coffer.SchemaCommand {
    struct DropField: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "drop-field",
            abstract: "Remove a field no record uses from a record type of a zone you own.",
            discussion: """
                Afterwards the name can be fixed again, with any type and plain or encrypted (a mistyped field is \
                fixed for good otherwise). Refused while any record of the type has the field: exit 65, with how \
                many do (remove the field from them, or delete them, first). Only the zone's owner drops (77 \
                otherwise); the drop is signed, as an empty commit of the owner in the zone's log. --json: zone, \
                type, field.
                """)

        @Argument(help: "The zone (one you own).") var zone: String
        @Option(help: "The record type.") var type: String
        @Option(help: "The field to remove.") var field: String
        @OptionGroup var global: GlobalOptions

        func run() async throws {
            let context = try await SessionContext(global, createStore: false)
            let zoneID = try await context.zone(zone)
            try await context.db(zoneID).dropField(field, of: type, in: zoneID)
            if global.json {
                try Output.json(["zone": SchemaFileInput.zoneName(zoneID, context: context), "type": type, "field": field])
            } else {
                Output.line("Dropped field \(field) of \(type) from the schema of \(zoneID.name).")
            }
        }
    }
}

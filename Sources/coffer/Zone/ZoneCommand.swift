import ArgumentParser
import CofferStore
import Foundation

extension Coffer {
    struct ZoneCommand: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "zone",
            abstract: "Zones: the units of atomic commits, keys and sharing.",
            subcommands: [Create.self, List.self, Delete.self]
        )
    }
}

extension Coffer.ZoneCommand {
    struct Create: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Create a zone with a fresh zone key.")

        @Argument(help: "The zone name (ASCII, at most 255 characters, no leading '_', no '@').") var name: String
        @OptionGroup var global: GlobalOptions

        func run() async throws {
            let context = try SessionContext(global)
            let zone = try await context.db.createZone(named: name)
            if global.json {
                try Output.json(["zone": zone.name, "owner": zone.ownerID, "database": "private"])
            } else {
                Output.line("Created zone \(zone.name).")
            }
        }
    }

    struct List: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "List the zones you own (private) and those shared with you (shared).")

        @OptionGroup var global: GlobalOptions

        func run() async throws {
            let context = try SessionContext(global)
            let zones = try await context.db.zones()
            if global.json {
                struct Entry: Encodable {
                    let name: String, owner: String, database: String, records: Int, keyEpoch: Int64, created: Date
                }
                try Output.json(["zones": zones.map {
                    Entry(name: $0.id.name, owner: $0.id.ownerID, database: "private", records: $0.recordCount,
                          keyEpoch: $0.keyEpoch, created: $0.created)
                }])
                return
            }
            if zones.isEmpty {
                Output.line("No zones. Create one with 'coffer zone create NAME'.")
                return
            }
            Table.print([["ZONE", "DATABASE", "OWNER", "RECORDS", "CREATED"]] + zones.map {
                [$0.id.name, "private", context.displayName($0.id.ownerID), String($0.recordCount), Output.iso($0.created)]
            })
        }
    }

    struct Delete: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Delete a zone you own, with its records and keys.")

        @Argument(help: "The zone.") var zone: String
        @OptionGroup var global: GlobalOptions

        func run() async throws {
            let context = try SessionContext(global)
            let id = try context.zone(zone)
            try await context.db.deleteZone(id)
            if global.json {
                try Output.json(["deleted": id.name])
            } else {
                Output.line("Deleted zone \(id.name) with its records and keys.")
            }
        }
    }
}

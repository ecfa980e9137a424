import ArgumentParser
import CofferStore
import Foundation

extension Coffer.SchemaCommand {
    struct Import: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Add the record types and fields a schema file declares to a zone you own.",
            discussion: """
                The file follows the grammar of Sources/CofferStore/CofferStore.docc/Schema.md. Each declared field the zone does not have is \
                fixed, all in one transaction; one the zone has with another type or encryption is a conflict: \
                exit 65 naming it (FILE:LINE:COLUMN), and nothing changes. Fields the zone has alike are left as \
                they are, so importing a file again changes nothing. A QUERYABLE field gets its query index now \
                (on a local store; a server makes it at the field's first query). Fields of the zone the file \
                does not name stay. Only the zone's owner imports (77 otherwise). --json: zone, added (type, \
                field), unchanged (a count).
                """)

        @Argument(help: "The zone (one you own).") var zone: String
        @Argument(help: ArgumentHelp("The schema file ('-' for standard input).", valueName: "file")) var file: String
        @OptionGroup var global: GlobalOptions

        func run() async throws {
            let parsed = try SchemaFileInput.read(file)
            let context = try await SessionContext(global, createStore: false)
            let zoneID = try await context.zone(zone)
            let db = context.db(zoneID)
            guard zoneID.ownerID == context.session.userID else {
                throw CLIError(ExitStatus.denied, "only the owner of zone '\(zoneID.name)' can change its schema")
            }
            // Conflicts named by their place in the file first; the store checks again as it adds.
            let conflicts = parsed.conflicts(with: try await db.schema(in: zoneID))
            guard conflicts.isEmpty else { throw SchemaFileInput.refuse(conflicts, path: file) }
            let added = try await db.addFields(parsed.declarations, in: zoneID)
            for type in parsed.types {
                let indexed = type.fields.filter(\.queryable).map(\.name)
                if !indexed.isEmpty { try await db.ensureIndex(recordType: type.name, fields: indexed) }
            }
            let unchanged = parsed.declarations.count - added.count
            if global.json {
                struct Added: Encodable { let type: String, field: String }
                struct ImportJSON: Encodable { let zone: String, added: [Added], unchanged: Int }
                try Output.json(ImportJSON(zone: SchemaFileInput.zoneName(zoneID, context: context),
                                           added: added.map { Added(type: $0.recordType, field: $0.field) }, unchanged: unchanged))
                return
            }
            if added.isEmpty {
                Output.line("The schema of \(zoneID.name) already has every field of \(file); nothing changed.")
            } else {
                Output.line("Added \(added.count == 1 ? "1 field" : "\(added.count) fields") to the schema of \(zoneID.name): "
                            + added.map { "\($0.recordType).\($0.field)" }.joined(separator: ", ")
                            + (unchanged > 0 ? " (\(unchanged) already there)" : "") + ".")
            }
        }
    }
}

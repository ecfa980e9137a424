import ArgumentParser
import CofferStore
import Foundation

extension Coffer {
    struct SchemaCommand: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "schema",
            abstract: "A zone's record types and fields: show, export, import, validate, drop.",
            discussion: """
                A zone's schema fixes, per record type, each field's type and whether it is encrypted: the first \
                save of a field fixes it, or an import of a schema file (see 'coffer help schema export' and \
                Sources/CofferStore/CofferStore.docc/Schema.md for the file's grammar). Only the zone's owner changes it with import or drop; a \
                drop removes what no record uses, after which the name can be fixed again with another type.
                """,
            subcommands: [Show.self, Export.self, Import.self, Validate.self, DropField.self, DropType.self]
        )
    }
}

/// Reading and parsing schema files for the `schema` commands.
enum SchemaFileInput {
    /// A schema file is text: 1 MiB is far more than any schema.
    static let maxBytes = 1 << 20

    /// The parsed file at `path` (`-`: standard input). Not UTF-8, or anything the grammar does
    /// not allow: 65, `PATH:LINE:COLUMN: message`.
    static func read(_ path: String) throws -> SchemaFile {
        let bytes = try InputFile.read(path, flag: "schema file", limit: maxBytes)
        let name = path == "-" ? "<stdin>" : path
        guard let text = String(validating: bytes, as: UTF8.self) else {
            throw CLIError(ExitStatus.dataError, "\(name): the schema file is not UTF-8 text")
        }
        do { return try SchemaFile(parsing: text) } catch {
            throw CLIError(ExitStatus.dataError, "\(name):\(error.line):\(error.column): \(error.message)")
        }
    }

    /// A zone as `--json` output names it: its name for a zone of the acting user, else `NAME@OWNER_ID`.
    static func zoneName(_ zone: ZoneID, context: SessionContext) -> String {
        zone.ownerID == context.session.userID ? zone.name : "\(zone.name)@\(zone.ownerID)"
    }

    /// The conflicts of `file` with a zone's schema as one error (65): the first, by its place in
    /// the file, and how many more.
    static func refuse(_ conflicts: [SchemaFile.Conflict], path: String) -> CLIError {
        let name = path == "-" ? "<stdin>" : path
        let more = conflicts.count > 1 ? " (and \(conflicts.count - 1) more \(conflicts.count == 2 ? "conflict" : "conflicts"))" : ""
        return CLIError(ExitStatus.dataError, "\(name):\(conflicts[0])\(more); nothing was changed")
    }
}

import ArgumentParser
import CofferStore
import CofferVault
import Foundation

extension Coffer.RecordCommand {
    struct Import: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Save records from JSON lines of the 'record get' shape, in atomic batches of up to 400.",
            discussion: """
                Each line needs name, type, values and encryptedValues; parent and types are optional, and the \
                other keys of 'record get' are ignored. JSON numbers, strings, booleans and lists map to int or \
                double, string, bool and list, unless 'types' or the zone's schema says otherwise (a date as an \
                ISO 8601 string, bytes as base64, a ref as a name). The whole file is checked before anything is \
                saved; records that exist are replaced.
                """)

        @Argument(help: "The zone.") var zone: String
        @Argument(help: ArgumentHelp("The JSON lines file ('-' for stdin).", valueName: "file")) var file: String
        @OptionGroup var global: GlobalOptions

        func run() async throws {
            let data: Data
            if file == "-" {
                data = FileHandle.standardInput.readDataToEndOfFile()
            } else {
                guard let read = FileManager.default.contents(atPath: file) else {
                    throw CLIError(ExitStatus.notFound, "cannot read \(file)")
                }
                data = read
            }
            let context = try await SessionContext(global, createStore: false)
            let zoneID = try await context.zone(zone)
            let progress = isatty(STDERR_FILENO) != 0
            let summary: RecordImport.Summary
            let delta: SchemaDelta
            do {
                // The whole file is checked before anything is saved.
                let zoneSchema = try await context.db(zoneID).schema(in: zoneID)
                let checked = try await RecordImport(jsonLines: data, into: zoneID, of: context.db(zoneID))
                delta = SchemaDelta(fields: checked.newFields.keys.sorted().map { ($0, Set(checked.newFields[$0]!.keys)) }, schema: zoneSchema)
                summary = try await checked.save(to: context.db(zoneID)) { imported, total in
                    if progress { FileHandle.standardError.write(Data("\rImported \(imported) of \(total) records".utf8)) }
                }
            } catch let e as StoreError {
                if progress { Output.note("") }
                throw CLIError(ErrorReporter.status(for: e.code), e.message)
            }
            if progress { Output.note("") }
            for line in SchemaNotes.describe(delta, zone: zoneID.name) { Output.note("note: " + line) }
            if global.json {
                struct NewField: Encodable { let type: String, field: String }
                struct ImportJSON: Encodable { let imported: Int, batches: Int, newTypes: [String], newFields: [NewField] }
                try Output.json(ImportJSON(imported: summary.records, batches: summary.batches, newTypes: delta.newTypes.map(\.name),
                                           newFields: delta.newFields.map { NewField(type: $0.recordType, field: $0.name) }))
            } else {
                let records = summary.records == 1 ? "1 record" : "\(summary.records) records"
                Output.line("Imported \(records) into \(zoneID.name) in \(summary.batches == 1 ? "1 atomic batch" : "\(summary.batches) atomic batches").")
            }
        }
    }
}

import ArgumentParser
import CofferCrypto
import CofferStore
import CofferVault
import Dispatch
import Foundation
#if canImport(Glibc)
import Glibc
#endif

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

                Ctrl-C (SIGINT) or SIGTERM stops the import after the batch being saved: it prints how many \
                records were saved and exits 130 (SIGINT) or 143 (SIGTERM). The same command with --resume then \
                saves the rest: it leaves out each record the zone holds exactly as the file has it.
                """)

        @Argument(help: "The zone.") var zone: String
        @Argument(help: ArgumentHelp("The JSON lines file ('-' for stdin).", valueName: "file")) var file: String
        @Flag(name: .customLong("create-zone"), help: "Create the zone (and the store) if missing: a zone you own.")
        var createZone = false
        @Flag(name: .customLong("resume"), help: "Leave out the records the zone holds exactly as the file has them (to finish an import that stopped).")
        var resume = false
        @Flag(help: "Refuse (exit 65, nothing saved) a file that would add a record type or a field to the zone's schema.")
        var strict = false
        @OptionGroup var quiet: QuietOption
        @OptionGroup var global: GlobalOptions

        func run() async throws {
            let data = try readFile()
            let context = try await SessionContext(global, createStore: createZone, queuesOffline: true)
            // From here on (past any passphrase prompt), Ctrl-C and SIGTERM stop the import
            // between two batches.
            let stop = StopSignal()
            let zoneID = try await context.zone(zone)
            var created = false
            if createZone {
                guard zoneID.ownerID == context.session.userID else {
                    throw CLIError.usage("--create-zone creates a zone you own; '\(zone)' is another user's")
                }
                if try await !context.db.zones().contains(where: { $0.id == zoneID }) {
                    _ = try await context.db.createZone(named: zoneID.name)
                    created = true
                }
            }
            let progress = isatty(STDERR_FILENO) != 0 && !global.json
            let summary: RecordImport.Summary
            var skipped = 0
            let delta: SchemaDelta
            do {
                // The whole file is checked before anything is saved.
                var checked: RecordImport
                let zoneSchema: [String: [String: FieldSchema]]
                do {
                    zoneSchema = try await context.db(zoneID).schema(in: zoneID)
                    checked = try await RecordImport(jsonLines: data, into: zoneID, of: context.db(zoneID))
                } catch {
                    // A zone made for a file that does not import goes again.
                    if created { try? await context.db.deleteZone(zoneID) }
                    throw error
                }
                delta = SchemaDelta(fields: checked.newFields.keys.sorted().map { ($0, Set(checked.newFields[$0]!.keys)) }, schema: zoneSchema)
                if strict, !delta.isEmpty {
                    if created { try? await context.db.deleteZone(zoneID) }
                    throw CLIError(ExitStatus.dataError, "--strict: " + SchemaNotes.describe(delta, zone: zoneID.name).joined(separator: "; ") + "; nothing was saved")
                }
                if resume { skipped = try await checked.skipStored(in: context.db(zoneID)) }
                summary = try await checked.save(to: context.db(zoneID), progress: { imported, total in
                    if progress { Output.err(Data("\rImported \(imported) of \(total) records".utf8)) }
                }, stopping: { stop.received != nil })
            } catch let e as StoreError {
                if progress { Output.note("") }
                if e.code == .zoneNotFound, !createZone, zoneID.ownerID == context.session.userID {
                    throw CLIError(ExitStatus.notFound, "no zone '\(zoneID.name)' of yours in this store; create it with 'coffer zone create \(zoneID.name)', or pass --create-zone")
                }
                throw CLIError(ErrorReporter.status(for: e.code), e.message)
            }
            if progress { Output.note("") }
            try report(summary, skipped: skipped, delta: delta, createdZone: created, zoneID: zoneID, stop: stop, context: context)
        }

        /// The file's bytes, or standard input's for '-'.
        private func readFile() throws -> Data {
            if file == "-" { return FileHandle.standardInput.readDataToEndOfFile() }
            guard let read = FileManager.default.contents(atPath: file) else {
                throw CLIError(ExitStatus.notFound, "cannot read \(file)")
            }
            return read
        }

        /// Prints what the import did (the schema's new fields as notes; a line or `--json`), or,
        /// when a signal stopped it, how far it got, and exits 128 + the signal.
        private func report(_ summary: RecordImport.Summary, skipped: Int, delta: SchemaDelta, createdZone: Bool, zoneID: ZoneID,
                            stop: StopSignal, context: SessionContext) throws {
            quiet.apply()
            context.notePending(summary.records)
            let pending: Bool? = context.writesPending ? true : nil
            for line in SchemaNotes.describe(delta, zone: zoneID.name) { Output.note("note: " + line) }
            let total = summary.total + skipped
            struct NewField: Encodable { let type: String, field: String }
            let newTypes = delta.newTypes.map(\.name)
            let newFields = delta.newFields.map { NewField(type: $0.recordType, field: $0.name) }
            struct ImportJSON: Encodable {
                let imported: Int, skipped: Int, total: Int, batches: Int, stopped: Bool, signal: String?, createdZone: Bool
                let newTypes: [String], newFields: [NewField]
                var pending: Bool? = nil
            }
            if summary.stopped, let signal = stop.received {
                let done = summary.records + skipped
                if global.json {
                    try Output.json(ImportJSON(imported: summary.records, skipped: skipped, total: total, batches: summary.batches, stopped: true,
                                               signal: signal == SIGINT ? "SIGINT" : "SIGTERM", createdZone: createdZone, newTypes: newTypes, newFields: newFields, pending: pending))
                }
                Output.note("Stopped after \(done) of \(total) records (\(summary.batches == 1 ? "1 atomic batch" : "\(summary.batches) atomic batches") saved"
                            + "\(skipped > 0 ? ", \(skipped) there before" : "")); run the same command with --resume to import the rest.")
                throw CLIError(128 + signal, "stopped after \(done) of \(total) records")
            }
            if global.json {
                try Output.json(ImportJSON(imported: summary.records, skipped: skipped, total: total, batches: summary.batches, stopped: false,
                                           signal: nil, createdZone: createdZone, newTypes: newTypes, newFields: newFields, pending: pending))
            } else {
                let records = summary.records == 1 ? "1 record" : "\(summary.records) records"
                let skippedText = resume ? " (\(skipped == 1 ? "1 record" : "\(skipped) records") already there left out)" : ""
                Output.line("\(createdZone ? "Created zone \(zoneID.name). " : "")Imported \(records) into \(zoneID.name) in \(summary.batches == 1 ? "1 atomic batch" : "\(summary.batches) atomic batches")\(skippedText).")
            }
        }
    }
}

/// SIGINT and SIGTERM, caught instead of ending the process: the command asks ``received``
/// between two steps and stops there.
final class StopSignal: Sendable {
    private let signal = Locked<Int32?>(nil)
    private let sources: Locked<[any DispatchSourceSignal]>

    init() {
        sources = Locked([])
        for number in [SIGINT, SIGTERM] {
            Glibc.signal(number, SIG_IGN)
            let source = DispatchSource.makeSignalSource(signal: number, queue: .global())
            source.setEventHandler { [signal] in signal.withLock { $0 = $0 ?? number } }
            source.resume()
            sources.withLock { $0.append(source) }
        }
    }

    /// The first signal received, if any.
    var received: Int32? { signal.withLock { $0 } }
}

import ArgumentParser
import CofferCrypto
import CofferStore
import CofferVault
import Foundation

/// The cost of the zone log on reads: a zone of many entries (one-record commits) is read by a
/// new session of a user who verified it before (signatures checked only past the user's mark),
/// by one who never did (every signature), and again by the same session (only the head is read);
/// and the cost of writing the marks file.
struct LogBench: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "log",
        abstract: "Cost of the zone log: first read of a zone with and without marks, later reads, writing the marks.")

    @Option(help: "Entries in the zone's log (one record each).") var entries = 5000
    @Option(help: "Reads of the head-only case.") var reads = 2000
    @Flag(help: "One JSON object on stdout.") var json = false
    @Option(help: ArgumentHelp("Make the store (store.sqlite) and its vault (bench.coffer, passphrase 'bench passphrase') in this new folder, and keep them, to try commands on a zone of many entries.", valueName: "folder"))
    var keep: String?

    func run() async throws {
        let folder: URL
        if let keep {
            folder = URL(fileURLWithPath: keep)
            try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: false)
        } else {
            folder = try Clock.temporaryFolder("coffer-bench-log")
        }
        defer { if keep == nil { try? FileManager.default.removeItem(at: folder) } }
        let vaultURL = folder.appendingPathComponent("bench.coffer")
        let passphrase = SecureBytes(copying: Array("bench passphrase".utf8))
        _ = try Vault.create(at: vaultURL, name: "Bench", passphrase: passphrase, kdf: .interactive)
        let store = try Store(path: folder.appendingPathComponent("store.sqlite").path)
        let writer = try store.session(vault: try Vault.open(at: vaultURL, passphrase: passphrase))
        let zone = try await writer.privateDatabase.createZone(named: "Log")
        let writeSeconds = try await Clock.measure {
            for i in 0..<(entries - 1) {
                var r = CofferStore.Record(type: "Note", name: "r\(i)", zone: zone)
                r.values["title"] = .string("entry \(i)")
                r.encryptedValues["body"] = .string("body \(i)")
                _ = try await writer.privateDatabase.save(r)
            }
        }
        let saveMarks = Clock.seconds { try? writer.saveMarks() }

        // A user who verified the zone before: a new session (its marks are in the file).
        func firstRead(marks: Bool) async throws -> (wall: Double, cpu: Double) {
            let vault = try Vault.open(at: vaultURL, passphrase: passphrase)
            if !marks { for mark in try vault.marks.all() { try vault.marks.reset(zone: mark.zoneUID, to: nil) } }
            let session = try store.session(vault: vault)
            let result = try await Clock.measure { _ = try await session.privateDatabase.record(named: "r0", in: zone) }
            if !marks { try session.saveMarks() } // puts the marks back for the next run
            return result
        }
        var withMarks = [(wall: Double, cpu: Double)](), withoutMarks = [(wall: Double, cpu: Double)]()
        for _ in 0..<3 {
            withMarks.append(try await firstRead(marks: true))
            withoutMarks.append(try await firstRead(marks: false))
        }
        let session = try store.session(vault: try Vault.open(at: vaultURL, passphrase: passphrase))
        _ = try await session.privateDatabase.record(named: "r0", in: zone)
        let again = try await Clock.measure {
            for _ in 0..<reads { _ = try await session.privateDatabase.record(named: "r1", in: zone) }
        }
        let marked = Clock.median(withMarks.map(\.cpu)), unmarked = Clock.median(withoutMarks.map(\.cpu))
        let result: [String: Any] = [
            "entries": entries,
            "writeMicrosecondsPerEntry": (writeSeconds.cpu / Double(entries - 1) * 1e7).rounded() / 10,
            "firstReadWithMarksMilliseconds": (marked * 1e4).rounded() / 10,
            "firstReadWithMarksMicrosecondsPerEntry": (marked / Double(entries) * 1e7).rounded() / 10,
            "firstReadWithoutMarksMilliseconds": (unmarked * 1e4).rounded() / 10,
            "firstReadWithoutMarksMicrosecondsPerEntry": (unmarked / Double(entries) * 1e7).rounded() / 10,
            "laterReadMicroseconds": (again.cpu / Double(reads) * 1e7).rounded() / 10,
            "saveMarksMilliseconds": (saveMarks * 1e4).rounded() / 10,
        ]
        if json { Clock.emitJSON(result); return }
        print("zone log of \(entries) entries (CPU time, medians of 3)")
        print(String(format: "write, per entry (a one-record commit)        %8.1f µs", writeSeconds.cpu / Double(entries - 1) * 1e6))
        print(String(format: "first read, user verified it before (marks)   %8.1f ms (%.2f µs an entry)", marked * 1e3, marked / Double(entries) * 1e6))
        print(String(format: "first read, user never saw it (no marks)      %8.1f ms (%.2f µs an entry)", unmarked * 1e3, unmarked / Double(entries) * 1e6))
        print(String(format: "a later read in the same session              %8.1f µs (record get)", again.cpu / Double(reads) * 1e6))
        print(String(format: "writing the marks file                        %8.1f ms", saveMarks * 1e3))
    }
}

import ArgumentParser
import CofferStore
import Foundation

/// `coffer-bench`: measures Coffer. Numbers in Docs/Performance.md come from its runs.
@main
struct CofferBench: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "coffer-bench",
        abstract: "Benchmarks for Coffer (build with -c release).",
        subcommands: Self.commands,
        defaultSubcommand: RecordsBench.self
    )
}

extension CofferBench {
    #if COFFER_MICRO
    static let commands: [any ParsableCommand.Type] = [RecordsBench.self, PostgresBench.self, ServerBench.self, SyncBench.self, ContentionBench.self, JSONBench.self, VaultUnlockBench.self, SigningBench.self, LogBench.self, MicroBench.self]
    #else
    static let commands: [any ParsableCommand.Type] = [RecordsBench.self, PostgresBench.self, ServerBench.self, SyncBench.self, ContentionBench.self, JSONBench.self, VaultUnlockBench.self, SigningBench.self, LogBench.self]
    #endif
}

/// Timing helpers shared by the benchmarks.
enum Clock {
    static func seconds(_ body: () throws -> Void) rethrows -> Double {
        let start = DispatchTime.now().uptimeNanoseconds
        try body()
        return Double(DispatchTime.now().uptimeNanoseconds - start) / 1e9
    }

    /// CPU seconds (user + system) this process has used so far, all threads.
    static func cpuSeconds() -> Double {
        var usage = rusage()
        getrusage(RUSAGE_SELF.rawValue, &usage)
        return Double(usage.ru_utime.tv_sec + usage.ru_stime.tv_sec) + Double(usage.ru_utime.tv_usec + usage.ru_stime.tv_usec) / 1e6
    }

    /// CPU seconds of the calling thread.
    static func threadCPUSeconds() -> Double {
        var time = timespec()
        clock_gettime(CLOCK_THREAD_CPUTIME_ID, &time)
        return Double(time.tv_sec) + Double(time.tv_nsec) / 1e9
    }

    /// Wall and CPU seconds of `body`.
    static func measure(_ body: () async throws -> Void) async rethrows -> (wall: Double, cpu: Double) {
        let cpu0 = cpuSeconds()
        let wall = try await secondsAsync(body)
        return (wall, cpuSeconds() - cpu0)
    }

    static func secondsAsync(_ body: () async throws -> Void) async rethrows -> Double {
        let start = DispatchTime.now().uptimeNanoseconds
        try await body()
        return Double(DispatchTime.now().uptimeNanoseconds - start) / 1e9
    }

    /// Saves one small record named `prefix` and a number through `session` into `zone`, 20
    /// times, each timed from the save's answer until `seen(name)` returns: seconds.
    static func saveLatencies(_ session: Session, _ zone: ZoneID, prefix: String,
                              until seen: (String) async throws -> Void) async throws -> [Double] {
        var samples = [Double]()
        for i in 0..<20 {
            var record = Record(type: "Note", name: "\(prefix)\(i)", zone: zone)
            record.encryptedValues["body"] = "now"
            _ = try await session.privateDatabase.save(record)
            let saved = DispatchTime.now().uptimeNanoseconds
            try await seen(record.name)
            samples.append(Double(DispatchTime.now().uptimeNanoseconds - saved) / 1e9)
        }
        return samples
    }

    static func median(_ values: [Double]) -> Double {
        let sorted = values.sorted()
        guard !sorted.isEmpty else { return 0 }
        return sorted.count % 2 == 1 ? sorted[sorted.count / 2] : (sorted[sorted.count / 2 - 1] + sorted[sorted.count / 2]) / 2
    }

    static func emitJSON(_ object: Any) {
        let data = try! JSONSerialization.data(withJSONObject: object, options: [.prettyPrinted, .sortedKeys])
        FileHandle.standardOutput.write(data + Data("\n".utf8))
    }

    static func temporaryFolder(_ prefix: String) throws -> URL {
        let url = FileManager.default.temporaryDirectory.appendingPathComponent("\(prefix)-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: url, withIntermediateDirectories: true)
        return url
    }
}

import ArgumentParser
import CofferCrypto
import CofferStore
import CofferVault
import Foundation

/// A replica's pull through a `coffer serve` on loopback, beside the same records saved on a
/// local SQLite store in one run: the initial pull of every record into a fresh replica (records
/// per second; CPU per record on the client, this process, and on the server, its process; peak
/// memory of each), the latency from a save through the server to its appearance in another
/// replica (by a pull, and kept in step by a ``SyncEngine``), and a push of pending changes.
struct SyncBench: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "sync",
        abstract: "Pull records into a fresh replica through coffer serve on loopback, beside a local store's saves.")

    @Option(help: "Records in the zone.") var records = 100_000
    @Option(help: "Records a batch saves.") var batch = 400
    @Option(help: "The coffer executable to serve with (default: next to this one).") var coffer: String?
    @Flag(help: "One JSON object on stdout.") var json = false

    func run() async throws {
        let folder = try Clock.temporaryFolder("coffer-bench-sync")
        defer { try? FileManager.default.removeItem(at: folder) }
        let executable = try BenchServer.executable(coffer)
        guard records > 0, records % batch == 0 else { throw ValidationError("--records must be whole batches") }
        let vault = try Vault.create(at: folder.appendingPathComponent("bench.coffer"), name: "Bench", email: nil,
                                     passphrase: SecureBytes(copying: Array("bench passphrase".utf8)), kdf: .min)
        // The local store: the same records saved, for the baseline.
        let local = try Store(path: folder.appendingPathComponent("local.sqlite").path)
        let localSession = try await local.openSession(vault: vault)
        let localZone = try await localSession.privateDatabase.createZone(named: "bench")
        let localSave = try await Clock.measure { try await save(localSession, localZone) }
        await local.close()

        let server = try BenchServer.start(executable: executable, store: folder.appendingPathComponent("server.sqlite").path, tied: false)
        defer { server.stop() }
        let writer = try await Store(server: server.url, vault: vault)
        let writerSession = try await writer.openSession(vault: vault)
        let zone = try await writerSession.privateDatabase.createZone(named: "bench")
        let server0 = BenchServer.cpuSeconds(server.pid)
        let serverSave = try await Clock.measure { try await save(writerSession, zone) }
        let serverSaveCPU = BenchServer.cpuSeconds(server.pid) - server0

        // The initial pull into a fresh replica (peak memory counted from here on).
        Memory.resetPeak(getpid())
        Memory.resetPeak(server.pid)
        let replica = try await Replica.open(server: server.url, vault: vault, dataFolder: folder.appendingPathComponent("data"))
        let server1 = BenchServer.cpuSeconds(server.pid)
        var pulledRecords = 0
        let pull = try await Clock.measure {
            let report = try await replica.pull()
            pulledRecords = report.pulled.reduce(0) { $0 + $1.records }
            if let failure = report.failed.first { throw failure.error }
        }
        let pullServerCPU = BenchServer.cpuSeconds(server.pid) - server1
        guard pulledRecords == records else { throw ValidationError("the pull brought \(pulledRecords) records, not \(records)") }
        let clientPeak = Memory.peakMegabytes(getpid()), serverPeak = Memory.peakMegabytes(server.pid)

        // A save through the server, then a pull of its zone by another replica: 20 times.
        let latencies = try await Clock.saveLatencies(writerSession, zone, prefix: "latest") { _ in
            let pulled = try await replica.pull([zone])
            guard pulled.pulled.first?.records == 1 else { throw ValidationError("the pull did not bring the new record") }
        }
        // The same, with the replica kept in step by a sync engine (`coffer sync --watch`),
        // woken by the server's change stream: from the save's answer to the engine's event
        // that the record is in the replica.
        let engine = SyncEngine(replica: replica)
        let watching = Task { try await engine.run() }
        var events = engine.events.makeAsyncIterator()
        func fetched(_ wanted: (PulledZone) -> Bool) async throws {
            while let event = await events.next() {
                if case .fetched(let pulled) = event, pulled.zone == zone, wanted(pulled) { return }
            }
            throw ValidationError("the sync engine stopped")
        }
        try await fetched { _ in true }
        let watchLatencies = try await Clock.saveLatencies(writerSession, zone, prefix: "watched") { _ in try await fetched { $0.records == 1 } }
        watching.cancel()
        _ = await watching.result

        // Pending changes: the same records written through the replica's session (kept,
        // unsigned) into another zone, then pushed, a replica's limit (10,000) at a time.
        let pushZone = try await writerSession.privateDatabase.createZone(named: "pushed")
        try await replica.pull([pushZone])
        var keep = (wall: 0.0, cpu: 0.0), push = (wall: 0.0, cpu: 0.0), pushServerCPU = 0.0
        Memory.resetPeak(getpid())
        Memory.resetPeak(server.pid)
        for start in stride(from: 0, to: records, by: PendingChanges.maxCount) {
            let range = start..<min(start + PendingChanges.maxCount, records)
            let kept = try await Clock.measure { try await save(replica.session, pushZone, range: range) }
            keep = (keep.wall + kept.wall, keep.cpu + kept.cpu)
            let server2 = BenchServer.cpuSeconds(server.pid)
            var confirmed = 0
            let pushed = try await Clock.measure {
                let report = try await replica.push([pushZone])
                if let failure = report.failed.first { throw failure.error }
                confirmed = report.confirmed.reduce(0) { $0 + $1.count }
            }
            pushServerCPU += BenchServer.cpuSeconds(server.pid) - server2
            push = (push.wall + pushed.wall, push.cpu + pushed.cpu)
            guard confirmed == range.count else { throw ValidationError("the push confirmed \(confirmed) changes, not \(range.count)") }
        }
        let pushClientPeak = Memory.peakMegabytes(getpid()), pushServerPeak = Memory.peakMegabytes(server.pid)
        await writer.close()

        let n = Double(records)
        func micro(_ seconds: Double) -> Double { (seconds / n * 1e7).rounded() / 10 }
        let result: [String: Any] = [
            "records": records, "batch": batch,
            "localSaveRecordsPerSecond": (n / localSave.wall).rounded(), "localSaveCPUMicroseconds": micro(localSave.cpu),
            "serverSaveRecordsPerSecond": (n / serverSave.wall).rounded(), "serverSaveClientCPUMicroseconds": micro(serverSave.cpu),
            "serverSaveServerCPUMicroseconds": micro(serverSaveCPU),
            "pullRecordsPerSecond": (n / pull.wall).rounded(), "pullClientCPUMicroseconds": micro(pull.cpu),
            "pullServerCPUMicroseconds": micro(pullServerCPU),
            "pullClientPeakMegabytes": clientPeak, "pullServerPeakMegabytes": serverPeak,
            "saveToPullMedianMilliseconds": (Clock.median(latencies) * 1e4).rounded() / 10,
            "saveToPullMaxMilliseconds": ((latencies.max() ?? 0) * 1e4).rounded() / 10,
            "saveToWatchMedianMilliseconds": (Clock.median(watchLatencies) * 1e4).rounded() / 10,
            "saveToWatchMaxMilliseconds": ((watchLatencies.max() ?? 0) * 1e4).rounded() / 10,
            "keepPendingRecordsPerSecond": (n / keep.wall).rounded(), "keepPendingCPUMicroseconds": micro(keep.cpu),
            "pushRecordsPerSecond": (n / push.wall).rounded(), "pushClientCPUMicroseconds": micro(push.cpu),
            "pushServerCPUMicroseconds": micro(pushServerCPU),
            "pushClientPeakMegabytes": pushClientPeak, "pushServerPeakMegabytes": pushServerPeak,
        ]
        if json {
            Clock.emitJSON(result)
            return
        }
        print("\(records) records of ~1.1 KB sealed, \(batch) a batch")
        print(String(format: "local save:          %8.0f records/s, %6.1f µs CPU a record", result["localSaveRecordsPerSecond"] as! Double, result["localSaveCPUMicroseconds"] as! Double))
        print(String(format: "save through server: %8.0f records/s, %6.1f µs CPU a record on the client, %6.1f on the server",
                     result["serverSaveRecordsPerSecond"] as! Double, result["serverSaveClientCPUMicroseconds"] as! Double, result["serverSaveServerCPUMicroseconds"] as! Double))
        print(String(format: "initial pull:        %8.0f records/s, %6.1f µs CPU a record on the client, %6.1f on the server; peak memory %d MB client, %d MB server",
                     result["pullRecordsPerSecond"] as! Double, result["pullClientCPUMicroseconds"] as! Double, result["pullServerCPUMicroseconds"] as! Double,
                     clientPeak, serverPeak))
        print(String(format: "a save seen in another replica by a pull: %.1f ms median of 20 (max %.1f ms)",
                     result["saveToPullMedianMilliseconds"] as! Double, result["saveToPullMaxMilliseconds"] as! Double))
        print(String(format: "a save seen in another replica kept in step (sync --watch): %.1f ms median of 20 (max %.1f ms)",
                     result["saveToWatchMedianMilliseconds"] as! Double, result["saveToWatchMaxMilliseconds"] as! Double))
        print(String(format: "kept pending (offline): %8.0f records/s, %6.1f µs CPU a record",
                     result["keepPendingRecordsPerSecond"] as! Double, result["keepPendingCPUMicroseconds"] as! Double))
        print(String(format: "push of pending:     %8.0f records/s, %6.1f µs CPU a record on the client, %6.1f on the server; peak memory %d MB client, %d MB server",
                     result["pushRecordsPerSecond"] as! Double, result["pushClientCPUMicroseconds"] as! Double, result["pushServerCPUMicroseconds"] as! Double,
                     pushClientPeak, pushServerPeak))
    }

    /// Saves the benchmark's records into `zone`, `batch` a batch.
    private func save(_ session: Session, _ zone: ZoneID, range: Range<Int>? = nil) async throws {
        let body = String(repeating: "sealed payload ", count: 70)
        let range = range ?? 0..<records
        for start in stride(from: range.lowerBound, to: range.upperBound, by: batch) {
            let list = (start..<min(start + batch, range.upperBound)).map { i in
                var record = Record(type: "Note", name: String(format: "r%06d", i), zone: zone)
                record.values["title"] = .string("note \(i)")
                record.values["count"] = .int(Int64(i))
                record.encryptedValues["body"] = .string(body)
                return record
            }
            _ = try await session.privateDatabase.modify(saving: list, in: zone)
        }
    }
}

/// Peak resident memory of a process, from /proc.
enum Memory {
    /// Resets the process's peak resident set size (`echo 5 > /proc/PID/clear_refs`).
    static func resetPeak(_ pid: Int32) {
        try? "5".write(toFile: "/proc/\(pid)/clear_refs", atomically: false, encoding: .utf8)
    }

    /// The process's peak resident set size since the last reset, in MB (`VmHWM`).
    static func peakMegabytes(_ pid: Int32) -> Int {
        guard let status = try? String(contentsOfFile: "/proc/\(pid)/status", encoding: .utf8),
              let line = status.split(separator: "\n").first(where: { $0.hasPrefix("VmHWM:") }),
              let kilobytes = Int(line.split(separator: " ").dropFirst().first ?? "") else { return 0 }
        return kilobytes / 1024
    }
}

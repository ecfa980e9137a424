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
    @Option(help: "Only the local save and this phase: pull (the save through the server and the initial pull) or push (pending changes pushed), to profile one.")
    var only: Phase?
    @Flag(help: "One JSON object on stdout.") var json = false

    enum Phase: String, ExpressibleByArgument { case pull, push }

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
        let n = Double(records)
        func micro(_ seconds: Double) -> Double { (seconds / n * 1e7).rounded() / 10 }
        var result: [String: Any] = [
            "records": records, "batch": batch,
            "localSaveRecordsPerSecond": (n / localSave.wall).rounded(), "localSaveCPUMicroseconds": micro(localSave.cpu),
        ]
        let replica = try await Replica.open(server: server.url, vault: vault, dataFolder: folder.appendingPathComponent("data"))
        if only != .push {
            let server0 = BenchServer.cpuSeconds(server.pid)
            let serverSave = try await Clock.measure { try await save(writerSession, zone) }
            let serverSaveCPU = BenchServer.cpuSeconds(server.pid) - server0
            result["serverSaveRecordsPerSecond"] = (n / serverSave.wall).rounded()
            result["serverSaveClientCPUMicroseconds"] = micro(serverSave.cpu)
            result["serverSaveServerCPUMicroseconds"] = micro(serverSaveCPU)
            try await measurePull(replica, zone: zone, server: server, micro: micro, into: &result)
        }
        if only == nil {
            try await measureLatencies(replica, writerSession, zone: zone, into: &result)
        }
        if only != .pull {
            try await measurePush(replica, writerSession, server: server, micro: micro, into: &result)
        }
        await writer.close()
        if json {
            Clock.emitJSON(result)
            return
        }
        func figure(_ key: String) -> Double { result[key] as? Double ?? .nan }
        print("\(records) records of ~1.1 KB sealed, \(batch) a batch")
        print(String(format: "local save:          %8.0f records/s, %6.1f µs CPU a record", figure("localSaveRecordsPerSecond"), figure("localSaveCPUMicroseconds")))
        if result["pullRecordsPerSecond"] != nil {
            print(String(format: "save through server: %8.0f records/s, %6.1f µs CPU a record on the client, %6.1f on the server",
                         figure("serverSaveRecordsPerSecond"), figure("serverSaveClientCPUMicroseconds"), figure("serverSaveServerCPUMicroseconds")))
            print(String(format: "initial pull:        %8.0f records/s, %6.1f µs CPU a record on the client, %6.1f on the server; peak memory %d MB client, %d MB server",
                         figure("pullRecordsPerSecond"), figure("pullClientCPUMicroseconds"), figure("pullServerCPUMicroseconds"),
                         result["pullClientPeakMegabytes"] as! Int, result["pullServerPeakMegabytes"] as! Int))
        }
        if result["saveToPullMedianMilliseconds"] != nil {
            print(String(format: "a save seen in another replica by a pull: %.1f ms median of 20 (max %.1f ms)",
                         figure("saveToPullMedianMilliseconds"), figure("saveToPullMaxMilliseconds")))
            print(String(format: "a save seen in another replica kept in step (sync --watch): %.1f ms median of 20 (max %.1f ms)",
                         figure("saveToWatchMedianMilliseconds"), figure("saveToWatchMaxMilliseconds")))
        }
        if result["pushRecordsPerSecond"] != nil {
            print(String(format: "kept pending (offline): %8.0f records/s, %6.1f µs CPU a record",
                         figure("keepPendingRecordsPerSecond"), figure("keepPendingCPUMicroseconds")))
            print(String(format: "push of pending:     %8.0f records/s, %6.1f µs CPU a record on the client, %6.1f on the server; peak memory %d MB client, %d MB server",
                         figure("pushRecordsPerSecond"), figure("pushClientCPUMicroseconds"), figure("pushServerCPUMicroseconds"),
                         result["pushClientPeakMegabytes"] as! Int, result["pushServerPeakMegabytes"] as! Int))
        }
    }

    /// The initial pull of `zone` (every record) into the fresh `replica`, peak memory counted from its start.
    private func measurePull(_ replica: Replica, zone: ZoneID, server: BenchServer, micro: (Double) -> Double,
                             into result: inout [String: Any]) async throws {
        Memory.resetPeak(getpid())
        Memory.resetPeak(server.pid)
        let server1 = BenchServer.cpuSeconds(server.pid)
        var pulledRecords = 0
        let pull = try await Clock.measure {
            let report = try await replica.pull()
            pulledRecords = report.pulled.reduce(0) { $0 + $1.records }
            if let failure = report.failed.first { throw failure.error }
        }
        let pullServerCPU = BenchServer.cpuSeconds(server.pid) - server1
        guard pulledRecords == records else { throw ValidationError("the pull brought \(pulledRecords) records, not \(records)") }
        result["pullRecordsPerSecond"] = (Double(records) / pull.wall).rounded()
        result["pullClientCPUMicroseconds"] = micro(pull.cpu)
        result["pullServerCPUMicroseconds"] = micro(pullServerCPU)
        result["pullClientPeakMegabytes"] = Memory.peakMegabytes(getpid())
        result["pullServerPeakMegabytes"] = Memory.peakMegabytes(server.pid)
    }

    /// A save through the server, then a pull of its zone by another replica: 20 times; then
    /// the same with the replica kept in step by a sync engine.
    private func measureLatencies(_ replica: Replica, _ writerSession: Session, zone: ZoneID, into result: inout [String: Any]) async throws {
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
        result["saveToPullMedianMilliseconds"] = (Clock.median(latencies) * 1e4).rounded() / 10
        result["saveToPullMaxMilliseconds"] = ((latencies.max() ?? 0) * 1e4).rounded() / 10
        result["saveToWatchMedianMilliseconds"] = (Clock.median(watchLatencies) * 1e4).rounded() / 10
        result["saveToWatchMaxMilliseconds"] = ((watchLatencies.max() ?? 0) * 1e4).rounded() / 10
    }

    /// Pending changes: the records written through the replica's session (kept, unsigned)
    /// into a zone of their own, then pushed, a replica's limit at a time.
    private func measurePush(_ replica: Replica, _ writerSession: Session, server: BenchServer, micro: (Double) -> Double,
                             into result: inout [String: Any]) async throws {
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
        result["keepPendingRecordsPerSecond"] = (Double(records) / keep.wall).rounded()
        result["keepPendingCPUMicroseconds"] = micro(keep.cpu)
        result["pushRecordsPerSecond"] = (Double(records) / push.wall).rounded()
        result["pushClientCPUMicroseconds"] = micro(push.cpu)
        result["pushServerCPUMicroseconds"] = micro(pushServerCPU)
        result["pushClientPeakMegabytes"] = Memory.peakMegabytes(getpid())
        result["pushServerPeakMegabytes"] = Memory.peakMegabytes(server.pid)
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

import ArgumentParser
import CofferCrypto
import CofferStore
import CofferVault
import Foundation

/// Saves and fetches through a `coffer serve` on loopback with 1, 4 and 16 concurrent clients,
/// beside the same work on a local SQLite store, in one run. CPU per record is reported on each
/// side: the clients' (this process: sealing, signing, verifying, opening) and the server's (its
/// process: checking signatures and logs, storing), read from /proc.
struct ServerBench: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "server",
        abstract: "Save and fetch through coffer serve on loopback with 1, 4 and 16 clients, beside a local store.")

    @Option(help: "Records each run saves and fetches (split among its clients).") var records = 3200
    @Option(help: "Records a batch saves or fetches.") var batch = 100
    @Option(help: "Concurrent clients, comma-separated.") var clients = "1,4,16"
    @Option(help: "The coffer executable to serve with (default: next to this one).") var coffer: String?
    @Flag(help: "One JSON object on stdout.") var json = false

    func run() async throws {
        let folder = try Clock.temporaryFolder("coffer-bench-server")
        defer { try? FileManager.default.removeItem(at: folder) }
        let executable = try BenchServer.executable(coffer)
        let counts = clients.split(separator: ",").compactMap { Int($0) }
        guard !counts.isEmpty, counts.allSatisfy({ $0 > 0 && records % $0 == 0 && (records / $0) % batch == 0 }) else {
            throw ValidationError("--records must split into whole batches for every client count")
        }
        let vault = try Vault.create(at: folder.appendingPathComponent("bench.coffer"), name: "Bench", email: nil,
                                     passphrase: SecureBytes(copying: Array("bench passphrase".utf8)), kdf: .min)
        var results = [[String: Any]]()
        // The local store: the same work, one client.
        let local = try Store(path: folder.appendingPathComponent("local.sqlite").path)
        results.append(try await measure(label: "local SQLite", stores: [local], vault: vault, serverPID: nil))
        // The server, over an SQLite file of its own.
        let server = try BenchServer.start(executable: executable, store: folder.appendingPathComponent("server.sqlite").path)
        defer { server.stop() }
        for count in counts {
            var stores = [Store]()
            for _ in 0..<count { stores.append(try await Store(server: server.url, vault: vault)) }
            results.append(try await measure(label: "server, \(count) client\(count == 1 ? "" : "s")", stores: stores, vault: vault, serverPID: server.pid))
        }
        let latencies = try await liveLatency(server: server.url, vault: vault)
        let latency: [String: Any] = ["samples": latencies.count, "medianMilliseconds": (Clock.median(latencies) * 1e4).rounded() / 10,
                                      "maxMilliseconds": ((latencies.max() ?? 0) * 1e4).rounded() / 10]
        if json {
            Clock.emitJSON(["records": records, "batch": batch, "runs": results, "liveChangeLatency": latency])
            return
        }
        print("\(records) records of ~1.1 KB sealed, \(batch) a batch; µs per record (CPU: client side, server side)")
        print("run                  save/s   save CPU µs (client, server)   fetch/s  fetch CPU µs (client, server)")
        for r in results {
            let label = (r["run"] as! String).padding(toLength: 18, withPad: " ", startingAt: 0)
            let line = label + String(format: " %8.0f   %8.1f %8.1f              %8.0f  %8.1f %8.1f",
                              r["saveRecordsPerSecond"] as! Double, r["saveClientCPUMicroseconds"] as! Double, r["saveServerCPUMicroseconds"] as! Double,
                              r["fetchRecordsPerSecond"] as! Double, r["fetchClientCPUMicroseconds"] as! Double, r["fetchServerCPUMicroseconds"] as! Double)
            print(line)
        }
        print(String(format: "live change stream through the server: a commit seen by another client %.1f ms after it returned (median of %d; max %.1f ms)",
                     latency["medianMilliseconds"] as! Double, latencies.count, latency["maxMilliseconds"] as! Double))
    }

    /// How long after a save returns another client's live change stream yields it, through the
    /// server: one record at a time, 20 times.
    func liveLatency(server: URL, vault: Vault) async throws -> [Double] {
        let writer = try await Store(server: server, vault: vault).openSession(vault: vault)
        let follower = try await Store(server: server, vault: vault).openSession(vault: vault)
        let zone = try await writer.privateDatabase.createZone(named: "latency-\(UUID().uuidString.prefix(8))")
        let start = try await follower.privateDatabase.changes(in: zone, since: nil).token
        var pages = follower.privateDatabase.changeStream(in: zone, since: start).makeAsyncIterator()
        return try await Clock.saveLatencies(writer, zone, prefix: "live") { name in
            var seen = false
            while !seen {
                guard let page = try await pages.next() else { throw ValidationError("the change stream ended") }
                seen = page.changed.contains { $0.name == name }
            }
        }
    }

    /// Saves then fetches `records` records split among `stores`, each client in a zone of its own.
    func measure(label: String, stores: [Store], vault: Vault, serverPID: Int32?) async throws -> [String: Any] {
        var sessions = [(Session, ZoneID)]()
        for (i, store) in stores.enumerated() {
            let session = try await store.openSession(vault: vault)
            let zone = try await session.privateDatabase.createZone(named: "bench-\(UUID().uuidString.prefix(8))-\(i)")
            sessions.append((session, zone))
        }
        let each = records / stores.count
        let body = String(repeating: "sealed payload ", count: 70)
        func phase(_ work: @escaping @Sendable (Session, ZoneID) async throws -> Void) async throws -> (wall: Double, client: Double, server: Double) {
            let server0 = serverPID.map(BenchServer.cpuSeconds) ?? 0
            let (wall, client) = try await Clock.measure {
                try await withThrowingTaskGroup(of: Void.self) { group in
                    for (session, zone) in sessions { group.addTask { try await work(session, zone) } }
                    try await group.waitForAll()
                }
            }
            return (wall, client, (serverPID.map(BenchServer.cpuSeconds) ?? 0) - server0)
        }
        let batch = self.batch
        let save = try await phase { session, zone in
            for start in stride(from: 0, to: each, by: batch) {
                let list = (start..<start + batch).map { i in
                    var record = Record(type: "Note", name: String(format: "r%06d", i), zone: zone)
                    record.values["title"] = .string("note \(i)")
                    record.values["count"] = .int(Int64(i))
                    record.encryptedValues["body"] = .string(body)
                    return record
                }
                _ = try await session.privateDatabase.modify(saving: list, in: zone)
            }
        }
        let fetch = try await phase { session, zone in
            for start in stride(from: 0, to: each, by: batch) {
                let names = (start..<start + batch).map { String(format: "r%06d", $0) }
                let found = try await session.privateDatabase.records(named: names, in: zone)
                guard found.count == names.count else { throw ValidationError("a fetch missed records") }
            }
        }
        for store in stores { await store.close() }
        let n = Double(records)
        func micro(_ seconds: Double) -> Double { (seconds / n * 1e7).rounded() / 10 }
        return ["run": label, "clients": stores.count,
                "saveRecordsPerSecond": (n / save.wall).rounded(), "saveClientCPUMicroseconds": micro(save.client), "saveServerCPUMicroseconds": micro(save.server),
                "fetchRecordsPerSecond": (n / fetch.wall).rounded(), "fetchClientCPUMicroseconds": micro(fetch.client),
                "fetchServerCPUMicroseconds": micro(fetch.server)]
    }
}

/// The benchmark's `coffer serve` process.
struct BenchServer {
    let process: Process
    let url: URL
    var pid: Int32 { process.processIdentifier }

    /// `tied`: the server gets SIGTERM when the thread that started it ends (Linux's parent-death
    /// signal, which follows the thread, not the process); a long benchmark whose starting thread
    /// the concurrency runtime may retire passes false and stops the server itself.
    static func start(executable: String, store: String, tied: Bool = true) throws -> BenchServer {
        let output = Pipe()
        let process = Process()
        process.executableURL = URL(fileURLWithPath: executable)
        process.arguments = ["serve", "--listen", "127.0.0.1:0", "--store", store]
        process.standardOutput = output
        process.standardError = FileHandle.nullDevice
        // It ends with the benchmark, however that ends (coffer serve's COFFER_SERVE_PARENT).
        process.environment = tied ? ProcessInfo.processInfo.environment.merging(["COFFER_SERVE_PARENT": String(getpid())]) { _, new in new }
            : ProcessInfo.processInfo.environment
        try process.run()
        // Its first line names the port.
        var text = ""
        while !text.contains("\n") {
            let chunk = output.fileHandleForReading.availableData
            if chunk.isEmpty { throw ValidationError("coffer serve ended before it listened") }
            text += String(decoding: chunk, as: UTF8.self)
        }
        guard let range = text.range(of: #"http://127\.0\.0\.1:[0-9]+"#, options: .regularExpression), let url = URL(string: String(text[range])) else {
            throw ValidationError("coffer serve printed no address: \(text)")
        }
        return BenchServer(process: process, url: url)
    }

    /// The `coffer` executable a benchmark serves with: `given` (its `--coffer`), else the one
    /// next to `coffer-bench`.
    static func executable(_ given: String?) throws -> String {
        let executable = given ?? URL(fileURLWithPath: (try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/exe")) ?? CommandLine.arguments[0])
            .deletingLastPathComponent().appendingPathComponent("coffer").path
        guard FileManager.default.isExecutableFile(atPath: executable) else {
            throw ValidationError("no coffer executable at \(executable): build it (swift build -c release --product coffer) or pass --coffer")
        }
        return executable
    }

    /// The process's CPU seconds (user + system), from /proc/PID/stat.
    static func cpuSeconds(_ pid: Int32) -> Double {
        guard let stat = try? String(contentsOfFile: "/proc/\(pid)/stat", encoding: .utf8), let close = stat.lastIndex(of: ")") else { return 0 }
        let fields = stat[stat.index(after: close)...].split(separator: " ")
        // After the name: state is field 3; utime and stime are fields 14 and 15.
        guard fields.count > 13, let user = Double(fields[11]), let system = Double(fields[12]) else { return 0 }
        return (user + system) / Double(sysconf(Int32(_SC_CLK_TCK)))
    }

    func stop() {
        guard process.isRunning else { return }
        process.terminate()
        process.waitUntilExit()
    }
}

import ArgumentParser
import CofferCrypto
import CofferStore
import CofferVault
import Foundation

/// Reads beside busy writers: writers saving one record at a time into one zone while readers
/// read it (one pages its change feed from where it last was, one runs a query), for a fixed
/// time, on a local SQLite store, through `coffer serve`, and on PostgreSQL when `--postgres`
/// names a server. Each writer and reader has a store object of its own (another process's
/// view). Reports how many reads finished and failed, their latency, how often a read started
/// over (a writer's commit landed between its round trips) and how many reads ran on a pin.
struct ContentionBench: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "contention",
        abstract: "Reads beside busy writers on one zone (a change feed and a query), locally, through coffer serve and on PostgreSQL.")

    @Option(help: "Writers, each saving one record at a time.") var writers = 8
    @Option(help: "Readers: the first pages the zone's change feed, the second queries it, and so on by turns.") var readers = 2
    @Option(help: "Seconds each run lasts.") var seconds = 10.0
    @Option(help: "A PostgreSQL database to run on too (postgres://USER@HOST/DB); the run makes and drops a database of its own beside it.")
    var postgres: String?
    @Option(help: "The coffer executable to serve with (default: next to this one).") var coffer: String?
    @Flag(help: "One JSON object on stdout.") var json = false

    func run() async throws {
        let folder = try Clock.temporaryFolder("coffer-bench-contention")
        defer { try? FileManager.default.removeItem(at: folder) }
        let vault = try Vault.create(at: folder.appendingPathComponent("bench.coffer"), name: "Bench", email: nil,
                                     passphrase: SecureBytes(copying: Array("bench passphrase".utf8)), kdf: .min)
        var results = [[String: Any]]()
        let path = folder.appendingPathComponent("local.sqlite").path
        results.append(try await measure(label: "local SQLite", vault: vault, serverPID: nil) { try Store(path: path) })
        let executable = coffer ?? URL(fileURLWithPath: (try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/exe")) ?? CommandLine.arguments[0])
            .deletingLastPathComponent().appendingPathComponent("coffer").path
        let server = try BenchServer.start(executable: executable, store: folder.appendingPathComponent("server.sqlite").path)
        defer { server.stop() }
        results.append(try await measure(label: "server on SQLite", vault: vault, serverPID: server.pid) {
            try await Store(server: server.url, vault: vault)
        })
        if let postgres {
            results.append(try await PostgresBench.withDatabase(beside: postgres) { database in
                try await measure(label: "PostgreSQL", vault: vault, serverPID: nil) {
                    try await Store(postgres: database, password: PostgresPassword.lookup(for: database))
                }
            })
        }
        if json {
            Clock.emitJSON(["writers": writers, "readers": readers, "seconds": seconds, "runs": results])
            return
        }
        print("\(writers) writers and \(readers) readers on one zone for \(seconds) s")
        print("run                 reads  failed  read ms (median, max)  restarts/read  pinned/read  writes/s  CPU s (clients, server)")
        for r in results {
            let label = (r["run"] as! String).padding(toLength: 18, withPad: " ", startingAt: 0)
            print(label + String(format: " %6d  %6d   %8.1f %8.1f          %6.2f        %6.2f    %7.0f   %6.1f %6.1f",
                                 r["reads"] as! Int, r["readsFailed"] as! Int, r["readMedianMilliseconds"] as! Double,
                                 r["readMaxMilliseconds"] as! Double, r["restartsPerRead"] as! Double, r["pinnedRunsPerRead"] as! Double,
                                 r["writesPerSecond"] as! Double, r["clientCPUSeconds"] as! Double, r["serverCPUSeconds"] as! Double))
        }
    }

    /// One run: `writers` writers and `readers` readers, each on a store `open` makes.
    func measure(label: String, vault: Vault, serverPID: Int32?, open: () async throws -> Store) async throws -> [String: Any] {
        var stores = [Store]()
        for _ in 0..<(writers + readers) { stores.append(try await open()) }
        do {
            let result = try await measure(label: label, vault: vault, serverPID: serverPID, stores: stores)
            for store in stores { await store.close() }
            return result
        } catch {
            for store in stores { await store.close() }
            throw error
        }
    }

    func measure(label: String, vault: Vault, serverPID: Int32?, stores: [Store]) async throws -> [String: Any] {
        let first = try await stores[0].openSession(vault: vault)
        let zone = try await first.privateDatabase.createZone(named: "busy-\(UUID().uuidString.prefix(8))")
        _ = try await first.privateDatabase.modify(saving: (0..<100).map { Self.note(zone, "seed\($0)", rank: $0) }, in: zone)
        var sessions = [Session]()
        for store in stores { sessions.append(try await store.openSession(vault: vault)) }
        let deadline = ContinuousClock.now + .milliseconds(Int(seconds * 1000))
        let latencies = Locked([Double]()), failures = Locked(0), writes = Locked(0), writeFailures = Locked(0)
        let rounds = ReadRounds()
        let server0 = serverPID.map(BenchServer.cpuSeconds) ?? 0
        let (wall, cpu) = try await Clock.measure {
            try await withThrowingTaskGroup(of: Void.self) { group in
                for w in 0..<writers {
                    let db = sessions[w].privateDatabase
                    group.addTask {
                        var i = 0
                        while ContinuousClock.now < deadline {
                            do {
                                _ = try await db.save(Self.note(zone, "w\(w)-\(i)", rank: i))
                                writes.withLock { $0 += 1 }
                            } catch {
                                writeFailures.withLock { $0 += 1 }
                            }
                            i += 1
                        }
                    }
                }
                for r in 0..<readers {
                    let db = sessions[writers + r].privateDatabase
                    group.addTask {
                        try await ReadRounds.$current.withValue(rounds) {
                            var token: ChangeToken?
                            while ContinuousClock.now < deadline {
                                let start = DispatchTime.now().uptimeNanoseconds
                                do {
                                    if r % 2 == 0 {
                                        let page = try await db.changes(in: zone, since: token, limit: 100)
                                        token = page.token
                                    } else {
                                        _ = try await db.query(Query(recordType: "Note", predicates: [.init("rank", .lessThan, .int(20))],
                                                                     sort: [.init("rank")], limit: 100), in: zone)
                                    }
                                    latencies.withLock { $0.append(Double(DispatchTime.now().uptimeNanoseconds - start) / 1e6) }
                                } catch {
                                    failures.withLock { $0 += 1 }
                                }
                            }
                        }
                    }
                }
                try await group.waitForAll()
            }
        }
        let server = (serverPID.map(BenchServer.cpuSeconds) ?? 0) - server0
        let done = latencies.withLock { $0 }, tally = rounds.tally.withLock { $0 }
        let reads = max(done.count, 1)
        return ["run": label, "reads": done.count, "readsFailed": failures.withLock { $0 },
                "readMedianMilliseconds": (Clock.median(done) * 10).rounded() / 10, "readMaxMilliseconds": ((done.max() ?? 0) * 10).rounded() / 10,
                "restartsPerRead": (Double(tally.restarts) / Double(reads) * 100).rounded() / 100,
                "pinnedRunsPerRead": (Double(tally.pinnedRuns) / Double(reads) * 100).rounded() / 100,
                "writesPerSecond": (Double(writes.withLock { $0 }) / wall).rounded(), "writesFailed": writeFailures.withLock { $0 },
                "clientCPUSeconds": (cpu * 10).rounded() / 10, "serverCPUSeconds": (server * 10).rounded() / 10]
    }

    static func note(_ zone: ZoneID, _ name: String, rank: Int) -> Record {
        var record = Record(type: "Note", name: name, zone: zone)
        record.values["title"] = .string("note \(name)")
        record.values["rank"] = .int(Int64(rank))
        record.encryptedValues["body"] = .string("secret of \(name)")
        return record
    }
}

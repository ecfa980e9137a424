import ArgumentParser
import CofferCrypto
import CofferStore
import CofferVault
import Foundation
import GRDB

/// Save, fetch and query throughput of the store against an honest plaintext baseline:
/// the same logical rows in a plain GRDB table with the same columns and indexes, the same
/// batches, journal mode (WAL) and synchronous setting (NORMAL), prepared statements.
struct RecordsBench: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "records",
        abstract: "Records of type Note (3 plain fields, 2 encrypted) saved in batches of 400: save, fetch, query vs a plaintext baseline.")

    @Option(help: "Number of records.") var records = 100_000
    @Option(help: "Number of queries (each returns 100 records).") var queries = 200
    @Flag(help: "One JSON object on stdout.") var json = false
    @Option(help: "Keep the databases in this folder instead of a temporary one.") var dir: String?
    @Option(help: ArgumentHelp("Run the same phases on PostgreSQL too (as coffer-bench postgres does, with these records and queries), on a database made beside this one.",
                               valueName: "url"))
    var postgres: String?

    static let batchSize = 400
    static let perQuery = 100

    struct Row {
        let name: String
        let title: String
        let count: Int64
        let date: Date
        let body: String
        let n: Int64
    }

    func validate() throws {
        guard records >= Self.perQuery * 2 else { throw ValidationError("--records must be at least \(Self.perQuery * 2)") }
    }

    func run() async throws {
        // Kept as one function: the benchmark's phases in the order they run and are reported, each a few lines.
        let folder = try dir.map { URL(fileURLWithPath: $0) } ?? Clock.temporaryFolder("coffer-bench-records")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        defer { if dir == nil { try? FileManager.default.removeItem(at: folder) } }
        let rows = Self.makeRows(records)
        let distinctCounts = Int64(records / Self.perQuery)
        let queryValues = (0..<queries).map { Int64($0) % distinctCounts }
        log("\(records) records, batches of \(Self.batchSize), \(queries) queries of \(Self.perQuery) records")

        // Store
        let vault = try Vault.create(at: folder.appendingPathComponent("bench.coffer"), name: "Bench",
                                     passphrase: SecureBytes(copying: Array("bench".utf8)), kdf: .min)
        let store = try Store(path: folder.appendingPathComponent("store.sqlite").path)
        let session = try store.session(vault: vault)
        let db = session.privateDatabase
        let zone = try await db.createZone(named: "Bench")
        // The field the query phase uses is indexed before saving, as the baseline's is.
        try await db.ensureIndex(recordType: "Note", fields: ["count"])

        // The two sides take turns batch by batch (a batch of 400 saves, 400 fetches, one query),
        // baseline first, each turn timed on its own and summed per side: a burst of load on
        // the machine, or the kernel writing back dirty pages, falls on both sides alike. Each
        // phase starts after sync(2).
        let baseline = try Baseline(path: folder.appendingPathComponent("baseline.sqlite").path)
        var storeSave = Tally(), baseSave = Tally()
        var prepCPU = 0.0
        sync()
        var cpu0 = Clock.cpuSeconds()
        for start in stride(from: 0, to: rows.count, by: Self.batchSize) {
            let slice = rows[start..<min(start + Self.batchSize, rows.count)]
            try baseSave.add { try baseline.insert(slice) }
            // Each side's input is ready before its turn: the baseline's rows, the store's records
            // (built untimed, and their CPU time left out of the store's).
            let prep0 = Clock.threadCPUSeconds()
            let batch = slice.map { Self.record($0, zone: zone) }
            prepCPU += Clock.threadCPUSeconds() - prep0
            try await storeSave.add { _ = try await db.modify(saving: batch, in: zone) }
        }
        storeSave.cpu = Clock.cpuSeconds() - cpu0 - baseSave.cpu - prepCPU
        log(String(format: "save   store %.2f s, baseline %.2f s", storeSave.wall, baseSave.wall))

        var storeFetch = Tally(), baseFetch = Tally()
        var checked = 0, baseFound = 0
        sync()
        cpu0 = Clock.cpuSeconds()
        for start in stride(from: 0, to: rows.count, by: Self.batchSize) {
            let names = rows[start..<min(start + Self.batchSize, rows.count)].map(\.name)
            try baseFetch.add { baseFound += try baseline.fetch(names: names) }
            try await storeFetch.add {
                let found = try await db.records(named: names, in: zone)
                for name in names {
                    let record = try found[name]!.get()
                    if record.encryptedValues["body"] != nil { checked += 1 }
                }
            }
        }
        storeFetch.cpu = Clock.cpuSeconds() - cpu0 - baseFetch.cpu
        guard checked == rows.count, baseFound == rows.count else {
            throw ValidationError("fetch returned \(checked) (store) and \(baseFound) (baseline) of \(rows.count) records")
        }
        log(String(format: "fetch  store %.2f s, baseline %.2f s", storeFetch.wall, baseFetch.wall))

        var storeQuery = Tally(), baseQuery = Tally()
        var queried = 0, baseQueried = 0
        sync()
        cpu0 = Clock.cpuSeconds()
        for value in queryValues {
            try baseQuery.add { baseQueried += try baseline.query(count: value) }
            try await storeQuery.add {
                let result = try await db.query(Query(recordType: "Note", predicates: [.init("count", .equal, .int(value))]), in: zone)
                for record in result.records where record.encryptedValues["body"] != nil { queried += 1 }
            }
        }
        storeQuery.cpu = Clock.cpuSeconds() - cpu0 - baseQuery.cpu
        guard queried == queries * Self.perQuery, baseQueried == queries * Self.perQuery else {
            throw ValidationError("queries returned \(queried) (store) and \(baseQueried) (baseline) records, expected \(queries * Self.perQuery)")
        }
        log(String(format: "query  store %.2f s, baseline %.2f s", storeQuery.wall, baseQuery.wall))

        func entry(_ store: Tally, _ base: Tally, count: Int) -> [String: Any] {
            let rps = Double(count) / store.wall, brps = Double(count) / base.wall
            return ["recordsPerSecond": rps.rounded(), "baselineRecordsPerSecond": brps.rounded(),
                    "ratio": (rps / brps * 1000).rounded() / 1000, "seconds": store.wall, "baselineSeconds": base.wall,
                    "cpuSeconds": store.cpu, "baselineCpuSeconds": base.cpu,
                    "cpuRatio": (base.cpu / store.cpu * 1000).rounded() / 1000,
                    "microsecondsPerRecord": (store.wall / Double(count) * 1e7).rounded() / 10,
                    "baselineMicrosecondsPerRecord": (base.wall / Double(count) * 1e7).rounded() / 10]
        }
        let storeSize = Self.fileSize(folder.appendingPathComponent("store.sqlite"))
        let baseSize = Self.fileSize(folder.appendingPathComponent("baseline.sqlite"))
        var result: [String: Any] = [
            "records": records, "batchSize": Self.batchSize, "queries": queries, "recordsPerQuery": Self.perQuery,
            "save": entry(storeSave, baseSave, count: records),
            "fetch": entry(storeFetch, baseFetch, count: records),
            "query": entry(storeQuery, baseQuery, count: queries * Self.perQuery),
            "storeBytes": storeSize, "baselineBytes": baseSize,
            "sqlite": baseline.sqliteVersion, "libsodium": CryptoLibrary.version,
        ]
        var onPostgres: [String: Any]?
        if let postgres {
            var bench = PostgresBench()
            bench.url = postgres
            bench.records = records
            bench.queries = queries
            bench.json = json
            onPostgres = try await bench.results()
            result["postgres"] = onPostgres
        }
        if json {
            Clock.emitJSON(result)
        } else {
            if onPostgres != nil { print("SQLite") }
            for phase in ["save", "fetch", "query"] {
                let e = result[phase] as! [String: Any]
                print(phase.padding(toLength: 6, withPad: " ", startingAt: 0)
                      + String(format: "%10.0f records/s  baseline %10.0f records/s  ratio %.3f  (CPU: %.2f s vs %.2f s, ratio %.3f)",
                               e["recordsPerSecond"] as! Double, e["baselineRecordsPerSecond"] as! Double, e["ratio"] as! Double,
                               e["cpuSeconds"] as! Double, e["baselineCpuSeconds"] as! Double, e["cpuRatio"] as! Double))
            }
            print("size  store \(storeSize / 1024) KiB, baseline \(baseSize / 1024) KiB (main database files, after checkpoint)")
            if let onPostgres {
                print("PostgreSQL")
                PostgresBench.printPhases(onPostgres)
            }
        }
    }

    func log(_ text: String) {
        if !json { FileHandle.standardError.write(Data((text + "\n").utf8)) }
    }

    static func fileSize(_ url: URL) -> Int {
        ((try? FileManager.default.attributesOfItem(atPath: url.path))?[.size] as? Int) ?? 0
    }

    /// The store's record for a row: 3 plain fields, 2 encrypted.
    static func record(_ row: Row, zone: ZoneID) -> CofferStore.Record {
        var r = CofferStore.Record(type: "Note", name: row.name, zone: zone)
        r.values["title"] = .string(row.title)
        r.values["count"] = .int(row.count)
        r.values["date"] = .date(row.date)
        r.encryptedValues["body"] = .string(row.body)
        r.encryptedValues["n"] = .int(row.n)
        return r
    }

    /// Deterministic rows: a 20-40 character title, a count with 100 records per value, a
    /// date, a 1 KB body, an int.
    static func makeRows(_ count: Int) -> [Row] {
        var generator = SplitMix64(seed: 0xC0FFEE)
        let words = ["alpha", "bravo", "coffee", "delta", "echo", "fern", "grain", "harbor", "iris", "juniper", "kettle", "lumen"]
        let distinct = Int64(count / perQuery)
        return (0..<count).map { i in
            var title = ""
            let target = 20 + Int(generator.next() % 21)
            while title.count < target { title += words[Int(generator.next() % UInt64(words.count))] + " " }
            title = String(title.prefix(target))
            var body = ""
            body.reserveCapacity(1024)
            while body.utf8.count < 1024 { body += words[Int(generator.next() % UInt64(words.count))] + " " }
            body = String(body.prefix(1024))
            return Row(name: "note-\(i)", title: title, count: Int64(i) % distinct,
                       date: Date(timeIntervalSince1970: 1_700_000_000 + Double(i)), body: body, n: Int64(generator.next() % 1_000_000))
        }
    }
}

/// A small deterministic generator so runs compare like with like.
struct SplitMix64 {
    var state: UInt64
    init(seed: UInt64) { state = seed }
    mutating func next() -> UInt64 {
        state &+= 0x9E3779B97F4A7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58476D1CE4E5B9
        z = (z ^ (z >> 27)) &* 0x94D049BB133111EB
        return z ^ (z >> 31)
    }
}

/// The plaintext baseline: the same logical columns, and the same indexes as the store keeps
/// for Note in this run (unique name; the queried field `count`), WAL, synchronous NORMAL,
/// prepared statements, one transaction per batch.
struct Baseline {
    let pool: DatabasePool

    init(path: String) throws {
        var config = Configuration()
        config.prepareDatabase { db in try db.execute(sql: "PRAGMA synchronous = NORMAL") }
        pool = try DatabasePool(path: path, configuration: config)
        try pool.write { db in
            try db.execute(sql: """
                CREATE TABLE note (id INTEGER PRIMARY KEY, name TEXT NOT NULL UNIQUE, title TEXT NOT NULL, count INTEGER NOT NULL,
                                   date REAL NOT NULL, body TEXT NOT NULL, n INTEGER NOT NULL);
                CREATE INDEX note_count ON note (count, name);
                """)
        }
    }

    var sqliteVersion: String { (try? pool.read { try String.fetchOne($0, sql: "SELECT sqlite_version()") }) ?? "?" }

    /// One batch, in one transaction.
    func insert(_ batch: ArraySlice<RecordsBench.Row>) throws {
        try pool.write { db in
            let statement = try db.cachedStatement(sql: "INSERT INTO note (name, title, count, date, body, n) VALUES (?, ?, ?, ?, ?, ?)")
            for row in batch {
                try statement.execute(arguments: [row.name, row.title, row.count, row.date.timeIntervalSince1970, row.body, row.n])
            }
        }
    }

    /// Fetches each name with a prepared statement; returns how many were found.
    func fetch(names: [String]) throws -> Int {
        try pool.read { db in
            let statement = try db.cachedStatement(sql: "SELECT name, title, count, date, body, n FROM note WHERE name = ?")
            var n = 0
            for name in names {
                if let row = try GRDB.Row.fetchOne(statement, arguments: [name]) {
                    let body: String = row[4]
                    if !body.isEmpty { n += 1 }
                }
            }
            return n
        }
    }

    /// The rows with `count = value`, ordered by name; returns how many.
    func query(count value: Int64) throws -> Int {
        try pool.read { db in
            let statement = try db.cachedStatement(sql: "SELECT name, title, count, date, body, n FROM note WHERE count = ? ORDER BY name")
            return try GRDB.Row.fetchAll(statement, arguments: [value]).filter { !($0[4] as String).isEmpty }.count
        }
    }
}

/// Wall and CPU time summed over the turns of one side.
///
/// The baseline runs on the calling thread only: its CPU time is that thread's. The store's is
/// the whole process's over the phase minus the baseline's: the store's work runs on GRDB's
/// database threads, not the calling one.
struct Tally {
    var wall = 0.0
    var cpu = 0.0

    /// A baseline turn, timed on this thread.
    mutating func add(_ body: () throws -> Void) throws {
        let cpu0 = Clock.threadCPUSeconds()
        wall += try Clock.seconds(body)
        cpu += Clock.threadCPUSeconds() - cpu0
    }

    /// A store turn (its CPU time is set once the phase is over).
    mutating func add(_ body: () async throws -> Void) async throws {
        wall += try await Clock.secondsAsync(body)
    }
}

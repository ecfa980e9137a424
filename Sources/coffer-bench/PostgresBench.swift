import ArgumentParser
import CofferCrypto
import CofferStore
import CofferVault
import Foundation
import Logging
import PostgresNIO

/// Save, fetch and query on PostgreSQL: the store against a plaintext table on the same server.
/// The baseline talks to postgres-nio's `PostgresClient` directly, one statement a batch as the
/// store's rows are written and read (`unnest` of column arrays, `name = ANY(names)`, and
/// `count = $1` on an index of (count, name) for the queries of 100 records each); the store
/// goes through its connector, with timeouts of its own on every statement, and also writes and
/// reads its log, keys and schema. Each run makes a database of its
/// own next to the one the URL names, and drops it afterwards.
struct PostgresBench: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "postgres",
        abstract: "Records saved, fetched and queried on PostgreSQL (batches of 400, queries of 100): the store against a plaintext table, both through postgres-nio.")

    @Option(help: "A database to connect to first, postgres://USER@HOST[:PORT]/DB or postgres://USER@/DB?host=/socket/dir; the run makes and drops a database of its own beside it.")
    var url: String
    @Option(help: "Number of records.") var records = 20_000
    @Option(help: "Number of queries (each matches 100 records).") var queries = 100
    @Flag(help: "One JSON object on stdout.") var json = false

    func validate() throws {
        guard records >= RecordsBench.perQuery * 2 else { throw ValidationError("--records must be at least \(RecordsBench.perQuery * 2)") }
        guard queries >= 1 else { throw ValidationError("--queries must be at least 1") }
    }

    func run() async throws {
        let result = try await results()
        if json {
            Clock.emitJSON(result)
        } else {
            Self.printPhases(result)
        }
    }

    /// The phases' figures, measured on a database made for the run beside the one `url` names.
    func results() async throws -> [String: Any] {
        try await Self.withDatabase(beside: url) { database in try await measure(database) }
    }

    /// Runs `body` on a database of its own, made beside the one `url` names and dropped afterwards.
    static func withDatabase<T>(beside url: String, _ body: (PostgresURL) async throws -> T) async throws -> T {
        let server = try PostgresURL(url)
        let admin = PostgresConnector(url: server, password: PostgresPassword.lookup(for: server))
        let name = "coffer_bench_" + String(UInt64.random(in: .min ... .max), radix: 16)
        try await admin.query(PostgresQuery(unsafeSQL: "CREATE DATABASE \(name)"))
        let database = PostgresURL(user: server.user, database: name, endpoint: server.endpoint)
        let result: T
        do {
            result = try await body(database)
        } catch {
            _ = try? await admin.query(PostgresQuery(unsafeSQL: "DROP DATABASE \(name) WITH (FORCE)"))
            await admin.close()
            throw error
        }
        try await admin.query(PostgresQuery(unsafeSQL: "DROP DATABASE \(name) WITH (FORCE)"))
        await admin.close()
        return result
    }

    func measure(_ database: PostgresURL) async throws -> [String: Any] {
        // Kept as one function: the benchmark's phases in the order they run and are reported, each a few lines.
        let folder = try Clock.temporaryFolder("coffer-bench-postgres")
        defer { try? FileManager.default.removeItem(at: folder) }
        let rows = RecordsBench.makeRows(records)
        let vault = try Vault.create(at: folder.appendingPathComponent("bench.coffer"), name: "Bench",
                                     passphrase: SecureBytes(copying: Array("bench".utf8)), kdf: .min)
        let store = try await Store(postgres: database, password: PostgresPassword.lookup(for: database))
        let db = try await store.openSession(vault: vault).privateDatabase
        let zone = try await db.createZone(named: "Bench")
        // The field the queries use is indexed before saving, as the baseline's is.
        try await db.ensureIndex(recordType: "Note", fields: ["count"])
        let baseline = PostgresConnector(url: database, password: PostgresPassword.lookup(for: database))
        try await baseline.query("""
            CREATE TABLE note (id bigserial PRIMARY KEY, name text COLLATE "C" NOT NULL UNIQUE, title text NOT NULL, count bigint NOT NULL,
                               date double precision NOT NULL, body text NOT NULL, n bigint NOT NULL)
            """)
        try await baseline.query("CREATE INDEX note_count ON note (count, name)")
        log("\(records) records, batches of \(RecordsBench.batchSize), PostgreSQL at \(database.serverDescription)")

        // The sides take turns batch by batch, as in `records`. CPU is this process's (the
        // client's) over each turn; the server's work shows in wall time only.
        var storeSave = Turns(), baseSave = Turns()
        for start in stride(from: 0, to: rows.count, by: RecordsBench.batchSize) {
            let slice = Array(rows[start..<min(start + RecordsBench.batchSize, rows.count)])
            try await baseSave.add {
                try await baseline.client.withTransaction(logger: quiet) { connection in
                    try await connection.query("""
                        INSERT INTO note (name, title, count, date, body, n)
                        SELECT * FROM unnest(\(slice.map(\.name)), \(slice.map(\.title)), \(slice.map(\.count)),
                                             \(slice.map { $0.date.timeIntervalSince1970 }), \(slice.map(\.body)), \(slice.map(\.n)))
                        """, logger: quiet)
                    return ()
                }
            }
            let batch = slice.map { RecordsBench.record($0, zone: zone) }
            try await storeSave.add { _ = try await db.modify(saving: batch, in: zone) }
        }
        log(String(format: "save   store %.2f s, baseline %.2f s", storeSave.wall, baseSave.wall))

        var storeFetch = Turns(), baseFetch = Turns()
        var checked = 0, baseFound = 0
        for start in stride(from: 0, to: rows.count, by: RecordsBench.batchSize) {
            let names = rows[start..<min(start + RecordsBench.batchSize, rows.count)].map(\.name)
            try await baseFetch.add {
                baseFound += try await baseline.client.withConnection { connection in
                    var found = 0
                    for try await row in try await connection.query("SELECT name, title, count, date, body, n FROM note WHERE name = ANY(\(names))", logger: quiet) {
                        if try !row.decode((String, String, Int64, Double, String, Int64).self).4.isEmpty { found += 1 }
                    }
                    return found
                }
            }
            try await storeFetch.add {
                let found = try await db.records(named: names, in: zone)
                for name in names where (try found[name]?.get())?.encryptedValues["body"] != nil { checked += 1 }
            }
        }
        guard checked == rows.count, baseFound == rows.count else {
            throw ValidationError("fetch returned \(checked) (store) and \(baseFound) (baseline) of \(rows.count) records")
        }
        log(String(format: "fetch  store %.2f s, baseline %.2f s", storeFetch.wall, baseFetch.wall))

        var storeQuery = Turns(), baseQuery = Turns()
        var queried = 0, baseQueried = 0
        let distinctCounts = Int64(records / RecordsBench.perQuery)
        for value in (0..<queries).map({ Int64($0) % distinctCounts }) {
            try await baseQuery.add {
                baseQueried += try await baseline.client.withConnection { connection in
                    var found = 0
                    for try await row in try await connection.query("SELECT name, title, count, date, body, n FROM note WHERE count = \(value) ORDER BY name", logger: quiet) {
                        if try !row.decode((String, String, Int64, Double, String, Int64).self).4.isEmpty { found += 1 }
                    }
                    return found
                }
            }
            try await storeQuery.add {
                let result = try await db.query(Query(recordType: "Note", predicates: [.init("count", .equal, .int(value))]), in: zone)
                queried += result.records.filter { $0.encryptedValues["body"] != nil }.count
            }
        }
        guard queried == queries * RecordsBench.perQuery, baseQueried == queries * RecordsBench.perQuery else {
            throw ValidationError("queries returned \(queried) (store) and \(baseQueried) (baseline) records, expected \(queries * RecordsBench.perQuery)")
        }
        log(String(format: "query  store %.2f s, baseline %.2f s", storeQuery.wall, baseQuery.wall))
        await baseline.close()
        await store.close()

        func entry(_ store: Turns, _ base: Turns, count records: Int) -> [String: Any] {
            let count = Double(records)
            return ["recordsPerSecond": (count / store.wall).rounded(), "baselineRecordsPerSecond": (count / base.wall).rounded(),
                    "ratio": (base.wall / store.wall * 1000).rounded() / 1000,
                    "cpuMicrosecondsPerRecord": (store.cpu / count * 1e7).rounded() / 10,
                    "baselineCpuMicrosecondsPerRecord": (base.cpu / count * 1e7).rounded() / 10,
                    "cpuRatio": (base.cpu / store.cpu * 1000).rounded() / 1000]
        }
        let result: [String: Any] = ["records": records, "batchSize": RecordsBench.batchSize, "queries": queries,
                                     "recordsPerQuery": RecordsBench.perQuery,
                                     "save": entry(storeSave, baseSave, count: records), "fetch": entry(storeFetch, baseFetch, count: records),
                                     "query": entry(storeQuery, baseQuery, count: queries * RecordsBench.perQuery)]
        return result
    }

    /// One line a phase: the store's and the baseline's rates, and their client CPU a record.
    static func printPhases(_ result: [String: Any]) {
        for phase in ["save", "fetch", "query"] {
            let e = result[phase] as! [String: Any]
            print(phase.padding(toLength: 6, withPad: " ", startingAt: 0)
                  + String(format: "%8.0f records/s  baseline %8.0f records/s  ratio %.3f  (client CPU: %.1f µs vs %.1f µs a record, ratio %.3f)",
                           e["recordsPerSecond"] as! Double, e["baselineRecordsPerSecond"] as! Double, e["ratio"] as! Double,
                           e["cpuMicrosecondsPerRecord"] as! Double, e["baselineCpuMicrosecondsPerRecord"] as! Double, e["cpuRatio"] as! Double))
        }
    }

    func log(_ text: String) {
        if !json { FileHandle.standardError.write(Data((text + "\n").utf8)) }
    }
}

/// A logger that drops everything (postgres-nio asks for one on each call).
let quiet = Logger(label: "coffer-bench", factory: { _ in SwiftLogNoOpLogHandler() })

/// Wall time and this process's CPU time, summed over one side's turns.
struct Turns {
    var wall = 0.0
    var cpu = 0.0

    mutating func add(_ body: () async throws -> Void) async throws {
        let (wall, cpu) = try await Clock.measure(body)
        self.wall += wall
        self.cpu += cpu
    }
}

import CofferCrypto
import CofferTestSupport
import CofferVault
import CofferStoreTestSupport
import Foundation
import PostgresNIO
import Testing
@testable import CofferStore

/// What only PostgreSQL has: several processes (service instances) on one database, a
/// connection that can die mid-batch, and rows written straight into its tables.
@Suite("PostgreSQL store", .postgres)
struct PostgresStoreTests {
    /// The outcome of `body`, as a value.
    static func outcome<T>(_ body: () async throws -> T) async -> Result<T, any Error> {
        do { return .success(try await body()) } catch { return .failure(error) }
    }

    /// Runs raw SQL on the fixture's database, as someone with access to it would.
    @Test("two instances write one zone at once: every batch lands, the log stays one chain")
    func twoInstances() async throws {
        try await withStore(.postgres) { f in
            let zone = try await f.db.createZone(named: "Busy")
            let other = try await f.otherStore()
            let second = try await other.openSession(vault: f.vault)
            try await withThrowingTaskGroup(of: Void.self) { group in
                for (label, session) in [("a", f.alice), ("b", second)] {
                    group.addTask {
                        for batch in 0..<15 {
                            let records = (0..<8).map { BackendSuiteTests.note(zone, "\(label)-\(batch)-\($0)", title: label, body: "\(batch)") }
                            _ = try await session.privateDatabase.modify(saving: records, in: zone)
                        }
                    }
                }
                try await group.waitForAll()
            }
            await other.close()
            let fresh = try await f.fresh(f.alice)
            var all = [Record]()
            var after: String?
            while let page = Optional(try await fresh.privateDatabase.records(in: zone, after: after, limit: 100)), let last = page.last {
                all += page
                after = last.name
            }
            #expect(all.count == 2 * 15 * 8)
            let head = try #require(try await fresh.privateDatabase.zones().first).sequence
            #expect(head == Int64(1 + 2 * 15)) // the genesis and one commit a batch
        }
    }

    @Test("the blocking contact calls are refused on PostgreSQL, naming their async forms, which answer")
    func blockingCallsRefused() async throws {
        try await withStore(.postgres) { f async throws in
            let card = ContactCard(vault: f.vault)
            let refusals: [Result<Void, any Error>] = [
                Result { _ = try blocking { try f.store.addContact(card) } },
                Result { _ = try blocking { try f.store.contacts() } },
                Result { _ = try blocking { try f.store.contact(matching: f.vault.identity.userID) } },
            ]
            for refusal in refusals {
                guard case .failure(let error as StoreError) = refusal else { Issue.record("a blocking call answered on PostgreSQL"); continue }
                #expect(error.code == .notSupported && error.message.contains("addContact, contacts and contact(matching:) with await"), "\(error)")
            }
            // The session added its own card: this one is the same, or a second newer when the
            // machine is slow (made after the session's), never a card the store lacked.
            #expect(try await f.store.addContact(card) != .added)
            #expect(try await f.store.addContact(card) == .unchanged)
            #expect(try await f.store.contacts().map(\.userID) == [f.vault.identity.userID])
            #expect(try await f.store.contact(matching: f.vault.identity.userID).name == f.vault.identity.name)
        }
    }

    @Test("two instances update one record with the same change tag: exactly one wins, the other gets the winner's record")
    func exactConflicts() async throws {
        try await withStore(.postgres) { f in
            let zone = try await f.db.createZone(named: "Contested")
            let other = try await f.otherStore()
            let second = try await other.openSession(vault: f.vault)
            var current = try await f.db.save(BackendSuiteTests.note(zone, "r", title: "start", body: "0"))
            for round in 0..<10 {
                var mine = current, theirs = current
                mine.values["title"] = .string("a\(round)")
                theirs.values["title"] = .string("b\(round)")
                async let a = Self.outcome { try await f.db.save(mine) }
                async let b = Self.outcome { try await second.privateDatabase.save(theirs) }
                let results = await [a, b]
                let won = results.compactMap { try? $0.get() }
                #expect(won.count == 1, "round \(round): \(results)")
                for case .failure(let error as StoreError) in results {
                    #expect(error.code == .serverRecordChanged)
                    #expect(error.serverRecord?.values["title"] == won.first?.values["title"])
                }
                current = try #require(won.first)
            }
            await other.close()
            #expect(try await f.fresh(f.alice).privateDatabase.record(named: "r", in: zone).changeTag == current.changeTag)
        }
    }

    @Test("a connection killed mid-batch leaves nothing half-written, and the retry succeeds")
    func killedConnection() async throws {
        try await withStore(.postgres) { f in
            let zone = try await f.db.createZone(named: "Killed")
            let url = try #require(f.postgres)
            // Killed after a growing delay, until two batches were cut (a kill that came before
            // or after a batch's transaction leaves it whole).
            var cut = 0, saved = 0
            for attempt in 0..<30 where cut < 2 {
                let records = (0..<300).map { BackendSuiteTests.note(zone, "k\(attempt)-\($0)", title: "t", body: String(repeating: "x", count: 200)) }
                let killer = Task {
                    try await Task.sleep(for: .milliseconds(10 + 10 * attempt))
                    let admin = PostgresConnector(url: url, password: PostgresPassword.lookup(for: url), timeouts: PostgresTestServer.timeouts)
                    try await admin.query("SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = \(url.database) AND pid <> pg_backend_pid()")
                    await admin.close()
                }
                let first = await Self.outcome { try await f.db.modify(saving: records, in: zone) }
                try await killer.value
                let found = try await f.db.records(named: records.map(\.name), in: zone).values.filter { (try? $0.get()) != nil }.count
                switch first {
                case .success: #expect(found == records.count)
                case .failure(let error):
                    #expect((error as? StoreError)?.code == .serviceUnavailable, "\(error)")
                    // All or nothing (a kill during COMMIT may come after the commit).
                    #expect(found == 0 || found == records.count, "a killed batch left \(found) of \(records.count) records")
                    if found == 0 {
                        cut += 1
                        _ = try await f.db.modify(saving: records, in: zone)
                    }
                }
                saved += 1
            }
            #expect(cut == 2, "no kill came while a batch was being written")
            let fresh = try await f.fresh(f.alice)
            #expect(try await fresh.privateDatabase.records(in: zone, limit: 10_000).count == saved * 300)
        }
    }

    @Test("a record row edited in the database is refused, naming the record")
    func editedRow() async throws {
        try await withStore(.postgres) { f in
            let zone = try await f.db.createZone(named: "Edited")
            _ = try await f.db.save(BackendSuiteTests.note(zone, "n1", title: "honest", body: "b"))
            try await f.postgresAdmin { try await $0.query(#"UPDATE record SET plain = '{"rank":2,"title":"forged"}' WHERE name = 'n1'"#) }
            let error = await expectStoreError(.integrityFailure) { try await f.fresh(f.alice).privateDatabase.record(named: "n1", in: zone) }
            #expect(error?.message.contains("n1") == true)
        }
    }

    @Test("a log entry planted in the database, or the log cut back, is refused")
    func plantedAndCutLog() async throws {
        try await withStore(.postgres) { f in
            let zone = try await f.db.createZone(named: "Logged")
            _ = try await f.db.save(BackendSuiteTests.note(zone, "n1", title: "t", body: "b"))
            _ = try await f.db.save(BackendSuiteTests.note(zone, "n2", title: "t", body: "b"))
            // Cut: the newest entry goes. Alice verified it before, so her marks refuse the store.
            try f.alice.saveMarks()
            try await f.postgresAdmin { try await $0.query("DELETE FROM zone_log WHERE seq = (SELECT max(seq) FROM zone_log)") }
            let cut = await expectStoreError(.integrityFailure) { try await f.fresh(f.alice).privateDatabase.record(named: "n1", in: zone) }
            #expect(cut?.message.contains("rolled back") == true)
            // Planted: an entry signed by nobody the store knows.
            try await f.postgresAdmin { admin in
                try await admin.query("""
                    INSERT INTO zone_log (zone_id, seq, kind, author_id, body, signature, hash)
                    SELECT zone_id, max(seq) + 1, 3, 'deadbeefdeadbeefdeadbeefdeadbeef', '\\x00'::bytea, decode(repeat('00', 64), 'hex'), decode(repeat('11', 32), 'hex')
                    FROM zone_log GROUP BY zone_id
                    """)
            }
            await expectStoreError(.integrityFailure) { try await f.fresh(f.alice).privateDatabase.record(named: "n1", in: zone) }
        }
    }

    @Test("a query reads the field's index; a field typed differently in two zones is read as each zone types it")
    func queryIndexes() async throws {
        try await withStore(.postgres) { f in
            let words = try await f.db.createZone(named: "Words"), numbers = try await f.db.createZone(named: "Numbers")
            _ = try await f.db.modify(saving: (0..<40).map { i in
                makeRecord("Item", "w\(i)", in: words, plain: ["k": .string(String(format: "%02d", 39 - i))])
            }, in: words)
            _ = try await f.db.modify(saving: (0..<40).map { i in makeRecord("Item", "n\(i)", in: numbers, plain: ["k": .int(Int64(39 - i))]) },
                                      in: numbers)
            // As text, "10" sorts before "9"; as numbers, after.
            let text = try await f.db.query(Query(recordType: "Item", predicates: [.init("k", .lessThan, "10")], sort: [.init("k")]), in: words)
            #expect(recordNames(text.records) == (30...39).reversed().map { "w\($0)" })
            let numeric = try await f.db.query(Query(recordType: "Item", predicates: [.init("k", .lessThan, 10)], sort: [.init("k")]), in: numbers)
            #expect(recordNames(numeric.records) == (30...39).reversed().map { "n\($0)" })
            // One index per kind, each on the expression the query reads, so the planner can use it.
            let plan = QueryPlan(recordType: "Item", predicates: [.init(field: "k", type: .int, comparison: .equal, value: .int(3))],
                                 sorts: [], after: nil, limit: 10)
            try await f.postgresAdmin { admin in
                let names = try await admin.query("SELECT indexname FROM pg_indexes WHERE tablename = 'record' AND indexname LIKE 'record_field_%'")
                    .map { try $0.decode(String.self) }
                #expect(Set(names) == [PostgresQueries.indexName(recordType: "Item", field: "k", type: .string),
                                       PostgresQueries.indexName(recordType: "Item", field: "k", type: .int)])
                try await admin.transaction { tx in
                    try await tx.query("SET LOCAL enable_seqscan = off")
                    let select = PostgresQueries.select(plan, zoneRowID: 2, columns: "name")
                    let explained = try await tx.query(PostgresQuery(unsafeSQL: "EXPLAIN " + select.sql, binds: select.binds))
                        .map { try $0.decode(String.self) }.joined(separator: "\n")
                    #expect(explained.contains(PostgresQueries.indexName(recordType: "Item", field: "k", type: .int)), "\(explained)")
                }
            }
        }
    }

    @Test("a query refuses rows edited in the database to match it, and plain values that are not JSON")
    func queryOverEditedRows() async throws {
        try await withStore(.postgres) { f in
            let zone = try await f.db.createZone(named: "Edited")
            _ = try await f.db.modify(saving: (1...5).map { BackendSuiteTests.note(zone, String(repeating: "n", count: $0), title: "t\($0)", body: "b") },
                                      in: zone)
            let query = Query(recordType: "Note", predicates: [.init("title", .equal, "t2")])
            #expect(recordNames(try await f.db.query(query, in: zone).records) == ["nn"])
            // Someone with the database's password makes another row match.
            try await f.postgresAdmin { try await $0.query(#"UPDATE record SET plain = '{"rank":4,"title":"t2"}' WHERE name = 'nnnn'"#) }
            let edited = try await f.fresh(f.alice).privateDatabase.query(query, in: zone)
            #expect(recordNames(edited.records) == ["nn"])
            #expect(edited.refused["nnnn"]?.code == .integrityFailure)
            // Plain values that are not JSON: the field's index refuses them, so it goes first.
            let index = PostgresQueries.indexName(recordType: "Note", field: "title", type: .string)
            await #expect(throws: (any Error).self) {
                try await f.postgresAdmin { try await $0.query("UPDATE record SET plain = 'not json' WHERE name = 'nnn'") }
            }
            try await f.postgresAdmin { admin in
                try await admin.query(PostgresQuery(unsafeSQL: "DROP INDEX \(index)"))
                try await admin.query("UPDATE record SET plain = 'not json' WHERE name = 'nnn'")
            }
            let error = await expectStoreError(.integrityFailure) { try await f.fresh(f.alice).privateDatabase.query(query, in: zone) }
            #expect(error?.message.contains("not JSON") == true)
        }
    }

    @Test("a fresh session lists 100 zones, and audits them, though each zone's log is read and verified")
    func manyZones() async throws {
        try await withStore(.postgres) { f in
            for i in 0..<100 { _ = try await f.db.createZone(named: String(format: "Z%03d", i)) }
            let fresh = try await f.fresh(f.alice)
            #expect(try await fresh.privateDatabase.zones().count == 100)
            let report = try await f.fresh(f.alice).audit()
            #expect(report.zones == 100 && report.findings.isEmpty, "\(report.findings.prefix(3))")
        }
    }

    @Test("a zone of 150 commits is audited and re-keyed: each entry's lists are read in one round")
    func manyCommits() async throws {
        try await withStore(.postgres) { f in
            let zone = try await f.db.createZone(named: "Busy")
            for i in 0..<150 { _ = try await f.db.save(BackendSuiteTests.note(zone, "n\(i)", title: "t", body: "b")) }
            let report = try await f.fresh(f.alice).audit()
            #expect(report.commits == 150 && report.records == 150 && report.findings.isEmpty, "\(report.findings.prefix(3))")
            let bob = try await f.user("Bob Builder", "bob@example.com")
            _ = try await f.alice.share(zone: zone, title: "t")
            _ = try await f.alice.addParticipant(bob.userID, permission: .readOnly, to: zone)
            _ = try await f.alice.removeParticipant(bob.userID, from: zone)
            #expect(try await f.fresh(f.alice).rekey(zone: zone) == 150)
            #expect(try await f.fresh(f.alice).privateDatabase.records(in: zone, limit: 400).count == 150)
        }
    }

    @Test("sharing 30 records with 90 descendants moves all 120 in one operation")
    func moveManyRecords() async throws {
        try await withStore(.postgres) { f in
            let inbox = try await f.db.createZone(named: "Inbox")
            var records = [CofferStore.Record]()
            for i in 0..<30 {
                records.append(BackendSuiteTests.note(inbox, "r\(i)", title: "root", body: "b"))
                records.append(BackendSuiteTests.note(inbox, "c\(i)", title: "child", body: "b", parent: "r\(i)"))
                records.append(BackendSuiteTests.note(inbox, "g\(i)", title: "grandchild", body: "b", parent: "c\(i)"))
                records.append(BackendSuiteTests.note(inbox, "h\(i)", title: "great-grandchild", body: "b", parent: "g\(i)"))
            }
            _ = try await f.db.modify(saving: records, in: inbox)
            let share = try await f.alice.share(records: (0..<30).map { "r\($0)" }, in: inbox, intoZoneNamed: "Shared")
            let fresh = try await f.fresh(f.alice)
            #expect(try await fresh.privateDatabase.records(in: share.zoneID, limit: 400).count == 120)
            #expect(try await fresh.privateDatabase.records(in: inbox, limit: 400).isEmpty)
        }
    }

    @Test("scanning for plaintext needs the store's files: on PostgreSQL it is .notSupported, and the rest of an audit runs")
    func plaintextScan() async throws {
        try await withStore(.postgres) { f in
            let zone = try await f.db.createZone(named: "Notes")
            _ = try await f.db.save(BackendSuiteTests.note(zone, "n1", title: "t", body: "secret words"))
            let error = await expectStoreError(.notSupported) { try await f.alice.audit(plaintexts: ["secret words"]) }
            #expect(error?.message.contains("PostgreSQL") == true)
            let report = try await f.alice.audit()
            #expect(report.findings.isEmpty, "\(report.findings)")
            #expect(report.zones == 1 && report.records == 1)
        }
    }

    @Test("a live stream wakes on a commit made by another process (the coffer CLI) long before its next poll",
          .enabled(if: cofferExecutable() != nil, "the coffer executable is not built next to the test bundle"))
    func streamSeesAnotherProcess() async throws {
        try await withStore(.postgres) { f in
            let executable = try #require(cofferExecutable())
            let url = try #require(f.postgres)
            let zone = try await f.db.createZone(named: "Notes")
            let caughtUp = try await f.db.changes(in: zone, since: nil).token
            // Polled every 10 minutes: only a notification brings the page within the wait below.
            let stream = f.db.changeStream(in: zone, since: caughtUp, pollInterval: .seconds(600))
            let started = ContinuousClock.now
            let environment = ["COFFER_PASSPHRASE": testPassphrase, "HOME": f.folder.path, "PATH": "/usr/bin:/bin", "COFFER_STORE": url.description]
            let arguments = ["record", "put", "Notes", "from-process", "--type", "Note", "--set", "title=hello from a process",
                             "--vault", f.vault.url.path]
            let runner = Task {
                // The stream is listening by the time this runs.
                try await Task.sleep(for: .milliseconds(500))
                return try await runCoffer(executable, arguments, environment: environment)
            }
            let page = try #require(try await firstElement(stream, seconds: 60))
            let result = try await runner.value
            #expect(result.status == 0, "stdout: \(result.out)\nstderr: \(result.err)")
            #expect(page.changed.map(\.name) == ["from-process"])
            #expect(page.changed.first?.values["title"] == .string("hello from a process"))
            #expect(ContinuousClock.now - started < .seconds(60))
        }
    }

    /// The environment and vault flag for `coffer` processes acting as the fixture's user on its database.
    static func processEnvironment(_ f: TestStore) throws -> (environment: [String: String], vault: [String]) {
        let url = try #require(f.postgres)
        return (["COFFER_PASSPHRASE": testPassphrase, "HOME": f.folder.path, "PATH": "/usr/bin:/bin", "COFFER_STORE": url.description],
                ["--vault", f.vault.url.path])
    }

    @Test("three coffer processes and this one write one zone at once: every batch lands, the log stays one chain",
          .enabled(if: cofferExecutable() != nil, "the coffer executable is not built next to the test bundle"))
    func processesWriteOneZone() async throws {
        try await withStore(.postgres) { f in
            let executable = try #require(cofferExecutable())
            let (environment, vault) = try Self.processEnvironment(f)
            let zone = try await f.db.createZone(named: "Busy")
            // Each process imports three files of 20 records, one atomic batch each.
            var files = [[String]]()
            for process in 0..<3 {
                var mine = [String]()
                for batch in 0..<3 {
                    let lines = (0..<20).map { #"{"name":"p\#(process)-\#(batch)-\#($0)","type":"Note","values":{"title":"p\#(process)"},"encryptedValues":{"body":"b"}}"# }
                    let path = f.folder.appendingPathComponent("p\(process)-\(batch).jsonl").path
                    try Data((lines.joined(separator: "\n") + "\n").utf8).write(to: URL(fileURLWithPath: path))
                    mine.append(path)
                }
                files.append(mine)
            }
            try await withThrowingTaskGroup(of: Void.self) { group in
                for mine in files {
                    group.addTask {
                        for path in mine {
                            let r = try await runCoffer(executable, ["record", "import", "Busy", path] + vault, environment: environment)
                            #expect(r.status == 0, "stdout: \(r.out)\nstderr: \(r.err)")
                        }
                    }
                }
                group.addTask {
                    for batch in 0..<10 {
                        let records = (0..<8).map { BackendSuiteTests.note(zone, "here-\(batch)-\($0)", title: "here", body: "\(batch)") }
                        _ = try await f.db.modify(saving: records, in: zone)
                    }
                }
                try await group.waitForAll()
            }
            let fresh = try await f.fresh(f.alice)
            var names = Set<String>()
            var after: String?
            while let page = Optional(try await fresh.privateDatabase.records(in: zone, after: after, limit: 200)), let last = page.last {
                names.formUnion(page.map(\.name))
                after = last.name
            }
            let expected: Int = 3 * 3 * 20 + 10 * 8
            #expect(names.count == expected)
            let head = try #require(try await fresh.privateDatabase.zones().first).sequence
            #expect(head == 20) // the genesis, and one commit for each of the 9 + 10 batches
            let report = try await fresh.audit()
            #expect(report.findings.isEmpty, "\(report.findings)")
        }
    }

    @Test("two coffer processes update one record with the same change tag: exactly one wins, the other exits 75",
          .enabled(if: cofferExecutable() != nil, "the coffer executable is not built next to the test bundle"))
    func processesConflict() async throws {
        try await withStore(.postgres) { f in
            let executable = try #require(cofferExecutable())
            let (environment, vault) = try Self.processEnvironment(f)
            let zone = try await f.db.createZone(named: "Contested")
            for round in 0..<3 {
                let saved = try await f.db.modify(saving: [BackendSuiteTests.note(zone, "r", title: "round \(round)", body: "0")], in: zone, policy: .allKeys)
                let tag = try #require(saved.saved.first?.changeTag)
                let results = try await withThrowingTaskGroup(of: (Int, Int32, String).self) { group in
                    for writer in 0..<2 {
                        group.addTask {
                            let r = try await runCoffer(executable, ["record", "put", "Contested", "r", "--type", "Note", "--set", "title=writer \(writer)",
                                                                           "--if-match", tag] + vault, environment: environment)
                            return (writer, r.status, r.err)
                        }
                    }
                    var all = [(Int, Int32, String)]()
                    for try await result in group { all.append(result) }
                    return all
                }
                let winners = results.filter { $0.1 == 0 }, losers = results.filter { $0.1 == 75 }
                #expect(winners.count == 1 && losers.count == 1, "\(results)")
                let stored = try await f.fresh(f.alice).privateDatabase.record(named: "r", in: zone)
                #expect(stored.values["title"] == .string("writer \(winners.first?.0 ?? -1)"))
            }
        }
    }
}

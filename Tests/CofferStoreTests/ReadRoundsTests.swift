import CofferCrypto
import CofferTestSupport
import CofferVault
import CofferStoreTestSupport
import Foundation
import Testing
@testable import CofferServer
@testable import CofferStore

/// One case at a time: each runs writers, readers or a thousand commits at full speed, and
/// together they would starve the suites that run beside them.
@Suite("Reads that finish: a bounded number of read rounds, and reads beside busy writers", .serialized)
struct ReadRoundsTests {
    static func note(_ zone: ZoneID, _ name: String, rank: Int) -> Record {
        var record = Record(type: "Note", name: name, zone: zone)
        record.values["title"] = .string("note \(name)")
        record.values["rank"] = .int(Int64(rank))
        record.encryptedValues["body"] = .string("secret of \(name)")
        return record
    }

    /// Runs `body` counting the read rounds of the store operations it runs.
    static func counting<R>(_ body: () async throws -> R) async rethrows -> (R, ReadRounds.Tally) {
        let rounds = ReadRounds()
        let result = try await ReadRounds.$current.withValue(rounds) { try await body() }
        return (result, rounds.tally.withLock { $0 })
    }

    /// The most read rounds any one operation of this suite may take: a constant, whatever the
    /// size of what it reads.
    static let roundsBound = 8

    @Test("a change feed over 1,000 single-record commits, with deletions, pages through at every page size in a bounded number of read rounds; an audit of them finishes",
          arguments: TestBackend.all)
    func feedOverManyCommits(_ backend: TestBackend) async throws {
        try await withStore(backend) { f in
            let db = f.alice.privateDatabase
            let zone = try await db.createZone(named: "Busy")
            for i in 0..<1_000 { _ = try await db.save(Self.note(zone, "n\(i)", rank: i)) }
            for i in stride(from: 0, to: 1_000, by: 10) { try await db.delete(recordNamed: "n\(i)", in: zone) }
            // A fresh session verifies everything again: nothing is cached from the writes.
            let reader = try await f.otherStoreSession(f.alice).privateDatabase
            for limit in [100, 400, Limits.maxQueryLimit] {
                let ((changed, deleted), tally) = try await Self.counting {
                    var changed = Set<String>(), deleted = Set<String>(), token: ChangeToken?
                    while true {
                        let page = try await reader.changes(in: zone, since: token, limit: limit)
                        #expect(page.refused.isEmpty, "\(page.refused)")
                        changed.formUnion(page.changed.map(\.name))
                        deleted.formUnion(page.deleted.map(\.name))
                        token = page.token
                        if !page.moreComing { break }
                    }
                    return (changed, deleted)
                }
                #expect(changed.count == 900, "page size \(limit)")
                #expect(deleted.count == 100, "page size \(limit)")
                #expect(tally.most <= Self.roundsBound, "page size \(limit): \(tally)")
            }
            // From a token before the deletions: every deletion, each believed from its signed entry.
            let before = try await Self.counting {
                var deleted = Set<String>(), token: ChangeToken? = try await reader.changes(in: zone, since: nil, limit: 1).token
                while true {
                    let page = try await reader.changes(in: zone, since: token, limit: 400)
                    #expect(page.refused.isEmpty, "\(page.refused)")
                    deleted.formUnion(page.deleted.map(\.name))
                    token = page.token
                    if !page.moreComing { break }
                }
                return deleted
            }
            #expect(before.0.count == 100)
            #expect(before.1.most <= Self.roundsBound, "\(before.1)")
            // An audit reads the lists of every one of the 1,100 commits: more reads than a
            // server takes in one request.
            let (report, tally) = try await Self.counting { try await f.otherStoreSession(f.alice).audit() }
            #expect(report.findings.isEmpty && report.commits == 1_100 && report.records == 900, "\(report)")
            #expect(tally.most <= Self.roundsBound, "\(tally)")
        }
    }

    @Test("an import of 6,000 records, then again of the same lines (each record checked against the stored one), then a backup and an audit of them, each in a bounded number of read rounds",
          arguments: TestBackend.all)
    func importInBoundedRounds(_ backend: TestBackend) async throws {
        try await withStore(backend) { f in
            let db = f.alice.privateDatabase
            let zone = try await db.createZone(named: "Imported")
            var lines = ""
            for i in 0..<6_000 {
                lines += #"{"name": "n\#(i)", "type": "Note", "values": {"title": "note \#(i)"}, "encryptedValues": {"body": "secret \#(i)"}}"# + "\n"
            }
            let data = Data(lines.utf8)
            let (first, tally) = try await Self.counting { try await db.importRecords(jsonLines: data, into: zone) }
            #expect(first.records == 6_000, "\(first)")
            #expect(tally.most <= Self.roundsBound, "\(tally)")
            // The same lines again: every name exists, its type is read, each stored record compared.
            let (again, tally2) = try await Self.counting {
                var checked = try await RecordImport(jsonLines: data, into: zone, of: db)
                return try await checked.skipStored(in: db)
            }
            #expect(again == 6_000)
            #expect(tally2.most <= Self.roundsBound, "\(tally2)")
            // A backup reads the zone a page of rows at a time, each page in bounded rounds; an
            // audit checks every record.
            let reader = try await f.otherStoreSession(f.alice)
            let (summary, tally3) = try await Self.counting { try await reader.writeBackup(to: BackupFormat.MemorySink()) }
            #expect(summary.recordCount == 6_000)
            #expect(tally3.most <= Self.roundsBound, "\(tally3)")
            let (report, tally4) = try await Self.counting { try await reader.audit() }
            #expect(report.findings.isEmpty && report.records == 6_000, "\(report.findings)")
            #expect(tally4.most <= Self.roundsBound, "\(tally4)")
        }
    }

    @Test("8 writers and 2 readers on one zone: every feed and query completes, none of them busy", arguments: TestBackend.all)
    func readsBesideWriters(_ backend: TestBackend) async throws {
        try await withStore(backend) { f in
            let zone = try await f.alice.privateDatabase.createZone(named: "Busy")
            for i in 0..<50 { _ = try await f.alice.privateDatabase.save(Self.note(zone, "seed\(i)", rank: i)) }
            var writers = [Session](), readers = [Session]()
            for _ in 0..<8 { writers.append(try await f.otherStoreSession(f.alice)) }
            for _ in 0..<2 { readers.append(try await f.otherStoreSession(f.alice)) }
            let deadline = ContinuousClock.now + .seconds(4)
            let reads = Locked(0), writes = Locked(0), writerFailures = Locked([String]())
            let rounds = ReadRounds()
            try await withThrowingTaskGroup(of: Void.self) { group in
                for (w, writer) in writers.enumerated() {
                    group.addTask {
                        var i = 0
                        while ContinuousClock.now < deadline {
                            do {
                                _ = try await writer.privateDatabase.save(Self.note(zone, "w\(w)-\(i)", rank: i))
                                writes.withLock { $0 += 1 }
                            } catch let error as StoreError where error.code == .busy {
                                writerFailures.withLock { $0.append(error.message) }
                            }
                            i += 1
                        }
                    }
                }
                for (r, reader) in readers.enumerated() {
                    group.addTask {
                        try await ReadRounds.$current.withValue(rounds) {
                            while ContinuousClock.now < deadline {
                                if r == 0 {
                                    var token: ChangeToken?
                                    repeat {
                                        let page = try await reader.privateDatabase.changes(in: zone, since: token, limit: 100)
                                        #expect(page.refused.isEmpty, "\(page.refused)")
                                        token = page.moreComing ? page.token : nil
                                    } while token != nil
                                } else {
                                    let result = try await reader.privateDatabase.query(
                                        Query(recordType: "Note", predicates: [.init("rank", .lessThan, .int(20))], sort: [.init("rank")]), in: zone)
                                    #expect(result.records.allSatisfy { ($0.values["rank"]?.intValue ?? 99) < 20 })
                                }
                                reads.withLock { $0 += 1 }
                            }
                        }
                    }
                }
                try await group.waitForAll()
            }
            let tally = rounds.tally.withLock { $0 }
            #expect(reads.withLock { $0 } > 0)
            #expect(writes.withLock { $0 } > 0)
            // Writers race for one zone's head and may still give up (busy) under this load:
            // what this test holds to is the readers'. Each read ran to its end (a failed read
            // throws out of the group above).
            if backend != .sqlite {
                // Each read starts over at most once: its second run reads on a pin.
                #expect(tally.mostRestarts <= 1, "\(tally)")
            }
            print("\(backend): \(reads.withLock { $0 }) reads and \(writes.withLock { $0 }) writes in 4 s, \(writerFailures.withLock { $0.count }) writes busy; \(tally)")
        }
    }
    @Test("a backup beside a writer: every backup is made from one state of the store, none of them busy, each holding what it verified",
          arguments: TestBackend.all)
    func backupBesideWriter(_ backend: TestBackend) async throws {
        try await withStore(backend) { f in
            let zone = try await f.alice.privateDatabase.createZone(named: "Busy")
            for i in 0..<100 { _ = try await f.alice.privateDatabase.save(Self.note(zone, "seed\(i)", rank: i)) }
            let writer = try await f.otherStoreSession(f.alice), backer = try await f.otherStoreSession(f.alice)
            let stop = Locked(false), written = Locked(0)
            try await withThrowingTaskGroup(of: Void.self) { group in
                group.addTask {
                    var i = 0
                    while !stop.withLock({ $0 }) {
                        _ = try await writer.privateDatabase.save(Self.note(zone, "w\(i)", rank: i))
                        written.withLock { $0 += 1 }
                        i += 1
                    }
                }
                defer { stop.withLock { $0 = true } }
                var previous = 100, backedUp = [Backup](), overlapped = 0
                for _ in 0..<4 {
                    let before = written.withLock { $0 }
                    let backup = try await backer.makeBackup()
                    if written.withLock({ $0 }) > before { overlapped += 1 }
                    let count = try #require(backup.summaries.first { $0.zone == zone }).records
                    #expect(count >= previous, "a backup holds at least what the one before held")
                    previous = count
                    backedUp.append(backup)
                }
                stop.withLock { $0 = true }
                try await group.waitForAll()
                #expect(overlapped > 0, "the writer wrote while a backup ran")
                // The last one restores into a new store, which verifies clean.
                try await withTemporaryFolder { folder in
                    let target = try Store(path: folder.appendingPathComponent("restored.sqlite").path)
                    let result = try await target.openSession(vault: backer.vault).restore(try #require(backedUp.last), resettingMarks: true)
                    #expect(result.findings.isEmpty, "\(result.findings)")
                }
            }
        }
    }
}

@Suite("A server's read pin outlives a client that works between two reads")
struct ReadPinKeepAliveTests {
    @Test("reads pinned through a server see one state for longer than the server keeps an unused pin, while another client writes")
    func pinKeptAlive() async throws {
        try await withServer(.sqlite) { server in
            let alice = try await server.user("Alice Example", "alice@example.com")
            let zone = try await alice.session.privateDatabase.createZone(named: "Pinned")
            _ = try await alice.session.privateDatabase.save(ReadRoundsTests.note(zone, "first", rank: 1))
            let reader = try await server.client(alice.vault)
            let session = try await reader.openSession(vault: alice.vault)
            let writer = try await server.client(alice.vault).openSession(vault: alice.vault)
            let (before, after) = try await reader.withPinnedReads {
                let before = try await session.privateDatabase.records(in: zone).map(\.name)
                _ = try await writer.privateDatabase.save(ReadRoundsTests.note(zone, "second", rank: 2))
                // Longer than the server keeps a pin nobody uses.
                try await Task.sleep(for: StorageHost.pinIdle + .seconds(5))
                return (before, try await session.privateDatabase.records(in: zone).map(\.name))
            }
            #expect(before == ["first"] && after == ["first"], "the pin was let go: \(after)")
            #expect(try await session.privateDatabase.records(in: zone).map(\.name) == ["first", "second"])
        }
    }
}

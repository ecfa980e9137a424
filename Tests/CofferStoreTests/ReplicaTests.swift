import CofferCrypto
import CofferStoreTestSupport
import CofferTestSupport
import CofferVault
import Foundation
import GRDB
import Testing
@testable import CofferStore

// A client's local replica of a server (Sources/CofferStore/Replica): pulled by log position,
// verified before it is stored, read locally, and read while the server is away. Each test runs
// a real `coffer serve` process, over SQLite and (unless skipped) PostgreSQL.

private var serverBackends: [TestBackend] { TestBackend.all.filter(\.isServer) }

extension TestStore {
    /// A replica for `vault` (Alice's by default) of the test's server, in the test's folder.
    func replica(_ vault: Vault? = nil, offline: Bool = false, path: URL? = nil) async throws -> Replica {
        try await Replica.open(server: try #require(server).url, vault: vault ?? self.vault, path: path,
                               dataFolder: folder.appendingPathComponent("data"), offline: offline)
    }

    /// Alice's zone of 35 notes (n00 to n34, in one commit), and a replica (the file `name` in
    /// the test's folder) whose first pull of it was cut short after two pages of ten.
    func cutPull(_ name: String) async throws -> (zone: ZoneID, replica: Replica, path: URL) {
        let zone = try await makeZone(notes: [])
        _ = try await db.modify(saving: (0..<35).map { makeNote(String(format: "n%02d", $0), in: zone) }, in: zone)
        let path = folder.appendingPathComponent(name)
        let replica = try await replica(path: path)
        let cut = try await ReplicaPull.$pageSize.withValue(10) {
            try await ReplicaPull.$stopAfterPages.withValue(2) { try await replica.pull() }
        }
        #expect(cut.failed.first?.error.code == .serviceUnavailable)
        return (zone, replica, path)
    }
}

@Suite("Replica")
struct ReplicaTests {
    @Test("a pull brings every zone into the replica, whose reads are local and verified", arguments: serverBackends)
    func pullAndRead(_ backend: TestBackend) async throws {
        try await withStore(backend) { s in
            let zone = try await s.makeZone(notes: ["n1", "n2"])
            let replica = try await s.replica()
            #expect(replica.isOnline)
            #expect(replica.store.storeID == s.store.storeID, "a replica has its server's store id")
            #expect(replica.path.path.hasSuffix("replicas/\(Hex.encode(s.store.storeID))/\(s.alice.userID).sqlite"))
            let report = try await replica.pull()
            #expect(report.failed.isEmpty)
            #expect(report.pulled.map(\.zone) == [zone])
            #expect(report.pulled.first?.records == 2)
            let local = replica.session.privateDatabase
            #expect(noteBody(try await local.record(named: "n1", in: zone)) == "body of n1")
            let server = try await s.db.record(named: "n2", in: zone)
            let copy = try await local.record(named: "n2", in: zone)
            #expect(copy.changeTag == server.changeTag)
            #expect(copy.encryptedValues == server.encryptedValues)
            // Nothing of the records is in the replica file in the clear.
            let bytes = try Data(contentsOf: replica.path)
            #expect(bytes.range(of: Data("body of n1".utf8)) == nil)
        }
    }

    @Test("a second pull fetches only what is new: entries after the replica's head and the rows they list; deletions go", arguments: serverBackends)
    func incrementalPull(_ backend: TestBackend) async throws {
        try await withStore(backend) { s in
            let zone = try await s.makeZone(notes: ["n1", "n2", "n3"])
            let replica = try await s.replica()
            let first = try #require(try await replica.pull().pulled.first)
            _ = try await s.db.save(makeNote("n4", in: zone))
            var n1 = try await s.db.record(named: "n1", in: zone)
            n1.encryptedValues["body"] = .string("edited")
            _ = try await s.db.save(n1)
            try await s.db.delete(recordNamed: "n2", in: zone)
            let second = try #require(try await replica.pull().pulled.first)
            #expect(second.entries == 3, "three commits after the first pull")
            #expect(second.headSeq == first.headSeq + 3)
            #expect(second.records == 2, "n4 and the new n1; n3 is not fetched again")
            #expect(second.deletions == 1)
            let local = replica.session.privateDatabase
            #expect(noteBody(try await local.record(named: "n1", in: zone)) == "edited")
            #expect(noteBody(try await local.record(named: "n4", in: zone)) == "body of n4")
            await expectStoreError(.unknownItem) { _ = try await local.record(named: "n2", in: zone) }
            // The change feed of the replica names the deletion.
            let changes = try await local.changes(in: zone, since: nil)
            #expect(changes.deleted.map(\.name).contains("n2"))
            // Nothing new: nothing fetched.
            let third = try #require(try await replica.pull().pulled.first)
            #expect(third.entries == 0 && third.records == 0)
        }
    }

    @Test("offline, the replica reads what was pulled; with no replica yet, offline is an error that says so", arguments: serverBackends)
    func offlineReads(_ backend: TestBackend) async throws {
        try await withStore(backend) { s in
            let zone = try await s.makeZone(notes: ["n1"])
            await expectStoreError(.serviceUnavailable) { _ = try await s.replica(offline: true) }
            let online = try await s.replica()
            try await online.pull()
            // Written through the server and not pulled yet (nor, then, in the marks: only a
            // replica's pulls advance them).
            _ = try await #require(online.server).session.privateDatabase.save(makeNote("n2", in: zone))
            let offline = try await s.replica(offline: true)
            #expect(!offline.isOnline)
            #expect(offline.offlineReason != nil)
            #expect(noteBody(try await offline.session.privateDatabase.record(named: "n1", in: zone)) == "body of n1")
            await expectStoreError(.unknownItem) { _ = try await offline.session.privateDatabase.record(named: "n2", in: zone) }
            await expectStoreError(.serviceUnavailable) { try await offline.pull() }
            let status = try await offline.status()
            #expect(status.map(\.zone) == [zone])
            #expect(status.first?.lastSync != nil)
        }
    }

    @Test("a zone shared with a member is pulled into the member's replica and read there", arguments: serverBackends)
    func sharedZone(_ backend: TestBackend) async throws {
        try await withStore(backend) { s in
            let bob = try await s.user("Bob", "bob@example.com")
            let (zone, _) = try await s.sharedWith(bob, .readWrite)
            let replica = try await s.replica(bob.vault)
            let report = try await replica.pull()
            #expect(report.failed.isEmpty)
            #expect(report.pulled.map(\.zone) == [zone])
            #expect(noteBody(try await replica.session.sharedDatabase.record(named: "n1", in: zone)) == "body of n1")
        }
    }

    @Test("a file that is not this server's replica for this user is refused")
    func wrongFile() async throws {
        try await withStore(.server) { s in
            _ = try await s.makeZone()
            let bob = try await s.user("Bob", "bob@example.com")
            let alices = try await s.replica()
            try await alices.pull()
            // Another user's replica.
            await expectStoreError(.integrityFailure) { _ = try await s.replica(bob.vault, path: alices.path) }
            // A store of its own.
            let own = s.folder.appendingPathComponent("own.sqlite")
            _ = try Store(path: own.path)
            await expectStoreError(.integrityFailure) { _ = try await s.replica(path: own) }
        }
    }

    @Test("a server that withholds the newest row of a name is refused naming the zone, and the replica keeps what it had")
    func withheldRow() async throws {
        try await withStore(.server) { s in
            let zone = try await s.makeZone(notes: ["n1"])
            let replica = try await s.replica()
            let before = try #require(try await replica.pull().pulled.first)
            let rowID = try s.zoneRowID(zone)
            let writer = try #require(replica.server).session.privateDatabase
            _ = try await writer.save(makeNote("n2", in: zone))
            _ = try await writer.save(makeNote("n3", in: zone))
            try s.sqlite { db in try db.execute(sql: "DELETE FROM record WHERE zone_id = ? AND name = 'n3'", arguments: [rowID]) }
            let failure = try #require(try await replica.pull().failed.first)
            #expect(failure.error.code == .integrityFailure)
            #expect(failure.error.message.contains("'Notes'") && failure.error.message.contains("'n3'"))
            // Nothing of the refused pull was stored.
            #expect(try await replica.status().first?.confirmedSeq == before.headSeq)
            await expectStoreError(.unknownItem) { _ = try await replica.session.privateDatabase.record(named: "n2", in: zone) }
            #expect(noteBody(try await replica.session.privateDatabase.record(named: "n1", in: zone)) == "body of n1")
        }
    }

    @Test("a server whose log is rolled back behind the replica, or forked at its head, is refused naming the zone")
    func rolledBackOrForked() async throws {
        try await withStore(.server) { s in
            let zone = try await s.makeZone(notes: ["n1", "n2"])
            _ = try await s.db.save(makeNote("n3", in: zone))
            let replica = try await s.replica()
            let pulled = try #require(try await replica.pull().pulled.first)
            let rowID = try s.zoneRowID(zone)
            func cut(to head: Int64) throws { try s.cutLog(zoneRowID: rowID, to: head) }
            // Forked: the head entry replaced by another that Alice's key signs.
            try cut(to: pulled.headSeq - 1)
            _ = try await s.forge(in: zone, signer: s.alice, name: "n9", title: "the other branch")
            var failure = try #require(try await replica.pull().failed.first)
            #expect(failure.error.code == .integrityFailure)
            #expect(failure.error.message.contains("'Notes'") && failure.error.message.contains("forked"))
            // Rolled back: behind the replica's head.
            try cut(to: pulled.headSeq - 2)
            failure = try #require(try await replica.pull().failed.first)
            #expect(failure.error.code == .integrityFailure)
            #expect(failure.error.message.contains("'Notes'") && failure.error.message.contains("rolled back"))
            // The replica is as it was.
            #expect(try await replica.status().first?.confirmedSeq == pulled.headSeq)
            #expect(noteBody(try await replica.session.privateDatabase.record(named: "n3", in: zone)) == "body of n3")
            await expectStoreError(.unknownItem) { _ = try await replica.session.privateDatabase.record(named: "n9", in: zone) }
        }
    }

    @Test("an entry whose signature does not verify is refused, and nothing of it is stored")
    func badSignature() async throws {
        try await withStore(.server) { s in
            let zone = try await s.makeZone(notes: ["n1"])
            let replica = try await s.replica()
            let before = try #require(try await replica.pull().pulled.first)
            _ = try await #require(replica.server).session.privateDatabase.save(makeNote("n2", in: zone))
            let rowID = try s.zoneRowID(zone)
            try s.sqlite { db in
                try db.execute(sql: "UPDATE zone_log SET signature = zeroblob(64) WHERE zone_id = ? AND seq = ?", arguments: [rowID, before.headSeq + 1])
            }
            let failure = try #require(try await replica.pull().failed.first)
            #expect(failure.error.code == .integrityFailure)
            #expect(failure.error.message.contains("'Notes'"))
            #expect(try await replica.status().first?.confirmedSeq == before.headSeq, "the replica kept its head")
            await expectStoreError(.unknownItem) { _ = try await replica.session.privateDatabase.record(named: "n2", in: zone) }
        }
    }

    @Test("a zone its owner deleted, or that a member was removed from, is dropped from the member's replica; one hidden without a signed entry is kept and reported", arguments: serverBackends)
    func zonesGone(_ backend: TestBackend) async throws {
        try await withStore(backend) { s in
            let bob = try await s.user("Bob", "bob@example.com")
            let (zone, _) = try await s.sharedWith(bob, .readOnly)
            let replica = try await s.replica(bob.vault)
            try await replica.pull()
            #expect(noteBody(try await replica.session.sharedDatabase.record(named: "n1", in: zone)) == "body of n1")
            // Removed: the signed log says Bob may no longer read it.
            _ = try await s.alice.removeParticipant(bob.userID, from: zone)
            var report = try await replica.pull()
            #expect(report.dropped.map(\.zone) == [zone])
            #expect(report.dropped.first?.why == "no longer shared with you")
            #expect(report.failed.isEmpty)
            await expectStoreError(.zoneNotFound) { _ = try await replica.session.sharedDatabase.record(named: "n1", in: zone) }
            #expect(try await replica.status().isEmpty)

            // Deleted by its owner.
            let other = try await s.db.createZone(named: "Other")
            _ = try await s.db.save(makeNote("o1", in: other))
            try await s.share(other, with: [(bob, .readOnly)])
            report = try await replica.pull()
            #expect(report.pulled.map(\.zone) == [other])
            try await s.db.deleteZone(other)
            report = try await replica.pull()
            #expect(report.dropped.map(\.zone) == [other])
            #expect(report.dropped.first?.why == "deleted by its owner")
        }
    }

    @Test("a zone the server hides from a member with no signed entry is kept in the replica and reported")
    func zoneHidden() async throws {
        try await withStore(.server) { s in
            let bob = try await s.user("Bob", "bob@example.com")
            let (zone, _) = try await s.sharedWith(bob, .readOnly)
            let replica = try await s.replica(bob.vault)
            try await replica.pull()
            let rowID = try s.zoneRowID(zone)
            try s.sqlite { db in try db.execute(sql: "DELETE FROM zone_member WHERE zone_id = ?", arguments: [rowID]) }
            let report = try await replica.pull()
            #expect(report.dropped.isEmpty)
            let failure = try #require(report.failed.first)
            #expect(failure.zone == zone && failure.error.code == .integrityFailure)
            #expect(failure.error.message.contains("keeps its copy"))
            #expect(noteBody(try await replica.session.sharedDatabase.record(named: "n1", in: zone)) == "body of n1")
        }
    }

    @Test("a record row the server adds that no entry of its log writes is refused: nothing of the pull is stored")
    func rowNoEntryWrites() async throws {
        try await withStore(.server) { s in
            let zone = try await s.makeZone(notes: ["n1", "n2"])
            // A copy of n1 under another name, at the sequence of a real commit that does not list it.
            let rowID = try s.zoneRowID(zone)
            try s.sqlite { db in
                try db.execute(sql: """
                    INSERT INTO record (zone_id, name, type, parent, plain, sealed, epoch, seq, membership_seq, creator_id, modifier_id, created_at, modified_at)
                    SELECT zone_id, 'ghost', type, parent, plain, sealed, epoch, seq, membership_seq, creator_id, modifier_id, created_at, modified_at
                    FROM record WHERE zone_id = ? AND name = 'n2'
                    """, arguments: [rowID])
            }
            let replica = try await s.replica()
            let report = try await replica.pull()
            let failure = try #require(report.failed.first)
            #expect(failure.zone == zone && failure.error.code == .integrityFailure)
            #expect(failure.error.message.contains("no entry of its log writes"), "\(failure.error.message)")
            #expect(try await replica.status().isEmpty, "nothing of the pull is stored")
        }
    }

    @Test("a server whose pages end elsewhere than its entries' lists say (a row added, or one withheld) is refused as ever: the pages fetched ahead are dropped, and nothing is stored", arguments: ["added", "withheld"])
    func pagesEndElsewhere(_ how: String) async throws {
        try await withStore(.server) { s in
            let zone = try await s.makeZone(notes: [])
            _ = try await s.db.modify(saving: (0..<35).map { makeNote(String(format: "n%02d", $0), in: zone) }, in: zone)
            let rowID = try s.zoneRowID(zone)
            try s.sqlite { db in
                if how == "added" {
                    try db.execute(sql: """
                        INSERT INTO record (zone_id, name, type, parent, plain, sealed, epoch, seq, membership_seq, creator_id, modifier_id, created_at, modified_at)
                        SELECT zone_id, 'n05x', type, parent, plain, sealed, epoch, seq, membership_seq, creator_id, modifier_id, created_at, modified_at
                        FROM record WHERE zone_id = ? AND name = 'n05'
                        """, arguments: [rowID])
                } else {
                    try db.execute(sql: "DELETE FROM record WHERE zone_id = ? AND name = 'n05'", arguments: [rowID])
                }
            }
            let replica = try await s.replica()
            let report = try await ReplicaPull.$pageSize.withValue(10) { try await replica.pull() }
            let failure = try #require(report.failed.first)
            #expect(failure.zone == zone && failure.error.code == .integrityFailure)
            let message = how == "added" ? "no entry of its log writes" : "withheld or rolled back record 'n05'"
            #expect(failure.error.message.contains(message), "\(failure.error.message)")
            #expect(try await replica.status().isEmpty, "nothing of the pull is stored")
            // Every row the server sent was staged, none skipped by a page fetched ahead from where the lists said.
            let staged = try await replica.store.dbPool.read { db in try Int.fetchOne(db, sql: "SELECT count(*) FROM record WHERE zone_id NOT IN (SELECT id FROM zone)") }
            #expect(staged == (how == "added" ? 36 : 34))
        }
    }

    @Test("a record row whose plain values the server made other than JSON is refused naming it: nothing of the pull is stored")
    func plainNotJSON() async throws {
        try await withStore(.server) { s in
            let zone = try await s.makeZone(notes: ["n1", "n2"])
            let rowID = try s.zoneRowID(zone)
            try s.sqlite { db in try db.execute(sql: "UPDATE record SET plain = '{\"title\": ' WHERE zone_id = ? AND name = 'n2'", arguments: [rowID]) }
            let replica = try await s.replica()
            let failure = try #require(try await replica.pull().failed.first)
            #expect(failure.zone == zone && failure.error.code == .integrityFailure)
            #expect(failure.error.message.contains("'n2'") && failure.error.message.contains("'Notes'"), "\(failure.error.message)")
            #expect(try await replica.status().isEmpty, "nothing of the pull is stored")
        }
    }

    @Test("a pull cut short goes on from its last stored page; nothing of it is visible until the whole pull is stored", arguments: serverBackends)
    func resumedPull(_ backend: TestBackend) async throws {
        try await withStore(backend) { s in
            let zone = try await s.makeZone(notes: [])
            _ = try await s.db.modify(saving: (0..<35).map { makeNote(String(format: "n%02d", $0), in: zone) }, in: zone)
            let replica = try await s.replica()
            // Cut after two pages of ten.
            let cut = try await ReplicaPull.$pageSize.withValue(10) {
                try await ReplicaPull.$stopAfterPages.withValue(2) { try await replica.pull() }
            }
            #expect(cut.failed.first?.error.code == .serviceUnavailable)
            #expect(try await replica.status().isEmpty, "nothing of the cut pull is visible")
            // Meanwhile a staged record changes on the server: its newer version comes too.
            var n03 = try await s.db.record(named: "n03", in: zone)
            n03.encryptedValues["body"] = .string("changed meanwhile")
            _ = try await s.db.save(n03)
            let steps = Locked<[SyncProgress]>([])
            let resumed = try await ReplicaPull.$pageSize.withValue(10) { try await replica.pull { step in steps.withLock { $0.append(step) } } }
            // Progress: the zone's start, then the rows this run fetched after each page.
            #expect(steps.withLock { $0 } == [0, 10, 16].map { .pulling(zone, records: $0) })
            let pulled = try #require(resumed.pulled.first)
            #expect(pulled.records == 35)
            #expect(pulled.fetched == 16, "the 15 rows not staged yet, and n03's newer version")
            let local = replica.session.privateDatabase
            #expect(noteBody(try await local.record(named: "n03", in: zone)) == "changed meanwhile")
            #expect(noteBody(try await local.record(named: "n34", in: zone)) == "body of n34")
            #expect(try await local.records(in: zone, limit: 100).count == 35)
            // Nothing is left staged.
            let staged = try await replica.store.stageProgress(of: try await s.alice.read { db in try #require(try db.zoneRow(zone)).uid })
            #expect(staged == nil)
        }
    }

    @Test("a staged row of a zone new to the replica changed in the file before the pull goes on: the stage is dropped and the zone fetched whole, not refused at every pull")
    func freshStageChanged() async throws {
        try await withStore(.server) { s in
            let (zone, replica, _) = try await s.cutPull("fresh.sqlite")
            // n03, staged by the cut pull, changed wherever the stage keeps it.
            let changed = try await replica.store.dbPool.write { db in
                try db.execute(sql: "UPDATE replica_stage SET sealed = zeroblob(length(sealed)) WHERE name = 'n03'")
                var count = db.changesCount
                try db.execute(sql: "UPDATE record SET sealed = zeroblob(length(sealed)) WHERE name = 'n03' AND zone_id NOT IN (SELECT id FROM zone)")
                count += db.changesCount
                return count
            }
            #expect(changed == 1, "the cut pull staged n03")
            let resumed = try await ReplicaPull.$pageSize.withValue(10) { try await replica.pull() }
            #expect(resumed.failed.isEmpty, "\(resumed.failed)")
            let pulled = try #require(resumed.pulled.first)
            #expect(pulled.records == 35)
            #expect(pulled.fetched == 35, "fetched again whole")
            #expect(noteBody(try await replica.session.privateDatabase.record(named: "n03", in: zone)) == "body of n03")
        }
    }

    @Test("what a pull cut short staged of a zone the owner then deleted leaves the replica with it: the zone's rows staged in record (a zone new to the replica) or in the stage (one it holds)", arguments: ["new", "held"])
    func stageOfDeletedZone(_ how: String) async throws {
        try await withStore(.server) { s in
            let zone = try await s.makeZone(notes: [])
            let path = s.folder.appendingPathComponent("gone.sqlite")
            let replica = try await s.replica(path: path)
            if how == "held" { try await replica.pull() }
            _ = try await s.db.modify(saving: (0..<35).map { makeNote(String(format: "n%02d", $0), in: zone) }, in: zone)
            let cut = try await ReplicaPull.$pageSize.withValue(10) {
                try await ReplicaPull.$stopAfterPages.withValue(2) { try await replica.pull() }
            }
            #expect(cut.failed.first?.error.code == .serviceUnavailable)
            func staged() async throws -> Int {
                try await replica.store.dbPool.read { db in
                    try Int.fetchOne(db, sql: """
                        SELECT (SELECT count(*) FROM record WHERE zone_id NOT IN (SELECT id FROM zone)) + (SELECT count(*) FROM replica_stage)
                            + (SELECT count(*) FROM store_meta WHERE key LIKE 'stage-%')
                        """) ?? -1
                }
            }
            #expect(try await staged() == 20 + 3 + (how == "new" ? 1 : 0), "two pages staged, and where the pull stands")
            try await s.db.deleteZone(zone)
            let report = try await replica.pull()
            #expect(report.failed.isEmpty, "\(report.failed)")
            #expect(report.dropped.map(\.zone) == (how == "held" ? [zone] : []))
            #expect(try await staged() == 0, "nothing of the zone stays in the replica")
            let left = try await replica.store.dbPool.read { db in try Int.fetchOne(db, sql: "SELECT count(*) FROM zone") }
            #expect(left == 0)
        }
    }

    @Test("a zone made in the replica while the pull of a zone new to it was cut short takes another row id than the one the pull's rows are stored under: neither zone shows the other's records")
    func zoneMadeDuringCutPull() async throws {
        try await withStore(.server) { s in
            let (zone, replica, path) = try await s.cutPull("made.sqlite")
            // Made offline in the replica, as `zone create --offline` does.
            let offline = try await s.replica(offline: true, path: path)
            let trips = try await offline.session.privateDatabase.createZone(named: "Trips")
            #expect(try await offline.session.privateDatabase.records(in: trips, limit: 100).isEmpty)
            let resumed = try await ReplicaPull.$pageSize.withValue(10) { try await replica.pull([zone]) }
            let pulled = try #require(resumed.pulled.first, "\(resumed.failed)")
            #expect(pulled.records == 35 && pulled.fetched == 15)
            let local = try await s.replica(offline: true, path: path).session.privateDatabase
            #expect(try await local.records(in: zone, limit: 100).count == 35)
            #expect(try await local.records(in: trips, limit: 100).isEmpty)
        }
    }

    @Test("a record whose plain values the server made other than JSON, pulled into a replica that has a field index of its type, is refused naming the zone: nothing of the pull is stored")
    func plainNotJSONIndexed() async throws {
        try await withStore(.server) { s in
            let notes = try await s.makeZone(notes: ["n1"])
            let replica = try await s.replica()
            try await replica.pull()
            // A query on a plain field makes the replica's index of it, for every zone's notes.
            _ = try await replica.session.privateDatabase.query(Query(recordType: "Note", predicates: [.init("title", .equal, "x")]), in: notes)
            let other = try await s.makeZone("Other", notes: ["o1", "o2"])
            let rowID = try s.zoneRowID(other)
            try s.sqlite { db in try db.execute(sql: "UPDATE record SET plain = '{\"title\": ' WHERE zone_id = ? AND name = 'o2'", arguments: [rowID]) }
            let failure = try #require(try await replica.pull().failed.first)
            #expect(failure.zone == other && failure.error.code == .integrityFailure)
            #expect(failure.error.message.contains("'Other'") && failure.error.message.contains("JSON"), "\(failure.error.message)")
            #expect(try await replica.status().map(\.zone) == [notes], "nothing of the pull is stored")
        }
    }

    @Test("a zone moved to a server that loses a record once it accepted the copy stays here whole: the copy there is checked record by record before this one is deleted")
    func moveToLosingServer() async throws {
        try await withStore(.server) { s in
            let local = try Store(path: s.folder.appendingPathComponent("local.sqlite").path)
            let session = try await local.openSession(vault: s.vault)
            let zone = try await session.privateDatabase.createZone(named: "Moving")
            _ = try await session.privateDatabase.modify(saving: ["m1", "m2", "m3"].map { makeNote($0, in: zone) }, in: zone)
            // The server drops m2 from its copy once the copy is done, and still shows the zone at its head.
            let refused = await expectStoreError(.integrityFailure) {
                try await Session.$afterZoneCopied.withValue({
                    try s.sqlite { db in
                        try db.execute(sql: "DELETE FROM record WHERE name = 'm2' AND zone_id = (SELECT id FROM zone WHERE name = 'Moving')")
                    }
                }) { _ = try await session.moveZone(zone, to: s.store, origin: "http://test.invalid") }
            }
            #expect(refused?.message.contains("copy of zone 'Moving' does not check out") == true, "\(refused?.message ?? "")")
            #expect(try await local.movedZoneOrigin(zone) == nil)
            let kept = try await session.privateDatabase.records(in: zone, limit: 10)
            #expect(kept.map(\.name).sorted() == ["m1", "m2", "m3"], "the local copy stays whole")
        }
    }

    @Test("a pull cut short in a replica made before the stage became a rowid table goes on from its last page after the upgrade")
    func resumedPullAcrossUpgrade() async throws {
        try await withStore(.server) { s in
            let (zone, _, path) = try await s.cutPull("upgraded.sqlite")
            let uid = try await s.alice.read { db in try #require(try db.zoneRow(zone)).uid }
            // The file as the migrations before the upgrade left it: the stage a WITHOUT ROWID
            // table, holding the 20 rows of the cut pull (versions before the upgrade staged the
            // rows of a zone new to the replica there too, not in `record`), and the upgrade not run.
            let pool = try DatabasePool(path: path.path)
            try await pool.write { db in
                try db.execute(sql: """
                    INSERT INTO replica_stage (zone_uid, name, type, parent, seq, epoch, membership_seq, creator_id, modifier_id, created, modified, plain, sealed)
                        SELECT ?, name, type, parent, seq, epoch, membership_seq, creator_id, modifier_id, created_at, modified_at, CAST(plain AS BLOB), sealed
                        FROM record WHERE zone_id NOT IN (SELECT id FROM zone);
                    DELETE FROM record WHERE zone_id NOT IN (SELECT id FROM zone);
                    DELETE FROM store_meta WHERE key LIKE 'stage-zone:%';
                    """, arguments: [Data(uid)])
                try db.execute(sql: """
                    CREATE TABLE replica_stage_old (
                        zone_uid BLOB NOT NULL CHECK (length(zone_uid) = 16), name TEXT NOT NULL, type TEXT NOT NULL, parent TEXT,
                        seq INTEGER NOT NULL, epoch INTEGER NOT NULL, membership_seq INTEGER NOT NULL, creator_id TEXT NOT NULL,
                        modifier_id TEXT NOT NULL, created REAL NOT NULL, modified REAL NOT NULL, plain BLOB NOT NULL, sealed BLOB,
                        PRIMARY KEY (zone_uid, name)
                    ) STRICT, WITHOUT ROWID;
                    INSERT INTO replica_stage_old SELECT zone_uid, name, type, parent, seq, epoch, membership_seq, creator_id, modifier_id,
                                                         created, modified, plain, sealed FROM replica_stage;
                    DROP TABLE replica_stage;
                    ALTER TABLE replica_stage_old RENAME TO replica_stage;
                    DELETE FROM grdb_migrations WHERE identifier = 'v13-replica-stage-rowid';
                    """)
                #expect(try Int.fetchOne(db, sql: "SELECT count(*) FROM replica_stage") == 20)
            }
            try pool.close()
            // Opened again: upgraded, with the staged rows kept, so the pull goes on from them.
            let reopened = try await s.replica(path: path)
            let reader = try DatabasePool(path: path.path)
            let tableSQL = try await reader.read { db in
                try String.fetchOne(db, sql: "SELECT sql FROM sqlite_schema WHERE type = 'table' AND name = 'replica_stage'")
            }
            try reader.close()
            #expect(tableSQL?.contains("WITHOUT ROWID") == false)
            let resumed = try await ReplicaPull.$pageSize.withValue(10) { try await reopened.pull() }
            let pulled = try #require(resumed.pulled.first)
            #expect(pulled.records == 35)
            #expect(pulled.fetched == 15, "only the rows not staged before the upgrade")
            #expect(try await reopened.session.privateDatabase.records(in: zone, limit: 100).count == 35)
        }
    }

    @Test("an older version of a record put in the replica's stage (a copy of the file) is dropped, never stored over the newer one")
    func oldRowStaged() async throws {
        try await withStore(.server) { s in
            let zone = try await s.makeZone(notes: ["n1"])
            let path = s.folder.appendingPathComponent("staged.sqlite")
            let replica = try await s.replica(path: path)
            try await replica.pull()
            let uid = try await s.alice.read { db in try #require(try db.zoneRow(zone)).uid }
            let file = try DatabasePool(path: path.path)
            defer { try? file.close() }
            // n1 as first pulled, signed by its entry: kept aside.
            let old = try #require(try await file.read { db in try Row.fetchOne(db, sql: """
                SELECT name, type, parent, seq, epoch, membership_seq, creator_id, modifier_id, created_at, modified_at, CAST(plain AS BLOB), sealed
                FROM record WHERE name = 'n1'
                """).map { Array($0.databaseValues) } })
            var n1 = try await s.db.record(named: "n1", in: zone)
            n1.encryptedValues["body"] = .string("the newer body")
            _ = try await s.db.save(n1)
            let head = try #require(try await replica.pull().pulled.first).headSeq
            _ = try await s.db.save(makeNote("n2", in: zone))
            // The old row staged as if a pull from the replica's head had fetched it.
            try await file.write { db in
                try db.execute(sql: """
                    INSERT INTO replica_stage (zone_uid, name, type, parent, seq, epoch, membership_seq, creator_id, modifier_id, created, modified, plain, sealed)
                    VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
                    """, arguments: StatementArguments([Data(uid)] + Array(old)))
                let hex = uid.map { String(format: "%02x", $0) }.joined()
                for (key, value) in [("stage-after:", "\(head)"), ("stage-seq:", "\(head)"), ("stage-name:", "n1")] {
                    try db.execute(sql: "INSERT OR REPLACE INTO store_meta (key, value) VALUES (?, ?)", arguments: [key + hex, Data(value.utf8)])
                }
            }
            let pulled = try #require(try await replica.pull().pulled.first)
            #expect(pulled.records == 1, "n2 alone: the old row was dropped with the stage")
            let local = replica.session.privateDatabase
            #expect(noteBody(try await local.record(named: "n1", in: zone)) == "the newer body")
            #expect(try await file.read { db in try Int64.fetchOne(db, sql: "SELECT seq FROM record WHERE name = 'n1'") } == head,
                    "the file holds n1's row of the entry that wrote it last")
            #expect(noteBody(try await local.record(named: "n2", in: zone)) == "body of n2")
            #expect(try await replica.store.stageProgress(of: uid) == nil)
        }
    }

    @Test("SyncEngine: fetchChanges reports each zone; run() pulls what lands on the server as it lands, and says when the server goes away", arguments: serverBackends)
    func syncEngine(_ backend: TestBackend) async throws {
        try await withStore(backend) { s in
            let zone = try await s.makeZone(notes: ["n1"])
            let engine = SyncEngine(replica: try await s.replica())
            let first = try await engine.fetchChanges()
            #expect(first.pulled.map(\.zone) == [zone])
            var iterator = engine.events.makeAsyncIterator()
            guard case .fetched(let fetched)? = await iterator.next() else { Issue.record("no fetched event"); return }
            #expect(fetched.zone == zone && fetched.records == 1)

            let running = Task { try await engine.run() }
            defer { running.cancel() }
            _ = try await s.db.save(makeNote("n2", in: zone))
            let seen = try await withTimeout(seconds: 30) { () -> Bool in
                for await event in engine.events {
                    if case .fetched(let pulled) = event, pulled.records == 1 { return true }
                }
                return false
            }
            #expect(seen)
            #expect(noteBody(try await engine.replica.session.privateDatabase.record(named: "n2", in: zone)) == "body of n2")
            // The server goes away: the engine says so and keeps trying; the replica still reads.
            try await #require(s.server).kill()
            let offline = try await withTimeout(seconds: 60) { () -> Bool in
                for await event in engine.events {
                    if case .offline = event { return true }
                }
                return false
            }
            #expect(offline)
            #expect(noteBody(try await engine.replica.session.privateDatabase.record(named: "n1", in: zone)) == "body of n1")
            running.cancel()
            // Cancelled, the engine returns rather than throw (a service group's shutdown).
            if case .failure(let error) = await running.result { Issue.record("run() threw \(error) when cancelled") }
        }
    }

    @Test("a replica behind what the user verified (an older copy of the file) is refused like a rolled-back store until a pull brings it forward", arguments: serverBackends)
    func olderReplicaCopy(_ backend: TestBackend) async throws {
        try await withStore(backend) { s in
            let zone = try await s.makeZone(notes: ["n1"])
            let old = try await s.replica(path: s.folder.appendingPathComponent("old.sqlite"))
            try await old.pull()
            // Another copy is pulled further, which advances the user's marks.
            let newer = try await s.replica(path: s.folder.appendingPathComponent("newer.sqlite"))
            _ = try await #require(newer.server).session.privateDatabase.save(makeNote("n2", in: zone))
            try await newer.pull()
            try newer.session.saveMarks()
            // The older copy, opened again offline: refused, naming the zone.
            let reopened = try await s.replica(offline: true, path: old.path)
            let error = await expectStoreError(.integrityFailure) { _ = try await reopened.session.privateDatabase.record(named: "n1", in: zone) }
            #expect(error?.message.contains("'Notes'") == true && error?.message.contains("rolled back") == true)
            // A pull brings it forward.
            try await old.pull()
            let fresh = try await s.replica(offline: true, path: old.path)
            #expect(noteBody(try await fresh.session.privateDatabase.record(named: "n2", in: zone)) == "body of n2")
        }
    }
}

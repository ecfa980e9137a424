import CofferCrypto
import CofferStoreTestSupport
import CofferTestSupport
import CofferVault
import Foundation
import GRDB
import Testing
@testable import CofferStore

// A replica's offline writes (Sources/CofferStore/Replica/PendingChanges.swift and
// Replica+Push.swift): kept as sealed, unsigned intents numbered under the user's marks,
// signed only at push on the head just verified, confirmed only by the verified log, merged
// three ways. Each test runs a real `coffer serve` process.

private var serverBackends: [TestBackend] { TestBackend.all.filter(\.isServer) }

/// A row of the replica's table of pending changes, as a file writer sees it.
private struct ChangeRow: Sendable {
    let number: Int64, zoneUID: Data, name: String, state: Int, sealed: Data, note: String?
}

private func changeRows(_ replica: Replica) async throws -> [ChangeRow] {
    try await replica.store.dbPool.read { db in
        try Row.fetchAll(db, sql: "SELECT number, zone_uid, name, state, sealed, note FROM replica_change ORDER BY number").map {
            ChangeRow(number: $0[0], zoneUID: $0[1], name: $0[2], state: $0[3], sealed: $0[4], note: $0[5])
        }
    }
}

/// Puts rows back into the replica's table of pending changes, as someone who writes the file
/// (or puts back an older copy of it) would.
private func putBack(_ rows: [ChangeRow], into replica: Replica) async throws {
    try await replica.store.dbPool.write { db in
        for row in rows {
            try db.execute(sql: "INSERT OR REPLACE INTO replica_change (number, zone_uid, name, state, sealed, note) VALUES (?, ?, ?, ?, ?, ?)",
                           arguments: [row.number, row.zoneUID, row.name, row.state, row.sealed, row.note])
        }
    }
}

/// The server's log head of `zone`, as Alice's session on it verifies it.
/// A push cut off right after the server accepted its commit, as a client killed then would be.
private func pushStoppedAfterSending(_ replica: Replica, sourceLocation: SourceLocation = #_sourceLocation) async {
    await #expect(throws: StoreError.self, sourceLocation: sourceLocation) {
        try await Replica.$stopAfterSending.withValue(true) { _ = try await replica.push() }
    }
}

private func head(_ s: TestStore, _ zone: ZoneID) async throws -> Int64 {
    try #require(try await s.db.zones().first { $0.id == zone }).sequence
}

@Suite("Pending changes")
struct PendingChangesTests {
    @Test("offline writes are kept sealed and unsigned, read back locally, and pushed as one commit that names them", arguments: serverBackends)
    func offlineWritesPush(_ backend: TestBackend) async throws {
        try await withStore(backend) { s in
            let zone = try await s.makeZone(notes: ["n1", "n3"])
            try await s.replica().pull()
            let before = try await head(s, zone)
            let offline = try await s.replica(offline: true)
            let local = offline.session.privateDatabase
            _ = try await local.save(makeNote("n2", in: zone, body: "written offline"))
            var n1 = try await local.record(named: "n1", in: zone)
            n1.values["title"] = .string("renamed offline")
            _ = try await local.save(n1, policy: .changedKeys)
            try await local.delete(recordNamed: "n3", in: zone)
            // Read back from the replica; the server has none of it, and nothing was signed.
            #expect(noteBody(try await local.record(named: "n2", in: zone)) == "written offline")
            #expect(try await local.record(named: "n1", in: zone).values["title"] == .string("renamed offline"))
            await expectStoreError(.unknownItem) { _ = try await local.record(named: "n3", in: zone) }
            #expect(try await local.records(in: zone).map(\.name) == ["n1", "n2"])
            #expect(try await head(s, zone) == before)
            await expectStoreError(.unknownItem) { _ = try await s.db.record(named: "n2", in: zone) }
            #expect(try await offline.pendingChanges.counts().values.first?.pending == 3)
            // Sealed at rest: the secret is not in the file.
            let rows = try await changeRows(offline)
            #expect(rows.count == 3)
            try await offline.store.dbPool.writeWithoutTransaction { db in try db.checkpoint(.truncate) }
            #expect(try Data(contentsOf: offline.path).range(of: Data("written offline".utf8)) == nil)

            // Online: one push, one commit that carries the three changes' ids.
            let online = try await s.replica()
            let steps = Locked<[SyncProgress]>([])
            let report = try await online.push { step in steps.withLock { $0.append(step) } }
            #expect(steps.withLock { $0 } == [.pushing(zone, sent: 3, total: 3)])
            // The rows its commit wrote were kept, not fetched back: the pull that confirmed
            // them fetched nothing.
            #expect(report.rowsFetched == 0)
            #expect(report.failed.isEmpty && report.conflicts.isEmpty && report.refused.isEmpty)
            #expect(report.confirmed.map(\.count) == [3])
            #expect(try await head(s, zone) == before + 1)
            #expect(noteBody(try await s.db.record(named: "n2", in: zone)) == "written offline")
            #expect(try await s.db.record(named: "n1", in: zone).values["title"] == .string("renamed offline"))
            await expectStoreError(.unknownItem) { _ = try await s.db.record(named: "n3", in: zone) }
            let entry = try await s.store.read { db in
                let row = try #require(try db.zoneRow(zone))
                return LogEntry.decode(try #require(try db.logEntries(zoneRowID: row.rowID, after: before).last).body)
            }
            #expect(entry?.confirmed.count == 3)
            #expect(Set(entry?.confirmed ?? []) == Set((1...3).map { online.pendingChanges.id(of: UInt64($0)) }))
            #expect(try await online.pendingChanges.counts().values.allSatisfy { $0.pending == 0 })
            #expect(try await changeRows(online).isEmpty)
            // Nothing left: a second push sends nothing.
            _ = try await online.push()
            #expect(try await head(s, zone) == before + 1)
        }
    }

    @Test("conflicts: the same field changed on both sides is kept with both versions and resolves; disjoint fields and other records merge")
    func conflicts() async throws {
        try await withStore(.server) { s in
            let zone = try await s.makeZone(notes: ["n1", "n2", "n3"])
            try await s.replica().pull()
            let offline = try await s.replica(offline: true)
            let local = offline.session.privateDatabase
            var n1 = try await local.record(named: "n1", in: zone)
            n1.encryptedValues["body"] = .string("mine")
            _ = try await local.save(n1, policy: .changedKeys)
            var n2 = try await local.record(named: "n2", in: zone)
            n2.values["title"] = .string("my title")
            _ = try await local.save(n2, policy: .changedKeys)
            // Meanwhile on the server: n1's body (the same field), n2's body (another field), n3.
            for (name, body) in [("n1", "theirs"), ("n2", "their body"), ("n3", "their n3")] {
                var r = try await s.db.record(named: name, in: zone)
                r.encryptedValues["body"] = .string(body)
                _ = try await s.db.save(r)
            }
            let online = try await s.replica()
            let report = try await online.push()
            #expect(report.conflicts.map(\.name) == ["n1"])
            #expect(report.conflicts.first?.kind == "both-changed")
            #expect(report.confirmed.map(\.count) == [1], "n2 merged and pushed")
            let n2Now = try await s.db.record(named: "n2", in: zone)
            #expect(n2Now.values["title"] == .string("my title") && noteBody(n2Now) == "their body")
            #expect(noteBody(try await s.db.record(named: "n3", in: zone)) == "their n3")
            // The server's version stands; both are kept until resolved.
            #expect(noteBody(try await s.db.record(named: "n1", in: zone)) == "theirs")
            let kept = try await online.pendingConflicts()
            #expect(kept.count == 1)
            #expect(kept.first.flatMap { $0.server.flatMap(noteBody) } == "theirs")
            #expect(kept.first.flatMap { $0.local.flatMap(noteBody) } == "mine")
            // Resolved with the local version: pushed over the server's.
            try await online.resolveConflict(zone: zone, name: "n1", with: try #require(kept.first?.local))
            #expect(try await online.pendingConflicts().isEmpty)
            let second = try await online.push()
            #expect(second.conflicts.isEmpty && second.confirmed.map(\.count) == [1])
            #expect(noteBody(try await s.db.record(named: "n1", in: zone)) == "mine")
        }
    }

    @Test("the merge is a pure function of base, upstream and local, of values not versions")
    func mergeRules() throws {
        let zone = ZoneID(name: "Z", ownerID: String(repeating: "a", count: 32))
        func fields(_ values: [String: RecordValue], secret: [String: RecordValue] = [:], tag: String? = nil) -> PendingChange.Fields {
            PendingChange.Fields(type: "Note", parent: nil, changeTag: tag, values: values, encryptedValues: secret)
        }
        func change(_ base: PendingChange.Fields?, _ local: PendingChange.Fields?, keys: [String]) -> PendingChange {
            PendingChange(number: 1, kind: local == nil ? .delete : .save, zoneUID: Array(repeating: 1, count: 16), zone: zone, name: "r",
                          time: 0, base: base, local: local, setKeys: keys)
        }
        let base = fields(["a": .int(1), "b": .int(1)], tag: "1")
        // A re-seal upstream (new version, same values) is no change.
        #expect(PendingMerge.merge(base: base, upstream: fields(["a": .int(1), "b": .int(1)], tag: "9"),
                                   change: change(base, fields(["a": .int(2), "b": .int(1)]), keys: ["a"]))
                == .save(fields(["a": .int(2), "b": .int(1)], tag: "9")))
        // Disjoint: merged.
        #expect(PendingMerge.merge(base: base, upstream: fields(["a": .int(1), "b": .int(5)]), change: change(base, fields(["a": .int(2), "b": .int(1)]), keys: ["a"]))
                == .save(fields(["a": .int(2), "b": .int(5)])))
        // Overlapping, different values: a conflict; the same value: nothing to do.
        #expect(PendingMerge.merge(base: base, upstream: fields(["a": .int(3), "b": .int(1)]), change: change(base, fields(["a": .int(2), "b": .int(1)]), keys: ["a"]))
                == .conflict(.bothChanged))
        #expect(PendingMerge.merge(base: base, upstream: fields(["a": .int(2), "b": .int(1)]), change: change(base, fields(["a": .int(2), "b": .int(1)]), keys: ["a"]))
                == .nothing)
        // Typed differently upstream, or moved to encrypted.
        #expect(PendingMerge.merge(base: base, upstream: fields(["a": .string("x"), "b": .int(1)]), change: change(base, fields(["a": .int(2), "b": .int(1)]), keys: ["a"]))
                == .conflict(.typeChanged))
        #expect(PendingMerge.merge(base: base, upstream: fields(["b": .int(1)], secret: ["a": .int(1)]), change: change(base, fields(["a": .int(2), "b": .int(1)]), keys: ["a"]))
                == .conflict(.typeChanged))
        // Created on both sides, updated after a delete upstream, deleted after a change upstream.
        #expect(PendingMerge.merge(base: nil, upstream: fields(["a": .int(7)]), change: change(nil, fields(["a": .int(2)]), keys: ["a"])) == .conflict(.createdUpstream))
        #expect(PendingMerge.merge(base: base, upstream: nil, change: change(base, fields(["a": .int(2), "b": .int(1)]), keys: ["a"])) == .conflict(.deletedUpstream))
        #expect(PendingMerge.merge(base: base, upstream: fields(["a": .int(1), "b": .int(4)]), change: change(base, nil, keys: [])) == .conflict(.changedUpstream))
        #expect(PendingMerge.merge(base: base, upstream: fields(["a": .int(1), "b": .int(1)], tag: "7"), change: change(base, nil, keys: [])) == .delete)
        #expect(PendingMerge.merge(base: base, upstream: nil, change: change(base, nil, keys: [])) == .nothing)
    }

    @Test("a push cut off after the server accepted it (a client killed, an answer withheld) is applied once at the next push")
    func pushCutOff() async throws {
        try await withStore(.server) { s in
            let zone = try await s.makeZone(notes: ["n1"])
            try await s.replica().pull()
            let offline = try await s.replica(offline: true)
            _ = try await offline.session.privateDatabase.save(makeNote("n2", in: zone))
            let before = try await head(s, zone)
            let online = try await s.replica()
            await pushStoppedAfterSending(online)
            #expect(try await head(s, zone) == before + 1, "the server accepted the commit")
            #expect(try await online.pendingChanges.counts().values.first?.pending == 1, "not confirmed yet")
            let again = try await s.replica()
            let report = try await again.push()
            #expect(report.confirmed.map(\.count) == [1], "found in the verified log")
            #expect(try await head(s, zone) == before + 1, "not signed again")
            #expect(try await again.pendingChanges.counts().isEmpty)
        }
    }

    @Test("the rows a push kept from its own commits are checked as fetched ones: changed in the file, they are dropped and fetched again")
    func keptRowsChecked() async throws {
        try await withStore(.server) { s in
            let zone = try await s.makeZone(notes: ["n1"])
            try await s.replica().pull()
            let offline = try await s.replica(offline: true)
            _ = try await offline.session.privateDatabase.save(makeNote("n2", in: zone, body: "kept"))
            // Without keeping them, the confirming pull fetches the row back.
            let fetching = try await Replica.$fetchesSentRows.withValue(true) { try await s.replica().push() }
            #expect(fetching.confirmed.map(\.count) == [1] && fetching.rowsFetched == 1)

            _ = try await offline.session.privateDatabase.save(makeNote("n3", in: zone, body: "kept too"))
            let before = try await head(s, zone)
            let online = try await s.replica()
            await pushStoppedAfterSending(online)
            // The kept row changed in the file before the pull that confirms it.
            let changed = try await online.store.dbPool.write { db in
                try db.execute(sql: "UPDATE replica_stage SET sealed = zeroblob(length(sealed)) WHERE name = 'n3'")
                return db.changesCount
            }
            #expect(changed == 1, "the push kept the row its commit wrote")
            let report = try await s.replica().push()
            #expect(report.confirmed.map(\.count) == [1] && report.failed.isEmpty, "\(report.failed)")
            #expect(report.rowsFetched == 1, "fetched again from the server")
            #expect(try await head(s, zone) == before + 1, "not signed again")
            #expect(noteBody(try await s.replica(offline: true).session.privateDatabase.record(named: "n3", in: zone)) == "kept too")
        }
    }

    @Test("a server that loses a commit it acknowledged: the rows the push kept are not stored unsigned, and the change is pushed again, once")
    func acknowledgedThenLost() async throws {
        try await withStore(.server) { s in
            let zone = try await s.makeZone(notes: ["n1"])
            try await s.replica().pull()
            let offline = try await s.replica(offline: true)
            _ = try await offline.session.privateDatabase.save(makeNote("n2", in: zone, body: "pushed twice"))
            // The server's head read from its file: a read through a session would verify the
            // commit and advance the user's marks, as the replica's own pull never did.
            let rowID = try s.zoneRowID(zone)
            func serverHead() throws -> Int64 { try s.sqlite { db in try Int64.fetchOne(db, sql: "SELECT max(seq) FROM zone_log WHERE zone_id = ?", arguments: [rowID]) ?? 0 } }
            let before = try serverHead()
            await pushStoppedAfterSending(try await s.replica())
            #expect(try serverHead() == before + 1, "the server acknowledged the commit")
            // The server loses it: its log and rows cut back to before the commit.
            try s.cutLog(zoneRowID: rowID, to: before)
            let report = try await s.replica().push()
            #expect(report.failed.isEmpty, "\(report.failed.map(\.error.message))")
            #expect(report.confirmed.map(\.count) == [1])
            #expect(try serverHead() == before + 1, "signed again, once")
            let replica = try await s.replica(offline: true)
            #expect(noteBody(try await replica.session.privateDatabase.record(named: "n2", in: zone)) == "pushed twice")
            #expect(try await replica.session.privateDatabase.records(in: zone).map(\.name) == ["n1", "n2"])
        }
    }

    @Test("an older copy of the replica's changes put back is never pushed again; changes cut from the file are reported lost")
    func oldCopyPutBack() async throws {
        try await withStore(.server) { s in
            let zone = try await s.makeZone(notes: ["n1"])
            try await s.replica().pull()
            let offline = try await s.replica(offline: true)
            _ = try await offline.session.privateDatabase.save(makeNote("n2", in: zone, body: "first"))
            let copy = try await changeRows(offline)
            #expect(copy.count == 1)
            let online = try await s.replica()
            #expect(try await online.push().confirmed.map(\.count) == [1])
            // The user then deletes n2 through the server; the old rows are put back.
            try await s.db.delete(recordNamed: "n2", in: zone)
            let before = try await head(s, zone)
            try await putBack(copy, into: online)
            let report = try await s.replica().push()
            #expect(report.confirmed.isEmpty && report.conflicts.isEmpty && report.lost == 0)
            #expect(try await head(s, zone) == before, "nothing signed again")
            await expectStoreError(.unknownItem) { _ = try await s.db.record(named: "n2", in: zone) }
            #expect(try await changeRows(online).isEmpty, "the stale rows are dropped")
            try await online.pull() // the user syncs (the deletion was made outside the replica)

            // A conflict the user resolved (server wins) is not brought back either.
            let offline2 = try await s.replica(offline: true)
            var n1 = try await offline2.session.privateDatabase.record(named: "n1", in: zone)
            n1.encryptedValues["body"] = .string("mine")
            _ = try await offline2.session.privateDatabase.save(n1, policy: .changedKeys)
            let pendingRows = try await changeRows(offline2)
            var server = try await s.db.record(named: "n1", in: zone)
            server.encryptedValues["body"] = .string("theirs")
            _ = try await s.db.save(server)
            try await online.pull()
            let pushed = try await s.replica().push()
            #expect(pushed.conflicts.count == 1)
            try await online.resolveConflict(zone: zone, name: "n1", with: nil)
            try await putBack(pendingRows, into: online)
            let head2 = try await head(s, zone)
            let after = try await s.replica().push()
            #expect(after.confirmed.isEmpty && after.conflicts.isEmpty)
            #expect(try await head(s, zone) == head2)
            #expect(noteBody(try await s.db.record(named: "n1", in: zone)) == "theirs")
            try await online.pull()

            // A change filed in the clear under another record's name is refused, not pushed
            // or shown under that name.
            let offline4 = try await s.replica(offline: true)
            _ = try await offline4.session.privateDatabase.save(makeNote("n7", in: zone, body: "seven"))
            try await offline4.store.dbPool.write { db in try db.execute(sql: "UPDATE replica_change SET name = 'n1' WHERE name = 'n7'") }
            await expectStoreError(.integrityFailure) { _ = try await offline4.session.privateDatabase.record(named: "n1", in: zone) }
            await expectStoreError(.integrityFailure) { _ = try await s.replica().push() }
            await expectStoreError(.unknownItem) { _ = try await s.db.record(named: "n7", in: zone) }
            try await offline4.store.dbPool.write { db in try db.execute(sql: "UPDATE replica_change SET name = 'n7' WHERE name = 'n1'") }
            #expect(try await s.replica().push().confirmed.map(\.count) == [1])

            // Changes cut out of the file: reported lost, once. (The newest alone, cut, is
            // taken for a write that failed before it stored its change.)
            let offline3 = try await s.replica(offline: true)
            _ = try await offline3.session.privateDatabase.save(makeNote("n5", in: zone))
            _ = try await offline3.session.privateDatabase.save(makeNote("n6", in: zone))
            try await offline3.store.dbPool.write { db in try db.execute(sql: "DELETE FROM replica_change") }
            let cut = try await s.replica().push()
            #expect(cut.lost == 2)
            #expect(try await s.replica().push().lost == 0)
        }
    }

    @Test("a change the server refuses (the writer was made read-only while offline) is kept, readable, and reported")
    func refused() async throws {
        try await withStore(.server) { s in
            let bob = try await s.user("Bob", "bob@example.com")
            let (zone, _) = try await s.sharedWith(bob, .readWrite)
            _ = try await s.db.modify(saving: ["a0", "b0", "c0"].map { makeNote($0, in: zone) }, in: zone)
            try await s.replica(bob.vault).pull()
            let offline = try await s.replica(bob.vault, offline: true)
            _ = try await offline.session.sharedDatabase.save(makeNote("b1", in: zone, body: "bob's offline note"))
            var c0 = try await offline.session.sharedDatabase.record(named: "c0", in: zone)
            c0.encryptedValues["body"] = .string("bob's edit of c0")
            _ = try await offline.session.sharedDatabase.save(c0)
            _ = try await s.alice.setPermission(.readOnly, for: bob.userID, in: zone)
            let online = try await s.replica(bob.vault)
            let report = try await online.push()
            #expect(report.refused.map(\.name).sorted() == ["b1", "c0"])
            let kept = try await online.refusedChanges()
            #expect(kept.first { $0.name == "b1" }.flatMap { $0.local.flatMap(noteBody) } == "bob's offline note")
            #expect(try await online.pendingChanges.counts().values.first?.refused == 2)
            // Exported: each refused version in place of its name's record (or where its name
            // falls), flagged with why; the others as the server holds them.
            var lines = [[String: Any]]()
            let exported = try await online.session.sharedDatabase.exportRecords(in: zone, pageSize: 2, refused: kept) { data in
                for line in data.split(separator: 0x0a) { lines.append(try #require(try JSONSerialization.jsonObject(with: line) as? [String: Any])) }
            }
            #expect(exported == 6 && lines.map { $0["name"] as? String } == ["a0", "b0", "b1", "c0", "n1", "n2"])
            #expect(lines.map { $0["refused"] as? Bool } == [nil, nil, true, true, nil, nil])
            #expect((lines[3]["encryptedValues"] as? [String: Any])?["body"] as? String == "bob's edit of c0")
            #expect((lines[2]["refusedWhy"] as? String)?.isEmpty == false)
            await expectStoreError(.unknownItem) { _ = try await s.db.record(named: "b1", in: zone) }
            // The zone deleted by its owner: dropped from Bob's replica, which keeps only the
            // refused change, still listed by status.
            try await s.db.deleteZone(zone)
            let after = try await s.replica(bob.vault)
            #expect(try await after.pull().dropped.map(\.zone) == [zone])
            let status = try await after.status()
            #expect(status.map(\.zone) == [zone])
            #expect(status.first?.refused == 2 && status.first?.findings.first?.contains("gone") == true)
            #expect(try await after.refusedChanges().first { $0.name == "b1" }.flatMap { $0.local.flatMap(noteBody) } == "bob's offline note")
        }
    }

    @Test("the library's conflict policies: server wins, local wins, a resolver; the sync engine sends and reports")
    func policiesAndEngine() async throws {
        try await withStore(.server) { s in
            let zone = try await s.makeZone(notes: ["n1", "n2", "n3"])
            try await s.replica().pull()
            let offline = try await s.replica(offline: true)
            for name in ["n1", "n2", "n3"] {
                var r = try await offline.session.privateDatabase.record(named: name, in: zone)
                r.encryptedValues["body"] = .string("mine \(name)")
                _ = try await offline.session.privateDatabase.save(r, policy: .changedKeys)
            }
            for name in ["n1", "n2", "n3"] {
                var r = try await s.db.record(named: name, in: zone)
                r.encryptedValues["body"] = .string("theirs \(name)")
                _ = try await s.db.save(r)
            }
            let online = try await s.replica()
            try await online.pull()
            // n1: server wins; n2: local wins; n3: a resolver that joins both.
            let serverWins = try await online.push([zone], policy: .serverWins)
            #expect(serverWins.conflicts.isEmpty && serverWins.confirmed.isEmpty)
            #expect(noteBody(try await s.db.record(named: "n1", in: zone)) == "theirs n1")
            #expect(try await online.pendingConflicts().isEmpty, "dropped, not kept")
            // The other two again, for the other policies.
            let again = try await s.replica(offline: true)
            for name in ["n2", "n3"] {
                var r = try await again.session.privateDatabase.record(named: name, in: zone)
                r.encryptedValues["body"] = .string("mine \(name)")
                _ = try await again.session.privateDatabase.save(r, policy: .changedKeys)
            }
            for name in ["n2", "n3"] {
                var r = try await s.db.record(named: name, in: zone)
                r.encryptedValues["body"] = .string("theirs again \(name)")
                _ = try await s.db.save(r)
            }
            let engine = SyncEngine(replica: try await s.replica(), policy: .resolve { conflict in
                guard conflict.name == "n3", var merged = conflict.server else { return conflict.local }
                merged.encryptedValues["body"] = .string("\(noteBody(conflict.server!) ?? "") + \(noteBody(conflict.local!) ?? "")")
                return merged
            })
            try await engine.fetchChanges()
            let sent = try await engine.sendChanges()
            #expect(sent.confirmed.map(\.count) == [2])
            #expect(noteBody(try await s.db.record(named: "n2", in: zone)) == "mine n2")
            #expect(noteBody(try await s.db.record(named: "n3", in: zone)) == "theirs again n3 + mine n3")
            var sentEvents = 0
            for await event in engine.events {
                if case .sent(let z, let count) = event, z == zone { sentEvents += count }
                if sentEvents == 2 { break }
            }
            #expect(sentEvents == 2)
        }
    }

    /// A replica that made the zone Trips offline, with t1 in it ("Oslo"), beside the server's Notes.
    static func tripsMadeOffline(_ s: TestStore) async throws -> (Replica, ZoneID) {
        _ = try await s.makeZone(notes: ["n1"])
        try await s.replica().pull()
        let offline = try await s.replica(offline: true)
        let trips = try await offline.session.privateDatabase.createZone(named: "Trips")
        _ = try await offline.session.privateDatabase.save(makeNote("t1", in: trips, body: "Oslo"))
        return (offline, trips)
    }

    @Test("a zone made offline lives in the replica alone (pulls leave it be) until a push copies it to the server, records after it (a push cut short after the copy goes on); one whose name the user took on the server meanwhile joins that zone")
    func zoneMadeOffline() async throws {
        try await withStore(.server) { s in
            let (_, trips) = try await Self.tripsMadeOffline(s)
            // Online, a pull does not take it for a zone the server hid or lost.
            let online = try await s.replica()
            let pulled = try await online.pull()
            #expect(pulled.failed.isEmpty && pulled.dropped.isEmpty)
            _ = try await online.pull([trips])
            #expect(noteBody(try await online.session.privateDatabase.record(named: "t1", in: trips)) == "Oslo")
            await expectStoreError(.zoneNotFound) { _ = try await s.db.record(named: "t1", in: trips) }
            // A push cut short after it copied the zone, before it noted so: the next one finds
            // the zone on the server is this one, and goes on.
            _ = try await online.session.pushZone(trips, to: try #require(online.server).store)
            let report = try await online.push()
            #expect(report.zonesCreated == [trips] && report.zonesJoined.isEmpty && report.failed.isEmpty, "\(report.failed.map(\.error.message))")
            #expect(report.confirmed.map(\.count) == [1])
            // A mark that says the zone was made here, where the server has this very zone (put
            // in the file): a pull of the zone by name drops it, and pulls.
            let uid = try await online.session.read { db in try #require(try db.zoneRow(trips)).uid }
            try await online.store.noteUnpushed(uid, true)
            _ = try await s.db.save(makeNote("t2", in: trips, body: "Bergen"))
            let byName = try await online.pull([trips])
            #expect(byName.pulled.map(\.zone) == [trips] && byName.pulled.first?.records == 1)
            #expect(try await online.store.unpushedZones().isEmpty)
            // Only once the server's log of the zone verifies: a newest entry whose signature
            // fails leaves the mark.
            try await online.store.noteUnpushed(uid, true)
            _ = try await s.db.save(makeNote("t3", in: trips, body: "Tromsø"))
            let rowID = try s.zoneRowID(trips)
            let newest = "SELECT max(seq) FROM zone_log WHERE zone_id = ?1"
            let signature = try s.sqlite { db in try Data.fetchOne(db, sql: "SELECT signature FROM zone_log WHERE zone_id = ?1 AND seq = (\(newest))", arguments: [rowID]) }
            try s.sqlite { db in try db.execute(sql: "UPDATE zone_log SET signature = zeroblob(64) WHERE zone_id = ?1 AND seq = (\(newest))", arguments: [rowID]) }
            #expect(try await online.pull([trips]).failed.map(\.zone) == [trips])
            #expect(try await online.store.unpushedZones() == [uid])
            try s.sqlite { db in try db.execute(sql: "UPDATE zone_log SET signature = ?2 WHERE zone_id = ?1 AND seq = (\(newest))", arguments: [rowID, signature]) }
            #expect(try await online.pull([trips]).failed.isEmpty)
            #expect(try await online.store.unpushedZones().isEmpty)
            #expect(noteBody(try await s.db.record(named: "t1", in: trips)) == "Oslo")
            #expect(try await online.pull().failed.isEmpty)
            // A name the user took on the server meanwhile (another device): the zone is not
            // copied; the server's zone takes its place, and the changes made here go to it.
            let again = try await s.replica(offline: true)
            let clash = try await again.session.privateDatabase.createZone(named: "Clash")
            _ = try await again.session.privateDatabase.save(makeNote("c1", in: clash, body: "made offline"))
            _ = try await s.db.createZone(named: "Clash")
            _ = try await s.db.save(makeNote("s1", in: clash, body: "made on the server"))
            let replica = try await s.replica()
            let joined = try await replica.push()
            #expect(joined.failed.isEmpty, "\(joined.failed.map(\.error.message))")
            #expect(joined.zonesJoined == [clash] && joined.zonesCreated.isEmpty)
            #expect(joined.rowsFetched == 1, "s1, made on the server, fetched by the pull that took the server's zone")
            #expect(joined.confirmed.map(\.zone) == [clash] && joined.confirmed.map(\.count) == [1])
            #expect(noteBody(try await s.db.record(named: "c1", in: clash)) == "made offline")
            let local = replica.session.privateDatabase
            #expect(noteBody(try await local.record(named: "c1", in: clash)) == "made offline")
            #expect(noteBody(try await local.record(named: "s1", in: clash)) == "made on the server")
            #expect(try await replica.pull().failed.isEmpty)
            #expect(try await replica.pendingChanges.counts().isEmpty)
        }
    }

    @Test("a server that says it has a zone made offline (a row of its name and uid, with no log) does not make the push drop the zone's mark: the zone is copied once that row is gone")
    func zoneClaimedWithoutLog() async throws {
        try await withStore(.server) { s in
            let (_, trips) = try await Self.tripsMadeOffline(s)
            let online = try await s.replica()
            let uid = try await online.session.read { db in try #require(try db.zoneRow(trips)).uid }
            // The server's file gets a row of that zone, and nothing else of it.
            try s.sqlite { db in
                try db.execute(sql: "INSERT INTO zone (uid, owner_id, name, current_epoch, sequence, created_at) VALUES (?, ?, 'Trips', 1, 0, 0)",
                               arguments: [Data(uid), trips.ownerID])
            }
            let refused = try await online.push()
            #expect(refused.failed.map(\.zone) == [trips] && refused.zonesCreated.isEmpty, "\(refused.zonesCreated)")
            #expect(try await online.store.unpushedZones() == [uid], "the mark stays")
            #expect(try await online.pendingChanges.counts().values.first?.pending == 1)
            try s.sqlite { db in try db.execute(sql: "DELETE FROM zone WHERE uid = ?", arguments: [Data(uid)]) }
            let report = try await online.push()
            #expect(report.zonesCreated == [trips] && report.failed.isEmpty, "\(report.failed.map(\.error.message))")
            #expect(report.confirmed.map(\.count) == [1])
            #expect(noteBody(try await s.db.record(named: "t1", in: trips)) == "Oslo")
        }
    }

    @Test("a zone made offline whose name the user took on the server meanwhile, pulled before the push (as sync does): its changes are kept and go to the server's zone")
    func zoneMadeOfflinePulledFirst() async throws {
        try await withStore(.server) { s in
            let (_, trips) = try await Self.tripsMadeOffline(s)
            _ = try await s.db.createZone(named: "Trips")
            _ = try await s.db.save(makeNote("s1", in: trips, body: "made on the server"))
            let replica = try await s.replica()
            let pulled = try await replica.pull()
            #expect(pulled.failed.isEmpty, "\(pulled.failed.map(\.error.message))")
            #expect(try await replica.pendingChanges.counts().values.first?.pending == 1, "the change made offline is kept")
            #expect(noteBody(try await replica.session.privateDatabase.record(named: "t1", in: trips)) == "Oslo")
            let pushed = try await replica.push()
            #expect(pushed.failed.isEmpty && pushed.lost == 0, "\(pushed.failed.map(\.error.message))")
            #expect(pushed.confirmed.map(\.count) == [1])
            #expect(noteBody(try await s.db.record(named: "t1", in: trips)) == "Oslo")
            #expect(noteBody(try await s.db.record(named: "s1", in: trips)) == "made on the server")
        }
    }

    @Test("a zone made offline that cannot be copied (it fails verification) is reported once, and its changes stay pending: none is sent")
    func zoneNotCopiedKeepsChanges() async throws {
        try await withStore(.server) { s in
            let (offline, trips) = try await Self.tripsMadeOffline(s)
            // The copy fails: the zone's genesis in the replica was changed, so it does not verify.
            let path = offline.path
            let file = try DatabasePool(path: path.path)
            try await file.write { db in
                try db.execute(sql: "UPDATE zone_log SET signature = zeroblob(64) WHERE seq = 1 AND zone_id = (SELECT id FROM zone WHERE name = 'Trips')")
            }
            try file.close()
            let report = try await s.replica().push()
            #expect(report.failed.map(\.zone) == [trips], "reported once: \(report.failed.map(\.error.message))")
            #expect(report.confirmed.isEmpty && report.zonesCreated.isEmpty)
            await expectStoreError(.zoneNotFound) { _ = try await s.db.record(named: "t1", in: trips) }
            #expect(try await s.replica(offline: true).pendingChanges.counts().values.first?.pending == 1)
        }
    }

    @Test("a server whose log was cut back or forked is refused at push, naming the zone, and the pending changes are kept as they were")
    func hostileServerKeepsPendingWork() async throws {
        try await withStore(.server) { s in
            let zone = try await s.makeZone(notes: ["n1", "n2"])
            _ = try await s.db.save(makeNote("n3", in: zone))
            let pulled = try #require(try await s.replica().pull().pulled.first)
            let offline = try await s.replica(offline: true)
            _ = try await offline.session.privateDatabase.save(makeNote("p1", in: zone, body: "pending work"))
            let rowID = try s.zoneRowID(zone)
            func cut(to head: Int64) throws { try s.cutLog(zoneRowID: rowID, to: head) }
            for (what, fork) in [("forked", true), ("rolled back", false)] {
                try cut(to: pulled.headSeq - (fork ? 1 : 2))
                if fork { _ = try await s.forge(in: zone, signer: s.alice, name: "n9", title: "the other branch") }
                func stored() throws -> Int64 { try s.sqlite { db in try Int64.fetchOne(db, sql: "SELECT count(*) FROM zone_log WHERE zone_id = ?", arguments: [rowID]) ?? 0 } }
                let before = try stored()
                let report = try await s.replica().push()
                let failure = try #require(report.failed.first)
                #expect(failure.zone == zone && failure.error.code == .integrityFailure)
                #expect(failure.error.message.contains("'Notes'") && failure.error.message.contains(what))
                #expect(report.confirmed.isEmpty && report.refused.isEmpty && report.conflicts.isEmpty)
                #expect(try stored() == before, "nothing signed on the \(what) log")
                let kept = try await s.replica(offline: true)
                #expect(try await kept.pendingChanges.counts().values.first?.pending == 1)
                #expect(noteBody(try await kept.session.privateDatabase.record(named: "p1", in: zone)) == "pending work")
            }
        }
    }

    @Test("a replica keeps at most 10,000 pending changes: the next write is refused as busy (sync first), and a push makes room")
    func pendingLimit() async throws {
        try await withStore(.server) { s in
            let zone = try await s.makeZone(notes: [])
            try await s.replica().pull()
            let offline = try await s.replica(offline: true)
            for start in stride(from: 0, to: PendingChanges.maxCount, by: Limits.maxBatchRecords) {
                let batch = (start..<start + Limits.maxBatchRecords).map { makeNote("r\($0)", in: zone) }
                _ = try await offline.session.privateDatabase.modify(saving: batch, in: zone)
            }
            let refused = await expectStoreError(.busy) { _ = try await offline.session.privateDatabase.save(makeNote("one-more", in: zone)) }
            #expect(refused?.message.contains("sync first") == true)
            // Changing a record that already has a pending change joins it: no new change.
            _ = try await offline.session.privateDatabase.save(makeNote("r7", in: zone, body: "again"), policy: .allKeys)
            #expect(noteBody(try await offline.session.privateDatabase.record(named: "r7", in: zone)) == "again")
            let report = try await s.replica().push()
            #expect(report.confirmed.map(\.count) == [PendingChanges.maxCount])
            _ = try await s.replica(offline: true).session.privateDatabase.save(makeNote("one-more", in: zone))
        }
    }
}

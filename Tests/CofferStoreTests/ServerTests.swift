import CofferCrypto
import CofferTestSupport
import CofferVault
import CofferStoreTestSupport
import Foundation
import GRDB
import Testing
@testable import CofferStore
#if canImport(Glibc)
import Glibc
#endif

/// The sync server as a real process on loopback, over SQLite and PostgreSQL: stores that work
/// through it, what it refuses on its own, bad requests, several writers, two instances.
@Suite("coffer serve: the store through a server")
struct ServerTests {
    /// Two users share a zone through the server: writes both ways, a change stream that sees
    /// the other's commit, a removal that rotates the key.
    @Test(arguments: TestBackend.local)
    func shareThroughTheServer(_ backend: TestBackend) async throws {
        try await withServer(backend) { fixture in
            let alice = try await fixture.user("Alice", "alice@example.com")
            let bob = try await fixture.user("Bob Builder", "bob@example.com")
            let zone = try await alice.session.privateDatabase.createZone(named: "Family")
            var note = Record(type: "Note", name: "n1", zone: zone)
            note.values["title"] = "Shopping"
            note.encryptedValues["body"] = "eggs, milk"
            _ = try await alice.session.privateDatabase.save(note)
            let share = try await alice.session.share(zone: zone, title: "Family notes")
            _ = try await alice.session.addParticipant(bob.vault.identity.userID, permission: .readWrite, to: zone)
            _ = try await bob.session.acceptShare(url: share.url)
            let shared = bob.session.sharedDatabase
            #expect(try await shared.record(named: "n1", in: zone).encryptedValues["body"] == "eggs, milk")
            // A live stream of Alice's sees Bob's commit.
            let stream = alice.session.privateDatabase.changeStream(in: zone, since: try await alice.session.privateDatabase.changes(in: zone, since: nil).token)
            var reply = Record(type: "Note", name: "n2", zone: zone)
            reply.encryptedValues["body"] = "and bread"
            _ = try await shared.save(reply)
            let page = try #require(try await firstElement(stream, seconds: 30))
            #expect(page.changed.map(\.name) == ["n2"])
            #expect(page.changed.first?.encryptedValues["body"] == "and bread")
            // Removing Bob rotates the key; what Alice writes after is not his to read.
            _ = try await alice.session.removeParticipant(bob.vault.identity.userID, from: zone)
            var later = Record(type: "Note", name: "n3", zone: zone)
            later.encryptedValues["body"] = "after"
            _ = try await alice.session.privateDatabase.save(later)
            let fresh = try await fixture.client(bob.vault).openSession(vault: bob.vault)
            await #expect(throws: StoreError.self) { _ = try await fresh.sharedDatabase.record(named: "n3", in: zone) }
            #expect(try await alice.session.audit().findings.isEmpty)
        }
    }

    /// Sixteen clients write one zone at once through the server (more requests at a time than
    /// the server has threads and SQLite reader connections): writers that raced only for the
    /// head sign again and land; one record saved with the same change tag by two of them lands
    /// once, the other gets the conflict.
    @Test(arguments: TestBackend.local)
    func concurrentWriters(_ backend: TestBackend) async throws {
        try await withServer(backend) { fixture in
            let alice = try await fixture.user("Alice", "alice@example.com")
            let zone = try await alice.session.privateDatabase.createZone(named: "Busy")
            var seed = Record(type: "Note", name: "shared", zone: zone)
            seed.values["n"] = .int(0)
            let stored = try await alice.session.privateDatabase.save(seed)
            var sessions = [Session]()
            for _ in 0..<16 { sessions.append(try await fixture.client(alice.vault).openSession(vault: alice.vault)) }
            try await withThrowingTaskGroup(of: Void.self) { group in
                for (i, session) in sessions.enumerated() {
                    group.addTask {
                        for j in 0..<2 {
                            var record = Record(type: "Note", name: "w\(i)-\(j)", zone: zone)
                            record.encryptedValues["body"] = .string("from \(i), \(j)")
                            _ = try await session.privateDatabase.save(record)
                        }
                    }
                }
                try await group.waitForAll()
            }
            let all = try await alice.session.privateDatabase.records(in: zone)
            #expect(all.count == 33)
            // The same change tag from two writers: exactly one wins.
            let outcomes = await withTaskGroup(of: StoreError.Code?.self) { group in
                for (i, session) in sessions.prefix(2).enumerated() {
                    group.addTask {
                        var edit = stored
                        edit.values["n"] = .int(Int64(i + 1))
                        do { _ = try await session.privateDatabase.save(edit); return nil } catch let error as StoreError { return error.code } catch {
                            return .internalError
                        }
                    }
                }
                var list = [StoreError.Code?]()
                for await outcome in group { list.append(outcome) }
                return list
            }
            #expect(outcomes.filter { $0 == nil }.count == 1)
            #expect(outcomes.filter { $0 == .serverRecordChanged }.count == 1)
            #expect(try await alice.session.audit().findings.isEmpty)
        }
    }

    /// A query through the server finds its records, and the server makes the query index a
    /// local store's client would, for a field the schema has as plain; the query's answer is the
    /// same as before it.
    @Test(arguments: TestBackend.local)
    func queriesMakeTheirIndexes(_ backend: TestBackend) async throws {
        try await withServer(backend) { fixture in
            let alice = try await fixture.user("Alice", "alice@example.com")
            let db = alice.session.privateDatabase
            let zone = try await db.createZone(named: "Indexed")
            let records = (0..<30).map { i in
                var record = Record(type: "Note", name: "n\(i)", zone: zone)
                record.values["count"] = .int(Int64(i % 5))
                record.encryptedValues["body"] = .string("secret \(i)")
                return record
            }
            _ = try await db.modify(saving: records, in: zone)
            let query = Query(recordType: "Note", predicates: [.init("count", .equal, .int(3))], sort: [.init("count")])
            let found = try await db.query(query, in: zone)
            #expect(found.records.map(\.name).sorted() == ["n13", "n18", "n23", "n28", "n3", "n8"])
            switch backend {
            case .sqlite, .server:
                let path = try #require(fixture.storePath)
                let names = try await DatabaseQueue(path: path).read { try String.fetchAll($0, sql: "SELECT name FROM sqlite_master WHERE type = 'index'") }
                #expect(names.contains(SQLiteFieldIndex.name(recordType: "Note", field: "count")))
            case .postgres, .serverOnPostgres:
                let names = try await withPostgresAdmin(fixture.postgres) { admin in
                    try await admin.query("SELECT indexname FROM pg_indexes WHERE tablename = 'record'").map { try $0.decode(String.self) }
                }
                #expect(names.contains(PostgresQueries.indexName(recordType: "Note", field: "count", type: .int)))
            }
            #expect(try await db.query(query, in: zone).records.map(\.name).sorted() == found.records.map(\.name).sorted())
        }
    }

    /// Unsigned, replayed, out-of-window, oversized, malformed and unknown-user requests each get
    /// their documented error; the server keeps serving, and nothing is written.
    @Test func badRequests() async throws {
        try await withServer(.sqlite) { fixture in
            let alice = try await fixture.user("Alice", "alice@example.com")
            _ = try await alice.session.privateDatabase.createZone(named: "Kept")
            let read = try JSONSerialization.data(withJSONObject: ["needs": [["op": "zones/list", "owner": alice.vault.identity.userID]],
                                                                   "basis": ["heads": [], "zones": [], "contacts": []]])
            let ok = try await fixture.signed(alice.vault, "POST", "/v1/storage/read", body: read)
            #expect(ok.status == 200)
            // Unsigned.
            let unsigned = try await fixture.raw("POST", "/v1/storage/read", body: read)
            #expect(unsigned.status == 401)
            #expect(unsigned.body["code"] as? String == "invalidArguments")
            #expect((unsigned.body["message"] as? String)?.contains("signed") == true)
            // Replayed: the same signed request twice.
            let headers = try await fixture.signature(alice.vault, "POST", "/v1/storage/read", body: read)
            #expect(try await fixture.raw("POST", "/v1/storage/read", body: read, headers: headers).status == 200)
            let replayed = try await fixture.raw("POST", "/v1/storage/read", body: read, headers: headers)
            #expect(replayed.status == 401)
            #expect((replayed.body["message"] as? String)?.contains("nonce") == true)
            // Out of the window, either way.
            for skew in [-600.0, 600.0] {
                let old = try await fixture.signed(alice.vault, "POST", "/v1/storage/read", body: read, now: Date().addingTimeInterval(skew))
                #expect(old.status == 401)
                #expect((old.body["message"] as? String)?.contains("minutes") == true)
            }
            // Signed for another path, or with another body.
            let moved = try await fixture.signature(alice.vault, "POST", "/v1/records/modify", body: read)
            #expect(try await fixture.raw("POST", "/v1/storage/read", body: read, headers: moved).status == 401)
            // Oversized.
            let big = Data(repeating: 0x20, count: 4 * 1024 * 1024 + 1)
            let over = try await fixture.signed(alice.vault, "POST", "/v1/records/modify", body: big)
            #expect(over.body["code"] as? String == "limitExceeded")
            // Malformed: not JSON, an unknown operation, a field an operation does not take, a
            // field no request has (in a read, in its basis, at the top).
            for body in [Data("{not json".utf8),
                         try JSONSerialization.data(withJSONObject: ["needs": [["op": "changes/database/counter", "extra": 1]],
                                                                     "basis": ["heads": [], "zones": [], "contacts": []]]),
                         try JSONSerialization.data(withJSONObject: ["needs": [], "basis": ["heads": [], "zones": [], "contacts": [], "x": true]]),
                         try JSONSerialization.data(withJSONObject: ["needs": [], "basis": ["heads": [], "zones": [], "contacts": []], "admin": true]),
                         try JSONSerialization.data(withJSONObject: ["needs": [["op": "records/drop"]], "basis": ["heads": [], "zones": [], "contacts": []]]),
                         try JSONSerialization.data(withJSONObject: ["needs": [["op": "changes/database/counter", "zone": Data(count: 16).base64EncodedString()]],
                                                                     "basis": ["heads": [], "zones": [], "contacts": []]])] {
                let bad = try await fixture.signed(alice.vault, "POST", "/v1/storage/read", body: body)
                #expect(bad.status == 400)
                #expect(bad.body["code"] as? String == "invalidArguments")
            }
            let badBatch = try await fixture.signed(alice.vault, "POST", "/v1/records/modify",
                                                    body: try JSONSerialization.data(withJSONObject: ["operation": "AAAA", "writes": []]))
            #expect(badBatch.status == 400)
            // A user the server does not know (their card never published).
            let stranger = try makeVault(in: fixture.folder, file: "stranger.coffer", name: "Mallory", email: "m@example.com")
            let unknown = try await fixture.signed(stranger, "POST", "/v1/storage/read", body: read)
            #expect(unknown.status == 401)
            #expect((unknown.body["message"] as? String)?.contains("not known") == true)
            // A card published by someone else's key.
            let card = try RemoteAPI.encoder.encode(RemoteAPI.Publish(card: try ContactCard(vault: stranger).jsonData()))
            #expect(try await fixture.signed(alice.vault, "POST", "/v1/contacts/publish", body: card).status == 401)
            // The server still serves, and nothing was written.
            #expect(try await fixture.raw("GET", "/v1/health").status == 200)
            let zones = try await fixture.client(alice.vault).openSession(vault: alice.vault).privateDatabase.zones()
            #expect(zones.map(\.id.name) == ["Kept"])
            #expect(try await alice.store.contacts().map(\.userID) == [alice.vault.identity.userID])
        }
    }

    /// Two instances on one PostgreSQL database serve one client in turn; a nonce one saw is
    /// refused by the other.
    @Test(.enabled(if: !PostgresTestServer.isSkipped))
    func twoInstances() async throws {
        try await withServer(.postgres) { fixture in
            let second = try await fixture.secondInstance()
            do {
                let alice = try await fixture.user("Alice", "alice@example.com")
                let other = try await fixture.client(alice.vault, server: second).openSession(vault: alice.vault)
                let zone = try await alice.session.privateDatabase.createZone(named: "Both")
                for i in 0..<6 {
                    let session = i % 2 == 0 ? alice.session : other
                    var record = Record(type: "Note", name: "r\(i)", zone: zone)
                    record.encryptedValues["body"] = .string("via \(i % 2 == 0 ? "first" : "second")")
                    _ = try await session.privateDatabase.save(record)
                    // Each instance sees what the other wrote.
                    let reader = i % 2 == 0 ? other : alice.session
                    #expect(try await reader.privateDatabase.records(in: zone).count == i + 1)
                }
                let body = try JSONSerialization.data(withJSONObject: ["needs": [["op": "changes/database/counter"]],
                                                                       "basis": ["heads": [], "zones": [], "contacts": []]])
                let headers = try await fixture.signature(alice.vault, "POST", "/v1/storage/read", body: body)
                #expect(try await fixture.raw("POST", "/v1/storage/read", body: body, headers: headers).status == 200)
                #expect(try await fixture.raw("POST", "/v1/storage/read", body: body, headers: headers, to: second).status == 401)
                let stopped = await second.stop()
                #expect(stopped.status == 0)
            } catch {
                await second.stop(SIGKILL)
                throw error
            }
        }
    }
}

/// The server killed mid-batch, and batches whose answers were lost.
@Suite("coffer serve: crashes and retries")
struct ServerCrashTests {
    /// A batch of 400 records in flight when the server is killed (SIGKILL) or stopped
    /// (SIGTERM: it finishes or refuses what is in flight, and exits 0): after a restart the
    /// batch is there whole or not at all, and the store verifies.
    @Test(arguments: [SIGKILL, SIGTERM])
    func killedMidBatch(_ signal: Int32) async throws {
        try await withServer(.sqlite) { fixture in
            let alice = try await fixture.user("Alice", "alice@example.com")
            let zone = try await alice.session.privateDatabase.createZone(named: "Big")
            let records = (0..<400).map { i in
                var record = Record(type: "Note", name: String(format: "r%03d", i), zone: zone)
                record.encryptedValues["body"] = .string(String(repeating: "x", count: 2_000))
                return record
            }
            let db = alice.session.privateDatabase
            let batch = Task { try await db.modify(saving: records, in: zone) }
            try await Task.sleep(for: .milliseconds(40))
            if signal == SIGKILL {
                await fixture.kill()
            } else {
                let stopped = await fixture.server.stop(SIGTERM)
                #expect(stopped.status == 0, "a server stopped with SIGTERM exits 0")
            }
            let outcome = await batch.result
            let restarted = try await fixture.secondInstance()
            do {
                let session = try await fixture.client(alice.vault, server: restarted).openSession(vault: alice.vault)
                let count = try await session.privateDatabase.records(in: zone).count
                #expect(count == 0 || count == 400, "a batch is applied whole or not at all")
                if case .success = outcome { #expect(count == 400) }
                // The client's batch again, on the restarted server: it lands once.
                if count == 0 { _ = try await session.privateDatabase.modify(saving: records, in: zone) }
                #expect(try await session.privateDatabase.records(in: zone).count == 400)
                #expect(try await session.audit().findings.isEmpty)
                await restarted.stop()
            } catch {
                await restarted.stop(SIGKILL)
                throw error
            }
        }
    }

    /// A batch whose answer is lost is sent again with its operation id, and applied once: one
    /// log entry, the record's change tag that of that entry.
    @Test(arguments: TestBackend.local)
    func lostAnswerAppliedOnce(_ backend: TestBackend) async throws {
        try await withServer(backend) { fixture in
            let alice = try await fixture.user("Alice", "alice@example.com")
            let zone = try await alice.session.privateDatabase.createZone(named: "Once")
            guard case .snapshot(let driver as RemoteStorage) = alice.store.backend else { Issue.record("not a server's store"); return }
            let before = try await alice.store.read { db in try alice.session.verifiedLogs.zoneState(db, zone: try alice.session.accessControl.zoneRow(db, zone)).headSeq }
            driver.answersToLose.withLock { $0 = 1 }
            var record = Record(type: "Note", name: "n", zone: zone)
            record.encryptedValues["body"] = "once"
            let saved = try await alice.session.privateDatabase.save(record)
            #expect(driver.answersToLose.withLock { $0 } == 0, "the answer was lost, and the batch sent again")
            let fresh = try await fixture.client(alice.vault).openSession(vault: alice.vault)
            let after = try await fresh.store.read { db in try fresh.verifiedLogs.zoneState(db, zone: try fresh.accessControl.zoneRow(db, zone)).headSeq }
            #expect(after == before + 1, "one commit, not two")
            #expect(try await fresh.privateDatabase.record(named: "n", in: zone).changeTag == saved.changeTag)
            #expect(try await fresh.audit().findings.isEmpty)
        }
    }
}

/// The committed API document and the code agree on the operations a read and a batch take.
@Suite("coffer serve: the API document")
struct APIDocumentTests {
    /// The operation names of the document's enum under `schema` (`Need` or `Write`).
    static func operations(_ schema: String) throws -> [String] {
        let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
        let text = try String(contentsOf: root.appendingPathComponent("Docs/openapi.yaml"), encoding: .utf8)
        let start = try #require(text.range(of: "    \(schema):\n"))
        let rest = text[start.upperBound...]
        let enumStart = try #require(rest.range(of: "enum: ["))
        let enumEnd = try #require(rest[enumStart.upperBound...].firstIndex(of: "]"))
        return rest[enumStart.upperBound..<enumEnd].split(separator: ",").map { $0.trimmingCharacters(in: .whitespacesAndNewlines) }
    }

    @Test func everyDocumentedOperationIsKnown() throws {
        let needs = try Self.operations("Need"), writes = try Self.operations("Write")
        #expect(needs.count == 29)
        #expect(writes.count == 24)
        for op in needs {
            // Known: it fails for its missing fields, or decodes, never as an unknown operation.
            do { _ = try WireNeed(op: op).need(Self.names) } catch let error as StoreError { #expect(!error.message.contains("unknown"), "\(op): \(error.message)") }
        }
        for op in writes {
            do { _ = try WireWrite(op: op).write(Self.names, row: { _ in throw StoreError(.zoneNotFound, "none") }) } catch let error as StoreError { #expect(!error.message.contains("unknown"), "\(op): \(error.message)") }
        }
        #expect(throws: StoreError.self) { try WireNeed(op: "records/drop").need(Self.names) }
    }

    /// Every read and write round-trips through its wire form.
    @Test func wireFormsRoundTrip() throws {
        let zone = ZoneID(name: "Notes", ownerID: String(repeating: "a", count: 32))
        let needs: [StorageSnapshot.Need] = [.zone(zone), .records(zoneRowID: 7, names: ["a", "b"]), .changes(zoneRowID: 7, afterSeq: 3, afterName: "x", limit: 10),
                                             .zoneTombstones(userID: zone.ownerID, since: 4, owned: true), .counter, .zoneUID([1, 2, 3]), .deletedZone(uid: [4, 5, 6])]
        for need in needs { #expect(try WireNeed(need, Self.names).need(Self.names) == need) }
        // The zone crosses as its uid, and a row id is never asked of a server.
        #expect(try WireNeed(.records(zoneRowID: 7, names: ["a"]), Self.names).zone == Data(repeating: 7, count: 16))
        #expect(throws: StoreError.self) { try WireNeed(.newZoneID(zone), Self.names) }
    }

    /// Test names: the zone of row id n has the uid of 16 bytes n.
    static var names: ZoneNames { ZoneNames(uid: { [UInt8](repeating: UInt8($0), count: 16) }, rowID: { Int64($0[0]) }) }
}

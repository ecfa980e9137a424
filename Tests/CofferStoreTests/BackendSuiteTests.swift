import CofferCrypto
import CofferTestSupport
import CofferVault
import CofferStoreTestSupport
import Foundation
import PostgresNIO
import Testing
@testable import CofferStore

/// The engine on each storage backend: zones, records, change tags, batches, parents, schema,
/// pages in byte order, and a fresh session verifying everything again. Every test runs on
/// SQLite and on PostgreSQL.
@Suite("Storage backends: one engine, the same results")
struct BackendSuiteTests {
    static func note(_ zone: ZoneID, _ name: String, title: String, body: String, parent: String? = nil) -> Record {
        var record = Record(type: "Note", name: name, zone: zone, parent: parent)
        record.values["title"] = .string(title)
        record.values["rank"] = .int(Int64(name.utf8.count))
        record.encryptedValues["body"] = .string(body)
        return record
    }

    @Test("a zone's records round-trip: plain and sealed values, system fields, and a fresh session reads them", arguments: TestBackend.all)
    func roundTrip(_ backend: TestBackend) async throws {
        try await withStore(backend) { f in
            let zone = try await f.db.createZone(named: "Notes")
            var note = Self.note(zone, "n1", title: "Shopping", body: "eggs, milk")
            note.values["when"] = .date(Date(timeIntervalSince1970: 1_700_000_000.5))
            note.encryptedValues["blob"] = .bytes([0, 1, 2, 255])
            let saved = try await f.db.save(note)
            #expect(saved.changeTag != nil)
            #expect(saved.creatorID == f.alice.userID)

            let fresh = try await f.fresh(f.alice)
            let read = try await fresh.privateDatabase.record(named: "n1", in: zone)
            #expect(read.values == note.values)
            #expect(read.encryptedValues == note.encryptedValues)
            #expect(read.changeTag == saved.changeTag)
            #expect(read.creatorID == f.alice.userID)
            #expect(read.created == saved.created)
            let zones = try await fresh.privateDatabase.zones()
            #expect(zones.map(\.id.name) == ["Notes"])
            #expect(zones.first?.recordCount == 1)
        }
    }

    @Test("change tags: a stale tag is a conflict carrying the stored record; changed keys merge; a delete checks its tag", arguments: TestBackend.all)
    func changeTags(_ backend: TestBackend) async throws {
        try await withStore(backend) { f in
            let zone = try await f.db.createZone(named: "Notes")
            let first = try await f.db.save(Self.note(zone, "n1", title: "v1", body: "one"))
            var edit = first
            edit.values["title"] = .string("v2")
            let second = try await f.db.save(edit)
            #expect(second.changeTag != first.changeTag)
            #expect(second.created == first.created)

            var stale = first
            stale.values["title"] = .string("lost")
            let conflict = await expectStoreError(.serverRecordChanged) { try await f.db.save(stale) }
            #expect(conflict?.serverRecord?.values["title"] == .string("v2"))

            var keys = Record(type: "Note", name: "n1", zone: zone)
            keys.encryptedValues["body"] = .string("two")
            _ = try await f.db.save(keys, policy: .changedKeys)
            let merged = try await f.db.record(named: "n1", in: zone)
            #expect(merged.values["title"] == .string("v2"))
            #expect(merged.encryptedValues["body"] == .string("two"))

            await expectStoreError(.serverRecordChanged) { try await f.db.delete(recordNamed: "n1", in: zone, ifMatch: first.changeTag) }
            try await f.db.delete(recordNamed: "n1", in: zone, ifMatch: merged.changeTag)
            await expectStoreError(.unknownItem) { try await f.db.record(named: "n1", in: zone) }
            // Saved again as new after its deletion.
            _ = try await f.db.save(Self.note(zone, "n1", title: "v3", body: "three"))
            #expect(try await f.fresh(f.alice).privateDatabase.record(named: "n1", in: zone).values["title"] == .string("v3"))
        }
    }

    @Test("a batch is atomic: one failing record keeps the whole batch out", arguments: TestBackend.all)
    func atomicBatch(_ backend: TestBackend) async throws {
        try await withStore(backend) { f in
            let zone = try await f.db.createZone(named: "Notes")
            _ = try await f.db.save(Self.note(zone, "taken", title: "t", body: "b"))
            let batch = (0..<50).map { Self.note(zone, "b\($0)", title: "t\($0)", body: "b\($0)") } + [Self.note(zone, "taken", title: "again", body: "x")]
            let error = await expectStoreError(.partialFailure) { try await f.db.modify(saving: batch, in: zone) }
            #expect(error?.partialErrors.keys.sorted() == ["taken"])
            let found = try await f.db.records(named: batch.map(\.name), in: zone)
            #expect(found.values.filter { (try? $0.get()) != nil }.count == 1)
            _ = try await f.db.modify(saving: Array(batch.dropLast()), in: zone)
            #expect(try await f.db.records(in: zone, limit: 400).count == 51)
        }
    }

    @Test("parents: a missing parent is a reference violation and a cycle is refused; a chain saved in one batch is kept", arguments: TestBackend.all)
    func parents(_ backend: TestBackend) async throws {
        try await withStore(backend) { f in
            let zone = try await f.db.createZone(named: "Tree")
            await expectStoreError(.referenceViolation) { try await f.db.save(Self.note(zone, "orphan", title: "o", body: "o", parent: "nobody")) }
            _ = try await f.db.modify(saving: [Self.note(zone, "root", title: "r", body: "r"), Self.note(zone, "child", title: "c", body: "c", parent: "root"),
                                               Self.note(zone, "grandchild", title: "g", body: "g", parent: "child")], in: zone)
            var root = try await f.db.record(named: "root", in: zone)
            root.parent = "grandchild"
            await expectStoreError(.invalidArguments) { try await f.db.save(root) }
            #expect(try await f.db.record(named: "grandchild", in: zone).parent == "child")
        }
    }

    @Test("a field keeps the type and encryption of its first save", arguments: TestBackend.all)
    func schema(_ backend: TestBackend) async throws {
        try await withStore(backend) { f in
            let zone = try await f.db.createZone(named: "Notes")
            _ = try await f.db.save(Self.note(zone, "n1", title: "t", body: "b"))
            var wrongType = Self.note(zone, "n2", title: "t", body: "b")
            wrongType.values["rank"] = .string("high")
            await expectStoreError(.invalidArguments) { try await f.db.save(wrongType) }
            var nowPlain = Record(type: "Note", name: "n3", zone: zone)
            nowPlain.values["body"] = .string("in the clear")
            await expectStoreError(.invalidArguments) { try await f.db.save(nowPlain) }
            let schema = try await f.fresh(f.alice).privateDatabase.schema(of: "Note", in: zone)
            #expect(schema["body"] == FieldSchema(type: .string, encrypted: true))
            #expect(schema["rank"] == FieldSchema(type: .int, encrypted: false))
        }
    }

    @Test("pages of a zone come in byte order of names, as on SQLite", arguments: TestBackend.all)
    func byteOrder(_ backend: TestBackend) async throws {
        try await withStore(backend) { f in
            let zone = try await f.db.createZone(named: "Order")
            let names = ["b", "B", "a", "Z", "a-1", "a.1", "A", "~", "0", "a1", "aa", "a B"]
            _ = try await f.db.modify(saving: names.map { Self.note(zone, $0, title: $0, body: $0) }, in: zone)
            var seen = [String]()
            var after: String?
            while true {
                let page = try await f.db.records(in: zone, after: after, limit: 5)
                guard let last = page.last else { break }
                seen += page.map(\.name)
                after = last.name
            }
            #expect(seen == names.sorted { Array($0.utf8).lexicographicallyPrecedes(Array($1.utf8)) })
        }
    }

    @Test("a deleted zone is gone, with its records; its name can be used again", arguments: TestBackend.all)
    func deleteZone(_ backend: TestBackend) async throws {
        try await withStore(backend) { f in
            let zone = try await f.db.createZone(named: "Gone")
            _ = try await f.db.save(Self.note(zone, "n1", title: "t", body: "b"))
            try await f.db.deleteZone(zone)
            await expectStoreError(.zoneNotFound) { try await f.db.record(named: "n1", in: zone) }
            #expect(try await f.db.zones().isEmpty)
            await expectStoreError(.alreadyExists) {
                _ = try await f.db.createZone(named: "Again")
                return try await f.db.createZone(named: "Again")
            }
        }
    }

    @Test("another user cannot read a zone that is not shared with them", arguments: TestBackend.all)
    func otherUser(_ backend: TestBackend) async throws {
        try await withStore(backend) { f in
            let zone = try await f.db.createZone(named: "Private")
            _ = try await f.db.save(Self.note(zone, "n1", title: "t", body: "secret"))
            let bob = try await f.user("Bob Builder", "bob@example.com")
            await expectStoreError(.zoneNotFound) { try await bob.sharedDatabase.record(named: "n1", in: zone) }
            #expect(try await bob.privateDatabase.zones().isEmpty)
        }
    }

    @Test("a zone's change feed: pages in commit order with deletions, a token that resumes, compaction that expires old tokens", arguments: TestBackend.all)
    func zoneChanges(_ backend: TestBackend) async throws {
        try await withStore(backend) { f in
            let zone = try await f.db.createZone(named: "Feed")
            _ = try await f.db.modify(saving: (0..<5).map { Self.note(zone, "r\($0)", title: "t", body: "b") }, in: zone)
            let start = try await f.db.changes(in: zone, since: nil).token
            try await f.db.delete(recordNamed: "r1", in: zone)
            var r3 = try await f.db.record(named: "r3", in: zone)
            r3.values["title"] = "edited"
            _ = try await f.db.save(r3)
            _ = try await f.db.save(Self.note(zone, "r9", title: "new", body: "b"))

            var changed = [String](), deleted = [String](), token = start
            while true {
                let page = try await f.db.changes(in: zone, since: token, limit: 1)
                changed += page.changed.map(\.name)
                deleted += page.deleted.map(\.name)
                #expect(page.refused.isEmpty)
                token = page.token
                if !page.moreComing { break }
            }
            #expect(changed == ["r3", "r9"])
            #expect(deleted == ["r1"])
            #expect(try await f.db.changes(in: zone, since: token).changed.isEmpty)

            // A fresh session reads the feed from the start: every record, each verified.
            let all = try await f.fresh(f.alice).privateDatabase.changes(in: zone, since: nil)
            #expect(all.changed.map(\.name).sorted() == ["r0", "r2", "r3", "r4", "r9"])

            #expect(try await f.db.compactHistory(of: zone, through: token.seq) == 1)
            await expectStoreError(.changeTokenExpired) { try await f.db.changes(in: zone, since: start) }
        }
    }

    @Test("the database change feed lists zones created, changed and deleted since a token", arguments: TestBackend.all)
    func databaseChanges(_ backend: TestBackend) async throws {
        try await withStore(backend) { f in
            let kept = try await f.db.createZone(named: "Kept")
            let gone = try await f.db.createZone(named: "Gone")
            let first = try await f.db.databaseChanges(since: nil)
            #expect(Set(first.changed.map(\.name)) == ["Kept", "Gone"])
            _ = try await f.db.save(Self.note(kept, "n1", title: "t", body: "b"))
            try await f.db.deleteZone(gone)
            let next = try await f.db.databaseChanges(since: first.token)
            #expect(next.changed.map(\.name) == ["Kept"])
            #expect(next.deleted.map(\.zoneID.name) == ["Gone"])
            #expect(try await f.db.databaseChanges(since: next.token).changed.isEmpty)
        }
    }
}

import CofferCrypto
import CofferVault
import CofferStoreTestSupport
import Foundation
import GRDB
import Testing
@testable import CofferStore

@Suite("Zones")
struct ZoneTests {
    @Test("create, list by name with their facts, and the id names the owner", arguments: TestBackend.all)
    func createAndList(_ backend: TestBackend) async throws {
        try await withStore(backend) { f async throws in
            let before = Date()
            let notes = try await f.db.createZone(named: "Notes")
            let archive = try await f.db.createZone(named: "Archive")
            let after = Date()
            #expect(notes == ZoneID(name: "Notes", ownerID: f.alice.userID))
            #expect(notes == f.db.zoneID(named: "Notes"))
            #expect(notes.description == "Notes@\(f.alice.userID)")
            #expect(archive.name == "Archive")

            _ = try await f.db.save(makeRecord("Note", "a", in: notes, plain: ["title": "x"]))
            _ = try await f.db.save(makeRecord("Note", "b", in: notes, plain: ["title": "y"]))
            let zones = try await f.db.zones()
            #expect(zones.map(\.id) == [archive, notes])
            #expect(zones.map(\.recordCount) == [0, 2])
            #expect(zones.map(\.keyEpoch) == [1, 1])
            #expect(zones.map(\.sequence) == [1, 3])
            for zone in zones {
                #expect(zone.created >= before.addingTimeInterval(-0.001) && zone.created <= after.addingTimeInterval(0.001))
            }
        }
    }

    @Test("a zone name that exists already is .alreadyExists; the same name for another user is fine", arguments: TestBackend.all)
    func duplicate(_ backend: TestBackend) async throws {
        try await withStore(backend) { f async throws in
            try await f.db.createZone(named: "Notes")
            await expectStoreError(.alreadyExists) { try await f.db.createZone(named: "Notes") }
            // Names are case-sensitive.
            try await f.db.createZone(named: "notes")
            let bob = try await f.user("Bob Builder", "bob@example.com")
            let bobNotes = try await bob.privateDatabase.createZone(named: "Notes")
            #expect(bobNotes.ownerID == bob.userID)
            #expect(try await f.db.zones().map(\.id.name) == ["Notes", "notes"])
            #expect(try await bob.privateDatabase.zones().map(\.id) == [bobNotes])
        }
    }

    @Test("zone names follow DESIGN: ASCII, 1...255, no leading '_', no '@'", arguments: [
        "", "_hidden", "a@b", "@", "café", "tab\there", "new\nline", "nul\u{0}", "del\u{7f}",
        String(repeating: "z", count: 256), "日本",
    ])
    func badZoneNames(_ name: String) async throws {
        try await withStore { f async throws in
            await expectStoreError(.invalidArguments, "\(Array(name.utf8).prefix(12))") { try await f.db.createZone(named: name) }
            #expect(try await f.db.zones().isEmpty)
        }
    }

    @Test("good zone names, up to 255 characters", arguments: [
        "a", "Notes", "with space", "a_b", "x-y.z", "1234", "~!#$%^&*()", "mid_underscore",
        String(repeating: "z", count: 255),
    ])
    func goodZoneNames(_ name: String) async throws {
        try await withStore { f async throws in
            let zone = try await f.db.createZone(named: name)
            #expect(zone.name == name)
            #expect(try await f.db.zones().map(\.id.name) == [name])
            let saved = try await f.db.save(makeRecord("Note", "r", in: zone, encrypted: ["body": "hello"]))
            #expect(try await f.db.record(named: "r", in: zone).encryptedValues == saved.encryptedValues)
        }
    }

    @Test("each zone gets a key wrapped to its owner, epoch 1, and a random 16-byte uid")
    func zoneKeyRows() async throws {
        try await withStore { f async throws in
            try await f.db.createZone(named: "A")
            try await f.db.createZone(named: "B")
            let rows = try await f.store.dbPool.read { db in
                try Row.fetchAll(db, sql: """
                    SELECT z.name, z.uid, z.current_epoch, k.epoch, k.member_id, k.wrapped_key
                    FROM zone z JOIN zone_key k ON k.zone_id = z.id ORDER BY z.name
                    """)
            }
            #expect(rows.count == 2)
            var uids = Set<Data>(), wrapped = Set<Data>()
            for row in rows {
                #expect(row["current_epoch"] as Int64 == 1)
                #expect(row["epoch"] as Int64 == 1)
                #expect(row["member_id"] as String == f.alice.userID)
                let uid: Data = row["uid"], key: Data = row["wrapped_key"]
                #expect(uid.count == 16)
                let sealedLength = 108 // crypto_box_seal (48) of "CZK1" ‖ zone uid (16) ‖ epoch (8) ‖ key (32)
                #expect(key.count == sealedLength)
                uids.insert(uid)
                wrapped.insert(key)
            }
            #expect(uids.count == 2)
            #expect(wrapped.count == 2)
        }
    }

    @Test("deleting a zone removes its records, keys and schema, and only those")
    func deleteRemovesEverything() async throws {
        try await withStore { f async throws in
            let doomed = try await f.db.createZone(named: "Doomed")
            let kept = try await f.db.createZone(named: "Kept")
            for zone in [doomed, kept] {
                for i in 0..<5 {
                    _ = try await f.db.save(makeRecord("Note", "n\(i)", in: zone, plain: ["title": .string("t\(i)")],
                                                       encrypted: ["body": .string("b\(i)")]))
                }
            }
            let counts = { @Sendable (zone: String) async throws -> [Int] in
                try await f.store.dbPool.read { db in
                    try ["record", "zone_key", "field_schema"].map { table in
                        try Int.fetchOne(db, sql: "SELECT count(*) FROM \(table) t JOIN zone z ON z.id = t.zone_id WHERE z.name = ?", arguments: [zone]) ?? -1
                    }
                }
            }
            #expect(try await counts("Doomed") == [5, 1, 2])
            let doomedRowID = try await f.store.dbPool.read { db in try Int64.fetchOne(db, sql: "SELECT id FROM zone WHERE name = 'Doomed'") }

            try await f.db.deleteZone(doomed)

            #expect(try await f.db.zones().map(\.id) == [kept])
            let orphans = try await f.store.dbPool.read { db in
                try ["record", "zone_key", "field_schema"].map { table in
                    try Int.fetchOne(db, sql: "SELECT count(*) FROM \(table) WHERE zone_id = ?", arguments: [doomedRowID]) ?? -1
                }
            }
            #expect(orphans == [0, 0, 0])
            #expect(try await counts("Kept") == [5, 1, 2])
            await expectStoreError(.zoneNotFound) { try await f.db.record(named: "n0", in: doomed) }
            await expectStoreError(.zoneNotFound) { try await f.db.save(makeRecord("Note", "n9", in: doomed)) }
            await expectStoreError(.zoneNotFound) { try await f.db.query(Query(recordType: "Note"), in: doomed) }
            await expectStoreError(.zoneNotFound) { try await f.db.records(named: ["n0"], in: doomed) }
            await expectStoreError(.zoneNotFound) { try await f.db.records(in: doomed) }
            await expectStoreError(.zoneNotFound) { try await f.db.schema(of: "Note", in: doomed) }
            await expectStoreError(.zoneNotFound) { try await f.db.delete(recordNamed: "n0", in: doomed) }
            await expectStoreError(.zoneNotFound) { try await f.db.deleteZone(doomed) }
            #expect(try await f.db.record(named: "n3", in: kept).encryptedValues["body"] == "b3")
        }
    }

    @Test("a zone created again with a deleted zone's name starts empty, with a new key and schema")
    func recreate() async throws {
        try await withStore { f async throws in
            let first = try await f.db.createZone(named: "Notes")
            _ = try await f.db.save(makeRecord("Note", "old", in: first, plain: ["count": 1], encrypted: ["body": "old body"]))
            let oldKey = try await f.store.dbPool.read { db in try Data.fetchOne(db, sql: "SELECT wrapped_key FROM zone_key") }
            try await f.db.deleteZone(first)
            let second = try await f.db.createZone(named: "Notes")
            #expect(second == first)
            await expectStoreError(.unknownItem) { try await f.db.record(named: "old", in: second) }
            #expect(try await f.db.schema(of: "Note", in: second).isEmpty)
            // The old schema is gone: the field can take another type now.
            let saved = try await f.db.save(makeRecord("Note", "new", in: second, plain: ["count": "one"]))
            #expect(saved.values["count"] == "one")
            let newKey = try await f.store.dbPool.read { db in try Data.fetchOne(db, sql: "SELECT wrapped_key FROM zone_key") }
            #expect(newKey != nil && newKey != oldKey)
            let zones = try await f.db.zones()
            #expect(zones.map(\.recordCount) == [1])
            #expect(zones.map(\.sequence) == [2])
        }
    }

    @Test("another user neither lists, reads, writes nor deletes a zone they do not own", arguments: TestBackend.all)
    func otherUsersZones(_ backend: TestBackend) async throws {
        try await withStore(backend) { f async throws in
            let zone = try await f.db.createZone(named: "Private")
            _ = try await f.db.save(makeRecord("Note", "secret", in: zone, encrypted: ["body": "for alice"]))
            let bob = try await f.user("Bob Builder", "bob@example.com")
            let bobDB = bob.privateDatabase
            #expect(try await bobDB.zones().isEmpty)
            #expect(bobDB.zoneID(named: "Private") != zone)
            await expectStoreError(.zoneNotFound) { try await bobDB.record(named: "secret", in: bobDB.zoneID(named: "Private")) }
            // A zone not shared with Bob does not exist for him (as in CloudKit); only its deletion names the rule.
            await expectStoreError(.zoneNotFound) { try await bobDB.record(named: "secret", in: zone) }
            await expectStoreError(.zoneNotFound) { try await bobDB.records(named: ["secret"], in: zone) }
            await expectStoreError(.zoneNotFound) { try await bobDB.query(Query(recordType: "Note"), in: zone) }
            await expectStoreError(.zoneNotFound) { try await bobDB.records(in: zone) }
            await expectStoreError(.zoneNotFound) { try await bobDB.schema(of: "Note", in: zone) }
            await expectStoreError(.zoneNotFound) { try await bobDB.save(makeRecord("Note", "x", in: zone, plain: ["a": 1])) }
            await expectStoreError(.zoneNotFound) { try await bobDB.delete(recordNamed: "secret", in: zone) }
            // Alice's zone is not in Bob's private database; in his shared one, only its deletion names the rule.
            await expectStoreError(.zoneNotFound) { try await bobDB.deleteZone(zone) }
            // Through a server, Bob cannot read the log of a zone he is not in at all, so there
            // is no zone to name a rule for.
            let error = await expectStoreError(backend.isServer ? .zoneNotFound : .permissionFailure) { try await bob.sharedDatabase.deleteZone(zone) }
            #expect(error?.message.contains("for alice") == false)
            #expect(try await f.db.zones().map(\.recordCount) == [1])
            #expect(try await f.db.record(named: "secret", in: zone).encryptedValues["body"] == "for alice")
        }
    }

    @Test("a zone's sequence counts its commits; a failed commit does not count", arguments: TestBackend.all)
    func sequence(_ backend: TestBackend) async throws {
        try await withStore(backend) { f async throws in
            let zone = try await f.db.createZone(named: "Notes")
            let a = try await f.db.save(makeRecord("Note", "a", in: zone, plain: ["n": 1]))
            _ = try await f.db.modify(saving: [makeRecord("Note", "b", in: zone), makeRecord("Note", "c", in: zone)], in: zone)
            await expectStoreError(.serverRecordChanged) { try await f.db.save(makeRecord("Note", "a", in: zone)) }
            try await f.db.delete(recordNamed: "b", in: zone)
            #expect(a.changeTag == "2")
            #expect(try await f.db.zones().first?.sequence == 4)
        }
    }

    @Test("a session's zones are its own: the cache does not leak a deleted zone's key to a new zone", arguments: TestBackend.all)
    func cacheAfterDelete(_ backend: TestBackend) async throws {
        try await withStore(backend) { f async throws in
            let zone = try await f.db.createZone(named: "Notes")
            _ = try await f.db.save(makeRecord("Note", "a", in: zone, encrypted: ["body": "one"]))
            try await f.db.deleteZone(zone)
            let again = try await f.db.createZone(named: "Notes")
            _ = try await f.db.save(makeRecord("Note", "a", in: again, encrypted: ["body": "two"]))
            // A fresh session unwraps the new zone's key from the store and reads the record.
            let fresh = try await f.fresh(f.alice)
            #expect(try await fresh.privateDatabase.record(named: "a", in: again).encryptedValues["body"] == "two")
        }
    }
}

import CofferCrypto
import CofferTestSupport
import CofferVault
import CofferStoreTestSupport
import Foundation
import GRDB
import Testing
@testable import CofferStore

/// Rows changed by hand, through a separate SQLite connection on the same file, as someone
/// with write access to the file would: every read of a damaged record fails with
/// `.integrityFailure` naming it, and nothing crashes.
@Suite("Tampering")
struct TamperTests {
    /// A second connection to the store's file, outside the store.
    func withRawDatabase<T>(_ f: TestStore, _ body: (Database) throws -> T) throws -> T {
        let queue = try DatabaseQueue(path: f.path)
        defer { try? queue.close() }
        return try queue.write(body)
    }

    /// Zone "A" with records a1, a2, a3 and zone "B" with b1, all of type Note with plain and
    /// encrypted fields.
    func seed(_ f: TestStore) async throws -> (ZoneID, ZoneID) {
        let a = try await f.db.createZone(named: "A")
        let b = try await f.db.createZone(named: "B")
        for name in ["a1", "a2", "a3"] {
            _ = try await f.db.save(makeRecord("Note", name, in: a, plain: ["title": .string(name)], encrypted: ["body": .string("body of \(name)")]))
        }
        _ = try await f.db.save(makeRecord("Note", "b1", in: b, plain: ["title": "b1"], encrypted: ["body": "body of b1"]))
        return (a, b)
    }

    func sealed(_ db: Database, zone: String, name: String) throws -> Data {
        try #require(try Data.fetchOne(db, sql: "SELECT r.sealed FROM record r JOIN zone z ON z.id = r.zone_id WHERE z.name = ? AND r.name = ?",
                                       arguments: [zone, name]))
    }

    func setSealed(_ db: Database, zone: String, name: String, _ blob: Data?) throws {
        try db.execute(sql: "UPDATE record SET sealed = ? WHERE name = ? AND zone_id = (SELECT id FROM zone WHERE name = ?)",
                       arguments: [blob, name, zone])
        #expect(db.changesCount == 1)
    }

    /// Every read path of `name` fails with `.integrityFailure` that names it, in this session
    /// and in a fresh one; the other records still read.
    func expectDamaged(_ f: TestStore, _ name: String, in zone: ZoneID, others: [String], type: String = "Note",
                       namesRecord: Bool = true, sourceLocation: SourceLocation = #_sourceLocation) async throws {
        for session in [f.alice, try await f.fresh(f.alice)] {
            let db = session.privateDatabase
            let error = await expectStoreError(.integrityFailure, sourceLocation: sourceLocation) { try await db.record(named: name, in: zone) }
            if namesRecord {
                #expect(error?.message.contains("'\(name)'") == true, "\(error?.message ?? "")", sourceLocation: sourceLocation)
            }
            let many = try await db.records(named: [name] + others, in: zone)
            #expect(many.count == others.count + 1, sourceLocation: sourceLocation)
            if case .failure(let e)? = many[name] {
                #expect(e.code == .integrityFailure, sourceLocation: sourceLocation)
            } else {
                Issue.record("records(named:) should report '\(name)' as a failure", sourceLocation: sourceLocation)
            }
            for other in others {
                #expect(try many[other]?.get().encryptedValues["body"] == .string("body of \(other)"), sourceLocation: sourceLocation)
            }
            // A query skips the damaged record and reports it as refused.
            let page = try await db.query(Query(recordType: type), in: zone)
            #expect(page.refused[name]?.code == .integrityFailure, "refused: \(page.refused.keys.sorted())", sourceLocation: sourceLocation)
            #expect(!recordNames(page.records).contains(name), sourceLocation: sourceLocation)
            #expect(Set(others).isSubset(of: Set(recordNames(page.records))), sourceLocation: sourceLocation)
            await expectStoreError(.integrityFailure, sourceLocation: sourceLocation) { try await db.records(in: zone) }
        }
    }

    @Test("a sealed blob copied to another record of the same zone fails to open")
    func movedWithinZone() async throws {
        try await withStore { f async throws in
            let (a, _) = try await seed(f)
            try withRawDatabase(f) { db in try setSealed(db, zone: "A", name: "a2", try sealed(db, zone: "A", name: "a1")) }
            try await expectDamaged(f, "a2", in: a, others: ["a1", "a3"])
        }
    }

    @Test("a sealed blob copied to a record of another zone fails to open")
    func movedAcrossZones() async throws {
        try await withStore { f async throws in
            let (a, b) = try await seed(f)
            try withRawDatabase(f) { db in try setSealed(db, zone: "B", name: "b1", try sealed(db, zone: "A", name: "a1")) }
            try await expectDamaged(f, "b1", in: b, others: [])
            #expect(try await f.db.record(named: "a1", in: a).encryptedValues["body"] == "body of a1")
        }
    }

    @Test("a record moved whole to another zone (row's zone_id changed) fails to open")
    func rowMovedAcrossZones() async throws {
        try await withStore { f async throws in
            let (_, b) = try await seed(f)
            try withRawDatabase(f) { db in
                try db.execute(sql: "UPDATE record SET zone_id = (SELECT id FROM zone WHERE name = 'B') WHERE name = 'a3'")
            }
            try await expectDamaged(f, "a3", in: b, others: ["b1"])
        }
    }

    @Test("a renamed row, or a row whose type changed, fails to open")
    func renamedOrRetyped() async throws {
        try await withStore { f async throws in
            let (a, _) = try await seed(f)
            try withRawDatabase(f) { db in
                try db.execute(sql: "UPDATE record SET name = 'renamed' WHERE name = 'a1'")
            }
            try await expectDamaged(f, "renamed", in: a, others: ["a2", "a3"])
        }
        try await withStore { f async throws in
            let (a, _) = try await seed(f)
            // Task has the same fields, so only the associated data tells the types apart.
            _ = try await f.db.save(makeRecord("Task", "t", in: a, plain: ["title": "t"], encrypted: ["body": "task body"]))
            try withRawDatabase(f) { db in
                try db.execute(sql: "UPDATE record SET type = 'Task' WHERE name = 'a2'")
            }
            let error = await expectStoreError(.integrityFailure) { try await f.db.record(named: "a2", in: a) }
            #expect(error?.message.contains("'a2'") == true)
        }
    }

    @Test("a changed epoch column fails to open", arguments: [0, 2, Int64.max])
    func epochChanged(_ epoch: Int64) async throws {
        try await withStore { f async throws in
            let (a, _) = try await seed(f)
            try withRawDatabase(f) { db in
                try db.execute(sql: "UPDATE record SET epoch = ? WHERE name = 'a2'", arguments: [epoch])
            }
            try await expectDamaged(f, "a2", in: a, others: ["a1", "a3"])
        }
    }

    @Test("a row whose blob and epoch column both name an epoch the zone never had is damaged, not the whole fetch")
    func epochAndKeyIDChanged() async throws {
        try await withStore { f async throws in
            let (a, _) = try await seed(f)
            try withRawDatabase(f) { db in
                var blob = Array(try sealed(db, zone: "A", name: "a2"))
                blob[4] = 2 // key id (big-endian u32 at offset 1)
                try setSealed(db, zone: "A", name: "a2", Data(blob))
                try db.execute(sql: "UPDATE record SET epoch = 2 WHERE name = 'a2'")
            }
            try await expectDamaged(f, "a2", in: a, others: ["a1", "a3"])
        }
    }

    @Test("any flipped byte or bit of a sealed blob is .integrityFailure naming the record")
    func flippedBytes() async throws {
        try await withStore { f async throws in
            let (a, _) = try await seed(f)
            let original = try withRawDatabase(f) { db in Array(try sealed(db, zone: "A", name: "a2")) }
            #expect(original.count == 64 + Envelope.overhead)
            for i in 0..<original.count {
                for mask: UInt8 in (i % 16 == 0 ? [0x01, 0x80, 0xff] : [0x01]) {
                    var blob = original
                    blob[i] ^= mask
                    try withRawDatabase(f) { db in try setSealed(db, zone: "A", name: "a2", Data(blob)) }
                    let error = await expectStoreError(.integrityFailure, "byte \(i) ^ \(mask)") { try await f.db.record(named: "a2", in: a) }
                    #expect(error?.message.contains("'a2'") == true, "byte \(i): \(error?.message ?? "")")
                }
            }
            try withRawDatabase(f) { db in try setSealed(db, zone: "A", name: "a2", Data(original)) }
            #expect(try await f.db.record(named: "a2", in: a).encryptedValues["body"] == "body of a2")
        }
    }

    @Test("truncated, extended, empty and random sealed blobs are .integrityFailure", arguments: [
        "empty", "one byte", "header only", "cut tag", "extended", "random", "zeros",
    ])
    func malformedBlobs(_ kind: String) async throws {
        try await withStore { f async throws in
            let (a, _) = try await seed(f)
            try withRawDatabase(f) { db in
                let original = Array(try sealed(db, zone: "A", name: "a2"))
                let blob: [UInt8]
                switch kind {
                case "empty": blob = []
                case "one byte": blob = [1]
                case "header only": blob = Array(original.prefix(29))
                case "cut tag": blob = Array(original.dropLast())
                case "extended": blob = original + [0]
                case "random": blob = [1, 0, 0, 0, 1] + SecureRandom.bytes(count: 104)
                default: blob = Array(repeating: 0, count: original.count)
                }
                try setSealed(db, zone: "A", name: "a2", Data(blob))
            }
            try await expectDamaged(f, "a2", in: a, others: ["a1", "a3"])
        }
    }

    @Test("a sealed blob removed from a record with encrypted fields is .integrityFailure (writes are signed)")
    func sealedRemoved() async throws {
        try await withStore { f async throws in
            let (a, _) = try await seed(f)
            try withRawDatabase(f) { db in try setSealed(db, zone: "A", name: "a2", nil) }
            try await expectDamaged(f, "a2", in: a, others: ["a1", "a3"])
        }
    }

    /// Saves a record, sets `column` of its row to -1 by hand, and reads it back: the read must
    /// fail with `.integrityFailure` (exit 0), not trap.
    static func negativeColumnScenario(_ column: String) async -> Int32 {
        do {
            let folder = try makeTemporaryFolder()
            defer { try? FileManager.default.removeItem(at: folder) }
            let vault = try makeVault(in: folder)
            let store = try Store(path: storePath(in: folder))
            let db = try store.session(vault: vault).privateDatabase
            let zone = try await db.createZone(named: "Z")
            _ = try await db.save(makeRecord("Note", "n", in: zone, plain: ["t": "x"], encrypted: ["s": "y"]))
            let queue = try DatabaseQueue(path: store.url.path)
            try await queue.write { db in try db.execute(sql: "UPDATE record SET \(column) = -1 WHERE name = 'n'") }
            try queue.close()
            let fresh = try store.session(vault: vault).privateDatabase
            do {
                _ = try await fresh.record(named: "n", in: zone)
                return 3
            } catch let e as StoreError where e.code == .integrityFailure {
                return 0
            }
        } catch {
            return 2
        }
    }

    @Test("a negative epoch column is .integrityFailure, not a crash")
    func negativeEpoch() async {
        await #expect(processExitsWith: .success) {
            exit(await TamperTests.negativeColumnScenario("epoch"))
        }
    }

    @Test("a negative seq column is .integrityFailure, not a crash")
    func negativeSeq() async {
        await #expect(processExitsWith: .success) {
            exit(await TamperTests.negativeColumnScenario("seq"))
        }
    }

    @Test("a negative membership_seq column is .integrityFailure, not a crash")
    func negativeMembershipSeq() async {
        await #expect(processExitsWith: .success) {
            exit(await TamperTests.negativeColumnScenario("membership_seq"))
        }
    }

    // MARK: - Zone keys

    @Test("a wrapped key replaced by junk, by another zone's key, or by a key for another user fails; a removed one is .permissionFailure")
    func wrappedKeys() async throws {
        // (Another zone's key of the same user is the subject of wrappedKeyMovedBetweenOwnZones.)
        for replacement in ["junk", "other user", "truncated", "removed"] {
            try await withStore { f async throws in
                let (a, _) = try await seed(f)
                let bob = try await f.user("Bob Builder", "bob@example.com")
                try await bob.privateDatabase.createZone(named: "BobZone")
                try withRawDatabase(f) { db in
                    let zoneA = try Int64.fetchOne(db, sql: "SELECT id FROM zone WHERE name = 'A'")!
                    let current = try Data.fetchOne(db, sql: "SELECT wrapped_key FROM zone_key WHERE zone_id = ?", arguments: [zoneA])!
                    let key: Data?
                    switch replacement {
                    case "junk": key = Data(SecureRandom.bytes(count: current.count))
                    case "other user": key = try Data.fetchOne(db, sql: "SELECT wrapped_key FROM zone_key WHERE zone_id = (SELECT id FROM zone WHERE name = 'BobZone')")
                    case "truncated": key = current.prefix(40)
                    default: key = nil
                    }
                    if let key {
                        try db.execute(sql: "UPDATE zone_key SET wrapped_key = ? WHERE zone_id = ?", arguments: [key, zoneA])
                    } else {
                        try db.execute(sql: "DELETE FROM zone_key WHERE zone_id = ?", arguments: [zoneA])
                    }
                }
                // A fresh session has no cached key: it must unwrap the damaged one.
                let fresh = try await f.fresh(f.alice).privateDatabase
                let expected: [StoreError.Code] = replacement == "removed" ? [.permissionFailure] : [.integrityFailure, .permissionFailure]
                await expectStoreError(oneOf: expected, "\(replacement): read") { try await fresh.record(named: "a1", in: a) }
                await expectStoreError(oneOf: expected, "\(replacement): fetch many") { try await fresh.records(named: ["a1", "a2"], in: a) }
                await expectStoreError(oneOf: expected, "\(replacement): query") { try await fresh.query(Query(recordType: "Note"), in: a) }
                await expectStoreError(oneOf: expected, "\(replacement): update") {
                    var r = try await f.db.record(named: "a1", in: a) // the old session still holds the real key
                    r.values["title"] = "x"
                    return try await fresh.save(r)
                }
                await expectStoreError(oneOf: expected, "\(replacement): new record") {
                    try await fresh.save(makeRecord("Note", "new", in: a, encrypted: ["body": "sealed under what?"]))
                }
                await expectStoreError(.unknownItem, "\(replacement)") { try await f.db.record(named: "new", in: a) }
            }
        }
    }

    // MARK: - Plain values

    @Test("malformed plain JSON is .integrityFailure, never a crash; the other records still read", arguments: [
        "", "not json", "{", "{\"tags\":[\"x\"]", "{\"tags\":[\"x\"]} trailing", "[]", "null", "{\"tags\":\"x\"}",
        "{\"tags\":[1]}", "{\"unknown\":1}", "{\"tags\":[\"x\"],\"tags\":[\"y\"]}", "{\"tags\":[\"\\ud800\"]}",
        "{\"tags\":[\"\\u00\"]}",
    ])
    func malformedPlain(_ plain: String) async throws {
        try await withStore { f async throws in
            // Lists are not indexed, so SQLite itself accepts any text in the column.
            let zone = try await f.db.createZone(named: "P")
            for name in ["p1", "p2", "p3"] {
                _ = try await f.db.save(makeRecord("Doc", name, in: zone, plain: ["tags": .list(["t"])], encrypted: ["body": .string("body of \(name)")]))
            }
            try withRawDatabase(f) { db in
                try db.execute(sql: "UPDATE record SET plain = ? WHERE name = 'p2'", arguments: [plain])
            }
            try await expectDamaged(f, "p2", in: zone, others: ["p1", "p3"], type: "Doc", namesRecord: false)
        }
    }

    @Test("a plain value of the wrong type in an indexed field is .integrityFailure")
    func wrongTypeInIndexedField() async throws {
        try await withStore { f async throws in
            let (a, _) = try await seed(f)
            try withRawDatabase(f) { db in
                try db.execute(sql: #"UPDATE record SET plain = '{"title":42}' WHERE name = 'a2'"#)
            }
            try await expectDamaged(f, "a2", in: a, others: ["a1", "a3"], namesRecord: false)
        }
    }

    @Test("the error for a damaged plain column names the record")
    func damagedPlainNamesRecord() async throws {
        try await withStore { f async throws in
            let (a, _) = try await seed(f)
            try withRawDatabase(f) { db in
                try db.execute(sql: #"UPDATE record SET plain = '{"title":42}' WHERE name = 'a2'"#)
            }
            let error = await expectStoreError(.integrityFailure) { try await f.db.record(named: "a2", in: a) }
            #expect(error?.message.contains("'a2'") == true, "\(error?.message ?? "")")
        }
    }

    @Test("a schema row changed by hand (unknown type, or a sealed field marked plain) is .integrityFailure")
    func tamperedSchema() async throws {
        try await withStore { f async throws in
            let (a, _) = try await seed(f)
            try withRawDatabase(f) { db in
                try db.execute(sql: "UPDATE field_schema SET encrypted = 0 WHERE field = 'body'")
            }
            let fresh = try await f.fresh(f.alice).privateDatabase
            await expectStoreError(.integrityFailure) { try await fresh.record(named: "a1", in: a) }
            try withRawDatabase(f) { db in
                try db.execute(sql: "UPDATE field_schema SET encrypted = 1, value_type = 'float' WHERE field = 'body'")
            }
            await expectStoreError(.integrityFailure) { try await f.fresh(f.alice).privateDatabase.record(named: "a1", in: a) }
        }
    }

    @Test("a store id changed by hand changes nothing a reader opens: ciphertexts bind the zone, not the store")
    func storeIDChanged() async throws {
        try await withTemporaryFolder { folder async throws in
            let path = storePath(in: folder)
            let vault = try makeVault(in: folder)
            do {
                let store = try Store(path: path)
                let alice = try store.session(vault: vault)
                let zone = try await alice.privateDatabase.createZone(named: "Z")
                _ = try await alice.privateDatabase.save(makeRecord("Note", "n", in: zone, plain: ["t": "x"], encrypted: ["s": "y"]))
            }
            let queue = try DatabaseQueue(path: path)
            try await queue.write { db in
                try db.execute(sql: "UPDATE store_meta SET value = ? WHERE key = 'store_id'", arguments: [Data(SecureRandom.bytes(count: 16))])
            }
            try queue.close()
            let store = try Store(path: path)
            let alice = try store.session(vault: vault)
            // Ciphertexts bind the zone (bound to its owner by its log), not the store: a zone
            // keeps opening wherever it is stored, whatever the store's id says.
            let record = try await alice.privateDatabase.record(named: "n", in: alice.privateDatabase.zoneID(named: "Z"))
            #expect(record.encryptedValues["s"] == .string("y"))
        }
    }

    @Test("records read with another zone's wrapped key (moved by hand) fail to open")
    func readWithAnotherZonesKey() async throws {
        try await withStore { f async throws in
            let (a, _) = try await seed(f)
            try withRawDatabase(f) { db in
                try db.execute(sql: """
                    UPDATE zone_key SET wrapped_key = (SELECT wrapped_key FROM zone_key WHERE zone_id = (SELECT id FROM zone WHERE name = 'B'))
                    WHERE zone_id = (SELECT id FROM zone WHERE name = 'A')
                    """)
            }
            let fresh = try await f.fresh(f.alice).privateDatabase
            // The wrapped key names its zone and epoch: zone B's key does not open as zone A's.
            let error = await expectStoreError(.integrityFailure) { try await fresh.record(named: "a1", in: a) }
            #expect(error?.message.contains("zone 'A'") == true, "\(error?.message ?? "")")
            // The zone key itself is refused, so a batch fetch fails as a whole, naming the zone.
            await expectStoreError(.integrityFailure) { try await fresh.records(named: ["a1", "a2", "a3"], in: a) }
        }
    }

    @Test("a wrapped key moved from one zone to another is refused before it seals anything (DESIGN: moving a wrapped key must fail)")
    func wrappedKeyMovedBetweenOwnZones() async throws {
        try await withStore { f async throws in
            let a = try await f.db.createZone(named: "A")
            let empty = try await f.db.createZone(named: "Empty")
            _ = try await f.db.save(makeRecord("Note", "a1", in: a, encrypted: ["body": "in A"]))
            try withRawDatabase(f) { db in
                try db.execute(sql: """
                    UPDATE zone_key SET wrapped_key = (SELECT wrapped_key FROM zone_key WHERE zone_id = (SELECT id FROM zone WHERE name = 'A'))
                    WHERE zone_id = (SELECT id FROM zone WHERE name = 'Empty')
                    """)
            }
            // A's key now opens for zone "Empty": new records there would be sealed under A's key,
            // readable by anyone who ever held A's key.
            let fresh = try await f.fresh(f.alice).privateDatabase
            await expectStoreError(oneOf: [.integrityFailure, .permissionFailure]) {
                try await fresh.save(makeRecord("Note", "e1", in: empty, encrypted: ["body": "meant for Empty only"]))
            }
        }
    }
}

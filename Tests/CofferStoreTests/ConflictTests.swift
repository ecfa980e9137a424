import CofferCrypto
import CofferVault
import CofferStoreTestSupport
import Foundation
import Testing
@testable import CofferStore

@Suite("Change tags, conflicts and save policies")
struct ConflictTests {
    /// Saves `Note/doc` with a=1, b=1, secret="s1", and returns it.
    func seed(_ f: TestStore) async throws -> (ZoneID, Record) {
        let zone = try await f.db.createZone(named: "Z")
        let saved = try await f.db.save(makeRecord("Note", "doc", in: zone, plain: ["a": 1, "b": 1], encrypted: ["secret": "s1"]))
        return (zone, saved)
    }

    @Test("each save gives a new change tag; a save with the current tag succeeds", arguments: TestBackend.all)
    func tagsAdvance(_ backend: TestBackend) async throws {
        try await withStore(backend) { f async throws in
            let (zone, first) = try await seed(f)
            var record = first
            var tags = [try #require(first.changeTag)]
            for i in 2...5 {
                record.values["a"] = .int(Int64(i))
                record = try await f.db.save(record)
                tags.append(try #require(record.changeTag))
            }
            #expect(Set(tags).count == 5)
            #expect(tags == ["2", "3", "4", "5", "6"])
            let fetched = try await f.db.record(named: "doc", in: zone)
            #expect(fetched.changeTag == "6")
            #expect(fetched.values["a"] == 5)
        }
    }

    @Test("a save with a stale tag is .serverRecordChanged carrying the stored record, and changes nothing", arguments: TestBackend.all)
    func staleTag(_ backend: TestBackend) async throws {
        try await withStore(backend) { f async throws in
            let (zone, original) = try await seed(f)
            var mine = original
            var theirs = original
            theirs.values["a"] = 2
            theirs.encryptedValues["secret"] = "s2"
            let theirsSaved = try await f.db.save(theirs)

            mine.values["b"] = 99
            let error = await expectStoreError(.serverRecordChanged) { try await f.db.save(mine) }
            let server = try #require(error?.serverRecord)
            #expect(server.changeTag == theirsSaved.changeTag)
            #expect(server.values == ["a": 2, "b": 1])
            #expect(server.encryptedValues == ["secret": "s2"])
            #expect(server.name == "doc" && server.recordType == "Note" && server.zoneID == zone)
            #expect(server.creatorID == f.alice.userID)
            #expect(error?.message.contains("s2") == false)
            #expect(error?.description.contains("s2") == false)
            // The message names both tags: the stored one and the one this save carried.
            #expect(error?.message.contains("it is at change tag \(theirsSaved.changeTag!), the save had change tag \(original.changeTag!);") == true)
            #expect(try await f.db.record(named: "doc", in: zone) == theirsSaved)

            // Merge onto the server record and save again.
            var merged = server
            merged.values["b"] = 99
            let resolved = try await f.db.save(merged)
            #expect(resolved.values == ["a": 2, "b": 99])
            #expect(resolved.encryptedValues == ["secret": "s2"])
            #expect(resolved.changeTag == "4")
        }
    }

    @Test("saving a new record over an existing name is .serverRecordChanged with the stored record", arguments: TestBackend.all)
    func newOverExisting(_ backend: TestBackend) async throws {
        try await withStore(backend) { f async throws in
            let (zone, original) = try await seed(f)
            let error = await expectStoreError(.serverRecordChanged) {
                try await f.db.save(makeRecord("Note", "doc", in: zone, plain: ["a": 7]))
            }
            #expect(error?.serverRecord == original)
            #expect(error?.message.contains("the save had no change tag (a new record)") == true)
            #expect(try await f.db.record(named: "doc", in: zone).values == ["a": 1, "b": 1])
        }
    }

    @Test("saving with a tag after the record was deleted is .unknownItem", arguments: TestBackend.all)
    func tagOfDeletedRecord(_ backend: TestBackend) async throws {
        try await withStore(backend) { f async throws in
            let (zone, original) = try await seed(f)
            try await f.db.delete(recordNamed: "doc", in: zone)
            await expectStoreError(.unknownItem) { try await f.db.save(original) }
            await expectStoreError(.unknownItem) { try await f.db.record(named: "doc", in: zone) }
        }
    }

    @Test(".changedKeys writes only the keys this value changed, over the stored record", arguments: TestBackend.all)
    func changedKeys(_ backend: TestBackend) async throws {
        try await withStore(backend) { f async throws in
            let (zone, original) = try await seed(f)
            var theirs = original
            theirs.values["a"] = 2
            theirs.encryptedValues["secret"] = "theirs"
            _ = try await f.db.save(theirs)

            var mine = original
            #expect(mine.changedKeys.isEmpty)
            mine.values["b"] = 3
            mine.encryptedValues["note"] = "mine"
            #expect(mine.changedKeys == ["b", "note"])
            await expectStoreError(.serverRecordChanged) { try await f.db.save(mine) }
            let saved = try await f.db.save(mine, policy: .changedKeys)
            #expect(saved.values == ["a": 2, "b": 3])
            #expect(saved.encryptedValues == ["secret": "theirs", "note": "mine"])
            #expect(saved.changeTag == "4")
            #expect(saved.creatorID == f.alice.userID)
            let fetched = try await f.fresh(f.alice).privateDatabase.record(named: "doc", in: zone)
            #expect(fetched.values == ["a": 2, "b": 3])
            #expect(fetched.encryptedValues == ["secret": "theirs", "note": "mine"])
        }
    }

    @Test(".changedKeys removes the keys this value removed, and leaves the others", arguments: TestBackend.all)
    func changedKeysRemoval(_ backend: TestBackend) async throws {
        try await withStore(backend) { f async throws in
            let (zone, original) = try await seed(f)
            var theirs = original
            theirs.values["a"] = 5
            _ = try await f.db.save(theirs)
            var mine = original
            mine.values["b"] = nil
            mine.encryptedValues["secret"] = nil
            #expect(mine.changedKeys == ["b", "secret"])
            _ = try await f.db.save(mine, policy: .changedKeys)
            let fetched = try await f.db.record(named: "doc", in: zone)
            #expect(fetched.values == ["a": 5])
            #expect(fetched.encryptedValues.isEmpty)
        }
    }

    @Test(".changedKeys on a record that does not exist yet saves it whole", arguments: TestBackend.all)
    func changedKeysNew(_ backend: TestBackend) async throws {
        try await withStore(backend) { f async throws in
            let zone = try await f.db.createZone(named: "Z")
            let saved = try await f.db.save(makeRecord("Note", "n", in: zone, plain: ["a": 1], encrypted: ["s": "x"]), policy: .changedKeys)
            #expect(saved.changeTag == "2")
            #expect(try await f.db.record(named: "n", in: zone).encryptedValues == ["s": "x"])
        }
    }

    @Test(".allKeys overwrites the stored record with this value, whatever its tag", arguments: TestBackend.all)
    func allKeys(_ backend: TestBackend) async throws {
        try await withStore(backend) { f async throws in
            let (zone, original) = try await seed(f)
            var theirs = original
            theirs.values["a"] = 2
            theirs.encryptedValues["extra"] = "theirs"
            _ = try await f.db.save(theirs)

            var mine = original
            mine.values["b"] = 3
            let saved = try await f.db.save(mine, policy: .allKeys)
            #expect(saved.values == ["a": 1, "b": 3])
            #expect(saved.encryptedValues == ["secret": "s1"])
            let fetched = try await f.db.record(named: "doc", in: zone)
            #expect(fetched.values == ["a": 1, "b": 3])
            #expect(fetched.encryptedValues == ["secret": "s1"])
            #expect(fetched.changeTag == "4")
            #expect(fetched.created == original.created)
            // Also over an existing record with a value that never was fetched.
            _ = try await f.db.save(makeRecord("Note", "doc", in: zone, plain: ["a": 9]), policy: .allKeys)
            #expect(try await f.db.record(named: "doc", in: zone).values == ["a": 9])
            #expect(try await f.db.record(named: "doc", in: zone).encryptedValues.isEmpty)
        }
    }

    @Test("a deletion with a stale tag is .serverRecordChanged with the stored record; with the current tag it deletes", arguments: TestBackend.all)
    func conditionalDelete(_ backend: TestBackend) async throws {
        try await withStore(backend) { f async throws in
            let (zone, original) = try await seed(f)
            var theirs = original
            theirs.values["a"] = 2
            let current = try await f.db.save(theirs)
            let error = await expectStoreError(.serverRecordChanged) {
                try await f.db.delete(recordNamed: "doc", in: zone, ifMatch: original.changeTag)
            }
            #expect(error?.serverRecord == current)
            #expect(try await f.db.record(named: "doc", in: zone) == current)
            try await f.db.delete(recordNamed: "doc", in: zone, ifMatch: current.changeTag)
            await expectStoreError(.unknownItem) { try await f.db.record(named: "doc", in: zone) }
            await expectStoreError(.unknownItem) { try await f.db.delete(recordNamed: "doc", in: zone, ifMatch: current.changeTag) }
        }
    }

    @Test("setChangeTag accepts tags and refuses anything else", arguments: ["", "0", "-1", "ABC", "01", "a b", "1.5", "zzzzzzzzzzzzzz", "z\u{0}"])
    func setChangeTagRefuses(_ tag: String) async throws {
        var record = Record(type: "Note", name: "n", zone: ZoneID(name: "Z", ownerID: "o"))
        await expectStoreError(.invalidArguments) { try record.setChangeTag(tag) }
        #expect(record.changeTag == nil)
    }

    @Test("setChangeTag makes a new value replace a version (If-Match); stale fails, current succeeds", arguments: TestBackend.all)
    func setChangeTag(_ backend: TestBackend) async throws {
        try await withStore(backend) { f async throws in
            let (zone, original) = try await seed(f)
            var replacement = makeRecord("Note", "doc", in: zone, plain: ["a": 42])
            try replacement.setChangeTag("2")
            #expect(replacement.changeTag == "2")
            let saved = try await f.db.save(replacement)
            #expect(saved.changeTag == "3")
            #expect(try await f.db.record(named: "doc", in: zone).values == ["a": 42])
            var stale = makeRecord("Note", "doc", in: zone, plain: ["a": 43])
            try stale.setChangeTag(try #require(original.changeTag))
            let error = await expectStoreError(.serverRecordChanged) { try await f.db.save(stale) }
            #expect(error?.serverRecord?.values == ["a": 42])
            var future = makeRecord("Note", "doc", in: zone, plain: ["a": 44])
            try future.setChangeTag("zz")
            await expectStoreError(.serverRecordChanged) { try await f.db.save(future) }
            #expect(try await f.db.record(named: "doc", in: zone).values == ["a": 42])
        }
    }

    @Test("two sessions of one user race: the second writer gets the conflict", arguments: TestBackend.all)
    func twoSessions(_ backend: TestBackend) async throws {
        try await withStore(backend) { f async throws in
            let (zone, _) = try await seed(f)
            let other = try await f.fresh(f.alice).privateDatabase
            var viaA = try await f.db.record(named: "doc", in: zone)
            var viaB = try await other.record(named: "doc", in: zone)
            viaA.encryptedValues["secret"] = "from A"
            viaB.encryptedValues["secret"] = "from B"
            _ = try await f.db.save(viaA)
            let error = await expectStoreError(.serverRecordChanged) { try await other.save(viaB) }
            #expect(error?.serverRecord?.encryptedValues["secret"] == "from A")
            #expect(try await other.record(named: "doc", in: zone).encryptedValues["secret"] == "from A")
        }
    }

    @Test("concurrent saves of one fetched record: exactly one wins", arguments: TestBackend.all)
    func concurrentSaves(_ backend: TestBackend) async throws {
        try await withStore(backend) { f async throws in
            let (zone, original) = try await seed(f)
            let db = f.db
            let results = await withTaskGroup(of: (code: StoreError.Code?, message: String).self) { group in
                for i in 0..<8 {
                    group.addTask {
                        var copy = original
                        copy.values["a"] = .int(Int64(100 + i))
                        do { _ = try await db.save(copy); return (nil, "") } catch let e as StoreError { return (e.code, e.message) } catch {
                            return (.internalError, "\(type(of: error)): \(error)")
                        }
                    }
                }
                var all: [(code: StoreError.Code?, message: String)] = []
                for await outcome in group { all.append(outcome) }
                return all
            }
            let outcomes = results.map(\.code)
            #expect(outcomes.filter { $0 == nil }.count == 1)
            #expect(outcomes.filter { $0 == .serverRecordChanged }.count == 7, "\(results)")
            let final = try await f.db.record(named: "doc", in: zone)
            #expect(final.changeTag == "3")
        }
    }
}

import CofferCrypto
import CofferVault
import CofferStoreTestSupport
import Foundation
import Testing
@testable import CofferStore

@Suite("Batches and limits")
struct BatchTests {
    @Test("a batch saves and deletes in one commit, in the order given, with one change tag", arguments: TestBackend.all)
    func batchCommits(_ backend: TestBackend) async throws {
        try await withStore(backend) { f async throws in
            let zone = try await f.db.createZone(named: "Z")
            _ = try await f.db.modify(saving: [makeRecord("Note", "old1", in: zone), makeRecord("Note", "old2", in: zone)], in: zone)
            let saving = ["c", "a", "b"].map { makeRecord("Note", $0, in: zone, plain: ["n": .string($0)], encrypted: ["s": .string($0 + "!")]) }
            let result = try await f.db.modify(saving: saving, deleting: [RecordDeletion(name: "old2"), RecordDeletion(name: "old1")], in: zone)
            #expect(recordNames(result.saved) == ["c", "a", "b"])
            #expect(result.deleted == ["old2", "old1"])
            #expect(result.saved.map(\.changeTag) == ["3", "3", "3"])
            #expect(result.saved.allSatisfy { $0.creatorID == f.alice.userID && $0.created != nil })
            #expect(try await f.db.zones().first?.sequence == 3)
            let all = try await f.db.records(in: zone)
            #expect(recordNames(all) == ["a", "b", "c"])
            #expect(all.map { $0.encryptedValues["s"] } == ["a!", "b!", "c!"])
        }
    }

    @Test("one conflict fails the whole batch with .partialFailure naming it; nothing is saved or deleted", arguments: TestBackend.all)
    func atomicOnConflict(_ backend: TestBackend) async throws {
        try await withStore(backend) { f async throws in
            let zone = try await f.db.createZone(named: "Z")
            let existing = try await f.db.save(makeRecord("Note", "existing", in: zone, plain: ["v": 1]))
            _ = try await f.db.save(makeRecord("Note", "victim", in: zone, plain: ["v": 1]))
            var stale = existing
            stale.values["v"] = 2
            _ = try await f.db.save(stale) // moves "existing" to tag 3
            stale.values["v"] = 3          // still at tag 1: stale

            let error = await expectStoreError(.partialFailure) {
                try await f.db.modify(saving: [makeRecord("Note", "fresh1", in: zone, plain: ["v": 10]), stale,
                                               makeRecord("Note", "fresh2", in: zone, plain: ["v": 11])],
                                      deleting: [RecordDeletion(name: "victim")], in: zone)
            }
            #expect(error?.partialErrors.keys.sorted() == ["existing"])
            #expect(error?.partialErrors["existing"]?.code == .serverRecordChanged)
            #expect(error?.partialErrors["existing"]?.serverRecord?.values["v"] == 2)
            #expect(error?.partialErrors["existing"]?.serverRecord?.changeTag == "4")
            await expectStoreError(.unknownItem) { try await f.db.record(named: "fresh1", in: zone) }
            await expectStoreError(.unknownItem) { try await f.db.record(named: "fresh2", in: zone) }
            #expect(try await f.db.record(named: "victim", in: zone).values["v"] == 1)
            #expect(try await f.db.record(named: "existing", in: zone).values["v"] == 2)
            #expect(try await f.db.zones().first?.sequence == 4)
            #expect(try await f.db.zones().first?.recordCount == 2)
        }
    }

    @Test("several failures are all reported: a conflict, a new record that exists, a missing deletion, a stale deletion", arguments: TestBackend.all)
    func severalFailures(_ backend: TestBackend) async throws {
        try await withStore(backend) { f async throws in
            let zone = try await f.db.createZone(named: "Z")
            let a = try await f.db.save(makeRecord("Note", "a", in: zone, plain: ["v": 1]))
            _ = try await f.db.save(makeRecord("Note", "b", in: zone, plain: ["v": 1]))
            let c = try await f.db.save(makeRecord("Note", "c", in: zone, plain: ["v": 1]))
            var a2 = a
            a2.values["v"] = 2
            _ = try await f.db.save(a2)
            var c2 = c
            c2.values["v"] = 2
            _ = try await f.db.save(c2)
            var staleA = a
            staleA.values["v"] = 9
            let error = await expectStoreError(.partialFailure) {
                try await f.db.modify(saving: [staleA, makeRecord("Note", "b", in: zone), makeRecord("Note", "ok", in: zone)],
                                      deleting: [RecordDeletion(name: "ghost"), RecordDeletion(name: "c", ifMatch: c.changeTag)],
                                      in: zone)
            }
            #expect(error?.partialErrors.keys.sorted() == ["a", "b", "c", "ghost"])
            #expect(error?.partialErrors["a"]?.code == .serverRecordChanged)
            #expect(error?.partialErrors["b"]?.code == .serverRecordChanged)
            #expect(error?.partialErrors["b"]?.serverRecord?.name == "b")
            #expect(error?.partialErrors["c"]?.code == .serverRecordChanged)
            #expect(error?.partialErrors["c"]?.serverRecord?.changeTag == "6")
            #expect(error?.partialErrors["ghost"]?.code == .unknownItem)
            #expect(error?.partialErrors["ok"] == nil)
            await expectStoreError(.unknownItem) { try await f.db.record(named: "ok", in: zone) }
            #expect(try await f.db.record(named: "c", in: zone).values["v"] == 2)
        }
    }

    @Test("a batch of one that fails reports its own error, not .partialFailure", arguments: TestBackend.all)
    func loneFailure(_ backend: TestBackend) async throws {
        try await withStore(backend) { f async throws in
            let zone = try await f.db.createZone(named: "Z")
            _ = try await f.db.save(makeRecord("Note", "a", in: zone))
            let error = await expectStoreError(.serverRecordChanged) { try await f.db.modify(saving: [makeRecord("Note", "a", in: zone)], in: zone) }
            #expect(error?.serverRecord?.name == "a")
            await expectStoreError(.unknownItem) { try await f.db.modify(saving: [], deleting: [RecordDeletion(name: "zz")], in: zone) }
        }
    }

    @Test("a name twice in one batch, or a record of another zone, is .invalidArguments", arguments: TestBackend.all)
    func badBatches(_ backend: TestBackend) async throws {
        try await withStore(backend) { f async throws in
            let zone = try await f.db.createZone(named: "Z")
            let other = try await f.db.createZone(named: "Other")
            await expectStoreError(.invalidArguments) {
                try await f.db.modify(saving: [makeRecord("Note", "a", in: zone), makeRecord("Note", "a", in: zone)], in: zone)
            }
            await expectStoreError(.invalidArguments) {
                try await f.db.modify(saving: [makeRecord("Note", "a", in: zone)], deleting: [RecordDeletion(name: "a")], in: zone)
            }
            await expectStoreError(.invalidArguments) {
                try await f.db.modify(saving: [makeRecord("Note", "a", in: zone), makeRecord("Note", "b", in: other)], in: zone)
            }
            await expectStoreError(.invalidArguments) {
                try await f.db.modify(saving: [], deleting: [RecordDeletion(name: "a", ifMatch: "not a tag!")], in: zone)
            }
            #expect(try await f.db.zones().map(\.recordCount) == [0, 0])
            #expect(try await f.db.zones().map(\.sequence) == [1, 1])
        }
    }

    // MARK: - Limits

    @Test("400 records in a batch are fine; 401 (saves and deletes together) are .limitExceeded", arguments: TestBackend.all)
    func recordCountLimit(_ backend: TestBackend) async throws {
        try await withStore(backend) { f async throws in
            let zone = try await f.db.createZone(named: "Z")
            #expect(Limits.maxBatchRecords == 400)
            let four100 = (0..<400).map { makeRecord("Note", "r\($0)", in: zone, plain: ["i": .int(Int64($0))], encrypted: ["s": "x"]) }
            let result = try await f.db.modify(saving: four100, in: zone)
            #expect(result.saved.count == 400)
            let more = (400..<800).map { makeRecord("Note", "r\($0)", in: zone) }
            await expectStoreError(.limitExceeded) {
                try await f.db.modify(saving: more, deleting: [RecordDeletion(name: "r0")], in: zone)
            }
            await expectStoreError(.limitExceeded) {
                try await f.db.modify(saving: more + [makeRecord("Note", "r800", in: zone)], in: zone)
            }
            await expectStoreError(.limitExceeded) {
                try await f.db.modify(saving: [], deleting: (0..<401).map { RecordDeletion(name: "r\($0)") }, in: zone)
            }
            #expect(try await f.db.zones().first?.recordCount == 400)
            #expect(try await f.db.zones().first?.sequence == 2)
            let deleted = try await f.db.modify(saving: [], deleting: (0..<400).map { RecordDeletion(name: "r\($0)") }, in: zone)
            #expect(deleted.deleted.count == 400)
            #expect(try await f.db.zones().first?.recordCount == 0)
        }
    }

    @Test("a record's plain fields up to 1 MiB are fine, one byte more is .limitExceeded", arguments: TestBackend.all)
    func plainRecordSizeLimit(_ backend: TestBackend) async throws {
        try await withStore(backend) { f async throws in
            let zone = try await f.db.createZone(named: "Z")
            #expect(Limits.maxRecordBytes == 1 << 20)
            // The limit counts what the fields hold: the key "s" (1 byte) and the string's UTF-8.
            let atLimit = makeRecord("Note", "big", in: zone, plain: ["s": .string(String(repeating: "a", count: (1 << 20) - 1))])
            try atLimit.validate()
            let saved = try await f.db.save(atLimit)
            #expect(saved.values == atLimit.values)
            let over = makeRecord("Note", "bigger", in: zone, plain: ["s": .string(String(repeating: "a", count: 1 << 20))])
            await expectStoreError(.limitExceeded) { try over.validate() }
            await expectStoreError(.limitExceeded) { try await f.db.save(over) }
            await expectStoreError(.unknownItem) { try await f.db.record(named: "bigger", in: zone) }
            // Encoding does not count: 600,000 quotes weigh 600,000 bytes, though their JSON is twice that.
            let quotes = makeRecord("Note", "quotes", in: zone, plain: ["s": .string(String(repeating: "\"", count: 600_000))])
            _ = try await f.db.save(quotes)
        }
    }

    @Test(".changedKeys: a change under the limit that makes the merged record too big is .limitExceeded, and nothing is saved", arguments: TestBackend.all)
    func changedKeysMergedSizeLimit(_ backend: TestBackend) async throws {
        try await withStore(backend) { f async throws in
            let zone = try await f.db.createZone(named: "Z")
            let half = String(repeating: "a", count: 600_000)
            let original = try await f.db.save(makeRecord("Note", "doc", in: zone, plain: ["n": .int(1)]))
            // Another writer adds 600,000 bytes to the stored record.
            _ = try await f.db.save(makeRecord("Note", "doc", in: zone, plain: ["n": .int(1), "a": .string(half)]), policy: .allKeys)
            // This value adds 600,000 bytes of its own: under the limit alone, over it merged.
            var mine = original
            mine.encryptedValues["b"] = .string(half)
            #expect(mine.changedKeys == ["b"])
            try mine.validate()
            await expectStoreError(.limitExceeded) { try await f.db.save(mine, policy: .changedKeys) }
            let fetched = try await f.db.record(named: "doc", in: zone)
            #expect(fetched.encryptedValues.isEmpty && fetched.values["a"] == .string(half))
        }
    }

    @Test("encrypted fields count toward the 1 MiB limit, together with plain fields", arguments: TestBackend.all)
    func encryptedRecordSizeLimit(_ backend: TestBackend) async throws {
        try await withStore(backend) { f async throws in
            let zone = try await f.db.createZone(named: "Z")
            let big = makeRecord("Note", "big", in: zone, encrypted: ["b": .bytes(Array(repeating: 7, count: 1_000_000))])
            let saved = try await f.db.save(big)
            #expect(saved.encryptedValues == big.encryptedValues)
            #expect(try await f.fresh(f.alice).privateDatabase.record(named: "big", in: zone).encryptedValues == big.encryptedValues)
            let over = makeRecord("Note", "over", in: zone, encrypted: ["b": .bytes(Array(repeating: 7, count: 1 << 20))])
            await expectStoreError(.limitExceeded) { try await f.db.save(over) }
            let mixed = makeRecord("Note", "mixed", in: zone, plain: ["p": .string(String(repeating: "p", count: 600_000))],
                                   encrypted: ["b": .bytes(Array(repeating: 7, count: 600_000))])
            await expectStoreError(.limitExceeded) { try await f.db.save(mixed) }
            #expect(try await f.db.zones().first?.recordCount == 1)
        }
    }

    @Test("a batch of up to 2 MiB of fields is fine; over 2 MiB is .limitExceeded and saves nothing", arguments: TestBackend.all)
    func batchSizeLimit(_ backend: TestBackend) async throws {
        try await withStore(backend) { f async throws in
            let zone = try await f.db.createZone(named: "Z")
            #expect(Limits.maxBatchBytes == 2 << 20)
            let nearMiB = String(repeating: "x", count: 1_000_000)
            let two = (0..<2).map { makeRecord("Note", "ok\($0)", in: zone, plain: ["s": .string(nearMiB)]) }
            #expect(try await f.db.modify(saving: two, in: zone).saved.count == 2)
            let three = (0..<3).map { makeRecord("Note", "big\($0)", in: zone, plain: ["s": .string(String(repeating: "y", count: 800_000))]) }
            await expectStoreError(.limitExceeded) { try await f.db.modify(saving: three, in: zone) }
            let sealedThree = (0..<3).map { makeRecord("Note", "sealed\($0)", in: zone, encrypted: ["b": .bytes(Array(repeating: 1, count: 800_000))]) }
            await expectStoreError(.limitExceeded) { try await f.db.modify(saving: sealedThree, in: zone) }
            #expect(try await f.db.zones().first?.recordCount == 2)
            // Split in two, the same records go through.
            #expect(try await f.db.modify(saving: Array(three[0..<2]), in: zone).saved.count == 2)
            #expect(try await f.db.modify(saving: [three[2]], in: zone).saved.count == 1)
            #expect(try await f.db.zones().first?.recordCount == 5)
        }
    }
}

import CofferCrypto
import CofferStoreTestSupport
import Foundation
import Synchronization
import Testing
@testable import CofferStore

/// The fast paths of saving and reading records: the byte formats they must keep (stores
/// written before them have to verify and open the same way), large reads and batches, and
/// the decode workers a session keeps between reads.
@Suite("Hot paths: formats, large reads, decode workers")
struct HotPathTests {
    static let zone = ZoneRow(rowID: 1, uid: Array(1...16), id: ZoneID(name: "Notes", ownerID: "owner-1"), sequence: 9,
                              created: Date(timeIntervalSince1970: 0), logFormat: 1)

    /// Big-endian bytes, built independently of the code under test.
    static func be(_ value: UInt64, _ width: Int) -> [UInt8] {
        (0..<width).reversed().map { UInt8(truncatingIfNeeded: value >> (8 * UInt64($0))) }
    }

    @Test("a record's associated data is the documented byte string")
    func associatedDataFormat() {
        func framed(_ bytes: [UInt8]) -> [UInt8] { Self.be(UInt64(bytes.count), 2) + bytes }
        let expected = Array("coffer.record.v2".utf8) + framed(Array(1...16)) + framed(Array("owner-1".utf8))
            + framed(Array("groceries".utf8)) + framed(Array("Note".utf8)) + Self.be(3, 8)
        #expect(RecordSealer.associatedData(zone: Self.zone, name: "groceries", type: "Note", epoch: 3) == expected)
        let inPlace = RecordSealer.withAssociatedData(zone: Self.zone, name: "groceries", type: "Note", epoch: 3) { Array($0) }
        #expect(inPlace == expected)
    }

    @Test("a record version's hash is BLAKE2b-256 of the documented header, the plain JSON and the sealed bytes",
          arguments: [nil, "parent-9"] as [String?], [true, false])
    func recordHashFormat(parent: String?, sealed: Bool) {
        let plain = Array(#"{"count":3,"tags":[],"when":1.5}"#.utf8)
        let types = PlainValuesCodec.typeCodes(["count": .int(3), "tags": .list([]), "when": .date(Date(timeIntervalSinceReferenceDate: 1.5))])
        #expect(types == [2, 0x80, 5])
        let sealedBytes: [UInt8]? = sealed ? Array(repeating: 0x5A, count: 77) : nil
        func text(_ s: String) -> [UInt8] { Self.be(UInt64(s.utf8.count), 4) + Array(s.utf8) }
        var header = Array("coffer.record-version.v3".utf8) + Self.be(16, 4) + Array(1...16)
        header += text("groceries") + text("Note") + [parent == nil ? 0 : 1] + text(parent ?? "")
        header += Self.be(12, 8) + Self.be(3, 8) + Self.be(2, 8) + text("creator-1") + text("modifier-2")
        header += Self.be(1_700_000_000.5.bitPattern, 8) + Self.be(1_700_000_100.25.bitPattern, 8)
        header += Self.be(UInt64(plain.count), 4) + [sealed ? 1 : 0] + Self.be(UInt64(sealedBytes?.count ?? 0), 4)
        header += Self.be(3, 4) + [2, 0x80, 5]
        let expected = BLAKE2b.hash(header + plain + (sealedBytes ?? []))
        let hash = plain.withUnsafeBytes { p in
            types.withUnsafeBytes { t in
                RecordReader.withOptionalBytes(sealedBytes) { s in
                    RecordSealer.versionHash(zoneUID: Self.zone.uid, name: "groceries", type: "Note", parent: parent, seq: 12, epoch: 3,
                                              membershipSeq: 2, creatorID: "creator-1", modifierID: "modifier-2",
                                             created: 1_700_000_000.5, modified: 1_700_000_100.25,
                                             plain: p, plainTypes: t, sealed: s)
                }
            }
        }
        #expect(hash.bytes == expected)
        #expect(Digest32(hash.bytes) == hash)
    }

    @Test("a commit's digest set holds exactly its entries", arguments: [0, 1, 2, 3, 31, 400, 1000])
    func digestSetMembership(count: Int) {
        var generator = SystemRandomNumberGenerator()
        let entries = (0..<count).flatMap { _ in (0..<32).map { _ in UInt8.random(in: 0...255, using: &generator) } }
        let set = entries.withUnsafeBytes { DigestSet(entries: $0) }
        #expect(set.count == count)
        for start in stride(from: 0, to: entries.count, by: 32) {
            #expect(set.contains(Digest32(entries[start..<start + 32])))
        }
        // Outsiders: random ones, and each entry with one bit of its last byte flipped (same slot).
        for _ in 0..<200 {
            #expect(!set.contains(Digest32((0..<32).map { _ in UInt8.random(in: 0...255, using: &generator) })))
        }
        for start in stride(from: 0, to: entries.count, by: 32) {
            var near = Array(entries[start..<start + 32])
            near[31] ^= 1
            #expect(!set.contains(Digest32(near)))
        }
    }

    @Test("a digest set finds entries whose first words all collide")
    func digestSetCollisions() {
        // 50 digests that share their first eight bytes all probe from one slot.
        let entries = (0..<50).flatMap { i -> [UInt8] in Array(repeating: 7, count: 8) + (0..<24).map { UInt8(truncatingIfNeeded: $0 &* 31 &+ i) } }
        let set = entries.withUnsafeBytes { DigestSet(entries: $0) }
        for start in stride(from: 0, to: entries.count, by: 32) {
            #expect(set.contains(Digest32(entries[start..<start + 32])))
        }
        #expect(!set.contains(Digest32(Array(repeating: 7, count: 8) + Array(repeating: 0xEE, count: 24))))
        #expect(!set.contains(Digest32.zero))
    }

    @Test("a query and a page of 1,100 records come back whole and in order")
    func largeReads() async throws {
        try await withStore { f in
            let zone = try await f.db.createZone(named: "Big")
            let total = 1_100
            for start in stride(from: 0, to: total, by: 400) {
                let batch = (start..<min(start + 400, total)).map { i in
                    makeRecord("Note", String(format: "n-%05d", i), in: zone, plain: ["k": .int(Int64(i % 2))], encrypted: ["s": .string("secret \(i)")])
                }
                _ = try await f.db.modify(saving: batch, in: zone)
            }
            let fresh = try await f.fresh(f.alice).privateDatabase
            let evens = try await fresh.query(Query(recordType: "Note", predicates: [.init("k", .equal, .int(0))]), in: zone)
            #expect(evens.records.map(\.name) == (0..<total).filter { $0 % 2 == 0 }.map { String(format: "n-%05d", $0) })
            #expect(evens.records.allSatisfy { $0.encryptedValues["s"] == .string("secret \(Int($0.name.dropFirst(2))!)") })
            let all = try await fresh.query(Query(recordType: "Note"), in: zone)
            #expect(all.records.count == total)
            #expect(all.records.map(\.name) == all.records.map(\.name).sorted())
            let names = (0..<total).map { String(format: "n-%05d", $0) } + ["missing"]
            let fetched = try await fresh.records(named: names, in: zone)
            #expect(fetched.count == total + 1)
            for i in [0, 399, 400, 511, 512, 513, 1_099] {
                #expect(try fetched[String(format: "n-%05d", i)]?.get().encryptedValues["s"] == .string("secret \(i)"))
            }
            #expect(throws: StoreError.self) { try fetched["missing"]!.get() }
        }
    }

    @Test("a batch of 400 records of every shape reads back exactly as saved", arguments: TestBackend.all)
    func savedRecordsReadBack(_ backend: TestBackend) async throws {
        try await withStore(backend) { f in
            let zone = try await f.db.createZone(named: "Z")
            let batch = (0..<400).map { i in
                makeRecord("Note", "r\(i)", in: zone, parent: i % 3 == 0 && i > 0 ? "r0" : nil,
                           plain: ["title": .string(i % 7 == 0 ? "" : "title \(i)"), "when": .date(Date(timeIntervalSince1970: Double(i)))],
                           encrypted: i % 5 == 0 ? [:] : ["body": .bytes(Array(repeating: UInt8(i % 256), count: i))])
            }
            let saved = try await f.db.modify(saving: batch, in: zone).saved
            #expect(saved.map(\.name) == batch.map(\.name))
            #expect(saved.allSatisfy { $0.changeTag != nil && $0.creatorID == f.alice.userID && $0.created != nil })
            let back = try await f.fresh(f.alice).privateDatabase.records(named: batch.map(\.name), in: zone)
            for record in batch {
                let read = try back[record.name]!.get()
                #expect(read.values == record.values)
                #expect(read.encryptedValues == record.encryptedValues)
                #expect(read.parent == record.parent)
            }
        }
    }

    @Test("one session's reads reuse their decode workers across zones, a schema that grows and a new key epoch")
    func pooledWorkersFollowChanges() async throws {
        try await withStore { h in
            let db = h.db
            let a = try await db.createZone(named: "A")
            let b = try await db.createZone(named: "B")
            func batch(_ zone: ZoneID, _ prefix: String, extra: Bool = false) -> [Record] {
                (0..<60).map { i in
                    makeRecord("Note", "\(prefix)\(i)", in: zone, plain: extra ? ["k": .int(1), "tag": .string("t\(i)")] : ["k": .int(1)],
                               encrypted: extra ? ["s": .string("\(prefix) \(i)"), "n": .int(Int64(i))] : ["s": .string("\(prefix) \(i)")])
                }
            }
            func check(_ zone: ZoneID, _ prefix: String, extra: Bool = false) async throws {
                let names = (0..<60).map { "\(prefix)\($0)" }
                let fetched = try await db.records(named: names, in: zone)
                for (i, name) in names.enumerated() {
                    let record = try fetched[name]!.get()
                    #expect(record.encryptedValues["s"] == .string("\(prefix) \(i)"))
                    #expect(record.encryptedValues["n"] == (extra ? .int(Int64(i)) : nil))
                    #expect(record.values["tag"] == (extra ? .string("t\(i)") : nil))
                }
            }
            _ = try await db.modify(saving: batch(a, "a"), in: a)
            _ = try await db.modify(saving: batch(b, "b"), in: b)
            try await check(a, "a")
            try await check(b, "b")
            try await check(a, "a")
            // New fields in zone A's schema, after this session's workers kept it.
            _ = try await db.modify(saving: batch(a, "x", extra: true), in: a)
            try await check(a, "x", extra: true)
            try await check(a, "a")
            // A new key epoch (a member removed), and every record of A sealed again under it.
            let bob = try await h.user("Bob", "bob@example.com")
            try await h.share(a, with: [(bob, .readOnly)])
            _ = try await h.alice.removeParticipant(bob.userID, from: a)
            #expect(try await h.alice.rekey(zone: a) == 120)
            let query = try await db.query(Query(recordType: "Note", predicates: [.init("k", .equal, .int(1))]), in: a)
            #expect(query.records.count == 120)
            #expect(query.records.allSatisfy { $0.keyEpoch == 2 })
            try await check(a, "x", extra: true)
            try await check(b, "b")
        }
    }
}

import CofferStoreTestSupport
import Foundation
import Testing
@testable import CofferStore

/// The row contexts a session keeps between reads (`Session.rowContexts`): one per commit, type
/// and epoch, made from the session's caches and dropped whenever those change.
@Suite("Row contexts kept between reads")
struct RowContextTests {
    /// Every kept context of the session, by its key.
    static func kept(_ session: Session) -> [(key: RowContextKey, context: RowContext)] {
        session.rowContexts.withLock { $0.values.flatMap { $0.map { ($0.key, $0.value) } } }
    }

    @Test("a read keeps one context per commit; a field added by another session is read, and the contexts are remade with it")
    func keptAndRemade() async throws {
        try await withStore { f async throws in
            let zone = try await f.db.createZone(named: "Z")
            for i in 0..<3 { // three saves: three commits
                try await f.db.save(makeRecord("Note", "n\(i)", in: zone, plain: ["count": .int(1)], encrypted: ["s": .string("s\(i)")]))
            }
            let query = Query(recordType: "Note", predicates: [.init("count", .equal, .int(1))])
            #expect(try await f.db.query(query, in: zone).records.count == 3)
            #expect(Set(Self.kept(f.alice).map(\.key.seq)) == [2, 3, 4])
            #expect(Self.kept(f.alice).allSatisfy { $0.context.schemaCount == 2 && $0.key.type == "Note" && $0.key.sealed })

            // Another session of the same user (another process, in effect) adds a field.
            let other = try await f.fresh(f.alice)
            try await other.privateDatabase.save(makeRecord("Note", "n3", in: zone, plain: ["count": .int(1)],
                                                            encrypted: ["s": .string("s3"), "extra": .string("new field")]))
            let again = try await f.db.query(query, in: zone).records
            #expect(again.count == 4)
            #expect(again.first { $0.name == "n3" }?.encryptedValues["extra"] == .string("new field"))
            #expect(again.first { $0.name == "n0" }?.encryptedValues == ["s": .string("s0")])
            // Reading the new field refreshed the schema, which dropped the kept contexts; the
            // next read makes them again, with the field.
            #expect(try await f.db.query(query, in: zone).records.count == 4)
            #expect(Set(Self.kept(f.alice).map(\.key.seq)) == [2, 3, 4, 5])
            #expect(Self.kept(f.alice).allSatisfy { $0.context.schemaCount == 3 })

            try await f.db.deleteZone(zone)
            #expect(Self.kept(f.alice).isEmpty)
        }
    }

    @Test("a rotation and a re-key drop the kept contexts, so none holds a dropped key")
    func rekeyDropsThem() async throws {
        try await withStore { h in
            let db = h.db
            let zone = try await db.createZone(named: "Notes")
            _ = try await db.modify(saving: (0..<5).map { makeNote("r\($0)", in: zone) }, in: zone)
            #expect(try await db.records(named: (0..<5).map { "r\($0)" }, in: zone).count == 5)
            #expect(Self.kept(h.alice).map(\.key.epoch) == [1])

            let bob = try await h.user("Bob", "bob@example.com")
            try await h.share(zone, with: [(bob, .readOnly)])
            _ = try await h.alice.removeParticipant(bob.userID, from: zone) // rotates to epoch 2
            #expect(Self.kept(h.alice).isEmpty)
            #expect(try await db.records(named: ["r0"], in: zone)["r0"]?.get().keyEpoch == 1)
            #expect(Self.kept(h.alice).map(\.key.epoch) == [1])

            #expect(try await h.alice.rekey(zone: zone) == 5)
            #expect(Self.kept(h.alice).isEmpty)
            let reread = try await db.records(named: (0..<5).map { "r\($0)" }, in: zone)
            #expect(reread.values.allSatisfy { (try? $0.get().keyEpoch) == 2 })
            #expect(Set(Self.kept(h.alice).map(\.key.epoch)) == [2])
        }
    }

    @Test("a thread's field-type cache gives each key its schema's type, whatever fields and order the rows have")
    func fieldTypeCache() {
        let schema: [String: FieldSchema] = ["a": FieldSchema(type: .string, encrypted: false), "b": FieldSchema(type: .int, encrypted: false),
                                           "c": FieldSchema(type: .date, encrypted: false),
                                           "a_field_name_longer_than_fifteen": FieldSchema(type: .double, encrypted: false)]
        var cache = FieldTypeCache()
        let rows: [[String]] = [["a", "b", "c"], ["a", "b", "c"], ["b", "c"], ["a", "x", "c"], ["c", "b", "a"],
                                ["a_field_name_longer_than_fifteen", "b"], ["a_field_name_longer_than_fifteen", "b"], ["a", "b", "c", "d"]]
        for keys in rows {
            cache.begin()
            for key in keys {
                #expect(cache.type(of: key, in: schema) == schema[key]?.type, "\(key) in \(keys)")
            }
        }
    }
}

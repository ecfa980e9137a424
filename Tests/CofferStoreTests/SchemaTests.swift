import CofferCrypto
import CofferVault
import CofferStoreTestSupport
import Foundation
import GRDB
import Testing
@testable import CofferStore

@Suite("Schema per record type")
struct SchemaTests {
    @Test("the first save fixes each field's type and encryption")
    func firstSaveFixes() async throws {
        try await withStore { f async throws in
            let zone = try await f.db.createZone(named: "Z")
            #expect(try await f.db.schema(of: "Note", in: zone).isEmpty)
            _ = try await f.db.save(makeRecord("Note", "a", in: zone,
                                               plain: ["title": "t", "count": 1, "ratio": 0.5, "done": true,
                                                       "when": .date(Date(timeIntervalSince1970: 1)), "raw": .bytes([1]),
                                                       "link": .reference("b"), "tags": .list(["x"])],
                                               encrypted: ["body": "b", "pin": 1234, "scores": .list([.double(1.5)])]))
            let schema = try await f.db.schema(of: "Note", in: zone)
            #expect(schema == [
                "title": FieldSchema(type: .string, encrypted: false),
                "count": FieldSchema(type: .int, encrypted: false),
                "ratio": FieldSchema(type: .double, encrypted: false),
                "done": FieldSchema(type: .bool, encrypted: false),
                "when": FieldSchema(type: .date, encrypted: false),
                "raw": FieldSchema(type: .bytes, encrypted: false),
                "link": FieldSchema(type: .reference, encrypted: false),
                "tags": FieldSchema(type: .list(.string), encrypted: false),
                "body": FieldSchema(type: .string, encrypted: true),
                "pin": FieldSchema(type: .int, encrypted: true),
                "scores": FieldSchema(type: .list(.double), encrypted: true),
            ])
            // A later save may add fields and leave others out.
            _ = try await f.db.save(makeRecord("Note", "b", in: zone, plain: ["extra": "e"]))
            let grown = try await f.db.schema(of: "Note", in: zone)
            #expect(grown.count == 12)
            #expect(grown["extra"] == FieldSchema(type: .string, encrypted: false))
            // The table holds the names that FieldType(name:) reads back.
            let stored = try await f.store.dbPool.read { db in
                try Row.fetchAll(db, sql: "SELECT field, value_type, encrypted FROM field_schema WHERE field IN ('link', 'tags', 'scores') ORDER BY field")
                    .map { "\($0["field"] as String):\($0["value_type"] as String):\($0["encrypted"] as Int)" }
            }
            #expect(stored == ["link:ref:0", "scores:[double]:1", "tags:[string]:0"])
        }
    }

    @Test("a plain field saved with another type is refused", arguments: [
        RecordValue.string("1"), .double(1), .bool(true), .date(Date()), .bytes([1]), .reference("x"), .list([.int(1)]),
    ])
    func plainTypeChange(_ value: RecordValue) async throws {
        try await withStore { f async throws in
            let zone = f.db.zoneID(named: "Z")
            try await expectRefusedIn(f.db, fresh: { try await f.fresh(f.alice) }, first: makeRecord("Note", "a", in: zone, plain: ["f": 1]),
                                      second: makeRecord("Note", "b", in: zone, plain: ["f": value]))
        }
    }

    @Test("an encrypted field saved with another type is refused", arguments: [
        RecordValue.int(1), .double(1), .bool(true), .bytes([1]), .list(["s"]), .list([]),
    ])
    func encryptedTypeChange(_ value: RecordValue) async throws {
        try await withStore { f async throws in
            let zone = f.db.zoneID(named: "Z")
            try await expectRefusedIn(f.db, fresh: { try await f.fresh(f.alice) }, first: makeRecord("Note", "a", in: zone, encrypted: ["f": "text"]),
                                      second: makeRecord("Note", "b", in: zone, encrypted: ["f": value]))
        }
    }

    @Test("a plain field cannot be saved encrypted, nor an encrypted field plain", arguments: TestBackend.all)
    func encryptionIsFixed(_ backend: TestBackend) async throws {
        try await withStore(backend) { f async throws in
            let zone = f.db.zoneID(named: "Z")
            try await expectRefusedIn(f.db, fresh: { try await f.fresh(f.alice) }, first: makeRecord("Note", "a", in: zone, plain: ["f": "x"]),
                                      second: makeRecord("Note", "b", in: zone, encrypted: ["f": "x"]))
        }
        try await withStore(backend) { f async throws in
            let zone = f.db.zoneID(named: "Z")
            try await expectRefusedIn(f.db, fresh: { try await f.fresh(f.alice) }, first: makeRecord("Note", "a", in: zone, encrypted: ["f": "x"]),
                                      second: makeRecord("Note", "b", in: zone, plain: ["f": "x"]))
        }
    }

    /// `expectRefused` on an existing fixture (the zone must be called "Z").
    func expectRefusedIn(_ db: RecordDatabase, fresh freshSession: () async throws -> Session, first: CofferStore.Record, second: CofferStore.Record, sourceLocation: SourceLocation = #_sourceLocation) async throws {
        let zone = try await db.createZone(named: "Z")
        let saved = try await db.save(first)
        let schemaBefore = try await db.schema(of: first.recordType, in: zone)
        var update = saved
        update.values = second.values
        update.encryptedValues = second.encryptedValues
        for attempt in [second, update] {
            await expectStoreError(.invalidArguments, sourceLocation: sourceLocation) { try await db.save(attempt) }
            for policy in [SavePolicy.allKeys, .changedKeys] {
                await expectStoreError(.invalidArguments, sourceLocation: sourceLocation) { try await db.save(attempt, policy: policy) }
            }
        }
        #expect(try await db.schema(of: first.recordType, in: zone) == schemaBefore, sourceLocation: sourceLocation)
        let fresh = try await freshSession().privateDatabase
        #expect(try await fresh.schema(of: first.recordType, in: zone) == schemaBefore, sourceLocation: sourceLocation)
        #expect(try await fresh.record(named: saved.name, in: zone) == saved, sourceLocation: sourceLocation)
        await expectStoreError(.unknownItem, sourceLocation: sourceLocation) { try await fresh.record(named: second.name, in: zone) }
        #expect(try await db.zones().first?.sequence == 2, sourceLocation: sourceLocation)
    }

    @Test("a refused save that also introduced new fields leaves no trace of them")
    func refusedSaveAddsNoFields() async throws {
        try await withStore { f async throws in
            let zone = try await f.db.createZone(named: "Z")
            _ = try await f.db.save(makeRecord("Note", "a", in: zone, plain: ["count": 1]))
            // New fields `aaa` and `zzz`, and `count` with the wrong type.
            let bad = makeRecord("Note", "b", in: zone, plain: ["count": "one", "aaa": 5], encrypted: ["zzz": "x"])
            await expectStoreError(.invalidArguments) { try await f.db.save(bad) }
            #expect(try await f.db.schema(of: "Note", in: zone) == ["count": FieldSchema(type: .int, encrypted: false)])
            let fields = try await f.store.dbPool.read { db in
                try String.fetchAll(db, sql: "SELECT field FROM field_schema ORDER BY field")
            }
            #expect(fields == ["count"])
            // The fields it would have introduced can take any type now, in this session and a fresh one.
            _ = try await f.db.save(makeRecord("Note", "c", in: zone, plain: ["aaa": "text"]))
            _ = try await f.fresh(f.alice).privateDatabase.save(makeRecord("Note", "d", in: zone, encrypted: ["zzz": 9]))
            let schema = try await f.db.schema(of: "Note", in: zone)
            #expect(schema["aaa"] == FieldSchema(type: .string, encrypted: false))
            #expect(schema["zzz"] == FieldSchema(type: .int, encrypted: true))
        }
    }

    @Test("a batch that fails for a conflict rolls its new fields back, in the cache too", arguments: TestBackend.all)
    func failedBatchRollsBackSchema(_ backend: TestBackend) async throws {
        try await withStore(backend) { f async throws in
            let zone = try await f.db.createZone(named: "Z")
            _ = try await f.db.save(makeRecord("Note", "exists", in: zone, plain: ["n": 1]))
            let batch = [makeRecord("Note", "new", in: zone, plain: ["added": 1], encrypted: ["sealedAdded": 1]),
                         makeRecord("Note", "exists", in: zone, plain: ["n": 2])] // no change tag: conflict
            await expectStoreError(.partialFailure) { try await f.db.modify(saving: batch, in: zone) }
            #expect(try await f.db.schema(of: "Note", in: zone).keys.sorted() == ["n"])
            // The same session may now give those fields other types.
            _ = try await f.db.save(makeRecord("Note", "other", in: zone, plain: ["added": "text"], encrypted: ["sealedAdded": true]))
            let schema = try await f.db.schema(of: "Note", in: zone)
            #expect(schema["added"] == FieldSchema(type: .string, encrypted: false))
            #expect(schema["sealedAdded"] == FieldSchema(type: .bool, encrypted: true))
        }
    }

    @Test("two records of one batch that disagree on a new field: refused, nothing saved", arguments: TestBackend.all)
    func disagreementInsideBatch(_ backend: TestBackend) async throws {
        try await withStore(backend) { f async throws in
            let zone = try await f.db.createZone(named: "Z")
            let batch = [makeRecord("Note", "a", in: zone, plain: ["f": 1]),
                         makeRecord("Note", "b", in: zone, plain: ["f": "one"])]
            let error = await expectStoreError(oneOf: [.invalidArguments, .partialFailure]) { try await f.db.modify(saving: batch, in: zone) }
            if error?.code == .partialFailure { #expect(error?.partialErrors["b"]?.code == .invalidArguments) }
            #expect(try await f.db.schema(of: "Note", in: zone).isEmpty)
            #expect(try await f.db.zones().first?.recordCount == 0)
        }
    }

    @Test("schemas are per record type and per zone", arguments: TestBackend.all)
    func perTypeAndZone(_ backend: TestBackend) async throws {
        try await withStore(backend) { f async throws in
            let z1 = try await f.db.createZone(named: "One")
            let z2 = try await f.db.createZone(named: "Two")
            _ = try await f.db.save(makeRecord("Note", "a", in: z1, plain: ["f": 1]))
            _ = try await f.db.save(makeRecord("Task", "b", in: z1, plain: ["f": "text"]))
            _ = try await f.db.save(makeRecord("Note", "c", in: z2, encrypted: ["f": true]))
            #expect(try await f.db.schema(of: "Note", in: z1) == ["f": FieldSchema(type: .int, encrypted: false)])
            #expect(try await f.db.schema(of: "Task", in: z1) == ["f": FieldSchema(type: .string, encrypted: false)])
            #expect(try await f.db.schema(of: "Note", in: z2) == ["f": FieldSchema(type: .bool, encrypted: true)])
            #expect(try await f.db.record(named: "c", in: z2).encryptedValues == ["f": true])
        }
    }

    @Test("an empty list fits any list field; a list field refuses a scalar and vice versa", arguments: TestBackend.all)
    func listsAndEmptyLists(_ backend: TestBackend) async throws {
        try await withStore(backend) { f async throws in
            let zone = try await f.db.createZone(named: "Z")
            _ = try await f.db.save(makeRecord("Note", "a", in: zone, plain: ["ints": .list([1, 2])], encrypted: ["dates": .list([.date(Date(timeIntervalSince1970: 5))])]))
            _ = try await f.db.save(makeRecord("Note", "b", in: zone, plain: ["ints": .list([])], encrypted: ["dates": .list([])]))
            #expect(try await f.db.record(named: "b", in: zone).values["ints"] == .list([]))
            await expectStoreError(.invalidArguments) { try await f.db.save(makeRecord("Note", "c", in: zone, plain: ["ints": 1])) }
            await expectStoreError(.invalidArguments) { try await f.db.save(makeRecord("Note", "c", in: zone, plain: ["ints": .list(["1"])])) }
            _ = try await f.db.save(makeRecord("Note", "d", in: zone, plain: ["scalar": 1]))
            await expectStoreError(.invalidArguments) { try await f.db.save(makeRecord("Note", "e", in: zone, plain: ["scalar": .list([])])) }
            await expectStoreError(.invalidArguments) { try await f.db.save(makeRecord("Note", "e", in: zone, plain: ["scalar": .list([1])])) }
        }
    }

    @Test("a save's field declarations are fixed in its transaction: a refused save fixes none, in the file or in memory", arguments: TestBackend.all)
    func declarationsGoWithTheSave(_ backend: TestBackend) async throws {
        try await withStore(backend) { f async throws in
            let zone = try await f.db.createZone(named: "Z")
            let first = try await f.db.save(makeRecord("Note", "a", in: zone, plain: ["title": "x"]))
            _ = try await f.db.save(makeRecord("Note", "a", in: zone, plain: ["title": "y"]), policy: .allKeys)
            let tags = [FieldDeclaration("tags", of: "Note", type: .list(.int), encrypted: false)]
            // Refused for another field's type, then for a stale change tag: the declaration goes with the save.
            await expectStoreError(.invalidArguments) {
                try await f.db.save(makeRecord("Note", "b", in: zone, plain: ["tags": .list([]), "title": 1]), declaring: tags)
            }
            var stale = makeRecord("Note", "a", in: zone, plain: ["tags": .list([]), "title": "z"])
            try stale.setChangeTag(try #require(first.changeTag))
            await expectStoreError(.serverRecordChanged) { try await f.db.save(stale, declaring: tags) }
            #expect(try await f.db.schema(of: "Note", in: zone)["tags"] == nil)
            // This session's cached schema does not keep it either: the field still takes another type.
            _ = try await f.db.save(makeRecord("Note", "c", in: zone, plain: ["tags": .list(["s"])]))
            #expect(try await f.db.schema(of: "Note", in: zone)["tags"] == FieldSchema(type: .list(.string), encrypted: false))
            // A declaration that disagrees with a fixed field refuses the save.
            await expectStoreError(.invalidArguments) { try await f.db.save(makeRecord("Note", "d", in: zone, plain: ["tags": .list([])]), declaring: tags) }
            await expectStoreError(.unknownItem) { try await f.db.record(named: "d", in: zone) }
            // A save that succeeds fixes what it declares, for its empty list and later saves.
            let codes = FieldDeclaration("codes", of: "Note", type: .list(.int), encrypted: true)
            let e = try await f.db.save(makeRecord("Note", "e", in: zone, encrypted: ["codes": .list([])]), declaring: [codes])
            #expect(e.encryptedValues["codes"] == .list([]))
            #expect(try await f.db.schema(of: "Note", in: zone)["codes"] == FieldSchema(type: .list(.int), encrypted: true))
            await expectStoreError(.invalidArguments) { try await f.db.save(makeRecord("Note", "g", in: zone, encrypted: ["codes": .list(["x"])])) }
            // Without a declaration, a new field's first empty list is still refused.
            await expectStoreError(.invalidArguments) { try await f.db.save(makeRecord("Note", "h", in: zone, plain: ["fresh": .list([])])) }
        }
    }

    @Test("recordTypes(named:in:) gives the type of each named record that exists, over many names", arguments: TestBackend.all)
    func recordTypesByName(_ backend: TestBackend) async throws {
        try await withStore(backend) { f async throws in
            let zone = try await f.db.createZone(named: "Z")
            _ = try await f.db.save(makeRecord("Note", "a", in: zone, plain: ["x": 1]))
            _ = try await f.db.save(makeRecord("Task", "n1100", in: zone, encrypted: ["x": 1]))
            let names = ["a"] + (0..<1200).map { "n\($0)" } // more names than one lookup takes
            #expect(try await f.db.recordTypes(named: names, in: zone) == ["a": "Note", "n1100": "Task"])
            #expect(try await f.db.recordTypes(named: [], in: zone).isEmpty)
            await expectStoreError(.invalidArguments) { try await f.db.recordTypes(named: ["_bad"], in: zone) }
            await expectStoreError(.zoneNotFound) { try await f.db.recordTypes(named: ["a"], in: f.db.zoneID(named: "Nowhere")) }
        }
    }

    @Test("a record's type cannot change: saving another type under its name is .invalidArguments", arguments: TestBackend.all)
    func recordTypeIsFixed(_ backend: TestBackend) async throws {
        try await withStore(backend) { f async throws in
            let zone = try await f.db.createZone(named: "Z")
            let saved = try await f.db.save(makeRecord("Note", "a", in: zone, plain: ["x": 1]))
            var other = makeRecord("Task", "a", in: zone, plain: ["x": 1])
            await expectStoreError(.invalidArguments, ".allKeys") { try await f.db.save(other, policy: .allKeys) }
            // .changedKeys must not merge a Task's keys into the stored Note.
            await expectStoreError(.invalidArguments, ".changedKeys") { try await f.db.save(other, policy: .changedKeys) }
            try other.setChangeTag(try #require(saved.changeTag))
            await expectStoreError(.invalidArguments) { try await f.db.save(other) }
            #expect(try await f.db.record(named: "a", in: zone).recordType == "Note")
            #expect(try await f.db.schema(of: "Task", in: zone).isEmpty)
        }
    }

    @Test("a field another session added since this one cached the schema is seen", arguments: TestBackend.all)
    func schemaAddedElsewhere(_ backend: TestBackend) async throws {
        try await withStore(backend) { f async throws in
            let zone = try await f.db.createZone(named: "Z")
            _ = try await f.db.save(makeRecord("Note", "a", in: zone, plain: ["x": 1]))
            let other = try await f.fresh(f.alice).privateDatabase
            _ = try await other.save(makeRecord("Note", "b", in: zone, plain: ["y": "new"], encrypted: ["z": 2]))
            // The first session decodes, queries and type-checks the new fields.
            #expect(try await f.db.record(named: "b", in: zone).values == ["y": "new"])
            #expect(try await f.db.record(named: "b", in: zone).encryptedValues == ["z": 2])
            let found = try await f.db.query(Query(recordType: "Note", predicates: [.init("y", .equal, "new")]), in: zone)
            #expect(recordNames(found.records) == ["b"])
            await expectStoreError(.invalidArguments) { try await f.db.save(makeRecord("Note", "c", in: zone, plain: ["y": 3])) }
            await expectStoreError(.invalidArguments) { try await f.db.save(makeRecord("Note", "c", in: zone, plain: ["z": 2])) }
        }
    }

    @Test("an encrypted field another session added since this one cached the schema is read", arguments: TestBackend.all)
    func encryptedFieldAddedElsewhere(_ backend: TestBackend) async throws {
        try await withStore(backend) { f async throws in
            let zone = try await f.db.createZone(named: "Z")
            _ = try await f.db.save(makeRecord("Note", "a", in: zone, plain: ["x": 1]))
            #expect(try await f.db.record(named: "a", in: zone).values == ["x": 1]) // caches Note's schema
            let other = try await f.fresh(f.alice).privateDatabase
            // Only a new encrypted field: the plain values still decode with the cached schema.
            _ = try await other.save(makeRecord("Note", "b", in: zone, plain: ["x": 2], encrypted: ["z": "new"]))
            let b = try await f.db.record(named: "b", in: zone)
            #expect(b.encryptedValues == ["z": "new"])
            let many = try await f.db.records(named: ["a", "b"], in: zone)
            #expect(try many["b"]?.get().encryptedValues == ["z": "new"])
            #expect(recordNames(try await f.db.query(Query(recordType: "Note", predicates: [.init("x", .equal, 2)]), in: zone).records) == ["b"])
        }
    }

    @Test("FieldType names parse back, and nested lists do not parse")
    func fieldTypeNames() {
        let all: [FieldType] = [.string, .int, .double, .bool, .date, .bytes, .reference,
                                .list(.string), .list(.int), .list(.double), .list(.bool), .list(.date), .list(.bytes), .list(.reference)]
        for type in all { #expect(FieldType(name: type.description) == type) }
        #expect(FieldType(name: "reference") == .reference)
        #expect(FieldType(name: "[[int]]") == nil)
        #expect(FieldType(name: "[]") == nil)
        #expect(FieldType(name: "float") == nil)
        #expect(FieldType(name: "") == nil)
        #expect(FieldType(name: "[int") == nil)
    }
}

import CofferCrypto
import CofferVault
import CofferStoreTestSupport
import Foundation
import Testing
@testable import CofferStore

@Suite("Records: values, system fields, names, fetch and delete")
struct RecordTests {
    // MARK: - Value round trips

    static let strings: [String] = [
        "",
        "plain",
        "héllo wörld — 日本語のテキスト 🎉👩‍👩‍👧‍👦 עברית العربية",
        "quote\" backslash\\ slash/ newline\n tab\t cr\r formfeed\u{0C} backspace\u{08}",
        "nul\u{0}inside, bell\u{07}, esc\u{1B}, del\u{7F}, unit sep\u{1F}",
        "\u{2028}line sep\u{2029}para sep\u{FEFF}bom",
        "e\u{301} (decomposed) vs \u{E9} (composed)",
        "\\u0041 is not an escape here, nor is \\n",
        "{\"json\": [1, 2, {\"nested\": true}]}",
        "'; DROP TABLE record; --",
        "\u{10FFFF}\u{E000}\u{FFFD}\u{1F600}",
        String(repeating: "long ", count: 2000),
    ]

    static let ints: [Int64] = [0, 1, -1, 42, Int64.max, Int64.min, Int64.max - 1, Int64.min + 1,
                                9_007_199_254_740_993, -9_007_199_254_740_993, 1 << 53, 4_294_967_296]

    static let doubles: [Double] = [0.0, -0.0, 1.0, -1.5, 0.1, -0.000123, 3.141592653589793, 42.0, -42.0,
                                    1e21, 1e-7, 123456789.125, 1.7976931348623157e308, -1.7976931348623157e308,
                                    5e-324, 2.2250738585072014e-308, 9_007_199_254_740_993.0, 1.0 / 3.0]

    /// Dates made from seconds since 1970.
    static let dates: [Date] = [
        Date(timeIntervalSince1970: 0),
        Date(timeIntervalSince1970: 1_700_000_000.123456),
        Date(timeIntervalSince1970: 1_700_000_000.5),
        Date(timeIntervalSince1970: -1_234_567.25),
        Date(timeIntervalSince1970: 253_402_300_799.999),
        Date(timeIntervalSince1970: 0.001),
        Date(timeIntervalSince1970: 1_763_780_000.987654321),
    ]

    /// Dates as `Date()` and `Date(timeIntervalSinceReferenceDate:)` make them (Foundation
    /// keeps seconds since 2001).
    static let referenceDates: [Date] = [
        Date(timeIntervalSinceReferenceDate: 0),
        Date(timeIntervalSinceReferenceDate: 721_692_800.1234567),
        Date(timeIntervalSinceReferenceDate: 785_000_000.987654321),
        Date(timeIntervalSinceReferenceDate: -1.0e-6),
        Date(timeIntervalSinceReferenceDate: 817_010_308.9254619),
    ]

    static let byteValues: [[UInt8]] = [[], [0], [0xff], Array(0...255), Array(repeating: 0, count: 100),
                                        (0..<1000).map { _ in UInt8.random(in: 0...255) }]

    /// Saves every value both plain and encrypted, one record per value, and fetches each back
    /// in a fresh session (so nothing comes from a cache).
    func roundTrip(_ values: [RecordValue], type: String, on backend: TestBackend,
                   sourceLocation: SourceLocation = #_sourceLocation) async throws {
        try await withStore(backend) { f async throws in
            let zone = try await f.db.createZone(named: "Values")
            var saved: [Record] = []
            for (i, value) in values.enumerated() {
                let record = makeRecord(type, "r\(i)", in: zone, plain: ["p": value], encrypted: ["e": value])
                let result = try await f.db.save(record)
                #expect(result.values == record.values, sourceLocation: sourceLocation)
                #expect(result.encryptedValues == record.encryptedValues, sourceLocation: sourceLocation)
                saved.append(record)
            }
            let fresh = try await f.fresh(f.alice)
            for (i, value) in values.enumerated() {
                let fetched = try await fresh.privateDatabase.record(named: "r\(i)", in: zone)
                #expect(fetched.values["p"] == value, "plain #\(i): \(value)", sourceLocation: sourceLocation)
                #expect(fetched.encryptedValues["e"] == value, "encrypted #\(i): \(value)", sourceLocation: sourceLocation)
                #expect(fetched.values.count == 1 && fetched.encryptedValues.count == 1, sourceLocation: sourceLocation)
                #expect(utf8Fields(fetched.values) == utf8Fields(saved[i].values), "bytes of #\(i)", sourceLocation: sourceLocation)
                #expect(utf8Fields(fetched.encryptedValues) == utf8Fields(saved[i].encryptedValues), "bytes of #\(i)", sourceLocation: sourceLocation)
                try Self.checkBitExact(fetched.values["p"], value, sourceLocation: sourceLocation)
                try Self.checkBitExact(fetched.encryptedValues["e"], value, sourceLocation: sourceLocation)
            }
        }
    }

    /// Doubles compare by bit pattern (so -0.0 stays -0.0), dates by their seconds.
    static func checkBitExact(_ got: RecordValue?, _ want: RecordValue, sourceLocation: SourceLocation) throws {
        switch (got, want) {
        case (.double(let a)?, .double(let b)):
            #expect(a.bitPattern == b.bitPattern, "\(a) vs \(b)", sourceLocation: sourceLocation)
        case (.date(let a)?, .date(let b)):
            #expect(a.timeIntervalSinceReferenceDate.bitPattern == b.timeIntervalSinceReferenceDate.bitPattern,
                    "\(a.timeIntervalSinceReferenceDate) vs \(b.timeIntervalSinceReferenceDate)", sourceLocation: sourceLocation)
        case (.list(let a)?, .list(let b)):
            #expect(a.count == b.count, sourceLocation: sourceLocation)
            for (x, y) in zip(a, b) { try checkBitExact(x, y, sourceLocation: sourceLocation) }
        default: break
        }
    }

    @Test("strings: empty, unicode, JSON escapes, control characters, long", arguments: TestBackend.all)
    func stringsRoundTrip(_ backend: TestBackend) async throws {
        try await roundTrip(Self.strings.map(RecordValue.string), type: "S", on: backend)
    }

    @Test("ints: zero, negatives, Int64 extremes, beyond 2^53", arguments: TestBackend.all)
    func intsRoundTrip(_ backend: TestBackend) async throws {
        try await roundTrip(Self.ints.map(RecordValue.int), type: "I", on: backend)
    }

    @Test("doubles: negative, fractional, -0.0, extremes, subnormal, integral", arguments: TestBackend.all)
    func doublesRoundTrip(_ backend: TestBackend) async throws {
        try await roundTrip(Self.doubles.map(RecordValue.double), type: "D", on: backend)
    }

    @Test("bools", arguments: TestBackend.all)
    func boolsRoundTrip(_ backend: TestBackend) async throws {
        try await roundTrip([.bool(true), .bool(false)], type: "B", on: backend)
    }

    @Test("dates with fractions of a second, before 1970, far ahead", arguments: TestBackend.all)
    func datesRoundTrip(_ backend: TestBackend) async throws {
        try await roundTrip(Self.dates.map(RecordValue.date), type: "T", on: backend)
    }

    @Test("dates made as Date() makes them (seconds since 2001, with fractions) come back equal", arguments: TestBackend.all)
    func referenceDatesRoundTrip(_ backend: TestBackend) async throws {
        let now = Date()
        try await roundTrip((Self.referenceDates + [now, now.addingTimeInterval(0.000_000_1)]).map(RecordValue.date), type: "Now", on: backend)
    }

    @Test("bytes: empty, zero, all 256 values, random", arguments: TestBackend.all)
    func bytesRoundTrip(_ backend: TestBackend) async throws {
        try await roundTrip(Self.byteValues.map(RecordValue.bytes), type: "Y", on: backend)
    }

    @Test("references", arguments: TestBackend.all)
    func referencesRoundTrip(_ backend: TestBackend) async throws {
        try await roundTrip([.reference("parent-1"), .reference("x"), .reference(String(repeating: "r", count: 255)),
                             .reference("with space@and.dots")], type: "R", on: backend)
    }

    @Test("lists of every type, including empty lists and unicode items", arguments: TestBackend.all)
    func listsRoundTrip(_ backend: TestBackend) async throws {
        try await withStore(backend) { f async throws in
            let zone = try await f.db.createZone(named: "Lists")
            let lists: [String: RecordValue] = [
                "s": .list(Self.strings.map(RecordValue.string)),
                "i": .list(Self.ints.map(RecordValue.int)),
                "d": .list(Self.doubles.map(RecordValue.double)),
                "b": .list([.bool(true), .bool(false), .bool(true)]),
                "t": .list(Self.dates.map(RecordValue.date)),
                "y": .list(Self.byteValues.map(RecordValue.bytes)),
                "r": .list([.reference("a"), .reference("b")]),
                "one": .list([.int(7)]),
            ]
            var encrypted: [String: RecordValue] = [:]
            for (k, v) in lists { encrypted["e" + k] = v }
            _ = try await f.db.save(makeRecord("L", "full", in: zone, plain: lists, encrypted: encrypted))
            // Empty lists in fields whose list type is fixed already.
            var empties: [String: RecordValue] = [:], encryptedEmpties: [String: RecordValue] = [:]
            for k in lists.keys { empties[k] = .list([]); encryptedEmpties["e" + k] = .list([]) }
            _ = try await f.db.save(makeRecord("L", "empty", in: zone, plain: empties, encrypted: encryptedEmpties))

            let fresh = try await f.fresh(f.alice).privateDatabase
            let full = try await fresh.record(named: "full", in: zone)
            #expect(full.values == lists)
            #expect(full.encryptedValues == encrypted)
            #expect(utf8Fields(full.values) == utf8Fields(lists))
            for (k, v) in lists {
                try Self.checkBitExact(full.values[k], v, sourceLocation: #_sourceLocation)
                try Self.checkBitExact(full.encryptedValues["e" + k], v, sourceLocation: #_sourceLocation)
            }
            let empty = try await fresh.record(named: "empty", in: zone)
            #expect(empty.values == empties)
            #expect(empty.encryptedValues == encryptedEmpties)
            let schema = try await fresh.schema(of: "L", in: zone)
            #expect(schema["i"] == FieldSchema(type: .list(.int), encrypted: false))
            #expect(schema["ey"] == FieldSchema(type: .list(.bytes), encrypted: true))
            #expect(schema["r"] == FieldSchema(type: .list(.reference), encrypted: false))
        }
    }

    @Test("a record with no fields, and one with only encrypted fields")
    func sparseRecords() async throws {
        try await withStore { f async throws in
            let zone = try await f.db.createZone(named: "Z")
            _ = try await f.db.save(Record(type: "Empty", name: "nothing", zone: zone))
            _ = try await f.db.save(makeRecord("Secret", "only-sealed", in: zone, encrypted: ["k": "v"]))
            _ = try await f.db.save(makeRecord("Open", "only-plain", in: zone, plain: ["k": "v"]))
            let nothing = try await f.db.record(named: "nothing", in: zone)
            #expect(nothing.values.isEmpty && nothing.encryptedValues.isEmpty)
            #expect(nothing.recordType == "Empty")
            let sealed = try await f.db.record(named: "only-sealed", in: zone)
            #expect(sealed.values.isEmpty)
            #expect(sealed.encryptedValues == ["k": "v"])
            #expect(sealed.keyEpoch == 1)
            let open = try await f.db.record(named: "only-plain", in: zone)
            #expect(open.values == ["k": "v"])
            #expect(open.encryptedValues.isEmpty)
            // No encrypted values: no sealed blob at all.
            let sealedColumn = try await f.store.dbPool.read { db in
                try Data.fetchOne(db, sql: "SELECT sealed FROM record WHERE name = 'only-plain'")
            }
            #expect(sealedColumn == nil)
        }
    }

    // MARK: - System fields

    @Test("type, name, zone, parent, change tag, creator, modifier and dates are set and kept", arguments: TestBackend.all)
    func systemFields(_ backend: TestBackend) async throws {
        try await withStore(backend) { f async throws in
            let zone = try await f.db.createZone(named: "Notes")
            _ = try await f.db.save(makeRecord("Folder", "folder", in: zone)) // commit 1: change tags below start at 2
            let t0 = Date()
            var note = makeRecord("Note", "child", in: zone, parent: "folder", plain: ["title": "v1"], encrypted: ["body": "b1"])
            #expect(note.changeTag == nil && note.creatorID == nil && note.created == nil)
            let saved = try await f.db.save(note)
            let t1 = Date()
            #expect(saved.recordType == "Note")
            #expect(saved.name == "child")
            #expect(saved.zoneID == zone)
            #expect(saved.parent == "folder")
            #expect(saved.changeTag == "3")
            #expect(saved.creatorID == f.alice.userID)
            #expect(saved.modifierID == f.alice.userID)
            let created = try #require(saved.created)
            #expect(created >= t0.addingTimeInterval(-0.001) && created <= t1.addingTimeInterval(0.001))
            #expect(saved.modified == saved.created)
            #expect(saved.keyEpoch == 1)

            let fetched = try await f.db.record(named: "child", in: zone)
            #expect(fetched == saved)
            #expect(fetched.creatorID == saved.creatorID)
            #expect(fetched.modifierID == saved.modifierID)
            #expect(fetched.created == saved.created)
            #expect(fetched.modified == saved.modified)
            #expect(fetched.keyEpoch == 1)

            try await Task.sleep(for: .milliseconds(20))
            note = fetched
            note.values["title"] = "v2"
            note.parent = nil
            let updated = try await f.db.save(note)
            #expect(updated.changeTag == "4")
            #expect(updated.parent == nil)
            #expect(updated.created == saved.created)
            #expect(updated.creatorID == f.alice.userID)
            let modified = try #require(updated.modified)
            #expect(modified > created)
            let again = try await f.db.record(named: "child", in: zone)
            #expect(again.parent == nil)
            #expect(again.values == ["title": "v2"])
            #expect(again.encryptedValues == ["body": "b1"])
            #expect(again.created == saved.created)
            #expect(again.modified == updated.modified)
        }
    }

    @Test("parent references round trip, and a record can change its parent")
    func parents() async throws {
        try await withStore { f async throws in
            let zone = try await f.db.createZone(named: "Tree")
            _ = try await f.db.save(makeRecord("Folder", "root", in: zone, plain: ["name": "Root"]))
            _ = try await f.db.save(makeRecord("Folder", "sub", in: zone, parent: "root", plain: ["name": "Sub"]))
            var leaf = try await f.db.save(makeRecord("Note", "leaf", in: zone, parent: "sub", plain: ["link": .reference("root")]))
            #expect(try await f.db.record(named: "sub", in: zone).parent == "root")
            #expect(try await f.db.record(named: "root", in: zone).parent == nil)
            #expect(try await f.db.record(named: "leaf", in: zone).values["link"] == .reference("root"))
            leaf.parent = "root"
            _ = try await f.db.save(leaf)
            #expect(try await f.db.record(named: "leaf", in: zone).parent == "root")
            let parents = try await f.store.dbPool.read { db in
                try String?.fetchAll(db, sql: "SELECT parent FROM record ORDER BY name")
            }
            #expect(parents == ["root", nil, "root"])
            await expectStoreError(.invalidArguments) {
                try await f.db.save(makeRecord("Note", "bad-parent", in: zone, parent: "_hidden"))
            }
        }
    }

    @Test("the description names fields but never shows encrypted values")
    func description() async throws {
        let zone = ZoneID(name: "Z", ownerID: "owner")
        let record = makeRecord("Note", "n", in: zone, plain: ["title": "visible"], encrypted: ["body": "hush-hush-value"])
        #expect(!record.description.contains("hush-hush-value"))
        #expect(!"\(record)".contains("hush-hush-value"))
        #expect(record.description.contains("body"))
        #expect(record.description.contains("title"))
    }

    // MARK: - Fetch, delete, list

    @Test("fetch one, fetch many by name, delete, and unknown names", arguments: TestBackend.all)
    func fetchAndDelete(_ backend: TestBackend) async throws {
        try await withStore(backend) { f async throws in
            let zone = try await f.db.createZone(named: "Notes")
            for name in ["a", "b", "c"] {
                _ = try await f.db.save(makeRecord("Note", name, in: zone, plain: ["title": .string(name.uppercased())],
                                                   encrypted: ["body": .string("body of \(name)")]))
            }
            let many = try await f.db.records(named: ["a", "c", "missing"], in: zone)
            #expect(Set(many.keys) == ["a", "c", "missing"])
            #expect(try many["a"]?.get().encryptedValues["body"] == "body of a")
            #expect(try many["c"]?.get().values["title"] == "C")
            if case .failure(let error)? = many["missing"] { #expect(error.code == .unknownItem) } else { Issue.record("missing should fail") }
            #expect(try await f.db.records(named: [], in: zone).isEmpty)

            await expectStoreError(.unknownItem) { try await f.db.record(named: "missing", in: zone) }
            try await f.db.delete(recordNamed: "b", in: zone)
            await expectStoreError(.unknownItem) { try await f.db.record(named: "b", in: zone) }
            await expectStoreError(.unknownItem) { try await f.db.delete(recordNamed: "b", in: zone) }
            await expectStoreError(.unknownItem) { try await f.db.delete(recordNamed: "never", in: zone) }
            await expectStoreError(.invalidArguments) { try await f.db.delete(recordNamed: "_bad", in: zone) }
            #expect(try await f.db.zones().first?.recordCount == 2)
            // A deleted name can be used again, as a new record.
            let reborn = try await f.db.save(makeRecord("Other", "b", in: zone, plain: ["x": 1]))
            #expect(reborn.recordType == "Other")
            #expect(reborn.created != nil)
        }
    }

    @Test("records(in:after:limit:) pages through every record by name", arguments: TestBackend.all)
    func listAll(_ backend: TestBackend) async throws {
        try await withStore(backend) { f async throws in
            let zone = try await f.db.createZone(named: "Notes")
            let all = (0..<23).map { String(format: "rec-%02d", $0) }.shuffled()
            _ = try await f.db.modify(saving: all.map { makeRecord("Note", $0, in: zone, encrypted: ["n": .string($0)]) }, in: zone)
            var seen: [String] = []
            var after: String? = nil
            while true {
                let page = try await f.db.records(in: zone, after: after, limit: 5)
                if page.isEmpty { break }
                #expect(page.count <= 5)
                for record in page { #expect(record.encryptedValues["n"] == .string(record.name)) }
                seen += recordNames(page)
                after = page.last?.name
            }
            #expect(seen == all.sorted())
        }
    }

    // MARK: - Validation

    @Test("record names: ASCII, 1...255, no leading '_'", arguments: [
        "", "_x", "é", "tab\t", "line\n", String(repeating: "n", count: 256), "🙂",
    ])
    func badRecordNames(_ name: String) async throws {
        try await withStore { f async throws in
            let zone = try await f.db.createZone(named: "Z")
            let record = makeRecord("Note", name, in: zone, plain: ["a": 1])
            await expectStoreError(.invalidArguments) { try record.validate() }
            await expectStoreError(.invalidArguments) { try await f.db.save(record) }
            #expect(try await f.db.zones().first?.recordCount == 0)
        }
    }

    @Test("good record names", arguments: ["a", "a@b", "x_y", "with space", "1", "-", String(repeating: "n", count: 255)])
    func goodRecordNames(_ name: String) async throws {
        try await withStore { f async throws in
            let zone = try await f.db.createZone(named: "Z")
            let record = makeRecord("Note", name, in: zone, plain: ["a": 1])
            try record.validate()
            _ = try await f.db.save(record)
            #expect(try await f.db.record(named: name, in: zone).name == name)
        }
    }

    @Test("record types and field keys are [A-Za-z][A-Za-z0-9_]*, at most 255", arguments: [
        "", "1a", "_a", "a-b", "a b", "é", "a.b", "a$", "Ünicode", String(repeating: "t", count: 256),
    ])
    func badIdentifiers(_ identifier: String) async throws {
        try await withStore { f async throws in
            let zone = try await f.db.createZone(named: "Z")
            for record in [
                makeRecord(identifier, "r", in: zone, plain: ["a": 1]),
                makeRecord("Note", "r", in: zone, plain: [identifier: 1]),
                makeRecord("Note", "r", in: zone, encrypted: [identifier: 1]),
            ] {
                await expectStoreError(.invalidArguments) { try record.validate() }
                await expectStoreError(.invalidArguments) { try await f.db.save(record) }
            }
            await expectStoreError(.invalidArguments) { try await f.db.query(Query(recordType: identifier), in: zone) }
            await expectStoreError(.invalidArguments) { try await f.db.schema(of: identifier, in: zone) }
            #expect(try await f.db.zones().first?.recordCount == 0)
        }
    }

    @Test("good record types and field keys", arguments: ["a", "Z", "a1", "a_", "A_b_9", String(repeating: "t", count: 255)])
    func goodIdentifiers(_ identifier: String) async throws {
        try await withStore { f async throws in
            let zone = try await f.db.createZone(named: "Z")
            _ = try await f.db.save(makeRecord(identifier, "r1", in: zone, plain: [identifier: 1], encrypted: ["sealed1": 2]))
            let r = try await f.db.record(named: "r1", in: zone)
            #expect(r.recordType == identifier)
            #expect(r.values == [identifier: 1])
            #expect(r.encryptedValues == ["sealed1": 2])
            let found = try await f.db.query(Query(recordType: identifier, predicates: [.init(identifier, .equal, 1)]), in: zone)
            #expect(recordNames(found.records) == ["r1"])
        }
    }

    @Test("malformed values are .invalidArguments and nothing is saved", arguments: TestBackend.all)
    func badValues(_ backend: TestBackend) async throws {
        try await withStore(backend) { f async throws in
            let zone = try await f.db.createZone(named: "Z")
            let bad: [(String, RecordValue)] = [
                ("nan", .double(.nan)),
                ("inf", .double(.infinity)),
                ("ninf", .double(-.infinity)),
                ("nandate", .date(Date(timeIntervalSince1970: .nan))),
                ("nested", .list([.list([.int(1)])])),
                ("mixed", .list([.int(1), .string("x")])),
                ("mixed2", .list([.double(1), .int(1)])),
                ("badref", .reference("_x")),
                ("emptyref", .reference("")),
                ("badreflist", .list([.reference("ok"), .reference("_no")])),
                ("nanlist", .list([.double(1), .double(.nan)])),
            ]
            for (label, value) in bad {
                for record in [makeRecord("Note", "r", in: zone, plain: ["f": value]),
                               makeRecord("Note", "r", in: zone, encrypted: ["f": value])] {
                    await expectStoreError(.invalidArguments, "\(label)") { try record.validate() }
                    await expectStoreError(.invalidArguments, "\(label)") { try await f.db.save(record) }
                }
            }
            let both = makeRecord("Note", "r", in: zone, plain: ["f": 1], encrypted: ["f": 1])
            await expectStoreError(.invalidArguments) { try await f.db.save(both) }
            #expect(try await f.db.zones().first?.recordCount == 0)
            #expect(try await f.db.schema(of: "Note", in: zone).isEmpty)
        }
    }

    @Test("a record with more than 65,535 encrypted fields is refused without crashing")
    func tooManyEncryptedFields() async {
        await #expect(processExitsWith: .success) {
            let zone = ZoneID(name: "Z", ownerID: "o")
            var record = Record(type: "Wide", name: "w", zone: zone)
            for i in 0..<70_000 { record.encryptedValues["f\(i)"] = .bool(true) }
            do {
                try record.validate()
                // Accepted: then it must at least be encodable and decodable without loss.
                let bytes = SealedValuesCodec.encode(record.encryptedValues)
                guard try SealedValuesCodec.decode(bytes) == record.encryptedValues else { exit(3) }
            } catch let error as StoreError where error.code == .invalidArguments || error.code == .limitExceeded {
                exit(0)
            } catch {
                exit(2)
            }
        }
    }

    @Test("error messages show control characters (C0, DEL, C1) of a rejected name as '?'")
    func printableNames() {
        #expect(Names.printable("a\u{1B}[31mb\u{7F}c\u{9B}2Jd\u{85}e") == "a?[31mb?c?2Jd?e")
        do {
            try Names.validateRecordType("T\u{9B}x")
            Issue.record("a record type with a C1 control was accepted")
        } catch let error as StoreError {
            #expect(!error.message.unicodeScalars.contains { $0.properties.generalCategory == .control }, "\(error.message)")
        } catch { Issue.record("\(error)") }
    }
}

extension RecordTests {
    @Test("a new or changed parent must be a record of the zone, not the record itself nor one of its descendants", arguments: TestBackend.all)
    func parentRules(_ backend: TestBackend) async throws {
        try await withStore(backend) { f async throws in
            let zone = try await f.db.createZone(named: "Z")
            await expectStoreError(.referenceViolation) { try await f.db.save(makeRecord("Note", "c", in: zone, parent: "nosuch")) }
            await expectStoreError(.unknownItem) { try await f.db.record(named: "c", in: zone) }
            await expectStoreError(.invalidArguments) { try await f.db.save(makeRecord("Note", "self", in: zone, parent: "self")) }
            // A child may come before its parent in one batch.
            _ = try await f.db.modify(saving: [makeRecord("Note", "b", in: zone, parent: "a"), makeRecord("Note", "a", in: zone)], in: zone)
            #expect(try await f.db.record(named: "b", in: zone).parent == "a")
            // a → b would close a cycle (b's parent is a); so would a → c → b → a.
            await expectStoreError(.invalidArguments) { try await f.db.save(makeRecord("Note", "a", in: zone, parent: "b"), policy: .allKeys) }
            do {
                _ = try await f.db.modify(saving: [makeRecord("Note", "c", in: zone, parent: "b"), makeRecord("Note", "a", in: zone, parent: "c")],
                                          in: zone, policy: .allKeys)
                Issue.record("a cycle of three was saved")
            } catch let error as StoreError {
                #expect(error.code == .partialFailure)
                #expect(error.partialErrors["a"]?.code == .invalidArguments)
            }
            #expect(try await f.db.record(named: "a", in: zone).parent == nil)
            // A parent deleted in the same batch is gone: refused, and the delete with it.
            do {
                _ = try await f.db.modify(saving: [makeRecord("Note", "d", in: zone, parent: "a")], deleting: [RecordDeletion(name: "a")], in: zone)
                Issue.record("a parent deleted in the batch was accepted")
            } catch let error as StoreError {
                #expect(error.partialErrors["d"]?.code == .referenceViolation)
            }
            #expect(try await f.db.record(named: "a", in: zone).name == "a")
            // Once the parent is deleted, the child keeps its parent and can still be saved with it,
            // but not given another missing one.
            try await f.db.delete(recordNamed: "a", in: zone)
            _ = try await f.db.save(makeRecord("Note", "b", in: zone, parent: "a", plain: ["x": 1]), policy: .allKeys)
            await expectStoreError(.referenceViolation) { try await f.db.save(makeRecord("Note", "b", in: zone, parent: "gone"), policy: .allKeys) }
        }
    }

    @Test("a long chain in one batch is checked, and a batch or a later save that closes it into a loop is refused", arguments: TestBackend.all)
    func longChains(_ backend: TestBackend) async throws {
        try await withStore(backend) { f async throws in
            let zone = try await f.db.createZone(named: "Z")
            let names = (0..<400).map { String(format: "c%03d", $0) }
            // c000 → c399 → c398 → … → c001 → c000: one loop of 400, in one batch.
            let loop = names.indices.map { i in makeRecord("Note", names[i], in: zone, parent: names[(i + names.count - 1) % names.count]) }
            do {
                _ = try await f.db.modify(saving: loop, in: zone)
                Issue.record("a loop of 400 parents was saved")
            } catch let error as StoreError {
                #expect(error.code == .partialFailure)
                #expect(error.partialErrors.count == 400 && error.partialErrors.values.allSatisfy { $0.code == .invalidArguments })
            }
            #expect(try await f.db.records(in: zone).isEmpty)
            // The same chain with a root saves; closing it later is refused.
            var chain = loop
            chain[0] = makeRecord("Note", names[0], in: zone)
            _ = try await f.db.modify(saving: chain.reversed(), in: zone)
            await expectStoreError(.invalidArguments) { try await f.db.save(makeRecord("Note", names[0], in: zone, parent: names[399]), policy: .allKeys) }
            _ = try await f.db.save(makeRecord("Note", names[0], in: zone, parent: nil, plain: ["x": 1]), policy: .allKeys)
        }
    }
}

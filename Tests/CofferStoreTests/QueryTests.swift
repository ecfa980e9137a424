import CofferCrypto
import CofferVault
import CofferStoreTestSupport
import Foundation
import GRDB
import Testing
@testable import CofferStore

@Suite("Queries on plain fields")
struct QueryTests {
    /// Five ascending values of one queryable type.
    struct Ladder: Sendable, CustomTestStringConvertible {
        let label: String
        let values: [RecordValue]
        var testDescription: String { label }
    }

    static let ladders: [Ladder] = [
        Ladder(label: "string", values: ["Zebra", "apple", "apples", "Ärger", "日本"]),
        Ladder(label: "int", values: [.int(Int64.min), -5, 0, 3, .int(Int64.max)]),
        Ladder(label: "double", values: [-1e300, -0.5, 0.25, 0.250001, 1e10]),
        Ladder(label: "date", values: [.date(Date(timeIntervalSince1970: -86_400.5)), .date(Date(timeIntervalSince1970: 0)),
                                       .date(Date(timeIntervalSince1970: 1_700_000_000.25)), .date(Date(timeIntervalSince1970: 1_700_000_000.5)),
                                       .date(Date(timeIntervalSince1970: 4_000_000_000))]),
        Ladder(label: "reference", values: [.reference("a"), .reference("a-b"), .reference("b"), .reference("ba"), .reference("c")]),
    ]

    /// Saves r0…r4 of type `Item` with `v` = the ladder's values, plus decoys that must never match.
    func seedLadder(_ f: TestStore, _ ladder: Ladder) async throws -> ZoneID {
        let zone = try await f.db.createZone(named: "Z")
        let records = ladder.values.enumerated().map { i, v in
            makeRecord("Item", "r\(i)", in: zone, plain: ["v": v, "other": .int(Int64(i))], encrypted: ["secret": v])
        }
        _ = try await f.db.modify(saving: records, in: zone)
        // Same field in another type, and the same type in another zone.
        _ = try await f.db.save(makeRecord("Decoy", "d", in: zone, plain: ["v": ladder.values[2]]))
        let other = try await f.db.createZone(named: "Other")
        _ = try await f.db.save(makeRecord("Item", "r2", in: other, plain: ["v": ladder.values[2]]))
        return zone
    }

    func run(_ f: TestStore, _ zone: ZoneID, _ predicates: [Query.Predicate], sort: [Query.Sort] = []) async throws -> [String] {
        recordNames(try await f.db.query(Query(recordType: "Item", predicates: predicates, sort: sort), in: zone).records)
    }

    @Test("= != < <= > >= on each queryable type", arguments: TestBackend.all, ladders)
    func comparisons(_ backend: TestBackend, _ ladder: Ladder) async throws {
        try await withStore(backend) { f async throws in
            let zone = try await seedLadder(f, ladder)
            let pivot = ladder.values[2]
            let expected: [(Query.Comparison, [String])] = [
                (.equal, ["r2"]), (.notEqual, ["r0", "r1", "r3", "r4"]),
                (.lessThan, ["r0", "r1"]), (.lessThanOrEqual, ["r0", "r1", "r2"]),
                (.greaterThan, ["r3", "r4"]), (.greaterThanOrEqual, ["r2", "r3", "r4"]),
            ]
            for (comparison, names) in expected {
                #expect(try await run(f, zone, [.init("v", comparison, pivot)]) == names, "\(ladder.label) \(comparison.rawValue)")
            }
            // Extremes.
            #expect(try await run(f, zone, [.init("v", .lessThan, ladder.values[0])]) == [])
            #expect(try await run(f, zone, [.init("v", .greaterThan, ladder.values[4])]) == [])
            #expect(try await run(f, zone, [.init("v", .greaterThanOrEqual, ladder.values[0])]) == ["r0", "r1", "r2", "r3", "r4"])
            #expect(try await run(f, zone, [.init("v", .equal, ladder.values[4])]) == ["r4"])
            // AND of two predicates.
            #expect(try await run(f, zone, [.init("v", .greaterThan, ladder.values[0]), .init("v", .lessThan, ladder.values[4])]) == ["r1", "r2", "r3"])
            #expect(try await run(f, zone, [.init("v", .greaterThan, ladder.values[0]), .init("other", .equal, 3)]) == ["r3"])
            // Sorted by the field, both ways.
            #expect(try await run(f, zone, [], sort: [.init("v")]) == ["r0", "r1", "r2", "r3", "r4"])
            #expect(try await run(f, zone, [], sort: [.init("v", ascending: false)]) == ["r4", "r3", "r2", "r1", "r0"])
            // The records come back whole, encrypted values included.
            let page = try await f.db.query(Query(recordType: "Item", predicates: [.init("v", .equal, pivot)]), in: zone)
            #expect(page.records.first?.encryptedValues["secret"] == pivot)
            #expect(page.records.first?.values["v"] == pivot)
            #expect(page.cursor == nil)
        }
    }

    @Test("bool fields: = and != and the order false < true", arguments: TestBackend.all)
    func bools(_ backend: TestBackend) async throws {
        try await withStore(backend) { f async throws in
            let zone = try await f.db.createZone(named: "Z")
            let flags: [Bool] = [true, false, true, false, false]
            _ = try await f.db.modify(saving: flags.enumerated().map { makeRecord("Item", "r\($0)", in: zone, plain: ["done": .bool($1)]) }, in: zone)
            #expect(try await run(f, zone, [.init("done", .equal, true)]) == ["r0", "r2"])
            #expect(try await run(f, zone, [.init("done", .equal, false)]) == ["r1", "r3", "r4"])
            #expect(try await run(f, zone, [.init("done", .notEqual, true)]) == ["r1", "r3", "r4"])
            #expect(try await run(f, zone, [.init("done", .lessThan, true)]) == ["r1", "r3", "r4"])
            #expect(try await run(f, zone, [.init("done", .greaterThanOrEqual, true)]) == ["r0", "r2"])
            #expect(try await run(f, zone, [], sort: [.init("done", ascending: false)]) == ["r0", "r2", "r1", "r3", "r4"])
        }
    }

    @Test("a double field compares with ints too; an int field refuses a double; types must match", arguments: TestBackend.all)
    func valueTypes(_ backend: TestBackend) async throws {
        try await withStore(backend) { f async throws in
            let zone = try await f.db.createZone(named: "Z")
            _ = try await f.db.modify(saving: [
                makeRecord("Item", "a", in: zone, plain: ["d": 1.5, "i": 1, "s": "1", "t": .date(Date(timeIntervalSince1970: 1))]),
                makeRecord("Item", "b", in: zone, plain: ["d": 2.0, "i": 2, "s": "2", "t": .date(Date(timeIntervalSince1970: 2))]),
            ], in: zone)
            #expect(try await run(f, zone, [.init("d", .equal, 2)]) == ["b"])
            #expect(try await run(f, zone, [.init("d", .lessThan, 2)]) == ["a"])
            await expectStoreError(.invalidArguments) { try await run(f, zone, [.init("i", .equal, 1.0)]) }
            await expectStoreError(.invalidArguments) { try await run(f, zone, [.init("i", .equal, "1")]) }
            await expectStoreError(.invalidArguments) { try await run(f, zone, [.init("s", .equal, 1)]) }
            await expectStoreError(.invalidArguments) { try await run(f, zone, [.init("t", .equal, 1.0)]) }
            await expectStoreError(.invalidArguments) { try await run(f, zone, [.init("s", .equal, .bytes([0x31]))]) }
            await expectStoreError(.invalidArguments) { try await run(f, zone, [.init("i", .equal, .list([1]))]) }
        }
    }

    // MARK: - Begins-with

    static let words: [String] = [
        "app", "apple", "apricot", "banana", "Apple", "äpfel", "ärger", "日本語", "日本", "日曜日",
        "😀smile", "😀😀", "😁", "50%off", "500", "a_b", "axb", "", "a\u{10FFFF}z", "b", "a\u{D7FF}", "a\u{E000}",
    ]

    @Test("begins-with, including unicode prefixes and LIKE wildcards taken literally", arguments: TestBackend.all, [
        "ap", "app", "apple", "A", "a", "ä", "äp", "日本", "日", "😀", "😁", "50%", "a_", "a\u{10FFFF}", "a\u{D7FF}",
        "zzz", "", "b", "\u{10FFFF}",
    ])
    func beginsWith(_ backend: TestBackend, _ prefix: String) async throws {
        try await withStore(backend) { f async throws in
            let zone = try await f.db.createZone(named: "Z")
            let records = Self.words.enumerated().map { i, w in
                makeRecord("Item", String(format: "w%02d", i), in: zone, plain: ["w": .string(w), "r": .reference(w.isEmpty ? "empty" : "ref-" + String(i))])
            }
            _ = try await f.db.modify(saving: records, in: zone)
            let expected = Self.words.enumerated()
                .filter { Array($0.element.utf8).starts(with: Array(prefix.utf8)) }
                .map { String(format: "w%02d", $0.offset) }
            #expect(try await run(f, zone, [.init("w", .beginsWith, .string(prefix))]) == expected)
            // Sorted by the word, descending, the same set.
            let sorted = try await run(f, zone, [.init("w", .beginsWith, .string(prefix))], sort: [.init("w", ascending: false)])
            #expect(Set(sorted) == Set(expected))
            let words = sorted.map { Self.words[Int($0.dropFirst())!] }
            #expect(words.map { Array($0.utf8) } == words.map { Array($0.utf8) }.sorted { $0.lexicographicallyPrecedes($1) }.reversed())
        }
    }

    @Test("begins-with on references; refused on other types", arguments: TestBackend.all)
    func beginsWithTypes(_ backend: TestBackend) async throws {
        try await withStore(backend) { f async throws in
            let zone = try await f.db.createZone(named: "Z")
            _ = try await f.db.modify(saving: [
                makeRecord("Item", "a", in: zone, plain: ["r": .reference("folder-1"), "i": 1, "d": 1.0, "b": true, "t": .date(Date())]),
                makeRecord("Item", "b", in: zone, plain: ["r": .reference("folder-2"), "i": 2, "d": 2.0, "b": false, "t": .date(Date())]),
                makeRecord("Item", "c", in: zone, plain: ["r": .reference("file-1"), "i": 3, "d": 3.0, "b": true, "t": .date(Date())]),
            ], in: zone)
            #expect(try await run(f, zone, [.init("r", .beginsWith, "folder-")]) == ["a", "b"])
            #expect(try await run(f, zone, [.init("r", .beginsWith, .reference("fi"))]) == ["c"])
            for field in ["i", "d", "b", "t"] {
                await expectStoreError(.invalidArguments, "\(field)") { try await run(f, zone, [.init(field, .beginsWith, "1")]) }
            }
            await expectStoreError(.invalidArguments) { try await run(f, zone, [.init("i", .beginsWith, 1)]) }
        }
    }

    // MARK: - Sort

    @Test("sort ascending and descending, ties by name, several keys", arguments: TestBackend.all)
    func sorting(_ backend: TestBackend) async throws {
        try await withStore(backend) { f async throws in
            let zone = try await f.db.createZone(named: "Z")
            let rows: [(String, Int64, String, Double)] = [
                ("n1", 3, "b", 0.5), ("n2", 1, "a", 2.5), ("n3", 3, "a", -1.0), ("n4", 2, "b", 0.0), ("n5", 1, "b", 2.5),
            ]
            _ = try await f.db.modify(saving: rows.map { makeRecord("Item", $0.0, in: zone, plain: ["n": .int($0.1), "g": .string($0.2), "x": .double($0.3)]) }, in: zone)
            #expect(try await run(f, zone, []) == ["n1", "n2", "n3", "n4", "n5"])
            #expect(try await run(f, zone, [], sort: [.init("n")]) == ["n2", "n5", "n4", "n1", "n3"])
            #expect(try await run(f, zone, [], sort: [.init("n", ascending: false)]) == ["n1", "n3", "n4", "n2", "n5"])
            #expect(try await run(f, zone, [], sort: [.init("x")]) == ["n3", "n4", "n1", "n2", "n5"])
            #expect(try await run(f, zone, [], sort: [.init("x", ascending: false)]) == ["n2", "n5", "n1", "n4", "n3"])
            #expect(try await run(f, zone, [], sort: [.init("g"), .init("n", ascending: false)]) == ["n3", "n2", "n1", "n4", "n5"])
            #expect(try await run(f, zone, [], sort: [.init("g", ascending: false), .init("x")]) == ["n4", "n1", "n5", "n3", "n2"])
            #expect(try await run(f, zone, [.init("g", .equal, "b")], sort: [.init("x", ascending: false)]) == ["n5", "n1", "n4"])
        }
    }

    // MARK: - Refused queries

    @Test("encrypted, unknown, bytes and list fields cannot be queried or sorted: .invalidArguments, not an empty result", arguments: TestBackend.all)
    func refusedFields(_ backend: TestBackend) async throws {
        try await withStore(backend) { f async throws in
            let zone = try await f.db.createZone(named: "Z")
            _ = try await f.db.save(makeRecord("Item", "a", in: zone, plain: ["title": "t", "raw": .bytes([1]), "tags": .list(["x"])],
                                               encrypted: ["body": "secret", "pin": 1234]))
            for field in ["body", "pin", "raw", "tags", "missing"] {
                let value: RecordValue = field == "pin" ? 1234 : field == "raw" ? .bytes([1]) : field == "tags" ? .list(["x"]) : "secret"
                for comparison in Query.Comparison.allCases {
                    await expectStoreError(.invalidArguments, "\(field) \(comparison.rawValue)") {
                        try await f.db.query(Query(recordType: "Item", predicates: [.init(field, comparison, value)]), in: zone)
                    }
                }
                await expectStoreError(.invalidArguments, "sort on \(field)") {
                    try await f.db.query(Query(recordType: "Item", sort: [.init(field)]), in: zone)
                }
                await expectStoreError(.invalidArguments, "sort desc on \(field)") {
                    try await f.db.query(Query(recordType: "Item", predicates: [.init("title", .equal, "t")], sort: [.init(field, ascending: false)]), in: zone)
                }
            }
            let error = await expectStoreError(.invalidArguments) {
                try await f.db.query(Query(recordType: "Item", predicates: [.init("body", .equal, "secret")]), in: zone)
            }
            #expect(error?.message.contains("encrypted") == true)
            #expect(error?.message.contains("'body'") == true)
            #expect(error?.message.contains("secret") == false)
            await expectStoreError(.invalidArguments) {
                try await f.db.query(Query(recordType: "Item", predicates: [.init("bad key", .equal, "x")]), in: zone)
            }
            await expectStoreError(.invalidArguments) {
                try await f.db.query(Query(recordType: "Item", predicates: [.init("title'); DROP TABLE record; --", .equal, "x")]), in: zone)
            }
        }
    }

    @Test("query limits are 1...10000", arguments: TestBackend.all)
    func limits(_ backend: TestBackend) async throws {
        try await withStore(backend) { f async throws in
            let zone = try await f.db.createZone(named: "Z")
            _ = try await f.db.save(makeRecord("Item", "a", in: zone, plain: ["n": 1]))
            for limit in [0, -1, 10_001, Int.max] {
                await expectStoreError(.invalidArguments, "limit \(limit)") { try await f.db.query(Query(recordType: "Item", limit: limit), in: zone) }
            }
            #expect(try await f.db.query(Query(recordType: "Item", limit: 10_000), in: zone).records.count == 1)
            #expect(try await f.db.query(Query(recordType: "Item", limit: 1), in: zone).cursor == nil)
        }
    }

    @Test("a type without records gives an empty page", arguments: TestBackend.all)
    func emptyType(_ backend: TestBackend) async throws {
        try await withStore(backend) { f async throws in
            let zone = try await f.db.createZone(named: "Z")
            let page = try await f.db.query(Query(recordType: "Nothing", limit: 5), in: zone)
            #expect(page.records.isEmpty)
            #expect(page.cursor == nil)
        }
    }

    // MARK: - Paging

    @Test("paging with cursors (and their tokens) yields every match exactly once, in order", arguments: TestBackend.all, [1, 3, 7, 10, 57, 100])
    func paging(_ backend: TestBackend, _ limit: Int) async throws {
        try await withStore(backend) { f async throws in
            let zone = try await f.db.createZone(named: "Z")
            var values: [String: Int64] = [:]
            let records = (0..<57).map { i -> CofferStore.Record in
                let name = String(format: "p%03d", (i * 37) % 57)
                let v = Int64.random(in: 0..<10)
                values[name] = v
                return makeRecord("Item", name, in: zone, plain: ["v": .int(v)], encrypted: ["e": .int(v)])
            }
            _ = try await f.db.modify(saving: records, in: zone)
            let query = Query(recordType: "Item", predicates: [.init("v", .greaterThanOrEqual, 3)], sort: [.init("v", ascending: false)], limit: limit)
            let expected = values.filter { $0.value >= 3 }.sorted { ($0.value, $1.key) > ($1.value, $0.key) }.map(\.key)
            var unlimited = query
            unlimited.limit = nil
            #expect(recordNames(try await f.db.query(unlimited, in: zone).records) == expected)

            var seen: [String] = []
            var cursor: QueryCursor? = nil
            var pages = 0
            repeat {
                let page = try await f.db.query(query, in: zone, cursor: cursor)
                pages += 1
                #expect(page.records.count <= limit)
                if page.cursor != nil { #expect(page.records.count == limit) }
                seen += recordNames(page.records)
                // Pass the cursor through its printable form.
                cursor = try page.cursor.map { try QueryCursor(token: $0.token) }
                #expect(cursor == page.cursor)
            } while cursor != nil && pages < 100
            #expect(seen == expected)
            #expect(Set(seen).count == seen.count)
            #expect(pages == max(1, (expected.count + limit - 1) / limit))
        }
    }

    @Test("a page exactly as long as the rest has no cursor", arguments: TestBackend.all)
    func exactPages(_ backend: TestBackend) async throws {
        try await withStore(backend) { f async throws in
            let zone = try await f.db.createZone(named: "Z")
            _ = try await f.db.modify(saving: (0..<10).map { makeRecord("Item", "r\($0)", in: zone, plain: ["n": .int(Int64($0))]) }, in: zone)
            let first = try await f.db.query(Query(recordType: "Item", limit: 5), in: zone)
            #expect(recordNames(first.records) == ["r0", "r1", "r2", "r3", "r4"])
            let cursor = try #require(first.cursor)
            let second = try await f.db.query(Query(recordType: "Item", limit: 5), in: zone, cursor: cursor)
            #expect(recordNames(second.records) == ["r5", "r6", "r7", "r8", "r9"])
            #expect(second.cursor == nil)
            #expect(try await f.db.query(Query(recordType: "Item", limit: 10), in: zone).cursor == nil)
        }
    }

    @Test("a cursor is refused by another query, another limit, another sort and another zone", arguments: TestBackend.all)
    func foreignCursor(_ backend: TestBackend) async throws {
        try await withStore(backend) { f async throws in
            let zone = try await f.db.createZone(named: "Z")
            let other = try await f.db.createZone(named: "Other")
            for z in [zone, other] {
                _ = try await f.db.modify(saving: (0..<10).map { makeRecord("Item", "r\($0)", in: z, plain: ["n": .int(Int64($0)), "s": "x"]) }, in: z)
            }
            let query = Query(recordType: "Item", predicates: [.init("n", .greaterThan, 1)], limit: 3)
            let cursor = try #require(try await f.db.query(query, in: zone).cursor)
            #expect(recordNames(try await f.db.query(query, in: zone, cursor: cursor).records) == ["r5", "r6", "r7"])
            var variants: [Query] = []
            var q = query; q.predicates = [.init("n", .greaterThan, 2)]; variants.append(q)
            q = query; q.predicates = [.init("n", .greaterThanOrEqual, 1)]; variants.append(q)
            q = query; q.limit = 4; variants.append(q)
            q = query; q.limit = nil; variants.append(q)
            q = query; q.sort = [.init("n")]; variants.append(q)
            q = query; q.sort = [.init("n", ascending: false)]; variants.append(q)
            q = query; q.predicates.append(.init("s", .equal, "x")); variants.append(q)
            q = query; q.recordType = "Other"; variants.append(q)
            for variant in variants {
                await expectStoreError(.invalidArguments, "\(variant)") { try await f.db.query(variant, in: zone, cursor: cursor) }
            }
            await expectStoreError(.invalidArguments) { try await f.db.query(query, in: other, cursor: cursor) }
        }
    }

    @Test("queries that differ only in a date's fraction of a second, or by '|' inside a string, do not share cursors", arguments: TestBackend.all)
    func fingerprintCollisions(_ backend: TestBackend) async throws {
        try await withStore(backend) { f async throws in
            let zone = try await f.db.createZone(named: "Z")
            _ = try await f.db.modify(saving: (0..<10).map {
                makeRecord("Item", "r\($0)", in: zone, plain: ["t": .date(Date(timeIntervalSince1970: 1_700_000_000 + Double($0) * 0.25)),
                                                               "a": .string("x"), "b": .string("y")])
            }, in: zone)
            let early = Query(recordType: "Item", predicates: [.init("t", .greaterThan, .date(Date(timeIntervalSince1970: 1_700_000_000.25)))], limit: 2)
            let late = Query(recordType: "Item", predicates: [.init("t", .greaterThan, .date(Date(timeIntervalSince1970: 1_700_000_000.75)))], limit: 2)
            let cursor = try #require(try await f.db.query(early, in: zone).cursor)
            await expectStoreError(.invalidArguments, "date fraction") { try await f.db.query(late, in: zone, cursor: cursor) }

            let one = Query(recordType: "Item", predicates: [.init("a", .equal, "x|b=string:y")], limit: 1)
            let two = Query(recordType: "Item", predicates: [.init("a", .equal, "x"), .init("b", .equal, "y")], limit: 1)
            let cursorTwo = try #require(try await f.db.query(two, in: zone).cursor)
            await expectStoreError(.invalidArguments, "'|' in a value") { try await f.db.query(one, in: zone, cursor: cursorTwo) }
        }
    }

    @Test("paging stays exact while records before and after the cursor are saved and deleted between pages", arguments: TestBackend.all)
    func pagingUnderChange(_ backend: TestBackend) async throws {
        try await withStore(backend) { f async throws in
            let zone = try await f.db.createZone(named: "Z")
            _ = try await f.db.modify(saving: (0..<20).map { makeRecord("Item", String(format: "r%02d", $0), in: zone, plain: ["n": .int(Int64($0))]) }, in: zone)
            let query = Query(recordType: "Item", sort: [.init("n")], limit: 5)
            let first = try await f.db.query(query, in: zone)
            #expect(recordNames(first.records) == ["r00", "r01", "r02", "r03", "r04"])
            // Between pages: two records already returned go, one that sorts before the cursor
            // arrives, one returned record moves past the cursor, and one ahead of it goes.
            try await f.db.delete(recordNamed: "r01", in: zone)
            try await f.db.delete(recordNamed: "r03", in: zone)
            _ = try await f.db.save(makeRecord("Item", "early", in: zone, plain: ["n": -1]))
            var moved = try #require(first.records.first { $0.name == "r02" })
            moved.values["n"] = 99
            _ = try await f.db.save(moved)
            try await f.db.delete(recordNamed: "r07", in: zone)
            var seen = [String]()
            var cursor = first.cursor
            while let position = cursor {
                let page = try await f.db.query(query, in: zone, cursor: try QueryCursor(token: position.token))
                seen += recordNames(page.records)
                cursor = page.cursor
            }
            // Everything after r04 still there, in order, once; r02 again at its new place.
            #expect(seen == ["r05", "r06"] + (8..<20).map { String(format: "r%02d", $0) } + ["r02"])
        }
    }

    @Test("paging with mixed sort directions and records missing a sort field matches the unpaged order", arguments: TestBackend.all, [1, 2, 3, 7])
    func pagingMixedAndMissing(_ backend: TestBackend, _ limit: Int) async throws {
        try await withStore(backend) { f async throws in
            let zone = try await f.db.createZone(named: "Z")
            let records = (0..<24).map { i -> CofferStore.Record in
                var plain: [String: RecordValue] = [:]
                if i % 5 != 0 { plain["a"] = .string(["x", "y", "z"][i % 3]) } // some lack a, some lack b
                if i % 4 != 0 { plain["b"] = .double(Double(i % 3) / 2) }
                plain["c"] = .int(Int64(i))
                return makeRecord("Item", "m\(i)", in: zone, plain: plain)
            }
            _ = try await f.db.modify(saving: records, in: zone)
            for sort in [[Query.Sort("a"), .init("b", ascending: false)], [.init("a", ascending: false), .init("b")],
                         [.init("b", ascending: false)], [.init("a"), .init("b")]] {
                var query = Query(recordType: "Item", predicates: [.init("c", .lessThan, 22)], sort: sort)
                let expected = recordNames(try await f.db.query(query, in: zone).records)
                #expect(expected.count == 22)
                query.limit = limit
                var seen = [String]()
                var cursor: QueryCursor?
                repeat {
                    let page = try await f.db.query(query, in: zone, cursor: cursor)
                    seen += recordNames(page.records)
                    cursor = try page.cursor.map { try QueryCursor(token: $0.token) }
                } while cursor != nil && seen.count <= 30
                #expect(seen == expected, "\(sort)")
            }
        }
    }

    @Test("cursor tokens: round trip, and malformed tokens are .invalidArguments", arguments: TestBackend.all)
    func cursorTokens(_ backend: TestBackend) async throws {
        try await withStore(backend) { f async throws in
            let zone = try await f.db.createZone(named: "Z")
            _ = try await f.db.modify(saving: (0..<5).map { makeRecord("Item", "r\($0)", in: zone, plain: ["n": .int(Int64($0)), "s": .string("é\($0)")]) }, in: zone)
            let query = Query(recordType: "Item", sort: [.init("n"), .init("s", ascending: false)], limit: 2)
            let cursor = try #require(try await f.db.query(query, in: zone).cursor)
            let token = cursor.token
            #expect(token.allSatisfy { $0.isASCII && ($0.isLetter || $0.isNumber || $0 == "-" || $0 == "_") })
            #expect(try QueryCursor(token: token) == cursor)
            #expect(cursor.sortValues == [.int(1), .text("é1")])
            #expect(cursor.name == "r1")

            let bytes = try #require(Base64URL.decode(token))
            #expect(Array(bytes[0..<4]) == Array("CQC".utf8) + [2])
            let head = Array(bytes[0..<36]) // magic, version, zone uid, fingerprint
            func encode(_ values: [UInt8], name: [UInt8] = Array("r1".utf8)) -> String { Base64URL.encode(head + values + [UInt8(name.count)] + name) }
            let int1: [UInt8] = [1] + BigEndian.bytes(Int64(1)), text: [UInt8] = [3, 0, 0, 0, 3] + Array("é1".utf8)
            #expect(encode([2] + int1 + text) == token) // the layout Query.swift documents
            var badMagic = bytes; badMagic[0] ^= 0x20
            var badVersion = bytes; badVersion[3] = 3
            let malformed = [
                "", "abc", "!!!!", token + "=", String(repeating: "A", count: QueryCursor.maxTokenLength + 4),
                Base64URL.encode(Array(bytes.dropLast())), Base64URL.encode(bytes + [0]), Base64URL.encode(badMagic), Base64URL.encode(badVersion),
                encode([2] + int1 + [9]),                                          // unknown tag
                encode([2] + int1 + [3, 0, 0, 0, 9] + Array("é1".utf8)),           // text longer than the bytes
                encode([2] + int1 + [3, 0, 0, 0, 1, 0xff]),                        // not UTF-8
                encode([2, 2] + BigEndian.bytes(Double.nan.bitPattern) + text),     // not a finite number
                encode([2] + int1 + text, name: []), encode([2] + int1 + text, name: Array("_r".utf8)), encode([2] + int1 + text, name: [0x0a]),
            ]
            for bad in malformed {
                await expectStoreError(.invalidArguments, "\(bad.prefix(20))") { try QueryCursor(token: bad) }
            }
            // A version 1 cursor (an offset) is refused with what to do.
            let v1 = Base64URL.encode(Array("CQC".utf8) + [1] + Array(bytes[4..<36]) + BigEndian.bytes(Int64(2)))
            do { _ = try QueryCursor(token: v1); Issue.record("a v1 cursor was accepted") } catch let error as StoreError {
                #expect(error.code == .invalidArguments && error.message.contains("run the query again"))
            }
            // Well formed, but not what this query sorts on: refused by the query.
            for values in [[1] + int1, [2] + text + text, [2, 0] + int1, [3] + int1 + text + text] {
                let forged = try QueryCursor(token: encode(values))
                await expectStoreError(.invalidArguments, "\(values)") { try await f.db.query(query, in: zone, cursor: forged) }
            }
            // NULLs fit any key; a position beyond the end gives an empty last page.
            #expect(try await f.db.query(query, in: zone, cursor: QueryCursor(token: encode([2, 0, 0]))).records.count == 2)
            let beyond = try QueryCursor(token: encode([2] + [1] + BigEndian.bytes(Int64.max) + text, name: Array("zz".utf8)))
            let page = try await f.db.query(query, in: zone, cursor: beyond)
            #expect(page.records.isEmpty)
            #expect(page.cursor == nil)
        }
    }

    // MARK: - Indexes

    /// The plan of the statement `Session.query` runs for one predicate (or sort) on `field`.
    func plan(_ store: Store, type: String, whereSQL: String, orderSQL: String, arguments: StatementArguments) throws -> [String] {
        let sql = "SELECT \(SQLiteTransaction.recordColumns) FROM record WHERE zone_id = ? AND type = '\(type)'\(whereSQL) ORDER BY \(orderSQL)"
        return try store.dbPool.read { db in
            try Row.fetchAll(db, sql: "EXPLAIN QUERY PLAN " + sql, arguments: arguments).map { $0["detail"] as String }
        }
    }

    @Test("each queryable plain field gets an index named record_field_…, and queries use it", arguments: [
        ("s", RecordValue.string("s5")), ("i", RecordValue.int(5)), ("d", RecordValue.double(0.5)), ("b", RecordValue.bool(true)),
        ("t", RecordValue.date(Date(timeIntervalSince1970: 5))), ("r", RecordValue.reference("r5")),
    ])
    func indexesUsed(_ field: String, _ pivot: RecordValue) async throws {
        try await withStore { f async throws in
            let zone = try await f.db.createZone(named: "Z")
            let values: [String: (Int) -> RecordValue] = [
                "s": { .string("s\($0)") }, "i": { .int(Int64($0)) }, "d": { .double(Double($0) / 10) }, "b": { .bool($0 % 2 == 0) },
                "t": { .date(Date(timeIntervalSince1970: Double($0))) }, "r": { .reference("r\($0)") },
            ]
            _ = try await f.db.modify(saving: (0..<200).map { i in
                var plain: [String: RecordValue] = [:]
                for (k, make) in values { plain[k] = make(i) }
                plain["raw"] = .bytes([UInt8(i % 256)])
                plain["tags"] = .list([.int(Int64(i))])
                return makeRecord("Note", String(format: "n%03d", i), in: zone, plain: plain, encrypted: ["body": .string("b\(i)")])
            }, in: zone)
            // Saving creates no query index; the first query on a field does.
            let before = try await f.store.dbPool.read { db in
                try String.fetchAll(db, sql: "SELECT name FROM sqlite_master WHERE type = 'index' AND name LIKE 'record_field_%'")
            }
            #expect(before.isEmpty)
            let expected = try await f.db.query(Query(recordType: "Note", predicates: [.init(field, .equal, pivot)]), in: zone)
            let indexes = try await f.store.dbPool.read { db in
                try Row.fetchAll(db, sql: "SELECT name, sql FROM sqlite_master WHERE type = 'index' AND name LIKE 'record_field_%' ORDER BY name")
            }
            #expect(indexes.map { $0["name"] as String } == [SQLiteFieldIndex.name(recordType: "Note", field: field)])
            let indexSQL: String = indexes.first?["sql"] ?? ""
            #expect(indexSQL.contains(SQLiteFieldIndex.expression(field)))
            #expect(indexSQL.contains("type = 'Note'"))
            let indexName = SQLiteFieldIndex.name(recordType: "Note", field: field)
            let zoneRowID = try await f.store.dbPool.read { db in try Int64.fetchOne(db, sql: "SELECT id FROM zone") }
            let expr = SQLiteFieldIndex.expression(field)
            let pivotValue = try RecordReader.comparedValue(pivot, for: pivot.fieldType, field: field).databaseValue
            for comparison in ["=", "<", "<=", ">", ">="] {
                let details = try plan(f.store, type: "Note", whereSQL: " AND \(expr) \(comparison) ?", orderSQL: "+name",
                                       arguments: [zoneRowID, pivotValue])
                #expect(details.contains { $0.contains("USING INDEX \(indexName)") }, "\(comparison): \(details)")
                #expect(!details.contains { $0.hasPrefix("SCAN record") && !$0.contains("INDEX") }, "\(details)")
            }
            let sorted = try plan(f.store, type: "Note", whereSQL: "", orderSQL: "\(expr) DESC, +name", arguments: [zoneRowID])
            #expect(sorted.contains { $0.contains("USING INDEX \(indexName)") }, "\(sorted)")
            if field == "s" {
                let range = try plan(f.store, type: "Note", whereSQL: " AND \(expr) >= ? AND \(expr) < ?", orderSQL: "+name",
                                     arguments: [zoneRowID, "s1", "s2"])
                #expect(range.contains { $0.contains("USING INDEX \(indexName)") }, "\(range)")
            }
            // The query found what it asked for.
            #expect(!expected.records.isEmpty)
            #expect(expected.records.allSatisfy { $0.values[field] == pivot })
            // The store, with the index a query made, still passes the schema check at open.
            #expect(SQLiteFieldIndex.isFieldIndex(name: indexName, sql: indexSQL))
            _ = try Store(path: f.store.url.path)
        }
    }

    @Test("a query on one field's equality, or sorted ascending on its one field, ends its order with plain name; others with +name")
    func tieOrderTerm() {
        func order(_ predicates: [Query.Predicate], _ sort: [Query.Sort] = []) -> String {
            SQLiteTransaction.tieOrder(Query(recordType: "Note", predicates: predicates, sort: sort))
        }
        #expect(order([]) == "name")
        #expect(order([.init("count", .equal, .int(3))]) == "name")
        #expect(order([.init("count", .equal, .int(3)), .init("count", .equal, .int(4))]) == "name")
        #expect(order([.init("count", .greaterThan, .int(3))]) == "+name")
        #expect(order([.init("count", .greaterThan, .int(3))], [.init("count")]) == "name")
        #expect(order([.init("count", .greaterThan, .int(3))], [.init("count", ascending: false)]) == "+name")
        #expect(order([.init("count", .equal, .int(3)), .init("title", .equal, "t")]) == "+name")
        #expect(order([.init("count", .equal, .int(3))], [.init("title")]) == "+name")
        #expect(order([], [.init("title")]) == "name")
    }

    @Test("a field's index ends with the record name: an equality query streams rows in name order without sorting them")
    func equalityQueriesNeedNoSort() async throws {
        try await withStore { f async throws in
            let zone = try await f.db.createZone(named: "Z")
            _ = try await f.db.modify(saving: (0..<60).map { i in
                makeRecord("Note", String(format: "n%03d", 59 - i), in: zone, plain: ["k": .int(Int64(i % 3)), "s": .string("s\(i % 5)")],
                           encrypted: ["body": .string("b\(i)")])
            }, in: zone)
            let result = try await f.db.query(Query(recordType: "Note", predicates: [.init("k", .equal, .int(1))]), in: zone)
            let expected = (0..<60).filter { $0 % 3 == 1 }.map { String(format: "n%03d", 59 - $0) }.sorted()
            #expect(result.records.map(\.name) == expected)
            let sorted = try await f.db.query(Query(recordType: "Note", predicates: [.init("s", .greaterThanOrEqual, "s3")], sort: [.init("s")]), in: zone)
            let keys = sorted.records.map { record -> String in
                guard case .string(let s)? = record.values["s"] else { return "" }
                return s + " " + record.name
            }
            #expect(keys.count == 24 && keys == keys.sorted())
            let zoneRowID = try await f.store.dbPool.read { db in try Int64.fetchOne(db, sql: "SELECT id FROM zone") }
            let indexName = SQLiteFieldIndex.name(recordType: "Note", field: "k")
            let details = try plan(f.store, type: "Note", whereSQL: " AND \(SQLiteFieldIndex.expression("k")) = ?", orderSQL: "name",
                                   arguments: [zoneRowID, 1])
            #expect(details.contains { $0.contains("USING INDEX \(indexName)") }, "\(details)")
            #expect(!details.contains { $0.contains("TEMP B-TREE") }, "\(details)")
        }
    }

    @Test("a version 1 index (without the name) is replaced by the current one at the field's next query")
    func oldIndexReplaced() async throws {
        try await withStore { f async throws in
            let zone = try await f.db.createZone(named: "Z")
            _ = try await f.db.save(makeRecord("Note", "a", in: zone, plain: ["k": .int(1)], encrypted: ["body": "b"]))
            let old = SQLiteFieldIndex.name(recordType: "Note", field: "k", version: 1)
            try await f.store.dbPool.write { db in
                try db.execute(sql: "CREATE INDEX \(old) ON record (zone_id, \(SQLiteFieldIndex.expression("k"))) WHERE type = 'Note'")
            }
            let fresh = try Store(path: f.store.url.path) // knows no index yet, as after an upgrade
            let result = try await fresh.session(vault: f.vault).privateDatabase.query(
                Query(recordType: "Note", predicates: [.init("k", .equal, .int(1))]), in: zone)
            #expect(result.records.map(\.name) == ["a"])
            let indexes = try await f.store.dbPool.read { db in
                try String.fetchAll(db, sql: "SELECT name FROM sqlite_master WHERE type = 'index' AND name LIKE 'record_field_%'")
            }
            #expect(indexes == [SQLiteFieldIndex.name(recordType: "Note", field: "k")])
        }
    }

    @Test("refused queries (encrypted, bytes, list or unknown fields; a zone the user cannot read) create no index")
    func noIndexForRefusedQueries() async throws {
        try await withStore { f async throws in
            let zone = try await f.db.createZone(named: "Z")
            _ = try await f.db.save(makeRecord("Note", "a", in: zone, plain: ["raw": .bytes([1]), "tags": .list(["x"]), "title": "t"],
                                               encrypted: ["body": "b", "n": 1]))
            for field in ["body", "n", "raw", "tags", "missing"] {
                await expectStoreError(.invalidArguments, "\(field)") {
                    try await f.db.query(Query(recordType: "Note", predicates: [.init(field, .equal, "b")]), in: zone)
                }
                await expectStoreError(.invalidArguments, "sort \(field)") {
                    try await f.db.query(Query(recordType: "Note", sort: [.init(field)]), in: zone)
                }
            }
            let bob = try await f.user("Bob Builder", "bob@example.com").privateDatabase
            await expectStoreError(.zoneNotFound) {
                try await bob.query(Query(recordType: "Note", predicates: [.init("title", .equal, "t")]), in: zone)
            }
            let indexes = try await f.store.dbPool.read { db in
                try String.fetchAll(db, sql: "SELECT name FROM sqlite_master WHERE type = 'index' AND name LIKE 'record_field_%'")
            }
            #expect(indexes.isEmpty)
        }
    }

    @Test("every (record type, field) pair has its own index, even when the names run together")
    func indexNamesDoNotCollide() async throws {
        try await withStore { f async throws in
            let zone = try await f.db.createZone(named: "Z")
            // "A" + "x_5_y" and "A_1_x" + "y" both spell record_field_A_1_x_5_y.
            _ = try await f.db.save(makeRecord("A", "a", in: zone, plain: ["x_5_y": 1]))
            _ = try await f.db.modify(saving: (0..<50).map { makeRecord("A_1_x", "b\($0)", in: zone, plain: ["y": .int(Int64($0))]) }, in: zone)
            // The first query on each field makes its index.
            #expect(recordNames(try await f.db.query(Query(recordType: "A", predicates: [.init("x_5_y", .equal, 1)]), in: zone).records) == ["a"])
            #expect(recordNames(try await f.db.query(Query(recordType: "A_1_x", predicates: [.init("y", .equal, 7)]), in: zone).records) == ["b7"])
            let zoneRowID = try await f.store.dbPool.read { db in try Int64.fetchOne(db, sql: "SELECT id FROM zone") }
            for (type, field) in [("A", "x_5_y"), ("A_1_x", "y")] {
                let details = try plan(f.store, type: type, whereSQL: " AND \(SQLiteFieldIndex.expression(field)) = ?", orderSQL: "+name",
                                       arguments: [zoneRowID, 1])
                #expect(details.contains { $0.contains("USING INDEX record_field_") }, "\(type).\(field): \(details)")
            }
            #expect(recordNames(try await f.db.query(Query(recordType: "A_1_x", predicates: [.init("y", .equal, 7)]), in: zone).records) == ["b7"])
        }
    }
}

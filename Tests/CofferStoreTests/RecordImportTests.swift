import CofferStoreTestSupport
import Foundation
import Testing
@testable import CofferStore

/// Import and export of JSON lines through the library: the checks that refuse a file before
/// anything is saved, parents first, atomic batches, and the round trip.
@Suite("RecordImport")
struct RecordImportTests {
    static func lines(_ lines: [String]) -> Data { Data((lines.joined(separator: "\n") + "\n").utf8) }

    /// Imports `lines` into a new zone `Z` and expects a refusal with `code` whose message holds
    /// each of `mentioning`; checks nothing was saved.
    func refused(_ text: [String], _ code: StoreError.Code, mentioning: [String], prepare: ((TestStore, ZoneID) async throws -> Void)? = nil,
                 sourceLocation: SourceLocation = #_sourceLocation) async throws {
        try await withStore { f in
            let zone = try await f.db.createZone(named: "Z")
            try await prepare?(f, zone)
            let before = try await f.db.records(in: zone).count
            do {
                try await f.db.importRecords(jsonLines: Self.lines(text), into: zone)
                Issue.record("the import was not refused", sourceLocation: sourceLocation)
            } catch let e as StoreError {
                #expect(e.code == code, "\(e.message)", sourceLocation: sourceLocation)
                for part in mentioning { #expect(e.message.contains(part), "\(e.message)", sourceLocation: sourceLocation) }
                #expect(!e.message.contains("hunter2"), "a secret reached an error: \(e.message)", sourceLocation: sourceLocation)
            }
            #expect(try await f.db.records(in: zone).count == before, "records were saved", sourceLocation: sourceLocation)
        }
    }

    static let good = #"{"name":"g1","type":"Row","values":{"n":1},"encryptedValues":{}}"#

    @Test("JSON kinds map to int, double, string, bool and lists; 'types' gives date, bytes and ref", arguments: TestBackend.all)
    func types(_ backend: TestBackend) async throws {
        try await withStore(backend) { f in
            let zone = try await f.db.createZone(named: "Z")
            let summary = try await f.db.importRecords(jsonLines: Self.lines([
                #"{"name":"a","type":"Row","values":{"i":7,"d":2.5,"w":3.0,"s":"x","b":true,"l":[1,2],"m":[1,2.5],"big":1e300},"encryptedValues":{"e":"s"}}"#,
                #"{"name":"b","type":"Row","values":{"when":"2026-03-04T05:06:07.25Z","blob":"AAEC","link":"a","e2":[]},"encryptedValues":{},"types":{"when":"date","blob":"bytes","link":"ref","e2":"[date]"}}"#,
            ]), into: zone)
            #expect(summary == RecordImport.Summary(records: 2, batches: 1))
            let a = try await f.db.record(named: "a", in: zone)
            #expect(a.values == ["i": 7, "d": 2.5, "w": .double(3), "s": "x", "b": true, "l": .list([1, 2]), "m": .list([.double(1), .double(2.5)]), "big": .double(1e300)])
            #expect(a.encryptedValues == ["e": "s"])
            let b = try await f.db.record(named: "b", in: zone)
            #expect(b.values["when"] == .date(ISODate.parse("2026-03-04T05:06:07.25Z")!))
            #expect(b.values["blob"] == .bytes([0, 1, 2]) && b.values["link"] == .reference("a") && b.values["e2"] == .list([]))
            #expect(try await f.db.schema(of: "Row", in: zone)["e2"] == FieldSchema(type: .list(.date), encrypted: false))
        }
    }

    @Test("a malformed line is refused with its number, and nothing is saved", arguments: [
        ("{broken", "not valid JSON"),
        (#"{"name":"b","type":"Row","values":{"x":1e400},"encryptedValues":{}}"#, "not valid JSON"),
        (#"{"name":"b","type":"Row","values":{"x":1},"encryptedValues":{},}"#, "not valid JSON"),
        ("[1]", "not a JSON object"),
        (#"{"name":"b","type":"Row","values":{"x":1,"x":2},"encryptedValues":{}}"#, "the key 'x' appears twice"),
        (#"{"name":"b","type":"Row","values":{},"encryptedValues":{},"extra":1}"#, "unknown key 'extra'"),
        (#"{"type":"Row","values":{},"encryptedValues":{}}"#, "'name' and 'type' must be strings"),
        (#"{"name":"b","type":"Row","values":[],"encryptedValues":{}}"#, "must be objects"),
        (#"{"name":"b","type":"Row","values":{"x":null},"encryptedValues":{}}"#, "null and objects are not values"),
        (#"{"name":"b","type":"Row","values":{"x":9223372036854775808},"encryptedValues":{}}"#, "outside the 64-bit integer range"),
        (#"{"name":"b","type":"Row","values":{"l":[]},"encryptedValues":{}}"#, "new empty list"),
        (#"{"name":"b","type":"Row","values":{"n":"one"},"encryptedValues":{}}"#, "has type int"),
        (#"{"name":"b","type":"Row","values":{},"encryptedValues":{"n":1}}"#, "is plain"),
        (#"{"name":"g1","type":"Row","values":{"n":2},"encryptedValues":{}}"#, "appears twice"),
        (#"{"name":"b","type":"Row","values":{"d":"tomorrow"},"encryptedValues":{},"types":{"d":"date"}}"#, "is not an ISO 8601 date"),
        (#"{"name":"b","type":"Row","values":{},"encryptedValues":{"d":"hunter2"},"types":{"d":"date"}}"#, "it is not shown"),
        (#"{"name":"b","type":"Row","values":{},"encryptedValues":{"p":"hunter2"},"types":{"p":"bytes"}}"#, "(encrypted): not base64"),
    ])
    func malformed(line: String, message: String) async throws {
        try await refused([Self.good, "", line], .invalidArguments, mentioning: ["line 3: ", message, "nothing was imported"])
    }

    @Test("a record that exists keeps its type; a parent is in the file or the zone; no cycle")
    func zoneChecks() async throws {
        try await refused([Self.good, #"{"name":"old","type":"Row","values":{},"encryptedValues":{}}"#], .invalidArguments,
                          mentioning: ["line 2: ", "exists as type Other"]) { f, zone in
            var r = Record(type: "Other", name: "old", zone: zone)
            r.values["x"] = 1
            _ = try await f.db.save(r)
        }
        try await refused([Self.good, #"{"name":"o","type":"Row","parent":"nowhere","values":{},"encryptedValues":{}}"#], .unknownItem,
                          mentioning: ["line 2: ", "parent 'nowhere'"])
        try await refused([Self.good, #"{"name":"x","type":"Row","parent":"y","values":{},"encryptedValues":{}}"#,
                           #"{"name":"y","type":"Row","parent":"x","values":{},"encryptedValues":{}}"#], .invalidArguments,
                          mentioning: ["its own ancestor"])
    }

    @Test("parents are saved before their children across batches; 400 records make one batch, 401 two", arguments: TestBackend.all)
    func parentsAndBatches(_ backend: TestBackend) async throws {
        try await withStore(backend) { f in
            let zone = try await f.db.createZone(named: "Z")
            var text = (0..<500).map { #"{"name":"c\#($0)","type":"Row","parent":"top","values":{"i":\#($0)},"encryptedValues":{}}"# }
            text.append(#"{"name":"top","type":"Row","parent":"mid","values":{},"encryptedValues":{}}"#)
            text.append(#"{"name":"mid","type":"Row","values":{},"encryptedValues":{}}"#)
            let checked = try await RecordImport(jsonLines: Self.lines(text), into: zone, of: f.db)
            #expect(checked.records.prefix(2).map(\.name) == ["mid", "top"])
            #expect(try await checked.save(to: f.db) == RecordImport.Summary(records: 502, batches: 2))
            #expect(try await f.db.record(named: "c499", in: zone).parent == "top")
            for (count, batches) in [(400, 1), (401, 2)] {
                let other = try await f.db.createZone(named: "B\(count)")
                let text = (0..<count).map { #"{"name":"r\#($0)","type":"Row","values":{"i":\#($0)},"encryptedValues":{"s":"x"}}"# }
                var seen = [Int]()
                let summary = try await f.db.importRecords(jsonLines: Self.lines(text), into: other) { saved, _ in seen.append(saved) }
                #expect(summary.batches == batches && summary.records == count && seen.last == count)
            }
        }
    }

    @Test("export → import into another zone gives the same records, dates and doubles to the bit", arguments: TestBackend.all)
    func roundTrip(_ backend: TestBackend) async throws {
        try await withStore(backend) { f in
            let source = try await f.db.createZone(named: "Src"), target = try await f.db.createZone(named: "Dst")
            var rng = SystemRandomNumberGenerator()
            var saved = [Record]()
            for i in 0..<450 {
                var r = Record(type: "Note", name: "n\(i)", zone: source, parent: i > 0 ? "n0" : nil)
                r.values = ["t": .string("line \(i)\n\"quoted\" é"), "d": .double(Double.random(in: -1e9...1e9, using: &rng)),
                            "when": .date(Date(timeIntervalSinceReferenceDate: Double.random(in: -4e10...4e10, using: &rng))),
                            "tags": .list(i % 2 == 0 ? [] : ["a", "b"]), "blob": .bytes((0..<(i % 7)).map { UInt8($0) })]
                r.encryptedValues = ["secret": .string("s\(i)"), "n": .int(Int64.random(in: .min ... .max, using: &rng))]
                saved.append(r)
            }
            try await f.db.defineField("tags", of: "Note", type: .list(.string), encrypted: false, in: source)
            _ = try await f.db.modify(saving: Array(saved[0..<400]), in: source)
            _ = try await f.db.modify(saving: Array(saved[400...]), in: source)
            var out = Data()
            var pages = 0
            #expect(try await f.db.exportRecords(in: source, pageSize: 100) { out.append($0); pages += 1 } == 450)
            #expect(pages == 5)
            try await f.db.importRecords(jsonLines: out, into: target)
            for r in saved {
                let copy = try await f.db.record(named: r.name, in: target)
                #expect(copy.values == r.values && copy.encryptedValues == r.encryptedValues && copy.parent == r.parent,
                        "\(r.name): \(copy.values.filter { r.values[$0.key] != $0.value }) != \(r.values.filter { copy.values[$0.key] != $0.value }); \(copy.encryptedValues.filter { r.encryptedValues[$0.key] != $0.value })")
            }
        }
    }
}

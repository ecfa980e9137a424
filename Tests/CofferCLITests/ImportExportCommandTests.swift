import Foundation
import Testing

/// `coffer record import|export`: JSON lines of the `record get` shape, atomic batches, types.
@Suite("coffer record import/export")
struct ImportExportCommandTests {
    let team: Team

    init() throws {
        team = try Team([.alice])
        try team.createZone(.alice, "Src")
        try team.createZone(.alice, "Dst")
    }

    func export(_ zone: String, sourceLocation: SourceLocation = #_sourceLocation) throws -> [[String: Any]] {
        let r = try team.ok(.alice, ["record", "export", zone], sourceLocation: sourceLocation)
        return try jsonLines(r, sourceLocation: sourceLocation)
    }

    func line(_ object: [String: Any]) throws -> String {
        String(decoding: try JSONSerialization.data(withJSONObject: object, options: [.sortedKeys]), as: UTF8.self)
    }

    func writeLines(_ name: String, _ lines: [String]) throws -> String {
        try team.sandbox.write(name, lines.joined(separator: "\n") + "\n")
    }

    /// The parts of a record that an export → import must keep.
    func content(_ record: [String: Any]) -> JSON {
        JSON(["name": record["name"] ?? NSNull(), "type": record["type"] ?? NSNull(), "parent": record["parent"] ?? NSNull(),
              "values": record["values"] ?? NSNull(), "encryptedValues": record["encryptedValues"] ?? NSNull(),
              "types": record["types"] ?? NSNull()] as [String: Any])
    }

    /// Records with every kind of value, plain and secret, with a parent.
    func fillSource() throws {
        let blob = try team.sandbox.write("blob.bin", randomBytes(200))
        try team.put(.alice, "Src", "n1", type: "Note", set: [
            "title=First, with a comma", "count:int=42", "ratio:double=2.5", "whole:double=3", "done:bool=true",
            "when:date=2026-11-22T10:30:00.250Z", "day:date=2026-11-22", "blob:bytes=@\(blob)", "link:ref=n2",
            "nums:[int]=1,2,3", "tags:[string]=a\\,b,c", "dates:[date]=2026-01-01,2026-02-03T04:05:06Z", "refs:[ref]=n2,n3",
        ], secret: ["pin=1234", "born:date=1990-04-05T06:07:08Z", "key:bytes=AAECAwQ=", "backup:ref=n3", "codes:[int]=7,8"])
        try team.put(.alice, "Src", "n2", type: "Note", set: ["title=Second", "count:int=-1", "done:bool=false"],
                     secret: ["pin=5678"], extra: ["--parent", "n1"])
        try team.put(.alice, "Src", "n3", type: "Task", set: ["title=Third"], extra: ["--parent", "n2"])
    }

    // MARK: - export

    @Test("record export prints every record as a JSON line of the record get shape, decrypted")
    func exportEveryRecord() throws {
        try fillSource()
        let lines = try export("Src")
        #expect(recordNames(lines).sorted() == ["n1", "n2", "n3"])
        for record in lines {
            expectRecordShape(record)
            let name = try #require(record["name"] as? String)
            let got = try team.get(.alice, "Src", name)
            for key in recordKeys.union(["parent"]) {
                #expect(JSON(record[key]) == JSON(got[key]), "\(name).\(key): export \(JSON(record[key])), get \(JSON(got[key]))")
            }
        }
        let n1 = try #require(lines.first { $0["name"] as? String == "n1" })
        #expect(json(n1["encryptedValues"] as? [String: Any] ?? [:], "pin") == .string("1234"))
        let n2 = try #require(lines.first { $0["name"] as? String == "n2" })
        #expect(json(n2["encryptedValues"] as? [String: Any] ?? [:], "pin") == .string("5678"))
        #expect(n2["parent"] as? String == "n1")
    }

    @Test("record export of an empty zone prints nothing; of a missing zone fails with 66")
    func exportEmptyAndMissing() throws {
        let r = try team.ok(.alice, ["record", "export", "Dst"])
        #expect(r.stdout.isEmpty)
        try team.fails(.alice, ["record", "export", "Nowhere"], 66)
    }

    @Test("export → import into another zone gives identical record get values (dates, bytes, refs, lists, secrets)")
    func roundTrip() throws {
        try fillSource()
        let r = try team.ok(.alice, ["record", "export", "Src"])
        let file = try team.sandbox.write("backup.jsonl", r.stdout)
        try team.ok(.alice, ["record", "import", "Dst", file])
        for name in ["n1", "n2", "n3"] {
            let original = try team.get(.alice, "Src", name)
            let copy = try team.get(.alice, "Dst", name)
            #expect(content(copy) == content(original), "\(name) differs after export → import\nsrc: \(content(original))\ndst: \(content(copy))")
            #expect(copy["zone"] as? String == "Dst")
        }
        // The import fixed the field kinds in the new zone as in the old: a secret stays secret.
        try team.fails(.alice, team.putArguments("Dst", "n9", type: "Note", set: ["pin=plain"]), 65)
        try team.fails(.alice, team.putArguments("Dst", "n9", type: "Note", set: ["when=not a date"]), 65)
    }

    @Test("import through stdin ('-')")
    func importFromStdin() throws {
        let text = try line(["name": "s1", "type": "Note", "values": ["a": 1], "encryptedValues": ["b": "secret"]]) + "\n"
        try team.ok(.alice, ["record", "import", "Dst", "-"], stdin: .text(text))
        let got = try team.get(.alice, "Dst", "s1")
        #expect(json(got["values"] as? [String: Any] ?? [:], "a") == .int(1))
        #expect(json(got["encryptedValues"] as? [String: Any] ?? [:], "b") == .string("secret"))
    }

    // MARK: - import types

    @Test("import maps JSON numbers, strings, booleans and lists to int, double, string, bool and list")
    func importPlainJSONTypes() throws {
        let file = try writeLines("plain.jsonl", [
            try line(["name": "p1", "type": "Row",
                      "values": ["i": 7, "d": 2.5, "s": "text", "b": true, "l": [1, 2], "ls": ["x", "y"]],
                      "encryptedValues": ["si": 9, "ss": "hidden"]]),
        ])
        try team.ok(.alice, ["record", "import", "Dst", file])
        let got = try team.get(.alice, "Dst", "p1")
        let types = got["types"] as? [String: Any] ?? [:]
        let expected: [String: String] = ["i": "int", "d": "double", "s": "string", "b": "bool", "l": "[int]", "ls": "[string]",
                                          "si": "int", "ss": "string"]
        for (field, type) in expected { #expect(types[field] as? String == type, "\(field): \(types[field] ?? "nil")") }
        #expect(JSON(got["values"]) == .object(["i": .int(7), "d": .double(2.5), "s": .string("text"), "b": .bool(true),
                                                "l": .array([.int(1), .int(2)]), "ls": .array([.string("x"), .string("y")])]))
        #expect(JSON(got["encryptedValues"]) == .object(["si": .int(9), "ss": .string("hidden")]))
    }

    @Test("import takes date, bytes and ref from 'types'")
    func importDeclaredTypes() throws {
        let file = try writeLines("typed.jsonl", [
            try line(["name": "t1", "type": "Row",
                      "values": ["when": "2026-03-04T05:06:07Z", "blob": "AAEC", "link": "t0"],
                      "encryptedValues": ["sealed": "2027-01-01"],
                      "types": ["when": "date", "blob": "bytes", "link": "ref", "sealed": "date"]]),
        ])
        try team.ok(.alice, ["record", "import", "Dst", file])
        let got = try team.get(.alice, "Dst", "t1")
        let types = got["types"] as? [String: Any] ?? [:]
        #expect(types["when"] as? String == "date")
        #expect(types["blob"] as? String == "bytes")
        #expect(types["link"] as? String == "ref")
        #expect(types["sealed"] as? String == "date")
        let values = got["values"] as? [String: Any] ?? [:]
        #expect(isoDate(values["when"]) == utcDate(2026, 3, 4, 5, 6, 7))
        #expect(json(values, "blob") == .string("AAEC"))
        #expect(json(values, "link") == .string("t0"))
        #expect(isoDate((got["encryptedValues"] as? [String: Any])?["sealed"]) == utcDate(2027, 1, 1))
    }

    @Test("import takes date, bytes and ref from the zone's schema when 'types' is absent")
    func importSchemaTypes() throws {
        try team.put(.alice, "Dst", "first", type: "Row", set: ["when:date=2026-01-01", "blob:bytes=AA==", "link:ref=x"],
                     secret: ["due:date=2026-01-02"])
        let file = try writeLines("schema.jsonl", [
            try line(["name": "s1", "type": "Row",
                      "values": ["when": "2026-03-04T05:06:07Z", "blob": "AAEC", "link": "first"],
                      "encryptedValues": ["due": "2026-05-06T00:00:00Z"]]),
        ])
        try team.ok(.alice, ["record", "import", "Dst", file])
        let got = try team.get(.alice, "Dst", "s1")
        let types = got["types"] as? [String: Any] ?? [:]
        #expect(types["when"] as? String == "date")
        #expect(types["blob"] as? String == "bytes")
        #expect(types["link"] as? String == "ref")
        #expect(types["due"] as? String == "date")
        #expect(isoDate((got["values"] as? [String: Any])?["when"]) == utcDate(2026, 3, 4, 5, 6, 7))
        #expect(isoDate((got["encryptedValues"] as? [String: Any])?["due"]) == utcDate(2026, 5, 6))
    }

    // MARK: - batches

    @Test("import saves every record in atomic batches of up to 400 (400 → 1 batch, 401 → 2)", arguments: [(400, 1), (401, 2)])
    func batches(count: Int, batches: Int) throws {
        var lines = [String]()
        for i in 0..<count {
            lines.append(try line(["name": String(format: "i%03d", i), "type": "Row", "values": ["n": i, "label": "row \(i)"],
                                   "encryptedValues": ["s": "secret \(i)"]]))
        }
        let file = try writeLines("many.jsonl", lines)
        let result = try team.json(.alice, ["record", "import", "Dst", file])
        #expect(json(result, "imported") == .int(Int64(count)), "\(result)")
        #expect(json(result, "batches") == .int(Int64(batches)), "\(result)")
        let exported = try export("Dst")
        #expect(exported.count == count)
        #expect(Set(recordNames(exported)).count == count)
        let last = try team.get(.alice, "Dst", String(format: "i%03d", count - 1))
        #expect(json(last["values"] as? [String: Any] ?? [:], "n") == .int(Int64(count - 1)))
        #expect(json(last["encryptedValues"] as? [String: Any] ?? [:], "s") == .string("secret \(count - 1)"))
    }

    @Test("import replaces records that exist")
    func importReplaces() throws {
        try team.put(.alice, "Dst", "r1", type: "Row", set: ["a=old", "b=old"])
        let file = try writeLines("replace.jsonl", [try line(["name": "r1", "type": "Row", "values": ["a": "new"], "encryptedValues": [:]])])
        let result = try team.ok(.alice, ["record", "import", "Dst", file])
        #expect(result.out == "Imported 1 record into Dst in 1 atomic batch.\n")
        #expect(JSON(try team.get(.alice, "Dst", "r1")["values"]) == .object(["a": .string("new")]))
    }

    // MARK: - malformed files

    static let good1 = #"{"name":"g1","type":"Row","values":{"n":1},"encryptedValues":{}}"#
    static let good2 = #"{"name":"g2","type":"Row","values":{"n":2},"encryptedValues":{"s":"x"}}"#

    @Test("a malformed line fails with 65, names the line, and imports nothing", arguments: [
        "{broken",
        #"{"name":"b1","type":"Row","values":{"x":1e400},"encryptedValues":{}}"#,
        "[1, 2, 3]",
        #""just a string""#,
        #"{"type":"Row","values":{},"encryptedValues":{}}"#,
        #"{"name":"b1","values":{},"encryptedValues":{}}"#,
        #"{"name":"b1","type":"Row","encryptedValues":{}}"#,
        #"{"name":"b1","type":"Row","values":{}}"#,
        #"{"name":"b1","type":"Row","values":[1],"encryptedValues":{}}"#,
        #"{"name":"b1","type":"Row","values":{"x":null},"encryptedValues":{}}"#,
        #"{"name":"b1","type":"Row","values":{"x":{"y":1}},"encryptedValues":{}}"#,
        #"{"name":"b1","type":"Row","values":{"d":"tomorrow"},"encryptedValues":{},"types":{"d":"date"}}"#,
        #"{"name":"b1","type":"Row","values":{"b":"!!!"},"encryptedValues":{},"types":{"b":"bytes"}}"#,
        #"{"name":"b1","type":"Row","values":{"x":1},"encryptedValues":{},"types":{"x":"nonsense"}}"#,
        #"{"name":"b1","type":"Row","values":{"n":"one"},"encryptedValues":{}}"#,
        #"{"name":"b1","type":"Row","values":{},"encryptedValues":{"n":5}}"#,
        #"{"name":"g1","type":"Row","values":{"n":3},"encryptedValues":{}}"#,
        #"{"name":"","type":"Row","values":{},"encryptedValues":{}}"#,
    ])
    func malformedLine(bad: String) throws {
        let file = try writeLines("bad.jsonl", [Self.good1, Self.good2, bad])
        try team.fails(.alice, ["record", "import", "Dst", file], 65, mentioning: "line 3")
        try team.fails(.alice, ["record", "get", "Dst", "g1"], 66)
        #expect(try export("Dst").isEmpty, "records were imported from a file with a malformed line")
    }

    @Test("a line that conflicts with the field types of an earlier batch still imports nothing, and names the line")
    func conflictAfterFirstBatch() throws {
        var lines = [String]()
        for i in 0..<400 {
            lines.append(try line(["name": String(format: "k%03d", i), "type": "Row", "values": ["n": i], "encryptedValues": [:]]))
        }
        lines.append(try line(["name": "k400", "type": "Row", "values": ["n": "not a number"], "encryptedValues": [:]]))
        let file = try writeLines("conflict.jsonl", lines)
        try team.fails(.alice, ["record", "import", "Dst", file], 65, mentioning: "line 401")
        #expect(try export("Dst").count == 0, "the whole file is checked before anything is saved")
    }

    @Test("a line whose record exists as another type fails in the check, names the line, and imports nothing")
    func existingRecordOfAnotherType() throws {
        try team.put(.alice, "Dst", "r0450", type: "Other", set: ["x:int=1"])
        let lines = try (1...1000).map { try line(["name": String(format: "r%04d", $0), "type": "Item", "values": ["i": $0], "encryptedValues": [:]]) }
        let file = try writeLines("types.jsonl", lines)
        try team.fails(.alice, ["record", "import", "Dst", file], 65, mentioning: "line 450")
        #expect(try export("Dst").map { $0["name"] as? String } == ["r0450"], "the whole file is checked before anything is saved")
    }

    @Test("import saves parents before their children across batches; a missing parent or a cycle in the file imports nothing")
    func importParents() throws {
        // 500 children first, their parent last: in file order the parent would be in the second batch.
        var lines = try (0..<500).map { try line(["name": String(format: "c%03d", $0), "type": "Row", "parent": "top", "values": ["i": $0], "encryptedValues": [:]]) }
        lines.append(try line(["name": "top", "type": "Row", "parent": "mid", "values": [:], "encryptedValues": [:]]))
        lines.append(try line(["name": "mid", "type": "Row", "values": [:], "encryptedValues": [:]]))
        try team.ok(.alice, ["record", "import", "Dst", try writeLines("tree.jsonl", lines)])
        #expect(try team.get(.alice, "Dst", "c499")["parent"] as? String == "top")
        #expect(try team.get(.alice, "Dst", "top")["parent"] as? String == "mid")

        let orphan = try writeLines("orphan.jsonl", [Self.good1, try line(["name": "o", "type": "Row", "parent": "nowhere", "values": [:], "encryptedValues": [:]])])
        try team.fails(.alice, ["record", "import", "Src", orphan], 66, mentioning: "line 2")
        let cycle = try writeLines("cycle.jsonl", [Self.good1, try line(["name": "x", "type": "Row", "parent": "y", "values": [:], "encryptedValues": [:]]),
                                                   try line(["name": "y", "type": "Row", "parent": "x", "values": [:], "encryptedValues": [:]])])
        try team.fails(.alice, ["record", "import", "Src", cycle], 65, mentioning: "ancestor")
        #expect(try export("Src").isEmpty)
    }

    @Test("dates print with the digits they need and survive export → import to the bit (.002 printed as .001 before)")
    func datePrecision() throws {
        let dates = ["2026-11-22T10:30:00.002Z": "2026-11-22T10:30:00.002Z", "2026-11-22T10:30:00.000123Z": "2026-11-22T10:30:00.000123Z",
                     "2026-11-22T10:30:00.999999Z": "2026-11-22T10:30:00.999999Z", "2026-11-22T10:30:00Z": "2026-11-22T10:30:00.000Z",
                     "1999-12-31T23:59:59.9999999Z": "1999-12-31T23:59:59.9999999Z", "1500-02-29": "1500-02-29T00:00:00.000Z"]
        for (i, (given, printed)) in dates.sorted(by: { $0.key < $1.key }).enumerated() {
            let saved = try team.put(.alice, "Src", "d\(i)", type: "When", set: ["at:date=\(given)"], secret: ["also:date=\(given)"])
            #expect((saved["values"] as? [String: Any])?["at"] as? String == printed, "\(given)")
            let got = try team.get(.alice, "Src", "d\(i)")
            #expect((got["encryptedValues"] as? [String: Any])?["also"] as? String == printed, "\(given)")
        }
        let exported = try team.ok(.alice, ["record", "export", "Src"]).out
        try team.ok(.alice, ["record", "import", "Dst", try team.sandbox.write("dates.jsonl", exported)])
        #expect(try export("Dst").map(content) == export("Src").map(content))
        // Read back as the same Date: the imported records print the same text.
        #expect(try export("Dst").compactMap { ($0["values"] as? [String: Any])?["at"] as? String }.sorted()
                == dates.values.sorted())
    }

    @Test("import of a missing file or into a missing zone fails with 66")
    func importNotFound() throws {
        let missing = team.sandbox.path("missing.jsonl")
        try team.fails(.alice, ["record", "import", "Dst", missing], 66)
        let file = try writeLines("ok.jsonl", [Self.good1])
        try team.fails(.alice, ["record", "import", "Nowhere", file], 66)
    }

    @Test("an import line over 1 MiB fails with 65 and imports nothing")
    func importOversized() throws {
        let big = randomBytes(1_100_000).base64EncodedString()
        let file = try writeLines("big.jsonl", [Self.good1, try line(["name": "big", "type": "Blob", "values": ["data": big],
                                                                       "encryptedValues": [:], "types": ["data": "bytes"]])])
        try team.fails(.alice, ["record", "import", "Dst", file], 65)
        #expect(try export("Dst").isEmpty)
    }
}

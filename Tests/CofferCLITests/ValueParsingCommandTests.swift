import Foundation
import Testing

/// How values given on the command line (`--set`, `--secret`, `--where`) and in `record import`
/// files are read: integers stay in the 64-bit range, dates are whole and valid ISO 8601, an
/// encrypted field's value is never quoted in an error, and every error is one line.
@Suite("coffer value parsing")
struct ValueParsingCommandTests {
    let team: Team

    init() throws {
        team = try Team([.alice])
        try team.createZone(.alice, "Notes")
    }

    func values(_ record: [String: Any]) -> [String: Any] { record["values"] as? [String: Any] ?? [:] }
    func secrets(_ record: [String: Any]) -> [String: Any] { record["encryptedValues"] as? [String: Any] ?? [:] }
    func types(_ record: [String: Any]) -> [String: Any] { record["types"] as? [String: Any] ?? [:] }

    /// Writes `lines` as a JSON lines file and runs `record import Notes FILE`.
    func importLines(_ lines: [String], sourceLocation: SourceLocation = #_sourceLocation) throws -> CofferResult {
        let file = try team.sandbox.write("import-\(UUID().uuidString).jsonl", lines.joined(separator: "\n") + "\n")
        return try team.run(.alice, ["record", "import", "Notes", file], sourceLocation: sourceLocation)
    }

    /// Nothing was saved under `name`.
    func expectMissing(_ name: String, sourceLocation: SourceLocation = #_sourceLocation) throws {
        let r = try team.run(.alice, ["record", "get", "Notes", name], sourceLocation: sourceLocation)
        #expect(r.status == 66, "record '\(name)' was saved\n\(r)", sourceLocation: sourceLocation)
    }

    /// `text` appears nowhere in what the run printed.
    func expectNotShown(_ text: String, in r: CofferResult, sourceLocation: SourceLocation = #_sourceLocation) {
        #expect(!r.err.contains(text) && !r.out.contains(text), "the secret '\(text)' was printed\n\(r)", sourceLocation: sourceLocation)
    }

    // MARK: - 64-bit integers in import

    @Test("record import refuses a JSON integer outside the 64-bit range instead of wrapping it",
          arguments: ["9223372036854775808", "18446744073709551615", "18446744073709551616", "-9223372036854775809",
                      "123456789012345678901234567890"])
    func importIntegerOutOfRange(_ number: String) throws {
        let r = try importLines([#"{"name":"a","type":"N","values":{"u":\#(number)},"encryptedValues":{}}"#])
        expectFailure(r, 65, mentioning: "line 1: field 'u': \(number) is outside the 64-bit integer range")
        try expectMissing("a")
    }

    @Test("record import refuses an out-of-range integer in a list and in a field typed int")
    func importIntegerOutOfRangeInListAndTyped() throws {
        let list = try importLines([#"{"name":"a","type":"N","values":{"l":[1,18446744073709551615]},"encryptedValues":{}}"#])
        expectFailure(list, 65, mentioning: "outside the 64-bit integer range")
        let typed = try importLines([#"{"name":"a","type":"N","values":{"u":9223372036854775808},"encryptedValues":{},"types":{"u":"int"}}"#])
        expectFailure(typed, 65, mentioning: "outside the 64-bit integer range")
        try expectMissing("a")
    }

    @Test("record import keeps the 64-bit extremes as exact ints")
    func importIntegerExtremes() throws {
        try team.ok(.alice, ["record", "import", "Notes", try team.sandbox.write("x.jsonl",
            #"{"name":"a","type":"N","values":{"max":9223372036854775807,"min":-9223372036854775808,"near":-9223372036854775807},"encryptedValues":{}}"# + "\n")])
        let got = try team.get(.alice, "Notes", "a")
        #expect(json(values(got), "max") == .int(Int64.max))
        #expect(json(values(got), "min") == .int(Int64.min))
        #expect(json(values(got), "near") == .int(Int64.min + 1))
        #expect(JSON(types(got)) == JSON(["max": "int", "min": "int", "near": "int"]))
    }

    // MARK: - lists of numbers in import

    @Test("record import reads a list of numbers that are not all integers as a [double] list")
    func importMixedNumberList() throws {
        try team.ok(.alice, ["record", "import", "Notes", try team.sandbox.write("x.jsonl", """
            {"name":"a","type":"N","values":{"l":[1,2.5],"ints":[1,2]},"encryptedValues":{"s":[3,-0.5,4]}}

            """)])
        let got = try team.get(.alice, "Notes", "a")
        #expect(json(types(got), "l") == .string("[double]"))
        #expect(json(types(got), "ints") == .string("[int]"))
        #expect(json(types(got), "s") == .string("[double]"))
        #expect(json(values(got), "l") == .array([.double(1), .double(2.5)]))
        #expect(json(values(got), "ints") == .array([.int(1), .int(2)]))
        #expect(json(secrets(got), "s") == .array([.double(3), .double(-0.5), .double(4)]))
    }

    @Test("record import keeps a declared [int] strict: a fraction in it is refused")
    func importDeclaredIntListStaysStrict() throws {
        let r = try importLines([#"{"name":"a","type":"N","values":{"l":[1,2.5]},"encryptedValues":{},"types":{"l":"[int]"}}"#])
        expectFailure(r, 65, mentioning: "field 'l'")
        try expectMissing("a")
    }

    // MARK: - dates

    @Test("a date is a whole, valid ISO 8601 date or date and time with a time zone",
          arguments: ["2026-11-22T10:30:00", "2026-11-22 10:30:00Z", "2026-11-22T10:30Z", "2026-11-22xyz", "2026-11-22T10:30:00Zjunk",
                      "2026-02-30", "2025-02-29", "2026-13-01", "2026-00-10", "2026-11-00", "2026-11-22T25:99:00Z", "2026-11-22T24:00:00Z",
                      "2026-11-22T10:60:00Z", "2026-11-22T10:30:60Z", "2026-11-22T10:30:00+25:00", "2026-11-22T10:30:00+0200",
                      "2026-11-22T10:30:00.Z", "2100-02-29", "1582-10-10", "26-11-22", "2026-1-22", "0000-01-01", " 2026-11-22", "2026-11-22T", ""])
    func invalidDates(_ text: String) throws {
        try team.fails(.alice, team.putArguments("Notes", "d", type: "Event", set: ["when:date=\(text)"]), 65,
                       mentioning: "is not an ISO 8601 date")
        try expectMissing("d")
    }

    @Test("the documented date forms keep working, with the time and zone they say")
    func validDates() throws {
        let put = try team.put(.alice, "Notes", "d", type: "Event", set: [
            "day:date=2026-11-22",
            "utc:date=2026-11-22T10:30:00Z",
            "fraction:date=2026-11-22T10:30:00.250Z",
            "offset:date=2026-11-22T12:30:00+02:00",
            "west:date=2026-11-22T05:00:00.5-05:30",
            "leap:date=2024-02-29",
            "last:date=2026-12-31T23:59:59Z",
            "old:date=1500-02-29",
        ])
        let v = values(put)
        #expect(isoDate(v["day"]) == utcDate(2026, 11, 22))
        #expect(isoDate(v["utc"]) == utcDate(2026, 11, 22, 10, 30))
        #expect(isoDate(v["fraction"]) == utcDate(2026, 11, 22, 10, 30, milliseconds: 250))
        #expect(isoDate(v["offset"]) == utcDate(2026, 11, 22, 10, 30))
        #expect(isoDate(v["west"]) == utcDate(2026, 11, 22, 10, 30, milliseconds: 500))
        #expect(isoDate(v["leap"]) == utcDate(2024, 2, 29))
        #expect(isoDate(v["last"]) == utcDate(2026, 12, 31, 23, 59, 59))
        // Before 1582-10-15 dates are printed in the Julian calendar; a day read is the day printed.
        #expect(json(v, "old") == .string("1500-02-29T00:00:00.000Z"))
    }

    @Test("--where date values are as strict as saved ones")
    func whereDatesAreStrict() throws {
        try team.put(.alice, "Notes", "d", type: "Event", set: ["when:date=2026-11-22T10:30:00Z"])
        for bad in ["2026-11-22T10:30:00", "2026-11-22 10:30:00Z", "2026-02-30", "2026-11-22T25:99:00Z"] {
            try team.fails(.alice, ["record", "query", "Notes", "--type", "Event", "--where", "when < \(bad)"], 65,
                           mentioning: "is not an ISO 8601 date")
        }
        let before = try team.json(.alice, ["record", "query", "Notes", "--type", "Event", "--where", "when < 2026-11-22T10:30:01Z"])
        #expect(recordNames(objects(before, "records")) == ["d"])
        let after = try team.json(.alice, ["record", "query", "Notes", "--type", "Event", "--where", "when > 2026-11-22T12:30:00+02:00"])
        #expect(recordNames(objects(after, "records")) == [])
    }

    @Test("record import refuses a date field that is not a whole, valid ISO 8601 date")
    func importDatesAreStrict() throws {
        for bad in ["2026-11-22T10:30:00", "2026-11-22xyz", "2026-02-30"] {
            let r = try importLines([#"{"name":"a","type":"N","values":{"d":"\#(bad)"},"encryptedValues":{},"types":{"d":"date"}}"#])
            expectFailure(r, 65, mentioning: "line 1: field 'd': '\(bad)' is not an ISO 8601 date")
        }
        try expectMissing("a")
        try team.ok(.alice, ["record", "import", "Notes", try team.sandbox.write("x.jsonl",
            #"{"name":"a","type":"N","values":{"d":"2026-11-22T12:30:00+02:00"},"encryptedValues":{},"types":{"d":"date"}}"# + "\n")])
        #expect(isoDate(values(try team.get(.alice, "Notes", "a"))["d"]) == utcDate(2026, 11, 22, 10, 30))
    }

    // MARK: - secrets in errors

    @Test("an error about a --secret value never shows the value",
          arguments: ["pin:int=MyS3cretPassw0rd", "pin:double=MyS3cretPassw0rd", "pin:bool=MyS3cretPassw0rd",
                      "pin:date=MyS3cretPassw0rd", "pin:bytes=MyS3cretPassw0rd!", "pin:ref=_MyS3cretPassw0rd",
                      "pin:[int]=1,MyS3cretPassw0rd", "MyS3cretPassw0rd", "=MyS3cretPassw0rd", "pin:bogus=MyS3cretPassw0rd"])
    func secretValueNotInError(_ assignment: String) throws {
        for arguments in [["--secret", assignment], ["--secret=\(assignment)"]] {
            let r = try team.run(.alice, ["record", "put", "Notes", "s1", "--type", "Note"] + arguments)
            expectFailure(r, 65)
            expectNotShown("MyS3cretPassw0rd", in: r)
        }
        try expectMissing("s1")
    }

    @Test("an error about a --secret value names the field and says why the value is not shown")
    func secretErrorExplains() throws {
        let r = try team.fails(.alice, team.putArguments("Notes", "s1", type: "Note", secret: ["pin:int=MyS3cretPassw0rd"]), 65,
                               mentioning: "field 'pin' (encrypted)")
        #expect(r.err.contains("not an int") && r.err.contains("not shown because the field is encrypted"), "\(r)")
        expectNotShown("MyS3cretPassw0rd", in: r)
    }

    @Test("an error about a plain value still quotes it")
    func plainErrorQuotes() throws {
        try team.fails(.alice, team.putArguments("Notes", "p1", type: "Note", set: ["pin:int=NotANumber"]), 65,
                       mentioning: "field 'pin': 'NotANumber' is not an int")
    }

    @Test("an error about an encryptedValues value in an import file never shows the value",
          arguments: [#""encryptedValues":{"d":"hunter2-MyS3cret"},"types":{"d":"date"}"#,
                      #""encryptedValues":{"r":"_hunter2-MyS3cret"},"types":{"r":"ref"}"#,
                      #""encryptedValues":{"d":["2026-11-22","hunter2-MyS3cret"]},"types":{"d":"[date]"}"#])
    func importSecretValueNotInError(_ fields: String) throws {
        let r = try importLines([#"{"name":"e","type":"N","values":{},\#(fields)}"#])
        expectFailure(r, 65, mentioning: "(encrypted)")
        expectNotShown("hunter2-MyS3cret", in: r)
        try expectMissing("e")
    }

    @Test("an encrypted number that does not fit is refused without showing it")
    func importSecretNumberNotInError() throws {
        for (number, types) in [("18446744073709551615", ""), ("4711.5", #","types":{"n":"int"}"#)] {
            let r = try importLines([#"{"name":"e","type":"N","values":{},"encryptedValues":{"n":\#(number)}\#(types)}"#])
            expectFailure(r, 65, mentioning: "field 'n' (encrypted)")
            expectNotShown(number, in: r)
        }
        try expectMissing("e")
    }

    // MARK: - one line

    @Test("an error stays one line when a value holds a newline or another control character",
          arguments: [["record", "put", "Notes", "r", "--type", "T", "--set", "count:int=1\n2"],
                      ["record", "put", "Notes", "r", "--type", "T", "--set", "a:bogus\ntype=1"],
                      ["record", "put", "Notes", "r", "--type", "T", "--set", "when:date=2026-11-22\r\n10:30"],
                      ["record", "put", "Notes", "r", "--type", "T", "--set", "count:int=\u{1b}[31mred\tx\u{7f}"],
                      ["record", "put", "Notes", "r\nx", "--type", "T"],
                      ["record", "query", "Notes", "--type", "T", "--where", "name\n= x"],
                      ["record", "get", "Notes", "line\u{2028}separated"]])
    func errorsAreOneLine(_ arguments: [String]) throws {
        let r = try team.run(.alice, arguments)
        #expect(r.status != 0, "\(r)")
        #expect(isOneErrorLine(r.err), "expected exactly one 'error: …' line on stderr\n\(r)")
        let controls = r.err.dropLast().unicodeScalars.filter { $0.value < 0x20 || (0x7f...0x9f).contains($0.value) || $0.value == 0x2028 }
        #expect(controls.isEmpty, "the error line holds control characters\n\(r)")
    }

    @Test("a newline in a value is shown escaped in the error")
    func newlineShownEscaped() throws {
        try team.fails(.alice, team.putArguments("Notes", "r", type: "T", set: ["count:int=1\n2"]), 65,
                       mentioning: #"field 'count': '1\n2' is not an int"#)
    }
}

extension ValueParsingCommandTests {
    @Test("bytes take canonical base64 only: '====' and 'AA=A' were saved as made-up bytes", arguments: ["====", "AA=A", "AAA", "AB=="])
    func strictBase64(_ text: String) throws {
        try team.fails(.alice, team.putArguments("Notes", "b1", type: "Blob", set: ["b:bytes=\(text)"]), 65, mentioning: "base64")
        try team.fails(.alice, team.putArguments("Notes", "b1", type: "Blob", secret: ["c:bytes=\(text)"]), 65)
        let line = #"{"name":"b2","type":"Blob","values":{"b":"\#(text)"},"encryptedValues":{},"types":{"b":"bytes"}}"#
        try team.fails(.alice, ["record", "import", "Notes", try team.sandbox.write("b.jsonl", line + "\n")], 65, mentioning: "base64")
        let ok = try team.put(.alice, "Notes", "b3", type: "Blob", set: ["b:bytes=AAE="])
        #expect((ok["values"] as? [String: Any])?["b"] as? String == "AAE=")
    }

    @Test("an import line with a key twice in one object is refused (the last one won)")
    func importDuplicateKey() throws {
        let line = #"{"name":"dk1","type":"Row","values":{},"encryptedValues":{},"name":"dk2"}"#
        try team.fails(.alice, ["record", "import", "Notes", try team.sandbox.write("d.jsonl", line + "\n")], 65, mentioning: "twice")
        try team.fails(.alice, ["record", "get", "Notes", "dk2"], 66)
    }

    @Test("an argument that is not UTF-8 is refused (64), not saved with U+FFFD in it")
    func invalidUTF8Argument() throws {
        let coffer = try CofferProcess.executableURL().path
        let script = #"exec "$0" record put Notes u8 --type U8 --set "s=$(printf 'a\377b')" --vault "$1" --store "$2""#
        let r = try team.sandbox.shell(script, [coffer, team.vault(.alice), team.store], env: withPassphrase)
        expectError(r, 64)
        #expect(r.err.contains("UTF-8"), "\(r)")
        try team.fails(.alice, ["record", "get", "Notes", "u8"], 66)
    }

    @Test("an empty typed list shows its field's type in record get's text form")
    func emptyListType() throws {
        try team.put(.alice, "Notes", "el", type: "El", set: ["d:[double]="])
        #expect(try team.ok(.alice, ["record", "get", "Notes", "el"]).out.contains("  d ([double]) = []"))
    }
}

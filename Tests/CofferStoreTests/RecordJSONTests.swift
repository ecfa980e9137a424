import CofferStoreTestSupport
import Foundation
import Testing
@testable import CofferStore

/// The `record get` JSON shape as the library writes it, and its dates.
@Suite("RecordJSON")
struct RecordJSONTests {
    static let zone = ZoneID(name: "Notes", ownerID: "alice-id")

    static func sample() -> Record {
        var r = Record(type: "Note", name: "n1", zone: zone, parent: "top")
        r.values = ["title": "Hello \"world\"\n\u{1}/é", "count": 42, "ratio": 2.5, "whole": .double(3), "tiny": .double(1e-7),
                    "big": .double(1e300), "done": true, "when": .date(ISODate.parse("2023-11-14T22:13:20.002Z")!),
                    "blob": .bytes([0, 1, 2, 255]), "link": .reference("n2"), "nums": .list([1, 2]), "none": .list([])]
        r.encryptedValues = ["pin": "1234", "Zeta": .double(-0.5)]
        return r
    }

    @Test("encode writes the record get shape: every key, sorted by bytes, values in their JSON form")
    func shape() throws {
        let schema = ["none": FieldSchema(type: .list(.date), encrypted: false)]
        let data = try RecordJSON.encode(Self.sample(), schema: schema, userID: "alice-id")
        let text = String(decoding: data, as: UTF8.self)
        #expect(!text.contains("\n"))
        let object = try #require(try JSONSerialization.jsonObject(with: data) as? [String: Any])
        #expect(Set(object.keys) == RecordJSON.knownKeys.subtracting(["pending", "refused", "refusedWhy"]))
        // The flags of a replica's offline change are of the shape too (an import reads past them).
        var flagged = JSONWriter()
        try RecordJSON.write(Self.sample(), schema: schema, userID: "alice-id", pending: true, refused: "why", into: &flagged)
        let flaggedObject = try #require(try JSONSerialization.jsonObject(with: Data(flagged.bytes)) as? [String: Any])
        #expect(Set(flaggedObject.keys) == RecordJSON.knownKeys)
        #expect(RecordJSON.knownKeys.allSatisfy(RecordJSON.isKnownKey))
        #expect(!["", "Name", "names", "encryptedFields", "transactionAuthor", "zone "].contains(where: RecordJSON.isKnownKey))
        #expect(object["zone"] as? String == "Notes")
        #expect(object["parent"] as? String == "top")
        #expect(object["changeTag"] is NSNull && object["created"] is NSNull && object["keyEpoch"] is NSNull)
        let values = try #require(object["values"] as? [String: Any])
        #expect(values["title"] as? String == "Hello \"world\"\n\u{1}/é")
        #expect(values["count"] as? Int == 42)
        #expect(values["ratio"] as? Double == 2.5)
        #expect(values["when"] as? String == "2023-11-14T22:13:20.002Z")
        #expect(values["blob"] as? String == "AAEC/w==")
        #expect(values["nums"] as? [Int] == [1, 2])
        let types = try #require(object["types"] as? [String: String])
        #expect(types["none"] == "[date]" && types["whole"] == "double" && types["link"] == "ref" && types["Zeta"] == "double")
        #expect((object["encryptedValues"] as? [String: Any])?["pin"] as? String == "1234")
        // Keys by bytes: "Zeta" before "pin"; escapes as RFC 8259 wants, '/' left alone.
        #expect(text.contains(#""encryptedValues":{"Zeta":-0.5,"pin":"1234"}"#))
        #expect(text.contains(#""title":"Hello \"world\"\n\u0001/é""#))
        #expect(text.contains(#""big":1e+300"#) && text.contains(#""tiny":1e-07"#) && text.contains(#""whole":3}"#))
        // Another user's zone is named with its owner.
        let theirs = try JSONSerialization.jsonObject(with: RecordJSON.encode(Self.sample(), userID: "bob-id")) as? [String: Any]
        #expect(theirs?["zone"] as? String == "Notes@alice-id")
    }

    @Test("the pretty layout is byte for byte JSONSerialization's, for the same object")
    func prettyMatchesFoundation() throws {
        var record = Self.sample()
        record.encryptedValues = ["pin": "1234", "zeta": .double(-0.5), "list": .list([.double(0.1), .double(123456.789)])]
        for r in [record, Record(type: "Empty", name: "e", zone: Self.zone)] {
            let mine = try RecordJSON.encode(r, pretty: true)
            let object = try JSONSerialization.jsonObject(with: mine)
            let foundation = try JSONSerialization.data(withJSONObject: object, options: [.sortedKeys, .prettyPrinted, .withoutEscapingSlashes])
            #expect(String(decoding: mine, as: UTF8.self) == String(decoding: foundation, as: UTF8.self))
        }
    }

    @Test("doubles are written so that they read back to the same bits")
    func doublesRoundTrip() throws {
        var rng = SystemRandomNumberGenerator()
        var values = [0.1, 1e-7, 5e-324, .greatestFiniteMagnitude, -0.0, 1e16, 123456789012345678, 2.5]
        for _ in 0..<2000 { values.append(Double(bitPattern: rng.next() & ~(0x7ff << 52) | (UInt64.random(in: 1...2046) << 52))) }
        for d in values {
            var w = JSONWriter()
            try w.double(d)
            let text = String(decoding: w.bytes, as: UTF8.self)
            let back = try JSONReader.parse(w.bytes).doubleValue
            #expect(back == d, "\(d) written as \(text)")
        }
    }

    @Test("a double that is not finite has no JSON form: the encoder refuses it")
    func nonFinite() {
        for d in [Double.nan, .infinity, -.infinity] {
            var r = Record(type: "T", name: "x", zone: Self.zone)
            r.values["d"] = .double(d)
            #expect(throws: StoreError.self) { try RecordJSON.encode(r) }
        }
    }

    @Test("every control character is escaped; the rest of Unicode is written as it is")
    func escaping() {
        var w = JSONWriter()
        w.string((0..<0x20).map { String(UnicodeScalar(UInt8($0))) }.joined() + "\u{7f}\u{2028}😀")
        let text = String(decoding: w.bytes, as: UTF8.self)
        #expect(text == #""\u0000\u0001\u0002\u0003\u0004\u0005\u0006\u0007\b\t\n\u000b\f\r\u000e\u000f\u0010\u0011\u0012\u0013\u0014\u0015\u0016\u0017\u0018\u0019\u001a\u001b\u001c\u001d\u001e\u001f"# + "\u{7f}\u{2028}😀\"")
    }

    @Test("a character to escape is escaped at every offset of a long string, and the string reads back")
    func escapingAtEveryOffset() throws {
        // The writer skips plain text 8 bytes at a time: an escape must be found in any word.
        for length in 1..<20 {
            for k in 0..<length {
                for special in ["\"", "\\", "\n", "\u{1}", "é", "😀"] {
                    let text = String(repeating: "a", count: k) + special + String(repeating: "b", count: length - k)
                    var w = JSONWriter()
                    w.string(text)
                    #expect(try JSONReader.parse(w.bytes) == .string(text))
                    #expect(try JSONSerialization.jsonObject(with: Data(w.bytes), options: .fragmentsAllowed) as? String == text)
                }
            }
        }
    }

    @Test("a query page streamed in pieces is the same document as written whole")
    func queryPageFlushed() throws {
        let records = (0..<5).map { i -> Record in
            var r = Self.sample()
            r.values["title"] = .string("note \(i) \"quoted\"")
            return r
        }
        let page = QueryResult(records: records, refused: ["bad": StoreError(.integrityFailure, "tampered")], cursor: nil)
        for pretty in [false, true] {
            var whole = JSONWriter(pretty: pretty)
            try RecordJSON.write(page, schema: nil, userID: "alice-id", into: &whole)
            var pieces = [UInt8](), flushes = 0
            var streamed = JSONWriter(pretty: pretty)
            try RecordJSON.write(page, schema: nil, userID: "alice-id", into: &streamed, flushBytes: 1) { bytes in
                pieces.append(contentsOf: bytes)
                flushes += 1
            }
            pieces.append(contentsOf: streamed.bytes)
            #expect(flushes == records.count)
            #expect(pieces == whole.bytes)
            #expect(try JSONSerialization.jsonObject(with: Data(pieces)) is [String: Any])
        }
    }

    @Test("ISODate.format reads back to the bit through ISODate.parse, with more than 9 fraction digits only near 2001")
    func datesRoundTrip() throws {
        var rng = SystemRandomNumberGenerator()
        let low = -63_000_000_000.0, high = 252_423_993_599.0 // years 0001 to 9999, in seconds since 2001
        // Random dates over the whole range, and near 2001-01-01, where a double is finer than a
        // nanosecond (a date there once came back a few hundred picoseconds off through 9 digits).
        let near = (0..<2000).map { _ in Double.random(in: -1e7...1e7, using: &rng) } + [-777_407.8753814697, 6_878_532.3029174805, 1e-9, -0.5]
        for t in (0..<3000).map({ _ in Double.random(in: low...high, using: &rng) }) + near {
            let any = Date(timeIntervalSinceReferenceDate: t)
            let text = ISODate.format(any)
            let back = try #require(ISODate.parse(text), "\(text)")
            #expect(back.timeIntervalSinceReferenceDate.bitPattern == t.bitPattern, "\(text) \(t)")
            let written = text.split(separator: ".").last!.dropLast().count
            #expect((3...ISODate.maxFractionDigits).contains(written), "\(text)")
            if abs(t) >= 1e7 { #expect(written <= 9, "\(text)") }
            // A date given with up to 9 digits, as an import reads it, prints back to the same date.
            let digits = Int.random(in: 0...9, using: &rng)
            let fraction = digits == 0 ? "" : "." + (0..<digits).map { _ in String(Int.random(in: 0...9, using: &rng)) }.joined()
            let given = try #require(ISODate.parse(String(ISODate.formatSeconds(any).dropLast()) + fraction + "Z"))
            #expect(ISODate.parse(ISODate.format(given)) == given, "\(ISODate.format(given))")
        }
        #expect(ISODate.format(Date(timeIntervalSince1970: 0)) == "1970-01-01T00:00:00.000Z")
        #expect(ISODate.parse("1500-02-29") != nil) // Julian leap day, as the calendar counts
        #expect(ISODate.format(ISODate.parse("1500-02-29")!) == "1500-02-29T00:00:00.000Z")
        #expect(ISODate.parse("1900-02-29") == nil && ISODate.parse("2000-02-29") != nil && ISODate.parse("2026-04-31") == nil)
    }

    @Test("ISODate.parse agrees with Foundation's Gregorian calendar; formatSeconds with the .iso8601 style")
    func datesAgreeWithFoundation() throws {
        var rng = SystemRandomNumberGenerator()
        for _ in 0..<3000 {
            let (y, m, d) = (Int.random(in: 1...9999, using: &rng), Int.random(in: 1...12, using: &rng), Int.random(in: 1...31, using: &rng))
            let (h, mi, s) = (Int.random(in: 0...23, using: &rng), Int.random(in: 0...59, using: &rng), Int.random(in: 0...59, using: &rng))
            func pad(_ v: Int, _ n: Int) -> String { String(repeating: "0", count: n - String(v).count) + String(v) }
            let text = "\(pad(y, 4))-\(pad(m, 2))-\(pad(d, 2))T\(pad(h, 2)):\(pad(mi, 2)):\(pad(s, 2))Z"
            let components = DateComponents(year: y, month: m, day: d, hour: h, minute: mi, second: s)
            let expected = ISODate.utcCalendar.date(from: components).flatMap { date -> Date? in
                let back = ISODate.utcCalendar.dateComponents([.year, .month, .day], from: date)
                return back.year == y && back.month == m && back.day == d ? date : nil
            }
            #expect(ISODate.parse(text) == expected, "\(text)")
            let date = Date(timeIntervalSinceReferenceDate: Double.random(in: -63_000_000_000.0...252_423_993_599.0, using: &rng))
            #expect(ISODate.formatSeconds(date) == date.formatted(.iso8601))
        }
    }
}

import CofferCrypto
import CofferStoreTestSupport
import Foundation
import Testing
@testable import CofferStore

@Suite("Codecs: plain JSON and sealed binary")
struct CodecTests {
    static let sample: [String: RecordValue] = [
        "s": .string("héllo \"quoted\" \\ / \n\t\r \u{0}\u{1F} 日本 🎉"),
        "empty": .string(""),
        "i": .int(Int64.min),
        "j": .int(Int64.max),
        "d": .double(-0.000123),
        "whole": .double(42.0),
        "big": .double(1e300),
        "b": .bool(false),
        "t": .date(Date(timeIntervalSince1970: 1_700_000_000.123456)),
        "y": .bytes(Array(0...255)),
        "noBytes": .bytes([]),
        "r": .reference("parent-1"),
        "ls": .list(["a", "", "ü"]),
        "li": .list([1, -1, .int(Int64.max)]),
        "ld": .list([0.5, -2.25]),
        "lb": .list([true, false]),
        "lt": .list([.date(Date(timeIntervalSince1970: -1.5))]),
        "ly": .list([.bytes([1, 2]), .bytes([])]),
        "lr": .list([.reference("x")]),
        "le": .list([]),
    ]

    static let sampleTypes: [String: FieldType] = [
        "s": .string, "empty": .string, "i": .int, "j": .int, "d": .double, "whole": .double, "big": .double, "b": .bool,
        "t": .date, "y": .bytes, "noBytes": .bytes, "r": .reference, "ls": .list(.string), "li": .list(.int),
        "ld": .list(.double), "lb": .list(.bool), "lt": .list(.date), "ly": .list(.bytes), "lr": .list(.reference),
        "le": .list(.int),
    ]

    func decodePlain(_ text: String, _ types: [String: FieldType] = sampleTypes) throws -> [String: RecordValue] {
        try PlainValuesCodec.decode(text) { types[$0] }
    }

    // MARK: - Plain

    @Test("plain: round trip of every type")
    func plainRoundTrip() throws {
        let text = PlainValuesCodec.encode(Self.sample)
        let decoded = try decodePlain(text)
        #expect(decoded == Self.sample)
        #expect(decoded["d"]?.doubleValue?.bitPattern == (-0.000123).bitPattern)
        // Valid JSON that Foundation parses too.
        #expect((try JSONSerialization.jsonObject(with: Data(text.utf8))) is [String: Any])
    }

    @Test("plain: the exact text, keys sorted, numbers typed for SQLite")
    func plainExactText() throws {
        let values: [String: RecordValue] = ["b": 1, "a": "x\"y", "c": 2.0, "d": .bool(true), "e": .bytes([0xff, 0x00]),
                                             "f": .date(Date(timeIntervalSinceReferenceDate: 1.5)), "g": .list([1, 2]), "h": .reference("r"),
                                             "i": .string("\u{1}\n")]
        #expect(PlainValuesCodec.encode(values) == #"{"a":"x\"y","b":1,"c":2.0,"d":true,"e":"/wA=","f":1.5,"g":[1,2],"h":"r","i":"\u0001\n"}"#)
        #expect(PlainValuesCodec.encode([:]) == "{}")
        #expect(PlainValuesCodec.encode(["x": 1e21]) == #"{"x":1e+21}"#)
    }

    @Test("plain: doubles read without strtod (short decimals) equal strtod's, bit for bit, and the rest still parse")
    func plainDecimalFastPath() throws {
        var generator = SystemRandomNumberGenerator()
        var texts = ["0.0", "-0.0", "0.5", "1.25", "721692800.0", "722692800.123456", "9007199254740992.0", "9007199254740993.0",
                     "0.1", "0.3", "123456789012345.6", "1234567890123456.7", "0.0000000000000000000001", "0.00000000000000000000001",
                     "1.7976931348623157", "-3.14159", "12.50", "1.5e3", "1.5E-3", "-2.5e+2", "1e22", "100000000000000000000.5"]
        for _ in 0..<2000 {
            let digits = Int.random(in: 1...17, using: &generator)
            let point = Int.random(in: 1...digits, using: &generator)
            var text = Bool.random(using: &generator) ? "-" : ""
            for d in 0..<digits {
                if d == point { text += "." }
                text += String(Int.random(in: (d == 0 && digits > 1 ? 1 : 0)...9, using: &generator))
            }
            if point == digits { text += ".0" }
            texts.append(text)
            texts.append(String(Double.random(in: -1e9...1e9, using: &generator)))
        }
        for text in texts {
            let decoded = try decodePlain(#"{"d":\#(text)}"#)["d"]?.doubleValue
            #expect(decoded?.bitPattern == Double(text)?.bitPattern, "\(text)")
        }
        // The fast path declines what it cannot do exactly (the general path reads those).
        func fast(_ text: String) -> Double?? {
            let point = text.firstIndex(of: ".")!
            let integer = Int64(text[..<point].drop(while: { $0 == "-" }))!
            return Array(text.utf8).withUnsafeBufferPointer { bytes in
                PlainValuesCodec.Parser.exactDecimal(bytes, from: text.utf8.distance(from: text.startIndex, to: point), integer: integer,
                                                     negative: text.hasPrefix("-")).map(\.value)
            }
        }
        for text in ["1.5e3", "0.12345678901234567890123", "9007199254740993.5", "0.9007199254740993", "1.", "1.5.5", "2.5-1"] {
            #expect(fast(text) == nil, "\(text)")
        }
        #expect(fast("-0.0")??.bitPattern == (-0.0).bitPattern)
        #expect(fast("721692800.0") == 721692800.0)
    }

    @Test("plain: decoding accepts JSON's other spellings (spaces, \\/ and \\u escapes, surrogate pairs)")
    func plainLenientButCorrect() throws {
        let types: [String: FieldType] = ["s": .string, "i": .int, "d": .double, "l": .list(.int), "t": .date]
        let decoded = try decodePlain(#" { "s" : "a\/b\u00e9\ud83d\ude00\b\f" , "i" : -7 , "d" : 3 , "l" : [ 1 , 2 ] , "t" : 2 } "#, types)
        #expect(decoded == ["s": "a/bé😀\u{8}\u{C}", "i": -7, "d": 3.0, "l": .list([1, 2]), "t": .date(Date(timeIntervalSinceReferenceDate: 2))])
        #expect(try decodePlain("{}", types).isEmpty)
        #expect(try decodePlain("{\"d\":1E2}", types) == ["d": 100.0])
    }

    @Test("plain: every truncation of a valid encoding is .integrityFailure")
    func plainTruncated() throws {
        let text = Array(PlainValuesCodec.encode(Self.sample).utf8)
        for n in 0..<text.count {
            let prefix = String(decoding: text[0..<n], as: UTF8.self)
            expectStoreErrorSync(.integrityFailure, "prefix of \(n) bytes") { try decodePlain(prefix) }
        }
    }

    @Test("plain: malformed input is .integrityFailure, never a crash", arguments: [
        "", " ", "null", "[]", "\"s\"", "1", "{", "}", "{}}", "{} x", "{}{}", "{,}", "{\"s\":\"a\",}", "{\"s\" \"a\"}",
        "{\"s\":\"a\" \"i\":1}", "{s:\"a\"}", "{'s':'a'}", "{\"s\":\"a\"]",
        "{\"unknown\":1}", "{\"s\":\"a\",\"s\":\"b\"}",
        "{\"s\":1}", "{\"s\":null}", "{\"s\":true}", "{\"s\":[\"a\"]}", "{\"i\":\"1\"}", "{\"i\":1.5}", "{\"i\":1e3}",
        "{\"i\":99999999999999999999}", "{\"i\":-}", "{\"i\":--1}", "{\"i\":1-2}", "{\"i\":+}", "{\"i\":.}", "{\"i\":NaN}",
        "{\"d\":1e999}", "{\"d\":-1e999}", "{\"d\":\"1.0\"}", "{\"d\":Infinity}", "{\"d\":1.2.3}", "{\"t\":\"2024-01-01\"}",
        "{\"b\":1}", "{\"b\":tru}", "{\"b\":True}", "{\"b\":nulls}",
        "{\"y\":\"***\"}", "{\"y\":\"AAA\"}", "{\"y\":1}",
        "{\"li\":1}", "{\"li\":[1,]}", "{\"li\":[1 2]}", "{\"li\":[\"1\"]}", "{\"li\":[[1]]}", "{\"li\":[1}",
        "{\"s\":\"\\x\"}", "{\"s\":\"\\u12\"}", "{\"s\":\"\\u12G4\"}", "{\"s\":\"\\ud83d\"}", "{\"s\":\"\\ud83d\\u0041\"}",
        "{\"s\":\"\\ude00\"}", "{\"s\":\"\\", "{\"s\":\"abc", "{\"s\":\"tab\there\"}", "{\"s\":\"nl\nhere\"}",
        "{\"s\":\"a\"\u{0}}", "\u{FEFF}{}",
    ])
    func plainMalformed(_ text: String) {
        expectStoreErrorSync(.integrityFailure, "\(text.debugDescription)") { try decodePlain(text) }
    }

    @Test("plain: random bytes never crash the decoder")
    func plainFuzz() {
        let alphabet = Array(#"{}[]:,"\ u0123456789abcdefeE.-+ntrfls"#.utf8)
        for _ in 0..<3000 {
            let length = Int.random(in: 0..<40)
            let bytes = (0..<length).map { _ in Bool.random() ? alphabet.randomElement()! : UInt8.random(in: 0...255) }
            do { _ = try decodePlain(String(decoding: bytes, as: UTF8.self)) } catch let e as StoreError {
                #expect(e.code == .integrityFailure)
            } catch {
                Issue.record("unexpected \(error)")
            }
        }
    }

    // MARK: - Sealed

    @Test("sealed: round trip of every type, padded to 64-byte blocks")
    func sealedRoundTrip() throws {
        let bytes = SealedValuesCodec.encode(Self.sample)
        #expect(bytes.count % 64 == 0)
        #expect(bytes.first == 1)
        let decoded = try SealedValuesCodec.decode(bytes)
        #expect(decoded == Self.sample)
        #expect(decoded["d"]?.doubleValue?.bitPattern == (-0.000123).bitPattern)
        #expect(try SealedValuesCodec.decode(SealedValuesCodec.encode([:])) == [:])
        #expect(SealedValuesCodec.encode([:]) == [1, 0, 0, 0x80] + Array(repeating: 0, count: 60))
    }

    @Test("sealed: the exact layout of one field")
    func sealedExactBytes() {
        let bytes = SealedValuesCodec.encode(["k": .int(258)])
        let body: [UInt8] = [1, 0, 1, 1, UInt8(ascii: "k"), 2, 0, 0, 0, 0, 0, 0, 1, 2, 0x80]
        #expect(bytes == body + Array(repeating: 0, count: 64 - body.count))
        let list = SealedValuesCodec.encode(["l": .list([.string("ab")])])
        let listBody: [UInt8] = [1, 0, 1, 1, UInt8(ascii: "l"), 8, 1, 0, 0, 0, 1, 0, 0, 0, 2, UInt8(ascii: "a"), UInt8(ascii: "b"), 0x80]
        #expect(list == listBody + Array(repeating: 0, count: 64 - listBody.count))
    }

    @Test("sealed: lengths show only in 64-byte buckets")
    func sealedPadding() {
        for n in [0, 1, 40, 49, 50, 51, 100, 1000] {
            let bytes = SealedValuesCodec.encode(["s": .string(String(repeating: "x", count: n))])
            let content = 1 + 2 + 1 + 1 + 1 + 4 + n + 1
            #expect(bytes.count == (content + 63) / 64 * 64, "\(n)")
        }
    }

    /// A valid encoding whose content (before the 0x80 marker) is `body`.
    static func sealed(_ body: [UInt8]) -> [UInt8] {
        var out = body + [0x80]
        while out.count % 64 != 0 { out.append(0) }
        return out
    }

    @Test("sealed: truncation inside the content is .integrityFailure")
    func sealedTruncatedContent() {
        let full = SealedValuesCodec.encode(Self.sample)
        let marker = full.lastIndex(of: 0x80)!
        for n in 0..<marker {
            expectStoreErrorSync(.integrityFailure, "cut at \(n)") { try SealedValuesCodec.decode(Array(full[0..<n])) }
            // Cut and re-padded: still short.
            expectStoreErrorSync(.integrityFailure, "cut at \(n), re-padded") { try SealedValuesCodec.decode(Self.sealed(Array(full[0..<n]))) }
        }
    }

    @Test("sealed: padding must be 0x80 then zeros up to a multiple of 64, no more")
    func sealedBadPadding() {
        let valid = SealedValuesCodec.encode(["k": .bool(true)])
        let marker = valid.lastIndex(of: 0x80)!
        var noMarker = valid; noMarker[marker] = 0
        var otherMarker = valid; otherMarker[marker] = 0x81
        var junkAfter = valid; junkAfter[marker + 3] = 1
        var lastByte = valid; lastByte[63] = 0x80
        let cases: [(String, [UInt8])] = [
            ("empty", []), ("all zeros", Array(repeating: 0, count: 64)), ("no marker", noMarker), ("marker 0x81", otherMarker),
            ("junk after marker", junkAfter), ("two markers", lastByte),
            ("cut padding", Array(valid[0..<(marker + 1)])), ("cut in padding", Array(valid[0..<40])),
            ("one block too many", valid + Array(repeating: 0, count: 64)), ("one byte extra", valid + [0]),
        ]
        for (label, bytes) in cases {
            expectStoreErrorSync(.integrityFailure, "\(label)") { try SealedValuesCodec.decode(bytes) }
        }
    }

    @Test("sealed: malformed content is .integrityFailure, never a crash")
    func sealedMalformed() {
        let k: [UInt8] = [1, UInt8(ascii: "k")]
        let cases: [(String, [UInt8])] = [
            ("version 0", [0, 0, 0]),
            ("version 2", [2, 0, 0]),
            ("count without fields", [1, 0, 1]),
            ("count too high", [1, 0, 2] + k + [4, 1]),
            ("trailing bytes", [1, 0, 1] + k + [4, 1, 0xAA]),
            ("trailing after empty", [1, 0, 0, 7]),
            ("unknown tag 0", [1, 0, 1] + k + [0, 1]),
            ("unknown tag 9", [1, 0, 1] + k + [9, 1]),
            ("unknown tag 255", [1, 0, 1] + k + [255, 1]),
            ("list of lists", [1, 0, 1] + k + [8, 8, 0, 0, 0, 0]),
            ("list of tag 0", [1, 0, 1] + k + [8, 0, 0, 0, 0, 0]),
            ("list count too high", [1, 0, 1] + k + [8, 4, 0, 0, 0, 3, 1, 0]),
            ("list count huge", [1, 0, 1] + k + [8, 4, 0xff, 0xff, 0xff, 0xff, 1]),
            ("bool 2", [1, 0, 1] + k + [4, 2]),
            ("short int", [1, 0, 1] + k + [2, 0, 0, 0]),
            ("string length beyond end", [1, 0, 1] + k + [1, 0, 0, 0, 9, 0x61]),
            ("string length huge", [1, 0, 1] + k + [1, 0xff, 0xff, 0xff, 0xff]),
            ("bytes length huge", [1, 0, 1] + k + [6, 0x80, 0, 0, 0]),
            ("invalid UTF-8 string", [1, 0, 1] + k + [1, 0, 0, 0, 2, 0xC3, 0x28]),
            ("invalid UTF-8 reference", [1, 0, 1] + k + [7, 0, 0, 0, 1, 0xFF]),
            ("invalid UTF-8 key", [1, 0, 1, 1, 0xFF, 4, 1]),
            ("key length beyond end", [1, 0, 1, 200, 0x61]),
            ("missing tag", [1, 0, 1] + k),
            ("duplicate key", [1, 0, 2] + k + [4, 1] + k + [4, 0]),
        ]
        for (label, body) in cases {
            expectStoreErrorSync(.integrityFailure, "\(label)") { try SealedValuesCodec.decode(Self.sealed(body)) }
        }
    }

    @Test("sealed: random mutations never crash the decoder")
    func sealedFuzz() {
        let base = SealedValuesCodec.encode(Self.sample)
        for _ in 0..<3000 {
            var bytes = base
            for _ in 0..<Int.random(in: 1...4) {
                switch Int.random(in: 0..<3) {
                case 0: bytes[Int.random(in: 0..<bytes.count)] = UInt8.random(in: 0...255)
                case 1: bytes = Array(bytes.prefix(Int.random(in: 0...bytes.count)))
                default: bytes.insert(UInt8.random(in: 0...255), at: Int.random(in: 0...bytes.count))
                }
                if bytes.isEmpty { break }
            }
            do { _ = try SealedValuesCodec.decode(bytes) } catch let e as StoreError {
                #expect(e.code == .integrityFailure)
            } catch {
                Issue.record("unexpected \(error)")
            }
        }
    }
}

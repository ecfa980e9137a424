import CofferStoreTestSupport
import Foundation
import Testing
@testable import CofferStore

/// The strict JSON reader: a table of valid and invalid documents, and generated documents
/// compared with Foundation's `JSONSerialization`.
@Suite("JSONReader")
struct JSONReaderTests {
    func parse(_ text: String) throws(JSONReader.Failure) -> JSONValue { try JSONReader.parse(Array(text.utf8)) }

    @Test("valid documents parse to the values they hold", arguments: [
        ("0", JSONValue.integer(0)), ("-0", .integer(0)), ("42", .integer(42)), (" \t\r\n7 \n", .integer(7)),
        ("9223372036854775807", .integer(.max)), ("-9223372036854775808", .integer(.min)),
        ("9223372036854775808", .bigInteger("9223372036854775808", 9223372036854775808.0)),
        ("-9223372036854775809", .bigInteger("-9223372036854775809", -9223372036854775809.0)),
        ("1.0", .number(1)), ("1e2", .number(100)), ("1E+2", .number(100)), ("-2.5e-3", .number(-0.0025)), ("1e-400", .number(0)),
        ("true", .bool(true)), ("false", .bool(false)), ("null", .null),
        (#""""#, .string("")), (#""a\"b\\c\/d\b\f\n\r\t""#, .string("a\"b\\c/d\u{8}\u{c}\n\r\t")),
        (#""\u0041\u00e9\u20ac\ud83d\ude00\u0000""#, .string("Aé€😀\u{0}")), ("\"é😀\"", .string("é😀")),
        ("[]", .array([])), ("[1,[2],{}]", .array([.integer(1), .array([.integer(2)]), .object(JSONObject())])),
        (#"{"a":1,"b":[true,null]}"#, .object(JSONObject([("a", .integer(1)), ("b", .array([.bool(true), .null]))]))),
    ])
    func valid(text: String, expected: JSONValue) throws {
        #expect(try parse(text) == expected)
    }

    @Test("what RFC 8259 does not allow is refused", arguments: [
        "", " ", "01", "-", "+1", "1.", ".5", "1e", "1e+", "0x10", "NaN", "Infinity", "-Infinity", "1e400", "-1e400",
        "[1,]", "[,1]", "{\"a\":1,}", "{a:1}", "{'a':1}", "{\"a\" 1}", "{\"a\":}", "[1 2]", "[", "]", "{", "}",
        "\"abc", "\"a\tb\"", "\"a\nb\"", "\"\\x\"", "\"\\u12\"", "\"\\uZZZZ\"", "\"\\ud800\"", "\"\\udc00\"", "\"\\ud800\\u0041\"",
        "tru", "truex", "nul", "True", "1 2", "{} {}", "[1]x", "\u{feff}[1]", "// c\n1", "[1]\u{0}",
        String(repeating: "[", count: 300) + String(repeating: "]", count: 300),
    ])
    func invalid(text: String) {
        #expect(throws: JSONReader.Failure.invalid) { try parse(text) }
    }

    @Test("bytes that are not UTF-8 are refused, in a plain or an escaped string")
    func invalidUTF8() {
        for bytes: [UInt8] in [[0x22, 0xff, 0x22], [0x22, 0xc3, 0x22], [0x22, 0x5c, 0x6e, 0xed, 0xa0, 0x80, 0x22], [0x22, 0xc0, 0xaf, 0x22]] {
            #expect(throws: JSONReader.Failure.invalid) { try JSONReader.parse(bytes) }
        }
    }

    @Test("a quote, a backslash, a control character or a non-ASCII byte is found at every offset of a long string")
    func specialByteAtEveryOffset() throws {
        // The reader skips strings 8 bytes at a time: a byte that needs a look must stop it
        // wherever it falls in a word, and a word after it must be read as well.
        for length in 0..<20 {
            for k in 0..<length {
                var plain = Array(repeating: UInt8(ascii: "a"), count: length)
                func document(_ bytes: [UInt8]) -> [UInt8] { [UInt8(ascii: "\"")] + bytes + [UInt8(ascii: "\"")] }
                plain[k] = 0x1f
                #expect(throws: JSONReader.Failure.invalid) { try JSONReader.parse(document(plain)) }
                plain[k] = 0xff
                #expect(throws: JSONReader.Failure.invalid) { try JSONReader.parse(document(plain)) }
                plain[k] = UInt8(ascii: "\"")
                #expect(throws: JSONReader.Failure.invalid) { try JSONReader.parse(document(plain)) }
                let text = String(repeating: "a", count: k) + "é" + String(repeating: "b", count: length - k)
                #expect(try JSONReader.parse(document(Array(text.utf8))) == .string(text))
                let escaped = Array(String(repeating: "a", count: k).utf8) + Array(#"\"\\"#.utf8) + Array(String(repeating: "b", count: length - k).utf8)
                #expect(try JSONReader.parse(document(escaped)) == .string(String(repeating: "a", count: k) + "\"\\" + String(repeating: "b", count: length - k)))
            }
            let plain = String(repeating: "x", count: length)
            #expect(try JSONReader.parse(Array("[\"\(plain)\",\"\(plain)\"]".utf8)) == .array([.string(plain), .string(plain)]))
        }
    }

    @Test("a key twice in one object is reported, the first in document order, once the document parsed")
    func duplicates() throws {
        #expect(throws: JSONReader.Failure.duplicateKey("c")) { try parse(#"{"a":1,"b":{"c":1,"c":2},"a":2}"#) == .null }
        #expect(throws: JSONReader.Failure.duplicateKey("a")) { try parse(#"{"a":1,"b":{"c":1},"a":2,"b":3}"#) == .null }
        #expect(throws: JSONReader.Failure.duplicateKey("c")) { try parse(#"[{"c":1,"c":2}]"#) == .null }
        #expect(throws: JSONReader.Failure.duplicateKey("a")) { try parse(#"{"a":1,"\u0061":2}"#) == .null }
        // Past 16 keys the reader tracks keys in a set.
        let many = (0..<40).map { "\"k\($0)\":\($0)" }.joined(separator: ",")
        #expect(throws: JSONReader.Failure.duplicateKey("k7")) { try parse("{\(many),\"k7\":1}") == .null }
        #expect(try parse("{\(many)}") != .null)
        // A syntax error wins over a repeated key.
        #expect(throws: JSONReader.Failure.invalid) { try parse(#"{"a":1,"a":2"#) == .null }
        #expect(try parse(#"{"a":1,"A":2}"#) != .null)
    }

    /// `JSONSerialization`'s value as a ``JSONValue`` (NSNumber kinds sorted out by the text).
    static func foundationValue(_ any: Any) -> JSONValue? {
        switch any {
        case is NSNull: return .null
        case let s as String: return .string(s)
        case let n as NSNumber:
            if String(cString: n.objCType) == "c" { return .bool(n.boolValue) }
            return nil // numbers are compared by their text, below
        case let a as [Any]:
            var items = [JSONValue]()
            for item in a { guard let v = foundationValue(item) else { return nil }; items.append(v) }
            return .array(items)
        case let o as [String: Any]:
            var members = [(key: String, value: JSONValue)]()
            for (k, v) in o { guard let value = foundationValue(v) else { return nil }; members.append((k, value)) }
            return .object(JSONObject(members))
        default: return nil
        }
    }

    /// Generated documents without numbers (whose Foundation kinds are heuristics) or with
    /// numbers: both parsers accept the same ones, and agree on strings, bools, nulls, shape;
    /// numbers agree in value.
    @Test("generated documents: the reader and JSONSerialization accept the same and agree")
    func randomizedAgainstFoundation() throws {
        var rng = SystemRandomNumberGenerator()
        let pieces = ["a", "é", "😀", "\\n", "\\\"", "\\u0041", "\\ud83d\\ude00", " ", "/", "\\/", "\u{7f}", "\\u0000"]
        func string(_ depth: Int) -> String {
            "\"" + (0..<Int.random(in: 0...5, using: &rng)).map { _ in pieces.randomElement(using: &rng)! }.joined() + "\""
        }
        func number() -> String {
            [String(Int64.random(in: .min ... .max, using: &rng)), String(Int.random(in: -1000...1000, using: &rng)),
             "\(Double.random(in: -1e6...1e6, using: &rng))", "1e\(Int.random(in: -30...30, using: &rng))", "-0.5E+3", "0"]
                .randomElement(using: &rng)!
        }
        func value(_ depth: Int) -> String {
            switch Int.random(in: 0..<(depth > 3 ? 4 : 7), using: &rng) {
            case 0: return string(depth)
            case 1: return number()
            case 2: return ["true", "false", "null"].randomElement(using: &rng)!
            case 3: return number()
            case 4, 5:
                let keys = Set((0..<Int.random(in: 0...5, using: &rng)).map { _ in string(depth) })
                return "{" + keys.map { "\($0) : \(value(depth + 1))" }.joined(separator: ",") + "}"
            default: return "[" + (0..<Int.random(in: 0...4, using: &rng)).map { _ in value(depth + 1) }.joined(separator: ", ") + "]"
            }
        }
        func numbersEqual(_ mine: JSONValue, _ theirs: Any) -> Bool {
            switch (mine, theirs) {
            case (.array(let a), let b as [Any]): return a.count == b.count && zip(a, b).allSatisfy { numbersEqual($0, $1) }
            case (.object(let a), let b as [String: Any]): return a.count == b.count && a.members.allSatisfy { m in b[m.key].map { numbersEqual(m.value, $0) } ?? false }
            case (.integer(let v), let n as NSNumber): return n.int64Value == v || n.doubleValue == Double(v)
            // Foundation reads a long decimal as an NSDecimalNumber whose double can be off by
            // more than a few ulps (seen: -118543.40731302986); the reader's is correctly rounded
            // (see RecordJSONTests.doublesRoundTrip), so Foundation's is only a rough check here.
            case (.bigInteger(_, let d), let n as NSNumber), (.number(let d), let n as NSNumber):
                return abs(n.doubleValue - d) <= max(4 * d.ulp, abs(d) * 1e-12)
            default: return true
            }
        }
        for _ in 0..<3000 {
            var text = value(0)
            // Now and then a corrupted document.
            if Int.random(in: 0..<4, using: &rng) == 0, !text.isEmpty {
                var bytes = Array(text.utf8)
                bytes[Int.random(in: 0..<bytes.count, using: &rng)] = [UInt8(ascii: ","), UInt8(ascii: "\""), UInt8(ascii: "}"), 0x0a, UInt8(ascii: "0")].randomElement(using: &rng)!
                text = String(decoding: bytes, as: UTF8.self)
            }
            let foundation = try? JSONSerialization.jsonObject(with: Data(text.utf8), options: [.fragmentsAllowed])
            let mine = try? parse(text)
            if let mine, let foundation {
                #expect(numbersEqual(mine, foundation), "\(text)")
                if !text.contains(where: \.isNumber) || text.allSatisfy({ !"0123456789".contains($0) }) {
                    #expect(Self.foundationValue(foundation) == mine, "\(text)")
                }
            } else if mine != nil {
                Issue.record("only the reader accepted \(text)")
            } else if foundation != nil, case let compact = text.filter({ !" \n".contains($0) }), !compact.contains(",]"), !compact.contains(",}") {
                // Foundation accepts a trailing comma (RFC 8259 does not), and keeps the last of
                // a repeated key, which the reader reports; otherwise both refuse.
                do { _ = try parse(text); Issue.record("unreachable") } catch .duplicateKey { } catch {
                    Issue.record("only JSONSerialization accepted \(text)")
                }
            }
        }
    }
}

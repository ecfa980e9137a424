import Foundation

/// Plain values as a JSON object: the form stored in `record.plain`, which SQLite's
/// `json_extract` reads for the per-field expression indexes that queries use.
///
/// Keys are sorted so that equal values give equal bytes (signatures rely on it). Types map
/// to JSON as: string and reference → string; int → integer; double → number with a
/// fraction or exponent; bool → true/false; date → seconds since 2001-01-01 (Foundation's
/// reference date, its exact storage) as a number;
/// bytes → base64 string; list → array. The field's type comes from the schema on decode.
package enum PlainValuesCodec {
    package static func encode(_ values: [String: RecordValue]) -> String {
        String(decoding: encodeBytes(values), as: UTF8.self)
    }

    /// ``encode(_:)`` as UTF-8 bytes, the form bound to SQLite and hashed.
    package static func encodeBytes(_ values: [String: RecordValue]) -> [UInt8] {
        var types: [UInt8]?
        return encodeBytes(values, types: &types)
    }

    /// ``encodeBytes(_:)`` and, in the same pass, the ``typeCodes(_:)`` of the values.
    package static func encodeWithTypes(_ values: [String: RecordValue]) -> (json: [UInt8], types: [UInt8]) {
        var types: [UInt8]? = []
        let json = encodeBytes(values, types: &types)
        return (json, types ?? [])
    }

    private static func encodeBytes(_ values: [String: RecordValue], types: inout [UInt8]?) -> [UInt8] {
        var out = [UInt8]()
        out.reserveCapacity(64 + values.count * 24)
        types?.reserveCapacity(values.count)
        out.append(UInt8(ascii: "{"))
        var first = true
        for (key, value) in values.sorted(by: { $0.key < $1.key }) {
            if !first { out.append(UInt8(ascii: ",")) }
            first = false
            appendString(key, to: &out)
            out.append(UInt8(ascii: ":"))
            appendValue(value, to: &out)
            types?.append(typeCode(value))
        }
        out.append(UInt8(ascii: "}"))
        return out
    }

    package static func appendValue(_ value: RecordValue, to out: inout [UInt8]) {
        switch value {
        case .string(let s), .reference(let s): appendString(s, to: &out)
        case .int(let v): appendInt(v, to: &out)
        case .double(let v): out.append(contentsOf: formatDouble(v).utf8)
        case .bool(let v): out.append(contentsOf: (v ? "true" : "false").utf8)
        case .date(let d): out.append(contentsOf: formatDouble(d.timeIntervalSinceReferenceDate).utf8)
        case .bytes(let b): appendString(Data(b).base64EncodedString(), to: &out)
        case .list(let items):
            out.append(UInt8(ascii: "["))
            for (i, item) in items.enumerated() {
                if i > 0 { out.append(UInt8(ascii: ",")) }
                appendValue(item, to: &out)
            }
            out.append(UInt8(ascii: "]"))
        }
    }

    /// Decimal digits of `v`, without going through a String.
    package static func appendInt(_ v: Int64, to out: inout [UInt8]) {
        if v < 0 { out.append(UInt8(ascii: "-")) }
        var magnitude = v.magnitude
        withUnsafeTemporaryAllocation(of: UInt8.self, capacity: 20) { digits in
            var n = 0
            repeat {
                digits[n] = UInt8(ascii: "0") + UInt8(magnitude % 10)
                magnitude /= 10
                n += 1
            } while magnitude > 0
            for i in stride(from: n - 1, through: 0, by: -1) { out.append(digits[i]) }
        }
    }

    /// Shortest round-trip form, always with a fraction or exponent so SQLite reads a REAL.
    package static func formatDouble(_ v: Double) -> String {
        precondition(v.isFinite, "non-finite doubles are rejected before encoding")
        let s = v.description
        return s.utf8.contains(where: { $0 == UInt8(ascii: ".") || $0 == UInt8(ascii: "e") }) ? s : s + ".0"
    }

    package static func appendString(_ s: String, to out: inout [UInt8]) {
        out.append(UInt8(ascii: "\""))
        // The common case, nothing to escape, scanned and copied as one buffer (iterating the
        // UTF-8 view byte by byte cost more than the rest of encoding a record).
        var s = s
        let plain = s.withUTF8 { utf8 -> Bool in
            for b in utf8 where b < 0x20 || b == 0x22 || b == 0x5c { return false }
            out.append(contentsOf: utf8)
            return true
        }
        if plain {
            out.append(UInt8(ascii: "\""))
            return
        }
        for b in s.utf8 {
            switch b {
            case UInt8(ascii: "\""): out.append(contentsOf: [0x5c, 0x22])
            case UInt8(ascii: "\\"): out.append(contentsOf: [0x5c, 0x5c])
            case 0x0a: out.append(contentsOf: [0x5c, UInt8(ascii: "n")])
            case 0x0d: out.append(contentsOf: [0x5c, UInt8(ascii: "r")])
            case 0x09: out.append(contentsOf: [0x5c, UInt8(ascii: "t")])
            case 0..<0x20:
                let hex = Array("0123456789abcdef".utf8)
                out.append(contentsOf: [0x5c, UInt8(ascii: "u"), 0x30, 0x30, hex[Int(b >> 4)], hex[Int(b & 0xf)]])
            default: out.append(b)
            }
        }
        out.append(UInt8(ascii: "\""))
    }

    /// Decodes a stored object, typing each field by `typeOf`. Anything unexpected (bad
    /// JSON, a field the schema does not know, a value of the wrong shape) throws
    /// `.integrityFailure`: the row was not written by Coffer.
    package static func decode(_ text: String, typeOf: (String) -> FieldType?) throws -> [String: RecordValue] {
        var text = text
        return try text.withUTF8 { try decode(UnsafeRawBufferPointer($0), typeOf: typeOf) }
    }

    package static func decode(_ raw: UnsafeRawBufferPointer, typeOf: (String) -> FieldType?) throws -> [String: RecordValue] {
        var parser = Parser(bytes: raw.bindMemory(to: UInt8.self))
        let values = try parser.object(typeOf: typeOf)
        parser.skipSpace()
        guard parser.index == raw.count else { throw parser.fail("trailing bytes") }
        return values
    }

    /// ``decode(_:typeOf:)`` that also writes each field's ``typeCode(_:)`` into `codes`, in
    /// the order of the object's keys (sorted, in what Coffer writes). Returns the values and
    /// the number of codes written; more fields than `codes` holds throws.
    package static func decode(_ raw: UnsafeRawBufferPointer, typeOf: (String) -> FieldType?,
                       codes: UnsafeMutableBufferPointer<UInt8>) throws -> (values: [String: RecordValue], codes: Int) {
        var parser = Parser(bytes: raw.bindMemory(to: UInt8.self), codes: codes)
        let values = try parser.object(typeOf: typeOf)
        parser.skipSpace()
        guard parser.index == raw.count else { throw parser.fail("trailing bytes") }
        return (values, parser.codeCount)
    }

    /// The type codes of plain values, one byte per field in key order: what a record's
    /// version hash signs of their types, so that the (unsigned) schema cannot make a reader
    /// take a value for another type (a string for a reference, a double for a date).
    package static func typeCodes(_ values: [String: RecordValue]) -> [UInt8] {
        values.sorted { $0.key < $1.key }.map { typeCode($0.value) }
    }

    /// A scalar's tag in the sealed encoding (string 1, int 2, double 3, bool 4, date 5,
    /// bytes 6, reference 7); a list is `0x80` plus its items' code (`0x80` alone when empty).
    package static func typeCode(_ value: RecordValue) -> UInt8 {
        guard case .list(let items) = value else { return SealedValuesCodec.tag(of: value.fieldType) }
        return 0x80 | (items.first.map(typeCode) ?? 0)
    }

    package struct Parser {
        package let bytes: UnsafeBufferPointer<UInt8>
        package var index = 0
        /// Where the type code of each field goes, when asked for.
        package var codes: UnsafeMutableBufferPointer<UInt8>?
        package var codeCount = 0

        package init(bytes: UnsafeBufferPointer<UInt8>, codes: UnsafeMutableBufferPointer<UInt8>? = nil) {
            self.bytes = bytes
            self.codes = codes
        }

        package func fail(_ what: String) -> StoreError {
            StoreError(.integrityFailure, "a stored record's plain values are damaged (\(what))")
        }

        @inline(__always)
        package mutating func skipSpace() {
            while index < bytes.count {
                let c = bytes[index]
                guard c == 0x20 || c == 0x0a || c == 0x0d || c == 0x09 else { return }
                index += 1
            }
        }

        package mutating func expect(_ c: UInt8) throws {
            skipSpace()
            guard index < bytes.count, bytes[index] == c else { throw fail("expected '\(Character(Unicode.Scalar(c)))'") }
            index += 1
        }

        package mutating func peek() -> UInt8? {
            skipSpace()
            return index < bytes.count ? bytes[index] : nil
        }

        package mutating func object(typeOf: (String) -> FieldType?) throws -> [String: RecordValue] {
            try expect(UInt8(ascii: "{"))
            var result = [String: RecordValue](minimumCapacity: 8)
            if peek() == UInt8(ascii: "}") { index += 1; return result }
            while true {
                let key = try string()
                guard let type = typeOf(key) else { throw fail("field '\(Names.printable(key))' is not in the schema") }
                try expect(UInt8(ascii: ":"))
                let value = try value(of: type)
                if let codes {
                    guard codeCount < codes.count else { throw fail("too many fields") }
                    codes[codeCount] = PlainValuesCodec.typeCode(value)
                    codeCount += 1
                }
                guard result.updateValue(value, forKey: key) == nil else { throw fail("duplicate key") }
                skipSpace()
                guard index < bytes.count else { throw fail("ends early") }
                if bytes[index] == UInt8(ascii: ",") { index += 1; continue }
                if bytes[index] == UInt8(ascii: "}") { index += 1; return result }
                throw fail("expected ',' or '}'")
            }
        }

        package mutating func value(of type: FieldType) throws -> RecordValue {
            switch type {
            case .string: return .string(try string())
            case .reference: return .reference(try string())
            case .int:
                guard case .int(let v) = try number() else { throw fail("expected an integer") }
                return .int(v)
            case .double:
                switch try number() {
                case .int(let v): return .double(Double(v))
                case .double(let v): return .double(v)
                }
            case .date:
                switch try number() {
                case .int(let v): return .date(Date(timeIntervalSinceReferenceDate: Double(v)))
                case .double(let v): return .date(Date(timeIntervalSinceReferenceDate: v))
                }
            case .bool:
                skipSpace()
                if match("true") { return .bool(true) }
                if match("false") { return .bool(false) }
                throw fail("expected a boolean")
            case .bytes:
                guard let data = Data(base64Encoded: try string()) else { throw fail("bad base64") }
                return .bytes(Array(data))
            case .list(let element):
                try expect(UInt8(ascii: "["))
                var items = [RecordValue]()
                if peek() == UInt8(ascii: "]") { index += 1; return .list(items) }
                while true {
                    items.append(try value(of: element))
                    skipSpace()
                    guard index < bytes.count else { throw fail("ends early") }
                    if bytes[index] == UInt8(ascii: ",") { index += 1; continue }
                    if bytes[index] == UInt8(ascii: "]") { index += 1; return .list(items) }
                    throw fail("expected ',' or ']'")
                }
            }
        }

        package mutating func match(_ word: StaticString) -> Bool {
            let n = word.utf8CodeUnitCount
            guard index + n <= bytes.count else { return false }
            let w = word.utf8Start
            for i in 0..<n where bytes[index + i] != w[i] { return false }
            index += n
            return true
        }

        package enum Number { case int(Int64), double(Double) }

        package mutating func number() throws -> Number {
            skipSpace()
            let start = index
            // Fast path: a plain integer that fits in Int64.
            var negative = false, value: Int64 = 0, digits = 0, overflow = false
            var i = index
            if i < bytes.count && bytes[i] == UInt8(ascii: "-") { negative = true; i += 1 }
            while i < bytes.count, bytes[i] >= 0x30, bytes[i] <= 0x39 {
                let (m, o1) = value.multipliedReportingOverflow(by: 10)
                let (a, o2) = m.addingReportingOverflow(Int64(bytes[i] - 0x30))
                overflow = overflow || o1 || o2
                value = a
                digits += 1
                i += 1
            }
            if digits > 0, !overflow, i == bytes.count || !(bytes[i] == UInt8(ascii: ".") || bytes[i] == UInt8(ascii: "e") || bytes[i] == UInt8(ascii: "E")) {
                index = i
                return .int(negative ? -value : value)
            }
            if digits > 0, !overflow, let fast = Self.exactDecimal(bytes, from: i, integer: value, negative: negative) {
                index = fast.end
                return .double(fast.value)
            }
            var isInteger = true
            while index < bytes.count {
                let c = bytes[index]
                if (c >= 0x30 && c <= 0x39) || c == UInt8(ascii: "-") || c == UInt8(ascii: "+") {
                    index += 1
                } else if c == UInt8(ascii: ".") || c == UInt8(ascii: "e") || c == UInt8(ascii: "E") {
                    isInteger = false
                    index += 1
                } else {
                    break
                }
            }
            guard index > start else { throw fail("expected a number") }
            let text = String(decoding: UnsafeBufferPointer(rebasing: bytes[start..<index]), as: UTF8.self)
            if isInteger, let v = Int64(text) { return .int(v) }
            guard let d = Double(text), d.isFinite else { throw fail("bad number") }
            return .double(d)
        }

        /// Powers of ten that a Double holds exactly.
        package static let exactPowersOfTen: [Double] = (0...22).map { (0..<$0).reduce(1.0) { r, _ in r * 10 } }

        /// `integer.fraction` at `i` (the '.'), when it converts exactly without `strtod`: a
        /// significand of at most 2^53 over at most 22 fraction digits, no exponent. Both are then
        /// exact Doubles and one IEEE division rounds correctly (Clinger's fast path), so the
        /// result equals `strtod`'s. Otherwise nil, for the general path.
        package static func exactDecimal(_ bytes: UnsafeBufferPointer<UInt8>, from start: Int, integer: Int64,
                                 negative: Bool) -> (value: Double, end: Int)? {
            guard start < bytes.count, bytes[start] == UInt8(ascii: "."), integer >= 0, integer <= 1 << 53 else { return nil }
            var significand = UInt64(integer)
            var i = start + 1, fractionDigits = 0
            while i < bytes.count, bytes[i] >= 0x30, bytes[i] <= 0x39 {
                significand = significand &* 10 &+ UInt64(bytes[i] - 0x30)
                fractionDigits += 1
                guard fractionDigits <= 22, significand <= 1 << 53 else { return nil }
                i += 1
            }
            guard fractionDigits > 0 else { return nil }
            if i < bytes.count {
                let c = bytes[i]
                guard c != UInt8(ascii: "."), c != UInt8(ascii: "e"), c != UInt8(ascii: "E"), c != UInt8(ascii: "+"),
                      c != UInt8(ascii: "-") else { return nil }
            }
            let magnitude = Double(significand) / exactPowersOfTen[fractionDigits]
            return (negative ? -magnitude : magnitude, i)
        }

        package mutating func string() throws -> String {
            try expect(UInt8(ascii: "\""))
            // Fast path: no escapes before the closing quote.
            var scan = index
            while scan < bytes.count {
                let c = bytes[scan]
                if c == UInt8(ascii: "\"") {
                    let s = String(decoding: UnsafeBufferPointer(rebasing: bytes[index..<scan]), as: UTF8.self)
                    index = scan + 1
                    return s
                }
                if c == UInt8(ascii: "\\") || c < 0x20 { break }
                scan += 1
            }
            var out = [UInt8]()
            while index < bytes.count {
                let c = bytes[index]
                index += 1
                if c == UInt8(ascii: "\"") { return String(decoding: out, as: UTF8.self) }
                if c < 0x20 { throw fail("control character in a string") }
                if c != UInt8(ascii: "\\") { out.append(c); continue }
                guard index < bytes.count else { break }
                let e = bytes[index]
                index += 1
                switch e {
                case UInt8(ascii: "\""): out.append(0x22)
                case UInt8(ascii: "\\"): out.append(0x5c)
                case UInt8(ascii: "/"): out.append(0x2f)
                case UInt8(ascii: "n"): out.append(0x0a)
                case UInt8(ascii: "r"): out.append(0x0d)
                case UInt8(ascii: "t"): out.append(0x09)
                case UInt8(ascii: "b"): out.append(0x08)
                case UInt8(ascii: "f"): out.append(0x0c)
                case UInt8(ascii: "u"):
                    var scalar = try hex4()
                    if (0xD800...0xDBFF).contains(scalar) {
                        guard match("\\u") else { throw fail("lone surrogate") }
                        let low = try hex4()
                        guard (0xDC00...0xDFFF).contains(low) else { throw fail("bad surrogate pair") }
                        scalar = 0x10000 + ((scalar - 0xD800) << 10) + (low - 0xDC00)
                    }
                    guard let u = Unicode.Scalar(scalar) else { throw fail("bad \\u escape") }
                    out.append(contentsOf: Array(String(Character(u)).utf8))
                default: throw fail("bad escape")
                }
            }
            throw fail("unterminated string")
        }

        package mutating func hex4() throws -> UInt32 {
            guard index + 4 <= bytes.count else { throw fail("short \\u escape") }
            var v: UInt32 = 0
            for _ in 0..<4 {
                let c = bytes[index]
                index += 1
                let d: UInt32
                switch c {
                case 0x30...0x39: d = UInt32(c - 0x30)
                case 0x41...0x46: d = UInt32(c - 0x41 + 10)
                case 0x61...0x66: d = UInt32(c - 0x61 + 10)
                default: throw fail("bad \\u escape")
                }
                v = v << 4 | d
            }
            return v
        }
    }
}

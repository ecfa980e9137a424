import Foundation

/// A strict RFC 8259 JSON parser over UTF-8 bytes, giving ``JSONValue``s.
///
/// ```swift
/// let parsed = try JSONReader.parse(Array(#"{"name": "n1", "tags": ["a", "b"]}"#.utf8))
/// ```
///
/// It refuses whatever RFC 8259 does not allow: leading zeros, a trailing comma, a control
/// character in a string, an unknown escape, a lone surrogate, bytes that are not UTF-8,
/// anything after the value. A number whose value is beyond a double's range is refused too,
/// as is nesting deeper than ``maxDepth``. A key repeated in one object is reported (the first
/// such key in document order) once the document parsed: JSON says nothing of which value wins,
/// so decoders refuse it.
package struct JSONReader {
    /// Why a document was refused.
    package enum Failure: Error, Equatable {
        /// Not JSON: a syntax error, a number beyond a double's range, or nesting too deep.
        case invalid
        /// Valid JSON in which this key appears twice in one object.
        case duplicateKey(String)
    }

    package static let maxDepth = 256

    private let p: UnsafeBufferPointer<UInt8>
    private var i = 0
    private var depth = 0
    private var duplicate: String?
    private var scratch = [UInt8]()

    private init(_ p: UnsafeBufferPointer<UInt8>) { self.p = p }

    /// Parses one whole document (whitespace around the value allowed).
    /// - Throws: ``Failure``.
    package static func parse(_ bytes: UnsafeBufferPointer<UInt8>) throws(Failure) -> JSONValue {
        var duplicate: String?
        let value = try parse(bytes, firstDuplicateKey: &duplicate)
        if let duplicate { throw .duplicateKey(duplicate) }
        return value
    }

    /// Parses one whole document, and sets `firstDuplicateKey` to the first key repeated in one
    /// of its objects (in document order), if any, instead of refusing it.
    /// - Throws: ``Failure/invalid``.
    package static func parse(_ bytes: UnsafeBufferPointer<UInt8>, firstDuplicateKey: inout String?) throws(Failure) -> JSONValue {
        var reader = JSONReader(bytes)
        reader.skipSpace()
        let value = try reader.value()
        reader.skipSpace()
        guard reader.i == bytes.count else { throw .invalid }
        firstDuplicateKey = reader.duplicate
        return value
    }

    package static func parse(_ bytes: [UInt8]) throws(Failure) -> JSONValue {
        try bytes.withUnsafeBufferPointer { (b) throws(Failure) -> JSONValue in try parse(b) }
    }

    private mutating func skipSpace() {
        while i < p.count {
            switch p[i] {
            case 0x20, 0x09, 0x0a, 0x0d: i += 1
            default: return
            }
        }
    }

    private mutating func value() throws(Failure) -> JSONValue {
        guard i < p.count else { throw .invalid }
        switch p[i] {
        case UInt8(ascii: "\""): return .string(try string())
        case UInt8(ascii: "{"): return try object()
        case UInt8(ascii: "["): return try array()
        case UInt8(ascii: "t"): try literal("true"); return .bool(true)
        case UInt8(ascii: "f"): try literal("false"); return .bool(false)
        case UInt8(ascii: "n"): try literal("null"); return .null
        default: return try number()
        }
    }

    private mutating func literal(_ word: StaticString) throws(Failure) {
        let n = word.utf8CodeUnitCount
        guard i + n <= p.count else { throw .invalid }
        for k in 0..<n where p[i + k] != word.utf8Start[k] { throw .invalid }
        i += n
    }

    private mutating func enter() throws(Failure) {
        depth += 1
        guard depth <= Self.maxDepth else { throw .invalid }
        i += 1
        skipSpace()
    }

    private mutating func object() throws(Failure) -> JSONValue {
        try enter()
        var members = [(key: String, value: JSONValue)]()
        if i < p.count, p[i] == UInt8(ascii: "}") {
            i += 1; depth -= 1
            return .object(JSONObject(members))
        }
        // Keys seen, for objects too large to scan for a repeat.
        var seen: Set<String>?
        while true {
            guard i < p.count, p[i] == UInt8(ascii: "\"") else { throw .invalid }
            let key = try string()
            skipSpace()
            guard i < p.count, p[i] == UInt8(ascii: ":") else { throw .invalid }
            i += 1
            skipSpace()
            let v = try value()
            if duplicate == nil {
                if members.count == 16 { seen = Set(members.map(\.key)) }
                let repeated = seen != nil ? !seen!.insert(key).inserted : members.contains { $0.key == key }
                if repeated { duplicate = key }
            }
            members.append((key, v))
            skipSpace()
            guard i < p.count else { throw .invalid }
            if p[i] == UInt8(ascii: ",") { i += 1; skipSpace(); continue }
            guard p[i] == UInt8(ascii: "}") else { throw .invalid }
            i += 1; depth -= 1
            return .object(JSONObject(members))
        }
    }

    private mutating func array() throws(Failure) -> JSONValue {
        try enter()
        var items = [JSONValue]()
        if i < p.count, p[i] == UInt8(ascii: "]") {
            i += 1; depth -= 1
            return .array(items)
        }
        while true {
            items.append(try value())
            skipSpace()
            guard i < p.count else { throw .invalid }
            if p[i] == UInt8(ascii: ",") { i += 1; skipSpace(); continue }
            guard p[i] == UInt8(ascii: "]") else { throw .invalid }
            i += 1; depth -= 1
            return .array(items)
        }
    }

    /// A string, from its opening quote. The common case, no escape, is one scan and one copy.
    private mutating func string() throws(Failure) -> String {
        i += 1
        let start = i
        var nonASCII = false
        while i < p.count {
            i = JSONScan.plainWords(p, from: i, nonASCII: &nonASCII)
            guard i < p.count else { break }
            let c = p[i]
            if c == UInt8(ascii: "\"") {
                defer { i += 1 }
                let bytes = UnsafeBufferPointer(rebasing: p[start..<i])
                if !nonASCII { return String(decoding: bytes, as: UTF8.self) }
                guard let s = String(validating: bytes, as: UTF8.self) else { throw .invalid }
                return s
            }
            if c == UInt8(ascii: "\\") { return try escapedString(from: start) }
            if c < 0x20 { throw .invalid }
            if c >= 0x80 { nonASCII = true }
            i += 1
        }
        throw .invalid
    }

    private mutating func escapedString(from start: Int) throws(Failure) -> String {
        scratch.removeAll(keepingCapacity: true)
        scratch.append(contentsOf: UnsafeBufferPointer(rebasing: p[start..<i]))
        while i < p.count {
            let c = p[i]
            if c == UInt8(ascii: "\"") {
                i += 1
                guard let s = String(validating: scratch, as: UTF8.self) else { throw .invalid }
                return s
            }
            if c < 0x20 { throw .invalid }
            guard c == UInt8(ascii: "\\") else { scratch.append(c); i += 1; continue }
            guard i + 1 < p.count else { throw .invalid }
            i += 2
            switch p[i - 1] {
            case UInt8(ascii: "\""): scratch.append(UInt8(ascii: "\""))
            case UInt8(ascii: "\\"): scratch.append(UInt8(ascii: "\\"))
            case UInt8(ascii: "/"): scratch.append(UInt8(ascii: "/"))
            case UInt8(ascii: "b"): scratch.append(0x08)
            case UInt8(ascii: "f"): scratch.append(0x0c)
            case UInt8(ascii: "n"): scratch.append(0x0a)
            case UInt8(ascii: "r"): scratch.append(0x0d)
            case UInt8(ascii: "t"): scratch.append(0x09)
            case UInt8(ascii: "u"):
                var scalar = try hex4()
                if (0xD800..<0xDC00).contains(scalar) {
                    // A high surrogate must be followed by an escaped low one.
                    guard i + 1 < p.count, p[i] == UInt8(ascii: "\\"), p[i + 1] == UInt8(ascii: "u") else { throw .invalid }
                    i += 2
                    let low = try hex4()
                    guard (0xDC00..<0xE000).contains(low) else { throw .invalid }
                    scalar = 0x10000 + ((scalar - 0xD800) << 10) + (low - 0xDC00)
                } else if (0xDC00..<0xE000).contains(scalar) {
                    throw .invalid
                }
                guard let u = Unicode.Scalar(scalar) else { throw .invalid }
                scratch.append(contentsOf: UTF8.encode(u)!)
            default: throw .invalid
            }
        }
        throw .invalid
    }

    private mutating func hex4() throws(Failure) -> UInt32 {
        guard i + 4 <= p.count else { throw .invalid }
        var v: UInt32 = 0
        for _ in 0..<4 {
            let c = p[i]
            let d: UInt8
            switch c {
            case 0x30...0x39: d = c - 0x30
            case 0x41...0x46: d = c - 0x41 + 10
            case 0x61...0x66: d = c - 0x61 + 10
            default: throw .invalid
            }
            v = v << 4 | UInt32(d)
            i += 1
        }
        return v
    }

    private func isDigit(_ k: Int) -> Bool { k < p.count && p[k] >= 0x30 && p[k] <= 0x39 }

    /// `-? (0 | [1-9][0-9]*) (. [0-9]+)? ([eE] [+-]? [0-9]+)?`
    private mutating func number() throws(Failure) -> JSONValue {
        let start = i
        let negative = p[i] == UInt8(ascii: "-")
        if negative { i += 1 }
        guard isDigit(i) else { throw .invalid }
        if p[i] == 0x30 {
            i += 1
            if isDigit(i) { throw .invalid } // no leading zeros
        } else {
            while isDigit(i) { i += 1 }
        }
        var integral = true
        if i < p.count, p[i] == UInt8(ascii: ".") {
            integral = false
            i += 1
            guard isDigit(i) else { throw .invalid }
            while isDigit(i) { i += 1 }
        }
        if i < p.count, p[i] == UInt8(ascii: "e") || p[i] == UInt8(ascii: "E") {
            integral = false
            i += 1
            if i < p.count, p[i] == UInt8(ascii: "+") || p[i] == UInt8(ascii: "-") { i += 1 }
            guard isDigit(i) else { throw .invalid }
            while isDigit(i) { i += 1 }
        }
        if integral {
            // Accumulate negatively so that Int64.min fits.
            var v: Int64 = 0, exact = true
            for k in (negative ? start + 1 : start)..<i {
                let (m, o1) = v.multipliedReportingOverflow(by: 10)
                let (s, o2) = m.subtractingReportingOverflow(Int64(p[k] - 0x30))
                if o1 || o2 { exact = false; break }
                v = s
            }
            if exact, negative { return .integer(v) }
            if exact, v != .min { return .integer(-v) }
        }
        let text = String(decoding: UnsafeBufferPointer(rebasing: p[start..<i]), as: UTF8.self)
        guard let d = Double(text), d.isFinite else { throw .invalid }
        return integral ? .bigInteger(text, d) : .number(d)
    }
}

import Foundation

/// Writes JSON as UTF-8 bytes into a growing buffer, compact or in Foundation's pretty layout.
///
/// ```swift
/// var writer = JSONWriter(pretty: false)
/// writer.beginObject()
/// writer.key("name"); writer.string("n1")
/// writer.key("count"); writer.int(3)
/// writer.endObject()
/// // writer.bytes holds {"name":"n1","count":3}
/// ```
///
/// The caller writes keys in the order it wants them (the record shape writes them sorted by
/// their UTF-8 bytes). Strings are escaped as RFC 8259 requires: `"` and `\`, and every control
/// character below U+0020 (`\b \f \n \r \t` by name, the others as `\u00XX`); `/` is not escaped.
/// Doubles are written in their shortest form that reads back to the same bits, without a
/// trailing `.0`; a double that is not finite has no JSON form and throws.
///
/// The pretty layout is the one `JSONSerialization` writes with `.prettyPrinted`: two spaces per
/// level, `"key" : value`, and an empty object or array as an open line (`{\n\n}`).
package struct JSONWriter {
    package var bytes: [UInt8] = []
    package let pretty: Bool
    /// Whether the open containers have an element yet, innermost last.
    private var hasElement: [Bool] = []
    private var afterKey = false

    package init(pretty: Bool = false, capacity: Int = 4096) {
        self.pretty = pretty
        bytes.reserveCapacity(capacity)
    }

    /// Empties the buffer, keeping its capacity.
    package mutating func reset() {
        bytes.removeAll(keepingCapacity: true)
        hasElement.removeAll(keepingCapacity: true)
        afterKey = false
    }

    /// Hands the bytes written so far to `write` and empties the buffer, keeping its capacity
    /// and the place in the document: what is written next continues it (for streaming a
    /// large document in pieces).
    package mutating func flush(to write: (UnsafeRawBufferPointer) throws -> Void) rethrows {
        try bytes.withUnsafeBytes(write)
        bytes.removeAll(keepingCapacity: true)
    }

    private mutating func indent(_ depth: Int) {
        bytes.append(0x0a)
        for _ in 0..<depth { bytes.append(0x20); bytes.append(0x20) }
    }

    /// The separator before a value or key: none after a key, a comma between elements, and in
    /// the pretty layout a new line at the element's depth.
    private mutating func element() {
        if afterKey { afterKey = false; return }
        guard let last = hasElement.indices.last else { return }
        if hasElement[last] { bytes.append(UInt8(ascii: ",")) }
        hasElement[last] = true
        if pretty { indent(hasElement.count) }
    }

    private mutating func end(_ close: UInt8) {
        let had = hasElement.removeLast()
        if pretty {
            if !had { bytes.append(0x0a) }
            indent(hasElement.count)
        }
        bytes.append(close)
    }

    package mutating func beginObject() { element(); bytes.append(UInt8(ascii: "{")); hasElement.append(false) }
    package mutating func endObject() { end(UInt8(ascii: "}")) }
    package mutating func beginArray() { element(); bytes.append(UInt8(ascii: "[")); hasElement.append(false) }
    package mutating func endArray() { end(UInt8(ascii: "]")) }

    package mutating func key(_ key: String) {
        element()
        writeString(key)
        if pretty {
            bytes.append(0x20); bytes.append(UInt8(ascii: ":")); bytes.append(0x20)
        } else {
            bytes.append(UInt8(ascii: ":"))
        }
        afterKey = true
    }

    package mutating func string(_ value: String) {
        element()
        writeString(value)
    }

    package mutating func int(_ value: Int64) {
        element()
        if value >= 0 && value < 10 {
            bytes.append(0x30 + UInt8(value))
        } else {
            bytes.append(contentsOf: String(value).utf8)
        }
    }

    package mutating func bool(_ value: Bool) {
        element()
        bytes.append(contentsOf: value ? Self.trueBytes : Self.falseBytes)
    }

    package mutating func null() {
        element()
        bytes.append(contentsOf: Self.nullBytes)
    }

    /// Writes `value` in its shortest round-trip form (`2.5`, `3`, `1e-07`, `1e+300`).
    /// - Throws: ``JSONWriter/NonFiniteNumber`` for NaN and the infinities.
    package mutating func double(_ value: Double) throws {
        guard value.isFinite else { throw NonFiniteNumber() }
        element()
        var text = value.description
        // Swift's shortest round-trip text; JSON has no `.0` suffix of its own, and Foundation
        // writes 3.0 as `3`: keep that.
        if text.hasSuffix(".0") { text.removeLast(2) }
        bytes.append(contentsOf: text.utf8)
    }

    /// A double that is NaN or infinite: JSON has no number for it.
    package struct NonFiniteNumber: Error {}

    private static let trueBytes = Array("true".utf8), falseBytes = Array("false".utf8), nullBytes = Array("null".utf8)
    private static let hex = Array("0123456789abcdef".utf8)

    private mutating func writeString(_ value: String) {
        bytes.append(UInt8(ascii: "\""))
        var value = value
        value.withUTF8 { utf8 in
            var start = 0, i = 0, nonASCII = false
            while i < utf8.count {
                i = JSONScan.plainWords(utf8, from: i, nonASCII: &nonASCII)
                guard i < utf8.count else { break }
                let at = i, c = utf8[i]
                i += 1
                guard c < 0x20 || c == UInt8(ascii: "\"") || c == UInt8(ascii: "\\") else { continue }
                if start < at { bytes.append(contentsOf: UnsafeBufferPointer(rebasing: utf8[start..<at])) }
                start = at + 1
                bytes.append(UInt8(ascii: "\\"))
                switch c {
                case UInt8(ascii: "\""): bytes.append(UInt8(ascii: "\""))
                case UInt8(ascii: "\\"): bytes.append(UInt8(ascii: "\\"))
                case 0x08: bytes.append(UInt8(ascii: "b"))
                case 0x0c: bytes.append(UInt8(ascii: "f"))
                case 0x0a: bytes.append(UInt8(ascii: "n"))
                case 0x0d: bytes.append(UInt8(ascii: "r"))
                case 0x09: bytes.append(UInt8(ascii: "t"))
                default:
                    bytes.append(contentsOf: [UInt8(ascii: "u"), 0x30, 0x30, Self.hex[Int(c >> 4)], Self.hex[Int(c & 0x0f)]])
                }
            }
            if start < utf8.count { bytes.append(contentsOf: UnsafeBufferPointer(rebasing: utf8[start...])) }
        }
        bytes.append(UInt8(ascii: "\""))
    }
}

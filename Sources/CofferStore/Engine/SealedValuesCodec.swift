import Foundation

/// The binary plaintext of a record's encrypted fields, before sealing. Self-describing,
/// so the schema only has to confirm it.
///
/// Layout (integers big-endian): version `0x01`; field count (u16); per field: key length
/// (u8) and key, type tag (u8), value; then ISO/IEC 7816-4 padding (`0x80`, zeros) to a
/// multiple of 64 bytes, so lengths show only in 64-byte buckets.
///
/// Type tags: 1 string (u32 length + UTF-8), 2 int (8 bytes), 3 double (8-byte IEEE bits),
/// 4 bool (1 byte), 5 date (8-byte IEEE bits of seconds since 2001-01-01, Foundation's reference date), 6 bytes (u32 length +
/// bytes), 7 reference (u32 length + UTF-8), 8 list (element tag u8, u32 count, elements).
enum SealedValuesCodec {
    static let version: UInt8 = 1
    static let paddingBlock = 64

    static func encode(_ values: [String: RecordValue]) -> [UInt8] {
        var out = [UInt8]()
        // The padded size, so that the padding does not grow (copy) the buffer at the end.
        out.reserveCapacity((estimatedSize(values) + paddingBlock - 1) / paddingBlock * paddingBlock)
        out.append(version)
        precondition(values.count <= Int(UInt16.max), "records are limited to Limits.maxFieldsPerRecord fields before encoding")
        out.append(UInt8(values.count >> 8))
        out.append(UInt8(values.count & 0xff))
        for (key, value) in values.sorted(by: { $0.key < $1.key }) {
            out.append(UInt8(key.utf8.count))
            out.append(contentsOf: key.utf8)
            append(value, to: &out, withTag: true)
        }
        out.append(0x80)
        let padded = (out.count + paddingBlock - 1) / paddingBlock * paddingBlock
        out.append(contentsOf: repeatElement(0, count: padded - out.count))
        return out
    }

    static func estimatedSize(_ values: [String: RecordValue]) -> Int {
        values.reduce(68) { sum, pair in
            switch pair.value {
            case .string(let s), .reference(let s): return sum + pair.key.utf8.count + 6 + s.utf8.count
            case .bytes(let b): return sum + pair.key.utf8.count + 6 + b.count
            default: return sum + pair.key.utf8.count + 16
            }
        }
    }

    static func tag(of type: FieldType) -> UInt8 {
        switch type {
        case .string: return 1
        case .int: return 2
        case .double: return 3
        case .bool: return 4
        case .date: return 5
        case .bytes: return 6
        case .reference: return 7
        case .list: return 8
        }
    }

    static func type(ofTag tag: UInt8) -> FieldType? {
        switch tag {
        case 1: return .string
        case 2: return .int
        case 3: return .double
        case 4: return .bool
        case 5: return .date
        case 6: return .bytes
        case 7: return .reference
        default: return nil
        }
    }

    static func append(_ value: RecordValue, to out: inout [UInt8], withTag: Bool) {
        func u32(_ v: Int) { for shift in stride(from: 24, through: 0, by: -8) { out.append(UInt8(v >> shift & 0xff)) } }
        func u64(_ v: UInt64) { for shift in stride(from: 56, through: 0, by: -8) { out.append(UInt8(v >> UInt64(shift) & 0xff)) } }
        if withTag { out.append(tag(of: value.fieldType)) }
        switch value {
        case .string(var s), .reference(var s):
            s.withUTF8 { utf8 in
                u32(utf8.count)
                out.append(contentsOf: utf8)
            }
        case .int(let v): u64(UInt64(bitPattern: v))
        case .double(let v): u64(v.bitPattern)
        case .bool(let v): out.append(v ? 1 : 0)
        case .date(let d): u64(d.timeIntervalSinceReferenceDate.bitPattern)
        case .bytes(let b):
            u32(b.count)
            out.append(contentsOf: b)
        case .list(let items):
            out.append(tag(of: value.fieldType.scalar))
            u32(items.count)
            for item in items { append(item, to: &out, withTag: false) }
        }
    }

    /// Decodes an opened plaintext. A failure here means the sealed bytes authenticated but
    /// do not parse: `.integrityFailure`.
    static func decode(_ bytes: [UInt8]) throws -> [String: RecordValue] {
        try bytes.withUnsafeBytes { try decode($0) }
    }

    static func decode(_ raw: UnsafeRawBufferPointer) throws -> [String: RecordValue] {
        var end = raw.count
        while end > 0 && raw[end - 1] == 0 { end -= 1 }
        guard raw.count % paddingBlock == 0, end > 0, raw[end - 1] == 0x80, raw.count - end < paddingBlock else {
            throw RawReader.failure("padding", in: "encrypted values")
        }
        var r = RawReader(UnsafeRawBufferPointer(rebasing: raw[0..<end - 1]), what: "encrypted values")
        guard try r.u8() == version else { throw r.fail("unknown version") }
        let count = Int(try r.u16())
        var values = [String: RecordValue](minimumCapacity: count)
        for _ in 0..<count {
            let key = try r.utf8(count: Int(try r.u8()))
            guard values[key] == nil else { throw r.fail("duplicate key") }
            let t = try r.u8()
            if t == 8 {
                guard let element = type(ofTag: try r.u8()) else { throw r.fail("list element type") }
                let n = Int(try r.u32())
                guard n <= r.remaining else { throw r.fail("list length") }
                var items = [RecordValue]()
                items.reserveCapacity(n)
                for _ in 0..<n { items.append(try scalar(element, &r)) }
                values[key] = .list(items)
            } else {
                guard let type = type(ofTag: t) else { throw r.fail("type tag") }
                values[key] = try scalar(type, &r)
            }
        }
        guard r.remaining == 0 else { throw r.fail("trailing bytes") }
        return values
    }

    private static func scalar(_ type: FieldType, _ r: inout RawReader) throws -> RecordValue {
        switch type {
        case .string: return .string(try r.utf8(count: Int(try r.u32())))
        case .reference: return .reference(try r.utf8(count: Int(try r.u32())))
        case .int: return .int(Int64(bitPattern: try r.u64()))
        case .double: return .double(Double(bitPattern: try r.u64()))
        case .bool:
            let b = try r.u8()
            guard b <= 1 else { throw r.fail("bool") }
            return .bool(b == 1)
        case .date: return .date(Date(timeIntervalSinceReferenceDate: Double(bitPattern: try r.u64())))
        case .bytes: return .bytes(Array(try r.take(Int(try r.u32()))))
        case .list: throw r.fail("nested list")
        }
    }
}

/// Bounds-checked big-endian reads over raw bytes; every failure is `.integrityFailure`
/// (the bytes came from storage and authenticated, or were read from a plain column).
struct RawReader {
    let buffer: UnsafeRawBufferPointer
    var offset = 0
    let what: StaticString

    init(_ buffer: UnsafeRawBufferPointer, what: StaticString) {
        self.buffer = buffer
        self.what = what
    }

    var remaining: Int { buffer.count - offset }

    static func failure(_ detail: String, in what: StaticString) -> StoreError {
        StoreError(.integrityFailure, "a record's \(what) are damaged (\(detail))")
    }

    func fail(_ detail: String) -> StoreError { Self.failure(detail, in: what) }

    @inline(__always)
    mutating func take(_ n: Int) throws -> UnsafeRawBufferPointer {
        guard n >= 0, n <= remaining else { throw fail("ends early") }
        defer { offset += n }
        return UnsafeRawBufferPointer(rebasing: buffer[offset..<offset + n])
    }

    @inline(__always)
    mutating func u8() throws -> UInt8 {
        guard remaining >= 1 else { throw fail("ends early") }
        defer { offset += 1 }
        return buffer[offset]
    }

    mutating func u16() throws -> UInt16 {
        let b = try take(2)
        return UInt16(b[0]) << 8 | UInt16(b[1])
    }

    mutating func u32() throws -> UInt32 {
        let b = try take(4)
        return UInt32(b[0]) << 24 | UInt32(b[1]) << 16 | UInt32(b[2]) << 8 | UInt32(b[3])
    }

    mutating func u64() throws -> UInt64 {
        let b = try take(8)
        var v: UInt64 = 0
        for i in 0..<8 { v = v << 8 | UInt64(b[i]) }
        return v
    }

    mutating func utf8(count: Int) throws -> String {
        let bytes = try take(count)
        // ASCII (most text) is valid UTF-8 as it stands: the standard library's typed-buffer path
        // copies it in one pass; `String(validating:)` on raw bytes takes a generic, slower one.
        if Self.isASCII(bytes) { return String(decoding: bytes.assumingMemoryBound(to: UInt8.self), as: UTF8.self) }
        guard let s = String(validating: bytes, as: UTF8.self) else { throw fail("text is not UTF-8") }
        return s
    }

    /// Whether every byte is below 0x80, eight at a time.
    static func isASCII(_ bytes: UnsafeRawBufferPointer) -> Bool {
        var high: UInt64 = 0
        var i = 0
        while i + 8 <= bytes.count {
            high |= bytes.loadUnaligned(fromByteOffset: i, as: UInt64.self)
            i += 8
        }
        while i < bytes.count {
            high |= UInt64(bytes[i])
            i += 1
        }
        return high & 0x8080_8080_8080_8080 == 0
    }
}

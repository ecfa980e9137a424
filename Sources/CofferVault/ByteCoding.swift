import CofferCrypto

/// Writes big-endian fields into a buffer, or only counts them when the buffer is nil
/// (so secret bodies are sized first, then written once into guarded memory).
struct ByteWriter {
    private let buffer: UnsafeMutableRawBufferPointer?
    private(set) var offset = 0

    init(into buffer: UnsafeMutableRawBufferPointer?) { self.buffer = buffer }

    mutating func raw(_ source: UnsafeRawBufferPointer) {
        if let buffer, source.count > 0 {
            precondition(offset + source.count <= buffer.count, "ByteWriter overflow")
            (buffer.baseAddress! + offset).copyMemory(from: source.baseAddress!, byteCount: source.count)
        }
        offset += source.count
    }

    mutating func bytes(_ b: [UInt8]) { b.withUnsafeBytes { raw($0) } }
    mutating func secret(_ s: SecureBytes) { s.withUnsafeBytes { raw($0) } }
    mutating func u8(_ v: UInt8) { bytes([v]) }
    mutating func u32(_ v: UInt32) { bytes(BigEndian.bytes(v)) }
    mutating func i64(_ v: Int64) { bytes(BigEndian.bytes(UInt64(bitPattern: v))) }
    mutating func string(_ s: String) {
        let utf8 = Array(s.utf8)
        u32(UInt32(utf8.count))
        bytes(utf8)
    }
    mutating func framedSecret(_ s: SecureBytes) {
        u32(UInt32(s.count))
        secret(s)
    }
}

/// Reads big-endian fields; every read checks bounds and throws ``VaultError`` (`.malformed`
/// by default) instead of trapping.
struct ByteReader {
    private let buffer: UnsafeRawBufferPointer
    private(set) var offset = 0
    private let errorCode: VaultError.Code
    private let what: String

    init(_ buffer: UnsafeRawBufferPointer, what: String, errorCode: VaultError.Code = .malformed) {
        self.buffer = buffer
        self.what = what
        self.errorCode = errorCode
    }

    var remaining: Int { buffer.count - offset }

    private func fail(_ detail: String) -> VaultError {
        VaultError(errorCode, "\(what) is damaged: \(detail)")
    }

    mutating func take(_ count: Int) throws -> UnsafeRawBufferPointer {
        guard count >= 0, count <= remaining else { throw fail("ends early") }
        defer { offset += count }
        return UnsafeRawBufferPointer(rebasing: buffer[offset..<offset + count])
    }

    mutating func bytes(_ count: Int) throws -> [UInt8] { Array(try take(count)) }
    mutating func secret(_ count: Int) throws -> SecureBytes { SecureBytes(copying: try take(count)) }
    mutating func u8() throws -> UInt8 { try take(1)[0] }
    mutating func u16() throws -> UInt16 { try take(2).reduce(0) { $0 << 8 | UInt16($1) } }
    mutating func u32() throws -> UInt32 { try take(4).reduce(0) { $0 << 8 | UInt32($1) } }
    mutating func u64() throws -> UInt64 { try take(8).reduce(UInt64(0)) { $0 << 8 | UInt64($1) } }
    mutating func i64() throws -> Int64 { Int64(bitPattern: try take(8).reduce(UInt64(0)) { $0 << 8 | UInt64($1) }) }

    mutating func string(max: Int = 1 << 16) throws -> String {
        let count = Int(try u32())
        guard count <= max else { throw fail("a text field is longer than \(max) bytes") }
        let raw = try take(count)
        guard let s = String(validating: raw, as: UTF8.self) else { throw fail("a text field is not UTF-8") }
        return s
    }

    mutating func framedSecret(max: Int) throws -> SecureBytes {
        let count = Int(try u32())
        guard count <= max else { throw fail("a secret is longer than \(max) bytes") }
        return try secret(count)
    }
}

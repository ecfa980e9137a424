/// Lowercase hexadecimal for public values (ids, public keys, hashes); never for secrets.
public enum Hex {
    private static let digits = Array("0123456789abcdef".utf8)

    public static func encode(_ bytes: some Sequence<UInt8>) -> String {
        var out = [UInt8]()
        for b in bytes {
            out.append(digits[Int(b >> 4)])
            out.append(digits[Int(b & 0x0f)])
        }
        return String(decoding: out, as: UTF8.self)
    }

    /// Decodes hexadecimal (either case); nil for odd lengths or other characters.
    public static func decode(_ string: String) -> [UInt8]? {
        let chars = Array(string.utf8)
        guard chars.count % 2 == 0 else { return nil }
        var out = [UInt8]()
        out.reserveCapacity(chars.count / 2)
        var i = 0
        while i < chars.count {
            guard let hi = value(chars[i]), let lo = value(chars[i + 1]) else { return nil }
            out.append(hi << 4 | lo)
            i += 2
        }
        return out
    }

    private static func value(_ c: UInt8) -> UInt8? {
        switch c {
        case UInt8(ascii: "0")...UInt8(ascii: "9"): return c - UInt8(ascii: "0")
        case UInt8(ascii: "a")...UInt8(ascii: "f"): return c - UInt8(ascii: "a") + 10
        case UInt8(ascii: "A")...UInt8(ascii: "F"): return c - UInt8(ascii: "A") + 10
        default: return nil
        }
    }
}

/// Big-endian integer encoding helpers for on-disk formats.
public enum BigEndian {
    public static func bytes(_ v: UInt16) -> [UInt8] { [UInt8(v >> 8), UInt8(v & 0xff)] }
    public static func bytes(_ v: UInt32) -> [UInt8] { (0..<4).map { UInt8((v >> (8 * (3 - $0))) & 0xff) } }
    public static func bytes(_ v: UInt64) -> [UInt8] { (0..<8).map { UInt8((v >> (8 * (7 - $0))) & 0xff) } }
    /// Two's-complement bytes of a signed value (never traps, whatever a stored row holds).
    public static func bytes(_ v: Int64) -> [UInt8] { bytes(UInt64(bitPattern: v)) }
}

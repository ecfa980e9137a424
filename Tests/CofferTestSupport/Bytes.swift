import CofferCrypto

/// The UTF-8 bytes of `text` in guarded memory.
public func secure(_ text: String) -> SecureBytes { SecureBytes(copying: Array(text.utf8)) }

/// Test-local hex decoding, independent of the crypto module's own (which has its own tests).
/// Traps on malformed input: vectors in the tests are typed in or come from fixed files.
public func hexBytes(_ string: String) -> [UInt8] {
    let chars = Array(string.utf8)
    precondition(chars.count % 2 == 0, "odd-length hex: \(string)")
    func nibble(_ c: UInt8) -> UInt8 {
        switch c {
        case 48...57: return c - 48 // 0-9
        case 97...102: return c - 87 // a-f
        case 65...70: return c - 55 // A-F
        default: preconditionFailure("bad hex digit in \(string)")
        }
    }
    return stride(from: 0, to: chars.count, by: 2).map { nibble(chars[$0]) << 4 | nibble(chars[$0 + 1]) }
}

/// Test-local lowercase hex encoding.
public func hexString(_ bytes: some Sequence<UInt8>) -> String {
    let digits = Array("0123456789abcdef".utf8)
    var out = [UInt8]()
    for b in bytes { out.append(digits[Int(b >> 4)]); out.append(digits[Int(b & 0x0f)]) }
    return String(decoding: out, as: UTF8.self)
}

/// Whether `needle` occurs anywhere in `haystack` (an empty needle always does).
public func containsSubsequence(_ haystack: [UInt8], _ needle: [UInt8]) -> Bool {
    guard !needle.isEmpty, needle.count <= haystack.count else { return needle.isEmpty }
    let first = needle[0]
    let last = haystack.count - needle.count
    return haystack.withUnsafeBufferPointer { h in
        needle.withUnsafeBufferPointer { n in
            var i = 0
            while i <= last {
                if h[i] == first {
                    var j = 1
                    while j < n.count && h[i + j] == n[j] { j += 1 }
                    if j == n.count { return true }
                }
                i += 1
            }
            return false
        }
    }
}

/// Random lowercase letters: distinctive values to search for.
public func randomLetters(_ count: Int) -> String {
    let letters = Array("abcdefghijklmnopqrstuvwxyz")
    return String((0..<count).map { _ in letters[Int.random(in: 0..<letters.count)] })
}

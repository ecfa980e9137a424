import Foundation
@testable import CofferCrypto

/// Test-local hex decoding, independent of the module's `Hex` (which has its own tests).
/// Traps on malformed input: vectors in these tests are typed in or come from fixed files.
func hexBytes(_ string: String) -> [UInt8] {
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
func hexString(_ bytes: some Sequence<UInt8>) -> String {
    bytes.map { String(format: "%02x", $0) }.joined()
}

/// `bytes` with the byte at `index` XORed with `mask` (non-zero, so the byte always changes).
func flipping(_ bytes: [UInt8], at index: Int, mask: UInt8 = 0xff) -> [UInt8] {
    precondition(mask != 0)
    var copy = bytes
    copy[index] ^= mask
    return copy
}

/// The masks used by the tamper tests: lowest bit, highest bit, every bit.
let tamperMasks: [UInt8] = [0x01, 0x80, 0xff]

extension CryptoError {
    /// True for ``CryptoError/malformedInput(_:)`` whatever its message.
    var isMalformedInput: Bool {
        if case .malformedInput = self { return true }
        return false
    }

    /// True for ``CryptoError/parametersOutOfRange(_:)`` whatever its message.
    var isParametersOutOfRange: Bool {
        if case .parametersOutOfRange = self { return true }
        return false
    }
}

/// A 32-byte symmetric key from hex (traps on a wrong length: test fixtures only).
func symmetricKey(hex: String) -> SymmetricKey {
    try! SymmetricKey(bytes: SecureBytes(copying: hexBytes(hex)))
}

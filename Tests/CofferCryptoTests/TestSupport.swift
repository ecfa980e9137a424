import CofferTestSupport
import Foundation
@testable import CofferCrypto

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

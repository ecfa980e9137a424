import Foundation
internal import CSodium

/// XChaCha20-Poly1305-IETF authenticated encryption (libsodium
/// `crypto_aead_xchacha20poly1305_ietf_*`). Every seal draws a fresh random
/// 192-bit nonce; callers never supply one. Associated data has no default: every caller
/// says what the box is bound to (`[UInt8]()` only where nothing is).
///
/// ```swift
/// let key = SymmetricKey()
/// let box = try XChaCha20Poly1305.seal(Array("hello".utf8), using: key, authenticating: Array("ad".utf8))
/// let plain = try XChaCha20Poly1305.open(box, using: key, authenticating: Array("ad".utf8))
/// ```
public enum XChaCha20Poly1305 {
    public static let nonceByteCount = 24
    public static let tagByteCount = 16
    /// Bytes added to a plaintext by ``seal(_:using:authenticating:)-(ContiguousBytes,_,_)``: nonce and tag.
    public static let overhead = nonceByteCount + tagByteCount

    /// A sealed message. Byte layout of ``combined``:
    ///
    /// | offset | length | content |
    /// | --- | --- | --- |
    /// | 0 | 24 | nonce |
    /// | 24 | n | ciphertext (same length as the plaintext) |
    /// | 24 + n | 16 | Poly1305 tag |
    public struct SealedBox: Sendable, Equatable {
        /// nonce ‖ ciphertext ‖ tag.
        public let combined: [UInt8]

        /// Validates the length (at least nonce and tag) and keeps the bytes.
        public init(combined: [UInt8]) throws {
            guard combined.count >= XChaCha20Poly1305.overhead else {
                throw CryptoError.malformedInput("sealed box shorter than nonce and tag (\(combined.count) bytes)")
            }
            self.combined = combined
        }

        public var nonce: ArraySlice<UInt8> { combined[0..<XChaCha20Poly1305.nonceByteCount] }
        public var ciphertextAndTag: ArraySlice<UInt8> { combined[XChaCha20Poly1305.nonceByteCount...] }
        /// The length of the plaintext inside.
        public var plaintextCount: Int { combined.count - XChaCha20Poly1305.overhead }
    }

    /// Seals `plaintext` under `key`, binding `authenticatedData`.
    public static func seal(_ plaintext: some ContiguousBytes, using key: SymmetricKey,
                            authenticating authenticatedData: some ContiguousBytes) throws -> SealedBox {
        try plaintext.withUnsafeBytes { p in
            try authenticatedData.withUnsafeBytes { ad in
                try SealedBox(combined: sealRaw(p, key: key, ad: ad))
            }
        }
    }

    /// Seals secret bytes (for example a key being wrapped) without copying them out of guarded memory.
    public static func seal(_ plaintext: SecureBytes, using key: SymmetricKey,
                            authenticating authenticatedData: some ContiguousBytes) throws -> SealedBox {
        try plaintext.withUnsafeBytes { p in
            try authenticatedData.withUnsafeBytes { ad in
                try SealedBox(combined: sealRaw(p, key: key, ad: ad))
            }
        }
    }

    /// Opens a sealed box; throws ``CryptoError/authenticationFailure`` if the key,
    /// the associated data or any byte differs.
    public static func open(_ box: SealedBox, using key: SymmetricKey,
                            authenticating authenticatedData: some ContiguousBytes) throws -> [UInt8] {
        var out = [UInt8](repeating: 0, count: box.plaintextCount)
        try out.withUnsafeMutableBytes { o in
            try box.combined.withUnsafeBytes { c in
                try authenticatedData.withUnsafeBytes { ad in
                    try openRaw(c, into: o, key: key, ad: ad)
                }
            }
        }
        return out
    }

    /// Opens a sealed box straight into guarded memory (for wrapped keys and vault bodies).
    public static func openSecret(_ box: SealedBox, using key: SymmetricKey,
                                  authenticating authenticatedData: some ContiguousBytes) throws -> SecureBytes {
        try box.combined.withUnsafeBytes { c in
            try authenticatedData.withUnsafeBytes { ad in
                try SecureBytes(count: box.plaintextCount) { o in
                    try openRaw(c, into: o, key: key, ad: ad)
                }
            }
        }
    }

    // MARK: - Raw

    /// nonce ‖ ciphertext ‖ tag for `plaintext`, with a fresh random nonce.
    static func sealRaw(_ plaintext: UnsafeRawBufferPointer, key: SymmetricKey, ad: UnsafeRawBufferPointer) -> [UInt8] {
        let total = nonceByteCount + plaintext.count + tagByteCount
        return [UInt8](unsafeUninitializedCapacity: total) { out, initialized in
            sealRaw(plaintext, into: UnsafeMutableRawBufferPointer(out), key: key, ad: ad)
            initialized = total
        }
    }

    /// Writes nonce ‖ ciphertext ‖ tag for `plaintext` into `out` (exactly that long), with a
    /// fresh random nonce: the next of `nonces` when given, else drawn now.
    static func sealRaw(_ plaintext: UnsafeRawBufferPointer, into out: UnsafeMutableRawBufferPointer, key: SymmetricKey,
                        ad: UnsafeRawBufferPointer, nonces: NonceReserve? = nil) {
        Sodium.ensureInitialized()
        precondition(out.count == nonceByteCount + plaintext.count + tagByteCount, "sealed box buffer length")
        let base = out.baseAddress!.assumingMemoryBound(to: UInt8.self)
        if let nonces { nonces.take(into: base) } else { randombytes_buf(base, nonceByteCount) }
        var clen: UInt64 = 0
        key.withUnsafeBytes { k in
            _ = crypto_aead_xchacha20poly1305_ietf_encrypt(
                base + nonceByteCount, &clen,
                plaintext.baseAddress?.assumingMemoryBound(to: UInt8.self), UInt64(plaintext.count),
                ad.baseAddress?.assumingMemoryBound(to: UInt8.self), UInt64(ad.count),
                nil, base, k.baseAddress!.assumingMemoryBound(to: UInt8.self))
        }
        precondition(Int(clen) == plaintext.count + tagByteCount)
    }

    /// Opens `combined` (nonce ‖ ciphertext ‖ tag) into `out`, which has room for the plaintext.
    static func openRaw(_ combined: UnsafeRawBufferPointer, into out: UnsafeMutableRawBufferPointer,
                        key: SymmetricKey, ad: UnsafeRawBufferPointer) throws {
        Sodium.ensureInitialized()
        guard combined.count >= overhead, out.count >= combined.count - overhead else {
            throw CryptoError.malformedInput("sealed box shorter than nonce and tag")
        }
        let base = combined.baseAddress!.assumingMemoryBound(to: UInt8.self)
        var mlen: UInt64 = 0
        let result = key.withUnsafeBytes { k in
            crypto_aead_xchacha20poly1305_ietf_decrypt(
                out.baseAddress?.assumingMemoryBound(to: UInt8.self) ?? UnsafeMutablePointer(mutating: base), &mlen, nil,
                base + nonceByteCount, UInt64(combined.count - nonceByteCount),
                ad.baseAddress?.assumingMemoryBound(to: UInt8.self), UInt64(ad.count),
                base, k.baseAddress!.assumingMemoryBound(to: UInt8.self))
        }
        guard result == 0 else { throw CryptoError.authenticationFailure }
    }

    /// Encrypts with a caller-chosen nonce. Only for known-answer tests of the primitive;
    /// not public, so no Coffer code path can reuse a nonce.
    static func sealWithNonceForTesting(_ plaintext: [UInt8], key: [UInt8], nonce: [UInt8], ad: [UInt8]) -> [UInt8] {
        Sodium.ensureInitialized()
        precondition(key.count == 32 && nonce.count == nonceByteCount)
        var out = [UInt8](repeating: 0, count: plaintext.count + tagByteCount)
        var clen: UInt64 = 0
        _ = crypto_aead_xchacha20poly1305_ietf_encrypt(&out, &clen, plaintext, UInt64(plaintext.count),
                                                       ad, UInt64(ad.count), nil, nonce, key)
        return out
    }

    /// Decrypts ciphertext ‖ tag with an explicit nonce: for test vectors only.
    static func openWithNonceForTesting(_ ciphertextAndTag: [UInt8], key: [UInt8], nonce: [UInt8], ad: [UInt8]) throws -> [UInt8] {
        Sodium.ensureInitialized()
        guard key.count == 32, nonce.count == nonceByteCount, ciphertextAndTag.count >= tagByteCount else {
            throw CryptoError.malformedInput("key, nonce or tag length")
        }
        var out = [UInt8](repeating: 0, count: ciphertextAndTag.count - tagByteCount)
        var mlen: UInt64 = 0
        let r = crypto_aead_xchacha20poly1305_ietf_decrypt(&out, &mlen, nil, ciphertextAndTag, UInt64(ciphertextAndTag.count),
                                                           ad, UInt64(ad.count), nonce, key)
        guard r == 0 else { throw CryptoError.authenticationFailure }
        return out
    }
}

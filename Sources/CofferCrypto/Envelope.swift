import Foundation

/// A versioned XChaCha20-Poly1305 envelope that names the key that sealed it.
///
/// Byte layout (integers big-endian):
///
/// | offset | length | content |
/// | --- | --- | --- |
/// | 0 | 1 | envelope version, `0x01` |
/// | 1 | 4 | key id (for zone keys: the key epoch) |
/// | 5 | 24 | nonce (random) |
/// | 29 | n | ciphertext |
/// | 29 + n | 16 | tag |
///
/// The AEAD's associated data is the 5-byte header followed by the caller's associated
/// data, so neither the version nor the key id can be changed without detection. The caller's
/// associated data has no default: every caller says what the envelope is bound to.
public struct Envelope: Sendable, Equatable {
    public static let version: UInt8 = 1
    public static let headerByteCount = 5
    /// Total bytes added to a plaintext.
    public static let overhead = headerByteCount + XChaCha20Poly1305.overhead

    /// The encoded envelope.
    public let bytes: [UInt8]

    /// Parses an encoded envelope, rejecting unknown versions and short input.
    public init(bytes: [UInt8]) throws {
        guard bytes.count >= Self.overhead else {
            throw CryptoError.malformedInput("envelope too short (\(bytes.count) bytes)")
        }
        guard bytes[0] == Self.version else {
            throw CryptoError.malformedInput("unknown envelope version \(bytes[0])")
        }
        self.bytes = bytes
    }

    /// The id of the key that sealed this envelope.
    public var keyID: UInt32 {
        UInt32(bytes[1]) << 24 | UInt32(bytes[2]) << 16 | UInt32(bytes[3]) << 8 | UInt32(bytes[4])
    }

    /// The length of the plaintext inside.
    public var plaintextCount: Int { bytes.count - Self.overhead }

    /// Seals `plaintext` under `key`, naming it `keyID`, binding `authenticatedData`.
    public static func seal(_ plaintext: some ContiguousBytes, using key: SymmetricKey, keyID: UInt32,
                            authenticating authenticatedData: some ContiguousBytes) -> Envelope {
        let header = headerBytes(keyID: keyID)
        let box: [UInt8] = plaintext.withUnsafeBytes { p in
            withAssociatedData(header: header, authenticatedData) { ad in
                XChaCha20Poly1305.sealRaw(p, key: key, ad: ad)
            }
        }
        var out = header
        out.reserveCapacity(header.count + box.count)
        out.append(contentsOf: box)
        return try! Envelope(bytes: out) // length and version are correct by construction
    }

    /// Opens the envelope; throws ``CryptoError/authenticationFailure`` when the key, the
    /// associated data, the key id or any byte differs.
    public func open(using key: SymmetricKey, authenticating authenticatedData: some ContiguousBytes) throws -> [UInt8] {
        let header = Array(bytes[0..<Self.headerByteCount])
        var out = [UInt8](repeating: 0, count: plaintextCount)
        try out.withUnsafeMutableBytes { o in
            try bytes.withUnsafeBytes { all in
                try Self.withAssociatedData(header: header, authenticatedData) { ad in
                    try XChaCha20Poly1305.openRaw(UnsafeRawBufferPointer(rebasing: all[Self.headerByteCount...]),
                                                  into: o, key: key, ad: ad)
                }
            }
        }
        return out
    }

    /// Seals `plaintext` in place of a caller's buffers and returns the encoded envelope
    /// (header ‖ nonce ‖ ciphertext ‖ tag) in one allocation: the form the record store writes.
    /// The nonce is drawn here, fresh and random, as in ``seal(_:using:keyID:authenticating:)-(ContiguousBytes,_,_,_)``.
    public static func sealedBytes(_ plaintext: UnsafeRawBufferPointer, using key: SymmetricKey, keyID: UInt32,
                                   authenticating authenticatedData: UnsafeRawBufferPointer) -> [UInt8] {
        sealedBytes(plaintext, using: key, keyID: keyID, authenticating: authenticatedData, nonces: nil)
    }

    /// As ``sealedBytes(_:using:keyID:authenticating:)``, taking the nonce from `nonces` (one
    /// operation's reserve) when given.
    package static func sealedBytes(_ plaintext: UnsafeRawBufferPointer, using key: SymmetricKey, keyID: UInt32,
                                    authenticating authenticatedData: UnsafeRawBufferPointer, nonces: NonceReserve?) -> [UInt8] {
        let total = overhead + plaintext.count
        // The header is written in place (no array of its own for each seal), then read back
        // from there into the associated data.
        return [UInt8](unsafeUninitializedCapacity: total) { out, initialized in
            let raw = UnsafeMutableRawBufferPointer(out)
            let header = [version, UInt8(keyID >> 24), UInt8((keyID >> 16) & 0xff), UInt8((keyID >> 8) & 0xff), UInt8(keyID & 0xff)] as InlineArray<5, UInt8>
            for i in 0..<headerByteCount { raw[i] = header[i] }
            withFullAssociatedData(header: UnsafeRawBufferPointer(rebasing: raw[0..<headerByteCount]), authenticatedData) { ad in
                XChaCha20Poly1305.sealRaw(plaintext, into: UnsafeMutableRawBufferPointer(rebasing: raw[headerByteCount...]), key: key, ad: ad,
                                          nonces: nonces)
            }
            initialized = total
        }
    }

    /// Seals secret bytes (a key) without copying them out of guarded memory.
    public static func seal(_ secret: SecureBytes, using key: SymmetricKey, keyID: UInt32,
                            authenticating authenticatedData: some ContiguousBytes) -> Envelope {
        secret.withUnsafeBytes { seal($0, using: key, keyID: keyID, authenticating: authenticatedData) }
    }

    /// Opens the envelope straight into guarded memory (for wrapped keys).
    public func openSecret(using key: SymmetricKey, authenticating authenticatedData: some ContiguousBytes) throws -> SecureBytes {
        let header = Array(bytes[0..<Self.headerByteCount])
        return try authenticatedData.withUnsafeBytes { extra in
            var ad = header
            ad.append(contentsOf: extra)
            return try bytes.withUnsafeBytes { all in
                try ad.withUnsafeBytes { adRaw in
                    try SecureBytes(count: plaintextCount) { out in
                        try XChaCha20Poly1305.openRaw(UnsafeRawBufferPointer(rebasing: all[Self.headerByteCount...]),
                                                      into: out, key: key, ad: adRaw)
                    }
                }
            }
        }
    }

    /// The key id of an encoded envelope in place; throws for short input or unknown versions.
    public static func keyID(of envelope: UnsafeRawBufferPointer) throws -> UInt32 {
        guard envelope.count >= overhead else { throw CryptoError.malformedInput("envelope too short (\(envelope.count) bytes)") }
        guard envelope[0] == version else { throw CryptoError.malformedInput("unknown envelope version \(envelope[0])") }
        return UInt32(envelope[1]) << 24 | UInt32(envelope[2]) << 16 | UInt32(envelope[3]) << 8 | UInt32(envelope[4])
    }

    /// Opens an encoded envelope in place (for example straight from a database column),
    /// without copying it first. The same checks as ``open(using:authenticating:)``.
    public static func open(_ envelope: UnsafeRawBufferPointer, using key: SymmetricKey,
                            authenticating authenticatedData: UnsafeRawBufferPointer) throws -> [UInt8] {
        _ = try keyID(of: envelope)
        let plaintextCount = envelope.count - overhead
        return try withFullAssociatedData(header: UnsafeRawBufferPointer(rebasing: envelope[0..<headerByteCount]), authenticatedData) { ad in
            try [UInt8](unsafeUninitializedCapacity: plaintextCount) { out, initialized in
                try XChaCha20Poly1305.openRaw(UnsafeRawBufferPointer(rebasing: envelope[headerByteCount...]),
                                              into: UnsafeMutableRawBufferPointer(out), key: key, ad: ad)
                initialized = plaintextCount
            }
        }
    }

    /// Opens an encoded envelope in place into temporary memory, passes the plaintext to
    /// `body`, then wipes it: for callers that decode the plaintext straight away.
    /// Not generic, so that a call from another module needs no type metadata at run time.
    public static func withOpened(_ envelope: UnsafeRawBufferPointer, using key: SymmetricKey,
                                  authenticating authenticatedData: UnsafeRawBufferPointer,
                                  _ body: (UnsafeRawBufferPointer) throws -> Void) throws {
        try withOpened(envelope, using: key, authenticating: authenticatedData, scratch: nil, body)
    }

    /// As ``withOpened(_:using:authenticating:_:)``, opening into `scratch` when the plaintext
    /// fits (it is wiped after `body`): for a thread that opens many envelopes, a buffer of its
    /// own instead of a temporary allocation each time (Swift puts over 1 KiB on the heap).
    public static func withOpened(_ envelope: UnsafeRawBufferPointer, using key: SymmetricKey,
                                  authenticating authenticatedData: UnsafeRawBufferPointer,
                                  scratch: UnsafeMutableRawBufferPointer?,
                                  _ body: (UnsafeRawBufferPointer) throws -> Void) throws {
        _ = try keyID(of: envelope)
        let plaintextCount = envelope.count - overhead
        try withFullAssociatedData(header: UnsafeRawBufferPointer(rebasing: envelope[0..<headerByteCount]), authenticatedData) { ad in
            func open(into out: UnsafeMutableRawBufferPointer) throws {
                let plaintext = UnsafeMutableRawBufferPointer(rebasing: out[0..<plaintextCount])
                defer { Sodium.wipe(plaintext) }
                try XChaCha20Poly1305.openRaw(UnsafeRawBufferPointer(rebasing: envelope[headerByteCount...]),
                                              into: plaintext, key: key, ad: ad)
                try body(UnsafeRawBufferPointer(plaintext))
            }
            if let scratch, scratch.count >= plaintextCount {
                try open(into: scratch)
            } else {
                try withUnsafeTemporaryAllocation(byteCount: max(plaintextCount, 1), alignment: 16) { try open(into: $0) }
            }
        }
    }

    /// The AEAD's associated data (the envelope header, then the caller's), on the stack.
    private static func withFullAssociatedData<R>(header: UnsafeRawBufferPointer, _ authenticatedData: UnsafeRawBufferPointer,
                                                  _ body: (UnsafeRawBufferPointer) throws -> R) rethrows -> R {
        try withUnsafeTemporaryAllocation(byteCount: headerByteCount + authenticatedData.count, alignment: 1) { ad in
            ad.baseAddress!.copyMemory(from: header.baseAddress!, byteCount: headerByteCount)
            if authenticatedData.count > 0 {
                (ad.baseAddress! + headerByteCount).copyMemory(from: authenticatedData.baseAddress!, byteCount: authenticatedData.count)
            }
            return try body(UnsafeRawBufferPointer(ad))
        }
    }

    static func headerBytes(keyID: UInt32) -> [UInt8] {
        [version, UInt8(keyID >> 24), UInt8((keyID >> 16) & 0xff), UInt8((keyID >> 8) & 0xff), UInt8(keyID & 0xff)]
    }

    private static func withAssociatedData<R>(header: [UInt8], _ extra: some ContiguousBytes,
                                              _ body: (UnsafeRawBufferPointer) throws -> R) rethrows -> R {
        try extra.withUnsafeBytes { e in
            var ad = header
            ad.append(contentsOf: e)
            return try ad.withUnsafeBytes(body)
        }
    }
}

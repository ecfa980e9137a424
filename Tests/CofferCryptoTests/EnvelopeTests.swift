import Foundation
import Testing
@testable import CofferCrypto

@Suite("Envelope")
struct EnvelopeTests {
    static let plaintext = Array("the zone body, v1".utf8)
    static let ad = Array("vault:7f3a/zone:2".utf8)

    @Test("seal then open round-trips; keyID and lengths are as sealed")
    func roundTrip() throws {
        let key = SymmetricKey()
        for keyID: UInt32 in [0, 1, 0x0102_0304, .max] {
            let env = Envelope.seal(Self.plaintext, using: key, keyID: keyID, authenticating: Self.ad)
            #expect(env.keyID == keyID)
            #expect(env.plaintextCount == Self.plaintext.count)
            #expect(env.bytes.count == Self.plaintext.count + 45)
            #expect(try env.open(using: key, authenticating: Self.ad) == Self.plaintext)
            // Re-parsed from its bytes, it is the same envelope.
            let parsed = try Envelope(bytes: env.bytes)
            #expect(parsed == env)
            #expect(try parsed.open(using: key, authenticating: Self.ad) == Self.plaintext)
        }
        // Empty associated data is allowed when given explicitly.
        let empty = Envelope.seal([UInt8](), using: key, keyID: 9, authenticating: [UInt8]())
        #expect(empty.bytes.count == Envelope.overhead)
        #expect(try empty.open(using: key, authenticating: [UInt8]()) == [])
    }

    @Test("opening in place gives the plaintext, in a caller's scratch buffer when it fits (wiped after), else in temporary memory",
          arguments: [0, 17, 1_043, 5_000])
    func openedInPlace(count: Int) throws {
        let key = SymmetricKey()
        let plaintext = (0..<count).map { UInt8(truncatingIfNeeded: $0 &* 7 &+ 1) }
        let env = Envelope.seal(plaintext, using: key, keyID: 3, authenticating: Self.ad)
        let scratch = UnsafeMutableRawBufferPointer.allocate(byteCount: 2_048, alignment: 16)
        defer { scratch.deallocate() }
        scratch.initializeMemory(as: UInt8.self, repeating: 0xEE)
        for buffer in [nil, scratch] as [UnsafeMutableRawBufferPointer?] {
            var seen = [UInt8]()
            var inScratch = false
            try env.bytes.withUnsafeBytes { sealed in
                try Self.ad.withUnsafeBytes { ad in
                    try Envelope.withOpened(sealed, using: key, authenticating: ad, scratch: buffer) { opened in
                        seen = Array(opened)
                        inScratch = opened.count > 0 && opened.baseAddress == UnsafeRawPointer(scratch.baseAddress)
                    }
                }
            }
            #expect(seen == plaintext)
            #expect(inScratch == (buffer != nil && count > 0 && count <= 2_048))
        }
        // What was opened in the scratch buffer is zero now; the rest is untouched.
        let used = count <= 2_048 ? count : 0
        #expect(scratch[0..<used].allSatisfy { $0 == 0 })
        #expect(scratch[used...].allSatisfy { $0 == 0xEE })
        // A changed byte still fails, with or without scratch.
        var bad = env.bytes
        bad[bad.count - 1] ^= 1
        #expect(throws: CryptoError.self) {
            try bad.withUnsafeBytes { sealed in
                try Self.ad.withUnsafeBytes { ad in try Envelope.withOpened(sealed, using: key, authenticating: ad, scratch: scratch) { _ in } }
            }
        }
    }

    @Test("layout: version 0x01, big-endian key id, then an XChaCha20-Poly1305 box bound to header ‖ AD")
    func layout() throws {
        let keyBytes = (0..<32).map { UInt8(0xa0 &+ $0) }
        let key = try SymmetricKey(bytes: SecureBytes(copying: keyBytes))
        let env = Envelope.seal(Self.plaintext, using: key, keyID: 0xA1B2_C3D4, authenticating: Self.ad)
        let header: [UInt8] = [0x01, 0xa1, 0xb2, 0xc3, 0xd4]
        #expect(Array(env.bytes[0..<5]) == header)
        #expect(Envelope.headerBytes(keyID: 0xA1B2_C3D4) == header)
        #expect(Envelope.version == 1)
        #expect(Envelope.headerByteCount == 5)
        #expect(Envelope.overhead == 45)

        // The rest is nonce ‖ ciphertext ‖ tag, with header ‖ caller AD as associated data.
        let nonce = Array(env.bytes[5..<29])
        let body = Array(env.bytes[29...])
        #expect(try XChaCha20Poly1305.openWithNonceForTesting(body, key: keyBytes, nonce: nonce, ad: header + Self.ad)
            == Self.plaintext)
        #expect(XChaCha20Poly1305.sealWithNonceForTesting(Self.plaintext, key: keyBytes, nonce: nonce, ad: header + Self.ad)
            == body)
        // Without the header in the AD, the box does not open.
        let box = try XChaCha20Poly1305.SealedBox(combined: Array(env.bytes[5...]))
        #expect(throws: CryptoError.authenticationFailure) {
            try XChaCha20Poly1305.open(box, using: key, authenticating: Self.ad)
        }
    }

    @Test("two seals of the same plaintext differ (fresh nonce)")
    func freshNonces() {
        let key = SymmetricKey()
        let a = Envelope.seal(Self.plaintext, using: key, keyID: 3, authenticating: Self.ad)
        let b = Envelope.seal(Self.plaintext, using: key, keyID: 3, authenticating: Self.ad)
        #expect(a != b)
        #expect(a.bytes[5..<29] != b.bytes[5..<29])
        #expect(a.bytes[29...] != b.bytes[29...])
    }

    @Test("flipping any byte is refused: the version byte as malformed input, every other byte at open")
    func tamperEveryByte() throws {
        let key = SymmetricKey()
        let env = Envelope.seal(Self.plaintext, using: key, keyID: 0x0000_0102, authenticating: Self.ad)
        for index in env.bytes.indices {
            for mask in tamperMasks {
                let bytes = flipping(env.bytes, at: index, mask: mask)
                if index == 0 {
                    // Any other version is refused when parsing.
                    let error = #expect(throws: CryptoError.self, "version ^ \(mask)") { try Envelope(bytes: bytes) }
                    #expect(error?.isMalformedInput == true, "version ^ \(mask): \(String(describing: error))")
                } else {
                    let tampered = try Envelope(bytes: bytes)
                    if (1..<5).contains(index) {
                        #expect(tampered.keyID != env.keyID) // the header names another key...
                    }
                    #expect(throws: CryptoError.authenticationFailure, "byte \(index) ^ \(mask)") {
                        try tampered.open(using: key, authenticating: Self.ad) // ...and does not authenticate
                    }
                }
            }
        }
        #expect(try env.open(using: key, authenticating: Self.ad) == Self.plaintext)
    }

    @Test("a key id rewritten to another valid id does not open")
    func movedKeyID() throws {
        let key = SymmetricKey()
        let env = Envelope.seal(Self.plaintext, using: key, keyID: 5, authenticating: Self.ad)
        var bytes = env.bytes
        bytes.replaceSubrange(1..<5, with: BigEndian.bytes(UInt32(6)))
        let moved = try Envelope(bytes: bytes)
        #expect(moved.keyID == 6)
        #expect(throws: CryptoError.authenticationFailure) { try moved.open(using: key, authenticating: Self.ad) }
    }

    @Test("wrong associated data and the wrong key are refused")
    func wrongADAndKey() throws {
        let key = SymmetricKey()
        let env = Envelope.seal(Self.plaintext, using: key, keyID: 1, authenticating: Self.ad)
        #expect(throws: CryptoError.authenticationFailure) { try env.open(using: key, authenticating: [UInt8]()) }
        #expect(throws: CryptoError.authenticationFailure) {
            try env.open(using: key, authenticating: flipping(Self.ad, at: Self.ad.count - 1, mask: 0x01))
        }
        #expect(throws: CryptoError.authenticationFailure) {
            try env.open(using: SymmetricKey(), authenticating: Self.ad)
        }
        // The same key id does not make another key right.
        let other = Envelope.seal(Self.plaintext, using: SymmetricKey(), keyID: 1, authenticating: Self.ad)
        #expect(throws: CryptoError.authenticationFailure) { try other.open(using: key, authenticating: Self.ad) }
    }

    @Test("truncated, extended and too-short envelopes are refused")
    func lengths() throws {
        let key = SymmetricKey()
        let env = Envelope.seal(Self.plaintext, using: key, keyID: 1, authenticating: Self.ad)
        #expect(throws: CryptoError.authenticationFailure) {
            try Envelope(bytes: Array(env.bytes.dropLast())).open(using: key, authenticating: Self.ad)
        }
        #expect(throws: CryptoError.authenticationFailure) {
            try Envelope(bytes: env.bytes + [0]).open(using: key, authenticating: Self.ad)
        }
        for n in [0, 1, 5, 29, 44] {
            let error = #expect(throws: CryptoError.self, "length \(n)") { try Envelope(bytes: Array(env.bytes.prefix(n))) }
            #expect(error?.isMalformedInput == true, "length \(n): \(String(describing: error))")
        }
        #expect(try Envelope(bytes: Array(env.bytes.prefix(45))).plaintextCount == 0)
    }

    @Test("unknown versions are malformed input", arguments: [UInt8(0), 2, 0x7f, 0xff])
    func unknownVersion(_ version: UInt8) throws {
        var bytes = Envelope.seal(Self.plaintext, using: SymmetricKey(), keyID: 1, authenticating: Self.ad).bytes
        bytes[0] = version
        let error = #expect(throws: CryptoError.self) { try Envelope(bytes: bytes) }
        #expect(error?.isMalformedInput == true, "\(String(describing: error))")
    }

    // MARK: - Secret bytes in and out

    @Test("seal(SecureBytes) / openSecret round-trip, interchangeably with seal / open")
    func secretRoundTrip() throws {
        let key = SymmetricKey()
        let secret = SecureBytes.random(count: 32)
        let env = Envelope.seal(secret, using: key, keyID: 0x0A0B_0C0D, authenticating: Self.ad)
        #expect(env.keyID == 0x0A0B_0C0D)
        #expect(env.bytes.count == 32 + 45)
        #expect(Array(env.bytes[0..<5]) == [1, 0x0a, 0x0b, 0x0c, 0x0d])
        #expect(try env.openSecret(using: key, authenticating: Self.ad) == secret)
        #expect(try env.open(using: key, authenticating: Self.ad) == secret.unsafeCopiedBytes())
        // And an envelope sealed from plain bytes opens as a secret.
        let plain = Envelope.seal(Self.plaintext, using: key, keyID: 2, authenticating: Self.ad)
        #expect(try plain.openSecret(using: key, authenticating: Self.ad).unsafeCopiedBytes() == Self.plaintext)
        // Empty secret, empty associated data.
        let empty = Envelope.seal(SecureBytes(copying: [UInt8]()), using: key, keyID: 3, authenticating: [UInt8]())
        #expect(try empty.openSecret(using: key, authenticating: [UInt8]()).count == 0)
    }

    @Test("openSecret refuses every flipped byte, wrong associated data and the wrong key")
    func secretRefusals() throws {
        let key = SymmetricKey()
        let env = Envelope.seal(SecureBytes.random(count: 32), using: key, keyID: 77, authenticating: Self.ad)
        for index in 1..<env.bytes.count {
            for mask in tamperMasks {
                let tampered = try Envelope(bytes: flipping(env.bytes, at: index, mask: mask))
                #expect(throws: CryptoError.authenticationFailure, "byte \(index) ^ \(mask)") {
                    try tampered.openSecret(using: key, authenticating: Self.ad)
                }
            }
        }
        #expect(throws: CryptoError.authenticationFailure) { try env.openSecret(using: key, authenticating: [UInt8]()) }
        #expect(throws: CryptoError.authenticationFailure) { try env.openSecret(using: key, authenticating: Self.ad + [0]) }
        #expect(throws: CryptoError.authenticationFailure) { try env.openSecret(using: SymmetricKey(), authenticating: Self.ad) }
    }

    // MARK: - In-place (raw buffer) API

    @Test("keyID(of:) reads the key id in place and rejects short input and unknown versions")
    func keyIDInPlace() throws {
        let env = Envelope.seal(Self.plaintext, using: SymmetricKey(), keyID: 0xDEAD_BEEF, authenticating: Self.ad)
        #expect(try env.bytes.withUnsafeBytes { try Envelope.keyID(of: $0) } == 0xDEAD_BEEF)
        for bad in [Array(env.bytes.prefix(44)), [], flipping(env.bytes, at: 0, mask: 0x03)] {
            let error = #expect(throws: CryptoError.self, "\(bad.count) bytes") {
                try bad.withUnsafeBytes { try Envelope.keyID(of: $0) }
            }
            #expect(error?.isMalformedInput == true, "\(String(describing: error))")
        }
    }

    @Test("open(_:using:authenticating:) in place equals open, also from inside a larger buffer")
    func openInPlace() throws {
        let key = SymmetricKey()
        let env = Envelope.seal(Self.plaintext, using: key, keyID: 12, authenticating: Self.ad)
        let opened = try env.bytes.withUnsafeBytes { e in
            try Self.ad.withUnsafeBytes { ad in try Envelope.open(e, using: key, authenticating: ad) }
        }
        #expect(opened == Self.plaintext)
        // The envelope as a column inside a bigger row buffer.
        let row: [UInt8] = [9, 9, 9] + env.bytes + [7, 7]
        let fromRow = try row.withUnsafeBytes { r in
            try Self.ad.withUnsafeBytes { ad in
                try Envelope.open(UnsafeRawBufferPointer(rebasing: r[3..<(3 + env.bytes.count)]), using: key, authenticating: ad)
            }
        }
        #expect(fromRow == Self.plaintext)
        // Empty associated data (an empty buffer may have no base address) and empty plaintext.
        let bare = Envelope.seal([UInt8](), using: key, keyID: 1, authenticating: [UInt8]())
        let bareOpened = try bare.bytes.withUnsafeBytes { e in
            try Envelope.open(e, using: key, authenticating: UnsafeRawBufferPointer(start: nil, count: 0))
        }
        #expect(bareOpened == [])
        let withText = Envelope.seal(Self.plaintext, using: key, keyID: 1, authenticating: [UInt8]())
        let textOpened = try withText.bytes.withUnsafeBytes { e in
            try [UInt8]().withUnsafeBytes { ad in try Envelope.open(e, using: key, authenticating: ad) }
        }
        #expect(textOpened == Self.plaintext)
    }

    @Test("open in place refuses every flipped byte (version: malformed input), wrong AD, wrong key, short input")
    func openInPlaceRefusals() throws {
        let key = SymmetricKey()
        let env = Envelope.seal(Self.plaintext, using: key, keyID: 0x0102_0304, authenticating: Self.ad)
        func openRaw(_ bytes: [UInt8], key: SymmetricKey = key, ad: [UInt8] = Self.ad) throws -> [UInt8] {
            try bytes.withUnsafeBytes { e in try ad.withUnsafeBytes { a in try Envelope.open(e, using: key, authenticating: a) } }
        }
        #expect(try openRaw(env.bytes) == Self.plaintext)
        for index in env.bytes.indices {
            for mask in tamperMasks {
                let bytes = flipping(env.bytes, at: index, mask: mask)
                if index == 0 {
                    let error = #expect(throws: CryptoError.self, "version ^ \(mask)") { try openRaw(bytes) }
                    #expect(error?.isMalformedInput == true, "version ^ \(mask): \(String(describing: error))")
                } else {
                    #expect(throws: CryptoError.authenticationFailure, "byte \(index) ^ \(mask)") { try openRaw(bytes) }
                }
            }
        }
        #expect(throws: CryptoError.authenticationFailure) { try openRaw(env.bytes, ad: []) }
        #expect(throws: CryptoError.authenticationFailure) { try openRaw(env.bytes, ad: Self.ad.dropLast()) }
        #expect(throws: CryptoError.authenticationFailure) { try openRaw(env.bytes, key: SymmetricKey()) }
        #expect(throws: CryptoError.authenticationFailure) { try openRaw(Array(env.bytes.dropLast())) }
        for n in [0, 5, 44] {
            let error = #expect(throws: CryptoError.self, "length \(n)") { try openRaw(Array(env.bytes.prefix(n))) }
            #expect(error?.isMalformedInput == true, "length \(n): \(String(describing: error))")
        }
    }
}

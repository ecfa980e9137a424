import CofferTestSupport
import Foundation
import Testing
@testable import CofferCrypto

@Suite("XChaCha20Poly1305")
struct XChaCha20Poly1305Tests {
    // MARK: - Known answer: draft-irtf-cfrg-xchacha-03, appendix A.3.1

    static let katPlaintext = Array(
        "Ladies and Gentlemen of the class of '99: If I could offer you only one tip for the future, sunscreen would be it.".utf8)
    static let katAAD = hexBytes("50515253c0c1c2c3c4c5c6c7")
    static let katKey = hexBytes("808182838485868788898a8b8c8d8e8f909192939495969798999a9b9c9d9e9f")
    static let katNonce = hexBytes("404142434445464748494a4b4c4d4e4f5051525354555657")
    static let katCiphertext = hexBytes(
        "bd6d179d3e83d43b9576579493c0e939572a1700252bfaccbed2902c21396cbb"
            + "731c7f1b0b4aa6440bf3a82f4eda7e39ae64c6708c54c216cb96b72e1213b452"
            + "2f8c9ba40db5d945b11b69b982c1bb9e3f3fac2bc369488f76b2383565d3fff9"
            + "21f9664c97637da9768812f615c68b13b52e")
    static let katTag = hexBytes("c0875924c1c7987947deafd8780acf49")

    @Test("draft-irtf-cfrg-xchacha-03 A.3.1: seal with the fixed nonce gives the published ciphertext and tag")
    func knownAnswerSeal() {
        #expect(Self.katPlaintext.count == 114)
        #expect(Self.katCiphertext.count == Self.katPlaintext.count)
        let out = XChaCha20Poly1305.sealWithNonceForTesting(Self.katPlaintext, key: Self.katKey,
                                                            nonce: Self.katNonce, ad: Self.katAAD)
        #expect(out.count == Self.katPlaintext.count + XChaCha20Poly1305.tagByteCount)
        #expect(hexString(out.prefix(Self.katPlaintext.count)) == hexString(Self.katCiphertext))
        #expect(hexString(out.suffix(16)) == "c0875924c1c7987947deafd8780acf49")
    }

    @Test("draft-irtf-cfrg-xchacha-03 A.3.1: open gives the plaintext back")
    func knownAnswerOpen() throws {
        let plain = try XChaCha20Poly1305.openWithNonceForTesting(Self.katCiphertext + Self.katTag, key: Self.katKey,
                                                                  nonce: Self.katNonce, ad: Self.katAAD)
        #expect(plain == Self.katPlaintext)
    }

    @Test("A.3.1 through the public API: nonce ‖ ciphertext ‖ tag opens with open and openSecret")
    func knownAnswerThroughPublicAPI() throws {
        let box = try XChaCha20Poly1305.SealedBox(combined: Self.katNonce + Self.katCiphertext + Self.katTag)
        #expect(Array(box.nonce) == Self.katNonce)
        #expect(Array(box.ciphertextAndTag) == Self.katCiphertext + Self.katTag)
        #expect(box.plaintextCount == 114)
        let key = try SymmetricKey(bytes: SecureBytes(copying: Self.katKey))
        #expect(try XChaCha20Poly1305.open(box, using: key, authenticating: Self.katAAD) == Self.katPlaintext)
        let secret = try XChaCha20Poly1305.openSecret(box, using: key, authenticating: Self.katAAD)
        #expect(secret.unsafeCopiedBytes() == Self.katPlaintext)
    }

    @Test("A.3.1 with a changed tag, AAD, nonce or key is refused")
    func knownAnswerRefusals() {
        let sealed = Self.katCiphertext + Self.katTag
        #expect(throws: CryptoError.authenticationFailure) {
            try XChaCha20Poly1305.openWithNonceForTesting(flipping(sealed, at: sealed.count - 1, mask: 0x01), key: Self.katKey,
                                                          nonce: Self.katNonce, ad: Self.katAAD)
        }
        #expect(throws: CryptoError.authenticationFailure) {
            try XChaCha20Poly1305.openWithNonceForTesting(sealed, key: Self.katKey, nonce: Self.katNonce,
                                                          ad: flipping(Self.katAAD, at: 0, mask: 0x01))
        }
        #expect(throws: CryptoError.authenticationFailure) {
            try XChaCha20Poly1305.openWithNonceForTesting(sealed, key: Self.katKey,
                                                          nonce: flipping(Self.katNonce, at: 23, mask: 0x01), ad: Self.katAAD)
        }
        #expect(throws: CryptoError.authenticationFailure) {
            try XChaCha20Poly1305.openWithNonceForTesting(sealed, key: flipping(Self.katKey, at: 0, mask: 0x01),
                                                          nonce: Self.katNonce, ad: Self.katAAD)
        }
    }

    @Test("openWithNonceForTesting rejects wrong key, nonce and tag lengths as malformed input")
    func testingAPILengthChecks() {
        let sealed = Self.katCiphertext + Self.katTag
        let cases: [(key: [UInt8], nonce: [UInt8], box: [UInt8])] = [
            (Array(Self.katKey.prefix(31)), Self.katNonce, sealed),
            (Self.katKey + [0], Self.katNonce, sealed),
            (Self.katKey, Array(Self.katNonce.prefix(12)), sealed),
            (Self.katKey, Self.katNonce + [0], sealed),
            (Self.katKey, Self.katNonce, Array(Self.katTag.prefix(15))),
        ]
        for (i, c) in cases.enumerated() {
            let error = #expect(throws: CryptoError.self, "case \(i)") {
                try XChaCha20Poly1305.openWithNonceForTesting(c.box, key: c.key, nonce: c.nonce, ad: Self.katAAD)
            }
            #expect(error?.isMalformedInput == true, "case \(i): \(String(describing: error))")
        }
    }

    // MARK: - Round trips and layout

    @Test("seal then open round-trips, with and without associated data, for several lengths")
    func roundTrip() throws {
        let key = SymmetricKey()
        for length in [0, 1, 15, 16, 17, 63, 64, 65, 1000, 4096] {
            let plaintext = (0..<length).map { UInt8(truncatingIfNeeded: $0 &* 31 &+ 7) }
            let ad = Array("zone:\(length)".utf8)
            let box = try XChaCha20Poly1305.seal(plaintext, using: key, authenticating: ad)
            #expect(box.combined.count == length + XChaCha20Poly1305.overhead)
            #expect(box.plaintextCount == length)
            #expect(try XChaCha20Poly1305.open(box, using: key, authenticating: ad) == plaintext)
            #expect(try XChaCha20Poly1305.openSecret(box, using: key, authenticating: ad).unsafeCopiedBytes() == plaintext)

            // Empty associated data, given explicitly.
            let noAD = try XChaCha20Poly1305.seal(plaintext, using: key, authenticating: [UInt8]())
            #expect(try XChaCha20Poly1305.open(noAD, using: key, authenticating: [UInt8]()) == plaintext)
        }
    }

    @Test("sealing SecureBytes round-trips into SecureBytes")
    func secureBytesRoundTrip() throws {
        let key = SymmetricKey()
        let secret = SecureBytes.random(count: 32)
        let box = try XChaCha20Poly1305.seal(secret, using: key, authenticating: Array("wrap".utf8))
        #expect(box.plaintextCount == 32)
        let opened = try XChaCha20Poly1305.openSecret(box, using: key, authenticating: Array("wrap".utf8))
        #expect(opened == secret)
        #expect(try XChaCha20Poly1305.open(box, using: key, authenticating: Array("wrap".utf8)) == secret.unsafeCopiedBytes())
    }

    @Test("combined is nonce ‖ ciphertext ‖ tag: its parts open with the raw primitive")
    func combinedLayout() throws {
        let keyBytes = (0..<32).map { UInt8($0) }
        let key = try SymmetricKey(bytes: SecureBytes(copying: keyBytes))
        let plaintext = Array("layout check".utf8)
        let ad = Array("ad".utf8)
        let box = try XChaCha20Poly1305.seal(plaintext, using: key, authenticating: ad)
        let nonce = Array(box.combined[0..<24])
        let rest = Array(box.combined[24...])
        #expect(Array(box.nonce) == nonce)
        #expect(Array(box.ciphertextAndTag) == rest)
        #expect(try XChaCha20Poly1305.openWithNonceForTesting(rest, key: keyBytes, nonce: nonce, ad: ad) == plaintext)
        // And re-sealing with that nonce reproduces the same bytes.
        #expect(XChaCha20Poly1305.sealWithNonceForTesting(plaintext, key: keyBytes, nonce: nonce, ad: ad) == rest)
    }

    @Test("two seals of the same plaintext use different nonces and give different ciphertexts")
    func freshNonces() throws {
        let key = SymmetricKey()
        let plaintext = [UInt8](repeating: 0x41, count: 64)
        let ad = Array("nonce test".utf8)
        let a = try XChaCha20Poly1305.seal(plaintext, using: key, authenticating: ad)
        let b = try XChaCha20Poly1305.seal(plaintext, using: key, authenticating: ad)
        #expect(a.nonce != b.nonce)
        #expect(a.ciphertextAndTag != b.ciphertextAndTag)
        #expect(a != b)
        #expect(a.nonce != ArraySlice(repeating: 0, count: 24))
        // Many seals: no nonce repeats.
        var nonces = Set<[UInt8]>()
        for _ in 0..<200 {
            nonces.insert(Array(try XChaCha20Poly1305.seal(plaintext, using: key, authenticating: ad).nonce))
        }
        #expect(nonces.count == 200)
    }

    // MARK: - Refusals

    @Test("flipping any byte of a sealed box (nonce, ciphertext or tag) is refused")
    func tamperEveryByte() throws {
        let key = SymmetricKey()
        let ad = Array("header".utf8)
        let box = try XChaCha20Poly1305.seal(Array("attack at dawn, bring snacks".utf8), using: key, authenticating: ad)
        #expect(box.combined.count == 28 + 40)
        for index in box.combined.indices {
            for mask in tamperMasks {
                let tampered = try XChaCha20Poly1305.SealedBox(combined: flipping(box.combined, at: index, mask: mask))
                #expect(throws: CryptoError.authenticationFailure, "byte \(index) ^ \(mask)") {
                    try XChaCha20Poly1305.open(tampered, using: key, authenticating: ad)
                }
                #expect(throws: CryptoError.authenticationFailure, "openSecret: byte \(index) ^ \(mask)") {
                    try XChaCha20Poly1305.openSecret(tampered, using: key, authenticating: ad)
                }
            }
        }
        // The untouched box still opens.
        #expect(try XChaCha20Poly1305.open(box, using: key, authenticating: ad) == Array("attack at dawn, bring snacks".utf8))
    }

    @Test("flipping a byte of an empty-plaintext box is refused")
    func tamperEmptyPlaintext() throws {
        let key = SymmetricKey()
        let ad = Array("empty".utf8)
        let box = try XChaCha20Poly1305.seal([UInt8](), using: key, authenticating: ad)
        #expect(box.combined.count == XChaCha20Poly1305.overhead)
        #expect(try XChaCha20Poly1305.open(box, using: key, authenticating: ad) == [])
        for index in box.combined.indices {
            let tampered = try XChaCha20Poly1305.SealedBox(combined: flipping(box.combined, at: index))
            #expect(throws: CryptoError.authenticationFailure, "byte \(index)") {
                try XChaCha20Poly1305.open(tampered, using: key, authenticating: ad)
            }
        }
    }

    @Test("wrong associated data is refused")
    func wrongAssociatedData() throws {
        let key = SymmetricKey()
        let box = try XChaCha20Poly1305.seal(Array("secret".utf8), using: key, authenticating: Array("vault-1".utf8))
        for ad in [Array("vault-2".utf8), Array("vault-1 ".utf8), Array("vault-".utf8), [UInt8]()] {
            #expect(throws: CryptoError.authenticationFailure, "ad \(ad)") {
                try XChaCha20Poly1305.open(box, using: key, authenticating: ad)
            }
        }
        // And a box sealed without AD does not open with AD.
        let plain = try XChaCha20Poly1305.seal(Array("secret".utf8), using: key, authenticating: [UInt8]())
        #expect(throws: CryptoError.authenticationFailure) {
            try XChaCha20Poly1305.open(plain, using: key, authenticating: [0])
        }
    }

    @Test("the wrong key is refused")
    func wrongKey() throws {
        let key = SymmetricKey()
        let ad = Array("wrong key".utf8)
        let box = try XChaCha20Poly1305.seal(Array("secret".utf8), using: key, authenticating: ad)
        #expect(throws: CryptoError.authenticationFailure) {
            try XChaCha20Poly1305.open(box, using: SymmetricKey(), authenticating: ad)
        }
        let nearlyKey = try SymmetricKey(bytes: SecureBytes(copying: flipping(key.bytes.unsafeCopiedBytes(), at: 31, mask: 0x01)))
        #expect(throws: CryptoError.authenticationFailure) {
            try XChaCha20Poly1305.openSecret(box, using: nearlyKey, authenticating: ad)
        }
    }

    @Test("a box shorter than nonce + tag is rejected by init(combined:) as malformed input")
    func tooShort() throws {
        for length in 0..<XChaCha20Poly1305.overhead {
            let error = #expect(throws: CryptoError.self, "length \(length)") {
                try XChaCha20Poly1305.SealedBox(combined: [UInt8](repeating: 7, count: length))
            }
            #expect(error?.isMalformedInput == true, "length \(length): \(String(describing: error))")
        }
        // Exactly nonce + tag is a well-formed (empty) box...
        let minimal = try XChaCha20Poly1305.SealedBox(combined: [UInt8](repeating: 7, count: 40))
        #expect(minimal.plaintextCount == 0)
        // ...which does not authenticate.
        #expect(throws: CryptoError.authenticationFailure) {
            try XChaCha20Poly1305.open(minimal, using: SymmetricKey(), authenticating: [UInt8]())
        }
    }

    @Test("a truncated or extended box is refused")
    func truncatedOrExtended() throws {
        let key = SymmetricKey()
        let ad = Array("lengths".utf8)
        let box = try XChaCha20Poly1305.seal(Array("0123456789".utf8), using: key, authenticating: ad)
        let truncated = try XChaCha20Poly1305.SealedBox(combined: Array(box.combined.dropLast()))
        #expect(throws: CryptoError.authenticationFailure) { try XChaCha20Poly1305.open(truncated, using: key, authenticating: ad) }
        let extended = try XChaCha20Poly1305.SealedBox(combined: box.combined + [0])
        #expect(throws: CryptoError.authenticationFailure) { try XChaCha20Poly1305.open(extended, using: key, authenticating: ad) }
    }

    @Test("constants")
    func constants() {
        #expect(XChaCha20Poly1305.nonceByteCount == 24)
        #expect(XChaCha20Poly1305.tagByteCount == 16)
        #expect(XChaCha20Poly1305.overhead == 40)
        #expect(SymmetricKey.byteCount == 32)
    }
}

import CofferTestSupport
import Foundation
import Testing
@testable import CofferCrypto

/// Every case of the three Wycheproof files. `valid` must succeed with the exact expected
/// output, `invalid` must fail, `acceptable` may go either way (but a success must still give
/// the expected output). Each test counts the cases it ran against the file's `numberOfTests`.
/// Without the vector folder these tests are skipped with the reason, never passed.
@Suite("Wycheproof", .enabled(if: Wycheproof.isAvailable, Wycheproof.unavailableReason))
struct WycheproofTests {
    @Test("xchacha20_poly1305_test.json: all 315 cases")
    func xchacha20Poly1305() throws {
        let file = try Wycheproof.load(Wycheproof.aeadFile, as: Wycheproof.AeadGroup.self)
        #expect(file.algorithm == "XCHACHA20-POLY1305")
        var ran = 0
        var counts: [Wycheproof.Result: Int] = [:]
        for group in file.testGroups {
            for t in group.tests {
                ran += 1
                counts[t.result, default: 0] += 1
                try Self.check(t, group: group)
            }
        }
        #expect(ran == file.numberOfTests)
        #expect(ran == 315)
        #expect(counts[.valid] == 246 && counts[.invalid] == 69, "\(counts)")
    }

    static func check(_ t: Wycheproof.AeadCase, group: Wycheproof.AeadGroup) throws {
        let id: Comment = "tcId \(t.tcId) (\(t.comment), \(t.flags.joined(separator: ",")))"
        let key = hexBytes(t.key), nonce = hexBytes(t.iv), aad = hexBytes(t.aad)
        let msg = hexBytes(t.msg), ct = hexBytes(t.ct), tag = hexBytes(t.tag)
        #expect(key.count * 8 == group.keySize && nonce.count * 8 == group.ivSize, id)

        guard key.count == 32, nonce.count == XChaCha20Poly1305.nonceByteCount, tag.count == XChaCha20Poly1305.tagByteCount
        else {
            // Only 24-byte nonces and 32-byte keys exist for this API: such a vector must be
            // invalid, and the API must reject it as malformed before any decryption.
            // (These vectors carry an empty tag; the check is repeated with a 16-byte tag so that
            // the refusal is due to the nonce or key length alone. The public API cannot even
            // express another nonce length: a SealedBox's first 24 bytes are its nonce.)
            #expect(t.result == .invalid, id)
            for sealed in [ct + tag, ct + [UInt8](repeating: 0, count: 16)] {
                let error = #expect(throws: CryptoError.self, id) {
                    try XChaCha20Poly1305.openWithNonceForTesting(sealed, key: key, nonce: nonce, ad: aad)
                }
                #expect(error?.isMalformedInput == true, id)
            }
            return
        }

        let symmetric = try SymmetricKey(bytes: SecureBytes(copying: key))
        let box = try XChaCha20Poly1305.SealedBox(combined: nonce + ct + tag)
        switch t.result {
        case .valid:
            // Encryption gives exactly ct ‖ tag...
            let sealed = XChaCha20Poly1305.sealWithNonceForTesting(msg, key: key, nonce: nonce, ad: aad)
            #expect(hexString(sealed) == t.ct + t.tag, id)
            // ...decryption gives exactly msg, through the raw and the public paths.
            #expect(try XChaCha20Poly1305.openWithNonceForTesting(ct + tag, key: key, nonce: nonce, ad: aad) == msg, id)
            #expect(try XChaCha20Poly1305.open(box, using: symmetric, authenticating: aad) == msg, id)
            #expect(try XChaCha20Poly1305.openSecret(box, using: symmetric, authenticating: aad).unsafeCopiedBytes() == msg, id)
        case .invalid:
            #expect(throws: CryptoError.authenticationFailure, id) {
                try XChaCha20Poly1305.openWithNonceForTesting(ct + tag, key: key, nonce: nonce, ad: aad)
            }
            #expect(throws: CryptoError.authenticationFailure, id) {
                try XChaCha20Poly1305.open(box, using: symmetric, authenticating: aad)
            }
            #expect(throws: CryptoError.authenticationFailure, id) {
                try XChaCha20Poly1305.openSecret(box, using: symmetric, authenticating: aad)
            }
            // Nor does encrypting msg produce the invalid ciphertext.
            #expect(XChaCha20Poly1305.sealWithNonceForTesting(msg, key: key, nonce: nonce, ad: aad) != ct + tag, id)
        case .acceptable:
            if let plain = try? XChaCha20Poly1305.open(box, using: symmetric, authenticating: aad) {
                #expect(plain == msg, id)
            }
        }
    }

    @Test("x25519_test.json: all 518 cases")
    func x25519() throws {
        let file = try Wycheproof.load(Wycheproof.xdhFile, as: Wycheproof.XdhGroup.self)
        #expect(file.algorithm == "XDH")
        var ran = 0
        var counts: [Wycheproof.Result: Int] = [:]
        var acceptableRefused = 0
        for group in file.testGroups {
            #expect(group.curve == "curve25519")
            for t in group.tests {
                ran += 1
                counts[t.result, default: 0] += 1
                let id: Comment = "tcId \(t.tcId) (\(t.comment), \(t.flags.joined(separator: ",")))"
                let priv = try X25519.PrivateKey(rawRepresentation: SecureBytes(copying: hexBytes(t.privateKey)))
                let pub = try X25519.PublicKey(rawRepresentation: hexBytes(t.publicKey))
                switch t.result {
                case .valid:
                    let shared = try #require(try? priv.sharedSecret(with: pub), id)
                    #expect(hexString(shared.unsafeCopiedBytes()) == t.shared, id)
                case .invalid:
                    // The file has none today; an invalid case must be refused.
                    #expect(throws: CryptoError.invalidPublicKey, id) { try priv.sharedSecret(with: pub) }
                case .acceptable:
                    // libsodium refuses an all-zero result; any other result must be the expected one.
                    do {
                        let shared = try priv.sharedSecret(with: pub)
                        #expect(hexString(shared.unsafeCopiedBytes()) == t.shared, id)
                    } catch let error as CryptoError {
                        acceptableRefused += 1
                        #expect(error == .invalidPublicKey, id)
                        #expect(t.shared == String(repeating: "0", count: 64), "refused, but \(id) has a non-zero result")
                    }
                }
            }
        }
        #expect(ran == file.numberOfTests)
        #expect(ran == 518)
        #expect(counts[.valid] == 264 && counts[.acceptable] == 254, "\(counts)")
        // Every all-zero case was among those refused (and only those).
        #expect(acceptableRefused == 31)
    }

    @Test("ed25519_test.json: all 151 cases")
    func ed25519() throws {
        let file = try Wycheproof.load(Wycheproof.eddsaFile, as: Wycheproof.EddsaGroup.self)
        #expect(file.algorithm == "EDDSA")
        var ran = 0
        var counts: [Wycheproof.Result: Int] = [:]
        for group in file.testGroups {
            #expect(group.publicKey.curve == "edwards25519")
            let publicKey = try Ed25519.PublicKey(rawRepresentation: hexBytes(group.publicKey.pk))
            for t in group.tests {
                ran += 1
                counts[t.result, default: 0] += 1
                let id: Comment = "tcId \(t.tcId) (\(t.comment), \(t.flags.joined(separator: ",")))"
                let msg = hexBytes(t.msg), sig = hexBytes(t.sig)
                switch t.result {
                case .valid:
                    #expect(publicKey.isValidSignature(sig, for: msg), id)
                    #expect(throws: Never.self, id) { try publicKey.verify(sig, for: msg) }
                case .invalid:
                    #expect(!publicKey.isValidSignature(sig, for: msg), id)
                    #expect(throws: CryptoError.invalidSignature, id) { try publicKey.verify(sig, for: msg) }
                case .acceptable:
                    _ = publicKey.isValidSignature(sig, for: msg)
                }
            }
        }
        #expect(ran == file.numberOfTests)
        #expect(ran == 151)
        #expect(counts[.valid] == 88 && counts[.invalid] == 63, "\(counts)")
    }
}

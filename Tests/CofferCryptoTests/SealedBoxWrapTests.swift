import Foundation
import Testing
@testable import CofferCrypto

@Suite("SealedBoxWrap")
struct SealedBoxWrapTests {
    @Test("a wrapped secret opens with the recipient's private key, into the same bytes")
    func roundTrip() throws {
        let recipient = X25519.PrivateKey()
        for length in [0, 1, 32, 100] {
            let secret = SecureBytes.random(count: length)
            let wrapped = SealedBoxWrap.seal(secret, to: recipient.publicKey)
            #expect(wrapped.count == length + 48)
            let opened = try SealedBoxWrap.open(wrapped, with: recipient)
            #expect(opened.count == length)
            #expect(opened == secret)
        }
    }

    @Test("layout: the first 32 bytes are a fresh ephemeral public key; two wraps differ")
    func freshEphemeralKeys() throws {
        let recipient = X25519.PrivateKey()
        let secret = SecureBytes(copying: [UInt8](repeating: 0x5a, count: 32))
        let a = SealedBoxWrap.seal(secret, to: recipient.publicKey)
        let b = SealedBoxWrap.seal(secret, to: recipient.publicKey)
        #expect(a != b)
        #expect(a.prefix(32) != b.prefix(32))
        #expect(a.suffix(from: 32) != b.suffix(from: 32))
        #expect(a.prefix(32) != ArraySlice(recipient.publicKey.rawRepresentation))
        #expect(try SealedBoxWrap.open(a, with: recipient) == secret)
        #expect(try SealedBoxWrap.open(b, with: recipient) == secret)
    }

    @Test("flipping any byte of a wrapped key is refused with authenticationFailure")
    func tamperEveryByte() throws {
        let recipient = X25519.PrivateKey()
        let secret = SecureBytes.random(count: 32)
        let wrapped = SealedBoxWrap.seal(secret, to: recipient.publicKey)
        #expect(wrapped.count == 80)
        for index in wrapped.indices {
            for mask in tamperMasks {
                #expect(throws: CryptoError.authenticationFailure, "byte \(index) ^ \(mask)") {
                    try SealedBoxWrap.open(flipping(wrapped, at: index, mask: mask), with: recipient)
                }
            }
        }
        #expect(try SealedBoxWrap.open(wrapped, with: recipient) == secret)
    }

    @Test("a key other than the recipient's is refused")
    func wrongRecipient() throws {
        let recipient = X25519.PrivateKey()
        let wrapped = SealedBoxWrap.seal(SecureBytes.random(count: 32), to: recipient.publicKey)
        #expect(throws: CryptoError.authenticationFailure) {
            try SealedBoxWrap.open(wrapped, with: X25519.PrivateKey())
        }
    }

    @Test("truncated or extended wrapped keys are refused; shorter than the overhead is malformed")
    func lengths() throws {
        let recipient = X25519.PrivateKey()
        let wrapped = SealedBoxWrap.seal(SecureBytes.random(count: 32), to: recipient.publicKey)
        #expect(throws: CryptoError.authenticationFailure) {
            try SealedBoxWrap.open(Array(wrapped.dropLast()), with: recipient)
        }
        #expect(throws: CryptoError.authenticationFailure) {
            try SealedBoxWrap.open(wrapped + [0], with: recipient)
        }
        for n in [0, 1, 32, 47] {
            let error = #expect(throws: CryptoError.self, "length \(n)") {
                try SealedBoxWrap.open(Array(wrapped.prefix(n)), with: recipient)
            }
            #expect(error?.isMalformedInput == true, "length \(n): \(String(describing: error))")
        }
        // Exactly the overhead is well-formed but, made up, does not authenticate.
        #expect(throws: CryptoError.authenticationFailure) {
            try SealedBoxWrap.open([UInt8](repeating: 9, count: 48), with: recipient)
        }
    }

    @Test("overhead is 48 bytes (ephemeral key 32 + tag 16)")
    func overhead() {
        #expect(SealedBoxWrap.overhead == 48)
    }
}

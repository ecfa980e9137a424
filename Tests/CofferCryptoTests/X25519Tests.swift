import CofferTestSupport
import Foundation
import Testing
@testable import CofferCrypto

@Suite("X25519")
struct X25519Tests {
    // RFC 7748 section 6.1
    static let alicePrivate = "77076d0a7318a57d3c16c17251b26645df4c2f87ebc0992ab177fba51db92c2a"
    static let alicePublic = "8520f0098930a754748b7ddcb43ef75a0dbf3a0d26381af4eba4a98eaa9b4e6a"
    static let bobPrivate = "5dab087e624a8a4b79e17f8b83800ee66f3bb1292618b6fd1c2f8b27ff88e0eb"
    static let bobPublic = "de9edb7d7b7dc1b4d35b61c2ece435373f8343c85b78674dadfc7e146f882b4f"
    static let shared = "4a5d9d5ba4ce2de1728e3bf480350f25e07e21c947d19e3376f09b3c1e161742"

    @Test("RFC 7748 6.1: Alice's and Bob's public keys and their shared secret")
    func rfc7748DiffieHellman() throws {
        let alice = try X25519.PrivateKey(rawRepresentation: SecureBytes(copying: hexBytes(Self.alicePrivate)))
        let bob = try X25519.PrivateKey(rawRepresentation: SecureBytes(copying: hexBytes(Self.bobPrivate)))
        #expect(hexString(alice.publicKey.rawRepresentation) == Self.alicePublic)
        #expect(hexString(bob.publicKey.rawRepresentation) == Self.bobPublic)

        // Each side uses the published public key of the other.
        let alicePub = try X25519.PublicKey(rawRepresentation: hexBytes(Self.alicePublic))
        let bobPub = try X25519.PublicKey(rawRepresentation: hexBytes(Self.bobPublic))
        let k1 = try alice.sharedSecret(with: bobPub)
        let k2 = try bob.sharedSecret(with: alicePub)
        #expect(hexString(k1.unsafeCopiedBytes()) == Self.shared)
        #expect(hexString(k2.unsafeCopiedBytes()) == Self.shared)
        #expect(k1 == k2)
        #expect(hexString(alice.rawRepresentation.unsafeCopiedBytes()) == Self.alicePrivate)
    }

    @Test("RFC 7748 5.2: the two single scalar-multiplication vectors")
    func rfc7748ScalarMult() throws {
        let vectors = [
            ("a546e36bf0527c9d3b16154b82465edd62144c0ac1fc5a18506a2244ba449ac4",
             "e6db6867583030db3594c1a424b15f7c726624ec26b3353b10a903a6d0ab1c4c",
             "c3da55379de9c6908e94ea4df28d084f32eccf03491c71f754b4075577a28552"),
            ("4b66e9d4d1b4673c5ad22691957d6af5c11b6421e0ea01d42ca4169e7918ba0d",
             "e5210f12786811d3f4b7959d0538ae2c31dbe7106fc03c3efc4cd549c715a493",
             "95cbde9476e8907d7aade45cb4b873f88b595a68799fa152e6f8f7647aac7957"),
        ]
        for (scalar, u, out) in vectors {
            let k = try X25519.PrivateKey(rawRepresentation: SecureBytes(copying: hexBytes(scalar)))
            let secret = try k.sharedSecret(with: X25519.PublicKey(rawRepresentation: hexBytes(u)))
            #expect(hexString(secret.unsafeCopiedBytes()) == out)
        }
    }

    @Test("RFC 7748 5.2: the iterated function after 1 and 1,000 iterations")
    func rfc7748Iterated() throws {
        var k = hexBytes("0900000000000000000000000000000000000000000000000000000000000000")
        var u = k
        for i in 1...1000 {
            let priv = try X25519.PrivateKey(rawRepresentation: SecureBytes(copying: k))
            let result = try priv.sharedSecret(with: X25519.PublicKey(rawRepresentation: u)).unsafeCopiedBytes()
            u = k
            k = result
            if i == 1 {
                #expect(hexString(k) == "422c8e7a6227d7bca1350b3e2bb7279f7897b87bb6854b783c60e80311ae3079")
            }
        }
        #expect(hexString(k) == "684cf59ba83309552800ef566f2f4d3c1c3887c49360e3875f2eb94d99532c51")
    }

    @Test("random key pairs agree on the shared secret; different peers give different secrets")
    func randomAgreement() throws {
        let a = X25519.PrivateKey()
        let b = X25519.PrivateKey()
        let c = X25519.PrivateKey()
        let ab = try a.sharedSecret(with: b.publicKey)
        #expect(ab == (try b.sharedSecret(with: a.publicKey)))
        #expect(ab.count == 32)
        #expect(ab != (try a.sharedSecret(with: c.publicKey)))
        #expect(a.publicKey != b.publicKey)
    }

    @Test("low-order public keys (all-zero shared secret) are refused with invalidPublicKey")
    func lowOrderPoints() throws {
        let key = X25519.PrivateKey()
        let lowOrder = [
            "0000000000000000000000000000000000000000000000000000000000000000", // 0
            "0100000000000000000000000000000000000000000000000000000000000000", // 1
            "e0eb7a7c3b41b8ae1656e3faf19fc46ada098deb9c32b1fd866205165f49b800", // order 8
            "5f9c95bca3508c24b1d0b1559c83ef5b04445cc4581c8e86d8224eddd09f1157", // order 8
            "ecffffffffffffffffffffffffffffffffffffffffffffffffffffffffffff7f", // p - 1
        ]
        for hex in lowOrder {
            let peer = try X25519.PublicKey(rawRepresentation: hexBytes(hex))
            #expect(throws: CryptoError.invalidPublicKey, "\(hex)") { try key.sharedSecret(with: peer) }
        }
    }

    @Test("keys of the wrong length are malformed input")
    func lengthChecks() {
        for n in [0, 31, 33, 64] {
            let e1 = #expect(throws: CryptoError.self, "private \(n)") {
                try X25519.PrivateKey(rawRepresentation: SecureBytes(copying: [UInt8](repeating: 5, count: n)))
            }
            #expect(e1?.isMalformedInput == true)
            let e2 = #expect(throws: CryptoError.self, "public \(n)") {
                try X25519.PublicKey(rawRepresentation: [UInt8](repeating: 5, count: n))
            }
            #expect(e2?.isMalformedInput == true)
        }
    }

    @Test("the private key's description is redacted; the public key's shows its hex")
    func descriptions() throws {
        let key = try X25519.PrivateKey(rawRepresentation: SecureBytes(copying: hexBytes(Self.alicePrivate)))
        for t in [key.description, String(describing: key), String(reflecting: key), "\(key)"] {
            #expect(!t.contains(Self.alicePrivate))
            #expect(!t.contains(String(Self.alicePrivate.prefix(8))))
        }
        #expect(key.description == "X25519.PrivateKey(redacted)")
        #expect(key.publicKey.description == "X25519.PublicKey(\(Self.alicePublic))")
    }
}

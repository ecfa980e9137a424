import CofferTestSupport
import Foundation
import Testing
@testable import CofferCrypto

@Suite("Ed25519")
struct Ed25519Tests {
    /// RFC 8032 section 7.1, TEST 1 to TEST 3.
    struct RFCVector: Sendable, CustomTestStringConvertible {
        let name: String
        let secretSeed: String
        let publicKey: String
        let message: String
        let signature: String
        var testDescription: String { name }
    }

    static let rfc8032: [RFCVector] = [
        RFCVector(
            name: "TEST 1",
            secretSeed: "9d61b19deffd5a60ba844af492ec2cc44449c5697b326919703bac031cae7f60",
            publicKey: "d75a980182b10ab7d54bfed3c964073a0ee172f3daa62325af021a68f707511a",
            message: "",
            signature: "e5564300c360ac729086e2cc806e828a84877f1eb8e5d974d873e06522490155"
                + "5fb8821590a33bacc61e39701cf9b46bd25bf5f0595bbe24655141438e7a100b"),
        RFCVector(
            name: "TEST 2",
            secretSeed: "4ccd089b28ff96da9db6c346ec114e0f5b8a319f35aba624da8cf6ed4fb8a6fb",
            publicKey: "3d4017c3e843895a92b70aa74d1b7ebc9c982ccf2ec4968cc0cd55f12af4660c",
            message: "72",
            signature: "92a009a9f0d4cab8720e820b5f642540a2b27b5416503f8fb3762223ebdb69da"
                + "085ac1e43e15996e458f3613d0f11d8c387b2eaeb4302aeeb00d291612bb0c00"),
        RFCVector(
            name: "TEST 3",
            secretSeed: "c5aa8df43f9f837bedb7442f31dcb7b166d38535076f094b85ce3a2e0b4458f7",
            publicKey: "fc51cd8e6218a1a38da47ed00230f0580816ed13ba3303ac5deb911548908025",
            message: "af82",
            signature: "6291d657deec24024827e69c3abe01a30ce548a284743a445e3680d7db5ac3ac"
                + "18ff9b538d16f290ae67f760984dc6594a7c15e9716ed28dc027beceea1ec40a"),
    ]

    @Test("RFC 8032 7.1: the seed gives the published public key and signature, which verifies",
          arguments: rfc8032)
    func rfc8032KnownAnswer(_ v: RFCVector) throws {
        let key = try Ed25519.PrivateKey(seed: SecureBytes(copying: hexBytes(v.secretSeed)))
        #expect(hexString(key.publicKey.rawRepresentation) == v.publicKey)
        let message = hexBytes(v.message)
        let signature = key.signature(for: message)
        #expect(signature.count == 64)
        #expect(hexString(signature) == v.signature)
        // Verify with a public key built from the published bytes, not the one derived here.
        let publicKey = try Ed25519.PublicKey(rawRepresentation: hexBytes(v.publicKey))
        #expect(publicKey == key.publicKey)
        #expect(publicKey.isValidSignature(hexBytes(v.signature), for: message))
        try publicKey.verify(hexBytes(v.signature), for: message)
        // The seed comes back unchanged.
        #expect(hexString(key.seed.unsafeCopiedBytes()) == v.secretSeed)
    }

    @Test("RFC 8032 7.1: a signature from one test does not verify under another test's key or message")
    func rfc8032CrossRefusal() throws {
        let vs = Self.rfc8032
        for (i, a) in vs.enumerated() {
            for (j, b) in vs.enumerated() where i != j {
                let pkA = try Ed25519.PublicKey(rawRepresentation: hexBytes(a.publicKey))
                #expect(!pkA.isValidSignature(hexBytes(b.signature), for: hexBytes(b.message)), "\(a.name) key, \(b.name) sig")
                #expect(!pkA.isValidSignature(hexBytes(a.signature), for: hexBytes(b.message)), "\(a.name) sig on \(b.name) msg")
            }
        }
    }

    @Test("signatures are deterministic and verify; a random key pair round-trips through its seed")
    func randomKeyRoundTrip() throws {
        let key = Ed25519.PrivateKey()
        let message = Array("manifest v7".utf8)
        let s1 = key.signature(for: message)
        let s2 = key.signature(for: message)
        #expect(s1 == s2)
        #expect(key.publicKey.isValidSignature(s1, for: message))
        let again = try Ed25519.PrivateKey(seed: key.seed)
        #expect(again.publicKey == key.publicKey)
        #expect(again.signature(for: message) == s1)
        #expect(key.seed.count == 32)
        // Two random keys differ.
        #expect(Ed25519.PrivateKey().publicKey != key.publicKey)
    }

    @Test("signatures over Data and over an empty message verify")
    func otherMessageTypes() throws {
        let key = Ed25519.PrivateKey()
        let data = Data("hello".utf8)
        let sig = key.signature(for: data)
        #expect(sig == key.signature(for: Array("hello".utf8)))
        #expect(key.publicKey.isValidSignature(sig, for: data))
        let empty = key.signature(for: [UInt8]())
        #expect(key.publicKey.isValidSignature(empty, for: Data()))
        #expect(!key.publicKey.isValidSignature(empty, for: [0]))
    }

    @Test("flipping any byte of a signature is refused with invalidSignature")
    func tamperSignature() throws {
        let key = try Ed25519.PrivateKey(seed: SecureBytes(copying: hexBytes(Self.rfc8032[2].secretSeed)))
        let message = Array("release 1.2.3 sha256:0123abcd".utf8)
        let signature = key.signature(for: message)
        try key.publicKey.verify(signature, for: message)
        for index in signature.indices {
            for mask in tamperMasks {
                let bad = flipping(signature, at: index, mask: mask)
                #expect(!key.publicKey.isValidSignature(bad, for: message), "byte \(index) ^ \(mask)")
                #expect(throws: CryptoError.invalidSignature, "byte \(index) ^ \(mask)") {
                    try key.publicKey.verify(bad, for: message)
                }
            }
        }
    }

    @Test("flipping any byte of the signed message is refused with invalidSignature")
    func tamperMessage() throws {
        let key = Ed25519.PrivateKey()
        let message = Array("pay 100 to alice; memo: rent".utf8)
        let signature = key.signature(for: message)
        for index in message.indices {
            for mask in tamperMasks {
                let bad = flipping(message, at: index, mask: mask)
                #expect(!key.publicKey.isValidSignature(signature, for: bad), "byte \(index) ^ \(mask)")
                #expect(throws: CryptoError.invalidSignature, "byte \(index) ^ \(mask)") {
                    try key.publicKey.verify(signature, for: bad)
                }
            }
        }
        // Truncated or extended messages as well.
        #expect(throws: CryptoError.invalidSignature) { try key.publicKey.verify(signature, for: Array(message.dropLast())) }
        #expect(throws: CryptoError.invalidSignature) { try key.publicKey.verify(signature, for: message + [0]) }
    }

    @Test("signatures of the wrong length and other keys' signatures are refused")
    func wrongLengthAndWrongKey() throws {
        let key = Ed25519.PrivateKey()
        let message = Array("m".utf8)
        let signature = key.signature(for: message)
        for bad in [[], Array(signature.dropLast()), signature + [0], [UInt8](repeating: 0, count: 64)] {
            #expect(!key.publicKey.isValidSignature(bad, for: message), "length \(bad.count)")
            #expect(throws: CryptoError.invalidSignature) { try key.publicKey.verify(bad, for: message) }
        }
        let other = Ed25519.PrivateKey()
        #expect(throws: CryptoError.invalidSignature) { try other.publicKey.verify(signature, for: message) }
    }

    @Test("seeds and public keys of the wrong length are malformed input")
    func lengthChecks() {
        for n in [0, 31, 33, 64] {
            let e1 = #expect(throws: CryptoError.self, "seed \(n)") {
                try Ed25519.PrivateKey(seed: SecureBytes(copying: [UInt8](repeating: 1, count: n)))
            }
            #expect(e1?.isMalformedInput == true)
            let e2 = #expect(throws: CryptoError.self, "public key \(n)") {
                try Ed25519.PublicKey(rawRepresentation: [UInt8](repeating: 1, count: n))
            }
            #expect(e2?.isMalformedInput == true)
        }
    }

    @Test("the private key's description is redacted; the public key's shows its hex")
    func descriptions() throws {
        let seed = hexBytes(Self.rfc8032[0].secretSeed)
        let key = try Ed25519.PrivateKey(seed: SecureBytes(copying: seed))
        let text = [key.description, String(describing: key), String(reflecting: key), "\(key)"]
        for t in text {
            #expect(!t.contains(hexString(seed)))
            #expect(!t.contains(hexString(seed.prefix(4))))
        }
        #expect(key.description == "Ed25519.PrivateKey(redacted)")
        #expect(key.publicKey.description == "Ed25519.PublicKey(\(Self.rfc8032[0].publicKey))")
    }

    @Test("constants")
    func constants() {
        #expect(Ed25519.publicKeyByteCount == 32)
        #expect(Ed25519.seedByteCount == 32)
        #expect(Ed25519.signatureByteCount == 64)
    }
}

import CofferTestSupport
import Foundation
import Testing
@testable import CofferCrypto

@Suite("KDF")
struct KDFTests {
    static let master = symmetricKey(hex: "000102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f")

    static func derive(_ id: UInt64, _ context: String, master: SymmetricKey = master) -> String {
        hexString(KDF.deriveKey(from: master, id: id, context: context).bytes.unsafeCopiedBytes())
    }

    /// crypto_kdf_derive_from_key is BLAKE2b-256 keyed with the master key, with salt
    /// le64(id) ‖ 0^8 and personalisation context ‖ 0^8; the expected values were computed
    /// that way with Python's hashlib, independently of libsodium.
    @Test("known answers", arguments: [
        (UInt64(0), "cofferv1", "7cb779161319da1e0d6689940ea5992df68c0900a4728f3981db6d0cda32e822"),
        (1, "cofferv1", "c19eb808cd988bfd79a58552c86e2e3c0bb08644114a5705dfe6e1f8dba330e2"),
        (1, "cofferv2", "9397f068d9f1ed29bc5e0c36f49eda4b8d1a069d0b3709c687bd329ec5b72321"),
        (0xFEDC_BA98_7654_3210, "cofferv1", "60b11be2ce91cd35dfbf326210d855f596ef089315fee07a01fbf619bf9f6ff0"),
    ] as [(UInt64, String, String)])
    func knownAnswers(_ id: UInt64, _ context: String, _ expected: String) {
        #expect(Self.derive(id, context) == expected)
    }

    @Test("the same master, id and context give the same key")
    func deterministic() {
        let master = SymmetricKey()
        let a = KDF.deriveKey(from: master, id: 42, context: "zonekeys")
        let b = KDF.deriveKey(from: master, id: 42, context: "zonekeys")
        #expect(a == b)
        #expect(a.bytes.count == 32)
        #expect(a != master)
    }

    @Test("different ids, contexts or masters give different keys")
    func separation() {
        var seen = Set<String>()
        for id: UInt64 in [0, 1, 2, 255, 256, UInt64(UInt32.max), .max] {
            for context in ["cofferv1", "cofferv2", "COFFERV1", "zonekeys"] {
                seen.insert(Self.derive(id, context))
            }
        }
        #expect(seen.count == 7 * 4)
        #expect(Self.derive(1, "cofferv1") != Self.derive(1, "cofferv1", master: SymmetricKey()))
        #expect(KDF.contextByteCount == 8)
    }
}

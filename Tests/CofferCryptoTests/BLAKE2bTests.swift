import CofferTestSupport
import Foundation
import Testing
@testable import CofferCrypto

@Suite("BLAKE2b")
struct BLAKE2bTests {
    static let abc = Array("abc".utf8)

    @Test("BLAKE2b-512 of the empty input (BLAKE2 reference)")
    func emptyInput512() {
        #expect(hexString(BLAKE2b.hash([UInt8](), outputByteCount: 64))
            == "786a02f742015903c6c6fd852552d272912f4740e15847618a86e217f71f5419"
            + "d25e1031afee585313896444934eb04b903a685b1448b755d56f701afe9be2ce")
    }

    @Test("BLAKE2b-512 of \"abc\" (RFC 7693 appendix A)")
    func abc512() {
        #expect(hexString(BLAKE2b.hash(Self.abc, outputByteCount: 64))
            == "ba80a53f981c4d0d6a2797b69f12f6e94c212f14685ac4b74b12bb6fdbffa2d1"
            + "7d87c5392aab792dc252d5de4533cc9518d38aa8dbf1925ab92386edd4009923")
    }

    @Test("the default output is BLAKE2b-256, and the length is part of the hash")
    func outputLengths() {
        #expect(hexString(BLAKE2b.hash([UInt8]())) == "0e5751c026e543b2e8ab2eb06099daa1d1e5df47778f7787faab45cdf12fe3a8")
        #expect(hexString(BLAKE2b.hash(Self.abc)) == "bddd813c634239723171ef3fee98579b94964e3bb1cb3e427262c8c068d52319")
        #expect(hexString(BLAKE2b.hash(Self.abc, outputByteCount: 16)) == "cf4ab791c62b8d2b2109c90275287816")
        #expect(BLAKE2b.hash(Self.abc, outputByteCount: 64).prefix(32) != BLAKE2b.hash(Self.abc, outputByteCount: 32)[...])
        #expect(BLAKE2b.minimumOutputByteCount == 16)
        #expect(BLAKE2b.maximumOutputByteCount == 64)
        #expect(BLAKE2b.maximumKeyByteCount == 64)
    }

    @Test("hash accepts Data like [UInt8]")
    func dataInput() {
        #expect(BLAKE2b.hash(Data("abc".utf8)) == BLAKE2b.hash(Self.abc))
    }

    @Test("the incremental Hasher equals the one-shot hash, however the input is split",
          arguments: [16, 32, 64])
    func hasherMatchesOneShot(_ outputByteCount: Int) {
        let message = (0..<1000).map { UInt8(truncatingIfNeeded: $0 &* 7 &+ 3) }
        let oneShot = BLAKE2b.hash(message, outputByteCount: outputByteCount)
        for chunk in [1, 7, 64, 127, 128, 129, 999, 1000] {
            let hasher = BLAKE2b.Hasher(outputByteCount: outputByteCount)
            var start = 0
            while start < message.count {
                let end = min(start + chunk, message.count)
                hasher.update(message[start..<end].map { $0 })
                start = end
            }
            #expect(hasher.finalize() == oneShot, "chunk \(chunk)")
        }
        // With empty updates interleaved, and with no update at all.
        let h = BLAKE2b.Hasher(outputByteCount: outputByteCount)
        h.update([UInt8]())
        h.update(message)
        h.update([UInt8]())
        #expect(h.finalize() == oneShot)
        #expect(BLAKE2b.Hasher(outputByteCount: outputByteCount).finalize() == BLAKE2b.hash([UInt8](), outputByteCount: outputByteCount))
    }

    @Test("the stack-state hashes of parts (hash(parts:), hash(_:_:_:into:)) equal the one-shot hash of the concatenation",
          arguments: [0, 1, 127, 128, 129, 1_300, 5_000])
    func stackStateHashes(count: Int) {
        let data = (0..<count).map { UInt8(truncatingIfNeeded: $0 &* 31 &+ 5) }
        let cut1 = count / 3, cut2 = 2 * count / 3
        let a = Array(data[..<cut1]), b = Array(data[cut1..<cut2]), c = Array(data[cut2...])
        a.withUnsafeBytes { pa in
            b.withUnsafeBytes { pb in
                c.withUnsafeBytes { pc in
                    #expect(BLAKE2b.hash(parts: [pa, pb, pc]) == BLAKE2b.hash(data))
                    for length in [16, 32, 64] {
                        var out = [UInt8](repeating: 0, count: length)
                        out.withUnsafeMutableBytes { BLAKE2b.hash(pa, pb, pc, into: $0) }
                        #expect(out == BLAKE2b.hash(data, outputByteCount: length))
                        out.withUnsafeMutableBytes { BLAKE2b.hash(pa, pb, nil, into: $0) }
                        #expect(out == BLAKE2b.hash(a + b, outputByteCount: length))
                    }
                }
            }
        }
    }

    @Test("Hasher() defaults to 32 bytes and matches the empty-input reference at 64")
    func hasherDefaults() {
        let h = BLAKE2b.Hasher()
        h.update(Self.abc)
        #expect(hexString(h.finalize()) == "bddd813c634239723171ef3fee98579b94964e3bb1cb3e427262c8c068d52319")
        let e = BLAKE2b.Hasher(outputByteCount: 64)
        #expect(hexString(e.finalize()).hasPrefix("786a02f742015903c6c6fd852552d272"))
    }

    @Test("updateFramed prefixes an 8-byte big-endian length, so field boundaries matter")
    func framed() {
        let h = BLAKE2b.Hasher()
        h.updateFramed(Array("hello".utf8))
        h.updateFramed([UInt8]())
        h.updateFramed(Self.abc)
        // BLAKE2b-256(be64(5) ‖ "hello" ‖ be64(0) ‖ be64(3) ‖ "abc"), computed with Python's hashlib.
        #expect(hexString(h.finalize()) == "f2347d699a8ca1adb5a83b1f07b5e319ccf4aaf3eef783dd37ff1f005499887e")

        let a = BLAKE2b.Hasher()
        a.updateFramed(Array("ab".utf8))
        a.updateFramed(Array("c".utf8))
        let b = BLAKE2b.Hasher()
        b.updateFramed(Array("a".utf8))
        b.updateFramed(Array("bc".utf8))
        #expect(a.finalize() != b.finalize())
    }

    // MARK: - Keyed

    static let key0to31 = symmetricKey(hex: "000102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f")
    static let data0to255 = (0..<256).map { UInt8($0) }

    @Test("keyed hash known answers (cross-checked with Python's hashlib.blake2b(key=...))")
    func keyedKnownAnswer() {
        #expect(hexString(BLAKE2b.keyedHash(Self.data0to255, key: Self.key0to31).unsafeCopiedBytes())
            == "b42be36ea26392f67d1d3706ffa72b6c61c2ff38e1fabd9a49e154d54b967d83")
        #expect(hexString(BLAKE2b.keyedHash(Self.data0to255, key: Self.key0to31, outputByteCount: 64).unsafeCopiedBytes())
            == "0f320509ad9f25f7f20071c99f0858d167c3a62c0de57c1535185a68c1ca1c6e"
            + "0fc4f60c43e1b43d28e4c7a1cf6b174ef15bb553d4a7d05bae158115d088a03c")
        #expect(hexString(BLAKE2b.keyedHash([UInt8](), key: Self.key0to31).unsafeCopiedBytes())
            == "4e51e7a913fc80137da52880fecca175bf81e117d5c68126dc2774033517ea0d")
    }

    @Test("the keyed hash depends on the key and differs from the unkeyed hash")
    func keyedDiffersByKey() throws {
        let message = Array("message".utf8)
        let k1 = SymmetricKey()
        let k2 = SymmetricKey()
        let m1 = BLAKE2b.keyedHash(message, key: k1)
        #expect(m1 == BLAKE2b.keyedHash(message, key: k1))
        #expect(m1 != BLAKE2b.keyedHash(message, key: k2))
        let k1Flipped = try SymmetricKey(bytes: SecureBytes(copying: flipping(k1.bytes.unsafeCopiedBytes(), at: 0, mask: 0x01)))
        #expect(m1 != BLAKE2b.keyedHash(message, key: k1Flipped))
        #expect(m1.unsafeCopiedBytes() != BLAKE2b.hash(message))
        #expect(m1 != BLAKE2b.keyedHash(Array("Message".utf8), key: k1))
        #expect(m1.count == 32)
    }
}

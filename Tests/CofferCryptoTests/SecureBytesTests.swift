import CofferTestSupport
import Foundation
import Testing
@testable import CofferCrypto

@Suite("SecureBytes, SymmetricKey, SecureRandom")
struct SecureBytesTests {
    /// Distinctive bytes whose decimal values (all three digits) cannot be confused with
    /// the byte count in the description.
    static let secret: [UInt8] = [0xde, 0xad, 0xbe, 0xef, 0xca, 0xfe, 0xba, 0xbe, 0x8b, 0xad, 0xf0, 0xd1, 0xfe, 0xed, 0xc0, 0xde]

    /// Every rendering of `value` a log line or debugger could show.
    static func renderings(_ value: Any) -> [String] {
        var dumped = ""
        dump(value, to: &dumped)
        // dump shows the storage's pointer (an address, not the bytes) and an object id:
        // drop those, as a random address could contain any digits.
        dumped = dumped.replacing(/0x[0-9a-fA-F]+/, with: "<address>")
            .replacing(/pointerValue: [0-9]+/, with: "pointerValue: <address>")
            .replacing(/#[0-9]+/, with: "#n")
        return [String(describing: value), String(reflecting: value), "\(value)", dumped]
    }

    /// Fails if any rendering contains the secret in hex (either case, whole or any two
    /// consecutive bytes) or in decimal (the bytes' values, or the array's description).
    static func expectNoLeak(_ value: Any, of bytes: [UInt8], sourceLocation: SourceLocation = #_sourceLocation) {
        var needles = [hexString(bytes), hexString(bytes).uppercased(), bytes.description,
                       bytes.map(String.init).joined(separator: ", ")]
        for i in 0..<(bytes.count - 1) {
            needles.append(hexString(bytes[i...(i + 1)]))
            needles.append(hexString(bytes[i...(i + 1)]).uppercased())
        }
        needles.append(contentsOf: bytes.map { String($0) }) // 222, 173, 190, ...
        for text in renderings(value) {
            for needle in needles {
                #expect(!text.contains(needle), "\"\(text)\" contains \"\(needle)\"", sourceLocation: sourceLocation)
            }
        }
    }

    @Test("description and debugDescription never show the bytes")
    func descriptionRedacted() {
        let s = SecureBytes(copying: Self.secret)
        #expect(s.description == "SecureBytes(16 bytes, redacted)")
        #expect(s.debugDescription == "SecureBytes(16 bytes, redacted)")
        Self.expectNoLeak(s, of: Self.secret)
        // And inside a collection or an optional.
        Self.expectNoLeak([s], of: Self.secret)
        Self.expectNoLeak(Optional(s) as Any, of: Self.secret)
    }

    @Test("a SymmetricKey's description never shows the key")
    func symmetricKeyRedacted() throws {
        let keyBytes = Self.secret + Self.secret
        let key = try SymmetricKey(bytes: SecureBytes(copying: keyBytes))
        #expect(key.description == "SymmetricKey(redacted)")
        Self.expectNoLeak(key, of: keyBytes)
    }

    @Test("copying in and out preserves the bytes")
    func copyRoundTrip() {
        let s = SecureBytes(copying: Self.secret)
        #expect(s.count == 16)
        #expect(s.unsafeCopiedBytes() == Self.secret)
        #expect(s.withUnsafeBytes { Array($0) } == Self.secret)
        let fromRaw = Self.secret.withUnsafeBytes { SecureBytes(copying: $0) }
        #expect(fromRaw.unsafeCopiedBytes() == Self.secret)
        let fromSlice = SecureBytes(copying: Self.secret[2..<5])
        #expect(fromSlice.unsafeCopiedBytes() == [0xbe, 0xef, 0xca])
        let empty = SecureBytes(copying: [UInt8]())
        #expect(empty.count == 0)
        #expect(empty.unsafeCopiedBytes() == [])
    }

    @Test("init(count:initializingWith:) writes through and rethrows")
    func initializer() {
        let s = SecureBytes(count: 4) { buf in
            for i in 0..<buf.count { buf[i] = UInt8(10 + i) }
        }
        #expect(s.unsafeCopiedBytes() == [10, 11, 12, 13])
        struct Boom: Error, Equatable {}
        #expect(throws: Boom()) {
            try SecureBytes(count: 8) { _ in throw Boom() }
        }
    }

    @Test("== is true for equal bytes in different storage")
    func equal() {
        let a = SecureBytes(copying: Self.secret)
        let b = SecureBytes(copying: Self.secret)
        #expect(a == b)
        #expect(a == a)
        #expect(SecureBytes(copying: [UInt8]()) == SecureBytes(count: 0) { _ in })
    }

    @Test("== is false when any single byte differs")
    func unequalEveryPosition() {
        let a = SecureBytes(copying: Self.secret)
        for i in Self.secret.indices {
            for mask in tamperMasks {
                #expect(a != SecureBytes(copying: flipping(Self.secret, at: i, mask: mask)), "byte \(i) ^ \(mask)")
            }
        }
    }

    @Test("== is false for different lengths, including a prefix and the empty value")
    func unequalLengths() {
        let a = SecureBytes(copying: Self.secret)
        #expect(a != SecureBytes(copying: Self.secret.dropLast()))
        #expect(a != SecureBytes(copying: Self.secret + [0]))
        #expect(a != SecureBytes(copying: [UInt8]()))
        #expect(SecureBytes(copying: [UInt8]()) != a)
        #expect(SecureBytes(copying: [0]) != SecureBytes(copying: [0, 0]))
    }

    @Test("constantTimeEquals on arrays")
    func constantTimeEqualsArrays() {
        #expect(constantTimeEquals(Self.secret, Self.secret))
        #expect(constantTimeEquals([], []))
        #expect(!constantTimeEquals(Self.secret, flipping(Self.secret, at: 15, mask: 0x01)))
        #expect(!constantTimeEquals(Self.secret, flipping(Self.secret, at: 0, mask: 0x80)))
        #expect(!constantTimeEquals(Self.secret, Array(Self.secret.dropLast())))
        #expect(!constantTimeEquals([], [0]))
    }

    @Test("slice copies exactly the requested range")
    func slice() {
        let s = SecureBytes(copying: Self.secret)
        #expect(s.slice(0..<4).unsafeCopiedBytes() == [0xde, 0xad, 0xbe, 0xef])
        #expect(s.slice(12..<16).unsafeCopiedBytes() == [0xfe, 0xed, 0xc0, 0xde])
        #expect(s.slice(0..<16) == s)
        #expect(s.slice(5..<5).count == 0)
        #expect(s.slice(7..<9).unsafeCopiedBytes() == [0xbe, 0x8b])
        // The slice is independent storage: the original is unchanged.
        #expect(s.unsafeCopiedBytes() == Self.secret)
    }

    @Test("random gives the requested count and different values each time")
    func random() {
        let a = SecureBytes.random(count: 32)
        let b = SecureBytes.random(count: 32)
        #expect(a.count == 32)
        #expect(a != b)
        #expect(a != SecureBytes(count: 32) { $0.initializeMemory(as: UInt8.self, repeating: 0) })
        #expect(SecureBytes.random(count: 0).count == 0)
        var seen = Set<[UInt8]>()
        for _ in 0..<100 { seen.insert(SecureBytes.random(count: 16).unsafeCopiedBytes()) }
        #expect(seen.count == 100)
    }

    @Test("SecureRandom.bytes gives the requested count and different values each time")
    func secureRandom() {
        #expect(SecureRandom.bytes(count: 0) == [])
        let a = SecureRandom.bytes(count: 24)
        #expect(a.count == 24)
        #expect(a != SecureRandom.bytes(count: 24))
        #expect(a != [UInt8](repeating: 0, count: 24))
    }

    @Test("SymmetricKey: random keys differ; init(bytes:) takes exactly 32 bytes")
    func symmetricKey() throws {
        #expect(SymmetricKey() != SymmetricKey())
        #expect(SymmetricKey().bytes.count == 32)
        let bytes = SecureBytes(copying: Self.secret + Self.secret)
        let key = try SymmetricKey(bytes: bytes)
        #expect(key.bytes == bytes)
        #expect(key.withUnsafeBytes { Array($0) } == Self.secret + Self.secret)
        for n in [0, 16, 31, 33, 64] {
            let error = #expect(throws: CryptoError.self, "length \(n)") {
                try SymmetricKey(bytes: SecureBytes.random(count: n))
            }
            #expect(error?.isMalformedInput == true)
        }
    }

    @Test("CryptoError descriptions carry no secrets and name the failure")
    func errorDescriptions() {
        #expect(CryptoError.authenticationFailure.description == "authentication failed (data changed, moved, or wrong key)")
        #expect(CryptoError.invalidSignature.description == "signature does not verify")
        #expect(CryptoError.malformedInput("x").description == "malformed input: x")
        #expect(CryptoError.invalidPublicKey.description == "unusable public key")
        #expect(CryptoError.parametersOutOfRange("y").description == "parameters out of range: y")
        #expect(CryptoError.outOfMemory.description == "out of memory")
    }

    @Test("the loaded libsodium is 1.0.18 or later")
    func libraryVersion() {
        let parts = CryptoLibrary.version.split(separator: ".").compactMap { Int($0) }
        #expect(parts.count == 3, "\(CryptoLibrary.version)")
        #expect(parts.lexicographicallyPrecedes([1, 0, 18]) == false, "\(CryptoLibrary.version)")
    }
}

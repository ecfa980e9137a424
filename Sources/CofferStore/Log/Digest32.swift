import CofferCrypto

/// A 32-byte hash as four words: cheap to compare, and its first word picks its slot in a
/// ``DigestSet``.
package struct Digest32: Equatable, Sendable {
    package var a: UInt64, b: UInt64, c: UInt64, d: UInt64
    package static let zero = Digest32(a: 0, b: 0, c: 0, d: 0)

    package init(a: UInt64, b: UInt64, c: UInt64, d: UInt64) {
        self.a = a; self.b = b; self.c = c; self.d = d
    }

    /// From exactly 32 bytes.
    package init(_ bytes: some Collection<UInt8>) {
        precondition(bytes.count == 32, "a digest is 32 bytes")
        var value = Digest32.zero
        withUnsafeMutableBytes(of: &value) { out in _ = out.initializeMemory(as: UInt8.self, from: bytes) }
        self = value
    }

    package var bytes: [UInt8] { withUnsafeBytes(of: self) { Array($0) } }
}

/// A 256-bit symmetric key in guarded memory: a vault key, a zone key, a slot key.
public struct SymmetricKey: Sendable, Equatable, CustomStringConvertible {
    /// The length of every symmetric key in Coffer, in bytes.
    public static let byteCount = 32

    /// The key bytes, reachable through ``SecureBytes/withUnsafeBytes(_:)``.
    public let bytes: SecureBytes

    /// A fresh random key.
    public init() {
        self.bytes = .random(count: Self.byteCount)
    }

    /// Wraps existing key bytes; throws unless there are exactly 32.
    public init(bytes: SecureBytes) throws {
        guard bytes.count == Self.byteCount else {
            throw CryptoError.malformedInput("a symmetric key has \(Self.byteCount) bytes, got \(bytes.count)")
        }
        self.bytes = bytes
    }

    public func withUnsafeBytes<R>(_ body: (UnsafeRawBufferPointer) throws -> R) rethrows -> R {
        try bytes.withUnsafeBytes(body)
    }

    public var description: String { "SymmetricKey(redacted)" }
}

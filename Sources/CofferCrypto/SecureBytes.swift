internal import CSodium

/// Secret bytes in libsodium guarded memory.
///
/// The bytes live in an allocation made by `sodium_malloc` (guard pages, a canary,
/// locked against swapping where the system allows) and are zeroed by `sodium_free`
/// when the last copy of the value goes away. They are reachable only inside
/// ``withUnsafeBytes(_:)``. Equality is constant-time; `description` never shows them.
///
/// ```swift
/// let key = SecureBytes.random(count: 32)
/// key.withUnsafeBytes { raw in /* use raw */ }
/// ```
///
/// Values are immutable: every operation that makes new secret bytes returns a new value.
public struct SecureBytes: Sendable {
    final class Storage: @unchecked Sendable {
        // Immutable after initialisation, so sharing between threads is safe.
        let pointer: UnsafeMutableRawPointer
        let count: Int

        init(count: Int) {
            Sodium.ensureInitialized()
            precondition(count >= 0, "negative byte count")
            // sodium_malloc(0) is valid on some builds only; always ask for at least one byte.
            guard let pointer = sodium_malloc(max(count, 1)) else {
                fatalError("guarded memory allocation of \(count) bytes failed")
            }
            self.pointer = pointer
            self.count = count
        }

        deinit {
            sodium_free(pointer) // zeroes the region before releasing it
        }
    }

    let storage: Storage

    /// Makes `count` bytes filled by `initializer`. If the initializer throws, the
    /// partly written bytes are zeroed and released.
    public init(count: Int, initializingWith initializer: (UnsafeMutableRawBufferPointer) throws -> Void) rethrows {
        let storage = Storage(count: count)
        try initializer(UnsafeMutableRawBufferPointer(start: storage.pointer, count: count))
        self.storage = storage
    }

    /// Copies `bytes` into guarded memory. The caller remains responsible for the source.
    public init<Bytes: Sequence>(copying bytes: Bytes) where Bytes.Element == UInt8 {
        let array = Array(bytes)
        self.init(count: array.count) { buffer in
            array.withUnsafeBytes { source in
                if let base = source.baseAddress, source.count > 0 {
                    buffer.baseAddress!.copyMemory(from: base, byteCount: source.count)
                }
            }
        }
    }

    /// Copies raw bytes into guarded memory.
    public init(copying raw: UnsafeRawBufferPointer) {
        self.init(count: raw.count) { buffer in
            if let base = raw.baseAddress, raw.count > 0 {
                buffer.baseAddress!.copyMemory(from: base, byteCount: raw.count)
            }
        }
    }

    /// `count` bytes from the operating system's secure random generator.
    public static func random(count: Int) -> SecureBytes {
        SecureBytes(count: count) { buffer in
            if count > 0 { randombytes_buf(buffer.baseAddress!, count) }
        }
    }

    /// The number of bytes.
    public var count: Int { storage.count }

    /// Calls `body` with read access to the secret bytes. Do not let the pointer escape.
    public func withUnsafeBytes<R>(_ body: (UnsafeRawBufferPointer) throws -> R) rethrows -> R {
        try body(UnsafeRawBufferPointer(start: storage.pointer, count: storage.count))
    }

    /// Bytes `range` as new secure bytes.
    public func slice(_ range: Range<Int>) -> SecureBytes {
        precondition(range.lowerBound >= 0 && range.upperBound <= count, "slice out of bounds")
        return withUnsafeBytes { raw in
            SecureBytes(copying: UnsafeRawBufferPointer(rebasing: raw[range]))
        }
    }

    /// Copies the bytes out of guarded memory. Only for data that must leave it, such as
    /// a key file being written; prefer ``withUnsafeBytes(_:)``.
    public func unsafeCopiedBytes() -> [UInt8] {
        withUnsafeBytes { Array($0) }
    }
}

extension SecureBytes: Equatable {
    /// Constant-time comparison (`sodium_memcmp`); lengths are not secret.
    public static func == (lhs: SecureBytes, rhs: SecureBytes) -> Bool {
        guard lhs.count == rhs.count else { return false }
        if lhs.count == 0 { return true }
        return sodium_memcmp(lhs.storage.pointer, rhs.storage.pointer, lhs.count) == 0
    }
}

extension SecureBytes: CustomStringConvertible, CustomDebugStringConvertible {
    public var description: String { "SecureBytes(\(count) bytes, redacted)" }
    public var debugDescription: String { description }
}

/// Constant-time comparison of two byte buffers of equal length.
public func constantTimeEquals(_ lhs: [UInt8], _ rhs: [UInt8]) -> Bool {
    Sodium.ensureInitialized()
    guard lhs.count == rhs.count else { return false }
    if lhs.isEmpty { return true }
    return lhs.withUnsafeBytes { l in
        rhs.withUnsafeBytes { r in sodium_memcmp(l.baseAddress!, r.baseAddress!, lhs.count) == 0 }
    }
}

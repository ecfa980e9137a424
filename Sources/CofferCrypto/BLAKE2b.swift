import Foundation
internal import CSodium

/// BLAKE2b hashing (`crypto_generichash`), keyed or not.
public enum BLAKE2b {
    public static let minimumOutputByteCount = Int(crypto_generichash_BYTES_MIN)
    public static let maximumOutputByteCount = Int(crypto_generichash_BYTES_MAX)
    public static let maximumKeyByteCount = Int(crypto_generichash_KEYBYTES_MAX)

    /// The unkeyed hash of `data`, `outputByteCount` bytes long (16 to 64).
    public static func hash(_ data: some ContiguousBytes, outputByteCount: Int = 32) -> [UInt8] {
        precondition((minimumOutputByteCount...maximumOutputByteCount).contains(outputByteCount), "BLAKE2b output length")
        Sodium.ensureInitialized()
        var out = [UInt8](repeating: 0, count: outputByteCount)
        data.withUnsafeBytes { d in
            _ = crypto_generichash(&out, outputByteCount, d.baseAddress?.assumingMemoryBound(to: UInt8.self),
                                   UInt64(d.count), nil, 0)
        }
        return out
    }

    /// The hash of `data` keyed with `key` (a MAC), as secret bytes.
    public static func keyedHash(_ data: some ContiguousBytes, key: SymmetricKey, outputByteCount: Int = 32) -> SecureBytes {
        precondition((minimumOutputByteCount...maximumOutputByteCount).contains(outputByteCount), "BLAKE2b output length")
        Sodium.ensureInitialized()
        return SecureBytes(count: outputByteCount) { o in
            data.withUnsafeBytes { d in
                key.withUnsafeBytes { k in
                    _ = crypto_generichash(o.baseAddress!.assumingMemoryBound(to: UInt8.self), outputByteCount,
                                           d.baseAddress?.assumingMemoryBound(to: UInt8.self), UInt64(d.count),
                                           k.baseAddress!.assumingMemoryBound(to: UInt8.self), k.count)
                }
            }
        }
    }

    /// The unkeyed 32-byte hash of the concatenation of `parts`, with the hash state on the
    /// stack (no allocation besides the result).
    public static func hash(parts: [UnsafeRawBufferPointer]) -> [UInt8] {
        Sodium.ensureInitialized()
        return withState { st in
            _ = crypto_generichash_init(st, nil, 0, 32)
            for part in parts where part.count > 0 {
                _ = crypto_generichash_update(st, part.baseAddress!.assumingMemoryBound(to: UInt8.self), UInt64(part.count))
            }
            var out = [UInt8](repeating: 0, count: 32)
            _ = crypto_generichash_final(st, &out, 32)
            return out
        }
    }

    /// The unkeyed hash of `a ‖ b ‖ c`, written to `out` (16 to 64 bytes): no allocation at all,
    /// for hashes computed per record.
    public static func hash(_ a: UnsafeRawBufferPointer, _ b: UnsafeRawBufferPointer, _ c: UnsafeRawBufferPointer?,
                            into out: UnsafeMutableRawBufferPointer) {
        precondition((minimumOutputByteCount...maximumOutputByteCount).contains(out.count), "BLAKE2b output length")
        Sodium.ensureInitialized()
        withState { st in
            _ = crypto_generichash_init(st, nil, 0, out.count)
            func update(_ part: UnsafeRawBufferPointer) {
                guard part.count > 0 else { return }
                _ = crypto_generichash_update(st, part.baseAddress!.assumingMemoryBound(to: UInt8.self), UInt64(part.count))
            }
            update(a)
            update(b)
            if let c { update(c) }
            _ = crypto_generichash_final(st, out.baseAddress!.assumingMemoryBound(to: UInt8.self), out.count)
        }
    }

    /// A hash state on the stack, wiped after `body`. libsodium wants it 64-byte aligned; Swift
    /// allocates temporary memory with more than 16-byte alignment (or over 1 KiB) on the heap, so
    /// the state is aligned by hand inside a slightly larger 16-byte aligned buffer.
    private static func withState<R>(_ body: (OpaquePointer) -> R) -> R {
        let size = crypto_generichash_statebytes()
        return withUnsafeTemporaryAllocation(byteCount: size + 64, alignment: 16) { buffer in
            let address = Int(bitPattern: buffer.baseAddress!)
            let state = UnsafeMutableRawPointer(bitPattern: (address + 63) & ~63)!
            defer { sodium_memzero(state, size) }
            return body(OpaquePointer(state))
        }
    }

    /// An incremental BLAKE2b hash. libsodium's state is a 64-byte aligned struct that
    /// Swift does not import, so it is allocated here by size and alignment.
    public final class Hasher {
        private let state: UnsafeMutableRawPointer
        private let outputByteCount: Int
        private var finished = false

        public init(outputByteCount: Int = 32) {
            precondition((minimumOutputByteCount...maximumOutputByteCount).contains(outputByteCount), "BLAKE2b output length")
            Sodium.ensureInitialized()
            self.outputByteCount = outputByteCount
            state = UnsafeMutableRawPointer.allocate(byteCount: crypto_generichash_statebytes(), alignment: 64)
            _ = crypto_generichash_init(OpaquePointer(state), nil, 0, outputByteCount)
        }

        deinit {
            sodium_memzero(state, crypto_generichash_statebytes())
            state.deallocate()
        }

        public func update(_ data: some ContiguousBytes) {
            precondition(!finished, "update after finalize")
            data.withUnsafeBytes { d in
                _ = crypto_generichash_update(OpaquePointer(state), d.baseAddress?.assumingMemoryBound(to: UInt8.self), UInt64(d.count))
            }
        }

        /// Length-prefixed update (8-byte big-endian length, then the bytes), so that
        /// concatenated fields cannot be confused with one another.
        public func updateFramed(_ data: some ContiguousBytes) {
            let count = data.withUnsafeBytes { $0.count }
            update(BigEndian.bytes(UInt64(count)))
            update(data)
        }

        public func finalize() -> [UInt8] {
            precondition(!finished, "finalize twice")
            finished = true
            var out = [UInt8](repeating: 0, count: outputByteCount)
            _ = crypto_generichash_final(OpaquePointer(state), &out, outputByteCount)
            return out
        }
    }
}

/// libsodium's key derivation (`crypto_kdf_derive_from_key`, BLAKE2b underneath):
/// independent subkeys from one master key, an 8-character context and a numeric id.
public enum KDF {
    public static let contextByteCount = Int(crypto_kdf_CONTEXTBYTES)

    /// A 32-byte subkey of `master` for `context` (exactly 8 ASCII characters) and `id`.
    public static func deriveKey(from master: SymmetricKey, id: UInt64, context: String) -> SymmetricKey {
        let ctx = Array(context.utf8)
        precondition(ctx.count == contextByteCount, "a KDF context has exactly 8 bytes")
        Sodium.ensureInitialized()
        let sub = SecureBytes(count: SymmetricKey.byteCount) { o in
            master.withUnsafeBytes { m in
                ctx.withUnsafeBufferPointer { c in
                    _ = crypto_kdf_derive_from_key(o.baseAddress!.assumingMemoryBound(to: UInt8.self), o.count, id,
                                                   UnsafeRawPointer(c.baseAddress!).assumingMemoryBound(to: CChar.self),
                                                   m.baseAddress!.assumingMemoryBound(to: UInt8.self))
                }
            }
        }
        return try! SymmetricKey(bytes: sub)
    }
}

/// ISO/IEC 7816-4 padding (`sodium_pad`), to hide exact lengths inside padding buckets.
public enum Padding {
    /// Pads `bytes` to a multiple of `blockSize` (always adds at least one byte).
    public static func pad(_ bytes: [UInt8], blockSize: Int) -> [UInt8] {
        precondition(blockSize > 0)
        Sodium.ensureInitialized()
        var out = bytes
        out.append(contentsOf: [UInt8](repeating: 0, count: blockSize))
        var padded = 0
        let r = out.withUnsafeMutableBufferPointer { b in
            sodium_pad(&padded, b.baseAddress!, bytes.count, blockSize, b.count)
        }
        precondition(r == 0, "sodium_pad")
        out.removeSubrange(padded...)
        return out
    }

    /// Removes padding added by ``pad(_:blockSize:)``; throws on malformed padding.
    public static func unpad(_ bytes: [UInt8], blockSize: Int) throws -> [UInt8] {
        Sodium.ensureInitialized()
        guard blockSize > 0, !bytes.isEmpty, bytes.count % blockSize == 0 else { throw CryptoError.malformedInput("padding") }
        var unpadded = 0
        let r = bytes.withUnsafeBufferPointer { b in sodium_unpad(&unpadded, b.baseAddress!, b.count, blockSize) }
        guard r == 0 else { throw CryptoError.malformedInput("padding") }
        return Array(bytes[..<unpadded])
    }
}

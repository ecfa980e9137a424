internal import CSodium
import Synchronization

/// Random nonces for the seals of one operation (a batch of records), drawn from libsodium's
/// generator (`randombytes_buf`) in one call instead of one call per seal. On Linux each call
/// is a `getrandom` system call: 0.38 µs for 24 bytes against 0.09 µs a nonce for 400 at once
/// on the machine of `Docs/Performance.md`, about a tenth of sealing a 1 KB record.
///
/// The nonces are the same 192 random bits each as single draws; only how many are fetched
/// at a time changes. Each is handed out once (an atomic index, so threads sealing parts of
/// one batch never share one), and a spent reserve draws single nonces again, so no nonce
/// repeats and callers still never choose one. A reserve lives for one operation and is never
/// kept across operations or processes.
package final class NonceReserve: @unchecked Sendable {
    private let storage: UnsafeMutableRawBufferPointer
    private let capacity: Int
    private let next = Atomic<Int>(0)

    /// A reserve of `count` nonces, drawn now.
    package init(count: Int) {
        Sodium.ensureInitialized()
        capacity = max(count, 0)
        storage = .allocate(byteCount: max(capacity, 1) * XChaCha20Poly1305.nonceByteCount, alignment: 8)
        if capacity > 0 { randombytes_buf(storage.baseAddress!, capacity * XChaCha20Poly1305.nonceByteCount) }
    }

    deinit {
        storage.deallocate()
    }

    /// Nonces handed out so far (including any drawn singly once the reserve was spent).
    package var taken: Int { next.load(ordering: .relaxed) }

    /// Writes the next unused nonce (``XChaCha20Poly1305/nonceByteCount`` bytes) to `out`.
    func take(into out: UnsafeMutablePointer<UInt8>) {
        let n = XChaCha20Poly1305.nonceByteCount
        let i = next.wrappingAdd(1, ordering: .relaxed).oldValue
        if i < capacity {
            out.update(from: storage.baseAddress!.assumingMemoryBound(to: UInt8.self) + i * n, count: n)
        } else {
            randombytes_buf(out, n)
        }
    }
}

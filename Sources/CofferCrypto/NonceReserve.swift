internal import CSodium

/// Random nonces for the seals of one operation (a batch of records), drawn from libsodium's
/// generator (`randombytes_buf`) a chunk at a time instead of one call per seal. On Linux each
/// call is a `getrandom` system call: 0.38 µs for 24 bytes against 0.09 µs a nonce for 400 at
/// once on the machine of `Docs/Performance.md`, about a tenth of sealing a 1 KB record.
///
/// The nonces are the same 192 random bits each as single draws; only how many are fetched at
/// a time changes. Each is handed out once (under a lock, so threads sealing at once never
/// share one), and a spent chunk is replaced by a fresh draw, so no nonce repeats and callers
/// still never choose one. The first chunk is drawn by the first seal, not when the reserve is
/// made. A reserve lives for one operation and is never kept across operations or processes.
package final class NonceReserve: Sendable {
    private struct State {
        var bytes: [UInt8]
        /// The next unused nonce of `bytes` (`chunk` when spent or not drawn yet).
        var next: Int
        var taken = 0
    }

    private let chunk: Int
    private let state: Locked<State>

    /// A reserve drawing `chunk` nonces at a time.
    package init(chunk: Int = 64) {
        self.chunk = max(chunk, 1)
        state = Locked(State(bytes: [UInt8](repeating: 0, count: self.chunk * XChaCha20Poly1305.nonceByteCount), next: self.chunk))
    }

    /// Nonces handed out so far.
    package var taken: Int { state.withLock { $0.taken } }

    /// Writes the next unused nonce (``XChaCha20Poly1305/nonceByteCount`` bytes) to `out`.
    func take(into out: UnsafeMutablePointer<UInt8>) {
        let n = XChaCha20Poly1305.nonceByteCount
        state.withLock { state in
            if state.next == chunk {
                Sodium.ensureInitialized()
                state.bytes.withUnsafeMutableBytes { randombytes_buf($0.baseAddress!, $0.count) }
                state.next = 0
            }
            state.bytes.withUnsafeBytes { out.update(from: $0.baseAddress!.assumingMemoryBound(to: UInt8.self) + state.next * n, count: n) }
            state.next += 1
            state.taken += 1
        }
    }
}

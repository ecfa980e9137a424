import CofferCrypto

/// A replica's queue of pending changes (offline writes, kept as unsigned intents until a push
/// signs them) as the user's marks file records it, so that the replica file alone cannot bring
/// a change back: intents are numbered by ``issued``, a counter that never goes down, and a
/// number once finished (pushed and confirmed, resolved, refused or replaced) is never pushed
/// again, whatever the replica file says. ``queueHash`` is the hash of the live queue as the
/// replica last stored it, so that a queue cut short or put back from an older copy is noticed.
///
/// Kept per store id in the marks file (format 4, see `Docs/VaultFormat.md`), changed only
/// through ``MarkBook/updateIntents(ofStore:_:)``, under the marks lock.
public struct IntentMarks: Sendable, Equatable {
    /// The most finished numbers kept above ``finishedThrough``: a replica holds at most
    /// 10,000 pending changes.
    public static let maxFinishedAbove = 10_000
    /// A hash's length.
    public static let hashByteCount = 32

    /// The highest number issued (0: none yet).
    public private(set) var issued: UInt64 = 0
    /// Every number up to this one is finished.
    public private(set) var finishedThrough: UInt64 = 0
    /// The finished numbers above ``finishedThrough``, ascending.
    public private(set) var finishedAbove: [UInt64] = []
    /// The hash of the live queue as the replica stores it (32 zero bytes: empty).
    public var queueHash: [UInt8] = Array(repeating: 0, count: hashByteCount)
    /// The hash before the newest number was issued: a write that issued a number and did not
    /// store its intent (it failed, or the process was killed) leaves the queue at this hash.
    public var previousQueueHash: [UInt8] = Array(repeating: 0, count: hashByteCount)

    public init() {}

    init(issued: UInt64, finishedThrough: UInt64, finishedAbove: [UInt64], queueHash: [UInt8], previousQueueHash: [UInt8]) {
        self.issued = issued
        self.finishedThrough = finishedThrough
        self.finishedAbove = finishedAbove
        self.queueHash = queueHash
        self.previousQueueHash = previousQueueHash
    }

    /// Whether `number` is finished: it is never pushed again.
    public func isFinished(_ number: UInt64) -> Bool {
        number <= finishedThrough || binarySearch(number) != nil
    }

    /// Whether `number` was issued and is not finished.
    public func isLive(_ number: UInt64) -> Bool {
        number >= 1 && number <= issued && !isFinished(number)
    }

    /// The number of live intents.
    public var liveCount: Int { Int(issued - finishedThrough) - finishedAbove.count }

    /// Issues the next number; the queue's hashes are the caller's to set.
    /// - Throws: `.invalidArguments` at the counter's end (never in practice).
    public mutating func issue() throws -> UInt64 {
        guard issued < UInt64(Int64.max) else { throw VaultError(.invalidArguments, "the pending changes' counter is at its end") }
        issued += 1
        return issued
    }

    /// Marks `numbers` finished (each issued; finished ones stay finished).
    /// - Throws: `.invalidArguments` for a number never issued, and when more
    ///   than ``maxFinishedAbove`` finished numbers would be kept above an unfinished one.
    public mutating func finish(_ numbers: some Sequence<UInt64>) throws {
        var set = Set(finishedAbove)
        for n in numbers {
            guard n >= 1, n <= issued else { throw VaultError(.invalidArguments, "pending change \(n) was never issued") }
            if n > finishedThrough { set.insert(n) }
        }
        var sorted = set.sorted()
        var start = 0
        while start < sorted.count, sorted[start] == finishedThrough + 1 {
            finishedThrough += 1
            start += 1
        }
        sorted.removeFirst(start)
        guard sorted.count <= Self.maxFinishedAbove else {
            throw VaultError(.invalidArguments, "more than \(Self.maxFinishedAbove) finished pending changes wait behind an unfinished one")
        }
        finishedAbove = sorted
    }

    private func binarySearch(_ n: UInt64) -> Int? {
        var low = 0, high = finishedAbove.count - 1
        while low <= high {
            let mid = (low + high) / 2
            if finishedAbove[mid] == n { return mid }
            if finishedAbove[mid] < n { low = mid + 1 } else { high = mid - 1 }
        }
        return nil
    }
}

extension Vault {
    /// The key that seals a replica's pending changes (`crypto_kdf` subkey 1, context
    /// `cofintnt`, of the identity's Ed25519 seed, as the marks key is of it): only the vault
    /// holds the seed, it survives passphrase changes and re-keys.
    public func pendingChangesKey() throws -> SymmetricKey {
        KDF.deriveKey(from: try read { try SymmetricKey(bytes: $0.body.signingSeed) }, id: 1, context: "cofintnt")
    }

    /// The key that names a pending change in the commit that confirms it (subkey 2 of the same
    /// context): the 16-byte ids tell nothing of the counter to anyone without the vault.
    public func pendingChangeIDKey() throws -> SymmetricKey {
        KDF.deriveKey(from: try read { try SymmetricKey(bytes: $0.body.signingSeed) }, id: 2, context: "cofintnt")
    }
}

import CofferCrypto
import CofferVault
import Foundation

/// A zone's log as one session has verified it: the state at its head and the hash of every
/// entry, so that any entry read later is checked against the chain without another signature.
///
/// How it is verified (see `Docs/Security.md`, "The zone log"):
/// - The first time a session meets a zone, it reads every entry from the genesis on, checks
///   that each names the hash of the one before, and applies each to the state (who may write
///   what, see ``ZoneState``). Signatures are checked for the entries past this user's
///   high-water mark for the zone (all of them, the first time): the entries up to the mark
///   were verified when the mark was set, and the chain ties them to its hash.
/// - The store's head must extend the mark: the entry at the mark's sequence must have the
///   mark's hash, and the log must reach it; otherwise the store was rolled back, cut or forked.
/// - Later operations read only the head; new entries are verified (signatures included) and
///   applied, and the mark advances in memory (``Session/saveMarks()`` writes it).
struct ZoneLog: Sendable {
    private(set) var state: ZoneState
    /// The hash of each entry, by `seq - state.base`.
    private(set) var hashes: ChunkedDigests
    /// The first entry after the head that failed verification, and why, when the store holds
    /// one: entries from there on are refused (a writer extends only a head they verified), and
    /// nothing is written on top of them.
    var refusedTail: (seq: Int64, error: StoreError)?

    init(state: ZoneState) {
        self.state = state
        hashes = ChunkedDigests()
        hashes.append(state.headHash)
    }

    var mark: ZoneMark {
        // A verified log has a 16-byte uid, a user id for its owner and a 32-byte hash.
        try! ZoneMark(zoneUID: state.zoneUID, ownerID: state.ownerID, seq: state.headSeq, hash: state.headHash.bytes)
    }

    /// The hash of entry `seq`, when it is in this log.
    func hash(at seq: Int64) -> Digest32? {
        guard seq >= state.base, seq <= state.headSeq else { return nil }
        return hashes[Int(seq - state.base)]
    }

    /// Verifies `stored` as the entry after the head and appends it.
    mutating func append(_ stored: StoredLogEntry, verifier: ZoneLogVerifier, signed: Bool) throws {
        try verifier.apply(stored, to: &state, signed: signed)
        hashes.append(stored.hash)
    }
}

/// An append-only list of digests in chunks of 1,024: a copy of a log that appends one entry
/// copies its last chunk and the list of chunks, not every hash (a write to a zone of 100,000
/// entries would otherwise copy 3.2 MB).
struct ChunkedDigests: Sendable {
    private static let chunkSize = 1024
    private var chunks = [[Digest32]]()
    private(set) var count = 0

    subscript(index: Int) -> Digest32 {
        chunks[index / Self.chunkSize][index % Self.chunkSize]
    }

    mutating func append(_ digest: Digest32) {
        if count % Self.chunkSize == 0 {
            var chunk = [Digest32]()
            chunk.reserveCapacity(Self.chunkSize)
            chunk.append(digest)
            chunks.append(chunk)
        } else {
            chunks[chunks.count - 1].append(digest)
        }
        count += 1
    }
}


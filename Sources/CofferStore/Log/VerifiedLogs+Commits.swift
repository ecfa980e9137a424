import CofferCrypto
import Foundation

/// A log entry that writes records (a commit, a rewrite, or a migrated zone's genesis), checked
/// against the verified chain: what a row needs to be believed.
struct VerifiedCommit: Sendable {
    let seq: Int64
    let kind: LogEntry.Kind
    let authorID: String
    let label: String?
    /// The owner's genesis or membership entry in force at this entry.
    let ownerSeq: Int64
    let epoch: Int64
    let time: Double
    let entries: DigestSet
    /// The names of the entries (for audit).
    let names: [UInt8]
    /// The change tag of the records this entry wrote (``ChangeTag/make(_:)`` of `seq`), made
    /// once instead of once a record.
    let changeTag: String

    init(seq: Int64, kind: LogEntry.Kind, authorID: String, label: String?, ownerSeq: Int64, epoch: Int64, time: Double,
         entries: DigestSet, names: [UInt8]) {
        self.seq = seq
        self.kind = kind
        self.authorID = authorID
        self.label = label
        self.ownerSeq = ownerSeq
        self.epoch = epoch
        self.time = time
        self.entries = entries
        self.names = names
        changeTag = ChangeTag.make(seq)
    }
}

extension VerifiedLogs {
    /// Entry `seq` of a zone's log as a record entry: its stored bytes must hash to the value the
    /// verified chain holds for that position (so its author's signature and permission were
    /// checked when the chain was), and its stored version hashes and names must be the ones it
    /// signs. Cached per session.
    /// With `cached` false (a log of audit's own walk), the session's cache is neither read nor filled.
    func verifiedCommit(_ db: any StorageTransaction, zone: ZoneRow, seq: Int64, log: ZoneLog, cached useCache: Bool = true) throws -> VerifiedCommit {
        if useCache, let cached = commits.withLock({ $0[zone.rowID]?[seq] }) { return cached }
        func damaged(_ why: String) -> StoreError {
            StoreError(.integrityFailure, "entry \(seq) of the log of zone '\(zone.id.name)' \(why): the store was changed")
        }
        guard let expected = log.hash(at: seq) else {
            if let tail = log.refusedTail, seq >= tail.seq { throw tail.error }
            throw damaged("is not in the zone's verified log")
        }
        guard let stored = try db.logEntry(zoneRowID: zone.rowID, seq: seq) else { throw damaged("is missing") }
        guard stored.hash == expected else { throw damaged("is not the entry the chain names") }
        guard let entry = LogEntry.decode(stored.body) else { throw damaged("is malformed") }
        let records: RecordEntry
        do { records = try RecordEntry(entry, stored) } catch { throw damaged(error.reason) }
        let entries = records.entries
        let verified = VerifiedCommit(seq: seq, kind: entry.kind, authorID: entry.authorID, label: records.label, ownerSeq: records.ownerSeq,
                                      epoch: records.epoch, time: entry.time, entries: entries.withUnsafeBytes { DigestSet(entries: $0) },
                                      names: records.names)
        if useCache { commits.withLock { $0[zone.rowID, default: [:]][seq] = verified } }
        return verified
    }
}

/// The entry of a zone's log that last named a record: its sequence, and whether it deleted it.
struct LatestVersion: Sendable, Equatable {
    let seq: Int64
    let deleted: Bool
}

extension VerifiedLogs {
    /// Merges into `latest` the record names of the verified record entries after `after` (up
    /// to the verified head; a refused tail is left out): each name's latest entry. Returns the
    /// last sequence read. An entry whose lists do not verify goes to `failed`, which rethrows
    /// by default.
    @discardableResult
    func latestVersions(_ db: any StorageTransaction, zone: ZoneRow, log: ZoneLog, after: Int64, cached: Bool = true,
                        into latest: inout [String: LatestVersion],
                        failed: (Int64, StoreError) throws -> Void = { throw $1 }) throws -> Int64 {
        let head = log.state.headSeq
        guard head > after else { return head }
        // The record entries, by the kind each entry's signed body says (an entry the chain
        // holds and does not decode goes to `verifiedCommit`, which names the damage).
        let seqs = try db.logEntries(zoneRowID: zone.rowID, after: after).filter { stored in
            guard stored.seq <= head else { return false }
            guard let kind = LogEntry.decode(stored.body)?.kind else { return true }
            return kind == .genesis || kind == .commit || kind == .rewrite
        }.map(\.seq)
        // Each entry's reads are noted before any is waited for (one round where the backend fetches).
        let commits = try db.eachGathering(seqs) { seq -> (Int64, Result<VerifiedCommit, StoreError>)? in
            do { return (seq, .success(try verifiedCommit(db, zone: zone, seq: seq, log: log, cached: cached))) } catch let error as StoreError {
                return (seq, .failure(error))
            }
        }
        // Room for every name at once: grown a name at a time, the table is copied over and over.
        latest.reserveCapacity(latest.count + commits.reduce(0) { $0 + ((try? $1.1.get())?.entries.count ?? 0) })
        for (seq, commit) in commits {
            do {
                let commit = try commit.get()
                guard let named = CommitBuilder.parseNames(commit.names, entries: commit.entries.count) else {
                    throw StoreError(.integrityFailure, "entry \(seq) of zone '\(zone.id.name)' has a damaged list of names")
                }
                for item in named { latest[item.name] = LatestVersion(seq: seq, deleted: item.deleted) }
            } catch let error as StoreError {
                try failed(seq, error)
            }
        }
        return head
    }

    /// Refuses a row that is not its name's latest version in the log: a row rolled back to an
    /// older signed version of itself, or put back after a signed deletion, passes the per-row
    /// check (its version is signed), not this one.
    static func checkLatest(name: String, seq: Int64, zone: ZoneRow, latest: [String: LatestVersion]) throws {
        guard let last = latest[name], last.seq > seq else { return }
        throw StoreError(.integrityFailure, last.deleted
            ? "record '\(name)' in zone '\(zone.id.name)' was deleted by entry \(last.seq), but its version of entry \(seq) is in the file: it was put back"
            : "record '\(name)' in zone '\(zone.id.name)' is its version of entry \(seq), but entry \(last.seq) wrote a later one: it was rolled back in the file")
    }

    /// Forgets the verified commits of a zone (its row id may be reused by a new zone).
    func forgetCommits(zoneRowID: Int64) {
        commits.withLock { _ = $0.removeValue(forKey: zoneRowID) }
    }
}

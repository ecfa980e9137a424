import CofferCrypto
import Foundation

/// The records part of a log entry being written: the version hash of every record saved and
/// the deletion hash of every record deleted, and the name of each (see ``RecordsSummary``).
/// ``write(_:session:zone:log:kind:label:time:)`` signs it as the zone's next log entry.
package struct CommitBuilder {
    package let zoneUID: [UInt8]
    package let seq: Int64
    package private(set) var entries = [UInt8]()
    /// Per entry, in order: `0` a saved version or `1` a deletion, the name's length, its bytes.
    package private(set) var names = [UInt8]()

    /// `capacity`: the number of entries expected (the lists grow past it if need be).
    package init(zoneUID: [UInt8], seq: Int64, capacity: Int = 64) {
        self.zoneUID = zoneUID
        self.seq = seq
        entries.reserveCapacity(32 * capacity)
        names.reserveCapacity(16 * capacity)
    }

    package var isEmpty: Bool { entries.isEmpty }

    package mutating func addRecord(_ hash: [UInt8], name: String) {
        entries += hash
        addName(name, deleted: false)
    }

    package mutating func addRecord(_ digest: Digest32, name: String) {
        withUnsafeBytes(of: digest) { entries.append(contentsOf: $0) }
        addName(name, deleted: false)
    }

    package mutating func addDeletion(name: String) {
        entries += Self.deletionHash(zoneUID: zoneUID, name: name, seq: seq)
        addName(name, deleted: true)
    }

    private mutating func addName(_ name: String, deleted: Bool) {
        precondition(name.utf8.count <= Names.maxLength, "record names are validated before they reach a commit")
        names.append(deleted ? 1 : 0)
        names.append(UInt8(name.utf8.count))
        names.append(contentsOf: name.utf8)
    }

    package var summary: RecordsSummary { RecordsSummary(entries: entries, names: names) }

    /// Signs the records as the zone's next log entry (a commit, or the owner's rewrite) at
    /// `log`'s head, which must be at `seq - 1`, through `logs` (which signs and keeps it).
    /// `confirming`: the ids of the pending changes (a replica's intents) the commit carries.
    func write(_ db: any StorageTransaction, logs: VerifiedLogs, zone: ZoneRow, log: inout ZoneLog, kind: LogEntry.Kind, label: String?,
               time: Double, confirming: [[UInt8]] = []) throws {
        precondition(log.state.headSeq + 1 == seq, "a commit is written at the head it was built for")
        let payload = RecordsPayload(epoch: log.state.epoch, ownerSeq: log.state.ownerSeq, label: label, records: summary)
        try logs.appendEntry(db, zone: zone, log: &log, kind: kind, payload: payload.encoded, time: time, entries: entries, names: names,
                           confirming: confirming)
    }

    /// The entries' names, in entry order, or nil when `names` is not
    /// exactly one well-formed name per entry (the commit is then damaged).
    package static func parseNames(_ names: [UInt8], entries: Int) -> [(name: String, deleted: Bool)]? {
        var out = [(name: String, deleted: Bool)](), i = 0
        out.reserveCapacity(entries)
        while i < names.count {
            guard i + 2 <= names.count, names[i] <= 1 else { return nil }
            let deleted = names[i] == 1, count = Int(names[i + 1])
            guard i + 2 + count <= names.count, let name = String(validating: names[(i + 2)..<(i + 2 + count)], as: UTF8.self),
                  (try? Names.validateRecord(name)) != nil else { return nil }
            out.append((name, deleted))
            i += 2 + count
        }
        return out.count == entries ? out : nil
    }

    package static func deletionHash(zoneUID: [UInt8], name: String, seq: Int64) -> [UInt8] {
        BLAKE2b.hash(Array("coffer.record-deletion.v1".utf8) + zoneUID + BigEndian.bytes(UInt32(name.utf8.count)) + Array(name.utf8)
                     + BigEndian.bytes(Int64(seq)))
    }
}

/// What an entry that writes records (a commit, a rewrite, or a migrated zone's genesis) signs
/// of them, read from its stored bytes the one way every verifier reads it: a client before it
/// believes a row (``VerifiedLogs/verifiedCommit(_:zone:seq:log:cached:)``), a server before it takes
/// a batch's rows, deletions and deleted marks (``SignedRecords``).
package struct RecordEntry: Sendable {
    package let epoch: Int64
    /// The owner's genesis or membership entry in force at this entry.
    package let ownerSeq: Int64
    package let label: String?
    /// The 32-byte version hashes (a deletion's is its deletion hash), as stored and signed.
    package let entries: [UInt8]
    /// Each record's name, saved or deleted (see ``CommitBuilder/parseNames(_:entries:)``), as stored and signed.
    package let names: [UInt8]
    /// How many records it names.
    package let count: Int

    /// Why stored bytes are not a record entry's.
    package enum Damage: Error {
        case malformed, writesNoRecords, unsignedLists

        package var reason: String {
            switch self {
            case .malformed: "is malformed"
            case .writesNoRecords: "writes no records"
            case .unsignedLists: "has lists of records it does not sign"
            }
        }
    }

    package static func writesRecords(_ kind: LogEntry.Kind) -> Bool { kind == .commit || kind == .rewrite || kind == .genesis }

    /// - Throws: ``Damage`` for an entry of another kind, a payload that does not decode, or
    ///   stored lists that are not the ones the entry's body signs.
    package init(_ entry: LogEntry, _ stored: StoredLogEntry) throws(Damage) {
        let records: RecordsSummary
        switch entry.kind {
        case .commit, .rewrite:
            guard let payload = RecordsPayload.decode(entry.payload) else { throw .malformed }
            (epoch, ownerSeq, label, records) = (payload.epoch, payload.ownerSeq, payload.label, payload.records)
        case .genesis:
            guard let payload = GenesisPayload.decode(entry.payload) else { throw .malformed }
            (epoch, ownerSeq, label, records) = (payload.state.epoch, entry.seq, "coffer.upgrade", payload.records)
        default:
            throw .writesNoRecords
        }
        guard records.matches(entries: stored.entries, names: stored.names) else { throw .unsignedLists }
        entries = stored.entries ?? []
        names = stored.names ?? []
        count = records.count
    }
}

/// What an entry that writes records signs of them, as a server checks a batch against it: its
/// list of version hashes, and the names it saves and deletes. A server takes a row, a deletion
/// or a deleted mark only when such an entry names it.
package struct SignedRecords: Sendable {
    /// The 32-byte version hashes (a deletion's is its deletion hash).
    package let entries: [UInt8]
    package let saved: Set<String>
    package let deleted: Set<String>

    package static func writesRecords(_ kind: LogEntry.Kind) -> Bool { RecordEntry.writesRecords(kind) }

    /// nil for an entry that writes no records, or whose stored lists are not the ones its body
    /// signs or are damaged (what a client refuses).
    package init?(_ entry: LogEntry, _ stored: StoredLogEntry) {
        guard let records = try? RecordEntry(entry, stored), let named = CommitBuilder.parseNames(records.names, entries: records.count) else { return nil }
        entries = records.entries
        var saved = Set<String>(), deleted = Set<String>()
        for item in named {
            if item.deleted { deleted.insert(item.name) } else { saved.insert(item.name) }
        }
        self.saved = saved
        self.deleted = deleted
    }

    /// Whether the list of version hashes holds `digest`.
    package func lists(_ digest: Digest32) -> Bool {
        guard entries.count % 32 == 0 else { return false }
        let bytes = digest.bytes
        return stride(from: 0, to: entries.count, by: 32).contains { entries[$0..<$0 + 32].elementsEqual(bytes) }
    }
}

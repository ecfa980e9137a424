import CofferCrypto
import Foundation
import GRDB

/// The records part of a log entry being written: the version hash of every record saved and
/// the deletion hash of every record deleted, and the name of each (see ``RecordsSummary``).
/// ``write(_:session:zone:log:kind:label:time:)`` signs it as the zone's next log entry.
struct CommitBuilder {
    let zoneUID: [UInt8]
    let seq: Int64
    private(set) var entries = [UInt8]()
    /// Per entry, in order: `0` a saved version or `1` a deletion, the name's length, its bytes.
    private(set) var names = [UInt8]()

    /// `capacity`: the number of entries expected (the lists grow past it if need be).
    init(zoneUID: [UInt8], seq: Int64, capacity: Int = 64) {
        self.zoneUID = zoneUID
        self.seq = seq
        entries.reserveCapacity(32 * capacity)
        names.reserveCapacity(16 * capacity)
    }

    var isEmpty: Bool { entries.isEmpty }

    mutating func addRecord(_ hash: [UInt8], name: String) {
        entries += hash
        addName(name, deleted: false)
    }

    mutating func addRecord(_ digest: Digest32, name: String) {
        withUnsafeBytes(of: digest) { entries.append(contentsOf: $0) }
        addName(name, deleted: false)
    }

    mutating func addDeletion(name: String) {
        entries += Self.deletionHash(zoneUID: zoneUID, name: name, seq: seq)
        addName(name, deleted: true)
    }

    private mutating func addName(_ name: String, deleted: Bool) {
        precondition(name.utf8.count <= Names.maxLength, "record names are validated before they reach a commit")
        names.append(deleted ? 1 : 0)
        names.append(UInt8(name.utf8.count))
        names.append(contentsOf: name.utf8)
    }

    var summary: RecordsSummary { RecordsSummary(entries: entries, names: names) }

    /// Signs the records as the zone's next log entry (a commit, or the owner's rewrite) at
    /// `log`'s head, which must be at `seq - 1`.
    func write(_ db: any StorageTransaction, session: Session, zone: ZoneRow, log: inout ZoneLog, kind: LogEntry.Kind, label: String?,
               time: Double) throws {
        precondition(log.state.headSeq + 1 == seq, "a commit is written at the head it was built for")
        let payload = RecordsPayload(epoch: log.state.epoch, ownerSeq: log.state.ownerSeq, label: label, records: summary)
        try session.appendEntry(db, zone: zone, log: &log, kind: kind, payload: payload.encoded, time: time, entries: entries, names: names)
    }

    /// The entries' names, in entry order, or nil when `names` is not
    /// exactly one well-formed name per entry (the commit is then damaged).
    static func parseNames(_ names: [UInt8], entries: Int) -> [(name: String, deleted: Bool)]? {
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

    static func deletionHash(zoneUID: [UInt8], name: String, seq: Int64) -> [UInt8] {
        BLAKE2b.hash(Array("coffer.record-deletion.v1".utf8) + zoneUID + BigEndian.bytes(UInt32(name.utf8.count)) + Array(name.utf8)
                     + BigEndian.bytes(Int64(seq)))
    }
}

/// What an entry that writes records (a commit, a rewrite, a genesis) signs of them: its list of
/// version hashes, and the names it saves and deletes. A server takes a row, a deletion or a
/// deleted mark only when such an entry names it.
struct SignedRecords: Sendable {
    /// The 32-byte version hashes (a deletion's is its deletion hash).
    let entries: [UInt8]
    let saved: Set<String>
    let deleted: Set<String>

    static func writesRecords(_ kind: LogEntry.Kind) -> Bool { kind == .commit || kind == .rewrite || kind == .genesis }

    /// nil for an entry that writes no records, or whose stored lists are not the ones its body
    /// signs or are damaged (what a client refuses).
    init?(_ entry: LogEntry, _ stored: StoredLogEntry) {
        let records: RecordsSummary
        switch entry.kind {
        case .commit, .rewrite:
            guard let payload = RecordsPayload.decode(entry.payload) else { return nil }
            records = payload.records
        case .genesis:
            guard let payload = GenesisPayload.decode(entry.payload) else { return nil }
            records = payload.records
        case .membership, .acceptance, .deletion:
            return nil
        }
        guard records.matches(entries: stored.entries, names: stored.names),
              let named = CommitBuilder.parseNames(stored.names ?? [], entries: records.count) else { return nil }
        entries = stored.entries ?? []
        var saved = Set<String>(), deleted = Set<String>()
        for item in named {
            if item.deleted { deleted.insert(item.name) } else { saved.insert(item.name) }
        }
        self.saved = saved
        self.deleted = deleted
    }

    /// Whether the list of version hashes holds `digest`.
    func lists(_ digest: Digest32) -> Bool {
        guard entries.count % 32 == 0 else { return false }
        let bytes = digest.bytes
        return stride(from: 0, to: entries.count, by: 32).contains { entries[$0..<$0 + 32].elementsEqual(bytes) }
    }
}

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
    func write(_ db: GRDB.Database, session: Session, zone: ZoneRow, log: inout ZoneLog, kind: LogEntry.Kind, label: String?,
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

/// A 32-byte hash as four words: cheap to compare, and its first word picks its slot in a
/// ``DigestSet``.
struct Digest32: Equatable, Sendable {
    var a: UInt64, b: UInt64, c: UInt64, d: UInt64
    static let zero = Digest32(a: 0, b: 0, c: 0, d: 0)

    init(a: UInt64, b: UInt64, c: UInt64, d: UInt64) {
        self.a = a; self.b = b; self.c = c; self.d = d
    }

    /// From exactly 32 bytes.
    init(_ bytes: some Collection<UInt8>) {
        precondition(bytes.count == 32, "a digest is 32 bytes")
        var value = Digest32.zero
        withUnsafeMutableBytes(of: &value) { out in _ = out.initializeMemory(as: UInt8.self, from: bytes) }
        self = value
    }

    var bytes: [UInt8] { withUnsafeBytes(of: self) { Array($0) } }
}

/// The version digests of one commit, for the membership test of every record read: the
/// digests in one array, as the commit stores them, and an open-addressing table of their
/// positions, at least twice as large, whose slot a digest's first word picks (a BLAKE2b output
/// is uniform). Building it hashes nothing, and it holds about 40 bytes a digest, where a
/// `Set<Digest32>` took about 80 and hashed each digest with SipHash to build and to look up.
/// A writer who chose digests that share first words would only slow lookups in their own
/// commit, each at most one pass over it.
struct DigestSet: Sendable {
    private let digests: [Digest32]
    /// 0 for an empty slot, else a position in `digests` plus one.
    private let slots: [UInt32]

    /// From a commit's entries: 32 bytes each (the caller checks the length).
    init(entries: UnsafeRawBufferPointer) {
        precondition(entries.count % 32 == 0, "entries are 32 bytes each")
        let count = entries.count / 32
        precondition(count < Int(UInt32.max), "too many entries")
        digests = [Digest32](unsafeUninitializedCapacity: count) { out, initialized in
            if count > 0 { UnsafeMutableRawBufferPointer(out).copyMemory(from: entries) }
            initialized = count
        }
        var size = 1
        while size < count * 2 { size <<= 1 }
        let mask = size - 1
        slots = digests.withUnsafeBufferPointer { digests in
            [UInt32](unsafeUninitializedCapacity: size) { table, initialized in
                table.initialize(repeating: 0)
                for (position, digest) in digests.enumerated() {
                    var slot = Int(truncatingIfNeeded: digest.a) & mask
                    while table[slot] != 0 { slot = (slot + 1) & mask }
                    table[slot] = UInt32(position + 1)
                }
                initialized = size
            }
        }
    }

    var count: Int { digests.count }

    func contains(_ digest: Digest32) -> Bool {
        slots.withUnsafeBufferPointer { table in
            digests.withUnsafeBufferPointer { digests in
                let mask = table.count - 1
                var slot = Int(truncatingIfNeeded: digest.a) & mask
                while true {
                    let position = table[slot]
                    if position == 0 { return false }
                    if digests[Int(position) - 1] == digest { return true }
                    slot = (slot + 1) & mask
                }
            }
        }
    }
}

import CofferVault
import Foundation

/// A zone as its store holds it, whole: its row, its signed log with each record entry's lists,
/// its wrapped and chained keys, its public link and member lookup, its schema, its deleted
/// names and its record rows as sealed. What ``Session/pushZone(_:to:progress:)`` copies onto
/// another store, and what a backup keeps of each zone (see `Docs/Backup.md`).
///
/// Nothing in it is sealed or signed again on the way: record envelopes bind the zone, not the
/// store, so every signature and ciphertext stays valid wherever the zone is put back.
struct ZoneCopy: Sendable {
    /// A log entry as stored: body, signature, and the version hashes and names a commit,
    /// rewrite or genesis lists (nil for other entries).
    typealias Entry = StoredLogEntry

    struct WrappedKey: Sendable {
        let epoch: Int64
        let memberID: String
        let wrapped: [UInt8]
    }

    struct ChainedKey: Sendable {
        let epoch: Int64
        let sealed: [UInt8]
    }

    struct Link: Sendable {
        let epoch: Int64
        let sealedKey: [UInt8]
        let sealedSecret: [UInt8]
    }

    struct SchemaField: Sendable {
        let recordType: String
        let field: String
        let valueType: String
        let encrypted: Bool
    }

    struct Tombstone: Sendable {
        let name: String
        let seq: Int64
    }

    /// A record row as stored: its stamp, its plain values' encoding and its sealed envelope.
    struct Row: Sendable {
        let stamp: VersionStamp
        let plain: [UInt8]
        let sealed: [UInt8]?

        init(stamp: VersionStamp, plain: [UInt8], sealed: [UInt8]?) {
            self.stamp = stamp
            self.plain = plain
            self.sealed = sealed
        }

        /// A row as read from a store.
        init(stored row: StoredRow) {
            let count = row.plainCount
            self = row.withBytes { bytes in
                let stamp = VersionStamp(name: row.name, type: row.type, parent: row.parent, seq: row.seq, epoch: row.epoch,
                                         membershipSeq: row.membershipSeq, creatorID: row.creatorID, modifierID: row.modifierID,
                                         created: row.created, modified: row.modified)
                return Row(stamp: stamp, plain: Array(bytes[..<count]), sealed: row.hasSealed ? Array(bytes[count...]) : nil)
            }
        }
    }

    let id: ZoneID
    let uid: [UInt8]
    /// Seconds since 1970.
    let created: Double
    var log: [Entry]
    var wrappedKeys: [WrappedKey]
    var chainedKeys: [ChainedKey]
    var link: Link?
    var members: [String]
    var shareUID: [UInt8]?
    var schema: [SchemaField]
    var tombstones: [Tombstone]
    var rows: [Row]

    /// The position of the log's last entry.
    var headSeq: Int64 { log.last?.seq ?? 0 }

    /// The users who signed an entry of the log.
    var authors: Set<String> { Set(log.compactMap { LogEntry.decode($0.body)?.authorID }) }

    /// The commits, rewrites and genesis, whose lists a copy carries.
    static func isListed(_ body: [UInt8]) -> Bool {
        LogEntry.decode(body).map { [.commit, .rewrite, .genesis].contains($0.kind) } ?? false
    }

    /// The zone `zone` as `t` read it: `t` holds the zone (``StorageSnapshot/Need/zone(_:)``), its
    /// whole log, its deleted names, the lists of its listed entries, and its rows when it read
    /// them (``StorageSnapshot/Need/allRows(zoneRowID:)``; none otherwise).
    init(zone: ZoneRow, from t: StorageSnapshot.Tables<StoredRow>) throws {
        let rowID = zone.rowID
        id = zone.id
        uid = zone.uid
        created = zone.created.timeIntervalSince1970
        guard let stored = t.logs[rowID]?.entries else { throw StoreError(.internalError, "the log of zone '\(zone.id.name)' was not read") }
        log = try stored.map { entry -> Entry in
            var lists: StoredLogEntry?
            if Self.isListed(entry.body) {
                guard let listed = t.entries[rowID]?[entry.seq] ?? nil else {
                    throw StoreError(.integrityFailure, "zone '\(zone.id.name)': entry \(entry.seq) has no record lists")
                }
                lists = listed
            }
            return Entry(seq: entry.seq, body: entry.body, signature: entry.signature, entries: lists?.entries, names: lists?.names)
        }
        wrappedKeys = (t.wrappedKeys[rowID] ?? [:]).sorted { $0.key < $1.key }.flatMap { epoch, members in
            members.sorted { $0.key < $1.key }.map { WrappedKey(epoch: epoch, memberID: $0.key, wrapped: $0.value) }
        }
        chainedKeys = (t.chainedKeys[rowID] ?? [:]).sorted { $0.key < $1.key }.map { ChainedKey(epoch: $0.key, sealed: $0.value) }
        link = (t.shareLinks[rowID] ?? nil).map { Link(epoch: $0.epoch, sealedKey: $0.sealedKey, sealedSecret: $0.sealedSecret) }
        members = (t.zoneMembers[rowID] ?? []).sorted()
        shareUID = t.zoneShareUIDs[rowID] ?? nil
        schema = (t.schemaRows[rowID] ?? [:]).sorted { $0.key < $1.key }.flatMap { recordType, fields in
            fields.sorted { $0.field < $1.field }.map { SchemaField(recordType: recordType, field: $0.field, valueType: $0.valueType, encrypted: $0.encrypted) }
        }
        tombstones = (t.tombstoneLists[rowID] ?? [:]).sorted { $0.key < $1.key }.map { Tombstone(name: $0.key, seq: $0.value) }
        rows = (t.pages[rowID]?["all"] ?? []).compactMap { name in (t.records[rowID]?[name] ?? nil).map(Row.init(stored:)) }
    }

    init(id: ZoneID, uid: [UInt8], created: Double, log: [Entry], wrappedKeys: [WrappedKey], chainedKeys: [ChainedKey], link: Link?,
         members: [String], shareUID: [UInt8]?, schema: [SchemaField], tombstones: [Tombstone], rows: [Row]) {
        self.id = id
        self.uid = uid
        self.created = created
        self.log = log
        self.wrappedKeys = wrappedKeys
        self.chainedKeys = chainedKeys
        self.link = link
        self.members = members
        self.shareUID = shareUID
        self.schema = schema
        self.tombstones = tombstones
        self.rows = rows
    }

    /// The most bytes of log entries, keys and rows one batch carries (a Coffer server takes
    /// request bodies of at most 4 MiB, in which bytes travel as base64).
    static let maxBatchBytes = 2 << 20

    /// The batches of writes that put the zone into a store that does not have it, as zone row
    /// `zoneRowID`: the zone, its log, keys, link, members, schema and deleted names, then its
    /// rows, at most 400 a batch. `head` goes first in the first batch (the cards of the log's
    /// signers, say). Each batch is within what a Coffer server takes in one request.
    func batches(zoneRowID: Int64, head: [StorageSnapshot.Write] = []) throws -> [[StorageSnapshot.Write]] {
        var batches = [[StorageSnapshot.Write]]()
        var current = head
        var bytes = 0
        func add(_ write: StorageSnapshot.Write, size: Int) {
            // The first batch keeps the zone with its genesis, which a server checks together.
            let canSplit = !batches.isEmpty || current.count > head.count + 2
            if canSplit && (current.count >= 2_000 || bytes + size > Self.maxBatchBytes) {
                batches.append(current)
                current = []
                bytes = 0
            }
            current.append(write)
            bytes += size
        }
        current.append(.insertZone(rowID: zoneRowID, uid: uid, id: id, created: created))
        var decoded = [Int64: LogEntry]()
        for stored in log {
            guard let entry = LogEntry.decode(stored.body) else { throw StoreError(.integrityFailure, "zone '\(id.name)' holds a malformed log entry") }
            decoded[stored.seq] = entry
            add(.appendLog(zoneRowID: zoneRowID, head: stored.seq - 1, entry: entry, body: stored.body, signature: stored.signature,
                           hash: stored.hash, entries: stored.entries, names: stored.names),
                size: stored.body.count + stored.signature.count + (stored.entries?.count ?? 0) + (stored.names?.count ?? 0) + 64)
        }
        for key in wrappedKeys {
            add(.wrappedKey(zoneRowID: zoneRowID, epoch: key.epoch, memberID: key.memberID, wrapped: key.wrapped), size: key.wrapped.count + 64)
        }
        for key in chainedKeys {
            add(.storeChainedKey(zoneRowID: zoneRowID, epoch: key.epoch, sealed: key.sealed), size: key.sealed.count + 32)
        }
        if let link {
            add(.storeShareLink(zoneRowID: zoneRowID, epoch: link.epoch, sealedKey: link.sealedKey, sealedSecret: link.sealedSecret),
                size: link.sealedKey.count + link.sealedSecret.count + 32)
        }
        add(.setZoneMembers(zoneRowID: zoneRowID, members: Set(members), shareUID: shareUID), size: members.count * 40 + 32)
        var types = [String: [String: FieldType]]()
        for field in schema {
            guard let type = FieldType(name: field.valueType) else { throw StoreError(.integrityFailure, "zone '\(id.name)' has a schema row of unknown type") }
            types[field.recordType, default: [:]][field.field] = type
            add(.fieldSchema(zoneRowID: zoneRowID, recordType: field.recordType, field: field.field,
                             schema: FieldSchema(type: type, encrypted: field.encrypted)),
                size: field.recordType.utf8.count + field.field.utf8.count + 32)
        }
        // Deleted names, for the change feed: each deletion's author, time and label are its
        // commit's, which the log signs.
        for tombstone in tombstones {
            guard let entry = decoded[tombstone.seq] else { continue }
            add(.addTombstone(zoneRowID: zoneRowID, name: tombstone.name, seq: tombstone.seq, authorID: entry.authorID,
                              label: RecordsPayload.decode(entry.payload)?.label, time: entry.time),
                size: tombstone.name.utf8.count + 64)
        }
        current.append(.touchZone(rowID: zoneRowID))
        batches.append(current)

        // The rows as stored, 400 a batch; each carries its plain values' types, which its
        // version hash signs.
        var rows = [StorageSnapshot.Write]()
        bytes = 0
        for row in self.rows {
            let size = row.plain.count + (row.sealed?.count ?? 0) + row.stamp.name.utf8.count + 128
            if rows.count == Limits.maxBatchRecords || (!rows.isEmpty && bytes + size > Self.maxBatchBytes) {
                batches.append(rows)
                rows = []
                bytes = 0
            }
            rows.append(try Self.insertWrite(row, types: types, zoneRowID: zoneRowID))
            bytes += size
        }
        if !rows.isEmpty { batches.append(rows) }
        return batches
    }

    /// The write that inserts `row` as stored, in zone row `zoneRowID`, with its plain values'
    /// types as the zone's schema (`types`: record type, field, type) gives them, which its
    /// version hash signs.
    static func insertWrite(_ row: Row, types: [String: [String: FieldType]], zoneRowID: Int64) throws -> StorageSnapshot.Write {
        let values = try row.plain.withUnsafeBytes { plain in
            try PlainValuesCodec.decode(plain, typeOf: { types[row.stamp.type]?[$0] })
        }
        return .insertRecord(zoneRowID: zoneRowID, SealedVersion(stamp: row.stamp, plain: row.plain, plainTypes: PlainValuesCodec.typeCodes(values),
                                                                 sealed: row.sealed, digest: .zero))
    }
}

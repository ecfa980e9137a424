import Foundation
import GRDB

/// The SQLite backend of ``StorageTransaction``: GRDB's connection, inside one read or write
/// transaction of the store (``Store/read(_:)``, ``Store/write(_:)``), made for that
/// transaction and not kept after it. Statements are cached on the connection; the hot ones (a
/// save's rows, a lookup) run through SQLite's C API (``RawStatement``).
final class SQLiteTransaction: StorageTransaction {
    /// The connection, inside the transaction.
    let db: GRDB.Database
    /// The record-row writer of each zone whose rows this transaction wrote one at a time (a
    /// rewrite's, an upgrade's, a move's, a server's apply): made at the first row, used for the
    /// rest. Its statements are the connection's cached ones, reset after each row.
    private var rowWriters = [Int64: SQLiteRecordWriter]()

    init(_ db: GRDB.Database) {
        self.db = db
    }

    /// A record row's columns, in the order ``StoredRow/make(row:)`` and the raw readers take them.
    static let recordColumns = "name, type, parent, plain, sealed, epoch, seq, creator_id, modifier_id, created_at, modified_at, membership_seq"

    // MARK: Zones

    func zoneRow(_ zoneID: ZoneID) throws -> ZoneRow? {
        let statement = try RawStatement(db.cachedStatement(
            sql: "SELECT id, uid, sequence, created_at, log_format FROM zone WHERE owner_id = ? AND name = ?"))
        defer { statement.reset() }
        statement.bind(1, zoneID.ownerID)
        statement.bind(2, zoneID.name)
        guard try statement.step() else { return nil }
        let uid = statement.bytes(1)
        guard uid.count == 16 else { throw StoreError(.integrityFailure, "zone '\(zoneID.name)' has a damaged row: the store was changed") }
        return ZoneRow(rowID: statement.int64(0), uid: Array(uid), id: zoneID, sequence: statement.int64(2),
                       created: Date(timeIntervalSince1970: statement.double(3)), logFormat: statement.int64(4))
    }

    func zoneRows(ownedBy ownerID: String) throws -> [(zone: ZoneRow, recordCount: Int)] {
        try Row.fetchAll(db, sql: """
            SELECT z.*, (SELECT count(*) FROM record r WHERE r.zone_id = z.id) AS record_count
            FROM zone z WHERE z.owner_id = ? ORDER BY z.name
            """, arguments: [ownerID]).map { row in (try ZoneRow(row: row), try row.required("record_count")) }
    }

    func insertZone(uid: [UInt8], id: ZoneID, created: Double) throws -> Int64 {
        if try Bool.fetchOne(db, sql: "SELECT 1 FROM zone WHERE owner_id = ? AND name = ?", arguments: [id.ownerID, id.name]) == true {
            throw StoreError(.alreadyExists, "zone '\(id.name)' already exists")
        }
        return try insertZoneRow(rowID: nil, uid: uid, id: id, created: created)
    }

    /// Inserts a zone's row, under `rowID` or (nil) the next id SQLite hands out; returns its id.
    /// A name or id already taken fails as SQLite's constraint.
    func insertZoneRow(rowID: Int64?, uid: [UInt8], id: ZoneID, created: Double) throws -> Int64 {
        try db.execute(sql: """
            INSERT INTO zone (id, uid, owner_id, name, current_epoch, sequence, created_at, log_format) VALUES (?, ?, ?, ?, 1, 0, ?, 1)
            """, arguments: [rowID, Data(uid), id.ownerID, id.name, created])
        return db.lastInsertedRowID
    }

    func markZoneLogged(zoneRowID: Int64) throws {
        try db.execute(sql: "UPDATE zone SET log_format = 1 WHERE id = ?", arguments: [zoneRowID])
    }

    func deleteZone(zoneRowID: Int64) throws {
        // Its genesis and its owner's deletion stay, when the log ends with one.
        try db.execute(sql: """
            INSERT OR REPLACE INTO deleted_zone (uid, owner_id, name, genesis_body, genesis_signature, deletion_body, deletion_signature)
            SELECT z.uid, z.owner_id, z.name, g.body, g.signature, d.body, d.signature
            FROM zone z
            JOIN zone_log g ON g.zone_id = z.id AND g.seq = (SELECT min(seq) FROM zone_log WHERE zone_id = z.id)
            JOIN zone_log d ON d.zone_id = z.id AND d.seq = (SELECT max(seq) FROM zone_log WHERE zone_id = z.id)
            WHERE z.id = ? AND d.kind = ?
            """, arguments: [zoneRowID, Int64(LogEntry.Kind.deletion.rawValue)])
        // Records, keys, log and schema go with it (ON DELETE CASCADE); secure_delete zeroes the freed pages.
        try db.execute(sql: "DELETE FROM zone WHERE id = ?", arguments: [zoneRowID])
        WriteAheadLogScrub.note(db)
    }

    func deletedZone(uid: [UInt8]) throws -> DeletedZoneRow? {
        guard let row = try Row.fetchOne(db, sql: """
            SELECT owner_id, name, genesis_body, genesis_signature, deletion_body, deletion_signature FROM deleted_zone WHERE uid = ?
            """, arguments: [Data(uid)]) else { return nil }
        let bytes = try (2...5).map { Array(try row.required($0) as Data) }
        return DeletedZoneRow(uid: uid, id: ZoneID(name: try row.required(1), ownerID: try row.required(0)),
                              genesisBody: bytes[0], genesisSignature: bytes[1], deletionBody: bytes[2], deletionSignature: bytes[3])
    }

    func touchZone(zoneRowID: Int64) throws {
        try db.cachedStatement(sql: "UPDATE store_counter SET db_seq = db_seq + 1 WHERE id = 1").execute()
        try db.cachedStatement(sql: "UPDATE zone SET db_seq = (SELECT db_seq FROM store_counter WHERE id = 1) WHERE id = ?")
            .execute(arguments: [zoneRowID])
    }

    func noteZoneGone(_ zone: ZoneRow, for users: Set<String>, reason: String) throws {
        try db.execute(sql: "UPDATE store_counter SET db_seq = db_seq + 1 WHERE id = 1")
        for user in users {
            try db.execute(sql: """
                INSERT OR REPLACE INTO zone_tombstone (user_id, zone_uid, owner_id, name, db_seq, reason)
                VALUES (?, ?, ?, ?, (SELECT db_seq FROM store_counter WHERE id = 1), ?)
                """, arguments: [user, Data(zone.uid), zone.id.ownerID, zone.id.name, reason])
        }
    }

    func noteZoneBack(_ zone: ZoneRow, for user: String) throws {
        try db.execute(sql: "DELETE FROM zone_tombstone WHERE user_id = ? AND zone_uid = ?", arguments: [user, Data(zone.uid)])
    }

    // MARK: Zone logs

    /// Through the `zone_log_head` index (`kind IS NOT NULL` lets SQLite use it): a seek in the
    /// log's own rows reads their overflow pages.
    func logHead(zoneRowID: Int64) throws -> (seq: Int64, hash: Digest32)? {
        let statement = try RawStatement(db.cachedStatement(sql: "SELECT seq, hash FROM zone_log WHERE zone_id = ? AND kind IS NOT NULL ORDER BY seq DESC LIMIT 1"))
        defer { statement.reset() }
        statement.bind(1, zoneRowID)
        guard try statement.step() else { return nil }
        let hash = statement.bytes(1)
        return (statement.int64(0), hash.count == 32 ? Digest32(hash) : .zero)
    }

    func logEntries(zoneRowID: Int64, after seq: Int64) throws -> [StoredLogEntry] {
        let statement = try RawStatement(db.cachedStatement(sql: "SELECT seq, body, signature FROM zone_log WHERE zone_id = ? AND seq > ? ORDER BY seq"))
        defer { statement.reset() }
        statement.bind(1, zoneRowID)
        statement.bind(2, seq)
        var out = [StoredLogEntry]()
        while try statement.step() {
            out.append(StoredLogEntry(seq: statement.int64(0), body: Array(statement.bytes(1)), signature: Array(statement.bytes(2)),
                                      entries: nil, names: nil))
        }
        return out
    }

    func logEntry(zoneRowID: Int64, seq: Int64) throws -> StoredLogEntry? {
        guard let row = try Row.fetchOne(db.cachedStatement(sql: "SELECT body, signature, entries, names FROM zone_log WHERE zone_id = ? AND seq = ?"),
                                         arguments: [zoneRowID, seq]) else { return nil }
        return StoredLogEntry(seq: seq, body: Array(try row.required(0) as Data), signature: Array(try row.required(1) as Data),
                              entries: (try row.optional(2) as Data?).map(Array.init), names: (try row.optional(3) as Data?).map(Array.init))
    }

    func appendLogEntry(zoneRowID: Int64, entry: LogEntry, body: [UInt8], signature: [UInt8], hash: Digest32,
                        entries: [UInt8]?, names: [UInt8]?) throws {
        try db.cachedStatement(sql: """
            INSERT INTO zone_log (zone_id, seq, kind, author_id, body, signature, hash, entries, names) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)
            """).execute(arguments: [zoneRowID, entry.seq, Int(entry.kind.rawValue), entry.authorID, Data(body), Data(signature),
                                     Data(hash.bytes), entries.map { Data($0) }, names.map { Data($0) }])
        try db.cachedStatement(sql: "UPDATE zone SET sequence = ? WHERE id = ?").execute(arguments: [entry.seq, zoneRowID])
    }

    // MARK: Zone keys

    // Rows, not `Data.fetchOne`: a NULL key (a row the store was changed to hold) is damage, not a missing key.
    func wrappedKey(zoneRowID: Int64, epoch: Int64, memberID: String) throws -> [UInt8]? {
        try Row.fetchOne(db, sql: "SELECT wrapped_key FROM zone_key WHERE zone_id = ? AND epoch = ? AND member_id = ?",
                         arguments: [zoneRowID, epoch, memberID]).map { Array(try $0.required(0) as Data) }
    }

    func chainedKey(zoneRowID: Int64, epoch: Int64) throws -> [UInt8]? {
        try Row.fetchOne(db, sql: "SELECT sealed_key FROM zone_key_chain WHERE zone_id = ? AND epoch = ?",
                         arguments: [zoneRowID, epoch]).map { Array(try $0.required(0) as Data) }
    }

    func insertWrappedKey(zoneRowID: Int64, epoch: Int64, memberID: String, wrapped: [UInt8]) throws {
        try db.execute(sql: "INSERT INTO zone_key (zone_id, epoch, member_id, wrapped_key) VALUES (?, ?, ?, ?)",
                    arguments: [zoneRowID, epoch, memberID, Data(wrapped)])
    }

    // MARK: Shares

    func storeWrappedKey(zoneRowID: Int64, epoch: Int64, memberID: String, wrapped: [UInt8]) throws {
        try db.execute(sql: "INSERT OR REPLACE INTO zone_key (zone_id, epoch, member_id, wrapped_key) VALUES (?, ?, ?, ?)",
                    arguments: [zoneRowID, epoch, memberID, Data(wrapped)])
    }

    func deleteWrappedKeys(zoneRowID: Int64, memberID: String?) throws {
        WriteAheadLogScrub.note(db)
        if let memberID {
            try db.execute(sql: "DELETE FROM zone_key WHERE zone_id = ? AND member_id = ?", arguments: [zoneRowID, memberID])
        } else {
            try db.execute(sql: "DELETE FROM zone_key WHERE zone_id = ?", arguments: [zoneRowID])
        }
    }

    func storeChainedKey(zoneRowID: Int64, epoch: Int64, sealed: [UInt8]) throws {
        try db.execute(sql: "INSERT OR REPLACE INTO zone_key_chain (zone_id, epoch, sealed_key) VALUES (?, ?, ?)",
                    arguments: [zoneRowID, epoch, Data(sealed)])
    }

    func deleteOlderKeys(zoneRowID: Int64, before epoch: Int64) throws {
        WriteAheadLogScrub.note(db)
        try db.execute(sql: "DELETE FROM zone_key_chain WHERE zone_id = ?", arguments: [zoneRowID])
        try db.execute(sql: "DELETE FROM zone_key WHERE zone_id = ? AND epoch < ?", arguments: [zoneRowID, epoch])
    }

    func noteZoneEpoch(zoneRowID: Int64, epoch: Int64) throws {
        try db.execute(sql: "UPDATE zone SET current_epoch = ? WHERE id = ?", arguments: [epoch, zoneRowID])
    }

    func shareLink(zoneRowID: Int64) throws -> (epoch: Int64, sealedKey: [UInt8], sealedSecret: [UInt8])? {
        try Row.fetchOne(db, sql: "SELECT epoch, sealed_key, sealed_secret FROM share_link WHERE zone_id = ?", arguments: [zoneRowID]).map { row in
            (try row.required(0), Array(try row.required(1) as Data), Array(try row.required(2) as Data))
        }
    }

    func storeShareLink(zoneRowID: Int64, epoch: Int64, sealedKey: [UInt8], sealedSecret: [UInt8]) throws {
        try db.execute(sql: "INSERT OR REPLACE INTO share_link (zone_id, epoch, sealed_key, sealed_secret) VALUES (?, ?, ?, ?)",
                    arguments: [zoneRowID, epoch, Data(sealedKey), Data(sealedSecret)])
    }

    func deleteShareLink(zoneRowID: Int64) throws {
        try db.execute(sql: "DELETE FROM share_link WHERE zone_id = ?", arguments: [zoneRowID])
    }

    func setZoneMembers(zoneRowID: Int64, members: Set<String>, shareUID: [UInt8]?) throws {
        try db.execute(sql: "DELETE FROM zone_member WHERE zone_id = ?", arguments: [zoneRowID])
        for id in members.sorted() {
            try db.execute(sql: "INSERT INTO zone_member (zone_id, user_id) VALUES (?, ?)", arguments: [zoneRowID, id])
        }
        try db.execute(sql: "UPDATE zone SET share_uid = ? WHERE id = ?", arguments: [shareUID.map { Data($0) }, zoneRowID])
    }

    func addZoneMember(zoneRowID: Int64, userID: String) throws {
        try db.execute(sql: "INSERT OR IGNORE INTO zone_member (zone_id, user_id) VALUES (?, ?)", arguments: [zoneRowID, userID])
    }

    func zoneRows(shareUID: [UInt8]) throws -> [ZoneRow] {
        try Row.fetchAll(db, sql: "SELECT * FROM zone WHERE share_uid = ? ORDER BY id", arguments: [Data(shareUID)]).map(ZoneRow.init)
    }

    func zoneRows(ownedByOrListing userID: String) throws -> [ZoneRow] {
        try Row.fetchAll(db, sql: """
            SELECT z.* FROM zone z
            WHERE z.owner_id = ? OR EXISTS (SELECT 1 FROM zone_member m WHERE m.zone_id = z.id AND m.user_id = ?)
            ORDER BY z.owner_id = ? DESC, z.name
            """, arguments: [userID, userID, userID]).map(ZoneRow.init)
    }

    func zoneRows(sharedWith memberID: String) throws -> [(zone: ZoneRow, recordCount: Int)] {
        try Row.fetchAll(db, sql: """
            SELECT z.*, (SELECT count(*) FROM record r WHERE r.zone_id = z.id) AS record_count
            FROM zone z WHERE z.owner_id != ? AND EXISTS (SELECT 1 FROM zone_member m WHERE m.zone_id = z.id AND m.user_id = ?)
            ORDER BY z.owner_id, z.name
            """, arguments: [memberID, memberID]).map { row in (try ZoneRow(row: row), try row.required("record_count")) }
    }

    // MARK: Schema

    func fieldSchemaRows(zoneRowID: Int64, recordType: String) throws -> [(field: String, valueType: String, encrypted: Bool)] {
        // A cached statement: every write transaction reads the schema of the types it saves.
        try Row.fetchAll(db.cachedStatement(sql: "SELECT field, value_type, encrypted FROM field_schema WHERE zone_id = ? AND record_type = ?"),
                         arguments: [zoneRowID, recordType]).map { row in
            (try row.required("field"), try row.required("value_type"), try row.required("encrypted"))
        }
    }

    func insertFieldSchema(zoneRowID: Int64, recordType: String, field: String, schema: FieldSchema) throws {
        // Indexes are made when a field is first queried or sorted on (see `ensureIndexes`), so
        // saves pay only for the indexes that queries use.
        try db.execute(sql: "INSERT INTO field_schema (zone_id, record_type, field, value_type, encrypted) VALUES (?, ?, ?, ?, ?)",
                    arguments: [zoneRowID, recordType, field, schema.type.description, schema.encrypted])
    }

    /// Every wrapped key of the zone, by epoch and member (what a server's driver reads of a zone at once).
    func allWrappedKeys(zoneRowID: Int64) throws -> [Int64: [String: [UInt8]]] {
        var keys = [Int64: [String: [UInt8]]]()
        for row in try Row.fetchAll(db, sql: "SELECT epoch, member_id, wrapped_key FROM zone_key WHERE zone_id = ?", arguments: [zoneRowID]) {
            let epoch: Int64 = try row.required(0), member: String = try row.required(1), wrapped: Data = try row.required(2)
            keys[epoch, default: [:]][member] = Array(wrapped)
        }
        return keys
    }

    /// Every chained key of the zone, by epoch.
    func allChainedKeys(zoneRowID: Int64) throws -> [Int64: [UInt8]] {
        var chain = [Int64: [UInt8]]()
        for row in try Row.fetchAll(db, sql: "SELECT epoch, sealed_key FROM zone_key_chain WHERE zone_id = ?", arguments: [zoneRowID]) {
            let epoch: Int64 = try row.required(0), sealed: Data = try row.required(1)
            chain[epoch] = Array(sealed)
        }
        return chain
    }

    func allFieldSchemaRows(zoneRowID: Int64) throws -> [String: [(field: String, valueType: String, encrypted: Bool)]] {
        var rows = [String: [(field: String, valueType: String, encrypted: Bool)]]()
        for row in try Row.fetchAll(db, sql: "SELECT record_type, field, value_type, encrypted FROM field_schema WHERE zone_id = ?",
                                    arguments: [zoneRowID]) {
            rows[try row.required("record_type"), default: []].append((try row.required("field"), try row.required("value_type"), try row.required("encrypted")))
        }
        return rows
    }

    func deleteFieldSchema(zoneRowID: Int64, recordType: String, field: String) throws {
        try db.execute(sql: "DELETE FROM field_schema WHERE zone_id = ? AND record_type = ? AND field = ?", arguments: [zoneRowID, recordType, field])
    }

    // MARK: Contacts

    func contactCard(userID: String) throws -> (card: [UInt8], added: Double)? {
        guard let row = try Row.fetchOne(db.cachedStatement(sql: "SELECT card, added_at FROM contact WHERE user_id = ?"), arguments: [userID]) else {
            return nil
        }
        return (Array(try row.required(0) as Data), try row.required(1))
    }

    func prefetchContacts(userIDs: [String]) throws {}

    func prefetchAncestors(zoneRowID: Int64, of name: String) throws {}

    func contactUserIDs(email: String?, name: String?) throws -> [String] {
        if let email { return try String.fetchAll(db, sql: "SELECT user_id FROM contact WHERE email = ? COLLATE NOCASE", arguments: [email]) }
        if let name { return try String.fetchAll(db, sql: "SELECT user_id FROM contact WHERE name = ? COLLATE NOCASE", arguments: [name]) }
        return try String.fetchAll(db, sql: "SELECT user_id FROM contact")
    }

    func storeContact(userID: String, name: String, email: String?, signingKey: [UInt8], boxKey: [UInt8], card: [UInt8],
                      cardCreated: String, added: Double) throws {
        try db.execute(sql: """
            INSERT OR REPLACE INTO contact (user_id, name, email, signing_key, box_key, card, card_created, added_at)
            VALUES (?, ?, ?, ?, ?, ?, ?, ?)
            """, arguments: [userID, name, email, Data(signingKey), Data(boxKey), Data(card), cardCreated, added])
    }

    // MARK: Records

    func recordRow(zoneRowID: Int64, name: String) throws -> StoredRow? {
        let statement = try RawStatement(db.cachedStatement(sql: "SELECT \(Self.recordColumns) FROM record WHERE zone_id = ? AND name = ?"))
        statement.bind(1, zoneRowID)
        statement.bind(2, name)
        var found: StoredRow?
        try RecordRows.read(statement, limit: 1) { found = $0 }
        return found
    }

    func readRecordRows(zoneRowID: Int64, names: [String], into add: (StoredRow) -> Void) throws {
        let statement = try RawStatement(db.cachedStatement(sql: "SELECT \(Self.recordColumns) FROM record WHERE zone_id = ? AND name = ?"))
        var creators: RecordRows.CreatorCache?
        defer { statement.reset() }
        for name in names {
            statement.bind(1, zoneRowID)
            statement.bind(2, name)
            try RecordRows.read(statement, limit: 1, keepingBindings: true, creators: &creators, into: add)
        }
    }

    func readRecordRows(zoneRowID: Int64, after: String, limit: Int, into add: (StoredRow) -> Void) throws {
        let statement = try RawStatement(db.cachedStatement(sql: "SELECT \(Self.recordColumns) FROM record WHERE zone_id = ? AND name > ? ORDER BY name LIMIT ?"),
                                         arguments: [zoneRowID, after, limit])
        try RecordRows.read(statement, into: add)
    }

    func readRecordRows(zoneRowID: Int64, sealedBefore epoch: Int64, after: String, limit: Int, into add: (StoredRow) -> Void) throws {
        let statement = try RawStatement(db.cachedStatement(sql: """
            SELECT \(Self.recordColumns) FROM record WHERE zone_id = ? AND sealed IS NOT NULL AND epoch < ? AND name > ? ORDER BY name LIMIT ?
            """), arguments: [zoneRowID, epoch, after, limit])
        try RecordRows.read(statement, into: add)
    }

    func recordTypes(zoneRowID: Int64, names: [String]) throws -> [String: String] {
        let marks = Array(repeating: "?", count: names.count).joined(separator: ", ")
        var types = [String: String]()
        for found in try Row.fetchAll(db, sql: "SELECT name, type FROM record WHERE zone_id = ? AND name IN (\(marks))",
                                      arguments: StatementArguments([zoneRowID] + names.map { $0 as any DatabaseValueConvertible })) {
            types[try found.required(0)] = try found.required(1) as String
        }
        return types
    }

    func recordParent(zoneRowID: Int64, name: String) throws -> String?? {
        let lookup = try db.cachedStatement(sql: "SELECT parent FROM record WHERE zone_id = ? AND name = ?")
        guard let row = try Row.fetchOne(lookup, arguments: [zoneRowID, name]) else { return nil }
        return .some(try row.optional(0))
    }

    func hasChildren(zoneRowID: Int64, parent: String) throws -> Bool {
        try Bool.fetchOne(db.cachedStatement(sql: "SELECT EXISTS (SELECT 1 FROM record WHERE zone_id = ? AND parent = ?)"),
                          arguments: [zoneRowID, parent]) == true
    }

    func children(zoneRowID: Int64, of parent: String) throws -> [String] {
        try String.fetchAll(db.cachedStatement(sql: "SELECT name FROM record WHERE zone_id = ? AND parent = ?"), arguments: [zoneRowID, parent])
    }

    func recordExists(zoneRowID: Int64, name: String) throws -> Bool {
        try Bool.fetchOne(db.cachedStatement(sql: "SELECT EXISTS (SELECT 1 FROM record WHERE zone_id = ? AND name = ?)"),
                          arguments: [zoneRowID, name]) ?? false
    }

    func insertRecord(_ version: SealedVersion, zoneRowID: Int64) throws {
        let inserted = try insertRecordIfAbsent(version, zoneRowID: zoneRowID)
        guard inserted else { throw StoreError(.internalError, "record '\(version.stamp.name)' could not be written: the zone has a record of that name") }
    }

    func replaceRecord(_ version: SealedVersion, zoneRowID: Int64) throws {
        let replaced = try rowWriter(zoneRowID: zoneRowID, authorID: version.stamp.modifierID)
            .update(version, expectedSeq: nil, keepingCreator: false)
        guard replaced != nil else { throw StoreError(.internalError, "record '\(version.stamp.name)' could not be rewritten") }
    }

    func deleteRecord(zoneRowID: Int64, name: String, expectedSeq: Int64?) throws -> Bool {
        // Asked for only when there is a deletion: a write's commit hook (a transaction
        // observer) drops deleting statements from GRDB's cache, so asking for it on every save
        // would compile it again on every save.
        try db.cachedStatement(sql: "DELETE FROM record WHERE zone_id = ? AND name = ? AND (? IS NULL OR seq = ?)")
            .execute(arguments: [zoneRowID, name, expectedSeq, expectedSeq])
        guard db.changesCount == 1 else { return false }
        WriteAheadLogScrub.note(db)
        return true
    }

    func prefetchRecords(zoneRowID: Int64, saving records: [Record], deleting deletions: [RecordDeletion]) throws {}

    func prefetchParentChecks(zoneRowID: Int64, children: [String], parents: [String]) throws {}

    /// Inserts the version's row through this transaction's writer of the zone; false (nothing
    /// written) when the zone has a row of its name.
    func insertRecordIfAbsent(_ version: SealedVersion, zoneRowID: Int64) throws -> Bool {
        let writer = try rowWriter(zoneRowID: zoneRowID, authorID: version.stamp.modifierID)
        defer { writer.finish() } // no binding outlives the version's bytes
        return try writer.insertIfAbsent(version)
    }

    /// This transaction's writer of `zoneRowID`'s rows (see ``rowWriters``); `authorID` is bound
    /// from its buffer when the first row is the author's, and any id is bound as it is.
    func rowWriter(zoneRowID: Int64, authorID: String) throws -> SQLiteRecordWriter {
        if let writer = rowWriters[zoneRowID] { return writer }
        let writer = try SQLiteRecordWriter(db, zoneRowID: zoneRowID, authorID: authorID)
        rowWriters[zoneRowID] = writer
        return writer
    }

    func recordWriter(zoneRowID: Int64, authorID: String) throws -> any RecordRowWriter {
        try SQLiteRecordWriter(db, zoneRowID: zoneRowID, authorID: authorID)
    }

    // MARK: Tombstones

    func addTombstone(zoneRowID: Int64, name: String, seq: Int64, authorID: String, label: String?, time: Double) throws {
        try db.cachedStatement(sql: """
            INSERT OR REPLACE INTO record_tombstone (zone_id, name, seq, author_id, author_label, deleted_at) VALUES (?, ?, ?, ?, ?, ?)
            """).execute(arguments: [zoneRowID, name, seq, authorID, label, time])
    }

    func removeTombstone(zoneRowID: Int64, name: String) throws {
        try db.cachedStatement(sql: "DELETE FROM record_tombstone WHERE zone_id = ? AND name = ?").execute(arguments: [zoneRowID, name])
    }

    func hasTombstones(zoneRowID: Int64) throws -> Bool {
        try Bool.fetchOne(db.cachedStatement(sql: "SELECT EXISTS (SELECT 1 FROM record_tombstone WHERE zone_id = ?)"),
                          arguments: [zoneRowID]) ?? false
    }

    // MARK: Change feeds

    func compactedSeq(zoneRowID: Int64) throws -> Int64 {
        try Int64.fetchOne(db, sql: "SELECT compacted_seq FROM zone WHERE id = ?", arguments: [zoneRowID]) ?? 0
    }

    func zoneExists(uid: [UInt8]) throws -> Bool {
        try Bool.fetchOne(db, sql: "SELECT 1 FROM zone WHERE uid = ?", arguments: [Data(uid)]) == true
    }

    /// Through GRDB rows, which check each value's type (not the hot path's raw reads).
    func changedRecordRows(zoneRowID: Int64, afterSeq: Int64, afterName: String?, limit: Int) throws
        -> [(seq: Int64, name: String, row: Result<StoredRow, StoreError>)] {
        try Row.fetchAll(db.cachedStatement(sql: """
            SELECT \(Self.recordColumns) FROM record WHERE zone_id = ? AND (seq > ? OR (seq = ? AND name > ? AND ?)) ORDER BY seq, name LIMIT ?
            """), arguments: [zoneRowID, afterSeq, afterSeq, afterName ?? "", afterName != nil, limit]).map { row in
            let stored = Result { try StoredRow.make(row: row) }.mapError { $0 as? StoreError ?? StoreError(.integrityFailure, "\($0)") }
            return (try row.required(6), try row.required(0), stored)
        }
    }

    func tombstones(zoneRowID: Int64, afterSeq: Int64, afterName: String?, limit: Int) throws -> [(seq: Int64, name: String)] {
        try Row.fetchAll(db, sql: """
            SELECT name, seq FROM record_tombstone WHERE zone_id = ? AND (seq > ? OR (seq = ? AND name > ? AND ?)) ORDER BY seq, name LIMIT ?
            """, arguments: [zoneRowID, afterSeq, afterSeq, afterName ?? "", afterName != nil, limit]).map { (try $0.required(1), try $0.required(0)) }
    }

    /// How many tombstones of the zone a compaction through `horizon` would remove.
    func tombstoneCount(zoneRowID: Int64, through horizon: Int64) throws -> Int {
        try Int.fetchOne(db, sql: "SELECT count(*) FROM record_tombstone WHERE zone_id = ? AND seq <= ?", arguments: [zoneRowID, horizon]) ?? 0
    }

    func compactTombstones(zoneRowID: Int64, through horizon: Int64) throws -> Int {
        try db.execute(sql: "DELETE FROM record_tombstone WHERE zone_id = ? AND seq <= ?", arguments: [zoneRowID, horizon])
        let removed = db.changesCount
        if removed > 0 { WriteAheadLogScrub.note(db) }
        try db.execute(sql: "UPDATE zone SET compacted_seq = max(compacted_seq, ?) WHERE id = ?", arguments: [horizon, zoneRowID])
        return removed
    }

    func databaseCounter() throws -> (current: Int64, compacted: Int64) {
        guard let counter = try Row.fetchOne(db, sql: "SELECT db_seq, compacted_db_seq FROM store_counter WHERE id = 1") else {
            throw StoreError(.integrityFailure, "the store has no change counter (its row was deleted): the store was changed")
        }
        return (try counter.required(0), try counter.required(1))
    }

    func zoneRowsChanged(ownedBy ownerID: String, since: Int64) throws -> [ZoneRow] {
        try Row.fetchAll(db, sql: "SELECT * FROM zone WHERE owner_id = ? AND db_seq > ? ORDER BY db_seq", arguments: [ownerID, since]).map(ZoneRow.init)
    }

    func zoneRowsChanged(sharedWith memberID: String, since: Int64) throws -> [ZoneRow] {
        try Row.fetchAll(db, sql: """
            SELECT z.* FROM zone z WHERE z.owner_id != ? AND z.db_seq > ?
              AND EXISTS (SELECT 1 FROM zone_member m WHERE m.zone_id = z.id AND m.user_id = ?)
            ORDER BY z.db_seq
            """, arguments: [memberID, since, memberID]).map(ZoneRow.init)
    }

    func zoneTombstones(userID: String, since: Int64, owned: Bool) throws -> [DeletedZone] {
        try Row.fetchAll(db, sql: """
            SELECT owner_id, name, reason FROM zone_tombstone
            WHERE user_id = ? AND db_seq > ? AND (owner_id = ?) = ? ORDER BY db_seq
            """, arguments: [userID, since, userID, owned]).map {
            DeletedZone(zoneID: ZoneID(name: try $0.required(1), ownerID: try $0.required(0)), reason: try $0.required(2))
        }
    }

    // MARK: Audit

    func contactColumns() throws -> [(userID: String, name: String, email: String?, signingKey: [UInt8], boxKey: [UInt8], cardCreated: String)] {
        try Row.fetchAll(db, sql: "SELECT user_id, name, email, signing_key, box_key, card_created FROM contact ORDER BY user_id").map { row in
            (try row.required(0), try row.required(1), try row.optional(2), Array(try row.required(3) as Data), Array(try row.required(4) as Data),
             try row.required(5))
        }
    }

    func zoneCaches(zoneRowID: Int64) throws -> (sequence: Int64, epoch: Int64?, shareUID: [UInt8]?) {
        guard let row = try Row.fetchOne(db, sql: "SELECT sequence, current_epoch, share_uid FROM zone WHERE id = ?", arguments: [zoneRowID]) else {
            throw StoreError(.zoneNotFound, "the zone was deleted")
        }
        return (try row.required(0), try row.required(1) as Int64, (try row.optional(2) as Data?).map(Array.init))
    }

    func zoneMemberIDs(zoneRowID: Int64) throws -> Set<String> {
        Set(try String.fetchAll(db, sql: "SELECT user_id FROM zone_member WHERE zone_id = ?", arguments: [zoneRowID]))
    }

    func storedLogHashes(zoneRowID: Int64) throws -> [Int64: [UInt8]] {
        // `kind IS NOT NULL`: answered from the head index.
        try Row.fetchAll(db, sql: "SELECT seq, hash FROM zone_log WHERE zone_id = ? AND kind IS NOT NULL", arguments: [zoneRowID])
            .reduce(into: [Int64: [UInt8]]()) { $0[try $1.required(0)] = Array(try $1.required(1) as Data) }
    }

    func readAllRecordRows(zoneRowID: Int64, into add: (_ name: String, _ seq: Int64?, Result<StoredRow, StoreError>) throws -> Void) throws {
        let rows = try Row.fetchCursor(db, sql: "SELECT \(Self.recordColumns) FROM record WHERE zone_id = ? ORDER BY name", arguments: [zoneRowID])
        while let row = try rows.next() { // one row in memory at a time
            let result: Result<StoredRow, StoreError>
            do { result = .success(try StoredRow.make(row: row)) } catch let error as StoreError { result = .failure(error) }
            try add(try row.required(0), try? row.required(6) as Int64, result)
        }
    }

    func tombstoneSeqs(zoneRowID: Int64) throws -> [String: Int64] {
        try Row.fetchAll(db, sql: "SELECT name, seq FROM record_tombstone WHERE zone_id = ?", arguments: [zoneRowID])
            .reduce(into: [String: Int64]()) { $0[try $1.required(0)] = try $1.required(1) as Int64 }
    }

    // MARK: Transactions

    func afterCommit(using hooks: CommitHooks, _ work: @escaping @Sendable () -> Void) {
        hooks.afterCommit(db, work)
    }

    func afterTransaction(onCommit: @escaping @Sendable () -> Void, onRollback: @escaping @Sendable () -> Void) {
        db.afterNextTransaction(onCommit: { _ in onCommit() }, onRollback: { _ in onRollback() })
    }
}

extension SQLiteTransaction {
    /// The row id, uid, name and owner of each zone of these row ids, names and uids that the
    /// store has (what a server needs to look up the zones a request names).
    func zoneIdentities(rowIDs: Set<Int64>, named: Set<ZoneID>, uids: Set<[UInt8]>) throws -> [(rowID: Int64, uid: [UInt8], id: ZoneID)] {
        var ids = rowIDs
        for id in named {
            if let row = try Int64.fetchOne(db, sql: "SELECT id FROM zone WHERE owner_id = ? AND name = ?", arguments: [id.ownerID, id.name]) { ids.insert(row) }
        }
        for uid in uids {
            if let row = try Int64.fetchOne(db, sql: "SELECT id FROM zone WHERE uid = ?", arguments: [Data(uid)]) { ids.insert(row) }
        }
        guard !ids.isEmpty else { return [] }
        let list = ids.sorted()
        let marks = Array(repeating: "?", count: list.count).joined(separator: ",")
        return try Row.fetchAll(db, sql: "SELECT id, uid, owner_id, name FROM zone WHERE id IN (\(marks))", arguments: StatementArguments(list)).map { row in
            let uid: Data = try row.required(1)
            return (try row.required(0), Array(uid), ZoneID(name: try row.required(3), ownerID: try row.required(2)))
        }
    }
}

extension ZoneRow {
    /// A zone's row as SQLite's `zone` table holds it.
    init(row: Row) throws {
        let uid: Data = try row.required("uid")
        rowID = try row.required("id")
        self.uid = Array(uid)
        id = ZoneID(name: try row.required("name"), ownerID: try row.required("owner_id"))
        sequence = try row.required("sequence")
        created = Date(timeIntervalSince1970: try row.required("created_at"))
        logFormat = try row.required("log_format")
    }
}

import CofferCrypto
import Foundation
import GRDB
import Logging

/// A replica file: an SQLite store that holds one user's copy of the zones they sync with one
/// server (see ``Replica``). It has the server's store id, so the user's marks and change tokens
/// name the same store, and says in `store_meta` whose replica it is and of which server.
extension Store {
    /// Opens the replica at `url` of the server at `origin`, whose store id is `storeID`, for
    /// `userID`, creating it when `create` is true and no file is there.
    /// - Throws: `.integrityFailure` for a file that is a store of its own, or the replica of
    ///   another server or another user; `.unknownItem` when there is no replica and `create` is
    ///   false; as ``init(path:create:logger:)``.
    static func replica(at url: URL, storeID: [UInt8], origin: String, userID: String, create: Bool, logger: Logger) throws -> Store {
        let folder = url.deletingLastPathComponent()
        if create, !FileManager.default.fileExists(atPath: folder.path) {
            try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
        }
        guard FileManager.default.fileExists(atPath: folder.path) else { throw StoreError(.unknownItem, "the folder \(folder.path) does not exist") }
        if !create, !FileManager.default.fileExists(atPath: url.path) {
            throw StoreError(.unknownItem, "there is no replica at \(url.path)")
        }
        let (backend, id) = try SQLiteStorage.open(url: url, create: create, newStoreID: storeID)
        guard case .sqlite(let storage) = backend else { throw StoreError(.internalError, "a replica is an SQLite file") }
        let owner: (user: String?, origin: String?)
        do {
            owner = try storage.pool.write { db in
                let user = try Data.fetchOne(db, sql: "SELECT value FROM store_meta WHERE key = 'replica_user'").flatMap { String(data: $0, encoding: .utf8) }
                let of = try Data.fetchOne(db, sql: "SELECT value FROM store_meta WHERE key = 'replica_of'").flatMap { String(data: $0, encoding: .utf8) }
                if user == nil, of == nil, id == storeID, try Self.isEmptyStore(db) {
                    // Made just now (or left empty by an earlier first run): it becomes this user's replica.
                    try db.execute(sql: "INSERT INTO store_meta (key, value) VALUES ('replica_user', ?), ('replica_of', ?)",
                                   arguments: [Data(userID.utf8), Data(origin.utf8)])
                    return (userID, origin)
                }
                return (user, of)
            }
        } catch {
            throw Store.map(error)
        }
        guard let user = owner.user, let of = owner.origin else {
            throw StoreError(.integrityFailure, "\(url.path) is a store of its own, not a replica of a server: give another --replica file")
        }
        guard id == storeID else {
            throw StoreError(.integrityFailure, "\(url.path) is the replica of another server (\(of), store \(Hex.encode(id))), not of \(origin): give another --replica file")
        }
        guard user == userID else {
            throw StoreError(.integrityFailure, "\(url.path) is another user's replica (\(Names.printable(user))), not yours: give another --replica file")
        }
        let store = Store(url: url, storeID: id, backend: backend, logger: logger)
        logger.debug("replica opened", metadata: ["path": "\(url.path)"])
        return store
    }

    /// Whether the store holds no zone and no card: a file made for a replica and not used yet.
    private static func isEmptyStore(_ db: Database) throws -> Bool {
        try Int.fetchOne(db, sql: "SELECT (SELECT count(*) FROM zone) + (SELECT count(*) FROM contact)") == 0
    }

    /// Notes that a pull brought the zone `zone` up to its server's state at `date`.
    func noteSync(of zone: ZoneID, at date: Date) async throws {
        let storage = try sqliteStorage(for: "a replica's sync record")
        let when = date.timeIntervalSince1970
        do {
            try await storage.write(logger: logger) { db in
                guard let uid = try Data.fetchOne(db, sql: "SELECT uid FROM zone WHERE owner_id = ? AND name = ?", arguments: [zone.ownerID, zone.name]) else { return }
                try db.execute(sql: "INSERT OR REPLACE INTO store_meta (key, value) VALUES (?, ?)",
                               arguments: ["synced:" + Hex.encode(Array(uid)), Data(String(when).utf8)])
            }
        } catch {
            throw Store.map(error)
        }
    }

    /// Zone uid to when a pull last brought the zone up to its server's state.
    func lastSyncs() async throws -> [[UInt8]: Date] {
        let storage = try sqliteStorage(for: "a replica's sync record")
        do {
            return try await storage.read { db in
                var found = [[UInt8]: Date]()
                for row in try Row.fetchAll(db, sql: "SELECT key, value FROM store_meta WHERE key LIKE 'synced:%'") {
                    let key: String = row[0], value: Data = row[1]
                    guard let uid = Hex.decode(String(key.dropFirst(7))), let seconds = Double(String(decoding: value, as: UTF8.self)) else { continue }
                    found[uid] = Date(timeIntervalSince1970: seconds)
                }
                return found
            }
        } catch {
            throw Store.map(error)
        }
    }

    // MARK: - Zones moved to a server

    /// The server (its origin) the zone `zone` was moved to from this local store
    /// (``Session/moveZone(_:to:origin:progress:)``), or nil. A store that is not an SQLite file
    /// has none.
    public func movedZoneOrigin(_ zone: ZoneID) async throws -> String? {
        guard case .sqlite(let storage) = backend else { return nil }
        do {
            return try await storage.read { db in
                try Data.fetchOne(db, sql: "SELECT value FROM store_meta WHERE key = ?", arguments: [Self.movedKey(zone)])
                    .map { String(decoding: $0, as: UTF8.self) }
            }
        } catch {
            throw Store.map(error)
        }
    }

    /// Notes that `zone` moved to the server at `origin`.
    func noteMoved(_ zone: ZoneID, to origin: String) async throws {
        let storage = try sqliteStorage(for: "moving a zone")
        do {
            try await storage.write(logger: logger) { db in
                try db.execute(sql: "INSERT OR REPLACE INTO store_meta (key, value) VALUES (?, ?)", arguments: [Self.movedKey(zone), Data(origin.utf8)])
            }
        } catch {
            throw Store.map(error)
        }
    }

    private static func movedKey(_ zone: ZoneID) -> String { "moved:\(zone.ownerID):\(zone.name)" }

    // MARK: - Zones made offline

    /// The uids of the zones made in the replica while offline, not on the server yet.
    func unpushedZones() async throws -> Set<[UInt8]> {
        let storage = try sqliteStorage(for: "a replica's zones")
        do {
            return try await storage.read { db in
                Set(try String.fetchAll(db, sql: "SELECT key FROM store_meta WHERE key LIKE 'unpushed:%'").compactMap { Hex.decode(String($0.dropFirst(9))) })
            }
        } catch {
            throw Store.map(error)
        }
    }

    /// Notes that the zone `uid` was made in the replica offline (`made`), or is on the server now.
    func noteUnpushed(_ uid: [UInt8], _ made: Bool) async throws {
        let storage = try sqliteStorage(for: "a replica's zones")
        do {
            try await storage.write(logger: logger) { db in
                if made {
                    try db.execute(sql: "INSERT OR REPLACE INTO store_meta (key, value) VALUES (?, ?)", arguments: ["unpushed:" + Hex.encode(uid), Data()])
                } else {
                    try db.execute(sql: "DELETE FROM store_meta WHERE key = ?", arguments: ["unpushed:" + Hex.encode(uid)])
                }
            }
        } catch {
            throw Store.map(error)
        }
    }

    // MARK: - A pull's stage

    /// Where a pull of the zone `uid` stands that stored pages and did not finish: the replica's
    /// head it started from, the last row it stored (its sequence and name), and, for a zone new
    /// to the replica, the zone row id its rows are stored under (not a zone's yet); nil when none.
    func stageProgress(of uid: [UInt8]) async throws -> (after: Int64, seq: Int64, name: String, zoneRowID: Int64?)? {
        let storage = try sqliteStorage(for: "a replica's pull")
        do {
            return try await storage.read { db in try Self.stageProgress(db, uid: uid) }
        } catch {
            throw Store.map(error)
        }
    }

    private static func stageProgress(_ db: Database, uid: [UInt8]) throws -> (after: Int64, seq: Int64, name: String, zoneRowID: Int64?)? {
        let hex = Hex.encode(uid)
        func value(_ key: String) throws -> Data? { try Data.fetchOne(db, sql: "SELECT value FROM store_meta WHERE key = ?", arguments: [key + hex]) }
        func number(_ key: String) throws -> Int64? { try value(key).flatMap { Int64(String(decoding: $0, as: UTF8.self)) } }
        guard let after = try number("stage-after:"), let seq = try number("stage-seq:"),
              let name = try value("stage-name:").map({ String(decoding: $0, as: UTF8.self) }) else { return nil }
        // A row id some zone has is never a stage's (the stage was stored, or the key changed).
        var zoneRowID = try number("stage-zone:")
        if let id = zoneRowID, try Bool.fetchOne(db, sql: "SELECT EXISTS (SELECT 1 FROM zone WHERE id = ?)", arguments: [id]) == true { zoneRowID = nil }
        return (after, seq, name, zoneRowID)
    }

    /// The zone row id under which the stage of the zone `uid` (a zone new to the replica) keeps
    /// its rows, in the file: a zone's row may take it only when it is that zone's.
    static func stagedZoneRowID(_ db: Database, uid: [UInt8]) throws -> Int64? {
        try stageProgress(db, uid: uid)?.zoneRowID
    }

    /// The uids of the zones some pull staged rows of, and did not finish, that the replica
    /// holds no zone of.
    func stagesOfNoZone() async throws -> [[UInt8]] {
        let storage = try sqliteStorage(for: "a replica's pull")
        do {
            return try await storage.read { db in
                try String.fetchAll(db, sql: "SELECT key FROM store_meta WHERE key LIKE 'stage-after:%'")
                    .compactMap { Hex.decode(String($0.dropFirst("stage-after:".count))) }
                    .filter { try Bool.fetchOne(db, sql: "SELECT EXISTS (SELECT 1 FROM zone WHERE uid = ?)", arguments: [Data($0)]) != true }
            }
        } catch {
            throw Store.map(error)
        }
    }

    /// Drops what a pull of the zone `uid` staged.
    func clearStage(of uid: [UInt8]) async throws {
        let storage = try sqliteStorage(for: "a replica's pull")
        do {
            try await storage.write(logger: logger) { db in try Self.clearStage(db, uid: uid) }
        } catch {
            throw Store.map(error)
        }
    }

    static func clearStage(_ db: Database, uid: [UInt8]) throws {
        let hex = Hex.encode(uid)
        if let rowID = try stagedZoneRowID(db, uid: uid) {
            try db.execute(sql: "DELETE FROM record WHERE zone_id = ?", arguments: [rowID])
            if db.changesCount > 0 { WriteAheadLogScrub.note(db) }
        }
        // Without a WHERE clause SQLite drops the table's pages whole rather than a row at a
        // time: when no other zone has rows staged, that is the same and far cheaper.
        if try Bool.fetchOne(db, sql: "SELECT EXISTS (SELECT 1 FROM replica_stage WHERE zone_uid != ?)", arguments: [Data(uid)]) == true {
            try db.execute(sql: "DELETE FROM replica_stage WHERE zone_uid = ?", arguments: [Data(uid)])
        } else {
            try db.execute(sql: "DELETE FROM replica_stage")
        }
        try db.execute(sql: "DELETE FROM store_meta WHERE key IN (?, ?, ?, ?)",
                       arguments: ["stage-after:" + hex, "stage-seq:" + hex, "stage-name:" + hex, "stage-zone:" + hex])
    }

    /// Stores a page of the zone `uid`'s rows fetched by a pull that started at the replica's
    /// head `after`, with where the pull stands, in one transaction: a pull cut short goes on
    /// from there. A row replaces a staged row of its name (a newer version).
    ///
    /// A zone new to the replica (`fresh`: the zone row id reserved for it, and its name) has its
    /// rows stored where they stay, in `record` under that row id, which no zone has until the
    /// pull's last transaction inserts the zone's row: nothing reads them before, and they are
    /// written once rather than staged and then copied. The id stays reserved (SQLite's sequence
    /// of zone ids passes it) so that no zone made meanwhile takes it. Any other zone's rows go
    /// to `replica_stage`, copied into `record` by the pull's last transaction.
    func stage(_ rows: [StoredRow], of uid: [UInt8], after: Int64, fresh: (zoneRowID: Int64, zoneName: String)? = nil) async throws {
        guard let last = rows.last else { return }
        try await stage(rows, last: (last.seq, last.name), of: uid, after: after, fresh: fresh) { insert, row, text in
            try row.withBytes { all in
                let plain = UnsafeRawBufferPointer(rebasing: all[0..<row.plainCount])
                let sealed = row.hasSealed ? UnsafeRawBufferPointer(rebasing: all[row.plainCount...]) : nil
                try Self.stageRow(insert, (row.name, row.type, row.parent, row.seq, row.epoch, row.membershipSeq, row.creatorID, row.modifierID,
                                           row.created, row.modified), plain: plain, sealed: sealed, plainAsText: text)
            }
        }
    }

    /// Stages rows as ``stage(_:of:after:fresh:)`` does (in `replica_stage`: the rows of a zone
    /// the replica holds); the last row is where the pull stands.
    func stage(copies: [ZoneCopy.Row], of uid: [UInt8], after: Int64) async throws {
        guard let last = copies.last?.stamp else { return }
        try await stage(copies, last: (last.seq, last.name), of: uid, after: after, fresh: nil) { insert, row, text in
            let s = row.stamp
            try row.plain.withUnsafeBytes { plain in
                try RecordReader.withOptionalBytes(row.sealed) { sealed in
                    try Self.stageRow(insert, (s.name, s.type, s.parent, s.seq, s.epoch, s.membershipSeq, s.creatorID, s.modifierID, s.created, s.modified),
                                      plain: plain, sealed: sealed, plainAsText: text)
                }
            }
        }
    }

    /// Writes `rows` to the stage of zone `uid` in one transaction, each through `write` on one
    /// prepared statement (whose first parameter is the zone's uid, or for a `fresh` zone its
    /// reserved row id, then ``stageRow(_:_:plain:sealed:plainAsText:)``'s; `write` is told
    /// whether the plain values go in as text), with where the pull stands (`last`: the seq and
    /// name of the last row).
    private func stage<Row>(_ rows: [Row], last: (seq: Int64, name: String), of uid: [UInt8], after: Int64, fresh: (zoneRowID: Int64, zoneName: String)?,
                            write: @escaping (RawStatement, Row, Bool) throws -> Void) async throws {
        let progress = [("stage-after:", String(after)), ("stage-seq:", String(last.seq)), ("stage-name:", last.name)]
            + (fresh.map { [("stage-zone:", String($0.zoneRowID))] } ?? [])
        let storage = try sqliteStorage(for: "a replica's pull")
        let hex = Hex.encode(uid)
        let handed = StageWork(rows: rows, write: write)
        let body: @Sendable (Database) throws -> Void = { db in
            let (rows, write) = (handed.rows, handed.write)
            if let fresh {
                // Another process may have made a zone under the id reserved before this stage's
                // first page: its rows are never joined by these.
                if try Bool.fetchOne(db, sql: "SELECT EXISTS (SELECT 1 FROM zone WHERE id = ?)", arguments: [fresh.zoneRowID]) == true {
                    throw StoreError(.busy, "another process made a zone in the replica while zone '\(fresh.zoneName)' was pulled; pull again")
                }
                // The reserved id stays out of SQLite's hands for the zones it numbers.
                try db.execute(sql: "INSERT INTO sqlite_sequence (name, seq) SELECT 'zone', ?1 WHERE NOT EXISTS (SELECT 1 FROM sqlite_sequence WHERE name = 'zone')",
                               arguments: [fresh.zoneRowID])
                try db.execute(sql: "UPDATE sqlite_sequence SET seq = ?1 WHERE name = 'zone' AND seq < ?1", arguments: [fresh.zoneRowID])
            }
            let insert = try RawStatement(db.cachedStatement(sql: fresh == nil ? """
                INSERT OR REPLACE INTO replica_stage (zone_uid, name, type, parent, seq, epoch, membership_seq, creator_id, modifier_id,
                                                      created, modified, plain, sealed)
                VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
                """ : """
                INSERT OR REPLACE INTO record (zone_id, name, type, parent, seq, epoch, membership_seq, creator_id, modifier_id,
                                               created_at, modified_at, plain, sealed)
                VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
                """))
            defer { insert.reset() } // no binding outlives the rows' bytes
            if let fresh {
                for row in rows {
                    insert.bind(1, fresh.zoneRowID)
                    do {
                        try write(insert, row, true)
                    } catch let error as DatabaseError where error.message?.contains("JSON") == true {
                        // A field index reads the plain values as JSON (see `moveStaged`).
                        throw StoreError(.integrityFailure, "the server sent a record of zone '\(fresh.zoneName)' with plain values that are not JSON: nothing was pulled")
                    }
                }
            } else {
                try uid.withUnsafeBytes { uidBytes in
                    for row in rows {
                        insert.bindBlob(1, borrowing: uidBytes)
                        try write(insert, row, false)
                    }
                }
            }
            for (key, value) in progress {
                try db.execute(sql: "INSERT OR REPLACE INTO store_meta (key, value) VALUES (?, ?)", arguments: [key + hex, Data(value.utf8)])
            }
        }
        do {
            if fresh != nil {
                try await storage.writeUnenforced(logger: logger, body)
            } else {
                try await storage.write(logger: logger, body)
            }
        } catch {
            throw Store.map(error)
        }
    }

    /// Binds one row's columns (parameters 2 to 13 of the stage's insert, the bytes borrowed
    /// for this step only; the plain values as text for `record`, as a blob for `replica_stage`)
    /// and steps it.
    private static func stageRow(_ insert: RawStatement, _ f: (name: String, type: String, parent: String?, seq: Int64, epoch: Int64, membershipSeq: Int64,
                                                           creatorID: String, modifierID: String, created: Double, modified: Double),
                                 plain: UnsafeRawBufferPointer, sealed: UnsafeRawBufferPointer?, plainAsText: Bool) throws {
        insert.bind(2, f.name)
        insert.bind(3, f.type)
        insert.bind(4, f.parent)
        insert.bind(5, f.seq)
        insert.bind(6, f.epoch)
        insert.bind(7, f.membershipSeq)
        insert.bind(8, f.creatorID)
        insert.bind(9, f.modifierID)
        insert.bind(10, f.created)
        insert.bind(11, f.modified)
        if plainAsText { insert.bindText(12, borrowing: plain) } else { insert.bindBlob(12, borrowing: plain) }
        insert.bindBlob(13, borrowing: sealed)
        defer { insert.resetKeepingBindings() }
        _ = try insert.step()
    }

    /// Stores the rows staged for the zone `uid` in zone row `zoneRowID`, in one statement;
    /// returns how many rows the zone has after the pull's writes. With `replacing` (a zone the
    /// replica holds; one new to it has none), the rows and deleted marks of the staged names go
    /// first, in two statements. The rows of a zone new to the replica are in `record` already,
    /// under its row id (see ``stage(_:of:after:fresh:)``); any in `replica_stage` (a pull cut
    /// short by an earlier version of Coffer) join them, but for names stored since.
    /// Their plain values and hashes are checked afterwards in the same transaction, against the
    /// entries that list them. A staged row at or before the replica's head `after` is none of
    /// this pull's, and one whose plain values are not JSON would fail the field indexes: either
    /// refuses the pull (`.integrityFailure`), naming the record.
    static func moveStaged(_ db: Database, uid: [UInt8], zoneRowID: Int64, after: Int64, replacing: Bool, zoneName: String) throws -> Int {
        func refuse(_ bad: Row) throws -> Never {
            let name: String = bad[0], seq: Int64 = bad[1]
            let what = seq <= after ? "as entry \(seq) wrote it, not after entry \(after) that your replica holds" : "with plain values that are not JSON"
            throw StoreError(.integrityFailure, "the server sent record '\(name)' of zone '\(zoneName)' \(what): nothing was pulled")
        }
        if let bad = try Row.fetchOne(db, sql: """
            SELECT name, seq FROM replica_stage WHERE zone_uid = ? AND (seq <= ? OR NOT json_valid(CAST(plain AS TEXT))) ORDER BY name LIMIT 1
            """, arguments: [Data(uid), after]) {
            try refuse(bad)
        }
        if replacing {
            try db.execute(sql: "DELETE FROM record WHERE zone_id = ? AND name IN (SELECT name FROM replica_stage WHERE zone_uid = ?)",
                           arguments: [zoneRowID, Data(uid)])
            if db.changesCount > 0 { WriteAheadLogScrub.note(db) }
            try db.execute(sql: "DELETE FROM record_tombstone WHERE zone_id = ? AND name IN (SELECT name FROM replica_stage WHERE zone_uid = ?)",
                           arguments: [zoneRowID, Data(uid)])
            try db.execute(sql: """
                INSERT INTO record (zone_id, name, type, parent, plain, sealed, epoch, seq, membership_seq, creator_id, modifier_id, created_at, modified_at)
                SELECT ?, name, type, parent, CAST(plain AS TEXT), sealed, epoch, seq, membership_seq, creator_id, modifier_id, created, modified
                FROM replica_stage WHERE zone_uid = ? ORDER BY name
                """, arguments: [zoneRowID, Data(uid)])
            return db.changesCount
        }
        if let bad = try Row.fetchOne(db, sql: """
            SELECT name, seq FROM record WHERE zone_id = ? AND (seq <= ? OR NOT json_valid(plain)) ORDER BY name LIMIT 1
            """, arguments: [zoneRowID, after]) {
            try refuse(bad)
        }
        try db.execute(sql: """
            INSERT INTO record (zone_id, name, type, parent, plain, sealed, epoch, seq, membership_seq, creator_id, modifier_id, created_at, modified_at)
            SELECT ?1, name, type, parent, CAST(plain AS TEXT), sealed, epoch, seq, membership_seq, creator_id, modifier_id, created, modified
            FROM replica_stage s WHERE zone_uid = ?2 AND NOT EXISTS (SELECT 1 FROM record r WHERE r.zone_id = ?1 AND r.name = s.name) ORDER BY name
            """, arguments: [zoneRowID, Data(uid)])
        return try Int.fetchOne(db, sql: "SELECT count(*) FROM record WHERE zone_id = ?", arguments: [zoneRowID]) ?? 0
    }
}

/// The rows a stage write stores and how it binds each, handed to the database's thread.
///
/// `@unchecked Sendable`: the rows are ``StoredRow``s, which never change once made (see
/// ``StoredRow``), or ``ZoneCopy/Row`` values; the binding closure captures nothing, and the
/// caller waits for the write, so nothing is shared while it is written.
private struct StageWork<Row>: @unchecked Sendable {
    let rows: [Row]
    let write: (RawStatement, Row, Bool) throws -> Void
}

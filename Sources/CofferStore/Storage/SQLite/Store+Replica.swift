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
    /// head it started from, and the last row it stored (its sequence and name); nil when none.
    func stageProgress(of uid: [UInt8]) async throws -> (after: Int64, seq: Int64, name: String)? {
        let storage = try sqliteStorage(for: "a replica's pull")
        let hex = Hex.encode(uid)
        do {
            return try await storage.read { db in
                func value(_ key: String) throws -> Data? { try Data.fetchOne(db, sql: "SELECT value FROM store_meta WHERE key = ?", arguments: [key + hex]) }
                guard let after = try value("stage-after:").flatMap({ Int64(String(decoding: $0, as: UTF8.self)) }),
                      let seq = try value("stage-seq:").flatMap({ Int64(String(decoding: $0, as: UTF8.self)) }),
                      let name = try value("stage-name:").map({ String(decoding: $0, as: UTF8.self) }) else { return nil }
                return (after, seq, name)
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
        try db.execute(sql: "DELETE FROM replica_stage WHERE zone_uid = ?", arguments: [Data(uid)])
        try db.execute(sql: "DELETE FROM store_meta WHERE key IN (?, ?, ?)", arguments: ["stage-after:" + hex, "stage-seq:" + hex, "stage-name:" + hex])
    }

    /// Stores a page of the zone `uid`'s rows fetched by a pull that started at the replica's
    /// head `after`, with where the pull stands, in one transaction: a pull cut short goes on
    /// from there. A row replaces a staged row of its name (a newer version).
    func stage(_ rows: [StoredRow], of uid: [UInt8], after: Int64) async throws {
        try await stage(copies: rows.map(ZoneCopy.Row.init(stored:)), of: uid, after: after)
    }

    /// Stages rows as ``stage(_:of:after:)`` does; the last row is where the pull stands.
    func stage(copies: [ZoneCopy.Row], of uid: [UInt8], after: Int64) async throws {
        guard let last = copies.last?.stamp else { return }
        let progress = [("stage-after:", String(after)), ("stage-seq:", String(last.seq)), ("stage-name:", last.name)]
        let storage = try sqliteStorage(for: "a replica's pull")
        let hex = Hex.encode(uid)
        do {
            try await storage.write(logger: logger) { db in
                let insert = try db.cachedStatement(sql: """
                    INSERT OR REPLACE INTO replica_stage (zone_uid, name, type, parent, seq, epoch, membership_seq, creator_id, modifier_id,
                                                          created, modified, plain, sealed)
                    VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
                    """)
                for row in copies {
                    let stamp = row.stamp
                    try insert.execute(arguments: [Data(uid), stamp.name, stamp.type, stamp.parent, stamp.seq, stamp.epoch, stamp.membershipSeq,
                                                   stamp.creatorID, stamp.modifierID, stamp.created, stamp.modified, Data(row.plain), row.sealed.map { Data($0) }])
                }
                for (key, value) in progress {
                    try db.execute(sql: "INSERT OR REPLACE INTO store_meta (key, value) VALUES (?, ?)", arguments: [key + hex, Data(value.utf8)])
                }
            }
        } catch {
            throw Store.map(error)
        }
    }

    /// Each staged row of the zone `uid`, in name order, read off a cursor (memory holds one).
    static func eachStaged(_ db: Database, uid: [UInt8], _ body: (ZoneCopy.Row) throws -> Void) throws {
        let rows = try Row.fetchCursor(db, sql: """
            SELECT name, type, parent, seq, epoch, membership_seq, creator_id, modifier_id, created, modified, plain, sealed
            FROM replica_stage WHERE zone_uid = ? ORDER BY name
            """, arguments: [Data(uid)])
        while let row = try rows.next() {
            let stamp = VersionStamp(name: row[0], type: row[1], parent: row[2], seq: row[3], epoch: row[4], membershipSeq: row[5],
                                     creatorID: row[6], modifierID: row[7], created: row[8], modified: row[9])
            let plain: Data = row[10], sealed: Data? = row[11]
            try body(ZoneCopy.Row(stamp: stamp, plain: Array(plain), sealed: sealed.map { Array($0) }))
        }
    }
}

import Foundation
import GRDB

/// The rows of zones of the store's earlier format (migrations up to `v5-commit-names`): signed
/// commits and an owner-signed membership log in tables of their own, a signed share row and
/// its participants. Read only to upgrade such a zone (`Legacy/LegacyZone.swift` verifies them,
/// `Legacy/LegacyUpgrade.swift` upgrades), each row as its columns hold it: nothing here is
/// believed before the owner's signatures are checked.
struct LegacyTables {
    let db: GRDB.Database

    /// The tables of the earlier format in `transaction`'s store; nil for a store other than an
    /// SQLite file (only SQLite stores were ever of that format).
    static func of(_ transaction: any StorageTransaction) -> LegacyTables? {
        (transaction as? SQLiteTransaction).map { LegacyTables(db: $0.db) }
    }

    /// The zones `ownerID` owns that are still of the earlier format, in row id order.
    func zones(ownedBy ownerID: String) throws -> [ZoneRow] {
        try Row.fetchAll(db, sql: "SELECT * FROM zone WHERE owner_id = ? AND log_format = 0 ORDER BY id", arguments: [ownerID]).map(ZoneRow.init)
    }

    /// The zone's row by row id, whatever its format; nil when there is none.
    func zone(rowID: Int64) throws -> ZoneRow? {
        try Row.fetchOne(db, sql: "SELECT * FROM zone WHERE id = ?", arguments: [rowID]).map(ZoneRow.init)
    }

    /// The zone's key epoch, commit sequence and membership sequence, as its row holds them.
    func counters(zoneRowID: Int64) throws -> (epoch: Int64, sequence: Int64, membershipSeq: Int64)? {
        try Row.fetchOne(db, sql: "SELECT current_epoch, sequence, membership_seq FROM zone WHERE id = ?", arguments: [zoneRowID]).map { row in
            (try row.required(0), try row.required(1), try row.required(2))
        }
    }

    /// A record row of the earlier format.
    struct RecordRow {
        let name: String
        let type: String
        let parent: String?
        let plain: String
        let sealed: Data?
        let epoch: Int64
        let seq: Int64
        let membershipSeq: Int64
        let creatorID: String
        let created: Double
        let modified: Double
    }

    /// The zone's record rows, in name order.
    func records(zoneRowID: Int64) throws -> [RecordRow] {
        try Row.fetchAll(db, sql: """
            SELECT name, type, parent, plain, sealed, epoch, seq, membership_seq, creator_id, created_at, modified_at FROM record WHERE zone_id = ? ORDER BY name
            """, arguments: [zoneRowID]).map { r in
            RecordRow(name: try r.required(0), type: try r.required(1), parent: try r.optional(2), plain: try r.required(3), sealed: try r.optional(4),
                      epoch: try r.required(5), seq: try r.required(6), membershipSeq: try r.required(7), creatorID: try r.required(8),
                      created: try r.required(9), modified: try r.required(10))
        }
    }

    /// A signed commit of the earlier format.
    struct CommitRow {
        let authorID: String
        let authorLabel: String?
        let membershipSeq: Int64
        let epoch: Int64
        let time: Double
        let prevHash: [UInt8]
        let entries: [UInt8]
        let signature: [UInt8]
        let names: [UInt8]?
    }

    /// The zone's commit `seq`; nil when it has none.
    func commit(zoneRowID: Int64, seq: Int64) throws -> CommitRow? {
        try Row.fetchOne(db, sql: "SELECT * FROM zone_commit WHERE zone_id = ? AND seq = ?", arguments: [zoneRowID, seq]).map { row in
            CommitRow(authorID: try row.required("author_id"), authorLabel: try row.optional("author_label"),
                      membershipSeq: try row.required("membership_seq"), epoch: try row.required("epoch"), time: try row.required("committed_at"),
                      prevHash: Array(try row.required("prev_hash") as Data), entries: Array(try row.required("entries") as Data),
                      signature: Array(try row.required("signature") as Data), names: (try row.optional("names") as Data?).map(Array.init))
        }
    }

    /// The zone's membership entry `seq`, its content and the owner's signature; nil when it has none.
    func membership(zoneRowID: Int64, seq: Int64) throws -> (content: [UInt8], signature: [UInt8])? {
        try Row.fetchOne(db, sql: "SELECT content, signature FROM membership_log WHERE zone_id = ? AND seq = ?", arguments: [zoneRowID, seq]).map { row in
            (Array(try row.required(0) as Data), Array(try row.required(1) as Data))
        }
    }

    /// The zone's share row of the earlier format.
    struct ShareRow {
        let shareUID: [UInt8]
        let title: String
        let publicPermission: Int
        let version: Int64
        let epoch: Int64
        let keyCommitment: [UInt8]
        let linkSealedKey: [UInt8]?
        let linkSecretSealed: [UInt8]?
        let created: Double
        let modified: Double
        let signature: [UInt8]
    }

    /// The zone's share; nil when it has none.
    func share(zoneRowID: Int64) throws -> ShareRow? {
        try Row.fetchOne(db, sql: "SELECT * FROM share WHERE zone_id = ?", arguments: [zoneRowID]).map { row in
            ShareRow(shareUID: Array(try row.required("share_uid") as Data), title: try row.required("title"),
                     publicPermission: try row.required("public_permission"), version: try row.required("version"), epoch: try row.required("epoch"),
                     keyCommitment: Array(try row.required("key_commitment") as Data),
                     linkSealedKey: (try row.optional("link_sealed_key") as Data?).map(Array.init),
                     linkSecretSealed: (try row.optional("link_secret_sealed") as Data?).map(Array.init),
                     created: try row.required("created_at"), modified: try row.required("modified_at"),
                     signature: Array(try row.required("signature") as Data))
        }
    }

    /// The share's participants, in user id order: role, permission and status as stored.
    func participants(zoneRowID: Int64) throws -> [(userID: String, role: Int, permission: Int, status: Int)] {
        try Row.fetchAll(db, sql: "SELECT * FROM share_participant WHERE zone_id = ? ORDER BY user_id", arguments: [zoneRowID]).map { p in
            (try p.required("user_id"), try p.required("role"), try p.required("permission"), try p.required("status"))
        }
    }

    /// Deletes the zone's rows of the earlier format once its owner signed its log's genesis over
    /// them, and its deletion marks (the earlier format's deletions are not in the log: change
    /// tokens from before expire, as after a compaction through `compactedThrough`); notes the
    /// share the genesis names.
    func dropEarlierRows(zoneRowID: Int64, compactedThrough: Int64, shareUID: [UInt8]?) throws {
        WriteAheadLogScrub.note(db)
        for table in ["zone_commit", "membership_log", "share", "share_participant", "share_acceptance", "zone_key_chain", "record_tombstone"] {
            try db.execute(sql: "DELETE FROM \(table) WHERE zone_id = ?", arguments: [zoneRowID])
        }
        try db.execute(sql: "UPDATE zone SET compacted_seq = ?, share_uid = ? WHERE id = ?", arguments: [compactedThrough, shareUID.map { Data($0) }, zoneRowID])
    }
}

extension Store {
    /// A read of the rows of the earlier format, on the calling thread (an upgrade runs when a
    /// session opens, which blocks as its signature says).
    /// - Throws: `.notSupported` on a store other than an SQLite file (only SQLite stores were
    ///   ever of that format).
    func readLegacy<T: Sendable>(_ body: (LegacyTables) throws -> T) throws -> T {
        try sqliteStorage(for: "the earlier format's tables").read { db in try body(LegacyTables(db: db)) }
    }

    /// ``readLegacy(_:)`` for a write, with the transaction as the engine takes it.
    func writeLegacy<T: Sendable>(_ body: (any StorageTransaction, LegacyTables) throws -> T) throws -> T {
        try sqliteStorage(for: "the earlier format's tables").write(logger: logger) { db in try body(SQLiteTransaction(db), LegacyTables(db: db)) }
    }
}

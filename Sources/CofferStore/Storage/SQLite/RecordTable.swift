import Foundation
import GRDB

/// The SQL that writes record rows and tombstones (`record`, `record_tombstone`), for the write
/// paths of the engine: save, re-key, move and upgrade. Used inside a write transaction.
struct RecordTable {
    let db: GRDB.Database

    /// Stores a version as a new row. Throws if the zone has a row of that name.
    func insert(_ version: SealedVersion, zoneRowID: Int64) throws {
        let v = version.stamp
        try db.cachedStatement(sql: """
            INSERT INTO record (zone_id, name, type, parent, plain, sealed, epoch, seq, membership_seq, creator_id, modifier_id, created_at, modified_at)
            VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
            """).execute(arguments: [zoneRowID, v.name, v.type, v.parent, String(decoding: version.plain, as: UTF8.self),
                                     version.sealed.map { Data($0) }, v.epoch, v.seq, v.membershipSeq, v.creatorID, v.modifierID,
                                     v.created, v.modified])
    }

    /// Replaces the row of the version's name and type with the version, whole (a re-key or an
    /// upgrade writes each record again as it was, sealed anew).
    func replace(_ version: SealedVersion, zoneRowID: Int64) throws {
        let v = version.stamp
        try db.cachedStatement(sql: """
            UPDATE record SET parent = ?, plain = ?, sealed = ?, epoch = ?, seq = ?, membership_seq = ?, creator_id = ?, modifier_id = ?,
                created_at = ?, modified_at = ? WHERE zone_id = ? AND name = ? AND type = ?
            """).execute(arguments: [v.parent, String(decoding: version.plain, as: UTF8.self), version.sealed.map { Data($0) }, v.epoch,
                                     v.seq, v.membershipSeq, v.creatorID, v.modifierID, v.created, v.modified, zoneRowID, v.name, v.type])
        guard db.changesCount == 1 else { throw StoreError(.internalError, "record '\(v.name)' could not be rewritten") }
    }

    /// Deletes the named row, only if it is at `expectedSeq` when one is given. Returns whether
    /// a row went.
    func delete(name: String, zoneRowID: Int64, expectedSeq: Int64? = nil) throws -> Bool {
        // Asked for only when there is a deletion: a write's commit hook (a transaction
        // observer) drops deleting statements from GRDB's cache, so asking for it on every save
        // would compile it again on every save.
        try db.cachedStatement(sql: "DELETE FROM record WHERE zone_id = ? AND name = ? AND (? IS NULL OR seq = ?)")
            .execute(arguments: [zoneRowID, name, expectedSeq, expectedSeq])
        return db.changesCount == 1
    }

    /// Records that entry `seq` deleted the named record (for change feeds), replacing an
    /// earlier tombstone of the name.
    func addTombstone(name: String, zoneRowID: Int64, seq: Int64, authorID: String, label: String?, time: Double) throws {
        try db.cachedStatement(sql: """
            INSERT OR REPLACE INTO record_tombstone (zone_id, name, seq, author_id, author_label, deleted_at) VALUES (?, ?, ?, ?, ?, ?)
            """).execute(arguments: [zoneRowID, name, seq, authorID, label, time])
    }

    /// Drops the named record's tombstone: a saved name supersedes it, so that each name is in
    /// the change feed once.
    func removeTombstone(name: String, zoneRowID: Int64) throws {
        try db.cachedStatement(sql: "DELETE FROM record_tombstone WHERE zone_id = ? AND name = ?").execute(arguments: [zoneRowID, name])
    }

    /// Whether the zone has any tombstone (a batch without one skips ``removeTombstone(name:zoneRowID:)``).
    func hasTombstones(zoneRowID: Int64) throws -> Bool {
        try Bool.fetchOne(db.cachedStatement(sql: "SELECT EXISTS (SELECT 1 FROM record_tombstone WHERE zone_id = ?)"),
                          arguments: [zoneRowID]) ?? false
    }

    /// Whether the zone has a row of that name.
    func exists(name: String, zoneRowID: Int64) throws -> Bool {
        try Bool.fetchOne(db.cachedStatement(sql: "SELECT EXISTS (SELECT 1 FROM record WHERE zone_id = ? AND name = ?)"),
                          arguments: [zoneRowID, name]) ?? false
    }

    /// The names of the rows whose parent is `parent`.
    func children(of parent: String, zoneRowID: Int64) throws -> [String] {
        try String.fetchAll(db.cachedStatement(sql: "SELECT name FROM record WHERE zone_id = ? AND parent = ?"), arguments: [zoneRowID, parent])
    }
}

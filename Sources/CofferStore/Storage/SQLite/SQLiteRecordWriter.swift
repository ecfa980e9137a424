import Foundation
import GRDB

/// The SQLite ``RecordRowWriter``, and the only SQL that writes a record row on SQLite from
/// values: a save's hot path, a rewrite's (re-key, upgrade) and a move's rows, and the rows a
/// server applies from a client's batch all go through its two statements. (A replica's pull
/// copies its staged rows between tables in one statement, `Store.moveStaged`, and checks them
/// after.) Each version is bound in place through
/// SQLite's C API (its fields' bytes borrowed, not copied), and the author's id, the same for
/// every row of a save, is bound from one buffer the writer keeps.
final class SQLiteRecordWriter: RecordRowWriter {
    private let db: GRDB.Database
    private let zoneRowID: Int64
    private let insert: RawStatement
    private let authorID: String
    private let author: UnsafeMutableRawBufferPointer
    private let authorText: UnsafeRawBufferPointer

    /// A writer of rows of one zone; `authorID` is the user whose ids a save binds from its
    /// buffer (any other id a version names is bound as it is).
    init(_ db: GRDB.Database, zoneRowID: Int64, authorID: String) throws {
        self.db = db
        self.zoneRowID = zoneRowID
        insert = try RawStatement(db.cachedStatement(sql: """
            INSERT INTO record (zone_id, name, type, parent, plain, sealed, epoch, seq, membership_seq, creator_id, modifier_id, created_at, modified_at)
            VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT (zone_id, name) DO NOTHING
            """))
        self.authorID = authorID
        let count = authorID.utf8.count
        author = UnsafeMutableRawBufferPointer.allocate(byteCount: max(count, 1), alignment: 1)
        _ = author.initializeMemory(as: UInt8.self, from: authorID.utf8)
        authorText = UnsafeRawBufferPointer(rebasing: author[0..<count])
    }

    /// Binds a user id: from the author's buffer when it is the author's.
    private func bindUser(_ statement: RawStatement, _ index: Int32, _ id: String) {
        if id == authorID { statement.bindText(index, borrowing: authorText) } else { statement.bind(index, id) }
    }

    func insertIfAbsent(_ version: SealedVersion) throws -> Bool {
        let v = version.stamp
        return try version.plain.withUnsafeBytes { plain in
            try RecordReader.withOptionalBytes(version.sealed) { sealed in
                insert.bind(1, zoneRowID)
                insert.bind(2, v.name)
                insert.bind(3, v.type)
                insert.bind(4, v.parent)
                insert.bindText(5, borrowing: plain)
                insert.bindBlob(6, borrowing: sealed)
                insert.bind(7, v.epoch)
                insert.bind(8, v.seq)
                insert.bind(9, v.membershipSeq)
                bindUser(insert, 10, v.creatorID)
                bindUser(insert, 11, v.modifierID)
                insert.bind(12, v.created)
                insert.bind(13, v.modified)
                defer { insert.resetKeepingBindings() }
                _ = try insert.step()
                return insert.changes == 1
            }
        }
    }

    func update(_ version: SealedVersion, expectedSeq: Int64?) throws -> (creator: String, created: Double)? {
        try update(version, expectedSeq: expectedSeq, keepingCreator: true)
    }

    /// Replaces the stored row of the version's name and type (only if it is at `expectedSeq`
    /// when one is given). With `keepingCreator`, the row keeps its stored creator and creation
    /// time (a save's new version); without, it takes the version's (a rewrite, which keeps
    /// them in the version itself). Returns the creator and creation time the row has now, or
    /// nil when no row was replaced.
    func update(_ version: SealedVersion, expectedSeq: Int64?, keepingCreator: Bool) throws -> (creator: String, created: Double)? {
        let v = version.stamp
        let update = try RawStatement(db.cachedStatement(sql: """
            UPDATE record SET parent = ?1, plain = ?2, sealed = ?3, epoch = ?4, seq = ?5, membership_seq = ?6, modifier_id = ?7, modified_at = ?8,
                creator_id = coalesce(?13, creator_id), created_at = coalesce(?14, created_at)
            WHERE zone_id = ?9 AND name = ?10 AND type = ?11 AND (?12 IS NULL OR seq = ?12)
            RETURNING creator_id, created_at
            """))
        defer { update.reset() }
        return try version.plain.withUnsafeBytes { plain in
            try RecordReader.withOptionalBytes(version.sealed) { sealed in
                update.bind(1, v.parent)
                update.bindText(2, borrowing: plain)
                update.bindBlob(3, borrowing: sealed)
                update.bind(4, v.epoch)
                update.bind(5, v.seq)
                update.bind(6, v.membershipSeq)
                bindUser(update, 7, v.modifierID)
                update.bind(8, v.modified)
                update.bind(9, zoneRowID)
                update.bind(10, v.name)
                update.bind(11, v.type)
                if let expectedSeq { update.bind(12, expectedSeq) }
                if !keepingCreator {
                    bindUser(update, 13, v.creatorID)
                    update.bind(14, v.created)
                }
                guard try update.step() else { return nil }
                return (update.text(0), update.double(1))
            }
        }
    }

    /// Resets the insert statement and clears its bindings. The writer may be used again after.
    func finish() {
        insert.reset()
    }

    deinit {
        author.deallocate()
    }
}

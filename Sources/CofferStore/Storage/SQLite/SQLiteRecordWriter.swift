import Foundation
import GRDB

/// The SQLite ``RecordRowWriter``: a save's hot path. Each version is bound in place through
/// SQLite's C API (its fields' bytes borrowed, not copied), and the author's id, the same for
/// every row of a batch, is bound from one buffer the writer keeps.
final class SQLiteRecordWriter: RecordRowWriter {
    private let db: GRDB.Database
    private let zoneRowID: Int64
    private let insert: RawStatement
    private let author: UnsafeMutableRawBufferPointer
    private let authorText: UnsafeRawBufferPointer

    init(_ db: GRDB.Database, zoneRowID: Int64, authorID: String) throws {
        self.db = db
        self.zoneRowID = zoneRowID
        insert = try RawStatement(db.cachedStatement(sql: """
            INSERT INTO record (zone_id, name, type, parent, plain, sealed, epoch, seq, membership_seq, creator_id, modifier_id, created_at, modified_at)
            VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT (zone_id, name) DO NOTHING
            """))
        let count = authorID.utf8.count
        author = UnsafeMutableRawBufferPointer.allocate(byteCount: max(count, 1), alignment: 1)
        _ = author.initializeMemory(as: UInt8.self, from: authorID.utf8)
        authorText = UnsafeRawBufferPointer(rebasing: author[0..<count])
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
                insert.bindText(10, borrowing: authorText)
                insert.bindText(11, borrowing: authorText)
                insert.bind(12, v.created)
                insert.bind(13, v.modified)
                defer { insert.resetKeepingBindings() }
                _ = try insert.step()
                return insert.changes == 1
            }
        }
    }

    func update(_ version: SealedVersion, expectedSeq: Int64?) throws -> (creator: String, created: Double)? {
        let v = version.stamp
        let update = try RawStatement(db.cachedStatement(sql: """
            UPDATE record SET parent = ?, plain = ?, sealed = ?, epoch = ?, seq = ?, membership_seq = ?, modifier_id = ?, modified_at = ?
            WHERE zone_id = ? AND name = ? AND type = ? AND (?12 IS NULL OR seq = ?12)
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
                update.bindText(7, borrowing: authorText)
                update.bind(8, v.modified)
                update.bind(9, zoneRowID)
                update.bind(10, v.name)
                update.bind(11, v.type)
                if let expectedSeq { update.bind(12, expectedSeq) }
                guard try update.step() else { return nil }
                return (update.text(0), update.double(1))
            }
        }
    }

    func finish() {
        insert.reset()
        author.deallocate()
    }
}

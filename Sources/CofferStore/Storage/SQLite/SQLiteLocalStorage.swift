import Foundation
import GRDB

/// An SQLite store as a whole (``LocalStorage``), with a server's ledger in the tables
/// `server_nonce`, `server_operation` and `server_stage`.
struct SQLiteLocalStorage: LocalStorage {
    let storage: SQLiteStorage
    var pool: DatabasePool { storage.pool }

    func hasZones() async throws -> Bool {
        try await read { db in try Bool.fetchOne(db, sql: "SELECT EXISTS (SELECT 1 FROM zone)") ?? false }
    }

    func adoptStoreID(_ id: [UInt8]) async throws {
        try await write { db in
            guard try Bool.fetchOne(db, sql: "SELECT EXISTS (SELECT 1 FROM zone)") != true else {
                throw StoreError(.alreadyExists, "the store is not empty: it has zones")
            }
            try db.execute(sql: "UPDATE store_meta SET value = ? WHERE key = 'store_id'", arguments: [Data(id)])
        }
    }

    func noteNonce(_ nonce: [UInt8], userID: String, seenAt: Double, forgetBefore: Double?) async throws -> Bool {
        try await write { db in
            if let forgetBefore { try db.execute(sql: "DELETE FROM server_nonce WHERE seen_at < ?", arguments: [forgetBefore]) }
            try db.execute(sql: "INSERT INTO server_nonce (user_id, nonce, seen_at) VALUES (?, ?, ?) ON CONFLICT DO NOTHING",
                           arguments: [userID, Data(nonce), seenAt])
            return db.changesCount == 1
        }
    }

    func wasApplied(_ operation: SnapshotOperation) async throws -> Bool {
        try await read { db in
            try Bool.fetchOne(db, sql: "SELECT EXISTS (SELECT 1 FROM server_operation WHERE id = ? AND user_id = ?)",
                              arguments: [Data(operation.id), operation.userID]) ?? false
        }
    }

    func putStagePart(_ part: Int, hash: [UInt8], body: Data, userID: String, at now: Double, forgetBefore: Double, limit: Int) async throws {
        try await write { db in
            try db.execute(sql: "DELETE FROM server_stage WHERE staged_at < ?", arguments: [forgetBefore])
            let held = try Int.fetchOne(db, sql: "SELECT coalesce(sum(length(body)), 0) FROM server_stage WHERE user_id = ? AND part <> ?",
                                        arguments: [userID, part]) ?? 0
            guard held + body.count <= limit else { throw StoreError(.limitExceeded, "a stage holds at most \(limit >> 20) MiB of parts") }
            try db.execute(sql: "INSERT OR REPLACE INTO server_stage (user_id, part, hash, body, staged_at) VALUES (?, ?, ?, ?, ?)",
                           arguments: [userID, part, Data(hash), body, now])
        }
    }

    func stageHashes(userID: String) async throws -> [(part: Int, hash: Data)] {
        try await read { db in
            try Row.fetchAll(db, sql: "SELECT part, hash FROM server_stage WHERE user_id = ? ORDER BY part", arguments: [userID])
                .map { (part: try $0.required(0), hash: try $0.required(1)) }
        }
    }

    func stagedBody(_ part: Int, userID: String) async throws -> Data? {
        try await read { db in
            try Data.fetchOne(db, sql: "SELECT body FROM server_stage WHERE user_id = ? AND part = ?", arguments: [userID, part])
        }
    }

    func dropStage(userID: String) async throws {
        try await write { db in try db.execute(sql: "DELETE FROM server_stage WHERE user_id = ?", arguments: [userID]) }
    }

    func zoneIdentities(rowIDs: Set<Int64>, named: Set<ZoneID>, uids: Set<[UInt8]>) async throws -> [(rowID: Int64, uid: [UInt8], id: ZoneID)] {
        try await read { db in try SQLiteTransaction(db).zoneIdentities(rowIDs: rowIDs, named: named, uids: uids) }
    }

    func ensureQueryIndexes(zoneRowID: Int64, recordType: String, fields: [String]) async throws {
        let plain = Set(try await read { db in try SQLiteTransaction(db).fieldSchemaRows(zoneRowID: zoneRowID, recordType: recordType) }
            .filter { !$0.encrypted }.map(\.field))
        _ = try await ensureFieldIndexes(recordType: recordType, fields: fields.filter(plain.contains))
    }

    /// Makes the field indexes of `recordType` the store lacks for `fields` (replacing a
    /// field's index of the earlier shape); returns the fields whose index it made.
    func ensureFieldIndexes(recordType: String, fields: [String]) async throws -> [String] {
        guard !fields.isEmpty else { return [] }
        let existing = Set(try await read { db in
            try String.fetchAll(db, sql: "SELECT name FROM sqlite_master WHERE type = 'index' AND name LIKE 'record_field_%'")
        })
        let missing = fields.filter { !existing.contains(SQLiteFieldIndex.name(recordType: recordType, field: $0)) }
        guard !missing.isEmpty else { return [] }
        try await write { db in
            for field in missing {
                try db.execute(sql: SQLiteFieldIndex.sql(recordType: recordType, field: field))
                try db.execute(sql: "DROP INDEX IF EXISTS \(SQLiteFieldIndex.name(recordType: recordType, field: field, version: 1))")
            }
        }
        return missing
    }

    func waitForOtherInstances(upTo interval: Duration) async throws {}

    /// A read as the store's reads run (``SQLiteStorage/read(_:)``).
    private func read<T: Sendable>(_ body: @escaping @Sendable (GRDB.Database) throws -> T) async throws -> T {
        try await storage.read(body)
    }

    private func write<T: Sendable>(_ body: @escaping @Sendable (GRDB.Database) throws -> T) async throws -> T {
        do { return try await pool.write(body) } catch { throw Store.map(error) }
    }
}

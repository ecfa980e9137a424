import Foundation
import PostgresNIO

/// A PostgreSQL store as a whole (``LocalStorage``), with a server's ledger in the tables
/// `server_nonce`, `server_operation` and `server_stage`, which every instance serving the
/// database shares.
extension PostgresStorage: LocalStorage {
    func hasZones() async throws -> Bool {
        try await !connector.query("SELECT 1 FROM zone LIMIT 1").isEmpty
    }

    func adoptStoreID(_ id: [UInt8]) async throws {
        try await connector.transaction { tx in
            guard try await tx.query("SELECT 1 FROM zone LIMIT 1").isEmpty else {
                throw StoreError(.alreadyExists, "the store is not empty: it has zones")
            }
            try await tx.query("UPDATE store_meta SET value = \(Data(id)) WHERE key = 'store_id'")
        }
    }

    func noteNonce(_ nonce: [UInt8], userID: String, seenAt: Double, forgetBefore: Double?) async throws -> Bool {
        if let forgetBefore { try await connector.query("DELETE FROM server_nonce WHERE seen_at < \(forgetBefore)") }
        return try await !connector.query("""
            INSERT INTO server_nonce (user_id, nonce, seen_at) VALUES (\(userID), \(Data(nonce)), \(seenAt)) ON CONFLICT DO NOTHING RETURNING 1
            """).isEmpty
    }

    func wasApplied(_ operation: SnapshotOperation) async throws -> Bool {
        try await !connector.query("SELECT 1 FROM server_operation WHERE id = \(Data(operation.id)) AND user_id = \(operation.userID)").isEmpty
    }

    func putStagePart(_ part: Int, hash: [UInt8], body: Data, userID: String, at now: Double, forgetBefore: Double, limit: Int) async throws {
        try await connector.transaction { tx in
            try await tx.query("DELETE FROM server_stage WHERE staged_at < \(forgetBefore)")
            let held = try await tx.query("""
                SELECT coalesce(sum(length(body)), 0)::bigint FROM server_stage WHERE user_id = \(userID) AND part <> \(part)
                """).first?.decode(Int64.self) ?? 0
            guard Int(held) + body.count <= limit else { throw StoreError(.limitExceeded, "a stage holds at most \(limit >> 20) MiB of parts") }
            try await tx.query("""
                INSERT INTO server_stage (user_id, part, hash, body, staged_at) VALUES (\(userID), \(part), \(Data(hash)), \(body), \(now))
                ON CONFLICT (user_id, part) DO UPDATE SET hash = EXCLUDED.hash, body = EXCLUDED.body, staged_at = EXCLUDED.staged_at
                """)
        }
    }

    func stageHashes(userID: String) async throws -> [(part: Int, hash: Data)] {
        try await connector.query("SELECT part, hash FROM server_stage WHERE user_id = \(userID) ORDER BY part").map { row in
            let (part, hash) = try row.decode((Int32, Data).self)
            return (Int(part), hash)
        }
    }

    func stagedBody(_ part: Int, userID: String) async throws -> Data? {
        try await connector.query("SELECT body FROM server_stage WHERE user_id = \(userID) AND part = \(part)").first?.decode(Data.self)
    }

    func dropStage(userID: String) async throws {
        try await connector.query("DELETE FROM server_stage WHERE user_id = \(userID)")
    }

    /// The fields that some zone's schema has as plain and queryable (PostgreSQL's indexes are
    /// per record type, over every zone).
    func ensureQueryIndexes(zoneRowID: Int64, recordType: String, fields: [String]) async throws {
        let typed = try await fieldTypes(recordType: recordType, fields: fields)
        if !typed.isEmpty { try await ensureQueryIndexes(recordType: recordType, fields: typed) }
    }

    func waitForOtherInstances(upTo interval: Duration) async throws {
        try await waitForChange(upTo: interval)
    }
}

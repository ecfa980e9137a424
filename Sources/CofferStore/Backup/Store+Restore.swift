import Foundation
import GRDB

extension Store {
    /// Whether the store holds any zone, of any user (a local store; a server's store answers
    /// for the zones a user may see).
    func hasZones() async throws -> Bool {
        switch backend {
        case .sqlite(let pool):
            return try Self.readNow(pool) { db in try Bool.fetchOne(db, sql: "SELECT EXISTS (SELECT 1 FROM zone)") ?? false }
        case .postgres(let storage):
            return try await !storage.connector.query("SELECT 1 FROM zone LIMIT 1").isEmpty
        case .snapshot:
            throw StoreError(.notSupported, "a store on a server lists only the zones a user may see")
        }
    }

    /// Whether the store recorded `operation` as applied (a batch of a server's client, or a
    /// restore; see ``Backup/restoreID``).
    func wasApplied(_ operation: SnapshotOperation) async throws -> Bool {
        switch backend {
        case .sqlite(let pool):
            return try Self.readNow(pool) { db in
                try Bool.fetchOne(db, sql: "SELECT EXISTS (SELECT 1 FROM server_operation WHERE id = ? AND user_id = ?)",
                                  arguments: [Data(operation.id), operation.userID]) ?? false
            }
        case .postgres(let storage):
            return try await !storage.connector.query("SELECT 1 FROM server_operation WHERE id = \(Data(operation.id)) AND user_id = \(operation.userID)").isEmpty
        case .snapshot:
            throw StoreError(.notSupported, "a store on a server answers this through its stage")
        }
    }

    /// Gives a local store that holds no zone the id `id` (a restore's, so that share URLs and
    /// change tokens made before name it still). The store must be opened again to use it.
    func adoptStoreID(_ id: [UInt8]) async throws {
        precondition(id.count == 16, "a store id is 16 bytes")
        switch backend {
        case .sqlite(let pool):
            do {
                try await pool.write { db in
                    guard try Bool.fetchOne(db, sql: "SELECT EXISTS (SELECT 1 FROM zone)") != true else {
                        throw StoreError(.alreadyExists, "the store is not empty: it has zones")
                    }
                    try db.execute(sql: "UPDATE store_meta SET value = ? WHERE key = 'store_id'", arguments: [Data(id)])
                }
            } catch { throw Self.map(error) }
        case .postgres(let storage):
            try await storage.connector.transaction { tx in
                guard try await tx.query("SELECT 1 FROM zone LIMIT 1").isEmpty else {
                    throw StoreError(.alreadyExists, "the store is not empty: it has zones")
                }
                try await tx.query("UPDATE store_meta SET value = \(Data(id)) WHERE key = 'store_id'")
            }
        case .snapshot:
            throw StoreError(.notSupported, "a store on a server keeps its own id")
        }
    }
}

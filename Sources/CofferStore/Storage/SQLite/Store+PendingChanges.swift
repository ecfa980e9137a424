import Foundation
import GRDB

/// A replica's table of pending changes (`replica_change`): each row one sealed change, its
/// zone and name in the clear so that reads find it, and its state (see ``PendingChanges``).
extension Store {
    /// One row of `replica_change`.
    struct PendingRow: Sendable {
        var number: UInt64
        var zoneUID: [UInt8]
        var name: String
        var state: PendingChanges.State
        var sealed: [UInt8]
        /// A conflict's kind and the server's change tag, or why the server refused it.
        var note: String?
    }

    /// The rows in `states`, by number.
    func pendingRows(in states: [PendingChanges.State]) async throws -> [PendingRow] {
        let storage = try sqliteStorage(for: "a replica's pending changes")
        let list = states.map { String($0.rawValue) }.joined(separator: ",")
        do {
            return try await storage.read { db in
                try Row.fetchAll(db, sql: "SELECT number, zone_uid, name, state, sealed, note FROM replica_change WHERE state IN (\(list)) ORDER BY number")
                    .compactMap(Self.pendingRow)
            }
        } catch {
            throw Store.map(error)
        }
    }

    /// The rows numbered `numbers` (any state).
    func pendingRows(numbered numbers: [UInt64]) async throws -> [PendingRow] {
        guard !numbers.isEmpty else { return [] }
        return try await pendingRows(where: "number IN (\(numbers.map { String(Int64(bitPattern: $0)) }.joined(separator: ",")))", [])
    }

    /// The rows waiting for a push of the record `name` (each of `names`) in the zone `zoneUID`.
    func pendingRows(zoneUID: [UInt8], names: [String]) async throws -> [PendingRow] {
        guard !names.isEmpty else { return [] }
        var rows = [PendingRow]()
        // In slices, within SQLite's limit of bound values.
        for start in stride(from: 0, to: names.count, by: 500) {
            let slice = Array(names[start..<min(start + 500, names.count)])
            rows += try await pendingRows(where: "state = 0 AND zone_uid = ? AND name IN (\(slice.map { _ in "?" }.joined(separator: ",")))",
                                          [Data(zoneUID)] + slice)
        }
        return rows.sorted { $0.number < $1.number }
    }

    /// How many rows wait for a push, and their sealed bytes.
    func pendingSummary() async throws -> (count: Int, bytes: Int) {
        let storage = try sqliteStorage(for: "a replica's pending changes")
        do {
            return try await storage.read { db in
                let row = try Row.fetchOne(db, sql: "SELECT count(*), coalesce(sum(length(sealed)), 0) FROM replica_change WHERE state = 0")
                return (row?[0] ?? 0, row?[1] ?? 0)
            }
        } catch {
            throw Store.map(error)
        }
    }

    private func pendingRows(where condition: String, _ arguments: [any DatabaseValueConvertible & Sendable]) async throws -> [PendingRow] {
        let storage = try sqliteStorage(for: "a replica's pending changes")
        do {
            return try await storage.read { db in
                try Row.fetchAll(db, sql: "SELECT number, zone_uid, name, state, sealed, note FROM replica_change WHERE \(condition) ORDER BY number",
                                 arguments: StatementArguments(arguments.map { $0 as DatabaseValueConvertible }))
                    .compactMap(Self.pendingRow)
            }
        } catch {
            throw Store.map(error)
        }
    }

    private static func pendingRow(_ row: Row) -> PendingRow? {
        let number: Int64 = row[0], state: Int = row[3], uid: Data = row[1], sealed: Data = row[4]
        guard number >= 1, let s = PendingChanges.State(rawValue: state) else { return nil }
        return PendingRow(number: UInt64(number), zoneUID: Array(uid), name: row[2], state: s, sealed: Array(sealed), note: row[5])
    }

    /// In one transaction: deletes the rows numbered `deleting`, then inserts or replaces `rows`.
    func writePendingRows(_ rows: [PendingRow], deleting: [UInt64]) async throws {
        let storage = try sqliteStorage(for: "a replica's pending changes")
        do {
            try await storage.write(logger: logger) { db in
                // A statement a slice of numbers (within SQLite's limit of bound values).
                for start in stride(from: 0, to: deleting.count, by: 500) {
                    let slice = deleting[start..<min(start + 500, deleting.count)]
                    try db.execute(sql: "DELETE FROM replica_change WHERE number IN (\(slice.map { _ in "?" }.joined(separator: ",")))",
                                   arguments: StatementArguments(slice.map { Int64($0) }))
                }
                let insert = try db.cachedStatement(sql: "INSERT OR REPLACE INTO replica_change (number, zone_uid, name, state, sealed, note) VALUES (?, ?, ?, ?, ?, ?)")
                for row in rows {
                    try insert.execute(arguments: [Int64(row.number), Data(row.zoneUID), row.name, row.state.rawValue, Data(row.sealed), row.note])
                }
            }
        } catch {
            throw Store.map(error)
        }
    }
}

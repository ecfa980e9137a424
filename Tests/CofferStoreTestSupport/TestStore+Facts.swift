import CofferCrypto
import CofferVault
import Foundation
import GRDB
import PostgresNIO
import Testing
@testable import CofferStore

// What a test reads from its store's file or database behind the library's back, as someone
// with access to it can, and what the library itself says of a zone.
extension TestStore {
    /// Runs `body` on a connection of its own to the PostgreSQL database, as someone with access
    /// to it would.
    @discardableResult
    package func postgresAdmin<T>(_ body: (PostgresConnector) async throws -> T) async throws -> T {
        try await withPostgresAdmin(postgres, body)
    }

    /// Runs `body` in a write transaction of a second SQLite connection on the store's file
    /// (the server's, behind a server), outside the library: what anyone with write access to
    /// the file can do.
    /// Cuts the zone's log (row `rowID`) in the store's file back to entry `head`, with the rows
    /// written after it: a server that rolled the zone back.
    package func cutLog(zoneRowID rowID: Int64, to head: Int64) throws {
        try sqlite { db in
            try db.execute(sql: "DELETE FROM record WHERE zone_id = ? AND seq > ?", arguments: [rowID, head])
            try db.execute(sql: "DELETE FROM zone_log WHERE zone_id = ? AND seq > ?", arguments: [rowID, head])
            try db.execute(sql: "UPDATE zone SET sequence = ? WHERE id = ?", arguments: [head, rowID])
        }
    }

    package func sqlite<T>(_ body: (Database) throws -> T) throws -> T {
        var config = Configuration()
        config.busyMode = .timeout(10)
        let queue = try DatabaseQueue(path: path, configuration: config)
        defer { try? queue.close() }
        return try queue.write(body)
    }

    /// The row id of one of Alice's zones in the SQLite file.
    package func zoneRowID(_ zone: ZoneID) throws -> Int64 {
        try sqlite { db in
            try #require(try Int64.fetchOne(db, sql: "SELECT id FROM zone WHERE owner_id = ? AND name = ?",
                                            arguments: [zone.ownerID, zone.name]))
        }
    }

    /// (epoch, member) of every `zone_key` row of the zone, sorted.
    package func zoneKeyRows(_ zone: ZoneID) async throws -> [KeyRow] {
        if postgres != nil {
            return try await postgresAdmin { admin in
                try await admin.query("""
                    SELECT k.epoch, k.member_id FROM zone_key k JOIN zone z ON z.id = k.zone_id
                    WHERE z.owner_id = \(zone.ownerID) AND z.name = \(zone.name) ORDER BY k.epoch, k.member_id
                    """).map { row in
                    let (epoch, member) = try row.decode((Int64, String).self)
                    return KeyRow(epoch: epoch, member: member)
                }
            }
        }
        let rowID = try zoneRowID(zone)
        return try sqlite { db in
            try Row.fetchAll(db, sql: "SELECT epoch, member_id FROM zone_key WHERE zone_id = ? ORDER BY epoch, member_id",
                             arguments: [rowID]).map { KeyRow(epoch: $0[0], member: $0[1]) }
        }
    }

    /// The wrapped key of `member` at `epoch`, if any.
    package func wrappedKey(_ zone: ZoneID, member: String, epoch: Int64) async throws -> [UInt8]? {
        if postgres != nil {
            return try await postgresAdmin { admin in
                try await admin.query("""
                    SELECT k.wrapped_key FROM zone_key k JOIN zone z ON z.id = k.zone_id
                    WHERE z.owner_id = \(zone.ownerID) AND z.name = \(zone.name) AND k.epoch = \(epoch) AND k.member_id = \(member)
                    """).first.map { Array(try $0.decode(Data.self)) }
            }
        }
        let rowID = try zoneRowID(zone)
        return try sqlite { db in
            try Data.fetchOne(db, sql: "SELECT wrapped_key FROM zone_key WHERE zone_id = ? AND epoch = ? AND member_id = ?",
                              arguments: [rowID, epoch, member]).map { Array($0) }
        }
    }

    /// The epochs of `zone_key_chain` rows of the zone.
    package func chainEpochs(_ zone: ZoneID) async throws -> [Int64] {
        if postgres != nil {
            return try await postgresAdmin { admin in
                try await admin.query("""
                    SELECT c.epoch FROM zone_key_chain c JOIN zone z ON z.id = c.zone_id
                    WHERE z.owner_id = \(zone.ownerID) AND z.name = \(zone.name) ORDER BY c.epoch
                    """).map { try $0.decode(Int64.self) }
            }
        }
        let rowID = try zoneRowID(zone)
        return try sqlite { db in
            try Int64.fetchAll(db, sql: "SELECT epoch FROM zone_key_chain WHERE zone_id = ? ORDER BY epoch", arguments: [rowID])
        }
    }

    /// Record name → epoch column, from the file.
    package func recordEpochs(_ zone: ZoneID) async throws -> [String: Int64] {
        if postgres != nil {
            return try await postgresAdmin { admin in
                var out = [String: Int64]()
                for row in try await admin.query("""
                    SELECT r.name, r.epoch FROM record r JOIN zone z ON z.id = r.zone_id WHERE z.owner_id = \(zone.ownerID) AND z.name = \(zone.name)
                    """) {
                    let (name, epoch) = try row.decode((String, Int64).self)
                    out[name] = epoch
                }
                return out
            }
        }
        let rowID = try zoneRowID(zone)
        return try sqlite { db in
            var out = [String: Int64]()
            for row in try Row.fetchAll(db, sql: "SELECT name, epoch FROM record WHERE zone_id = ?", arguments: [rowID]) {
                out[row[0]] = row[1]
            }
            return out
        }
    }

    /// The raw `sealed` column of a record.
    package func sealedBlob(_ zone: ZoneID, _ name: String) async throws -> [UInt8] {
        if postgres != nil {
            return try await postgresAdmin { admin in
                Array(try #require(try await admin.query("""
                    SELECT r.sealed FROM record r JOIN zone z ON z.id = r.zone_id
                    WHERE z.owner_id = \(zone.ownerID) AND z.name = \(zone.name) AND r.name = \(name)
                    """).first).decode(Data.self))
            }
        }
        let rowID = try zoneRowID(zone)
        return try sqlite { db in
            Array(try #require(try Data.fetchOne(db, sql: "SELECT sealed FROM record WHERE zone_id = ? AND name = ?",
                                                 arguments: [rowID, name])))
        }
    }

    /// What the zone's log says, as its owner verifies it now.
    package func state(_ zone: ZoneID) async throws -> ZoneState {
        let alice = self.alice
        return try await store.read { db in
            guard let row = try db.zoneRow(zone) else { throw StoreError(.zoneNotFound, "no zone \(zone.name)") }
            return try alice.verifiedLogs.walkLog(db, zone: row, signaturesAfter: 0).state
        }
    }

    package enum LogCount { case share, participants, acceptances }

    /// From the zone's verified log: 1 when it is shared (else 0), its named participants (removed
    /// ones included), or the acceptances in force (named participants and link joiners).
    package func logCount(_ what: LogCount, _ zone: ZoneID) async throws -> Int {
        let state = try await state(zone)
        switch what {
        case .share: return state.share == nil ? 0 : 1
        case .participants: return state.share?.participants.count ?? 0
        case .acceptances:
            return state.acceptances.values.filter { $0 == .accepted }.count + state.linkJoiners.values.filter { $0 == .accepted }.count
        }
    }

    /// The share uid of the zone's share, from its log.
    package func shareUID(_ zone: ZoneID) async throws -> [UInt8] {
        try #require(try await state(zone).share?.shareUID)
    }

    /// The zone's row, read from the SQLite file (for synchronous checks).
    package func sqliteZoneRow(_ zone: ZoneID) throws -> ZoneRow {
        try sqlite { db in try #require(try SQLiteTransaction(db).zoneRow(zone)) }
    }

    /// The zone's uid (bound into record associated data).
    package func zoneRow(_ zone: ZoneID) async throws -> ZoneRow {
        try #require(try await store.read { db in try db.zoneRow(zone) })
    }

    /// Number of record entries (commits and rewrites) in a zone's log, by the kind each
    /// entry's body says.
    package func commitCount(_ zone: ZoneID) async throws -> Int {
        try await store.read { db in
            guard let row = try db.zoneRow(zone) else { return -1 }
            return try db.logEntries(zoneRowID: row.rowID, after: 0).filter { stored in
                LogEntry.decode(stored.body).map { $0.kind == .commit || $0.kind == .rewrite } ?? false
            }.count
        }
    }
}

/// A `zone_key` row: the epoch and the member it wraps the key to.
package struct KeyRow: Hashable, CustomStringConvertible {
    package let epoch: Int64
    package let member: String
    package init(epoch: Int64, member: String) {
        self.epoch = epoch
        self.member = member
    }
    package var description: String { "\(epoch):\(member.prefix(8))" }
}

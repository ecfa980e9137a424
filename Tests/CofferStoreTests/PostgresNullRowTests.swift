import CofferStoreTestSupport
import Foundation
import PostgresNIO
import Testing
@testable import CofferStore

/// A `NOT NULL` column of the PostgreSQL store that holds NULL: whoever administers the database
/// drops the constraint (`ALTER TABLE … DROP NOT NULL`) and writes the NULL. Every read and write
/// of the store must then refuse with a `StoreError`, never trap and never pass on a decoding
/// error of the driver.
@Suite("NULL in NOT NULL columns of a PostgreSQL store", .postgres)
struct PostgresNullRowTests {
    /// A column to set NULL, and which of its rows: the zone's (`$zone`, its row id), Alice's,
    /// Mallory's, each substituted before the statement runs.
    struct Target: Sendable, CustomTestStringConvertible {
        let table: String
        let column: String
        let rows: String
        /// Whether reading record n1 of the zone must be refused (a column the reader's checks
        /// use; `zone_log.hash` is not: each entry's hash is computed again from its body).
        let refusesRecord: Bool
        var testDescription: String { "\(table).\(column)" }
    }

    static let targets: [Target] = [
        Target(table: "record", column: "plain", rows: "zone_id = $zone AND name = 'n1'", refusesRecord: true),
        Target(table: "record", column: "creator_id", rows: "zone_id = $zone AND name = 'n1'", refusesRecord: true),
        Target(table: "record", column: "type", rows: "zone_id = $zone AND name = 'n1'", refusesRecord: true),
        Target(table: "record", column: "epoch", rows: "zone_id = $zone AND name = 'n1'", refusesRecord: true),
        Target(table: "zone", column: "name", rows: "id = $zone", refusesRecord: true),
        Target(table: "zone", column: "uid", rows: "id = $zone", refusesRecord: true),
        Target(table: "zone", column: "created_at", rows: "id = $zone", refusesRecord: true),
        Target(table: "zone", column: "sequence", rows: "id = $zone", refusesRecord: true),
        Target(table: "record", column: "seq", rows: "zone_id = $zone AND name = 'n1'", refusesRecord: true),
        Target(table: "zone_log", column: "hash", rows: "zone_id = $zone AND seq = 2", refusesRecord: false),
        Target(table: "zone_log", column: "body", rows: "zone_id = $zone AND seq = 2", refusesRecord: true),
        Target(table: "zone_log", column: "signature", rows: "zone_id = $zone AND seq = 2", refusesRecord: true),
        Target(table: "zone_key", column: "wrapped_key", rows: "zone_id = $zone AND member_id = $alice", refusesRecord: true),
        Target(table: "field_schema", column: "value_type", rows: "zone_id = $zone AND record_type = 'Note' AND field = 'title'", refusesRecord: true),
        Target(table: "contact", column: "card", rows: "user_id = $mallory", refusesRecord: false),
        Target(table: "contact", column: "name", rows: "user_id = $mallory", refusesRecord: false),
        Target(table: "record_tombstone", column: "author_id", rows: "zone_id = $zone", refusesRecord: false),
        Target(table: "store_counter", column: "db_seq", rows: "true", refusesRecord: false),
    ]

    @Test("a NOT NULL column set to NULL: every read and write refuses with a StoreError, never traps", arguments: targets)
    func nullColumn(_ target: Target) async throws {
        try await PostgresHostileTests.scene { s in
            // A deletion, so that the tombstone table has a row.
            _ = try await s.f.alice.privateDatabase.save(makeNote("gone", in: s.zone))
            _ = try await s.f.alice.privateDatabase.delete(recordNamed: "gone", in: s.zone)
            let id = try await s.rowID()
            let rows = target.rows.replacingOccurrences(of: "$zone", with: "\(id)")
                .replacingOccurrences(of: "$alice", with: "'\(s.f.alice.userID)'")
                .replacingOccurrences(of: "$mallory", with: "'\(s.mallory.userID)'")
            try await s.f.postgresAdmin { admin in
                _ = try await admin.query(PostgresQuery(unsafeSQL: "ALTER TABLE \(target.table) ALTER COLUMN \(target.column) DROP NOT NULL"))
                let changed = try await admin.query(PostgresQuery(unsafeSQL: "UPDATE \(target.table) SET \(target.column) = NULL WHERE \(rows) RETURNING 1"))
                #expect(changed.count >= 1, "no row of \(target.table) was changed")
            }
            for user in [s.f.alice, s.bob] {
                let session = try await s.f.fresh(user)
                let db = session.zoneIDIsMine(s.zone) ? session.privateDatabase : session.sharedDatabase
                let zone = s.zone
                if target.refusesRecord {
                    let outcome = await attempt { try await db.record(named: "n1", in: zone) }
                    if case .allowed = outcome { Issue.record("\(session.userID): record n1 was read") }
                }
                await NullRowTests.sweep(session, zone)
            }
        }
    }
}

import Foundation
import GRDB

extension Session {
    /// Takes the next store-wide database sequence number and stamps the zone with it, so the
    /// database change feeds of its owner and members see it changed.
    static func touch(_ db: GRDB.Database, zoneRowID: Int64) throws {
        try db.cachedStatement(sql: "UPDATE store_counter SET db_seq = db_seq + 1 WHERE id = 1").execute()
        try db.cachedStatement(sql: "UPDATE zone SET db_seq = (SELECT db_seq FROM store_counter WHERE id = 1) WHERE id = ?").execute(arguments: [zoneRowID])
    }

    /// Records that a zone left a user's view (deleted, removed from its share, left), for their
    /// database change feed.
    static func zoneGone(_ db: GRDB.Database, zone: ZoneRow, for users: [String], reason: String) throws {
        try db.execute(sql: "UPDATE store_counter SET db_seq = db_seq + 1 WHERE id = 1")
        for user in Set(users) {
            try db.execute(sql: """
                INSERT OR REPLACE INTO zone_tombstone (user_id, zone_uid, owner_id, name, db_seq, reason)
                VALUES (?, ?, ?, ?, (SELECT db_seq FROM store_counter WHERE id = 1), ?)
                """, arguments: [user, Data(zone.uid), zone.id.ownerID, zone.id.name, reason])
        }
    }

    /// The zone came back into a user's view (re-accepted, re-invited): drop their tombstone.
    static func zoneBack(_ db: GRDB.Database, zone: ZoneRow, for user: String) throws {
        try db.execute(sql: "DELETE FROM zone_tombstone WHERE user_id = ? AND zone_uid = ?", arguments: [user, Data(zone.uid)])
    }

}

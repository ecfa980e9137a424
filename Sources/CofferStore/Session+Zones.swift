import CofferCrypto
import Foundation
import GRDB

extension Session {
    func createZone(named name: String) throws -> Zone {
        try Names.validateZone(name)
        let zoneKey = SymmetricKey()
        let uid = SecureRandom.bytes(count: 16)
        let wrapped = Self.wrapZoneKey(zoneKey, zoneUID: uid, epoch: 1, to: vault.boxKey.publicKey)
        let owner = userID
        let now = Date()
        let rowID: Int64 = try store.write { db in
            if try Bool.fetchOne(db, sql: "SELECT 1 FROM zone WHERE owner_id = ? AND name = ?", arguments: [owner, name]) == true {
                throw StoreError(.alreadyExists, "zone '\(name)' already exists")
            }
            try db.execute(sql: "INSERT INTO zone (uid, owner_id, name, current_epoch, sequence, created_at) VALUES (?, ?, ?, 1, 0, ?)",
                           arguments: [Data(uid), owner, name, now.timeIntervalSince1970])
            let rowID = db.lastInsertedRowID
            // The owner is the zone's first member: the key is wrapped to their X25519 key.
            try db.execute(sql: "INSERT INTO zone_key (zone_id, epoch, member_id, wrapped_key) VALUES (?, 1, ?, ?)",
                           arguments: [rowID, owner, Data(wrapped)])
            try Self.touch(db, zoneRowID: rowID)
            // A zone of the same name created again is a new zone: the old one stays deleted in the feeds.
            return rowID
        }
        zoneKeys.withLock { $0[rowID] = [1: zoneKey] }
        forgetRowContexts(zoneRowID: rowID) // a new zone may have the row id of a deleted one
        store.logger.info("zone created", metadata: ["zone": "\(name)"])
        return Zone(id: ZoneID(name: name, ownerID: owner), created: now, keyEpoch: 1, sequence: 0, recordCount: 0)
    }

    func ownedZones() throws -> [Zone] {
        let owner = userID
        return try store.read { db in
            try Row.fetchAll(db, sql: """
                SELECT z.*, (SELECT count(*) FROM record r WHERE r.zone_id = z.id) AS record_count
                FROM zone z WHERE z.owner_id = ? ORDER BY z.name
                """, arguments: [owner]).map { row in
                let zone = try ZoneRow(row: row)
                return Zone(id: zone.id, created: zone.created, keyEpoch: zone.currentEpoch, sequence: zone.sequence,
                            recordCount: row["record_count"])
            }
        }
    }

    func deleteZone(_ zoneID: ZoneID) throws {
        let me = userID
        let rowID: Int64 = try store.write { db in
            let zone = try ZoneRow.fetch(db, zoneID)
            guard zone.id.ownerID == me else {
                throw StoreError(.permissionFailure, "only the owner can delete zone '\(zoneID.name)'")
            }
            try Self.zoneGone(db, zone: zone, for: try Self.viewers(db, zone: zone), reason: "deleted")
            // Records, keys and schema go with it (ON DELETE CASCADE); secure_delete zeroes the freed pages.
            try db.execute(sql: "DELETE FROM zone WHERE id = ?", arguments: [zone.rowID])
            return zone.rowID
        }
        forget(zoneRowID: rowID)
        store.logger.info("zone deleted", metadata: ["zone": "\(zoneID.name)"])
    }
}

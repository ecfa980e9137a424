import CofferCrypto
import CofferVault
import Foundation
import GRDB

extension Session {
    func createZone(named name: String) async throws -> Zone {
        try Names.validateZone(name)
        let zoneKey = SymmetricKey()
        let uid = SecureRandom.bytes(count: 16)
        let wrapped = Self.wrapZoneKey(zoneKey, zoneUID: uid, epoch: 1, to: vault.boxKey.publicKey)
        let owner = userID
        let now = Date()
        let rowID: Int64 = try await store.write { db in
            if try Bool.fetchOne(db, sql: "SELECT 1 FROM zone WHERE owner_id = ? AND name = ?", arguments: [owner, name]) == true {
                throw StoreError(.alreadyExists, "zone '\(name)' already exists")
            }
            try db.execute(sql: """
                INSERT INTO zone (uid, owner_id, name, current_epoch, sequence, created_at, log_format) VALUES (?, ?, ?, 1, 0, ?, 1)
                """, arguments: [Data(uid), owner, name, now.timeIntervalSince1970])
            let rowID = db.lastInsertedRowID
            // The owner is the zone's first member: the key is wrapped to their X25519 key, and
            // the genesis commits to it.
            try db.execute(sql: "INSERT INTO zone_key (zone_id, epoch, member_id, wrapped_key) VALUES (?, 1, ?, ?)",
                           arguments: [rowID, owner, Data(wrapped)])
            let zone = try ZoneRow.fetch(db, ZoneID(name: name, ownerID: owner))
            let genesis = GenesisPayload(zoneName: name,
                                         state: StatePayload(epoch: 1, newCommitments: [1: Self.commitment(to: zoneKey, zoneUID: uid, epoch: 1)], share: nil),
                                         records: .empty)
            try self.writeGenesis(db, zone: zone, seq: 1, payload: genesis, time: now.timeIntervalSince1970)
            try Self.touch(db, zoneRowID: rowID)
            return rowID
        }
        zoneKeys.withLock { $0[rowID] = [1: zoneKey] }
        forgetRowContexts(zoneRowID: rowID) // a new zone may have the row id of a deleted one
        commits.withLock { _ = $0.removeValue(forKey: rowID) }
        store.logger.info("zone created", metadata: ["zone": "\(name)"])
        return Zone(id: ZoneID(name: name, ownerID: owner), created: now, keyEpoch: 1, sequence: 1, recordCount: 0)
    }

    /// Signs and stores a zone's first entry (in the caller's write transaction) and keeps the
    /// zone's log for the session once the transaction commits.
    @discardableResult
    func writeGenesis(_ db: GRDB.Database, zone: ZoneRow, seq: Int64, payload: GenesisPayload, time: Double,
                      entries: [UInt8]? = nil, names: [UInt8]? = nil) throws -> ZoneLog {
        let entry = LogEntry(zoneUID: zone.uid, seq: seq, prev: .zero, kind: .genesis, authorID: userID, time: time, payload: payload.encoded)
        let body = entry.body
        let signature = vault.signingKey.signature(for: body)
        let hash = LogEntry.hash(body: body, signature: signature)
        let log: ZoneLog
        do { log = ZoneLog(state: try ZoneState(genesis: entry, hash: hash, uid: zone.uid, name: zone.id.name, ownerID: zone.id.ownerID)) }
        catch let refusal as ZoneState.Refusal { throw StoreError(.internalError, "zone '\(zone.id.name)': \(refusal.reason)") }
        try Self.insertEntry(db, zoneRowID: zone.rowID, entry: entry, body: body, signature: signature, hash: hash, entries: entries, names: names)
        try db.execute(sql: "UPDATE zone SET log_format = 1 WHERE id = ?", arguments: [zone.rowID])
        keepOnCommit(db, log, zoneRowID: zone.rowID)
        return log
    }

    /// The zones this user owns whose log verifies.
    func ownedZones() async throws -> [Zone] { try await ownedZoneAccess().zones }

    /// ``ownedZones()``, and the owned zones refused because their log fails verification
    /// (`.integrityFailure`): left out of the list, reported by `audit`.
    func ownedZoneAccess() async throws -> (zones: [Zone], refused: [(ZoneID, StoreError)]) {
        let owner = userID
        return try await read { db in
            var refused = [(ZoneID, StoreError)]()
            let zones = try Row.fetchAll(db, sql: """
                SELECT z.*, (SELECT count(*) FROM record r WHERE r.zone_id = z.id) AS record_count
                FROM zone z WHERE z.owner_id = ? ORDER BY z.name
                """, arguments: [owner]).compactMap { row -> Zone? in
                let zone = try ZoneRow(row: row)
                do {
                    let state = try self.zoneState(db, zone: zone)
                    return Zone(id: zone.id, created: Date(timeIntervalSince1970: state.created), keyEpoch: state.epoch, sequence: state.headSeq, recordCount: try row.required("record_count"))
                } catch let error as StoreError where error.code == .integrityFailure || error.code == .permissionFailure {
                    refused.append((zone.id, error))
                    return nil
                }
            }
            return (zones, refused)
        }
    }

    func deleteZone(_ zoneID: ZoneID) async throws {
        let me = userID
        let (rowID, uid): (Int64, [UInt8]) = try await store.write { db in
            let zone = try self.zoneRow(db, zoneID)
            guard zone.id.ownerID == me else {
                throw StoreError(.permissionFailure, "only the owner can delete zone '\(zoneID.name)'")
            }
            let viewers = (try? self.zoneState(db, zone: zone).readers) ?? [me]
            try Self.zoneGone(db, zone: zone, for: viewers, reason: "deleted")
            // Records, keys, log and schema go with it (ON DELETE CASCADE); secure_delete zeroes the freed pages.
            try db.execute(sql: "DELETE FROM zone WHERE id = ?", arguments: [zone.rowID])
            return (zone.rowID, zone.uid)
        }
        forget(zoneRowID: rowID)
        // The zone is gone on purpose: this user's mark says so, and a copy of it put back in
        // the file later is refused.
        try? vault.marks.reset(zone: uid, to: ZoneMark.deletion(zoneUID: uid, ownerID: me))
        store.logger.info("zone deleted", metadata: ["zone": "\(zoneID.name)"])
    }
}

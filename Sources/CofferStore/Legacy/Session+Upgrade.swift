import CofferCrypto
import CofferVault
import Foundation
import GRDB

extension Session {
    /// Upgrades the zones of the store's earlier format that this user owns: each is verified as
    /// it stands (``LegacyZone``), every record is sealed again (its ciphertext no longer binds the
    /// store's id) under the zone's current key, and the owner signs the zone's first log entry
    /// over its state: the key epoch and its commitment, the share and the acceptances the owner
    /// verified, and the hash of every record version. The zone's rows of the earlier format and
    /// its older keys are deleted. A zone that fails verification is left as it is (its readers
    /// are refused, and `audit` reports it); the others are upgraded.
    func upgradeLegacyZones() throws {
        let me = userID
        let legacy = try read { db in
            try Row.fetchAll(db, sql: "SELECT * FROM zone WHERE owner_id = ? AND log_format = 0 ORDER BY id", arguments: [me]).map(ZoneRow.init)
        }
        for zone in legacy {
            do {
                try upgrade(zone)
                store.logger.notice("zone upgraded to the signed log", metadata: ["zone": "\(zone.id.name)"])
            } catch let error as StoreError where error.code == .integrityFailure {
                store.logger.error("zone not upgraded", metadata: ["zone": "\(zone.id.name)", "reason": "\(error.message)"])
            }
        }
    }

    private func upgrade(_ listed: ZoneRow) throws {
        try store.write { db in
            // Another process may have upgraded it since.
            guard let row = try Row.fetchOne(db, sql: "SELECT * FROM zone WHERE id = ?", arguments: [listed.rowID]) else { return }
            let zone = try ZoneRow(row: row)
            guard zone.uid == listed.uid, zone.logFormat == 0, try Self.logHead(db, zoneRowID: zone.rowID) == nil else { return }
            // A zone this user already saw with a log cannot turn back into the earlier format:
            // someone put old rows back, and upgrading them again would sign a rollback.
            if try self.storedMark(zone) != nil {
                throw StoreError(.integrityFailure, "zone '\(zone.id.name)' was upgraded before, and its log is gone: the store was changed")
            }
            let verified = try LegacyZone(db: db, zone: zone, storeID: self.store.storeID, session: self).verify()
            let seq = zone.sequence + 1
            let epoch = verified.epoch
            var commit = CommitBuilder(zoneUID: zone.uid, seq: seq)
            try self.writeVersions(db, zone: zone, records: verified.records, seq: seq, epoch: epoch, ownerSeq: seq, key: verified.key, into: &commit)
            if let share = verified.share, let secret = verified.linkSecret {
                _ = try self.setLink(db, zone: zone, share: share, epoch: epoch, key: verified.key, secret: secret)
            }
            let genesis = GenesisPayload(zoneName: zone.id.name,
                                         state: StatePayload(epoch: epoch, newCommitments: [epoch: Self.commitment(to: verified.key, zoneUID: zone.uid, epoch: epoch)],
                                                             share: verified.share),
                                         vouched: verified.accepted, records: commit.summary)
            let log = try self.writeGenesis(db, zone: zone, seq: seq, payload: genesis, time: Date().timeIntervalSince1970,
                                            entries: commit.entries, names: commit.names)
            // Every record is now under the current key: older keys and the rows of the earlier format go.
            for table in ["zone_commit", "membership_log", "share", "zone_key_chain"] {
                try db.execute(sql: "DELETE FROM \(table) WHERE zone_id = ?", arguments: [zone.rowID])
            }
            try db.execute(sql: "DELETE FROM zone_key WHERE zone_id = ? AND epoch < ?", arguments: [zone.rowID, epoch])
            try Self.recordMembers(db, zone: zone, state: log.state)
            try db.execute(sql: "UPDATE zone SET share_uid = ? WHERE id = ?", arguments: [verified.share.map { Data($0.shareUID) }, zone.rowID])
            try Self.touch(db, zoneRowID: zone.rowID)
            let rowID = zone.rowID, key = verified.key
            db.afterNextTransaction(onCommit: { [self] _ in
                self.zoneKeys.withLock { $0[rowID] = [epoch: key] }
                self.forgetRowContexts(zoneRowID: rowID)
            })
        }
    }
}

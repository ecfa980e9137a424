import CofferCrypto
import CofferVault
import Foundation

/// Upgrades zones of the store's earlier format that the user owns: each is verified as it
/// stands, re-sealed, and given a signed log.
struct LegacyUpgrade: Sendable {
    /// The store whose zones of the earlier format it upgrades.
    let store: Store
    /// The acting user's vault: their id and the key their zone keys are wrapped to.
    let vault: Vault
    /// Takes each upgraded zone's new key.
    let keyRing: KeyRing
    /// Reads the zones, and this user's marks of them.
    let verifiedLogs: VerifiedLogs
    /// The schemas the verification types plain values with.
    let schemaRegistry: SchemaRegistry
    /// Writes each zone's records again, re-sealed.
    let writer: RecordWriter
    /// Signs each zone's genesis.
    let zoneDirectory: ZoneDirectory
    /// Carries a zone's public link over.
    let sharing: ShareService
    /// The kept row contexts, dropped with the keys a zone had before.
    let rowContexts: RowContexts

    /// The acting user's id.
    var userID: String { vault.identity.userID }
}

extension LegacyUpgrade {
    /// Upgrades the zones of the store's earlier format that this user owns. Each is verified as
    /// it stands (``LegacyZone``); a zone its owner signed nothing of (no share, no commit) is
    /// not upgraded, since its rows could be anyone's. The zone gets a new key, made here, at the
    /// next epoch, wrapped to the owner and to the named participants who are not removed: a
    /// key of the earlier format was never committed to outside a share, so it could be one
    /// someone else put there. Every record is sealed again under it (its ciphertext no longer
    /// binds the store's id), and the owner signs the zone's first log entry over the key's
    /// commitment, the share and the hash of every record version. Participants accept again
    /// (the earlier format's acceptances were not bound to a version of the share, so an old one
    /// could be put back), and link joiners with the same link. The zone's rows of the earlier
    /// format and its older keys are deleted. A zone that fails verification is left as it is
    /// (its readers are refused, its owner is told why, and `audit` reports it); the others are
    /// upgraded.
    @_disfavoredOverload
    func upgradeLegacyZones() throws {
        let me = userID
        try upgrade(try store.readLegacy { tables in try tables.zones(ownedBy: me) })
    }

    /// ``upgradeLegacyZones()`` with the zones to upgrade found by a read that suspends while it
    /// waits for a connection. A store with none (every store made since) writes nothing; the
    /// upgrade of one that has some, once, writes as the blocking form does.
    func upgradeLegacyZones() async throws {
        let me = userID
        let legacy = try await store.read { db in try LegacyTables.of(db)?.zones(ownedBy: me) ?? [] }
        try upgrade(legacy)
    }

    /// Upgrades each zone of `legacy`, logging the ones left as they are.
    /// - Throws: what is not a ``StoreError`` (the store's own failures are refusals, logged).
    private func upgrade(_ legacy: [ZoneRow]) throws {
        for zone in legacy {
            do {
                try upgrade(zone)
                store.logger.notice("zone upgraded to the signed log", metadata: ["zone": "\(zone.id.name)"])
            } catch let error as StoreError {
                // Left as it is: its owner is told why when they use it, and `audit` reports it.
                store.logger.error("zone not upgraded", metadata: ["zone": "\(zone.id.name)", "reason": "\(error.message)"])
            }
        }
    }

    private func upgrade(_ listed: ZoneRow) throws {
        try store.writeLegacy { db, tables in
            // Another process may have upgraded it since.
            guard let zone = try tables.zone(rowID: listed.rowID) else { return }
            guard zone.uid == listed.uid, zone.logFormat == 0, try db.logHead(zoneRowID: zone.rowID) == nil else { return }
            // A zone this user already saw with a log cannot turn back into the earlier format:
            // someone put old rows back, and upgrading them again would sign a rollback.
            if try self.verifiedLogs.storedMark(zone) != nil {
                throw StoreError(.integrityFailure, "zone '\(zone.id.name)' was upgraded before, and its log is gone: the store was changed")
            }
            guard zone.sequence >= 0, zone.sequence < Limits.maxLogSequence else {
                throw StoreError(.integrityFailure, "zone '\(zone.id.name)' cannot be upgraded: its sequence is out of range; the store was changed")
            }
            let verified = try LegacyZone(db: db, tables: tables, zone: zone, store: self.store, vault: self.vault, schemaRegistry: self.schemaRegistry).verify()
            let seq = zone.sequence + 1
            let epoch = verified.epoch + 1, key = SymmetricKey()
            try db.deleteWrappedKeys(zoneRowID: zone.rowID, memberID: nil)
            for member in Set([zone.id.ownerID] + (verified.share?.activeNamed ?? [])).sorted() {
                let contact = try self.store.contactRow(db, userID: member)
                try db.insertWrappedKey(zoneRowID: zone.rowID, epoch: epoch, memberID: member,
                                        wrapped: KeyRing.wrapZoneKey(key, zoneUID: zone.uid, epoch: epoch, to: contact.identity.boxKey))
            }
            try db.noteZoneEpoch(zoneRowID: zone.rowID, epoch: epoch)
            var commit = CommitBuilder(zoneUID: zone.uid, seq: seq)
            try self.writer.writeVersions(db, zone: zone, records: verified.records, seq: seq, epoch: epoch, ownerSeq: seq, key: key, into: &commit)
            if let share = verified.share, let secret = verified.linkSecret {
                // The same link: its holders join again with the URL they have.
                _ = try self.sharing.setLink(db, zone: zone, share: share, epoch: epoch, key: key, secret: secret)
            }
            let genesis = GenesisPayload(zoneName: zone.id.name,
                                         state: StatePayload(epoch: epoch, newCommitments: [epoch: KeyRing.commitment(to: key, zoneUID: zone.uid, epoch: epoch)],
                                                             share: verified.share),
                                         records: commit.summary)
            let log = try self.zoneDirectory.writeGenesis(db, zone: zone, seq: seq, payload: genesis, time: Date().timeIntervalSince1970,
                                            entries: commit.entries, names: commit.names)
            // Every record is now under the new key: the rows of the earlier format go. Its
            // deletions are not in the log: change tokens from before the upgrade expire (their
            // holders fetch the zone afresh, as after a compaction).
            try tables.dropEarlierRows(zoneRowID: zone.rowID, compactedThrough: zone.sequence, shareUID: verified.share?.shareUID)
            try ShareService.recordMembers(db, zone: zone, state: log.state)
            try db.touchZone(zoneRowID: zone.rowID)
            let rowID = zone.rowID
            db.afterTransaction(onCommit: { [self] in
                self.keyRing.replace(zoneRowID: rowID, with: key, epoch: epoch)
                self.rowContexts.forget(zoneRowID: rowID)
            }, onRollback: {})
        }
    }
}

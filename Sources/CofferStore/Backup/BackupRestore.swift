import CofferCrypto
import CofferVault
import Foundation

/// Puts a backup into an empty store (``Session/restore(_:resettingMarks:progress:)`` says what
/// it does): checks the backup and the store, writes every zone whole in one batch, resets the
/// marks it takes back and verifies what it wrote.
struct BackupRestore: Sendable {
    /// The store restored into.
    let store: Store
    /// The acting user's vault: their id and the marks a restore resets.
    let vault: Vault
    /// Verifies each zone restored.
    let auditor: Auditor

    /// The acting user's id.
    var userID: String { vault.identity.userID }


    func restore(_ backup: Backup, resettingMarks: Bool, progress: @Sendable (String) -> Void) async throws -> RestoreResult {
        guard backup.userID == userID else {
            throw StoreError(.permissionFailure, "this backup is of user \(backup.userID), not of this vault's user \(userID)")
        }
        let throughServer: Bool
        if case .snapshot = store.backend { throughServer = true } else { throughServer = false }
        var zones = [ZoneCopy](), skipped = [(zone: ZoneID, reason: String)]()
        for zone in backup.zones {
            if throughServer && zone.id.ownerID != userID {
                skipped.append((zone.id, "zone '\(zone.id.name)' is owned by \(zone.id.ownerID): through a server only its owner restores it"))
            } else {
                zones.append(zone)
            }
        }
        try Self.checkFirstEntries(of: zones)
        let checks = try backup.markChecks(against: vault.marks).filter { check in zones.contains { $0.id == check.zone } }
        if !resettingMarks, let first = checks.first(where: \.isRollback) {
            throw StoreError(.invalidArguments, "the backup takes zone '\(first.zone.name)' back before what you saw; confirm resetting your marks to restore it")
        }
        let target = try BackupSource.driver(of: store, reading: false)
        let operation = SnapshotOperation(id: backup.restoreID, userID: userID)
        let written = try await isWritten(zones, to: target, by: operation, throughServer: throughServer)
        var tookStoreID = false
        if !throughServer, backup.storeID != store.storeID {
            try await store.localStorage(for: "a restore's store id").adoptStoreID(backup.storeID)
            tookStoreID = true
        }

        // Every zone of the backup belongs in this store from now on: a mark of one that the
        // restore does not finish writing is looked for here by audits.
        for zone in zones {
            if let mark = try? vault.marks.mark(forZone: zone.uid) { vault.marks.advance(to: mark, in: store.storeID) }
        }
        do { try vault.marks.save() } catch {
            throw StoreError(.internalError, "your marks file could not be written: \(error)", underlying: error as? VaultError)
        }

        let cards: Int
        if written {
            progress("the store has every zone of this backup already, as the backup holds it (a restore that stopped after writing them)")
            cards = 0
        } else {
            cards = try await write(backup, zones, to: target, by: operation, throughServer: throughServer, progress: progress)
        }

        // The marks of zones taken back, set to the backup's heads; then what was written, verified.
        let resets = try backup.headMarks(for: checks).filter { mark in zones.contains { $0.uid == mark.zoneUID } }
        for mark in resets {
            do { try vault.marks.reset(zone: mark.zoneUID, to: mark) } catch {
                throw StoreError(.internalError, "the zones were restored, but your marks file could not be written: \(error)")
            }
        }
        var findings = [AuditFinding]()
        for zone in zones {
            progress("verifying zone \(zone.id.name)")
            findings += try await store.withPinnedReads { try await auditor.auditZone(zone.id) }.findings
        }
        store.logger.info("backup restored", metadata: ["zones": "\(zones.count)", "contacts": "\(cards)"])
        let restoredIDs = Set(zones.map(\.id))
        return RestoreResult(restored: backup.summaries.filter { restoredIDs.contains($0.zone) }, skipped: skipped, contacts: cards,
                             marksReset: resets.compactMap { mark in zones.first { $0.uid == mark.zoneUID }?.id }, findings: findings,
                             tookStoreID: tookStoreID, foundWritten: written)
    }
    /// Each zone's first entry must be the genesis of that zone, by its owner: a backup whose
    /// zone says otherwise is damaged (or was made to lie), and nothing of it is written.
    static func checkFirstEntries(of zones: [ZoneCopy]) throws {
        for zone in zones {
            guard let first = zone.log.first, LogEntry.decode(first.body)?.seq == first.seq else {
                throw StoreError(.integrityFailure, "the backup is damaged: zone '\(zone.id.name)' has no readable first log entry; nothing was restored")
            }
            do {
                // Its signature is checked with the rest of the log when the zone is read.
                _ = try ZoneLogVerifier(uid: zone.uid, zone: zone.id, key: nil).genesis(first, signed: false)
            } catch let refusal as ZoneState.Refusal {
                throw StoreError(.integrityFailure, "the backup is damaged: zone '\(zone.id.name)' of \(zone.id.ownerID) does not match its log (\(refusal.reason)); nothing was restored")
            }
        }
    }

    /// Whether the store holds every zone of the backup already, as the backup holds it (uid
    /// and log head), no other of this user's, and its record of this restore: a restore that
    /// stopped after its write, gone on with from there. Otherwise the store must be empty: no
    /// zone of this user's, none of the backup's (by name or uid), and locally no zone at all.
    func isWritten(_ zones: [ZoneCopy], to target: any SnapshotDriver, by operation: SnapshotOperation, throughServer: Bool) async throws -> Bool {
        let userID = userID, store = store
        var needs: [StorageSnapshot.Need] = [.ownedZones(userID)]
        for zone in zones { needs += [.zone(zone.id), .zoneUID(zone.uid)] }
        var found = try await ZonePush.fetch(needs, from: target)
        let owned = (found.ownedZones[userID] ?? []).map(\.zone)
        var present = [ZoneID: ZoneRow]()
        for zone in zones {
            if case .some(.some(let row)) = found.zones[zone.id], row.uid == zone.uid { present[zone.id] = row }
        }
        let written: Bool
        if !present.isEmpty, present.count == zones.count, owned.allSatisfy({ present[$0.id]?.rowID == $0.rowID }),
           try await ZonePush.wasApplied(operation, on: store) {
            found.merge(try await ZonePush.fetch(zones.map { .log(zoneRowID: present[$0.id]!.rowID, after: max(0, $0.headSeq - 1)) }, from: target)) { $0 }
            written = zones.allSatisfy { zone in
                found.logs[present[zone.id]!.rowID]?.entries.last.map { $0.seq == zone.headSeq && $0.hash == zone.log.last?.hash } == true
            }
        } else {
            written = false
        }
        if !written {
            if let row = owned.first {
                throw StoreError(.alreadyExists, "the store is not empty: it has your zone '\(row.id.name)'; restore into an empty store")
            }
            for zone in zones {
                if case .some(.some) = found.zones[zone.id] {
                    throw StoreError(.alreadyExists, "the store is not empty: it has zone '\(zone.id.name)' of \(zone.id.ownerID); restore into an empty store")
                }
                if found.uids[zone.uid] == true {
                    throw StoreError(.alreadyExists, "the store is not empty: it has a copy of zone '\(zone.id.name)'; restore into an empty store")
                }
            }
            if !throughServer, try await store.localStorage(for: "a restore into a store that holds no zone").hasZones() {
                throw StoreError(.alreadyExists, "the store is not empty: it has zones; restore into an empty store (a new file, or an empty database)")
            }
            if try await ZonePush.wasApplied(operation, on: store) {
                throw StoreError(.alreadyExists, "this backup was restored into this store before, and its zones were deleted since; restore it into another store")
            }
        }
        return written
    }

    /// Writes the cards the store lacks, then each zone whole, all as one batch. Returns how
    /// many cards it wrote.
    func write(_ backup: Backup, _ zones: [ZoneCopy], to target: any SnapshotDriver, by operation: SnapshotOperation, throughServer: Bool,
               progress: @Sendable (String) -> Void) async throws -> Int {
        var cardWrites = [StorageSnapshot.Write]()
        // The cards the store lacks, then each zone whole, all as one batch.
        let cardUsers = try backup.cards.map { try ContactCard.verify(Data($0.card)).identity.userID }
        var cards = StorageSnapshot.Tables<StoredRow>()
        for start in stride(from: 0, to: cardUsers.count, by: 1_000) {
            cards.merge(try await ZonePush.fetch(cardUsers[start..<min(start + 1_000, cardUsers.count)].map { .contact($0) }, from: target)) { $0 }
        }
        for (card, user) in zip(backup.cards, cardUsers) where (cards.contacts[user] ?? nil) == nil {
            cardWrites.append(try ZonePush.contactWrite(card: card.card, added: card.added))
        }
        let rowIDs = try await ZonePush.fetch(zones.map { .newZoneID($0.id) }, from: target).newZoneIDs
        var batches = stride(from: 0, to: cardWrites.count, by: 500).map { Array(cardWrites[$0..<min($0 + 500, cardWrites.count)]) }
        for zone in zones {
            guard let rowID = rowIDs[zone.id] else { throw StoreError(.internalError, "the store reserved no zone id") }
            batches += try zone.batches(zoneRowID: rowID)
        }
        // A local store takes them in one transaction, a server through its stage: a restore
        // killed at any point leaves every zone or none, and runs again from where it was.
        progress(throughServer ? "sending \(batches.count) parts to the server, to be applied at once"
                               : "writing \(zones.count == 1 ? "1 zone" : "\(zones.count) zones") in one transaction")
        do {
            try await ZonePush.applyWhole(batches, to: target, operation: operation) { done, total, held in
                if throughServer { progress("part \(done) of \(total)" + (held ? ": on the server already" : "")) }
            }
        } catch is SnapshotConflict {
            throw StoreError(.integrityFailure, "the backup cannot be restored: "
                + (zones.count == 1 ? "the rows of zone '\(zones[0].id.name)'" : "its zones' rows")
                + " contradict each other or the store (the backup was changed, or another writer filled the store meanwhile); nothing was restored")
        }
        return cardWrites.count
    }
}

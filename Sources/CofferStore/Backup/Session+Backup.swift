import CofferCrypto
import CofferVault
import Foundation

/// What ``Session/restore(_:resettingMarks:progress:)`` did.
public struct RestoreResult: Sendable {
    /// The zones put back, with their records.
    public let restored: [Backup.ZoneSummary]
    /// Zones of the backup left out, with why (through a server, zones others own).
    public let skipped: [(zone: ZoneID, reason: String)]
    /// Contact cards put back (cards the store had already stay as they are).
    public let contacts: Int
    /// The zones whose marks were set back to the backup's heads.
    public let marksReset: [ZoneID]
    /// What verifying the restored zones found (nothing, for a backup restored whole).
    public let findings: [AuditFinding]
    /// Whether the store took the backup's store id (a local store does; a server keeps its own).
    public let tookStoreID: Bool
    /// Whether the store held every zone already, as the backup does (a restore of it that
    /// stopped after its write): nothing was written again.
    public let foundWritten: Bool
}

/// What ``Session/writeBackup(to:progress:)`` wrote.
public struct BackupSummary: Sendable {
    /// When the backup was made (to the millisecond).
    public let created: Date
    /// Each zone, in the file's order (zones the user owns, then those shared with them).
    public let zones: [Backup.ZoneSummary]
    /// Contact cards.
    public let contactCount: Int
    /// The file's size.
    public let bytes: Int

    /// Record rows in all zones.
    public var recordCount: Int { zones.reduce(0) { $0 + $1.records } }
}

extension Session {
    /// Makes a backup of everything this user owns or can read in the store (see ``Backup``)
    /// and holds it in memory: ``writeBackup(to:progress:)`` into memory, opened again.
    ///
    /// ```swift
    /// let backup = try await session.makeBackup { print($0) }
    /// ```
    /// - Throws: as ``writeBackup(to:progress:)``.
    public func makeBackup(progress: @Sendable (String) -> Void = { _ in }) async throws -> Backup {
        let sink = BackupFormat.MemorySink()
        _ = try await writeBackup(to: sink, progress: progress)
        return try Backup(sealed: sink.bytes, vault: vault)
    }

    /// Writes a backup file of everything this user owns or can read in the store (see
    /// ``Backup``) to `sink` as it is read, all of it from one state of the store
    /// (``Store/withPinnedReads(_:)``), so that writers beside it never make it start over.
    /// Each zone is verified as `audit` verifies it (its whole log, its key, every record), its
    /// records read and checked a page at a time: memory holds a zone's log and one page of
    /// rows, whatever the store's size. Once every zone is written, each zone's log is checked
    /// to be on the log this user verifies now; only then does the file get its last chunk and
    /// its signature.
    ///
    /// A backup that fails leaves `sink` with part of a file that does not open: write to a
    /// temporary file, and give it its name only once this returns.
    ///
    /// ```swift
    /// let summary = try await session.writeBackup(to: file) { print($0) }
    /// ```
    /// - Throws: `.integrityFailure` naming a zone that fails verification (run `audit`).
    public func writeBackup(to sink: any BackupSink, progress: @Sendable (String) -> Void = { _ in }) async throws -> BackupSummary {
        // The marks are read before the pin is taken: none can be newer than the state it holds.
        do { _ = try vault.marks.all() } catch let error as VaultError {
            throw StoreError(.integrityFailure, "your marks file cannot be read: \(error.message)", underlying: error)
        }
        let created = Date(timeIntervalSince1970: (Date().timeIntervalSince1970 * 1000).rounded(.down) / 1000)
        let file = try BackupFormat.FileWriter(vault: vault, created: created, storeID: store.storeID, to: sink)
        var payload = BackupFormat.PayloadWriter(file.append)
        let (zones, contacts) = try await store.withPinnedReads {
            let owned = try await zoneDirectory.ownedZoneAccess(), shared = try await zoneDirectory.sharedZoneAccess()
            if let refused = (owned.refused + shared.refused).first {
                throw StoreError(.integrityFailure, "zone '\(refused.0.name)' fails verification, so no backup was made: \(refused.1.message); run 'coffer audit'")
            }
            let ids = owned.zones.map(\.id) + shared.zones.map(\.id)
            let source = try BackupSource.driver(of: store, reading: true)
            let pin = PinnedReads.readPin(of: store)
            progress("reading contact cards")
            let cards = try await BackupSource.readCards(from: source, pin: pin)
            try payload.cards(cards)
            try payload.zoneCount(ids.count)
            var zones = [(summary: Backup.ZoneSummary, hash: Digest32)]()
            for (n, id) in ids.enumerated() {
                zones.append(try await backupSource.backUpZone(id, label: "zone \(id.name) (\(n + 1) of \(ids.count))", into: &payload, from: source, pin: pin, progress: progress))
            }
            return (zones, cards.count)
        }
        // Each zone as backed up must be on the log this user verifies now (the state the backup
        // held, or an older one of it): a store that pinned another branch for the backup is
        // caught here. A zone gone since is left as it was backed up.
        for zone in zones {
            let id = zone.summary.zone
            let log: ZoneLog
            do { log = try await read { db in try self.verifiedLogs.zoneLog(db, zone: try self.accessControl.zoneRow(db, id)) } } catch let error as StoreError where error.code == .zoneNotFound {
                continue
            }
            guard log.hash(at: zone.summary.headSeq) == zone.hash else {
                throw StoreError(.integrityFailure, "zone '\(id.name)' as the store showed it for the backup is not on its log as you verify it now: the store was forked; no backup was made; run 'coffer audit'")
            }
        }
        try payload.flush()
        try file.finish()
        return BackupSummary(created: created, zones: zones.map(\.summary), contactCount: contacts, bytes: file.written)
    }

    /// Puts a backup into this session's store, which must be empty: every zone whole, with its
    /// log, keys, share, schema, deleted names and record rows exactly as the backup holds them
    /// (nothing sealed or signed again, so records keep their change tags, creators and dates),
    /// and the contact cards the store lacks. A local store (SQLite or PostgreSQL) also takes
    /// the backup's store id, so that share URLs and change tokens made before name it still.
    /// Through a server, which checks every batch as it checks a push, only the zones this user
    /// owns go back (a zone another user owns is theirs to restore), and the server keeps its
    /// own store id.
    ///
    /// With `resettingMarks`, this user's marks of the zones the backup takes back (see
    /// ``Backup/markChecks(against:)``) are set to the backup's heads once the zones are written;
    /// without it, a restore that would take a zone back is refused before anything is written.
    /// The restored zones are then verified, as `audit` does.
    ///
    /// ```swift
    /// let checks = try backup.markChecks(against: vault.marks)
    /// // show the rolled-back zones and ask before resetting
    /// let result = try await session.restore(backup, resettingMarks: true)
    /// ```
    /// - Throws: `.permissionFailure` for another user's backup; `.alreadyExists` when the store
    ///   is not empty (it has a zone, or one of the backup's); `.invalidArguments` when the backup
    ///   takes zones back and `resettingMarks` is false.
    public func restore(_ backup: Backup, resettingMarks: Bool, progress: @Sendable (String) -> Void = { _ in }) async throws -> RestoreResult {
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
        // Each zone's first entry must be the genesis of that zone, by its owner: a backup whose
        // zone says otherwise is damaged (or was made to lie), and nothing of it is written.
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
        let checks = try backup.markChecks(against: vault.marks).filter { check in zones.contains { $0.id == check.zone } }
        if !resettingMarks, let first = checks.first(where: \.isRollback) {
            throw StoreError(.invalidArguments, "the backup takes zone '\(first.zone.name)' back before what you saw; confirm resetting your marks to restore it")
        }
        let target = try BackupSource.driver(of: store, reading: false)
        // Empty: no zone of this user's, none of the backup's (by name or uid), and locally no
        // zone at all. Or every zone of the backup there as the backup holds it (uid and log
        // head), no other of this user's, and the store's record of this restore: a restore that
        // stopped after its write, gone on with from there.
        let operation = SnapshotOperation(id: backup.restoreID, userID: userID)
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

        var cardWrites = [StorageSnapshot.Write]()
        if written {
            progress("the store has every zone of this backup already, as the backup holds it (a restore that stopped after writing them)")
        } else {
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
        store.logger.info("backup restored", metadata: ["zones": "\(zones.count)", "contacts": "\(cardWrites.count)"])
        let restoredIDs = Set(zones.map(\.id))
        return RestoreResult(restored: backup.summaries.filter { restoredIDs.contains($0.zone) }, skipped: skipped, contacts: cardWrites.count,
                             marksReset: resets.compactMap { mark in zones.first { $0.uid == mark.zoneUID }?.id }, findings: findings,
                             tookStoreID: tookStoreID, foundWritten: written)
    }
}

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
}

extension Session {
    /// Makes a backup of everything this user owns or can read in the store (see ``Backup``),
    /// all of it from one state of the store (``Store/withPinnedReads(_:)``), so that writers
    /// beside it never make it start over: each zone is verified first (as `audit` does: its
    /// whole log, its key and every record), then read whole, and each zone's log checked to end
    /// where it verified.
    ///
    /// ```swift
    /// let backup = try await session.makeBackup { print($0) }
    /// ```
    /// - Throws: `.integrityFailure` naming a zone that fails verification (nothing of a zone that
    ///   fails is backed up: run `audit`).
    public func makeBackup(progress: @Sendable (String) -> Void = { _ in }) async throws -> Backup {
        // The marks are read before the pin is taken: none can be newer than the state it holds.
        do { _ = try vault.marks.all() } catch let error as VaultError {
            throw StoreError(.integrityFailure, "your marks file cannot be read: \(error.message)", underlying: error)
        }
        let backup = try await store.withPinnedReads {
            let owned = try await ownedZoneAccess(), shared = try await sharedZoneAccess()
            if let refused = (owned.refused + shared.refused).first {
                throw StoreError(.integrityFailure, "zone '\(refused.0.name)' fails verification, so no backup was made: \(refused.1.message); run 'coffer audit'")
            }
            let ids = owned.zones.map(\.id) + shared.zones.map(\.id)
            let source = try Self.driver(of: store, reading: true)
            let pin = PinnedReads.readPin(of: store)
            var verified = [(zone: ZoneRow, head: Int64, hash: Digest32)]()
            for (n, id) in ids.enumerated() {
                progress("verifying zone \(id.name) (\(n + 1) of \(ids.count))")
                // The audit walks the log as the pin holds it, whatever this session verified since.
                let (zone, head, report) = try await read { db in
                    let zone = try self.zoneRow(db, id)
                    let report = try self.auditZone(db, id)
                    return (zone, try db.logHead(zoneRowID: zone.rowID), report)
                }
                if let finding = report.findings.first {
                    throw StoreError(.integrityFailure, "zone '\(id.name)' fails verification, so no backup was made: \(finding.message); run 'coffer audit'")
                }
                guard let head else { throw StoreError(.integrityFailure, "zone '\(id.name)' has no log: the store was changed") }
                verified.append((zone, head.seq, head.hash))
            }
            progress("reading \(ids.count == 1 ? "1 zone" : "\(ids.count) zones")")
            guard let zones = try await Self.readZones(verified, from: source, pin: pin) else {
                // Only where the store could not hold one state for the whole backup (a server
                // holding as many pins as it will).
                throw StoreError(.busy, "zones changed while they were read; make the backup again")
            }
            progress("reading contact cards")
            let cards = try await Self.readCards(from: source, pin: pin)
            return Backup(userID: userID, created: Date(), storeID: store.storeID, cards: cards, zones: zones)
        }
        // Each zone as backed up must be on the log this user verifies now (the state the backup
        // held, or an older one of it): a store that pinned another branch for the backup is
        // caught here. A zone gone since is left as it was backed up.
        for zone in backup.zones {
            let log: ZoneLog
            do { log = try await read { db in try self.zoneLog(db, zone: try self.zoneRow(db, zone.id)) } } catch let error as StoreError where error.code == .zoneNotFound {
                continue
            }
            guard let head = zone.log.last, log.hash(at: head.seq) == head.hash else {
                throw StoreError(.integrityFailure, "zone '\(zone.id.name)' as the store showed it for the backup is not on its log as you verify it now: the store was forked; no backup was made; run 'coffer audit'")
            }
        }
        return backup
    }

    /// The zones `verified` lists, read whole: nil when one's log no longer ends at the entry
    /// verified (it changed between its check and the read).
    static func readZones(_ verified: [(zone: ZoneRow, head: Int64, hash: Digest32)], from source: any SnapshotDriver,
                          pin: (any ReadPin)? = nil) async throws -> [ZoneCopy]? {
        var t = StorageSnapshot.Tables<StoredRow>()
        // Four reads a zone, at most 1000 a request to a server: each group from one state.
        for group in stride(from: 0, to: verified.count, by: 250).map({ verified[$0..<min($0 + 250, verified.count)] }) {
            let needs = group.flatMap { item -> [StorageSnapshot.Need] in
                let rowID = item.zone.rowID
                return [.zone(item.zone.id), .log(zoneRowID: rowID, after: 0), .allRows(zoneRowID: rowID), .tombstoneList(zoneRowID: rowID)]
            }
            t.merge(try await fetch(needs, from: source, pin: pin)) { $0 }
        }
        for item in verified {
            guard case .some(.some(let row)) = t.zones[item.zone.id], row.rowID == item.zone.rowID, row.uid == item.zone.uid,
                  let last = t.logs[item.zone.rowID]?.entries.last, last.seq == item.head, last.hash == item.hash else { return nil }
        }
        // The lists of each record entry, which never change once written.
        let listed = verified.flatMap { item in
            (t.logs[item.zone.rowID]?.entries ?? []).filter { ZoneCopy.isListed($0.body) }.map { StorageSnapshot.Need.logEntry(zoneRowID: item.zone.rowID, seq: $0.seq) }
        }
        for start in stride(from: 0, to: listed.count, by: 1_000) {
            t.merge(try await fetch(Array(listed[start..<min(start + 1_000, listed.count)]), from: source, pin: pin)) { $0 }
        }
        return try verified.map { try ZoneCopy(zone: $0.zone, from: t) }
    }

    /// The store's contact cards that verify, as stored.
    static func readCards(from source: any SnapshotDriver, pin: (any ReadPin)? = nil) async throws -> [Backup.Card] {
        guard let columns = try await fetch([.contactColumns], from: source, pin: pin).contactColumns else { return [] }
        let ids = columns.map(\.userID).sorted()
        var cards = [Backup.Card]()
        for start in stride(from: 0, to: ids.count, by: 1_000) {
            let part = Array(ids[start..<min(start + 1_000, ids.count)])
            let t = try await fetch(part.map { .contact($0) }, from: source, pin: pin)
            for id in part {
                guard let stored = t.contacts[id] ?? nil, let card = try? ContactCard.verify(Data(stored.card)), card.identity.userID == id else { continue }
                cards.append(Backup.Card(card: stored.card, added: stored.added))
            }
        }
        return cards
    }

    /// A snapshot driver over `store`'s backend, whichever it is.
    static func driver(of store: Store, reading: Bool) throws -> any SnapshotDriver {
        switch store.backend {
        case .sqlite(let pool): return SQLiteSnapshotDriver(pool: pool, logger: store.logger)
        case .postgres(let storage): return storage
        case .snapshot(let driver): return driver
        }
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
            guard let first = zone.log.first, let genesis = LogEntry.decode(first.body) else {
                throw StoreError(.integrityFailure, "the backup is damaged: zone '\(zone.id.name)' has no readable first log entry; nothing was restored")
            }
            do {
                _ = try ZoneState(genesis: genesis, hash: first.hash, uid: zone.uid, name: zone.id.name, ownerID: zone.id.ownerID)
            } catch let refusal as ZoneState.Refusal {
                throw StoreError(.integrityFailure, "the backup is damaged: zone '\(zone.id.name)' of \(zone.id.ownerID) does not match its log (\(refusal.reason)); nothing was restored")
            }
        }
        let checks = try backup.markChecks(against: vault.marks).filter { check in zones.contains { $0.id == check.zone } }
        if !resettingMarks, let first = checks.first(where: \.isRollback) {
            throw StoreError(.invalidArguments, "the backup takes zone '\(first.zone.name)' back before what you saw; confirm resetting your marks to restore it")
        }
        let target = try Self.driver(of: store, reading: false)
        // Empty: no zone of this user's, none of the backup's (by name or uid), and locally no zone at all.
        var needs: [StorageSnapshot.Need] = [.ownedZones(userID)]
        for zone in zones { needs += [.zone(zone.id), .zoneUID(zone.uid)] }
        let found = try await Self.fetch(needs, from: target)
        if let zone = found.ownedZones[userID]?.first?.zone {
            throw StoreError(.alreadyExists, "the store is not empty: it has your zone '\(zone.id.name)'; restore into an empty store")
        }
        for zone in zones {
            if case .some(.some) = found.zones[zone.id] {
                throw StoreError(.alreadyExists, "the store is not empty: it has zone '\(zone.id.name)' of \(zone.id.ownerID); restore into an empty store")
            }
            if found.uids[zone.uid] == true {
                throw StoreError(.alreadyExists, "the store is not empty: it has a copy of zone '\(zone.id.name)'; restore into an empty store")
            }
        }
        if !throughServer, try await store.hasZones() {
            throw StoreError(.alreadyExists, "the store is not empty: it has zones; restore into an empty store (a new file, or an empty database)")
        }
        var tookStoreID = false
        if !throughServer, backup.storeID != store.storeID {
            try await store.adoptStoreID(backup.storeID)
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

        // The cards the store lacks, then each zone whole.
        let cardUsers = try backup.cards.map { try ContactCard.verify(Data($0.card)).identity.userID }
        var present = StorageSnapshot.Tables<StoredRow>()
        for start in stride(from: 0, to: cardUsers.count, by: 1_000) {
            present.merge(try await Self.fetch(cardUsers[start..<min(start + 1_000, cardUsers.count)].map { .contact($0) }, from: target)) { $0 }
        }
        var cardWrites = [StorageSnapshot.Write]()
        for (card, user) in zip(backup.cards, cardUsers) where (present.contacts[user] ?? nil) == nil {
            cardWrites.append(try Self.contactWrite(card: card.card, added: card.added))
        }
        let rowIDs = try await Self.fetch(zones.map { .newZoneID($0.id) }, from: target).newZoneIDs
        var zoneBatches = [(zone: ZoneCopy, batches: [[StorageSnapshot.Write]])]()
        for zone in zones {
            guard let rowID = rowIDs[zone.id] else { throw StoreError(.internalError, "the store reserved no zone id") }
            zoneBatches.append((zone, try zone.batches(zoneRowID: rowID)))
        }
        /// A write the store refused as a conflict: in a store that was empty, rows of the backup
        /// that contradict each other (or another writer that filled the store meanwhile).
        func refusedWrite(_ zone: ZoneCopy?) -> StoreError {
            StoreError(.integrityFailure, "the backup cannot be restored: "
                + (zone.map { "the rows of zone '\($0.id.name)'" } ?? "its contact cards")
                + " contradict each other or the store (the backup was changed, or another writer filled the store meanwhile); nothing was restored")
        }
        if throughServer {
            // A server takes one checked batch a request.
            for start in stride(from: 0, to: cardWrites.count, by: 500) {
                do { try await target.apply(Array(cardWrites[start..<min(start + 500, cardWrites.count)]), operation: nil) } catch is SnapshotConflict {
                    throw refusedWrite(nil)
                }
            }
            for (zone, batches) in zoneBatches {
                for (i, batch) in batches.enumerated() {
                    progress("zone \(zone.id.name): batch \(i + 1) of \(batches.count)")
                    do { try await target.apply(batch, operation: nil) } catch is SnapshotConflict {
                        throw StoreError(.integrityFailure, "the server refused zone '\(zone.id.name)' of the backup as a conflict: its rows contradict each other or the store (the backup was changed, or another writer was there first)")
                    }
                }
            }
        } else {
            // A local store takes everything in one transaction: a restore killed at any point
            // leaves every zone or none (and then runs again from the start).
            progress("writing \(zones.count == 1 ? "1 zone" : "\(zones.count) zones") in one transaction")
            do { try await target.apply(cardWrites + zoneBatches.flatMap { $0.batches.joined() }, operation: nil) } catch is SnapshotConflict {
                throw refusedWrite(zones.count == 1 ? zones.first : nil)
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
            findings += try await read { db in try self.auditZone(db, zone.id) }.findings
        }
        store.logger.info("backup restored", metadata: ["zones": "\(zones.count)", "contacts": "\(cardWrites.count)"])
        let restoredIDs = Set(zones.map(\.id))
        return RestoreResult(restored: backup.summaries.filter { restoredIDs.contains($0.zone) }, skipped: skipped, contacts: cardWrites.count,
                             marksReset: resets.compactMap { mark in zones.first { $0.uid == mark.zoneUID }?.id }, findings: findings,
                             tookStoreID: tookStoreID)
    }
}

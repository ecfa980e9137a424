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
    /// Makes a backup of everything this user owns or can read in the store (see ``Backup``):
    /// each zone is verified first (as `audit` does: its whole log, its key and every record),
    /// then every zone is read whole from one state of the store (a store on a server: from one
    /// state for each 250 zones), and each zone's log checked to end where it verified.
    ///
    /// ```swift
    /// let backup = try await session.makeBackup { print($0) }
    /// ```
    /// - Throws: `.integrityFailure` naming a zone that fails verification (nothing of a zone that
    ///   fails is backed up: run `audit`); `.busy` when zones kept changing while they were read.
    public func makeBackup(progress: @Sendable (String) -> Void = { _ in }) async throws -> Backup {
        let owned = try await ownedZoneAccess(), shared = try await sharedZoneAccess()
        if let refused = (owned.refused + shared.refused).first {
            throw StoreError(.integrityFailure, "zone '\(refused.0.name)' fails verification, so no backup was made: \(refused.1.message); run 'coffer audit'")
        }
        let ids = owned.zones.map(\.id) + shared.zones.map(\.id)
        let source = try Self.driver(of: store, reading: true)
        for _ in 0..<3 {
            var verified = [(zone: ZoneRow, head: Int64, hash: Digest32)]()
            for id in ids {
                progress("verifying zone \(id.name)")
                let (zone, state, report) = try await read { db in
                    let zone = try self.zoneRow(db, id)
                    return (zone, try self.zoneState(db, zone: zone), try self.auditZone(db, id))
                }
                if let finding = report.findings.first {
                    throw StoreError(.integrityFailure, "zone '\(id.name)' fails verification, so no backup was made: \(finding.message); run 'coffer audit'")
                }
                verified.append((zone, state.headSeq, state.headHash))
            }
            progress("reading \(ids.count == 1 ? "1 zone" : "\(ids.count) zones")")
            guard let zones = try await Self.readZones(verified, from: source) else { continue }
            progress("reading contact cards")
            let cards = try await Self.readCards(from: source)
            return Backup(userID: userID, created: Date(), storeID: store.storeID, cards: cards, zones: zones)
        }
        throw StoreError(.busy, "zones kept changing while they were read; make the backup again")
    }

    /// The zones `verified` lists, read whole: nil when one's log no longer ends at the entry
    /// verified (it changed between its check and the read).
    static func readZones(_ verified: [(zone: ZoneRow, head: Int64, hash: Digest32)], from source: any SnapshotDriver) async throws -> [ZoneCopy]? {
        var t = StorageSnapshot.Tables<StoredRow>()
        // Four reads a zone, at most 1000 a request to a server: each group from one state.
        for group in stride(from: 0, to: verified.count, by: 250).map({ verified[$0..<min($0 + 250, verified.count)] }) {
            let needs = group.flatMap { item -> [StorageSnapshot.Need] in
                let rowID = item.zone.rowID
                return [.zone(item.zone.id), .log(zoneRowID: rowID, after: 0), .allRows(zoneRowID: rowID), .tombstoneList(zoneRowID: rowID)]
            }
            t.merge(try await fetch(needs, from: source)) { $0 }
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
            t.merge(try await fetch(Array(listed[start..<min(start + 1_000, listed.count)]), from: source)) { $0 }
        }
        return try verified.map { try ZoneCopy(zone: $0.zone, from: t) }
    }

    /// The store's contact cards that verify, as stored.
    static func readCards(from source: any SnapshotDriver) async throws -> [Backup.Card] {
        guard let columns = try await fetch([.contactColumns], from: source).contactColumns else { return [] }
        let ids = columns.map(\.userID).sorted()
        var cards = [Backup.Card]()
        for start in stride(from: 0, to: ids.count, by: 1_000) {
            let part = Array(ids[start..<min(start + 1_000, ids.count)])
            let t = try await fetch(part.map { .contact($0) }, from: source)
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
        for start in stride(from: 0, to: cardWrites.count, by: 500) {
            try await target.apply(Array(cardWrites[start..<min(start + 500, cardWrites.count)]), operation: nil)
        }
        let rowIDs = try await Self.fetch(zones.map { .newZoneID($0.id) }, from: target).newZoneIDs
        for zone in zones {
            guard let rowID = rowIDs[zone.id] else { throw StoreError(.internalError, "the store reserved no zone id") }
            let batches = try zone.batches(zoneRowID: rowID)
            for (i, batch) in batches.enumerated() {
                progress("zone \(zone.id.name): batch \(i + 1) of \(batches.count)")
                try await target.apply(batch, operation: nil)
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

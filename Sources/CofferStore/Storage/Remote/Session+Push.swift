import CofferVault
import Foundation

/// What ``Session/pushZone(_:to:progress:)`` copied.
public struct PushResult: Sendable {
    /// Log entries copied, the genesis included.
    public let entries: Int
    /// Record rows copied.
    public let records: Int
}

extension Session {
    /// Copies a zone this user owns, whole, from this store onto `target` (a Coffer server, or
    /// another local store): its row, its signed log with every entry's record lists, its
    /// wrapped and chained keys, its public link, member lookups and schema, its record rows as
    /// stored, and the cards of everyone who signed its log. Nothing is sealed or signed again:
    /// record envelopes bind the zone, not the store, so every signature and ciphertext stays
    /// valid, and this user's marks for the zone hold on the copy. The zone stays here too.
    ///
    /// The zone is verified here first (its log, and every record row against it), then written
    /// whole or not at all (see `applyWhole(_:to:progress:)`): the zone with its log, keys
    /// and schema, then its rows, 400 a batch.
    /// - Throws: `.permissionFailure` for a zone this user does not own; `.alreadyExists` when
    ///   `target` has a zone of that name of this user's; `.integrityFailure` when the zone here
    ///   fails verification; `.notSupported` when this store is a server's.
    public func pushZone(_ zoneID: ZoneID, to target: Store, progress: @Sendable (_ done: Int, _ total: Int) -> Void = { _, _ in })
        async throws -> PushResult {
        let destination = try ZonePush.driver(of: target, for: "pushing a zone onto it")
        let reserved = try await ZonePush.fetch([.zone(zoneID), .newZoneID(zoneID)], from: destination)
        if case .some(.some) = reserved.zones[zoneID] {
            throw StoreError(.alreadyExists, "the target store already has your zone '\(zoneID.name)'")
        }
        guard let newRowID = reserved.newZoneIDs[zoneID] else { throw StoreError(.internalError, "the target store reserved no zone id") }
        // Verified here first: nothing that fails verification is copied.
        let (zone, state) = try await read { db in
            let zone = try self.accessControl.zoneRow(db, zoneID)
            _ = try self.accessControl.requireOwner(db, zone: zone, to: "push it")
            return (zone, try self.verifiedLogs.zoneState(db, zone: zone))
        }
        let report = try await store.withPinnedReads { try await auditor.auditZone(zoneID) }
        if let finding = report.findings.first {
            throw StoreError(.integrityFailure, "zone '\(zoneID.name)' does not verify here, so it is not pushed: \(finding.message)")
        }
        let source = try ZonePush.driver(of: store, for: "pushing a zone from it")
        let rowID = zone.rowID
        // Everything of the zone, read from one state of this store.
        var t = try await ZonePush.fetch([.zone(zoneID), .log(zoneRowID: rowID, after: 0), .allRows(zoneRowID: rowID), .tombstoneList(zoneRowID: rowID)],
                                     from: source)
        guard let log = t.logs[rowID]?.entries, log.last?.seq == state.headSeq else {
            throw StoreError(.busy, "zone '\(zoneID.name)' changed while it was read; push it again")
        }
        let listed = log.filter { ZoneCopy.isListed($0.body) }
        t.merge(try await ZonePush.fetch(listed.map { .logEntry(zoneRowID: rowID, seq: $0.seq) }, from: source)) { $0 }
        let authors = Set(log.compactMap { LogEntry.decode($0.body)?.authorID }).union([userID])
        t.merge(try await ZonePush.fetch(authors.sorted().map { .contact($0) }, from: source)) { $0 }

        // The cards, then the zone whole (see ``ZoneCopy``).
        let copy = try ZoneCopy(zone: zone, from: t)
        let head = try authors.sorted().map { user -> StorageSnapshot.Write in
            guard let stored = t.contacts[user] ?? nil else { throw StoreError(.integrityFailure, "the card of \(user), who signed zone '\(zoneID.name)', is missing") }
            return try ZonePush.contactWrite(card: stored.card, added: stored.added)
        }
        let batches = try copy.batches(zoneRowID: newRowID, head: head)
        try await ZonePush.applyWhole(batches, to: destination) { done, total, _ in progress(done, total) }
        store.logger.info("zone pushed", metadata: ["zone": "\(zoneID.name)", "entries": "\(log.count)", "records": "\(copy.rows.count)"])
        return PushResult(entries: log.count, records: copy.rows.count)
    }


    /// Moves a zone this user owns from this local store onto a server: ``pushZone(_:to:progress:)``
    /// copies it; the copy is then read back through the server (its log, verified, reaches this
    /// store's head, and each of its records checks out against it, as ``audit(plaintexts:progress:)``
    /// checks them); then the zone is dropped here, signing nothing (the user's marks hold on the
    /// copy), its pages zeroed (`secure_delete`), and a "moved" mark naming `origin` stays in this
    /// store: making a zone of that name here again is refused, so that one zone is never written
    /// in two places (two copies of one log would fork it).
    /// - Throws: as ``pushZone(_:to:progress:)``; `.integrityFailure` when the server does not
    ///   show the copy whole (the zone then stays here); `.notSupported` for a store that is not an
    ///   SQLite file.
    /// A test's hook: runs once ``moveZone(_:to:origin:progress:)`` copied the zone, before it
    /// checks the copy (a server that loses what it accepted).
    @TaskLocal static var afterZoneCopied: (@Sendable () async throws -> Void)?

    public func moveZone(_ zoneID: ZoneID, to target: Store, origin: String,
                         progress: @Sendable (_ done: Int, _ total: Int) -> Void = { _, _ in }) async throws -> PushResult {
        guard case .sqlite(let sqlite) = store.backend else { throw StoreError(.notSupported, "only a zone of a local SQLite store is moved") }
        let result = try await pushZone(zoneID, to: target, progress: progress)
        try await Self.afterZoneCopied?()
        let (rowID, head) = try await read { db in
            let zone = try self.accessControl.zoneRow(db, zoneID)
            return (zone.rowID, try self.verifiedLogs.zoneState(db, zone: zone).headSeq)
        }
        let remote = try await target.openSession(vault: vault, advancesMarks: false)
        let there = try await remote.privateDatabase.zones().first { $0.id == zoneID }
        guard there?.sequence == head else {
            throw StoreError(.integrityFailure, "the server does not show the copy of zone '\(zoneID.name)' at its head (\(head)); the zone stays here: push it again")
        }
        // And every record of the copy, read back through the server and checked against its
        // log as an audit checks it: a server that shows the log and lost or changed a record
        // would otherwise be left with the only copy.
        let audit = try await remote.auditor.auditZone(zoneID)
        guard audit.findings.isEmpty, audit.records == result.records else {
            let why = audit.findings.first.map { Names.printable($0.message) } ?? "it shows \(audit.records) of the \(result.records) records copied"
            throw StoreError(.integrityFailure, "the server's copy of zone '\(zoneID.name)' does not check out (\(why)); the zone stays here: delete the copy on the server and push again")
        }
        try await store.noteMoved(zoneID, to: origin)
        try await SQLiteSnapshotDriver(storage: sqlite, logger: store.logger).apply([.deleteZone(rowID: rowID)], operation: nil)
        verifiedLogs.forget(zoneRowID: rowID)
        keyRing.forget(zoneRowID: rowID)
        store.truncateWriteAheadLog()
        store.logger.info("zone moved", metadata: ["zone": "\(zoneID.name)", "to": "\(origin)"])
        return result
    }
}

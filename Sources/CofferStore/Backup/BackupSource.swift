import CofferCrypto
import CofferVault
import Foundation

/// Reads what a backup holds from a store: each zone whole (its log, rows and tombstones, from one
/// state of the store) and the cards of the users who signed them.
struct BackupSource: Sendable {
    /// The session's reads (of one state of the store, when pinned).
    let verifiedLogs: VerifiedLogs
    /// Verifies each zone as `audit` does before it is written.
    let auditor: Auditor
}

extension BackupSource {
    /// One zone into a backup's payload: verified as `audit` verifies it, then its log, keys,
    /// share, schema and deleted names, then its rows a page at a time, each checked before it is
    /// written.
    func backUpZone(_ id: ZoneID, label: String, into payload: inout BackupFormat.PayloadWriter, from source: any SnapshotDriver,
                            pin: (any ReadPin)?, progress: @Sendable (String) -> Void) async throws -> (summary: Backup.ZoneSummary, hash: Digest32) {
        func refused(_ finding: AuditFinding) -> StoreError {
            StoreError(.integrityFailure, "zone '\(id.name)' fails verification, so no backup was made: \(finding.message); run 'coffer audit'")
        }
        progress("verifying \(label)")
        // The audit walks the log as the pin holds it, whatever this session verified since.
        var audit = try await verifiedLogs.read { db in try self.auditor.beginZoneAudit(db, id) }
        if let finding = audit.report.findings.first { throw refused(finding) }
        guard let log = audit.log, let head = audit.head else { throw StoreError(.integrityFailure, "zone '\(id.name)' has no log: the store was changed") }
        let zone = audit.zone
        let copy = try await Self.zoneWithoutRows(zone, head: head, from: source, pin: pin)
        try payload.zoneHead(copy)
        var records = 0
        try await auditor.auditRows(&audit, log: log) { findings, rows in
            if let finding = findings.first { throw refused(finding) }
            for row in rows { try payload.row(row) }
            records += rows.count
            progress("verifying \(label): \(records) records")
        }
        try payload.endRows()
        if let finding = audit.finish().findings.first { throw refused(finding) }
        return (Backup.ZoneSummary(zone: id, headSeq: head.seq, entries: copy.log.count, records: records), head.hash)
    }

    /// `zone` as the store holds it, but for its rows: its log (which must end at `head`, the
    /// entry verified), with each record entry's lists, keys, share, schema and deleted names.
    static func zoneWithoutRows(_ zone: ZoneRow, head: (seq: Int64, hash: Digest32), from source: any SnapshotDriver,
                                pin: (any ReadPin)?) async throws -> ZoneCopy {
        let rowID = zone.rowID
        var t = try await ZonePush.fetch([.zone(zone.id), .log(zoneRowID: rowID, after: 0), .tombstoneList(zoneRowID: rowID)], from: source, pin: pin)
        guard case .some(.some(let row)) = t.zones[zone.id], row.rowID == rowID, row.uid == zone.uid,
              let last = t.logs[rowID]?.entries.last, last.seq == head.seq, last.hash == head.hash else {
            // Only where the store could not hold one state for the whole backup.
            throw StoreError(.busy, "zone '\(zone.id.name)' changed while it was read; make the backup again")
        }
        // The lists of each record entry, which never change once written.
        let listed = (t.logs[rowID]?.entries ?? []).filter { ZoneCopy.isListed($0.body) }.map { StorageSnapshot.Need.logEntry(zoneRowID: rowID, seq: $0.seq) }
        for start in stride(from: 0, to: listed.count, by: 1_000) {
            t.merge(try await ZonePush.fetch(Array(listed[start..<min(start + 1_000, listed.count)]), from: source, pin: pin)) { $0 }
        }
        return try ZoneCopy(zone: zone, from: t)
    }

    /// The store's contact cards that verify, as stored.
    static func readCards(from source: any SnapshotDriver, pin: (any ReadPin)? = nil) async throws -> [Backup.Card] {
        guard let columns = try await ZonePush.fetch([.contactColumns], from: source, pin: pin).contactColumns else { return [] }
        let ids = columns.map(\.userID).sorted()
        var cards = [Backup.Card]()
        for start in stride(from: 0, to: ids.count, by: 1_000) {
            let part = Array(ids[start..<min(start + 1_000, ids.count)])
            let t = try await ZonePush.fetch(part.map { .contact($0) }, from: source, pin: pin)
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
        case .sqlite(let sqlite): return SQLiteSnapshotDriver(storage: sqlite, logger: store.logger)
        case .postgres(let storage): return storage
        case .snapshot(let driver): return driver
        }
    }
}

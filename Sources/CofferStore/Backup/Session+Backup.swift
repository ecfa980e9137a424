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
    /// (`Store.withPinnedReads(_:)`), so that writers beside it never make it start over.
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
        try await backupRestore.restore(backup, resettingMarks: resettingMarks, progress: progress)

    }
}

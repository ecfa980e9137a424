import CofferCrypto
import Foundation

/// Checks a user's view of a store for `coffer audit`: every zone's log from its genesis, its
/// rows against their commits, the contacts' cards, and the session's caches against the store.
struct Auditor: Sendable {
    /// The store audited, and its cards.
    let store: Store
    /// The zone keys, checked without their cache.
    let keyRing: KeyRing
    /// The zones' logs, walked from their genesis.
    let verifiedLogs: VerifiedLogs
    /// Who may read a zone.
    let accessControl: AccessControl
    /// Decodes each row against its commit.
    let reader: RecordReader
}

extension Auditor {
    /// Contacts whose stored card does not verify (or is dated in the future), or whose row's
    /// other columns say something else than the card (reads use only the card).
    func auditContacts(_ db: any StorageTransaction) throws -> [AuditFinding] {
        var findings = [AuditFinding]()
        let rows = try db.contactColumns()
        try db.prefetchContacts(userIDs: rows.map(\.userID))
        for row in rows {
            let id = row.userID
            func finding(_ message: String) { findings.append(AuditFinding(kind: .contact, zone: nil, subject: id, message: message)) }
            let contact: Contact
            do {
                guard let verified = try store.verifiedContact(db, userID: id) else { continue }
                contact = verified
            } catch let error as StoreError {
                finding(error.message)
                continue
            }
            let identity = contact.identity
            if row.name != identity.name || row.email != identity.email || row.cardCreated != contact.cardCreated
                || row.signingKey != identity.signingKey.rawRepresentation || row.boxKey != identity.boxKey.rawRepresentation {
                finding("the stored contact \(id) has columns that disagree with its signed card (the card is what counts): the store was changed")
            }
        }
        return findings
    }

    /// The zone row's columns and the member lookup against the verified log.
    func auditCaches(_ db: any StorageTransaction, zone: ZoneRow, state: ZoneState, finding: (AuditFinding.Kind, String, String) -> Void) throws {
        let zoneID = zone.id
        let cached = try db.zoneCaches(zoneRowID: zone.rowID)
        if cached.sequence != state.headSeq {
            finding(.cache, "zone", "zone '\(zoneID.name)' says its log ends at entry \(cached.sequence), but the log ends at \(state.headSeq)")
        }
        if let epoch = cached.epoch, epoch != state.epoch {
            finding(.cache, "zone", "zone '\(zoneID.name)' says its key epoch is \(epoch), but its log says \(state.epoch)")
        }
        if cached.shareUID != state.share?.shareUID {
            finding(.cache, "zone", "zone '\(zoneID.name)' names another share than its log")
        }
        let listed = try db.zoneMemberIDs(zoneRowID: zone.rowID)
        let members = Set(state.share?.participants.keys.map { $0 } ?? []).union(state.linkJoiners.keys)
        if listed != members {
            finding(.cache, "members", "zone '\(zoneID.name)' lists other members (\(listed.subtracting(members).union(members.subtracting(listed)).sorted().joined(separator: ", "))) than its log")
        }
    }

    /// One zone's whole audit (see ``audit(plaintexts:progress:)``): its log in one read, then
    /// its rows a page at a time (run it with the store's reads pinned, ``Store/withPinnedReads(_:)``).
    /// `progress` is told how many records were checked after each page that more follow.
    func auditZone(_ zoneID: ZoneID, progress: (Int) -> Void = { _ in }) async throws -> AuditReport {
        var audit = try await verifiedLogs.read { db in try self.beginZoneAudit(db, zoneID) }
        guard let log = audit.log else { return audit.report }
        var records = 0
        try await auditRows(&audit, log: log) { _, rows in
            records += rows.count
            if rows.count == Session.auditPage { progress(records) }
        }
        return audit.finish()
    }

    /// Checks the rows of the zone `audit` began (``beginZoneAudit(_:_:)``), a page at a time in
    /// name order, each page in a read of its own (so run it with the store's reads pinned,
    /// ``Store/withPinnedReads(_:)``), and hands each page to `checked` once it went through the
    /// audit, with the zone's findings so far. Memory holds one page of rows.
    func auditRows(_ audit: inout ZoneAudit, log: ZoneLog,
                   checked: (_ findings: [AuditFinding], _ rows: [ZoneCopy.Row]) throws -> Void = { _, _ in }) async throws {
        let zone = audit.zone, id = zone.id, expected = audit.head
        var after = ""
        while true {
            let start = after
            let page: [(row: ZoneCopy.Row, failure: String?)] = try await verifiedLogs.read { db in
                // The zone's row, its log's head and the page in one round of reads (on backends
                // that fetch what a read needs), then what opening every row needs in another.
                var pending: (any StorageMiss)?
                func gathering<T>(_ body: () throws -> T) throws -> T? {
                    do { return try body() } catch let miss as any StorageMiss {
                        pending = pending ?? miss
                        return nil
                    }
                }
                let current = try gathering { try self.accessControl.zoneRow(db, id) }
                let head = try gathering { try db.logHead(zoneRowID: zone.rowID) }
                var rows = [StoredRow]()
                _ = try gathering { try db.readRecordRows(zoneRowID: zone.rowID, after: start, limit: Session.auditPage) { rows.append($0) } }
                if let pending { throw pending }
                // Every page from the state the log was read in (a store that could not hold it,
                // such as a server past its pins, fails here rather than mixing two states).
                guard let current, current.rowID == zone.rowID, current.uid == zone.uid, let head, head?.seq == expected?.seq, head?.hash == expected?.hash else {
                    throw StoreError(.busy, "zone '\(id.name)' changed while it was read; try again")
                }
                return try db.eachGathering(rows) { row in
                    (ZoneCopy.Row(stored: row), try Self.failure { _ = try self.reader.decodeOne(db, zone: current, row: row, log: log) })
                }
            }
            for (row, failure) in page { audit.check(name: row.stamp.name, seq: row.stamp.seq, failure: failure) }
            try checked(audit.report.findings, page.map(\.row))
            guard page.count == Session.auditPage, let last = page.last else { return }
            after = last.row.stamp.name
        }
    }

    /// What is wrong with a row, as `body` (which opens it) throws it; nil for a row that opens.
    /// A read the backend has yet to make is rethrown (the read runs again once it is made).
    static func failure(of body: () throws -> Void) throws -> String? {
        do { try body() } catch let miss as StorageMiss { throw miss } catch { return "\(error)" }
        return nil
    }

    /// The first part of a zone's audit: its whole log, the caches that repeat it, its key, and
    /// from its record entries each name's latest version. Its rows then go through
    /// ``ZoneAudit/check(name:seq:failure:)`` (in one read or page by page), then
    /// ``ZoneAudit/finish()``.
    func beginZoneAudit(_ db: any StorageTransaction, _ zoneID: ZoneID) throws -> ZoneAudit {
        let zone = try accessControl.zoneRow(db, zoneID)
        var audit = ZoneAudit(zone: zone)
        audit.head = try db.logHead(zoneRowID: zone.rowID)
        audit.report.zones += 1
        func finding(_ kind: AuditFinding.Kind, _ subject: String, _ message: String) { audit.finding(kind, subject, message) }
        // The whole log again, every signature checked, whatever the marks say.
        let log: ZoneLog
        do {
            log = try verifiedLogs.walkLog(db, zone: zone, signaturesAfter: 0)
        } catch let error as StoreError {
            finding(.log, "log", error.message)
            return audit
        }
        var whole = true
        if let tail = log.refusedTail {
            finding(.log, "log", tail.error.message)
            whole = false
        }
        do { _ = try verifiedLogs.extendsMark(db, log, zone: zone) } catch let error as StoreError {
            finding(.log, "log", error.message)
            whole = false
        }
        let state = log.state
        if let deleted = state.deletionSeq {
            finding(.log, "entry \(deleted)", "zone '\(zoneID.name)' was deleted by its owner (entry \(deleted)), yet the store still holds it")
        }
        if state.share != nil { audit.report.shares += 1 }
        // Caches that repeat the log (they run ahead of a log whose tail is refused).
        if whole { try auditCaches(db, zone: zone, state: state, finding: finding) }
        do { try keyRing.checkZoneKey(db, zone: zone, state: state) } catch let error as StoreError {
            finding(.key, "key", error.message)
        }
        // Each name's latest entry in the signed log.
        let storedHashes = try db.storedLogHashes(zoneRowID: zone.rowID)
        for stored in try db.logEntries(zoneRowID: zone.rowID, after: 0) {
            if let tail = log.refusedTail, stored.seq >= tail.seq { break } // reported above, with the entries after it
            if storedHashes[stored.seq] != stored.hash.bytes {
                finding(.cache, "entry \(stored.seq)", "entry \(stored.seq) of zone '\(zoneID.name)' has a stored hash that is not its own")
            }
            guard let entry = LogEntry.decode(stored.body) else { continue }
            switch entry.kind {
            case .genesis, .membership, .deletion: audit.report.memberships += 1
            case .acceptance: audit.report.acceptances += 1
            case .commit, .rewrite: audit.report.commits += 1
            }
        }
        var latest = [String: LatestVersion]()
        try verifiedLogs.latestVersions(db, zone: zone, log: log, after: 0, cached: false, into: &latest) { seq, error in
            finding(.commit, "entry \(seq)", error.message)
        }
        audit.log = log
        audit.latest = latest
        audit.compacted = try db.compactedSeq(zoneRowID: zone.rowID)
        audit.tombstones = try db.tombstoneSeqs(zoneRowID: zone.rowID)
        return audit
    }
}

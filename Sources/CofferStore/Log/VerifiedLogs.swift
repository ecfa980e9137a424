import CofferCrypto
import CofferVault
import Foundation

/// A session's verified zone logs: each zone's log is verified from its genesis (or from the
/// entry it was verified up to before) against the user's marks, kept in the session's cache,
/// and extended by the entries this user signs. Access, reads and writes all start from here.
struct VerifiedLogs: Sendable {
    /// The store the logs are read from, with its verified cards (the authors' keys).
    let store: Store
    /// The acting user's vault: their id, the key they sign entries with, their marks.
    let vault: Vault
    /// Zone row id → the zone's log as verified so far (``Session/logs``).
    let logs: Locked<[Int64: ZoneLog]>
    /// Zone row id → entry seq → a verified record entry (``Session/commits``).
    let commits: Locked<[Int64: [Int64: VerifiedCommit]]>
    /// What a write leaves for after its transaction commits (``Session/commitHooks``).
    let commitHooks: CommitHooks
    /// When ``advanceMark(_:flush:)`` last wrote the marks file (``Session/lastMarkSave``).
    let lastMarkSave: Locked<Double>
    /// Whether verifying advances the user's marks (``Session/advancesMarks``).
    let advancesMarks: Bool
    /// The zones' schemas, for checking a zone of the store's earlier format (``LegacyZone``).
    let schemaRegistry: SchemaRegistry

    /// The acting user's id.
    var userID: String { vault.identity.userID }
}

extension VerifiedLogs {
    // MARK: - Reading the log

    /// The zone's log, verified up to the store's head (reading and verifying what is new).
    /// - Throws: `.integrityFailure` naming the zone when the log fails verification, does not
    ///   extend what this user saw before (rolled back, cut or forked), or its genesis disagrees
    ///   with the zone's row, or (to its owner) a zone of the earlier store format whose upgrade
    ///   was refused; `.permissionFailure` for a zone of the earlier store format whose owner
    ///   has not opened it since.
    func zoneLog(_ db: any StorageTransaction, zone: ZoneRow) throws -> ZoneLog {
        guard let head = try db.logHead(zoneRowID: zone.rowID) else {
            // A zone this user verified before has a log: without one, its log was taken away,
            // whatever its row says of its format.
            if let mark = try storedMark(zone) { throw mark.isDeletion ? deletedBefore(zone) : rolledBack(zone, storeHead: 0, seen: mark.seq) }
            if zone.logFormat == 0, zone.id.ownerID == userID, let tables = LegacyTables.of(db) {
                // Its upgrade, when this session began, was refused: say why. (Only SQLite
                // stores hold zones of the earlier format.)
                _ = try LegacyZone(db: db, tables: tables, zone: zone, store: store, vault: vault, schemaRegistry: schemaRegistry).verify()
                throw StoreError(.integrityFailure, "zone '\(zone.id.name)' is still in the store's earlier format: a new session upgrades it")
            }
            if zone.logFormat == 0 {
                throw StoreError(.permissionFailure, "\(describeZone(zone)) is in the store's earlier format; its owner upgrades it by opening the store once (any coffer command)")
            }
            throw StoreError(.integrityFailure, "zone '\(zone.id.name)' has no log: the store was changed")
        }
        if var known = logs.withLock({ $0[zone.rowID] }), known.state.zoneUID == zone.uid {
            if head.seq == known.state.headSeq {
                guard head.hash == known.state.headHash else { throw forked(zone, at: head.seq) }
                guard try extendsMark(db, known, zone: zone) else { return try loadLog(db, zone: zone) }
                return known
            }
            if head.seq < known.state.headSeq {
                // A read that began before another of this session's operations advanced the log
                // sees an older head of the same chain: not a rollback.
                if Session.isLaggingRead(db, zone: zone), known.hash(at: head.seq) == head.hash { return known }
                throw rolledBack(zone, storeHead: head.seq, seen: known.state.headSeq)
            }
            try extend(db, &known, zone: zone, entries: try db.logEntries(zoneRowID: zone.rowID, after: known.state.headSeq),
                       signaturesAfter: 0)
            guard try extendsMark(db, known, zone: zone) else { return try loadLog(db, zone: zone) }
            remember(known, zoneRowID: zone.rowID)
            return known
        }
        return try loadLog(db, zone: zone)
    }

    /// The zone's verified state at the store's head.
    func zoneState(_ db: any StorageTransaction, zone: ZoneRow) throws -> ZoneState {
        try zoneLog(db, zone: zone).state
    }

    /// Reads a zone's whole log for the first time in this session.
    private func loadLog(_ db: any StorageTransaction, zone: ZoneRow) throws -> ZoneLog {
        let mark = try storedMark(zone)
        if let mark, mark.ownerID != zone.id.ownerID {
            throw StoreError(.integrityFailure, "zone '\(zone.id.name)' is owned by \(describeUser(zone.id.ownerID)) in this store, but you saw it owned by \(describeUser(mark.ownerID)): the store was changed")
        }
        let log = try walkLog(db, zone: zone, signaturesAfter: mark?.seq ?? 0)
        guard try extendsMark(db, log, zone: zone, mark: mark) else { return log }
        remember(log, zoneRowID: zone.rowID)
        return log
    }

    /// Reads and verifies a zone's whole log from its genesis: every chain link and every entry's
    /// rules, and the signatures of the entries after `signaturesAfter` (0: all of them).
    func walkLog(_ db: any StorageTransaction, zone: ZoneRow, signaturesAfter: Int64) throws -> ZoneLog {
        let entries = try db.logEntries(zoneRowID: zone.rowID, after: 0)
        guard let first = entries.first else { throw StoreError(.integrityFailure, "zone '\(zone.id.name)' has no log: the store was changed") }
        var log: ZoneLog
        do {
            log = ZoneLog(state: try verifier(db, zone: zone).genesis(first))
        } catch let refusal as ZoneState.Refusal {
            throw refused(zone, refusal)
        }
        try extend(db, &log, zone: zone, entries: entries.dropFirst(), signaturesAfter: signaturesAfter)
        return log
    }

    /// Verifies and applies stored entries in order; the first that fails, and every one after
    /// it, is left out as the log's refused tail.
    private func extend(_ db: any StorageTransaction, _ log: inout ZoneLog, zone: ZoneRow, entries: some Sequence<StoredLogEntry>,
                        signaturesAfter: Int64) throws {
        log.refusedTail = nil
        let verifier = verifier(db, zone: zone)
        for stored in entries {
            do {
                try verify(stored, zone: zone, into: &log, verifier: verifier, checkSignature: stored.seq > signaturesAfter)
            } catch let error as StoreError where error.code == .integrityFailure {
                log.refusedTail = (stored.seq, error)
                store.logger.warning("log entry refused", metadata: ["zone": "\(zone.id.name)", "entry": "\(stored.seq)"])
                return
            }
        }
    }

    /// Whether `log` extends this user's mark for the zone (the entry at the mark's sequence has
    /// the mark's hash). False only for a read that began before another session of this process
    /// advanced the mark past what the read sees (the caller then does not keep the log).
    /// - Throws: `.integrityFailure` when the log is behind the mark (rolled back, cut) or
    ///   disagrees with it (forked).
    func extendsMark(_ db: any StorageTransaction, _ log: ZoneLog, zone: ZoneRow, mark given: ZoneMark?? = nil) throws -> Bool {
        guard let mark = try given ?? storedMark(zone) else { return true }
        if mark.isDeletion { throw deletedBefore(zone) }
        if log.state.headSeq < mark.seq {
            if Session.isLaggingRead(db, zone: zone) { return false }
            throw rolledBack(zone, storeHead: log.state.headSeq, seen: mark.seq)
        }
        guard log.hash(at: mark.seq)?.bytes == mark.hash else { throw forked(zone, at: mark.seq) }
        return true
    }

    /// Checks one stored entry (its chain link, its author's signature unless the mark covers
    /// it, what it may change) and applies it.
    private func verify(_ stored: StoredLogEntry, zone: ZoneRow, into log: inout ZoneLog, verifier: ZoneLogVerifier, checkSignature check: Bool) throws {
        do { try log.append(stored, verifier: verifier, signed: check) } catch let refusal as ZoneState.Refusal {
            throw refused(zone, refusal)
        }
    }

    /// The zone's log verifier, its authors' keys from the store's verified cards.
    func verifier(_ db: any StorageTransaction, zone: ZoneRow) -> ZoneLogVerifier {
        ZoneLogVerifier(uid: zone.uid, zone: zone.id, describe: { [self] in describeUser($0) }) { [self] author in
            do { return try store.signingKey(db, of: author) } catch let error as StoreError where error.code == .unknownItem { return nil }
        }
    }

    /// Keeps a verified log for this session and advances the user's mark to its head (in
    /// memory: see ``advanceMark(_:flush:)``).
    func remember(_ log: ZoneLog, zoneRowID: Int64) {
        logs.withLock { logs in
            // Two reads may verify at once: keep the further one.
            if let known = logs[zoneRowID], known.state.zoneUID == log.state.zoneUID, known.state.headSeq > log.state.headSeq { return }
            logs[zoneRowID] = log
        }
        Session.noteAdvance([log.state.zoneUID])
        advanceMark(log.mark, flush: false)
    }

    /// Advances this user's mark for a zone (in memory). With `flush` (after a write commits),
    /// also writes the marks file when it was last written more than two seconds ago: a
    /// long-running session keeps its marks current without a file write per operation. A read
    /// never writes the file (its lock, `fsync` and retries stay off the read path); what reads
    /// advanced is written at the next commit, ``Session/saveMarks()`` or the session's end.
    func advanceMark(_ mark: ZoneMark, flush: Bool) {
        guard advancesMarks else { return }
        vault.marks.advance(to: mark, in: store.storeID)
        guard flush else { return }
        let now = Date().timeIntervalSince1970
        let due = lastMarkSave.withLock { last in
            guard now - last >= 2 else { return false }
            last = now
            return true
        }
        if due { try? Session.saveMarks(of: vault) }
    }

    /// Forgets the verified log and commits of a zone (after it is deleted).
    func forget(zoneRowID: Int64) {
        forgetCommits(zoneRowID: zoneRowID)
        logs.withLock { _ = $0.removeValue(forKey: zoneRowID) }
    }

    /// This user's high-water mark for a zone, from the marks file.
    func storedMark(_ zone: ZoneRow) throws -> ZoneMark? {
        do { return try vault.marks.mark(forZone: zone.uid) } catch let error as VaultError {
            throw StoreError(.integrityFailure, "your marks file cannot be read: \(error.message)", underlying: error)
        }
    }

    // MARK: - Writing the log

    /// Signs and stores the next entry of a zone (in the caller's write transaction), applies it
    /// to `log`, and keeps the result for the session once the transaction commits.
    @discardableResult
    func appendEntry(_ db: any StorageTransaction, zone: ZoneRow, log: inout ZoneLog, kind: LogEntry.Kind, payload: [UInt8],
                     time: Double, entries: [UInt8]? = nil, names: [UInt8]? = nil, confirming confirmed: [[UInt8]] = []) throws -> LogEntry {
        if let tail = log.refusedTail {
            // Nothing is signed on top of entries this user cannot verify, and none is deleted:
            // the entry may be genuine and only unverifiable here (a card missing, say).
            throw StoreError(.integrityFailure, "nothing can be written to zone '\(zone.id.name)' while its log holds entries that do not verify: \(tail.error.message)")
        }
        var entry = LogEntry(zoneUID: zone.uid, seq: log.state.headSeq + 1, prev: log.state.headHash, kind: kind, authorID: userID,
                             time: time, payload: payload)
        entry.confirmed = confirmed
        let body = entry.body
        let signature = vault.signingKey.signature(for: body)
        let hash = LogEntry.hash(body: body, signature: signature)
        // Verified first, as a reader will verify it: the session refuses to store what a reader
        // would refuse. (Its signature is the session's own, just made.)
        let stored = StoredLogEntry(seq: entry.seq, body: body, signature: signature, entries: nil, names: nil)
        do { try log.append(stored, verifier: verifier(db, zone: zone), signed: false) } catch let refusal as ZoneState.Refusal {
            throw StoreError(.permissionFailure, "zone '\(zone.id.name)': \(refusal.reason)")
        }
        try db.appendLogEntry(zoneRowID: zone.rowID, entry: entry, body: body, signature: signature, hash: hash, entries: entries, names: names)
        keepOnCommit(db, log, zoneRowID: zone.rowID)
        return entry
    }

    /// Keeps `log` for the session, and advances the user's mark to its head, once the caller's
    /// write transaction commits (a rolled-back write leaves both as they were).
    func keepOnCommit(_ db: any StorageTransaction, _ log: ZoneLog, zoneRowID: Int64) {
        db.afterCommit(using: commitHooks) { [self] in
            self.logs.withLock { $0[zoneRowID] = log }
            Session.noteAdvance([log.state.zoneUID])
            self.advanceMark(log.mark, flush: true)
        }
    }

    // MARK: - Errors

    func refused(_ zone: ZoneRow, _ refusal: ZoneState.Refusal) -> StoreError {
        StoreError(.integrityFailure, "entry \(refusal.seq) of the log of zone '\(zone.id.name)' (owned by \(describeUser(zone.id.ownerID))) fails verification: \(refusal.reason); the store was changed")
    }

    func rolledBack(_ zone: ZoneRow, storeHead: Int64, seen: Int64) -> StoreError {
        StoreError(.integrityFailure, "\(describeZone(zone)) is refused: its log ends at entry \(storeHead), but you verified it up to entry \(seen) before; the store was rolled back or its log was cut")
    }

    func deletedBefore(_ zone: ZoneRow) -> StoreError {
        let who = zone.id.ownerID == userID ? "you deleted it" : "its owner deleted it (you verified the deletion)"
        return StoreError(.integrityFailure, "\(describeZone(zone)) is refused: \(who), and a copy of it was put back in the store",
                          underlying: DeletedZoneSeen(zone: zone.id, uid: zone.uid))
    }

    /// What a ``deletedBefore(_:)`` refusal saw: a zone this user's mark says they deleted.
    struct DeletedZoneSeen: Error, Sendable {
        let zone: ZoneID
        let uid: [UInt8]
    }

    /// A read's refusal of a zone this user deleted, checked against the store now: a read that
    /// began before the deletion (in this process or another) saw the zone, then the deletion
    /// mark it left. If the store no longer holds that zone, it was deleted meanwhile
    /// (`.zoneNotFound`); if it does, a copy was put back, and the refusal stands.
    func deletionRaced(_ error: StoreError) async -> StoreError {
        guard let seen = error.underlying as? DeletedZoneSeen else { return error }
        let gone = try? await store.read { db in try db.zoneRow(seen.zone).map { $0.uid != seen.uid } ?? true }
        let who = seen.zone.ownerID == userID ? "you deleted zone '\(seen.zone.name)'" : "zone '\(seen.zone.name)' was deleted by its owner"
        return gone == true ? StoreError(.zoneNotFound, "\(who) while this read ran") : error
    }

    func forked(_ zone: ZoneRow, at seq: Int64) -> StoreError {
        StoreError(.integrityFailure, "\(describeZone(zone)) is refused: its entry \(seq) is not the one you verified before; the store's log was forked or rewritten")
    }

    /// "your zone 'Notes'", or "zone 'Notes' of Bob (id)": for messages.
    func describeZone(_ zone: ZoneRow) -> String {
        zone.id.ownerID == userID ? "your zone '\(zone.id.name)'" : "zone '\(zone.id.name)' of \(describeUser(zone.id.ownerID))"
    }

    /// "your zone 0a1b…" or "zone 0a1b… of Bob (id)", for a zone known by its uid only.
    func describeZone(uid: [UInt8], ownerID: String) -> String {
        ownerID == userID ? "your zone \(Hex.encode(uid))" : "zone \(Hex.encode(uid)) of \(describeUser(ownerID))"
    }

    /// "you" for the acting user, else the contact's name and id, or the id.
    func describeUser(_ id: String) -> String {
        if id == userID { return "you" }
        // From the cards already verified (this may run inside a transaction: no new read).
        if let name = store.verifiedCards.withLock({ $0[id]?.contact.name }) { return "\(name) (\(id))" }
        return id
    }
}

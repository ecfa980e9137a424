import CofferCrypto
import CofferVault
import Foundation

/// A replica's pending changes: the writes made while the server could not be reached, kept
/// as unsigned intents (``PendingChange``) until ``Replica/push(_:policy:progress:)`` signs them at the
/// head it verified.
///
/// Each change is sealed under a key only the user's vault derives, and numbered by a counter
/// the user's marks file keeps (``IntentMarks``) with the hash of the live queue. A number the
/// marks show as finished (pushed and confirmed, replaced, resolved or refused) is never pushed
/// again, whatever the replica file holds: an older copy of the file put back, or rows written
/// into it, cannot make the client sign a change twice. A change the marks show as live and the
/// file lacks is reported as lost.
///
/// The replica's session writes through it (``Session/pendingChanges``): every save, delete and
/// import on ``Replica/session`` becomes a pending change, and its reads show them.
public final class PendingChanges: Sendable {
    /// A row's state.
    package enum State: Int, Sendable {
        /// Waiting for a push.
        case pending = 0
        /// Kept for the user: it and the server's version both changed the same fields.
        case conflict = 1
        /// The server refused it (the user lost write access, the zone went away, …).
        case refused = 2
    }

    /// The most pending changes a replica holds.
    public static let maxCount = 10_000
    /// The most bytes (sealed) they take.
    public static let maxBytes = 64 << 20

    let store: Store
    let vault: Vault
    let storeID: [UInt8]
    let userID: String
    private let key: SymmetricKey
    private let idKey: SymmetricKey

    init(store: Store, vault: Vault) throws {
        self.store = store
        self.vault = vault
        storeID = store.storeID
        userID = vault.identity.userID
        key = try vault.pendingChangesKey()
        idKey = try vault.pendingChangeIDKey()
    }

    /// The id the commit confirming change `number` carries.
    func id(of number: UInt64) -> [UInt8] {
        PendingChange.id(number: number, storeID: storeID, idKey: idKey)
    }

    // MARK: - The queue

    /// The live queue, checked against the marks.
    struct Queue {
        var changes: [PendingChange]
        /// Numbers the marks show as live that the replica does not hold.
        var lost: [UInt64]
        /// The newest numbers, issued by a write that did not store its changes.
        var unlanded: [UInt64]
        /// Rows of numbers the marks show as finished (never pushed again).
        var stale: [UInt64]
        var bytes: Int
    }

    /// The live pending changes, in order, as the marks allow them.
    /// - Throws: `.integrityFailure` when the replica holds a change the marks never issued
    ///   (the marks file is older than the replica) or one that does not open.
    func queue() async throws -> Queue {
        let rows = try await store.pendingRows(in: [.pending])
        let marks = try intentMarks()
        if let foreign = rows.first(where: { $0.number > marks.issued }) {
            throw StoreError(.integrityFailure, "your replica holds pending change \(foreign.number), which your marks file never issued (it is older than the replica?): nothing is pushed")
        }
        let live = rows.filter { marks.isLive($0.number) }
        var changes = [PendingChange]()
        changes.reserveCapacity(live.count)
        for row in live { changes.append(try open(row)) }
        let held = Set(live.map(\.number))
        var lost = [UInt64]()
        var n = marks.finishedThrough
        while n < marks.issued {
            n += 1
            if marks.isLive(n), !held.contains(n) { lost.append(n) }
        }
        // The newest numbers, issued by a write that then failed or was killed before it
        // stored its changes (the queue is as it was before it): not a loss.
        var unlanded = [UInt64]()
        let newestHeld = held.max() ?? 0
        if !lost.isEmpty, lost.allSatisfy({ $0 > newestHeld }), Self.hash(live) == marks.previousQueueHash {
            (unlanded, lost) = (lost, [])
        }
        return Queue(changes: changes, lost: lost, unlanded: unlanded, stale: rows.filter { !marks.isLive($0.number) }.map(\.number),
                     bytes: live.reduce(0) { $0 + $1.sealed.count })
    }

    /// The hash of a set of live rows: the XOR of each row's BLAKE2b-256 of `number (u64) ‖
    /// BLAKE2b-256(sealed)` (32 zero bytes for none), so that a write adds and removes rows from
    /// it without reading the queue. (A row cannot be made without the vault's key.)
    static func hash(_ rows: [Store.PendingRow]) -> [UInt8] {
        var out = [UInt8](repeating: 0, count: IntentMarks.hashByteCount)
        for row in rows { xor(&out, rowHash(row)) }
        return out
    }

    static func rowHash(_ row: Store.PendingRow) -> [UInt8] {
        BLAKE2b.hash(BigEndian.bytes(row.number) + BLAKE2b.hash(row.sealed))
    }

    static func xor(_ a: inout [UInt8], _ b: [UInt8]) {
        for i in a.indices { a[i] ^= b[i] }
    }

    private func intentMarks() throws -> IntentMarks {
        do { return try vault.marks.intents(ofStore: storeID) } catch let error as VaultError {
            throw StoreError(.integrityFailure, "your marks file cannot be read: \(error.message)", underlying: error)
        }
    }

    /// Changes the queue: under the marks lock, issues numbers for `adding` (each sealed then),
    /// finishes `finishing`, and records the new live queue's hash; then stores the rows
    /// (`kept`: conflicts and refusals to keep, by number, which are finished too) and deletes
    /// those finished. Returns the changes added, numbered.
    @discardableResult
    func update(adding: [PendingChange] = [], finishing: [UInt64] = [], keeping kept: [(PendingChange, State, String)] = []) async throws -> [PendingChange] {
        let finished = Set(finishing).union(kept.map(\.0.number))
        let leaving = try await store.pendingRows(numbered: Array(finished)).filter { $0.state == .pending }
        var added = [PendingChange]()
        var newRows = [Store.PendingRow]()
        do {
            try vault.marks.updateIntents(ofStore: storeID) { marks in
                added = []
                newRows = []
                var hash = marks.queueHash
                for row in leaving where marks.isLive(row.number) { Self.xor(&hash, Self.rowHash(row)) }
                try marks.finish(finished)
                let before = hash
                for var change in adding {
                    change.number = try marks.issue()
                    let row = Store.PendingRow(number: change.number, zoneUID: change.zoneUID, name: change.name, state: .pending,
                                               sealed: try change.sealed(key: key, storeID: storeID, userID: userID), note: nil)
                    Self.xor(&hash, Self.rowHash(row))
                    newRows.append(row)
                    added.append(change)
                }
                marks.previousQueueHash = before
                marks.queueHash = hash
            }
        } catch let error as VaultError {
            throw StoreError(.integrityFailure, "your marks file cannot be written: \(error.message); nothing was saved", underlying: error)
        }
        var rows = newRows
        for (change, state, note) in kept {
            rows.append(Store.PendingRow(number: change.number, zoneUID: change.zoneUID, name: change.name, state: state,
                                         sealed: try change.sealed(key: key, storeID: storeID, userID: userID), note: note))
        }
        do {
            try await store.writePendingRows(rows, deleting: Array(finished.subtracting(kept.map(\.0.number))))
        } catch {
            // Not stored: the numbers issued are finished, so that they are not counted as lost.
            if !added.isEmpty { _ = try? vault.marks.updateIntents(ofStore: storeID) { try $0.finish(added.map(\.number)) } }
            throw error
        }
        return added
    }

    /// Files the changes kept for the zone `old` under `new`: a pull replaced the replica's copy
    /// of a zone by the server's zone of that name, whose uid is `new` (the copy was made here
    /// offline and the user made the zone elsewhere too, or the zone was deleted and made again).
    /// Each change is sealed again under its new zone; a pending one takes a new number (the
    /// old one is finished), a kept one (a conflict, a refusal) keeps its own. A push then merges
    /// them with the zone's versions as any others, so nothing made offline is lost.
    func refile(from old: [UInt8], to new: [UInt8]) async throws {
        let marks = try intentMarks()
        let rows = try await store.pendingRows(in: [.pending, .conflict, .refused]).filter { $0.zoneUID == old }
        var pending = [PendingChange](), finishing = [UInt64](), kept = [(PendingChange, State, String)]()
        for row in rows {
            var change = try open(row)
            change.zoneUID = new
            if row.state == .pending {
                guard marks.isLive(row.number) else { continue }
                pending.append(change)
                finishing.append(row.number)
            } else {
                kept.append((change, row.state, row.note ?? ""))
            }
        }
        guard !pending.isEmpty || !kept.isEmpty else { return }
        try await update(adding: pending, finishing: finishing, keeping: kept)
    }

    // MARK: - Writing

    /// Keeps a save or delete made on the replica's session as pending changes (see
    /// ``RecordDatabase/modify(saving:deleting:in:policy:declaring:)``): checked as far as the
    /// replica can (names, values, sizes, the change tags given, the user's write access), each
    /// record's fields merged over the confirmed version and any earlier pending change of it.
    func enqueue(session: Session, zone zoneID: ZoneID, saving records: [Record], deleting deletions: [RecordDeletion],
                 policy: SavePolicy) async throws -> ModifyResult {
        let total = records.count + deletions.count
        guard total <= Limits.maxBatchRecords else {
            throw StoreError(.limitExceeded, "a batch holds at most \(Limits.maxBatchRecords) records (this one has \(total)); split it and retry")
        }
        for record in records { _ = try RecordWriter.check(record, zone: zoneID) }
        let names = records.map(\.name) + deletions.map(\.name)
        guard Set(names).count == names.count else { throw StoreError(.invalidArguments, "a batch names each record once") }
        let zoneUID: [UInt8] = try await session.read { db in
            let zone = try session.accessControl.zoneRow(db, zoneID)
            _ = try session.accessControl.checkCanWrite(db, zone: zone)
            return zone.uid
        }
        var earlier = [String: PendingChange]()
        let marks = try intentMarks()
        for row in try await store.pendingRows(zoneUID: zoneUID, names: names) where marks.isLive(row.number) {
            earlier[row.name] = try open(row)
        }
        // A change of a record that has one already joins it: it takes no room of its own.
        let summary = try await store.pendingSummary()
        guard summary.count - earlier.count + total <= Self.maxCount, summary.bytes < Self.maxBytes else {
            throw StoreError(.busy, "your replica holds \(summary.count) pending changes (\(summary.bytes >> 20) MiB), the most it keeps offline (\(Self.maxCount), \(Self.maxBytes >> 20) MiB): sync first")
        }
        let confirmed = try await session.reader.fetch(zone: zoneID, names: names)
        let now = Date().timeIntervalSince1970
        var adding = [PendingChange]()
        var saved = [Record]()
        for record in records {
            let base = try Self.confirmedFields(confirmed[record.name])
            let prior = earlier[record.name]
            let current = prior.map { $0.local } ?? base
            try Self.checkTag(record, policy: policy, current: current, pending: prior != nil)
            if let current, current.type != record.recordType {
                throw StoreError(.invalidArguments, "record '\(record.name)' is of type \(current.type); its type cannot change to \(record.recordType)")
            }
            let fields = PendingChange.Fields(record)
            let keys: [String]
            var local: PendingChange.Fields
            if policy == .changedKeys, let current {
                keys = Array(record.changedKeys)
                local = current.setting(keys, from: fields)
                local.parent = record.parent ?? current.parent
            } else {
                keys = Array(Set(fields.values.keys).union(fields.encryptedValues.keys).union(current.map { Array($0.values.keys) + $0.encryptedValues.keys } ?? []))
                local = fields
            }
            local.changeTag = nil
            let setKeys = Array(Set(keys).union(prior?.setKeys ?? [])).sorted()
            let change = PendingChange(number: 0, kind: .save, zoneUID: zoneUID, zone: zoneID, name: record.name, time: now,
                                       base: prior?.base ?? base, local: local, setKeys: setKeys)
            adding.append(change)
            saved.append(change.record(modifier: userID)!)
        }
        for deletion in deletions {
            let base = try Self.confirmedFields(confirmed[deletion.name])
            let prior = earlier[deletion.name]
            let current = prior.map { $0.local } ?? base
            guard current != nil else { throw StoreError(.unknownItem, "no record '\(deletion.name)' in zone '\(zoneID.name)'") }
            if let tag = deletion.changeTag, prior != nil || base?.changeTag != tag {
                throw StoreError(.serverRecordChanged, "record '\(deletion.name)' changed: it is not at change tag \(tag)\(prior != nil ? " (it has a pending change)" : ""); fetch it, and retry")
            }
            // A record made offline and deleted offline: nothing is left to push.
            if let prior, prior.base == nil { continue }
            adding.append(PendingChange(number: 0, kind: .delete, zoneUID: zoneUID, zone: zoneID, name: deletion.name, time: now,
                                        base: prior?.base ?? base, local: nil, setKeys: []))
        }
        // An earlier pending change of a name is replaced by the new one, which holds both.
        try await update(adding: adding, finishing: earlier.values.map(\.number))
        return ModifyResult(saved: saved, deleted: deletions.map(\.name))
    }

    private static func confirmedFields(_ result: Result<Record, StoreError>?) throws -> PendingChange.Fields? {
        switch result {
        case .none: return nil
        case .success(let record): return PendingChange.Fields(record)
        case .failure(let error) where error.code == .unknownItem: return nil
        case .failure(let error): throw error
        }
    }

    private static func checkTag(_ record: Record, policy: SavePolicy, current stored: PendingChange.Fields?, pending: Bool) throws {
        guard policy == .ifServerRecordUnchanged else { return }
        switch (record.changeTag, stored) {
        case (nil, nil): return
        case (let tag?, let stored?) where !pending && stored.changeTag == tag: return
        case (nil, _?):
            throw StoreError(.serverRecordChanged, "record '\(record.name)' exists already\(pending ? " (it has a pending change)" : ""); fetch it, merge, and retry")
        default:
            throw StoreError(.serverRecordChanged, "record '\(record.name)' changed: it is not at change tag \(record.changeTag ?? "?")\(pending ? " (it has a pending change)" : ""); fetch it, merge, and retry")
        }
    }

    // MARK: - Reading

    /// The newest pending change of each of `names` in `zone`: how reads of the replica show it.
    func latest(in zone: ZoneID, names: [String]? = nil) async throws -> [String: PendingChange] {
        let rows: [Store.PendingRow]
        if let names {
            guard let uid = try await zoneUID(zone) else { return [:] }
            rows = try await store.pendingRows(zoneUID: uid, names: names)
        } else {
            rows = try await store.pendingRows(in: [.pending])
        }
        guard !rows.isEmpty else { return [:] }
        let marks = try intentMarks()
        var found = [String: PendingChange]()
        for row in rows where marks.isLive(row.number) {
            let change = try open(row)
            guard change.zone == zone else { continue }
            found[change.name] = change
        }
        return found
    }

    /// The zone's uid in the replica; nil when it holds no such zone.
    private func zoneUID(_ zone: ZoneID) async throws -> [UInt8]? {
        guard case .sqlite = store.backend else { return nil }
        return try await store.read { db in try db.zoneRow(zone)?.uid }
    }

    /// A row's change, opened and checked against the clear columns it is filed under.
    /// - Throws: `.integrityFailure` for one that does not open, or is filed under another record.
    private func open(_ row: Store.PendingRow) throws -> PendingChange {
        guard let change = PendingChange.open(row.sealed, number: row.number, key: key, storeID: storeID, userID: userID),
              change.name == row.name, change.zoneUID == row.zoneUID else {
            throw StoreError(.integrityFailure, "pending change \(row.number) in your replica does not open, or is filed under another record (the file was changed)")
        }
        return change
    }

    /// A change kept for the user: a conflict or a refusal, with the note stored with it.
    public struct Kept: Sendable {
        public let zone: ZoneID
        public let name: String
        /// The record as the user's change left it; nil for a delete.
        public let local: Record?
        /// For a conflict: its kind (see ``PendingMerge/Conflict``); for a refusal: why.
        public let note: String
        /// When the change was made.
        public let made: Date
        let change: PendingChange

        /// Of `kept`, the newest change of each record of `zone` that leaves a record (a refused
        /// deletion leaves the server's version), by name (bytes): what an export writes.
        static func exportOrder(_ kept: [Kept], in zone: ZoneID) -> [Kept] {
            var newest = [String: Kept]()
            for change in kept where change.zone == zone { newest[change.name] = change }
            return newest.values.filter { $0.local != nil }.sorted { Array($0.name.utf8).lexicographicallyPrecedes(Array($1.name.utf8)) }
        }
    }

    /// The conflicts (or refusals) the replica keeps, by zone and name.
    package func kept(_ state: State) async throws -> [Kept] {
        try await store.pendingRows(in: [state]).compactMap { row in
            guard let change = PendingChange.open(row.sealed, number: row.number, key: key, storeID: storeID, userID: userID) else { return nil }
            return Kept(zone: change.zone, name: change.name, local: change.record(modifier: userID), note: row.note ?? "", made: Date(timeIntervalSince1970: change.time),
                        change: change)
        }
    }

    /// Drops a kept conflict or refusal (the user resolved it).
    func drop(_ kept: Kept) async throws {
        try await store.writePendingRows([], deleting: [kept.change.number])
    }

    /// How many changes wait, conflict and were refused, by zone uid.
    package func counts() async throws -> [[UInt8]: (pending: Int, conflicts: Int, refused: Int)] {
        let marks = try intentMarks()
        var counts = [[UInt8]: (pending: Int, conflicts: Int, refused: Int)]()
        for row in try await store.pendingRows(in: [.pending, .conflict, .refused]) {
            var c = counts[row.zoneUID] ?? (0, 0, 0)
            switch row.state {
            case .pending: if marks.isLive(row.number) { c.pending += 1 }
            case .conflict: c.conflicts += 1
            case .refused: c.refused += 1
            }
            counts[row.zoneUID] = c
        }
        return counts
    }
}

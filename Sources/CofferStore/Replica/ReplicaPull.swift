import CofferCrypto
import CofferVault
import Foundation

/// How far a replica's sync has come, told as it goes (``Replica/pull(_:progress:)``,
/// ``Replica/push(_:policy:progress:)``).
public enum SyncProgress: Sendable, Equatable {
    /// A zone's pull: started (0), or `records` rows fetched so far by this run.
    case pulling(ZoneID, records: Int)
    /// A zone's push: `sent` of the `total` changes sent this round.
    case pushing(ZoneID, sent: Int, total: Int)
}

/// What one zone's pull brought into the replica.
public struct PulledZone: Sendable {
    public let zone: ZoneID
    /// The zone's confirmed head in the replica after the pull.
    public let headSeq: Int64
    /// Log entries stored by this pull.
    public let entries: Int
    /// Record rows stored by this pull (new versions).
    public let records: Int
    /// Record rows fetched by this run (fewer than ``records`` when it went on from a pull cut short).
    public let fetched: Int
    /// Record names this pull deleted.
    public let deletions: Int
    /// The uids of the replica's copy this pull replaced by the server's zone of that name (a
    /// zone made again, or one made here offline) and of that zone, when it did.
    let replaced: (from: [UInt8], to: [UInt8])?
}

/// Brings one zone of a server into a replica by log position: the entries after the replica's
/// confirmed head, and the rows those entries still list (a version superseded later is not
/// fetched: the server holds only a name's newest row). Everything a run reads comes from one
/// state of the server (a pin). The rows are staged in the replica a page a transaction (so memory
/// holds a page, and a run cut short is followed by one that goes on from its last page); then
/// one transaction of the replica stores the entries and the staged rows, and verifies the zone
/// before it commits, as any read of the replica verifies it: the log from its
/// genesis against the user's marks, each new row against its signed entry, and each name's row
/// against the newest entry naming it. What fails verification is never stored, so a server that
/// rolls back, cuts or forks a zone's log, or withholds, alters or adds a row, leaves the replica
/// as it was, and the pull fails naming the zone.
struct ReplicaPull {
    /// The session on the replica file, whose verification the pull runs.
    let replica: Session
    /// The server's driver.
    let remote: any SnapshotDriver
    /// The replica's driver.
    let local: SQLiteSnapshotDriver
    /// Told how many rows of a zone this run fetched, after each page.
    var progress: @Sendable (SyncProgress) -> Void = { _ in }

    /// How many rows a page of the server's changes holds (tests set fewer).
    @TaskLocal static var pageSize = 1_000
    /// A test's hook: the pull of a zone fails, as a lost connection does, after this many pages.
    @TaskLocal static var stopAfterPages: Int?

    /// Pulls `zoneID` (which the server must show this user).
    /// - Throws: `.zoneNotFound` when the server shows no such zone; `.integrityFailure` naming
    ///   the zone when what the server holds fails verification or does not extend what the
    ///   replica or the marks hold.
    func pull(_ zoneID: ZoneID) async throws -> PulledZone {
        // The replica's copy, verified: its confirmed head is where the pull starts. A copy that
        // fails verification (the file was changed) is fetched again whole.
        let current = try await replicaCopy(of: zoneID)
        let pin = try await remote.pinReads()
        do {
            let pulled = try await pull(zoneID, current: current, pin: pin)
            await pin?.close()
            return pulled
        } catch {
            await pin?.close()
            throw error
        }
    }

    /// Pulls `zoneID` from `pin`'s state. Rows staged before this run (a pull cut short, or a
    /// push's own rows): when the zone fails verification with them, they are dropped and the
    /// zone fetched again, once (`droppingStage`).
    private func pull(_ zoneID: ZoneID, current: Copy?, pin: (any ReadPin)?, droppingStage: Bool = false) async throws -> PulledZone {
        var t = try await ZonePush.fetch([.zone(zoneID)], from: remote, pin: pin)
        guard case .some(.some(let zone)) = t.zones[zoneID] else {
            throw StoreError(.zoneNotFound, "\(remote.storeDescription) shows no zone '\(zoneID.name)' of \(zoneID.ownerID) to you")
        }
        if droppingStage { try await replica.store.clearStage(of: zone.uid) }
        let staged = try await replica.store.stageProgress(of: zone.uid) != nil
        do {
            return try await pull(zone, fetched: &t, current: current, pin: pin)
        } catch let error as StoreError where error.code == .integrityFailure && staged {
            replica.store.logger.info("staged rows dropped", metadata: ["zone": "\(zoneID.name)", "error": "\(error.message)"])
            return try await pull(zoneID, current: current, pin: pin, droppingStage: true)
        }
    }

    /// Pulls `zone`, the server's row of it (in `t`, what was fetched so far).
    private func pull(_ zone: ZoneRow, fetched t: inout StorageSnapshot.Tables<StoredRow>, current: Copy?, pin: (any ReadPin)?) async throws -> PulledZone {
        let zoneID = zone.id
        // A copy of another zone of that name (deleted and made again), or one that failed
        // verification, is replaced whole, under a new row id.
        let keep = current.flatMap { $0.uid == zone.uid && $0.verified ? $0 : nil }
        let after = keep?.headSeq ?? 0
        var rowID = keep?.rowID ?? 0
        // A zone new to the replica whose pull was cut short goes on under the row id its rows
        // were stored under.
        if keep == nil, let progress = try await replica.store.stageProgress(of: zone.uid), progress.after == after, let staged = progress.zoneRowID {
            rowID = staged
        } else if keep == nil {
            guard let reserved = try await ZonePush.fetch([.newZoneID(zoneID)], from: local).newZoneIDs[zoneID] else {
                throw StoreError(.internalError, "the replica reserved no zone id")
            }
            rowID = reserved
        }
        t.merge(try await ZonePush.fetch([.log(zoneRowID: zone.rowID, after: after)], from: remote, pin: pin)) { $0 }
        guard case .some(.some(let head)) = t.heads[zone.rowID] else {
            throw StoreError(.integrityFailure, "zone '\(zoneID.name)' has no log on the server: the server's store was changed")
        }
        if head.seq < after {
            throw StoreError(.integrityFailure, "the server's log of zone '\(zoneID.name)' ends at entry \(head.seq), before entry \(after) that your replica holds: the server was rolled back; nothing was pulled")
        }
        let entries = (t.logs[zone.rowID]?.entries ?? []).filter { $0.seq > after && $0.seq <= head.seq }
        guard entries.count == Int(head.seq - after), zip(entries, (after + 1)...).allSatisfy({ $0.seq == $1 }) else {
            throw StoreError(.integrityFailure, "the server sent zone '\(zoneID.name)' with entries missing: nothing was pulled")
        }
        // The lists of the new record entries, and the cards of their authors.
        let listed = entries.filter { ZoneCopy.isListed($0.body) }.map(\.seq)
        for start in stride(from: 0, to: listed.count, by: 1_000) {
            let part = listed[start..<min(start + 1_000, listed.count)].map { StorageSnapshot.Need.logEntry(zoneRowID: zone.rowID, seq: $0) }
            t.merge(try await ZonePush.fetch(part, from: remote, pin: pin)) { $0 }
        }
        let authors = Set(entries.compactMap { LogEntry.decode($0.body)?.authorID })
        t.merge(try await ZonePush.fetch(authors.sorted().map { .contact($0) }, from: remote, pin: pin)) { $0 }
        let writes = try self.writes(zone: zone, rowID: rowID, replacing: keep == nil ? current : nil, after: after, entries: entries, fetched: t)
        try Self.checkFieldTypes(t.schemaRows[zone.rowID] ?? [:], zone: zoneID)
        let newest = Self.newestListed(entries: entries, fetched: t, zone: zone)
        let fetched = try await stageRows(of: zone, after: after, fresh: keep == nil ? rowID : nil, expected: Self.expectedRows(newest), pin: pin)
        let deletions = Self.deletions(newest, entries: entries, after: after, rowID: rowID)
        let verified = try await apply(writes, stage: (zone.uid, rowID, keep == nil, after, zoneID.name), later: deletions + [.touchZone(rowID: rowID)],
                                       schema: (rowID, t.schemaRows[zone.rowID] ?? [:]), zoneID: zoneID, after: after, head: head)
        replica.verifiedLogs.remember(verified.log, zoneRowID: verified.rowID)
        return PulledZone(zone: zoneID, headSeq: head.seq, entries: entries.count, records: verified.moved, fetched: fetched,
                          deletions: deletions.count / 2, replaced: current.flatMap { $0.uid == zone.uid ? nil : ($0.uid, zone.uid) })
    }

    /// Where a page of the server's changes starts: after this sequence and name (none: the
    /// sequence's first row).
    typealias Cursor = (seq: Int64, name: String?)

    /// How many pages are fetched ahead of the one staged.
    static let pagesAhead = 2

    /// Fetches the rows written after the replica's head `after`, a page at a time in log
    /// order, and stages each page in the replica (one transaction a page, in order), so that a
    /// pull cut short goes on from its last page. The rows of a zone new to the replica are
    /// stored under the row id reserved for it, `fresh` (see ``Store/stage(_:of:after:fresh:)``).
    /// A stage left by a pull that started from another head, or under another row id, is
    /// dropped first. Returns how many rows this run fetched.
    ///
    /// `expected` is the rows the new entries' lists say the server holds (each name's newest
    /// version, unless deleted), in the server's order: where each page will start is known
    /// before the one before it arrives, so ``pagesAhead`` pages are fetched while one is
    /// staged (the server reads them, and this client decodes them, as the replica writes).
    /// Nothing rests on it: a page that ends elsewhere (a server that holds other rows, or
    /// orders names otherwise) drops the pages fetched ahead, and the pull goes on from the
    /// page's real end; what is stored is verified against the entries at the end either way.
    /// Memory holds at most ``pagesAhead`` + 1 pages.
    private func stageRows(of zone: ZoneRow, after: Int64, fresh: Int64?, expected: [(seq: Int64, name: String)],
                           pin: (any ReadPin)?) async throws -> Int {
        let store = replica.store
        var cursor: Cursor = (after, nil)
        if let progress = try await store.stageProgress(of: zone.uid), progress.after == after, progress.zoneRowID == nil || progress.zoneRowID == fresh {
            cursor = (progress.seq, progress.name)
        } else {
            try await store.clearStage(of: zone.uid)
        }
        let size = Self.pageSize, ahead = Self.pagesAhead, remote = self.remote
        /// The rows of the page after `cursor`, and whether it was full (so more may follow).
        @Sendable func page(after cursor: Cursor) async throws -> FetchedPage {
            let need = StorageSnapshot.Need.changes(zoneRowID: zone.rowID, afterSeq: cursor.seq, afterName: cursor.name, limit: size)
            let page = try await ZonePush.fetch([need], from: remote, pin: pin)
            let names = page.changePages[zone.rowID]?[StorageSnapshot.pageKey(cursor.seq, cursor.name, size)] ?? []
            return FetchedPage(rows: names.compactMap { page.records[zone.rowID]?[$0] ?? nil }, full: names.count == size)
        }
        func same(_ a: Cursor, _ b: Cursor) -> Bool { a.seq == b.seq && a.name == b.name }
        // Where each page starts: this one, then after every `size`-th row expected past it.
        let start = cursor
        let planned = expected.drop { row in
            row.seq < start.seq || (row.seq == start.seq && start.name.map { !Array($0.utf8).lexicographicallyPrecedes(Array(row.name.utf8)) } ?? false)
        }
        var starts: [Cursor] = [start] + stride(from: planned.startIndex + size - 1, to: planned.endIndex, by: size).map { (planned[$0].seq, planned[$0].name) }
        return try await withThrowingTaskGroup(of: (plan: Int, index: Int, page: FetchedPage).self) { group in
            // A page that ends elsewhere than planned starts a new plan; pages fetched for an
            // earlier one are dropped as they arrive.
            var plan = 0, launched = 0
            func launch() {
                guard launched < starts.count else { return }
                let index = launched, from = starts[index], of = plan
                group.addTask { (of, index, try await page(after: from)) }
                launched += 1
            }
            for _ in 0...ahead { launch() }
            var arrived = [Int: FetchedPage]()
            var fetched = 0, index = 0
            while true {
                if let stop = Self.stopAfterPages, index == stop {
                    throw StoreError(.serviceUnavailable, "the pull of zone '\(zone.id.name)' was cut short after \(index) pages (a test's hook)")
                }
                while arrived[index] == nil {
                    guard let next = try await group.next() else { throw StoreError(.internalError, "a page of the pull was never fetched") }
                    if next.plan == plan { arrived[next.index] = next.page }
                }
                let current = arrived.removeValue(forKey: index)!
                let more = current.full && !current.rows.isEmpty
                if let last = current.rows.last { cursor = (last.seq, last.name) }
                if more {
                    if index + 1 < starts.count, !same(starts[index + 1], cursor) {
                        // Not where it was expected to end: the pages fetched ahead are dropped.
                        plan += 1
                        arrived.removeAll()
                        starts.removeSubrange((index + 1)...)
                        launched = index + 1
                    }
                    if index + 1 == starts.count { starts.append(cursor) }
                    while launched <= min(index + 1 + ahead, starts.count - 1) { launch() }
                }
                try await store.stage(current.rows, of: zone.uid, after: after, fresh: fresh.map { ($0, zone.id.name) })
                fetched += current.rows.count
                index += 1
                progress(.pulling(zone.id, records: fetched))
                guard more else {
                    group.cancelAll()
                    return fetched
                }
            }
        }
    }

    /// Each name the new entries' lists name, with the newest entry naming it and whether that
    /// entry deleted it. Unverified here: the pull's last transaction checks the lists.
    private static func newestListed(entries: [StoredLogEntry], fetched t: StorageSnapshot.Tables<StoredRow>,
                                     zone: ZoneRow) -> [String: (seq: Int64, deleted: Bool)] {
        let listed = entries.reduce(0) { count, stored in count + ((t.entries[zone.rowID]?[stored.seq] ?? nil)?.entries?.count ?? 0) / 32 }
        var newest = [String: (seq: Int64, deleted: Bool)](minimumCapacity: listed)
        for stored in entries {
            guard let lists = t.entries[zone.rowID]?[stored.seq] ?? nil, let names = lists.names, let hashes = lists.entries,
                  let parsed = CommitBuilder.parseNames(names, entries: hashes.count / 32) else { continue }
            for item in parsed { newest[item.name] = (stored.seq, item.deleted) }
        }
        return newest
    }

    /// The rows the server holds after the replica's head: each name's newest version, unless
    /// that deleted it, by sequence and then name (the order of the server's pages). It only
    /// says where pages will start.
    private static func expectedRows(_ newest: [String: (seq: Int64, deleted: Bool)]) -> [(seq: Int64, name: String)] {
        newest.compactMap { $0.value.deleted ? nil : ($0.value.seq, $0.key) }
            .sorted { $0.seq != $1.seq ? $0.seq < $1.seq : Array($0.name.utf8).lexicographicallyPrecedes(Array($1.name.utf8)) }
    }

    /// Refuses a zone whose schema rows name a type Coffer does not know.
    private static func checkFieldTypes(_ rows: [String: [(field: String, valueType: String, encrypted: Bool)]], zone: ZoneID) throws {
        for field in rows.values.joined() where FieldType(name: field.valueType) == nil {
            throw StoreError(.integrityFailure, "zone '\(zone.name)' on the server has a schema row of unknown type: nothing was pulled")
        }
    }

    /// The names the new entries delete last: each goes from the replica, leaving a deleted name
    /// (with its entry's author, time and label) for the change feed. Two writes a name.
    private static func deletions(_ newest: [String: (seq: Int64, deleted: Bool)], entries: [StoredLogEntry], after base: Int64,
                                  rowID: Int64) -> [StorageSnapshot.Write] {
        let bySeq = Dictionary(entries.map { ($0.seq, $0) }) { first, _ in first }
        var writes = [StorageSnapshot.Write]()
        for (name, last) in newest.sorted(by: { $0.key < $1.key }) where last.deleted && last.seq > base {
            guard let stored = bySeq[last.seq], let entry = LogEntry.decode(stored.body) else { continue }
            writes.append(.deleteRecord(zoneRowID: rowID, name: name, storedSeq: -1))
            writes.append(.addTombstone(zoneRowID: rowID, name: name, seq: last.seq, authorID: entry.authorID,
                                        label: RecordsPayload.decode(entry.payload)?.label, time: entry.time))
        }
        return writes
    }

    /// The replica's copy of a zone: its row id, uid and confirmed head (its log verified from
    /// the genesis, signatures past the user's mark included); nil when it has none.
    struct Copy {
        let rowID: Int64
        let uid: [UInt8]
        let headSeq: Int64
        /// Whether its log verified whole; one that did not is replaced.
        let verified: Bool
    }

    private func replicaCopy(of zoneID: ZoneID) async throws -> Copy? {
        try await replica.store.read { db in
            guard let zone = try db.zoneRow(zoneID) else { return nil }
            let mark = try self.replica.verifiedLogs.storedMark(zone)
            do {
                let log = try self.replica.verifiedLogs.walkLog(db, zone: zone, signaturesAfter: mark?.seq ?? 0)
                return Copy(rowID: zone.rowID, uid: zone.uid, headSeq: log.state.headSeq, verified: log.refusedTail == nil)
            } catch let error as StoreError where error.code == .integrityFailure {
                return Copy(rowID: zone.rowID, uid: zone.uid, headSeq: 0, verified: false)
            }
        }
    }

    /// The writes, but for the rows, that bring the replica's copy of `zone` (row `rowID`; a new row when
    /// `replacing` or there was none) from entry `after` to the server's state.
    private func writes(zone: ZoneRow, rowID: Int64, replacing: Copy?, after base: Int64, entries: [StoredLogEntry],
                        fetched t: StorageSnapshot.Tables<StoredRow>) throws -> [StorageSnapshot.Write] {
        var writes = [StorageSnapshot.Write]()
        for author in Set(entries.compactMap { LogEntry.decode($0.body)?.authorID }).sorted() {
            guard let stored = t.contacts[author] ?? nil else {
                throw StoreError(.integrityFailure, "the server has no card of \(author), who signed zone '\(zone.id.name)': nothing was pulled")
            }
            writes.append(try ZonePush.contactWrite(card: stored.card, added: stored.added))
        }
        if base == 0 {
            if let replacing { writes.append(.deleteZone(rowID: replacing.rowID)) }
            writes.append(.insertZone(rowID: rowID, uid: zone.uid, id: zone.id, created: zone.created.timeIntervalSince1970))
        }
        for stored in entries {
            guard let entry = LogEntry.decode(stored.body) else {
                throw StoreError(.integrityFailure, "entry \(stored.seq) of zone '\(zone.id.name)' on the server is malformed: nothing was pulled")
            }
            let lists = ZoneCopy.isListed(stored.body) ? (t.entries[zone.rowID]?[stored.seq] ?? nil) : nil
            if ZoneCopy.isListed(stored.body), lists == nil {
                throw StoreError(.integrityFailure, "entry \(stored.seq) of zone '\(zone.id.name)' came without its record lists: nothing was pulled")
            }
            writes.append(.appendLog(zoneRowID: rowID, head: stored.seq - 1, entry: entry, body: stored.body, signature: stored.signature,
                                     hash: stored.hash, entries: lists?.entries, names: lists?.names))
        }
        // Keys, link, members and schema as the server holds them now.
        writes.append(.deleteWrappedKeys(zoneRowID: rowID, memberID: nil))
        for (epoch, members) in (t.wrappedKeys[zone.rowID] ?? [:]).sorted(by: { $0.key < $1.key }) {
            for (member, wrapped) in members.sorted(by: { $0.key < $1.key }) {
                writes.append(.storeWrappedKey(zoneRowID: rowID, epoch: epoch, memberID: member, wrapped: wrapped))
            }
        }
        for (epoch, sealed) in (t.chainedKeys[zone.rowID] ?? [:]).sorted(by: { $0.key < $1.key }) {
            writes.append(.storeChainedKey(zoneRowID: rowID, epoch: epoch, sealed: sealed))
        }
        if let link = t.shareLinks[zone.rowID] ?? nil {
            writes.append(.storeShareLink(zoneRowID: rowID, epoch: link.epoch, sealedKey: link.sealedKey, sealedSecret: link.sealedSecret))
        } else {
            writes.append(.deleteShareLink(zoneRowID: rowID))
        }
        writes.append(.setZoneMembers(zoneRowID: rowID, members: t.zoneMembers[zone.rowID] ?? [], shareUID: t.zoneShareUIDs[zone.rowID] ?? nil))
        return writes
    }

    /// Applies `writes` in one transaction of the replica and verifies the zone there before it
    /// commits; returns its verified log.
    private func apply(_ writes: [StorageSnapshot.Write], stage: (uid: [UInt8], zoneRowID: Int64, fresh: Bool, after: Int64, zoneName: String),
                       later: [StorageSnapshot.Write], schema: (zoneRowID: Int64, rows: [String: [(field: String, valueType: String, encrypted: Bool)]]),
                       zoneID: ZoneID, after: Int64, head: (seq: Int64, hash: Digest32)) async throws -> (log: ZoneLog, rowID: Int64, moved: Int) {
        // Verified by a session of its own, whose caches (and in-memory marks) a refused pull
        // leaves behind with the rolled-back transaction.
        let checker = Session(store: replica.store, vault: replica.vault, advancesMarks: false)
        let verifiedLogs = checker.verifiedLogs, reader = checker.reader
        let (verified, moved) = try await local.applyPull(writes, stage: stage, later: later, schema: schema) { db, newRows in
            guard let zone = try db.zoneRow(zoneID) else { throw StoreError(.internalError, "the pulled zone '\(zoneID.name)' is not in the replica") }
            let mark = try verifiedLogs.storedMark(zone)
            let log = try verifiedLogs.walkLog(db, zone: zone, signaturesAfter: mark?.seq ?? 0)
            if let (seq, error) = log.refusedTail {
                throw StoreError(.integrityFailure, "entry \(seq) of zone '\(zoneID.name)' on the server fails verification, so nothing was pulled: \(error.message)")
            }
            guard log.state.headSeq == head.seq, log.state.headHash == head.hash else {
                throw StoreError(.integrityFailure, "the server's log of zone '\(zoneID.name)' does not extend the entries your replica holds (it was rolled back, cut or forked): nothing was pulled")
            }
            _ = try verifiedLogs.extendsMark(db, log, zone: zone, mark: mark)
            // Each name an entry after the replica's head lists: its newest version, as signed.
            var latest = [String: LatestVersion]()
            try verifiedLogs.latestVersions(db, zone: zone, log: log, after: after, cached: false, into: &latest)
            func deletedButHeld(_ name: String, _ version: LatestVersion) -> StoreError {
                StoreError(.integrityFailure, "record '\(name)' of zone '\(zoneID.name)' was deleted by entry \(version.seq), but the server still holds it: nothing was pulled")
            }
            func withheld(_ name: String, _ version: LatestVersion) -> StoreError {
                StoreError(.integrityFailure, "the server withheld or rolled back record '\(name)' of zone '\(zoneID.name)' (entry \(version.seq) wrote it): nothing was pulled")
            }
            let unlisted = StoreError(.integrityFailure, "the server sent records of zone '\(zoneID.name)' that no entry of its log writes: nothing was pulled")
            if stage.fresh {
                // A zone new to the replica holds only what this pull stored: its rows are read
                // once, in name order, each checked against the newest entry naming it.
                var checked = 0, cursor = ""
                while true {
                    var page = [StoredRow]()
                    try db.readRecordRows(zoneRowID: zone.rowID, after: cursor, limit: 1_000) { page.append($0) }
                    for row in page {
                        guard let version = latest[row.name] else { throw unlisted }
                        if version.deleted { throw deletedButHeld(row.name, version) }
                        guard row.seq == version.seq else { throw withheld(row.name, version) }
                        try reader.verifyStoredRow(db, zone: zone, row: row)
                        checked += 1
                    }
                    guard page.count == 1_000, let last = page.last else { break }
                    cursor = last.name
                }
                if checked != latest.values.count(where: { !$0.deleted }) {
                    let missing = latest.filter { !$0.value.deleted }.keys.sorted()
                    for name in missing where try db.recordRow(zoneRowID: zone.rowID, name: name) == nil { throw withheld(name, latest[name]!) }
                    throw unlisted
                }
            } else {
                // The names in order, a thousand a statement: rows stored in name order are
                // read in the order they lie in the file.
                let names = latest.keys.sorted()
                for start in stride(from: 0, to: names.count, by: 1_000) {
                    let part = Array(names[start..<min(start + 1_000, names.count)])
                    var rows = [String: StoredRow](minimumCapacity: part.count)
                    try db.readRecordRows(zoneRowID: zone.rowID, names: part) { rows[$0.name] = $0 }
                    for name in part {
                        let version = latest[name]!, row = rows[name]
                        if version.deleted {
                            if row != nil { throw deletedButHeld(name, version) }
                            continue
                        }
                        guard let row, row.seq == version.seq else { throw withheld(name, version) }
                        try reader.verifyStoredRow(db, zone: zone, row: row)
                    }
                }
                // And no row beyond those: one the server sent (or a run before staged) that no
                // entry after the head lists would be stored unsigned.
                guard newRows == latest.values.count(where: { !$0.deleted }) else { throw unlisted }
            }
            return (log, zone.rowID)
        }
        return (verified.0, verified.1, moved)
    }
}

/// A page of rows a pull fetched, handed from the task that fetched it to the one that stages it.
///
/// `@unchecked Sendable`: its rows are ``StoredRow``s, which never change once made (see
/// ``StoredRow``).
private struct FetchedPage: @unchecked Sendable {
    let rows: [StoredRow]
    /// Whether the page was full, so that more may follow.
    let full: Bool
}

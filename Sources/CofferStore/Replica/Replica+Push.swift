import CofferCrypto
import CofferVault
import Foundation
#if canImport(Glibc)
import Glibc
#endif

extension Replica {
    /// What a push does with a change that conflicts with the server's version (see
    /// ``PendingMerge``): changes to fields that do not overlap are merged whatever the policy.
    public enum ConflictPolicy: Sendable {
        /// Keep the server's version, and the change as a conflict (``pendingConflicts()``) until
        /// the user resolves it. The CLI's policy.
        case keepBoth
        /// Keep the server's version; the change is dropped.
        case serverWins
        /// Save the change's record over the server's version (a delete deletes it).
        case localWins
        /// Ask: the closure gets the conflict and returns the record to save, or nil to keep the
        /// server's version. It runs for each conflict, on the pushing task.
        case resolve(@Sendable (Conflict) -> Record?)
    }

    /// A change and the server's version of its record, which both changed the same fields.
    public struct Conflict: Sendable {
        public let zone: ZoneID
        public let name: String
        /// Why they conflict (`both-changed`, `created-upstream`, `deleted-upstream`,
        /// `changed-upstream`, `type-changed`).
        public let kind: String
        /// The server's version (verified); nil when the server deleted it.
        public let server: Record?
        /// The record as the change left it; nil for a delete.
        public let local: Record?
        /// When the change was made.
        public let made: Date
    }

    /// What ``push(_:policy:)`` did.
    public struct PushReport: Sendable {
        /// Changes the verified log now confirms, by zone.
        public var confirmed: [(zone: ZoneID, count: Int)] = []
        /// Conflicts kept for the user (``ConflictPolicy/keepBoth``).
        public var conflicts: [Conflict] = []
        /// Changes the server refused, each with why: kept, readable, until dropped.
        public var refused: [(zone: ZoneID, name: String, why: String)] = []
        /// Zones whose changes could not be pushed now, each with why (they stay pending).
        public var failed: [(zone: ZoneID, error: StoreError)] = []
        /// Zones made offline, now copied to the server.
        public var zonesCreated: [ZoneID] = []
        /// Zones made offline whose name the server already had for this user (made on
        /// another device meanwhile): the replica took the server's zone in their place, and
        /// their pending changes went to it (merged as any others; see ``confirmed``).
        public var zonesJoined: [ZoneID] = []
        /// Changes the user's marks count as pending that the replica file no longer holds (an
        /// older copy of it put back, or an edit): lost, and reported once.
        public var lost: Int = 0
        /// Record rows the push's pulls fetched from the server (a push keeps the rows its own
        /// commits wrote, so its confirming pull fetches only what others wrote meanwhile).
        public var rowsFetched: Int = 0
    }

    /// The replica's pending changes (offline writes).
    public var pendingChanges: PendingChanges { session.pendingChanges! }

    /// Test hook: a push stops (throws) right after the server accepted a batch, before it
    /// confirms anything, as a client killed at that moment would.
    @TaskLocal static var stopAfterSending = false

    /// Pushes the pending changes of `zones` (by default every zone that has some): per zone,
    /// pulls it, counts as confirmed each change whose id a commit of the user carries in the
    /// verified log, merges the others three ways with the server's verified versions, signs
    /// what is left as commits at the head just verified (each carrying its changes' ids), and
    /// pulls again to confirm them. A change is confirmed only by the verified log: a server
    /// that withholds an answer, or shows the commit on another branch, gains nothing, and a
    /// change pushed twice is applied once (the second push finds the first's commit).
    ///
    /// One pusher per replica: the push holds `<replica file>.push-lock` (waiting up to 30 s).
    /// - Throws: `.serviceUnavailable` while offline; `.busy` when another push holds the lock;
    ///   `.integrityFailure` for a queue the marks do not vouch for.
    ///
    /// `progress` gets each zone's count of changes sent, after each signed commit.
    public func push(_ zones: [ZoneID]? = nil, policy: ConflictPolicy = .keepBoth,
                     progress: @escaping @Sendable (SyncProgress) -> Void = { _ in }) async throws -> PushReport {
        guard let server else { throw StoreError(.serviceUnavailable, offlineReason ?? "the server cannot be reached") }
        let lock = try await PushLock(path: path.path + ".push-lock")
        defer { lock.release() }
        let pending = pendingChanges
        var report = PushReport()
        let queue = try await pending.queue()
        if !queue.lost.isEmpty || !queue.stale.isEmpty || !queue.unlanded.isEmpty {
            report.lost = queue.lost.count
            try await pending.update(finishing: queue.lost + queue.unlanded)
            try await store.writePendingRows([], deleting: queue.stale)
        }
        // Zones made offline go first: copied whole (genesis, keys, schema) to the server. The
        // changes of one that could not be copied stay pending.
        var notCopied = Set<ZoneID>()
        var refiled = false
        for uid in try await store.unpushedZones() {
            let me = session.userID
            guard let zone = try await session.read({ db in try db.zoneRows(ownedBy: me).first { $0.zone.uid == uid }?.zone.id }) else {
                try await store.noteUnpushed(uid, false)
                continue
            }
            guard zones?.contains(zone) ?? true else { continue }
            do {
                _ = try await session.pushZone(zone, to: server.store)
                try await store.noteUnpushed(uid, false)
                report.zonesCreated.append(zone)
            } catch let error as StoreError where error.code == .alreadyExists {
                // The server's zone of this name is this one when a push copied it and was cut
                // short before it noted so. Otherwise the user made a zone of this name elsewhere
                // meanwhile: the replica takes that zone in place of the one made here (which
                // holds no records of its own: every write to it is a pending change), and those
                // changes go to it, merged three ways as any others: nothing made offline is lost.
                // Either way the zone is pulled first, and the mark goes only once the pull
                // verified the server's log of it (``pull(_:progress:)``). A server that shows no
                // such zone, or one that does not verify: the mark stays, and the copy is tried
                // again at the next push.
                let pulled = try await pull([zone])
                report.rowsFetched += pulled.pulled.reduce(0) { $0 + $1.fetched }
                guard let taken = pulled.pulled.first(where: { $0.zone == zone }) else {
                    report.failed.append((zone, pulled.failed.first { $0.zone == zone }?.error ?? error))
                    notCopied.insert(zone)
                    continue
                }
                // The server's zone replaced the copy made here, or (this very zone) kept it.
                refiled = refiled || taken.replaced != nil
                if taken.replaced == nil { report.zonesCreated.append(zone) } else { report.zonesJoined.append(zone) }
            } catch let error as StoreError where error.code != .serviceUnavailable {
                report.failed.append((zone, error))
                notCopied.insert(zone)
            }
        }
        var order = [ZoneID]()
        var byZone = [ZoneID: [PendingChange]]()
        // A pull that replaced a zone's copy filed its changes anew (``PendingChanges/refile(from:to:)``).
        let changes = refiled ? try await pending.queue().changes : queue.changes
        for change in changes where zones?.contains(change.zone) ?? true && !notCopied.contains(change.zone) {
            if byZone[change.zone] == nil { order.append(change.zone) }
            byZone[change.zone, default: []].append(change)
        }
        for zone in order {
            do {
                try await push(byZone[zone]!, zone: zone, server: server.session, policy: policy, progress: progress, into: &report)
            } catch let error as StoreError where error.code != .serviceUnavailable {
                report.failed.append((zone, error))
            }
        }
        return report
    }

    /// Pushes one zone's changes (see ``push(_:policy:)``), trying again (at most 5 times) when
    /// the server's version moved between the pull and the push.
    private func push(_ changes: [PendingChange], zone: ZoneID, server: Session, policy: ConflictPolicy,
                      progress: @Sendable (SyncProgress) -> Void, into report: inout PushReport) async throws {
        let pending = pendingChanges
        var remaining = changes
        var attempts = 0
        while !remaining.isEmpty {
            attempts += 1
            let pulled = try await pull([zone], progress: { _ in })
            report.rowsFetched += pulled.pulled.reduce(0) { $0 + $1.fetched }
            if let failure = pulled.failed.first {
                guard pulled.dropped.contains(where: { $0.zone == zone }) || [.zoneNotFound, .permissionFailure].contains(failure.error.code) else {
                    throw failure.error
                }
                // The zone went away (deleted, left, removed): every change is refused, and kept.
                let why = failure.error.message
                try await pending.update(keeping: remaining.map { ($0, .refused, why) })
                report.refused += remaining.map { (zone, $0.name, why) }
                return
            }
            // A pull that replaced the replica's copy of the zone filed its changes anew, under
            // the zone that took its place (see ``PendingChanges/refile(from:to:)``).
            if pulled.pulled.contains(where: { $0.replaced != nil }) {
                remaining = try await pending.queue().changes.filter { $0.zone == zone }
            }
            // Confirmed: each change a commit of this user in the verified log names.
            let confirmed = try await confirmedIDs(zone)
            let done = remaining.filter { confirmed.contains(LogEntry.ChangeKey(pending.id(of: $0.number))) }
            if !done.isEmpty {
                try await pending.update(finishing: done.map(\.number))
                report.confirmed.append((zone, done.count))
                let finished = Set(done.map(\.number))
                remaining.removeAll { finished.contains($0.number) }
            }
            guard !remaining.isEmpty else { return }
            guard attempts <= 6 else {
                throw StoreError(.busy, "zone '\(zone.name)' kept changing on the server while your changes were pushed; they stay pending: sync again")
            }
            let batch = try await merge(remaining, zone: zone, policy: policy, into: &report)
            let sending = Set(batch.sending.map(\.number))
            remaining.removeAll { !sending.contains($0.number) }
            guard !batch.sending.isEmpty else { return }
            do {
                try await send(batch, zone: zone, server: server, progress: progress)
            } catch let error as StoreError where [.serverRecordChanged, .partialFailure].contains(error.code) {
                continue // the server's version moved: pull and merge again
            } catch let error as StoreError where [.permissionFailure, .zoneNotFound, .invalidArguments, .limitExceeded].contains(error.code) {
                let why = error.message
                try await pending.update(keeping: remaining.map { ($0, .refused, why) })
                report.refused += remaining.map { (zone, $0.name, why) }
                return
            }
            if Self.stopAfterSending { throw StoreError(.serviceUnavailable, "stopped after sending (test hook)") }
        }
    }

    /// What one round of a push sends: records and deletions (at the server's versions), and
    /// the changes they carry.
    private struct Batch {
        var saves: [Record] = []
        var deletions: [RecordDeletion] = []
        var sending: [PendingChange] = []
    }

    /// Merges each change with the server's verified version now in the replica; finishes the
    /// changes with nothing left to do, keeps or settles the conflicts as `policy` says.
    private func merge(_ changes: [PendingChange], zone: ZoneID, policy: ConflictPolicy, into report: inout PushReport) async throws -> Batch {
        let pending = pendingChanges
        let current = try await session.reader.fetch(zone: zone, names: changes.map(\.name))
        var batch = Batch()
        var finished = [UInt64]()
        var kept = [(PendingChange, PendingChanges.State, String)]()
        for change in changes {
            let upstreamRecord: Record?
            switch current[change.name] {
            case .success(let record): upstreamRecord = record
            case .failure(let error) where error.code != .unknownItem: throw error
            default: upstreamRecord = nil
            }
            let upstream = upstreamRecord.map(PendingChange.Fields.init)
            var outcome = PendingMerge.merge(base: change.base, upstream: upstream, change: change)
            if case .conflict(let kind) = outcome {
                let conflict = Conflict(zone: zone, name: change.name, kind: kind.rawValue, server: upstreamRecord, local: change.record(modifier: session.userID),
                                        made: Date(timeIntervalSince1970: change.time))
                switch policy {
                case .keepBoth:
                    kept.append((change, .conflict, kind.rawValue))
                    report.conflicts.append(conflict)
                    continue
                case .serverWins:
                    outcome = .nothing
                case .localWins:
                    outcome = change.local.map { .save($0) } ?? (upstream == nil ? .nothing : .delete)
                case .resolve(let resolver):
                    outcome = resolver(conflict).map { .save(PendingChange.Fields($0)) } ?? .nothing
                }
            }
            switch outcome {
            case .save(var fields):
                fields.changeTag = upstream?.changeTag
                batch.saves.append(fields.record(name: change.name, zone: zone))
                batch.sending.append(change)
            case .delete:
                batch.deletions.append(RecordDeletion(name: change.name, ifMatch: upstream?.changeTag))
                batch.sending.append(change)
            case .nothing, .conflict:
                finished.append(change.number)
            }
        }
        if !finished.isEmpty || !kept.isEmpty { try await pending.update(finishing: finished, keeping: kept) }
        return batch
    }

    /// Signs and sends the batch as commits at the head the replica verified (each at most a
    /// batch's records), each carrying its changes' ids.
    private func send(_ batch: Batch, zone: ZoneID, server: Session, progress: @Sendable (SyncProgress) -> Void) async throws {
        let pending = pendingChanges
        var saves = batch.saves[...], deletions = batch.deletions[...]
        let numbers = Dictionary(batch.sending.map { ($0.name, $0.number) }) { a, _ in a }
        let applied = Locked<[[StorageSnapshot.Write]]>([])
        try await RemoteStorage.$appliedBatches.withValue(applied) {
            while !saves.isEmpty || !deletions.isEmpty {
                let s = saves.prefix(Limits.maxBatchRecords)
                let d = deletions.prefix(Limits.maxBatchRecords - s.count)
                saves = saves.dropFirst(s.count)
                deletions = deletions.dropFirst(d.count)
                let ids = (s.map(\.name) + d.map(\.name)).compactMap { numbers[$0] }.map { pending.id(of: $0) }
                _ = try await server.writer.modify(zone: zone, saving: Array(s), deleting: Array(d), policy: .ifServerRecordUnchanged, confirming: ids)
                progress(.pushing(zone, sent: batch.saves.count - saves.count + batch.deletions.count - deletions.count,
                                  total: batch.saves.count + batch.deletions.count))
            }
        }
        if Self.fetchesSentRows { return }
        try await stageSent(applied.withLock { $0 }, zone: zone)
    }

    /// A test's hook: the rows a push wrote are fetched back by the pull that confirms them,
    /// not staged from what was sent.
    @TaskLocal static var fetchesSentRows = false

    /// Stages in the replica the rows that `batches` (this push's commits, as the server
    /// applied them) wrote, as if the pull that confirms them had fetched them: that pull then
    /// fetches only what was written after them. Only when the commits follow the replica's
    /// confirmed head one after the other, with nothing of anyone else's between. Nothing here
    /// is believed: the pull verifies each staged row against the signed entries the server
    /// holds, as it verifies what it fetches, and fetches the zone again when they differ.
    private func stageSent(_ batches: [[StorageSnapshot.Write]], zone: ZoneID) async throws {
        let session = self.session, me = session.userID
        guard !batches.isEmpty, let (rowID, uid, head) = try await session.read({ db -> (Int64, [UInt8], Int64)? in
            guard let row = try db.zoneRow(zone) else { return nil }
            return (row.rowID, row.uid, try session.verifiedLogs.zoneLog(db, zone: row).state.headSeq)
        }) else { return }
        guard try await store.stageProgress(of: uid) == nil else { return }
        var next = head
        var rows = [ZoneCopy.Row]()
        var keeping = [(index: Int, storedSeq: Int64)]()
        for writes in batches {
            var entries = 0
            for write in writes {
                switch write {
                case .appendLog(_, let extends, let entry, _, _, _, _, _):
                    guard extends == next, entry.authorID == me, entry.kind == .commit else { return }
                    next += 1
                    entries += 1
                case .insertRecord(_, let version):
                    rows.append(ZoneCopy.Row(stamp: version.stamp, plain: version.plain, sealed: version.sealed))
                case .replaceRecord(_, let version, let storedSeq, let keep):
                    rows.append(ZoneCopy.Row(stamp: version.stamp, plain: version.plain, sealed: version.sealed))
                    if keep { keeping.append((rows.count - 1, storedSeq)) }
                case .deleteRecord, .addTombstone, .removeTombstone, .touchZone, .fieldSchema:
                    continue // the pull applies deletions and the schema from the entries
                default:
                    return
                }
            }
            guard entries == 1 else { return }
        }
        // An update keeps the creator and creation time of the row it replaces, which the
        // replica holds at the sequence the server replaced.
        if !keeping.isEmpty {
            let stored = try await store.storedStamps(zoneRowID: rowID, names: keeping.map { rows[$0.index].stamp.name })
            for (index, storedSeq) in keeping {
                guard let row = stored[rows[index].stamp.name], row.seq == storedSeq else { return }
                var stamp = rows[index].stamp
                stamp.creatorID = row.creatorID
                stamp.created = row.created
                rows[index] = ZoneCopy.Row(stamp: stamp, plain: rows[index].plain, sealed: rows[index].sealed)
            }
        }
        // In the server's order of changes (sequence, then name): the last is where the pull
        // goes on from.
        rows.sort { $0.stamp.seq != $1.stamp.seq ? $0.stamp.seq < $1.stamp.seq : $0.stamp.name.utf8.lexicographicallyPrecedes($1.stamp.name.utf8) }
        try await store.stage(copies: rows, of: uid, after: head)
    }

    /// The change ids the commits of this user carry in the zone's verified log, as the replica
    /// holds it.
    private func confirmedIDs(_ zone: ZoneID) async throws -> Set<LogEntry.ChangeKey> {
        let session = self.session
        let me = session.userID
        return try await session.read { db in
            guard let row = try db.zoneRow(zone) else { return [] }
            let log = try session.verifiedLogs.zoneLog(db, zone: row)
            var ids = Set<LogEntry.ChangeKey>()
            for stored in try db.logEntries(zoneRowID: row.rowID, after: 0) where stored.seq <= log.state.headSeq {
                guard let entry = LogEntry.decode(stored.body), entry.kind == .commit, entry.authorID == me else { continue }
                ids.formUnion(entry.confirmedKeys)
            }
            return ids
        }
    }

    /// The conflicts the replica keeps, with the server's version of each as the replica holds it.
    public func pendingConflicts() async throws -> [Conflict] {
        var out = [Conflict]()
        for kept in try await pendingChanges.kept(.conflict) {
            let server = try? await session.reader.fetch(zone: kept.zone, names: [kept.name])[kept.name]?.get()
            out.append(Conflict(zone: kept.zone, name: kept.name, kind: kept.note, server: server, local: kept.local, made: kept.made))
        }
        return out
    }

    /// The pending changes of `zone` (made offline, not pushed yet), by record name: the record
    /// as each leaves it, nil for a delete.
    public func pendingRecords(in zone: ZoneID) async throws -> [(name: String, record: Record?)] {
        let me = session.userID
        return try await pendingChanges.latest(in: zone).sorted { Array($0.key.utf8).lexicographicallyPrecedes(Array($1.key.utf8)) }
            .map { ($0.key, $0.value.record(modifier: me)) }
    }

    /// The changes the server refused, kept readable until dropped.
    public func refusedChanges() async throws -> [PendingChanges.Kept] {
        try await pendingChanges.kept(.refused)
    }

    /// Resolves the conflict kept for `name` in `zone`: `record` is saved as a new pending
    /// change over the server's version (nil: the server's version stays), and the conflict is
    /// dropped. Pushed at the next ``push(_:policy:)``.
    /// - Throws: `.unknownItem` when no conflict is kept for it.
    public func resolveConflict(zone: ZoneID, name: String, with record: Record?) async throws {
        guard let kept = try await pendingChanges.kept(.conflict).last(where: { $0.zone == zone && $0.name == name }) else {
            throw StoreError(.unknownItem, "no conflict is kept for record '\(name)' in zone '\(zone.name)'")
        }
        if let record {
            let database = session.database(for: zone)
            var replacement = Record(type: record.recordType, name: name, zone: zone, parent: record.parent, values: record.values,
                                     encryptedValues: record.encryptedValues)
            replacement.changeTag = nil
            _ = try await database.modify(saving: [replacement], in: zone, policy: .allKeys)
        }
        try await pendingChanges.drop(kept)
    }
}

/// The replica's push lock: an exclusive `flock` on a file beside it, so that one process
/// pushes at a time (another waits up to 30 s, sleeping between tries).
private final class PushLock: @unchecked Sendable {
    private let fd: Int32

    init(path: String) async throws {
        fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0o600)
        guard fd >= 0 else { throw StoreError(.internalError, "cannot open \(path): \(String(cString: strerror(errno)))") }
        let deadline = ContinuousClock.now + .seconds(30)
        while flock(fd, LOCK_EX | LOCK_NB) != 0 {
            guard errno == EWOULDBLOCK || errno == EINTR, ContinuousClock.now < deadline else {
                Glibc.close(fd)
                throw StoreError(.busy, "another process is pushing this replica's changes (\(path) is locked); try again")
            }
            try await Task.sleep(for: .milliseconds(50))
        }
    }

    func release() {
        flock(fd, LOCK_UN)
        Glibc.close(fd)
    }
}

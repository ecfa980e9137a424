import Foundation

/// A zone's and a database's changes since a token, and the compaction of a zone's history.
struct ChangeFeed: Sendable {
    /// The acting user's id.
    let userID: String
    /// The store the changes are read from (its id is in every token).
    let store: Store
    /// The zones' logs, whose commits list the changes.
    let verifiedLogs: VerifiedLogs
    /// Who may read a zone (and compact it: its owner).
    let accessControl: AccessControl
    /// Decodes the changed records.
    let reader: RecordReader
}

extension ChangeFeed {
    /// The zone's changes after `token` (from the beginning when nil), at most `limit` items
    /// (changed records plus deletions) per page, in commit order.
    func zoneChanges(_ zoneID: ZoneID, since token: ChangeToken?, limit: Int) async throws -> ZoneChanges {
        guard (1...Limits.maxQueryLimit).contains(limit) else {
            throw StoreError(.invalidArguments, "a change page holds 1 to \(Limits.maxQueryLimit) items")
        }
        return try await verifiedLogs.read { db in
            let zone = try self.accessControl.zoneRow(db, zoneID)
            let access = try self.accessControl.checkCanRead(db, zone: zone)
            let state = access.state
            let compacted = try db.compactedSeq(zoneRowID: zone.rowID)
            let (seq, name) = try self.start(of: token, db, zone: zone, state: state, compacted: compacted)
            // `record_tombstone` only finds deletions: each is believed from the signed entry at
            // its sequence, which must delete that name, and its author and time come from there.
            let tombstones = try db.tombstones(zoneRowID: zone.rowID, afterSeq: seq, afterName: name, limit: limit + 1)
            let rows = try db.changedRecordRows(zoneRowID: zone.rowID, afterSeq: seq, afterName: name, limit: limit + 1)
            // The page: rows and deletions merged in (seq, name) order, up to `limit` items.
            let (page, last, more) = Self.merge(rows.map { ($0.seq, $0.name) }, tombstones.map { ($0.seq, $0.name) }, limit: limit)
            // Everything the page's items need is read at once, not item by item (one round of
            // reads where the backend fetches): the commits its deletions name, and each row's
            // commit, schema and key.
            let deletionSeqs = Set(page.lazy.filter { !$0.record }.map { tombstones[$0.index].seq }).sorted()
            let deleting = try self.deletions(at: deletionSeqs, db, zone: zone, log: access.log)
            var decoded = [String: Result<Record, StoreError>](minimumCapacity: page.count)
            try self.reader.decodeRows(db, zone: zone, expected: page.count, read: { add in
                for item in page where item.record {
                    switch rows[item.index].row {
                    case .success(let row): add(row)
                    case .failure(let error): decoded[rows[item.index].name] = .failure(error)
                    }
                }
            }, deliver: { row, result in
                switch consume result {
                case .success(let record): decoded[row.name] = .success(record)
                case .failure(let error as StoreError) where error.code == .integrityFailure: decoded[row.name] = .failure(error)
                case .failure(let error): throw error
                }
            })
            var changed = [Record](), deleted = [DeletedRecord](), refused = [String: StoreError]()
            for item in page {
                if item.record {
                    let name = rows[item.index].name
                    switch decoded[name] {
                    case .success(let record)?: changed.append(record)
                    case .failure(let error)?: refused[name] = error
                    case nil: throw StoreError(.internalError, "record '\(Names.printable(name))' of a change page was not decoded")
                    }
                    continue
                }
                let (seq, name) = (tombstones[item.index].seq, tombstones[item.index].name)
                switch deleting[seq] {
                case .success(let (commit, names))?:
                    guard names.contains(name) else {
                        refused[name] = StoreError(.integrityFailure, "the deletion of record '\(Names.printable(name))' in zone '\(zone.id.name)' at entry \(seq) is not in its signed log: the store was changed")
                        continue
                    }
                    deleted.append(DeletedRecord(name: name, authorID: commit.authorID, transactionAuthor: commit.label,
                                                 deleted: Date(timeIntervalSince1970: commit.time)))
                case .failure(let error)?: refused[name] = error
                case nil: throw StoreError(.internalError, "the deletion of record '\(Names.printable(name))' was not read")
                }
            }
            // When caught up, the token says "all of the latest commit"; mid-commit, it names the last item.
            let next: ChangeToken
            if let last, more {
                next = ChangeToken(kind: .zone, storeID: self.store.storeID, scopeID: zone.uid, seq: last.0, name: last.1)
            } else {
                next = ChangeToken(kind: .zone, storeID: self.store.storeID, scopeID: zone.uid, seq: state.headSeq, name: nil)
            }
            return ZoneChanges(changed: changed, deleted: deleted, refused: refused, token: next, moreComing: more)
        }
    }

    /// Where a zone's changes after `token` start: its seq and the last name it saw (nil: all of
    /// that seq), after checking it is a token of this store and zone within the kept history.
    private func start(of token: ChangeToken?, _ db: any StorageTransaction, zone: ZoneRow, state: ZoneState,
                       compacted: Int64) throws -> (seq: Int64, name: String?) {
        var seq: Int64 = 0, name: String? = nil
        if let token {
            guard token.kind == .zone, token.storeID == store.storeID else {
                throw StoreError(.invalidArguments, "this change token belongs to another store or is not a zone token")
            }
            guard token.scopeID == zone.uid else {
                if try db.zoneExists(uid: token.scopeID) {
                    throw StoreError(.invalidArguments, "this change token belongs to another zone")
                }
                throw StoreError(.zoneNotFound, "this change token belongs to a zone that no longer exists (deleted, or deleted and created again); fetch the zone afresh")
            }
            guard token.seq >= compacted, token.seq <= state.headSeq else {
                throw StoreError(.changeTokenExpired, "this change token is older than the zone's kept history (or from a reset zone); fetch every record afresh and use the new token")
            }
            seq = token.seq
            name = token.name
        } else if compacted > 0 {
            // A full fetch from the beginning cannot list deletions that were compacted; it still lists every record.
            seq = 0
        }
        return (seq, name)
    }

    /// Merges the changed rows and the deletions, each in (seq, name) order, into one page of at
    /// most `limit` items: each item says which list it is from and its index there. Also the
    /// key of the page's last item, and whether either list has more.
    static func merge(_ rows: [(Int64, String)], _ tombstones: [(Int64, String)],
                      limit: Int) -> (page: [(record: Bool, index: Int)], last: (Int64, String)?, more: Bool) {
        var page = [(record: Bool, index: Int)]()
        var last: (Int64, String)?
        var r = 0, t = 0
        while page.count < limit {
            let recordKey: (Int64, String)? = r < rows.count ? rows[r] : nil
            let tombKey: (Int64, String)? = t < tombstones.count ? tombstones[t] : nil
            guard recordKey != nil || tombKey != nil else { break }
            let takeRecord: Bool
            if let r = recordKey, let d = tombKey { takeRecord = r < d } else { takeRecord = recordKey != nil }
            if takeRecord {
                page.append((true, r))
                last = recordKey
                r += 1
            } else {
                page.append((false, t))
                last = tombKey
                t += 1
            }
        }
        return (page, last, r < rows.count || t < tombstones.count)
    }

    /// The verified commit of each deletion seq, with the names it deletes, read in one round;
    /// a commit that does not verify is its error.
    private func deletions(at seqs: [Int64], _ db: any StorageTransaction, zone: ZoneRow,
                           log: ZoneLog) throws -> [Int64: Result<(VerifiedCommit, Set<String>), StoreError>] {
        Dictionary(uniqueKeysWithValues: try db.eachGathering(seqs) { seq -> (Int64, Result<(VerifiedCommit, Set<String>), StoreError>)? in
            do {
                let commit = try verifiedLogs.verifiedCommit(db, zone: zone, seq: seq, log: log)
                let names = CommitBuilder.parseNames(commit.names, entries: commit.entries.count) ?? []
                return (seq, .success((commit, Set(names.filter(\.deleted).map(\.name)))))
            } catch let error as StoreError {
                return (seq, .failure(error))
            }
        })
    }

    /// Zones changed or gone since `token` in the private (owned) or shared (accepted) database.
    func databaseChanges(_ scope: RecordDatabase.Scope, since token: ChangeToken?) async throws -> DatabaseChanges {
        let me = userID
        let kind: ChangeToken.Kind = scope == .private ? .privateDatabase : .sharedDatabase
        return try await verifiedLogs.read { db in
            let (current, compacted) = try db.databaseCounter()
            var since: Int64 = 0
            if let token {
                guard token.kind == kind, token.storeID == self.store.storeID, token.scopeID == ChangeToken.userScope(me) else {
                    throw StoreError(.invalidArguments, "this change token is not a \(scope) database token of this user and store")
                }
                guard token.seq >= compacted, token.seq <= current else {
                    throw StoreError(.changeTokenExpired, "this change token is older than the kept history; list the zones afresh")
                }
                since = token.seq
            }
            var changed = [ZoneID]()
            let zones = scope == .private ? try db.zoneRowsChanged(ownedBy: me, since: since) : try db.zoneRowsChanged(sharedWith: me, since: since)
            for zone in zones {
                if scope == .shared, (try? self.accessControl.access(db, zone: zone)) == nil { continue }
                changed.append(zone.id)
            }
            let gone = try db.zoneTombstones(userID: me, since: since, owned: scope == .private)
            let next = ChangeToken(kind: kind, storeID: self.store.storeID, scopeID: ChangeToken.userScope(me), seq: current, name: nil)
            return DatabaseChanges(changed: changed, deleted: gone, token: next, moreComing: false)
        }
    }

    /// Forgets the zone's deletion history up to commit `horizon` (owner only). Afterwards,
    /// tokens older than the horizon fail with `.changeTokenExpired`. Returns the tombstones removed.
    func compactHistory(zone zoneID: ZoneID, through horizon: Int64) async throws -> Int {
        try await store.write { db in
            let zone = try self.accessControl.zoneRow(db, zoneID)
            let state = try self.accessControl.requireOwner(db, zone: zone, to: "compact its history").state
            return try db.compactTombstones(zoneRowID: zone.rowID, through: min(horizon, state.headSeq))
        }
    }
}

extension RecordDatabase {
    /// One page of a zone's changes since `token` (nil: from the beginning).
    ///
    /// ```swift
    /// var token: ChangeToken? = nil
    /// repeat {
    ///     let page = try await db.changes(in: zone, since: token)
    ///     apply(page.changed, page.deleted)
    ///     token = page.token
    ///     if !page.moreComing { break }
    /// } while true
    /// ```
    /// - Throws: `.invalidArguments` for a malformed token or one of another zone kind;
    ///   `.zoneNotFound` for a token of a deleted zone; `.changeTokenExpired` for one older than
    ///   the compacted history (fetch everything afresh then).
    public func changes(in zone: ZoneID, since token: ChangeToken?, limit: Int = 400) async throws -> ZoneChanges {
        try requireScope(zone)
        return try await session.changeFeed.zoneChanges(zone, since: token, limit: limit)
    }

    /// Zones of this database that changed or went away since `token`.
    public func databaseChanges(since token: ChangeToken?) async throws -> DatabaseChanges {
        try await session.changeFeed.databaseChanges(scope, since: token)
    }

    /// Drops deletion history up to commit `horizon` (owner only); older tokens then expire.
    @discardableResult
    public func compactHistory(of zone: ZoneID, through horizon: Int64) async throws -> Int {
        try requireScope(zone)
        return try await session.changeFeed.compactHistory(zone: zone, through: horizon)
    }

    /// A live stream of a zone's changes after `token`: each element is a non-empty page of at
    /// most `limit` changes. It polls the store (default every 100 ms), so it sees commits from
    /// other processes too, and ends with an error if the zone goes away or access is lost. On a
    /// PostgreSQL store a commit by any process also wakes it at once (LISTEN/NOTIFY).
    public func changeStream(in zone: ZoneID, since token: ChangeToken?, limit: Int = 400,
                             pollInterval: Duration = .milliseconds(100)) -> AsyncThrowingStream<ZoneChanges, Error> {
        let db = self
        return Self.pollingStream(since: token, every: pollInterval, store: session.store) { position in
            let page = try await db.changes(in: zone, since: position, limit: limit)
            return (page, page.token, !page.changed.isEmpty || !page.deleted.isEmpty || !page.refused.isEmpty, page.moreComing)
        }
    }

    /// A live stream of this database's zone changes after `token`.
    public func databaseChangeStream(since token: ChangeToken?, pollInterval: Duration = .milliseconds(100)) -> AsyncThrowingStream<DatabaseChanges, Error> {
        let db = self
        return Self.pollingStream(since: token, every: pollInterval, store: session.store) { position in
            let page = try await db.databaseChanges(since: position)
            return (page, page.token, !page.changed.isEmpty || !page.deleted.isEmpty, page.moreComing)
        }
    }

    /// Polls `fetch` from `token` on: yields each page that has something, asks again at once
    /// while more is coming and otherwise after `interval` or when `store` says a commit may have
    /// changed a zone (PostgreSQL), ends on cancellation or with the first error.
    private static func pollingStream<Page: Sendable>(
        since token: ChangeToken?, every interval: Duration, store: Store,
        fetch: @escaping @Sendable (ChangeToken?) async throws -> (page: Page, next: ChangeToken, hasItems: Bool, moreComing: Bool)
    ) -> AsyncThrowingStream<Page, Error> {
        AsyncThrowingStream { continuation in
            let task = Task {
                var position = token
                do {
                    while !Task.isCancelled {
                        let result = try await fetch(position)
                        position = result.next
                        if result.hasItems { continuation.yield(result.page) }
                        if !result.moreComing { try await store.waitForChange(upTo: interval) }
                    }
                    continuation.finish()
                } catch is CancellationError {
                    continuation.finish()
                } catch where Task.isCancelled {
                    // Whatever a cancelled request failed with (a backend may wrap the
                    // cancellation in its own error), the consumer asked the stream to end.
                    continuation.finish()
                } catch {
                    continuation.finish(throwing: error)
                }
            }
            continuation.onTermination = { _ in task.cancel() }
        }
    }
}

import CofferCrypto
import CofferVault
import Foundation
import GRDB
import Logging

/// The driver of ``StorageSnapshot``s over an SQLite store: what a Coffer server that keeps its
/// store in SQLite runs its clients' operations with. A client's run notes what it needs and
/// what it writes; the server answers the needs from one read transaction and applies the
/// writes in one write transaction, checked against what the run read, exactly as
/// ``PostgresStorage`` does on PostgreSQL.
///
/// ```swift
/// let driver = SQLiteSnapshotDriver(storage: storage, logger: logger)
/// try await driver.fetch(needs, into: snapshot)   // one state of the file for all of them
/// try await driver.apply(snapshot.writes)         // or SnapshotConflict: read again
/// ```
///
/// Reads go through the SQLite backend's own ``StorageTransaction`` methods where one gives
/// exactly what a need asks for, so a row reads the same whether the engine runs on the file or
/// through this driver. Writes keep the columns only SQLite has (a zone's key epoch and log
/// format) as the engine's SQLite path keeps them.
package final class SQLiteSnapshotDriver: SnapshotDriver {
    /// The file's connections, and the turns at its readers that every read takes.
    let storage: SQLiteStorage
    package var pool: DatabasePool { storage.pool }
    package let logger: Logger
    /// The last zone id this driver handed out (see ``reserveZoneID(_:after:)``).
    private let lastReserved = Locked<Int64>(0)

    /// A driver over `storage`, a store the SQLite migrations set up (``Store/init(path:create:logger:)``).
    init(storage: SQLiteStorage, logger: Logger) {
        self.storage = storage
        self.logger = logger
    }

    package var storeDescription: String { "the SQLite store at \(pool.path)" }

    /// Sleeps `interval`: nothing here hears of another connection's commits.
    package func waitForChange(upTo interval: Duration) async throws {
        try await Task.sleep(for: interval)
    }

    /// Nothing to end: the pool belongs to whoever made it, and closes when released.
    package func close() async {}

    // MARK: - Reads

    /// What one read transaction fetched, and whether a zone read before moved on since.
    ///
    /// `@unchecked Sendable`: its record rows are ``StoredRow``s, which are made on the reader's
    /// thread and never change after (see ``StoredRow``), so handing them to the caller's task
    /// shares nothing that is written; every other value in the tables is `Sendable`.
    fileprivate struct Fetched: @unchecked Sendable {
        package var tables = StorageSnapshot.Tables<StoredRow>()
        package var moved = false
    }

    /// Fetches what a run of `snapshot` missed, in one read transaction (one state of the file
    /// for all of it); drops what was read before when a zone read then has moved on since.
    package func fetch(_ needs: [StorageSnapshot.Need], into snapshot: StorageSnapshot) async throws {
        let basis = snapshot.basis
        let read = try await storage.read { db in try self.read(needs, basis: basis, SQLiteTransaction(db)) }
        snapshot.absorb(read.tables, moved: read.moved) { $0 }
    }

    /// A pin on a connection of its own that holds one read transaction open until closed
    /// (GRDB's `DatabaseSnapshot`): every fetch through it reads the state its first read saw.
    /// While it is open, a checkpoint cannot recycle the write-ahead log past that state.
    package func pinReads() async throws -> (any ReadPin)? { try pin() }

    /// ``pinReads()``, as the SQLite pin it is (a local store's pinned reads run on its connection).
    package func pin() throws -> SQLiteReadPin {
        do { return SQLiteReadPin(driver: self, reader: try pool.makeSnapshot()) } catch { throw Store.map(error) }
    }

    /// Reads `needs` in `db`'s transaction, with whether a zone `basis` read before moved on since.
    fileprivate func read(_ needs: [StorageSnapshot.Need], basis: StorageSnapshot.FetchBasis, _ tx: SQLiteTransaction) throws -> Fetched {
        var fetched = Fetched()
        fetched.moved = try Self.moved(tx, knownHeads: basis.heads, knownZones: basis.zones)
        var cards = [String]()
        for need in needs {
            switch need {
            case .contact(let user): cards.append(user)
            case .newZoneID(let id): fetched.tables.newZoneIDs[id] = try Self.reserveZoneID(tx, after: lastReserved)
            default: try Self.fetch(need, tx, into: &fetched.tables)
            }
        }
        // The authors of entries read, whose cards check their signatures.
        let authors = Set(fetched.tables.logs.values.flatMap { $0.entries.compactMap { LogEntry.decode($0.body)?.authorID } })
            .subtracting(basis.contacts).subtracting(fetched.tables.contacts.keys)
        for user in Set(cards).union(authors) {
            // `.some(nil)`: the store has no card for the user (assigning nil would drop the key).
            fetched.tables.contacts[user] = .some(try tx.contactCard(userID: user))
        }
        return fetched
    }

    /// Whether a zone whose head was read has another head now (or none), or a zone whose row
    /// was read is gone.
    private static func moved(_ tx: SQLiteTransaction, knownHeads: [Int64: Int64?], knownZones: Set<Int64>) throws -> Bool {
        for (zone, seq) in knownHeads {
            if try tx.logHead(zoneRowID: zone)?.seq != seq { return true }
        }
        for zone in knownZones {
            if try Bool.fetchOne(tx.db, sql: "SELECT EXISTS (SELECT 1 FROM zone WHERE id = ?)", arguments: [zone]) != true { return true }
        }
        return false
    }

    /// An id for a new zone: one past every id the store has used and every id this driver
    /// handed out before. SQLite has no sequence to draw from outside an insert, so the id is
    /// only reserved here; the insert (``apply(_:)``) takes it only if the store has used no id
    /// as large since, and otherwise conflicts (the operation then reads a new one). Ids handed
    /// out by this driver are never handed out again, so two operations of one server never
    /// race for one id, nor do two new zones of one operation read in different rounds; an id
    /// left unused is a gap, as SQLite's own inserts leave after a rollback.
    private static func reserveZoneID(_ tx: SQLiteTransaction, after handedOut: Locked<Int64>) throws -> Int64 {
        let used = try lastZoneID(tx)
        return handedOut.withLock { last in
            last = max(last, used) + 1
            return last
        }
    }

    /// The greatest zone id the store ever used: its zone rows', and the one SQLite's
    /// `AUTOINCREMENT` keeps in `sqlite_sequence` (which stays after the zone is deleted).
    private static func lastZoneID(_ tx: SQLiteTransaction) throws -> Int64 {
        try Int64.fetchOne(tx.db, sql: """
            SELECT max(coalesce((SELECT seq FROM sqlite_sequence WHERE name = 'zone'), 0), coalesce((SELECT max(id) FROM zone), 0))
            """) ?? 0
    }

    private static func fetch(_ need: StorageSnapshot.Need, _ tx: SQLiteTransaction, into f: inout StorageSnapshot.Tables<StoredRow>) throws {
        // Kept as one function: a switch with one query per kind of read (`StorageSnapshot.Need`), listed
        // together so that a new kind is added beside the others, as in `PostgresStorage`.
        switch need {
        case .zone(let id):
            guard let zone = try tx.zoneRow(id) else {
                f.zones[id] = .some(nil)
                return
            }
            let rowID = zone.rowID
            f.zones[id] = zone
            f.compacted[rowID] = try tx.compactedSeq(zoneRowID: rowID)
            f.heads[rowID] = .some(try tx.logHead(zoneRowID: rowID))
            // Every key and schema row of the zone: the protocol reads them one at a time.
            f.wrappedKeys[rowID] = try tx.allWrappedKeys(zoneRowID: rowID)
            f.chainedKeys[rowID] = try tx.allChainedKeys(zoneRowID: rowID)
            f.schemaRows[rowID] = try tx.allFieldSchemaRows(zoneRowID: rowID)
            f.zoneShareUIDs[rowID] = .some(try tx.zoneCaches(zoneRowID: rowID).shareUID)
            f.zoneMembers[rowID] = try tx.zoneMemberIDs(zoneRowID: rowID)
            f.shareLinks[rowID] = .some(try tx.shareLink(zoneRowID: rowID))
            f.tombstoneFlags[rowID] = try tx.hasTombstones(zoneRowID: rowID)
            f.zoneDetails.insert(rowID)
        case .ownedZones(let owner):
            let list = try tx.zoneRows(ownedBy: owner)
            for item in list { f.zones[item.zone.id] = item.zone } // its keys and schema are fetched by name when asked for
            f.ownedZones[owner] = list
        case .newZoneID, .contact:
            preconditionFailure("answered by the caller, with what the whole fetch reserves and reads")
        case .log(let zone, let after):
            f.heads[zone] = .some(try tx.logHead(zoneRowID: zone))
            guard after != .max else { return }
            f.logs[zone] = (after, try tx.logEntries(zoneRowID: zone, after: after))
        case .logEntry(let zone, let seq):
            f.entries[zone, default: [:]][seq] = .some(try tx.logEntry(zoneRowID: zone, seq: seq))
            if f.heads[zone] == nil { f.heads[zone] = .some(try tx.logHead(zoneRowID: zone)) }
        case .contactIDs(let email, let name):
            f.contactSearches[StorageSnapshot.searchKey(email: email, name: name)] = try tx.contactUserIDs(email: email, name: name)
        case .records(let zone, let names):
            var found = [String: StoredRow?]()
            for name in names { found[name] = .some(nil) }
            try tx.readRecordRows(zoneRowID: zone, names: names) { found[$0.name] = .some($0) }
            f.records[zone, default: [:]].merge(found) { _, new in new }
        case .page(let zone, let after, let limit):
            var names = [String]()
            try tx.readRecordRows(zoneRowID: zone, after: after, limit: limit) { row in
                names.append(row.name)
                f.records[zone, default: [:]][row.name] = .some(row)
            }
            f.pages[zone, default: [:]]["\(limit):\(after)"] = names
        case .sealedPage(let zone, let epoch, let after, let limit):
            var names = [String]()
            try tx.readRecordRows(zoneRowID: zone, sealedBefore: epoch, after: after, limit: limit) { row in
                names.append(row.name)
                f.records[zone, default: [:]][row.name] = .some(row)
            }
            f.pages[zone, default: [:]]["sealed<\(epoch):\(limit):\(after)"] = names
        case .ancestors(let zone, let name):
            // The chain of parents above `name`, one lookup a step, until a root, a name with no
            // row (known to be missing), a name met before (a loop stored in the table), or the
            // depth PostgreSQL's driver stops at (the run then asks again from there).
            var current: String? = name, seen = Set<String>()
            while let step = current, seen.count <= 10_000, seen.insert(step).inserted {
                let row = try tx.recordRow(zoneRowID: zone, name: step)
                f.records[zone, default: [:]][step] = .some(row)
                current = row?.parent
            }
        case .children(let zone, let parent):
            f.childNames[zone, default: [:]][parent] = Set(try tx.children(zoneRowID: zone, of: parent))
        case .childrenOfAny(let zone, let parents):
            for parent in parents { f.childNames[zone, default: [:]][parent] = Set(try tx.children(zoneRowID: zone, of: parent)) }
        case .tombstones(let zone):
            f.tombstoneFlags[zone] = try tx.hasTombstones(zoneRowID: zone)
        case .changes(let zone, let seq, let name, let limit):
            let key = StorageSnapshot.pageKey(seq, name, limit)
            var names = [String]()
            for changed in try tx.changedRecordRows(zoneRowID: zone, afterSeq: seq, afterName: name, limit: limit) {
                // A snapshot holds rows, not refusals: a row Coffer did not write fails the read,
                // as it does on PostgreSQL.
                let row = try changed.row.get()
                names.append(row.name)
                f.records[zone, default: [:]][row.name] = .some(row)
            }
            f.changePages[zone, default: [:]][key] = names
            f.tombstonePages[zone, default: [:]][key] = try tx.tombstones(zoneRowID: zone, afterSeq: seq, afterName: name, limit: limit)
        case .zoneUID(let uid):
            f.uids[uid] = try tx.zoneExists(uid: uid)
        case .deletedZone(let uid):
            f.deletedZones[uid] = .some(try tx.deletedZone(uid: uid))
        case .counter:
            f.counter = try tx.databaseCounter()
        case .changedZones(let owner, let since):
            let rows = try tx.zoneRowsChanged(ownedBy: owner, since: since)
            for zone in rows { f.zones[zone.id] = zone }
            f.changedZones[owner, default: [:]][since] = rows
        case .zoneTombstones(let user, let since, let owned):
            f.zoneTombstones["\(owned):\(since):\(user)"] = try tx.zoneTombstones(userID: user, since: since, owned: owned)
        case .query(let zone, let plan):
            // The plan's record type and fields are written into the SQL: a plan from a client
            // must name them as the engine does.
            try Names.validateRecordType(plan.recordType)
            for field in plan.fields { try Names.validateFieldKey(field.field) }
            var names = [String]()
            let more = try tx.queryRecordRows(zoneRowID: zone, plan: plan) { row in
                names.append(row.name)
                f.records[zone, default: [:]][row.name] = .some(row)
            }
            var last: [QueryCursor.SortValue]?
            if more, let name = names.last { last = try tx.querySortValues(zoneRowID: zone, plan: plan, name: name) }
            f.queries[zone, default: [:]][plan] = StorageSnapshot.QueryPage(names: names, more: more, lastSortValues: last)
        case .contactColumns:
            f.contactColumns = try tx.contactColumns()
        case .logHashes(let zone):
            f.logHashes[zone] = try tx.storedLogHashes(zoneRowID: zone)
        case .allRows(let zone):
            var names = [String]()
            try tx.readAllRecordRows(zoneRowID: zone) { name, _, result in
                let row = try result.get()
                names.append(name)
                f.records[zone, default: [:]][name] = .some(row)
            }
            f.pages[zone, default: [:]]["all"] = names
        case .tombstoneList(let zone):
            f.tombstoneLists[zone] = try tx.tombstoneSeqs(zoneRowID: zone)
        case .shareZones(let uid):
            let rows = try tx.zoneRows(shareUID: uid)
            for zone in rows { f.zones[zone.id] = zone }
            f.shareZones[uid] = rows
        case .listingZones(let user):
            let rows = try tx.zoneRows(ownedByOrListing: user)
            for zone in rows { f.zones[zone.id] = zone }
            f.listingZones[user] = rows
        case .sharedZones(let member):
            let list = try tx.zoneRows(sharedWith: member)
            for item in list { f.zones[item.zone.id] = item.zone }
            f.sharedZones[member] = list
        case .changedSharedZones(let member, let since):
            let rows = try tx.zoneRowsChanged(sharedWith: member, since: since)
            for zone in rows { f.zones[zone.id] = zone }
            f.changedSharedZones[member, default: [:]][since] = rows
        case .tombstoneCount(let zone, let through):
            f.tombstoneCounts[zone, default: [:]][through] = try tx.tombstoneCount(zoneRowID: zone, through: through)
        }
    }

    // MARK: - Writes

    /// Applies a run's writes in one write transaction (SQLite's `BEGIN IMMEDIATE`: no other
    /// connection writes until it ends). Each zone whose log the run extends must still be at
    /// the head the run extended, and each record row it replaces or deletes at the sequence
    /// it read; a new row must find its name free. Otherwise nothing is written, and the run
    /// reads again (``SnapshotConflict``).
    package func apply(_ writes: [StorageSnapshot.Write], operation: SnapshotOperation?) async throws {
        logger.trace("snapshot apply", metadata: ["writes": "\(writes.count)"])
        do {
            let deleted = try await pool.write { db in
                if let operation {
                    try db.execute(sql: "INSERT INTO server_operation (id, user_id, applied_at) VALUES (?, ?, ?) ON CONFLICT DO NOTHING",
                                   arguments: [Data(operation.id), operation.userID, Date().timeIntervalSince1970])
                    guard db.changesCount == 1 else {
                        _ = WriteAheadLogScrub.take(db)
                        throw OperationApplied()
                    }
                }
                do { try Self.apply(writes, SQLiteTransaction(db)) } catch {
                    _ = WriteAheadLogScrub.take(db)
                    throw error
                }
                return WriteAheadLogScrub.take(db)
            }
            if deleted { WriteAheadLogScrub.truncate(pool, logger: logger) }
        } catch let error as DatabaseError where Self.isConflict(error) {
            // Another writer took a name, a key or a log position this run meant to take, or
            // deleted the zone it writes under.
            throw SnapshotConflict()
        } catch let conflict as SnapshotConflict {
            throw conflict
        } catch let applied as OperationApplied {
            throw applied
        } catch {
            throw Store.map(error)
        }
    }

    /// Applies a replica's pull (``ReplicaPull``) in one transaction: `writes` as
    /// ``apply(_:operation:)`` applies them, except that a `.deleteRecord` deletes the name's row
    /// whatever its sequence, and whether or not there is one; then the rows staged for the zone
    /// `stage.uid` (``Store/stage(_:of:after:)``), each replacing the row of its name in zone row
    /// `stage.zoneRowID` (``Store/moveStaged(_:uid:zoneRowID:after:replacing:zoneName:)``), and the stage dropped;
    /// then `later` likewise; the zone's field types made those of `schema.rows`; then
    /// `check`, whose throw leaves nothing written.
    /// - Returns: what `check` returned, and how many staged rows were stored.
    func applyPull<T: Sendable>(_ writes: [StorageSnapshot.Write],
                                stage: (uid: [UInt8], zoneRowID: Int64, fresh: Bool, after: Int64, zoneName: String),
                                later: [StorageSnapshot.Write], schema: (zoneRowID: Int64, rows: [String: [(field: String, valueType: String, encrypted: Bool)]]),
                                check: @escaping @Sendable (_ tx: any StorageTransaction, _ newRows: Int) throws -> T) async throws -> (T, Int) {
        do {
            let (value, moved, deleted) = try await pool.write { db -> (T, Int, Bool) in
                let tx = SQLiteTransaction(db)
                func apply(_ write: StorageSnapshot.Write) throws {
                    if case .deleteRecord(let zone, let name, _) = write {
                        _ = try tx.deleteRecord(zoneRowID: zone, name: name, expectedSeq: nil)
                    } else {
                        try Self.apply(write, tx)
                    }
                }
                do {
                    for write in writes { try apply(write) }
                    let moved = try Store.moveStaged(db, uid: stage.uid, zoneRowID: stage.zoneRowID, after: stage.after, replacing: !stage.fresh,
                                                     zoneName: stage.zoneName)
                    try Store.clearStage(db, uid: stage.uid)
                    for write in later { try apply(write) }
                    let have = try tx.allFieldSchemaRows(zoneRowID: schema.zoneRowID)
                    for (type, fields) in have {
                        for field in fields where !(schema.rows[type] ?? []).contains(where: { $0 == field }) {
                            try tx.deleteFieldSchema(zoneRowID: schema.zoneRowID, recordType: type, field: field.field)
                        }
                    }
                    for (type, fields) in schema.rows {
                        for field in fields where !(have[type] ?? []).contains(where: { $0 == field }) {
                            guard let valueType = FieldType(name: field.valueType) else { throw StoreError(.integrityFailure, "a schema row of unknown type") }
                            try tx.insertFieldSchema(zoneRowID: schema.zoneRowID, recordType: type, field: field.field,
                                                     schema: FieldSchema(type: valueType, encrypted: field.encrypted))
                        }
                    }
                    // Every row written after the replica's head, for `check` to match against
                    // the entries that list them: a row no entry lists is never stored.
                    let newRows = try Int.fetchOne(db, sql: "SELECT count(*) FROM record WHERE zone_id = ? AND seq > ?",
                                                   arguments: [stage.zoneRowID, stage.after]) ?? 0
                    let value = try check(tx, newRows)
                    return (value, moved, WriteAheadLogScrub.take(db))
                } catch {
                    _ = WriteAheadLogScrub.take(db)
                    throw error
                }
            }
            if deleted { WriteAheadLogScrub.truncate(pool, logger: logger) }
            return (value, moved)
        } catch let error as StoreError {
            throw error
        } catch {
            throw Store.map(error)
        }
    }

    /// A unique, primary key or foreign key violation: what PostgreSQL's driver also takes for
    /// another writer's work.
    private static func isConflict(_ error: DatabaseError) -> Bool {
        [.SQLITE_CONSTRAINT_UNIQUE, .SQLITE_CONSTRAINT_PRIMARYKEY, .SQLITE_CONSTRAINT_FOREIGNKEY].contains(error.extendedResultCode)
    }

    private static func apply(_ writes: [StorageSnapshot.Write], _ tx: SQLiteTransaction) throws {
        var heads = [Int64: Int64]()
        for case .appendLog(let zone, let head, _, _, _, _, _, _) in writes where heads[zone] == nil { heads[zone] = head }
        let inserted = Set(writes.compactMap { if case .insertZone(let rowID, _, _, _) = $0 { rowID } else { nil } })
        for (zone, head) in heads.sorted(by: { $0.key < $1.key }) where !inserted.contains(zone) {
            guard try Int64.fetchOne(tx.db, sql: "SELECT sequence FROM zone WHERE id = ?", arguments: [zone]) == head else { throw SnapshotConflict() }
        }
        for write in writes { try apply(write, tx) }
    }

    private static func apply(_ write: StorageSnapshot.Write, _ tx: SQLiteTransaction) throws {
        switch write {
        case .insertZone(let rowID, let uid, let id, let created):
            // The id came from `.newZoneID`: one past every id the store had used when it was
            // read. An id used since (by a zone another writer added, even if deleted again) is
            // a conflict, never a reuse: a zone's row id then names one zone only, and another
            // session's caches of a zone under that id cannot be taken for this one. The one
            // exception: the id a pull of this zone reserved, under which it stored its rows.
            guard try rowID > lastZoneID(tx) || Store.stagedZoneRowID(tx.db, uid: uid) == rowID else { throw SnapshotConflict() }
            _ = try tx.insertZoneRow(rowID: rowID, uid: uid, id: id, created: created)
        case .deleteZone(let rowID):
            try tx.deleteZone(zoneRowID: rowID)
        case .touchZone(let rowID):
            try tx.touchZone(zoneRowID: rowID)
        case .zoneGone(let zone, let users, let reason):
            try tx.noteZoneGone(zone, for: users, reason: reason)
        case .zoneBack(let zone, let user):
            try tx.noteZoneBack(zone, for: user)
        case .appendLog(let zone, _, let entry, let body, let signature, let hash, let entries, let names):
            try tx.appendLogEntry(zoneRowID: zone, entry: entry, body: body, signature: signature, hash: hash, entries: entries, names: names)
            // The zone row's copies of what the log says, as the engine's SQLite path keeps them.
            if entry.kind == .genesis { try tx.markZoneLogged(zoneRowID: zone) }
            if let epoch = keyEpoch(of: entry) { try tx.noteZoneEpoch(zoneRowID: zone, epoch: epoch) }
        case .wrappedKey(let zone, let epoch, let member, let wrapped):
            try tx.insertWrappedKey(zoneRowID: zone, epoch: epoch, memberID: member, wrapped: wrapped)
        case .fieldSchema(let zone, let type, let field, let schema):
            try tx.insertFieldSchema(zoneRowID: zone, recordType: type, field: field, schema: schema)
        case .dropFieldSchema(let zone, let type, let field):
            try tx.deleteFieldSchema(zoneRowID: zone, recordType: type, field: field)
            guard tx.db.changesCount == 1 else { throw SnapshotConflict() }
        case .insertRecord(let zone, let version):
            guard try tx.insertRecordIfAbsent(version, zoneRowID: zone) else { throw SnapshotConflict() }
        case .replaceRecord(let zone, let version, let storedSeq, let keep):
            let replaced = try tx.rowWriter(zoneRowID: zone, authorID: version.stamp.modifierID)
                .update(version, expectedSeq: storedSeq, keepingCreator: keep)
            guard replaced != nil else { throw SnapshotConflict() }
        case .deleteRecord(let zone, let name, let storedSeq):
            guard try tx.deleteRecord(zoneRowID: zone, name: name, expectedSeq: storedSeq) else { throw SnapshotConflict() }
        case .addTombstone(let zone, let name, let seq, let author, let label, let time):
            try tx.addTombstone(zoneRowID: zone, name: name, seq: seq, authorID: author, label: label, time: time)
        case .removeTombstone(let zone, let name):
            try tx.removeTombstone(zoneRowID: zone, name: name)
        case .contact(let userID, let name, let email, let signingKey, let boxKey, let card, let cardCreated, let added):
            try tx.storeContact(userID: userID, name: name, email: email, signingKey: signingKey, boxKey: boxKey, card: card,
                                cardCreated: cardCreated, added: added)
        case .compactTombstones(let zone, let through):
            _ = try tx.compactTombstones(zoneRowID: zone, through: through)
        case .storeWrappedKey(let zone, let epoch, let member, let wrapped):
            try tx.storeWrappedKey(zoneRowID: zone, epoch: epoch, memberID: member, wrapped: wrapped)
        case .deleteWrappedKeys(let zone, let member):
            try tx.deleteWrappedKeys(zoneRowID: zone, memberID: member)
        case .storeChainedKey(let zone, let epoch, let sealed):
            try tx.storeChainedKey(zoneRowID: zone, epoch: epoch, sealed: sealed)
        case .storeShareLink(let zone, let epoch, let key, let secret):
            try tx.storeShareLink(zoneRowID: zone, epoch: epoch, sealedKey: key, sealedSecret: secret)
        case .deleteShareLink(let zone):
            try tx.deleteShareLink(zoneRowID: zone)
        case .deleteOlderKeys(let zone, let epoch):
            try tx.deleteOlderKeys(zoneRowID: zone, before: epoch)
        case .setZoneMembers(let zone, let members, let shareUID):
            try tx.setZoneMembers(zoneRowID: zone, members: members, shareUID: shareUID)
        case .addZoneMember(let zone, let user):
            try tx.addZoneMember(zoneRowID: zone, userID: user)
        }
    }

    /// The key epoch a genesis or membership entry puts the zone at; nil for other entries (and
    /// for a payload that does not decode, which verification refuses on every read). A run
    /// notes no write for the zone row's copy of the epoch: it is taken from the entry itself.
    private static func keyEpoch(of entry: LogEntry) -> Int64? {
        switch entry.kind {
        case .genesis:
            return GenesisPayload.decode(entry.payload)?.state.epoch
        case .membership:
            return entry.payload.withUnsafeBytes { raw -> Int64? in
                var r = RawReader(raw, what: "membership")
                guard let payload = try? StatePayload.decode(&r), r.remaining == 0 else { return nil }
                return payload.epoch
            }
        case .commit, .acceptance, .rewrite, .deletion:
            return nil
        }
    }
}

extension Store {
    /// The SQLite store of `pool` with its operations run through a ``SQLiteSnapshotDriver``,
    /// as a Coffer server serving the file runs its clients' operations. The pool is one
    /// ``Store/init(path:create:logger:)`` set up (its schema checked again here).
    ///
    /// ```swift
    /// let file = try Store(path: "notes.sqlite")
    /// let served = try Store(snapshotOver: file.dbPool)
    /// ```
    /// - Throws: `.internalError` when the file is not set up as a store; `.integrityFailure`
    ///   when its schema is not the one Coffer made.
    package convenience init(snapshotOver pool: DatabasePool, logger: Logger = Vault.disabledLogger) throws {
        let storeID: [UInt8]
        do {
            guard let id = try Self.readyStoreID(pool) else {
                throw StoreError(.internalError, "the store at \(pool.path) is not set up (open it with Store(path:) first)")
            }
            try Self.checkTables(pool, path: pool.path)
            storeID = id
        } catch {
            throw Self.map(error)
        }
        self.init(url: URL(fileURLWithPath: pool.path), storeID: storeID, backend: .snapshot(SQLiteSnapshotDriver(storage: SQLiteStorage(pool: pool), logger: logger)),
                  logger: logger)
    }
}

/// Reads of one state of an SQLite store across several fetches (see
/// ``SQLiteSnapshotDriver/pinReads()``).
package final class SQLiteReadPin: ReadPin {
    private let driver: SQLiteSnapshotDriver
    private let reader: Locked<DatabaseSnapshot?>

    package init(driver: SQLiteSnapshotDriver, reader: DatabaseSnapshot) {
        self.driver = driver
        self.reader = Locked(reader)
    }

    package func fetch(_ needs: [StorageSnapshot.Need], into snapshot: StorageSnapshot) async throws {
        let basis = snapshot.basis
        let fetched = try read { db in try driver.read(needs, basis: basis, SQLiteTransaction(db)) }
        snapshot.absorb(fetched.tables, moved: fetched.moved) { $0 }
    }

    /// Runs a read of the engine's on the pin's connection (a local store's pinned read).
    package func read<T>(_ body: (Database) throws -> T) throws -> T {
        guard let reader = reader.withLock({ $0 }) else { throw StoreError(.internalError, "an SQLite read pin was used after it was closed") }
        do { return try reader.read(body) } catch { throw Store.map(error) }
    }

    package func close() async {
        let reader = self.reader.withLock { held in
            defer { held = nil }
            return held
        }
        try? reader?.close()
    }
}

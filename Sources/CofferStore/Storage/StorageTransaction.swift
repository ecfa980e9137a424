import Foundation

/// What the engine asks of a store's storage inside one transaction: typed reads and writes of
/// the rows it keeps (zones, log entries, wrapped keys, schema, contact cards, sealed record
/// rows), and no SQL. The engine seals, hashes, signs and verifies; a backend only stores and
/// finds what it is given, and every value it returns is checked by the engine against signed
/// data before it is believed.
///
/// The SQLite backend is ``SQLiteTransaction`` (`Storage/SQLite/SQLiteTransaction.swift`), which
/// wraps GRDB's connection for one transaction: the engine's functions take a transaction of
/// this protocol, and a read or write of the store hands them one. A read transaction takes only the reads; calling a write there
/// fails as SQLite refuses it.
///
/// Every reader of a value stored by someone else must treat it as hostile: a row may hold any
/// bytes. The methods throw `.integrityFailure` for a value of a shape no Coffer code writes (a
/// NULL where a value is always written, a zone uid of the wrong length), and leave what the
/// bytes mean to the engine.
protocol StorageTransaction: AnyObject {
    // MARK: Zones

    /// The zone's row, found by owner and name; nil when there is none.
    func zoneRow(_ zoneID: ZoneID) throws -> ZoneRow?
    /// The zones `ownerID` owns, by name, each with its number of record rows.
    func zoneRows(ownedBy ownerID: String) throws -> [(zone: ZoneRow, recordCount: Int)]
    /// Adds a zone's row (whose log is written next, in the same transaction); returns its row id.
    /// Throws `.alreadyExists` when the owner has a zone of that name.
    func insertZone(uid: [UInt8], id: ZoneID, created: Double) throws -> Int64
    /// Marks a zone as having a log (a zone of the store's earlier format gets one on upgrade).
    func markZoneLogged(zoneRowID: Int64) throws
    /// Deletes a zone's row and everything stored under it (records, log, keys, schema). When
    /// the log's last entry is a deletion (by the kind it was stored with), the zone's uid, owner
    /// and name and its log's first and last entries (its genesis and its owner's deletion) stay
    /// in the store's deleted zones (see ``deletedZone(uid:)``).
    func deleteZone(zoneRowID: Int64) throws
    /// What the store kept of the deleted zone `uid`; nil when it keeps nothing of such a zone.
    func deletedZone(uid: [UInt8]) throws -> DeletedZoneRow?
    /// Moves the zone to the head of the store's database change feed.
    func touchZone(zoneRowID: Int64) throws
    /// Records that a zone left each user's view (deleted, removed from its share, left), for
    /// their database change feeds.
    func noteZoneGone(_ zone: ZoneRow, for users: Set<String>, reason: String) throws
    /// The zone came back into a user's view (re-accepted, re-invited).
    func noteZoneBack(_ zone: ZoneRow, for user: String) throws

    // MARK: Zone logs

    /// The sequence and hash of the zone's newest log entry; nil when the zone has no log.
    func logHead(zoneRowID: Int64) throws -> (seq: Int64, hash: Digest32)?
    /// The zone's log entries after `seq`, in order, without their record lists.
    func logEntries(zoneRowID: Int64, after seq: Int64) throws -> [StoredLogEntry]
    /// One log entry with its record lists; nil when the zone has no entry `seq`.
    func logEntry(zoneRowID: Int64, seq: Int64) throws -> StoredLogEntry?
    /// Appends a signed entry to the zone's log and records it as the zone's head. Throws when
    /// the zone already has an entry `entry.seq` (two writers raced for the head).
    func appendLogEntry(zoneRowID: Int64, entry: LogEntry, body: [UInt8], signature: [UInt8], hash: Digest32,
                        entries: [UInt8]?, names: [UInt8]?) throws

    // MARK: Zone keys

    /// The zone key of `epoch` wrapped to `memberID`, as stored.
    func wrappedKey(zoneRowID: Int64, epoch: Int64, memberID: String) throws -> [UInt8]?
    /// The zone key of `epoch` sealed under the key of `epoch + 1` (the key chain), as stored.
    func chainedKey(zoneRowID: Int64, epoch: Int64) throws -> [UInt8]?
    /// Stores the zone key of `epoch` wrapped to `memberID`.
    func insertWrappedKey(zoneRowID: Int64, epoch: Int64, memberID: String, wrapped: [UInt8]) throws

    // MARK: Shares

    /// Stores the zone key of `epoch` wrapped to `memberID`, replacing a stored one.
    func storeWrappedKey(zoneRowID: Int64, epoch: Int64, memberID: String, wrapped: [UInt8]) throws
    /// Deletes the zone's wrapped keys: `memberID`'s, or with nil every member's.
    func deleteWrappedKeys(zoneRowID: Int64, memberID: String?) throws
    /// Stores the zone key of `epoch` sealed under the key of `epoch + 1`, replacing a stored one.
    func storeChainedKey(zoneRowID: Int64, epoch: Int64, sealed: [UInt8]) throws
    /// Deletes the key chain and every wrapped key of an epoch before `epoch` (once every record
    /// is sealed under `epoch`'s key, older keys must open nothing).
    func deleteOlderKeys(zoneRowID: Int64, before epoch: Int64) throws
    /// Notes the zone's current key epoch where the backend keeps it (a cache of the log's).
    func noteZoneEpoch(zoneRowID: Int64, epoch: Int64) throws
    /// The zone's public link as stored: the epoch it is for, the zone key sealed under the
    /// link's key, and the link secret sealed under the zone key. Nil when there is none.
    func shareLink(zoneRowID: Int64) throws -> (epoch: Int64, sealedKey: [UInt8], sealedSecret: [UInt8])?
    /// Stores the zone's public link, replacing a stored one.
    func storeShareLink(zoneRowID: Int64, epoch: Int64, sealedKey: [UInt8], sealedSecret: [UInt8]) throws
    func deleteShareLink(zoneRowID: Int64) throws
    /// Replaces the lookups of a shared zone: the users its share names (participants and
    /// link joiners), and its share's uid (nil: not shared). They only narrow searches: every
    /// use checks the verified log.
    func setZoneMembers(zoneRowID: Int64, members: Set<String>, shareUID: [UInt8]?) throws
    /// Adds a user to the zone's member lookup.
    func addZoneMember(zoneRowID: Int64, userID: String) throws
    /// The zones whose share uid is `shareUID`, by row id.
    func zoneRows(shareUID: [UInt8]) throws -> [ZoneRow]
    /// The zones `userID` owns or is listed as a member of: theirs first, then by name.
    func zoneRows(ownedByOrListing userID: String) throws -> [ZoneRow]
    /// The zones others own that list `memberID`, by owner and name, each with its number of
    /// record rows.
    func zoneRows(sharedWith memberID: String) throws -> [(zone: ZoneRow, recordCount: Int)]

    // MARK: Schema

    /// The fields of a record type in a zone as stored: name, value type name, encrypted.
    func fieldSchemaRows(zoneRowID: Int64, recordType: String) throws -> [(field: String, valueType: String, encrypted: Bool)]
    /// Fixes a field of a record type in a zone.
    func insertFieldSchema(zoneRowID: Int64, recordType: String, field: String, schema: FieldSchema) throws
    /// Every field of every record type in a zone as stored, by record type.
    func allFieldSchemaRows(zoneRowID: Int64) throws -> [String: [(field: String, valueType: String, encrypted: Bool)]]
    /// Removes a field of a record type from a zone's schema (the engine checked that no record uses it).
    func deleteFieldSchema(zoneRowID: Int64, recordType: String, field: String) throws

    // MARK: Contacts

    /// A user's contact card as stored, with when it was added; nil when there is none.
    func contactCard(userID: String) throws -> (card: [UInt8], added: Double)?

    /// Says which users' cards an operation is about to read one by one: a backend that reads
    /// across a network fetches them at once. SQLite reads each when asked.
    func prefetchContacts(userIDs: [String]) throws

    /// The user ids of the stored cards; with `email` or `name`, of those whose row has that
    /// email or name, compared without case (the rows' columns only narrow a search: each card
    /// is verified before anything of it is believed).
    func contactUserIDs(email: String?, name: String?) throws -> [String]
    /// Stores a user's verified card, replacing the stored one.
    func storeContact(userID: String, name: String, email: String?, signingKey: [UInt8], boxKey: [UInt8], card: [UInt8],
                      cardCreated: String, added: Double) throws

    // MARK: Records

    /// The row of the named record, packed for decoding; nil when there is none.
    func recordRow(zoneRowID: Int64, name: String) throws -> StoredRow?
    /// Reads the rows of the named records that exist, in the order of `names`, handing each to
    /// `add` (decoding is the engine's).
    func readRecordRows(zoneRowID: Int64, names: [String], into add: (StoredRow) -> Void) throws
    /// Reads up to `limit` rows of the zone whose names sort after `after` (bytewise), in name
    /// order, handing each to `add`.
    func readRecordRows(zoneRowID: Int64, after: String, limit: Int, into add: (StoredRow) -> Void) throws
    /// Reads up to `limit` rows of the zone with sealed values under a key epoch before `epoch`
    /// whose names sort after `after`, in name order (the rows a re-key seals again).
    func readRecordRows(zoneRowID: Int64, sealedBefore epoch: Int64, after: String, limit: Int, into add: (StoredRow) -> Void) throws
    /// The type of each named record that exists (names without a row are left out).
    func recordTypes(zoneRowID: Int64, names: [String]) throws -> [String: String]
    /// The parent of the named record: nil when there is no such record, `.some(nil)` when it
    /// has no parent.
    func recordParent(zoneRowID: Int64, name: String) throws -> String??
    /// Whether any record of the zone names `parent` as its parent.
    func hasChildren(zoneRowID: Int64, parent: String) throws -> Bool
    /// The names of the records whose parent is `parent`.
    func children(zoneRowID: Int64, of parent: String) throws -> [String]
    /// Whether the zone has a row of that name.
    func recordExists(zoneRowID: Int64, name: String) throws -> Bool
    /// Stores a version as a new row. Throws if the zone has a row of that name.
    func insertRecord(_ version: SealedVersion, zoneRowID: Int64) throws
    /// Replaces the row of the version's name and type with the version, whole (a re-key or an
    /// upgrade writes each record again as it was, sealed anew).
    func replaceRecord(_ version: SealedVersion, zoneRowID: Int64) throws
    /// Deletes the named row, only if it is at `expectedSeq` when one is given. Returns whether
    /// a row went.
    func deleteRecord(zoneRowID: Int64, name: String, expectedSeq: Int64?) throws -> Bool
    /// Says which records a batch is about to save and delete, before it asks for them one by
    /// one: a backend that reads across a network fetches them at once. SQLite reads each when
    /// asked.
    func prefetchRecords(zoneRowID: Int64, saving records: [Record], deleting deletions: [RecordDeletion]) throws
    /// Says which records' new parents a batch is about to check (each parent's row, and
    /// whether any record names each child as its parent), before it asks one by one.
    func prefetchParentChecks(zoneRowID: Int64, children: [String], parents: [String]) throws
    /// Says that a batch is about to walk the chain of parents above `name`, one by one.
    func prefetchAncestors(zoneRowID: Int64, of name: String) throws
    /// The writer of a batch's new versions, for one zone and author (see ``RecordRowWriter``).
    func recordWriter(zoneRowID: Int64, authorID: String) throws -> any RecordRowWriter

    // MARK: Queries

    /// Reads the rows `plan` selects, in its order, handing each to `add`; with a limit, whether
    /// more rows follow the last one handed over.
    func queryRecordRows(zoneRowID: Int64, plan: QueryPlan, into add: (StoredRow) -> Void) throws -> Bool
    /// The values of the plan's sort keys in the named row, as the backend compared them when
    /// it ordered the rows (a cursor resumes after them).
    func querySortValues(zoneRowID: Int64, plan: QueryPlan, name: String) throws -> [QueryCursor.SortValue]

    // MARK: Tombstones

    /// Records that entry `seq` deleted the named record (for change feeds), replacing an
    /// earlier tombstone of the name.
    func addTombstone(zoneRowID: Int64, name: String, seq: Int64, authorID: String, label: String?, time: Double) throws
    /// Drops the named record's tombstone: a saved name supersedes it, so that each name is in
    /// the change feed once.
    func removeTombstone(zoneRowID: Int64, name: String) throws
    /// Whether the zone has any tombstone (a batch without one skips ``removeTombstone(zoneRowID:name:)``).
    func hasTombstones(zoneRowID: Int64) throws -> Bool

    // MARK: Change feeds

    /// The zone's compacted sequence: deletions through it are forgotten (older tokens expire).
    func compactedSeq(zoneRowID: Int64) throws -> Int64
    /// Whether the store has a zone of this uid.
    func zoneExists(uid: [UInt8]) throws -> Bool
    /// Up to `limit` rows of the zone after a position in (seq, name) order: rows with a greater
    /// seq, or (when `afterName` is given) the same seq and a greater name. A row whose other
    /// columns hold what Coffer never writes (a NULL, a value of another type) comes back as
    /// its `.integrityFailure`, naming the column, so that a feed refuses that record alone.
    func changedRecordRows(zoneRowID: Int64, afterSeq: Int64, afterName: String?, limit: Int) throws
        -> [(seq: Int64, name: String, row: Result<StoredRow, StoreError>)]
    /// The zone's tombstones after the same position, in the same order.
    func tombstones(zoneRowID: Int64, afterSeq: Int64, afterName: String?, limit: Int) throws -> [(seq: Int64, name: String)]
    /// Forgets the zone's tombstones through `horizon` and moves its compacted sequence there;
    /// returns how many went.
    func compactTombstones(zoneRowID: Int64, through horizon: Int64) throws -> Int
    /// The store's database change counter, and the counter value before which history is gone.
    func databaseCounter() throws -> (current: Int64, compacted: Int64)
    /// The zones `ownerID` owns that changed after `since` (database counter), in that order.
    func zoneRowsChanged(ownedBy ownerID: String, since: Int64) throws -> [ZoneRow]
    /// The zones others own that `memberID` is a member of and that changed after `since`.
    func zoneRowsChanged(sharedWith memberID: String, since: Int64) throws -> [ZoneRow]
    /// The zones that left `userID`'s view after `since`: theirs (`owned`) or others'.
    func zoneTombstones(userID: String, since: Int64, owned: Bool) throws -> [DeletedZone]

    // MARK: Audit

    /// Every stored contact's columns (reads use only the signed card; audit compares them).
    func contactColumns() throws -> [(userID: String, name: String, email: String?, signingKey: [UInt8], boxKey: [UInt8], cardCreated: String)]
    /// The zone row's cached columns: its log's last sequence, its key epoch (nil where the
    /// backend keeps none) and its share's uid.
    func zoneCaches(zoneRowID: Int64) throws -> (sequence: Int64, epoch: Int64?, shareUID: [UInt8]?)
    /// The users the zone's member lookup lists.
    func zoneMemberIDs(zoneRowID: Int64) throws -> Set<String>
    /// The hash column of each of the zone's log entries, by sequence.
    func storedLogHashes(zoneRowID: Int64) throws -> [Int64: [UInt8]]
    /// Every tombstone of the zone: name → the sequence of the entry that deleted it.
    func tombstoneSeqs(zoneRowID: Int64) throws -> [String: Int64]

    // MARK: Transactions

    /// Runs `work` once the current write transaction commits; a rollback drops it. `hooks` is
    /// the session's: one registration per connection, not one per call.
    func afterCommit(using hooks: CommitHooks, _ work: @escaping @Sendable () -> Void)
    /// Runs `onCommit` or `onRollback` when the current write transaction ends.
    func afterTransaction(onCommit: @escaping @Sendable () -> Void, onRollback: @escaping @Sendable () -> Void)
}

/// Thrown by a read the backend cannot answer yet (PostgreSQL's snapshot notes what it needs,
/// fetches it and runs the operation again). An operation that reads many independent things
/// (the zones of a list) may catch it for one, go on to the next, and rethrow it at the end, so
/// that one round of fetches reads what all of them need.
protocol StorageMiss: Error {}

extension StorageTransaction {
    /// `body` for each item, in order, leaving out nils; a ``StorageMiss`` of one item does not
    /// stop the others (their reads are noted too), and is rethrown once all have run.
    func eachGathering<Item, T>(_ items: [Item], _ body: (Item) throws -> T?) throws -> [T] {
        var results = [T](), pending: (any Error)?
        for item in items {
            do {
                if let result = try body(item) { results.append(result) }
            } catch let miss as any StorageMiss {
                pending = pending ?? miss
            }
        }
        if let pending { throw pending }
        return results
    }
}

/// Writes the new versions of one batch: each record is inserted when the zone has no row of
/// its name, or else replaces the stored row of its name and type, keeping the stored creator
/// and creation time. One writer serves one batch, on the thread of its transaction.
protocol RecordRowWriter: AnyObject {
    /// Inserts the version as a new row; false (and nothing written) when the zone has a row of
    /// its name.
    func insertIfAbsent(_ version: SealedVersion) throws -> Bool
    /// Replaces the stored row of the version's name and type, only if it is at `expectedSeq`
    /// when one is given; returns the stored creator and creation time the version keeps, or nil
    /// when no row was replaced.
    func update(_ version: SealedVersion, expectedSeq: Int64?) throws -> (creator: String, created: Double)?
    /// Releases what the writer holds; called once, when the batch is written or fails.
    func finish()
}

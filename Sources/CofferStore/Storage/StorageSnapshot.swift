import Foundation

/// The ``StorageTransaction`` of the backends that read across a network (PostgreSQL, a Coffer
/// server): what one store operation has read from the store so far, and the writes it has asked for.
///
/// The engine's work runs synchronously on the caller's thread, and the network is async. So an
/// operation runs against a snapshot (``SnapshotDriver/run(writing:_:)``): a read the snapshot
/// cannot answer yet notes what it needs and throws ``Miss``; the driver fetches everything
/// noted, in one round trip, and runs the operation again with the snapshot grown. The engine's
/// work is repeatable: it only fills caches of what it verified, and its writes go to the
/// snapshot, not the store. Once an operation runs through without a miss, its writes are
/// applied in one transaction of the store that first locks each zone it extends and checks that
/// the zone's log head and every record row it changes are still as read. Otherwise another
/// writer came first, and the operation runs again on fresh reads (a commit that raced only for
/// the head is signed again on the new head).
///
/// Reads see the operation's own writes (a record saved earlier in a batch is its parent's
/// child, a new zone has its row).
package final class StorageSnapshot: StorageTransaction {
    /// A read the snapshot could not answer: the driver fetches what ``needs`` lists and runs
    /// the operation again.
    package struct Miss: StorageMiss {}

    /// What the driver fetches for a snapshot.
    package enum Need: Hashable, Sendable {
        case zone(ZoneID)
        case ownedZones(String)
        case newZoneID(ZoneID)
        case log(zoneRowID: Int64, after: Int64)
        case logEntry(zoneRowID: Int64, seq: Int64)
        case contact(String)
        case contactIDs(email: String?, name: String?)
        case records(zoneRowID: Int64, names: [String])
        case page(zoneRowID: Int64, after: String, limit: Int)
        case children(zoneRowID: Int64, parent: String)
        /// The children of each of these names, in one read.
        case childrenOfAny(zoneRowID: Int64, parents: [String])
        case tombstones(zoneRowID: Int64)
        case changes(zoneRowID: Int64, afterSeq: Int64, afterName: String?, limit: Int)
        case zoneUID([UInt8])
        /// What the store kept of a deleted zone, by its uid.
        case deletedZone(uid: [UInt8])
        case counter
        case changedZones(ownerID: String, since: Int64)
        case zoneTombstones(userID: String, since: Int64, owned: Bool)
        case tombstoneCount(zoneRowID: Int64, through: Int64)
        case query(zoneRowID: Int64, plan: QueryPlan)
        case sealedPage(zoneRowID: Int64, before: Int64, after: String, limit: Int)
        case ancestors(zoneRowID: Int64, of: String)
        case contactColumns
        case logHashes(zoneRowID: Int64)
        case allRows(zoneRowID: Int64)
        case tombstoneList(zoneRowID: Int64)
        case shareZones(shareUID: [UInt8])
        case listingZones(userID: String)
        case sharedZones(memberID: String)
        case changedSharedZones(memberID: String, since: Int64)
    }

    /// The rows a query selected (the rows are in ``Tables/records``), whether more follow,
    /// and the last row's sort values.
    package struct QueryPage: Sendable {
        package let names: [String]
        package let more: Bool
        let lastSortValues: [QueryCursor.SortValue]?
    }

    /// A write to apply, with what it expects to find.
    package enum Write: Sendable {
        case insertZone(rowID: Int64, uid: [UInt8], id: ZoneID, created: Double)
        case deleteZone(rowID: Int64)
        case touchZone(rowID: Int64)
        case zoneGone(ZoneRow, users: Set<String>, reason: String)
        case zoneBack(ZoneRow, user: String)
        /// `head`: the zone's log head the entry extends (0 for a genesis).
        case appendLog(zoneRowID: Int64, head: Int64, entry: LogEntry, body: [UInt8], signature: [UInt8], hash: Digest32,
                       entries: [UInt8]?, names: [UInt8]?)
        case wrappedKey(zoneRowID: Int64, epoch: Int64, memberID: String, wrapped: [UInt8])
        case fieldSchema(zoneRowID: Int64, recordType: String, field: String, schema: FieldSchema)
        /// Removes a field from the schema; it must be there. Only with the owner's log entry in
        /// the same batch, which orders the drop among the zone's commits.
        case dropFieldSchema(zoneRowID: Int64, recordType: String, field: String)
        /// Inserted where the zone had no row of the name.
        case insertRecord(zoneRowID: Int64, SealedVersion)
        /// Replaces the row of the name and type that was at `storedSeq`; `keep`: keep its
        /// creator and creation time.
        case replaceRecord(zoneRowID: Int64, SealedVersion, storedSeq: Int64, keep: Bool)
        case deleteRecord(zoneRowID: Int64, name: String, storedSeq: Int64)
        case addTombstone(zoneRowID: Int64, name: String, seq: Int64, authorID: String, label: String?, time: Double)
        case removeTombstone(zoneRowID: Int64, name: String)
        case contact(userID: String, name: String, email: String?, signingKey: [UInt8], boxKey: [UInt8], card: [UInt8],
                     cardCreated: String, added: Double)
        case compactTombstones(zoneRowID: Int64, through: Int64)
        case storeWrappedKey(zoneRowID: Int64, epoch: Int64, memberID: String, wrapped: [UInt8])
        case deleteWrappedKeys(zoneRowID: Int64, memberID: String?)
        case storeChainedKey(zoneRowID: Int64, epoch: Int64, sealed: [UInt8])
        case storeShareLink(zoneRowID: Int64, epoch: Int64, sealedKey: [UInt8], sealedSecret: [UInt8])
        case deleteShareLink(zoneRowID: Int64)
        case deleteOlderKeys(zoneRowID: Int64, before: Int64)
        case setZoneMembers(zoneRowID: Int64, members: Set<String>, shareUID: [UInt8]?)
        case addZoneMember(zoneRowID: Int64, userID: String)
    }

    /// What was read, by kind; `Row` is how record rows are held (``StoredRow`` here, their
    /// values while a fetch runs).
    package struct Tables<Row> {
        package var zones = [ZoneID: ZoneRow?]()
        package var ownedZones = [String: [(zone: ZoneRow, recordCount: Int)]]()
        package var newZoneIDs = [ZoneID: Int64]()
        package var heads = [Int64: (seq: Int64, hash: Digest32)?]()
        package var logs = [Int64: (after: Int64, entries: [StoredLogEntry])]()
        package var entries = [Int64: [Int64: StoredLogEntry?]]()
        package var wrappedKeys = [Int64: [Int64: [String: [UInt8]]]]()
        package var chainedKeys = [Int64: [Int64: [UInt8]]]()
        package var schemaRows = [Int64: [String: [(field: String, valueType: String, encrypted: Bool)]]]()
        package var contacts = [String: (card: [UInt8], added: Double)?]()
        package var contactSearches = [String: [String]]()
        package var records = [Int64: [String: Row?]]()
        package var pages = [Int64: [String: [String]]]()
        package var childNames = [Int64: [String: Set<String>]]()
        package var tombstoneFlags = [Int64: Bool]()
        package var zoneDetails = Set<Int64>()
        package var compacted = [Int64: Int64]()
        package var uids = [[UInt8]: Bool]()
        /// By zone uid: what the store kept of the deleted zone, `.some(nil)` when nothing.
        package var deletedZones = [[UInt8]: DeletedZoneRow?]()
        /// Per zone, by position and limit: the names of the changed rows read (the rows are in `records`).
        package var changePages = [Int64: [String: [String]]]()
        package var tombstonePages = [Int64: [String: [(seq: Int64, name: String)]]]()
        package var tombstoneCounts = [Int64: [Int64: Int]]()
        package var counter: (current: Int64, compacted: Int64)?
        package var changedZones = [String: [Int64: [ZoneRow]]]()
        package var zoneTombstones = [String: [DeletedZone]]()
        var queries = [Int64: [QueryPlan: QueryPage]]()
        /// Per zone (fetched with its keys): its public link, `.some(nil)` when it has none.
        package var shareLinks = [Int64: (epoch: Int64, sealedKey: [UInt8], sealedSecret: [UInt8])?]()
        package var shareZones = [[UInt8]: [ZoneRow]]()
        /// Per zone (fetched with its keys): its share uid and member lookup.
        package var zoneShareUIDs = [Int64: [UInt8]?]()
        package var zoneMembers = [Int64: Set<String>]()
        package var contactColumns: [(userID: String, name: String, email: String?, signingKey: [UInt8], boxKey: [UInt8], cardCreated: String)]?
        package var logHashes = [Int64: [Int64: [UInt8]]]()
        package var tombstoneLists = [Int64: [String: Int64]]()
        package var listingZones = [String: [ZoneRow]]()
        package var sharedZones = [String: [(zone: ZoneRow, recordCount: Int)]]()
        package var changedSharedZones = [String: [Int64: [ZoneRow]]]()

        /// Adds what `new` read (a newer read of the same thing wins), its rows made by `make`.
        package mutating func merge<Other>(_ new: Tables<Other>, rows make: (Other) -> Row) {
            zones.merge(new.zones) { _, new in new }
            ownedZones.merge(new.ownedZones) { _, new in new }
            newZoneIDs.merge(new.newZoneIDs) { old, _ in old }
            heads.merge(new.heads) { _, new in new }
            logs.merge(new.logs) { _, new in new }
            for (zone, list) in new.entries { entries[zone, default: [:]].merge(list) { _, new in new } }
            wrappedKeys.merge(new.wrappedKeys) { _, new in new }
            chainedKeys.merge(new.chainedKeys) { _, new in new }
            schemaRows.merge(new.schemaRows) { _, new in new }
            contacts.merge(new.contacts) { _, new in new }
            contactSearches.merge(new.contactSearches) { _, new in new }
            for (zone, rows) in new.records { records[zone, default: [:]].merge(rows.mapValues { $0.map(make) }) { _, new in new } }
            for (zone, list) in new.pages { pages[zone, default: [:]].merge(list) { _, new in new } }
            for (zone, list) in new.childNames { childNames[zone, default: [:]].merge(list) { _, new in new } }
            tombstoneFlags.merge(new.tombstoneFlags) { _, new in new }
            zoneDetails.formUnion(new.zoneDetails)
            compacted.merge(new.compacted) { _, new in new }
            uids.merge(new.uids) { _, new in new }
            deletedZones.merge(new.deletedZones) { _, new in new }
            for (zone, list) in new.changePages { changePages[zone, default: [:]].merge(list) { _, new in new } }
            for (zone, list) in new.tombstonePages { tombstonePages[zone, default: [:]].merge(list) { _, new in new } }
            for (zone, list) in new.tombstoneCounts { tombstoneCounts[zone, default: [:]].merge(list) { _, new in new } }
            if let counter = new.counter { self.counter = counter }
            for (owner, list) in new.changedZones { changedZones[owner, default: [:]].merge(list) { _, new in new } }
            zoneTombstones.merge(new.zoneTombstones) { _, new in new }
            for (zone, list) in new.queries { queries[zone, default: [:]].merge(list) { _, new in new } }
            shareLinks.merge(new.shareLinks) { _, new in new }
            shareZones.merge(new.shareZones) { _, new in new }
            zoneShareUIDs.merge(new.zoneShareUIDs) { _, new in new }
            zoneMembers.merge(new.zoneMembers) { _, new in new }
            if let columns = new.contactColumns { contactColumns = columns }
            logHashes.merge(new.logHashes) { _, new in new }
            tombstoneLists.merge(new.tombstoneLists) { _, new in new }
            listingZones.merge(new.listingZones) { _, new in new }
            sharedZones.merge(new.sharedZones) { _, new in new }
            for (member, list) in new.changedSharedZones { changedSharedZones[member, default: [:]].merge(list) { _, new in new } }
        }
    }

    /// What the fetches read.
    package var fetched = Tables<StoredRow>()
    /// What this run sees: ``fetched`` and this run's own writes.
    package var t = Tables<StoredRow>()

    /// What this run missed, in the order it missed it (``noted`` keeps each once: a run may miss
    /// 100,000 entries of a log).
    private(set) var needs = [Need]()
    private var noted = Set<Need>()
    package private(set) var writes = [Write]()
    private var commitWork = [@Sendable () -> Void]()
    private var rollbackWork = [@Sendable () -> Void]()
    package let writable: Bool

    package init(writable: Bool) {
        self.writable = writable
    }

    /// Starts a new run of the operation: what it asked for and wrote in the last run is
    /// dropped (what was fetched stays).
    package func beginRun() {
        t = fetched
        needs = []
        noted = []
        writes = []
        commitWork = []
        rollbackWork = []
    }

    /// Drops everything fetched, for a run after another writer came first (contact cards stay:
    /// the engine verifies each one it uses).
    package func forgetRows() {
        fetched = Tables(contacts: fetched.contacts)
    }

    package var missed: Bool { !needs.isEmpty }

    /// What a fetch compares with the store to tell whether what was read before is still of
    /// its current state: the log head read of each zone, the zones whose rows were read but not
    /// their heads, and the users whose cards were read.
    package struct FetchBasis: Sendable {
        package var heads: [Int64: Int64?]
        package var zones: Set<Int64>
        package var contacts: Set<String>
    }

    /// Set by the server that fetches for a client's snapshot: the client's basis, not this
    /// snapshot's own.
    package var presetBasis: FetchBasis?
    /// Whether the last ``absorb(_:moved:rows:)`` found a zone moved on.
    package private(set) var lastFetchMoved = false

    package var basis: FetchBasis {
        if let presetBasis { return presetBasis }
        let heads = fetched.heads.mapValues { $0?.seq }
        // Zones whose rows were read, whether or not their heads were yet.
        return FetchBasis(heads: heads, zones: Set(fetched.zones.values.compactMap { $0?.rowID }).subtracting(heads.keys),
                          contacts: Set(fetched.contacts.keys))
    }

    /// Adds what a fetch read. Every read of a run is of one state of the store: when the fetch
    /// found a zone moved on, what was read before goes first (contact cards stay: each is
    /// verified on use), and the run asks again.
    package func absorb<Other>(_ rows: Tables<Other>, moved: Bool, rows make: (Other) -> StoredRow) {
        lastFetchMoved = moved
        if moved { fetched = Tables(contacts: fetched.contacts) }
        fetched.merge(rows, rows: make)
    }

    private func miss(_ need: Need) -> Miss {
        if noted.insert(need).inserted { needs.append(need) }
        return Miss()
    }

    private func write(_ write: Write) throws {
        guard writable else { throw StoreError(.internalError, "a read of the store tried to write") }
        writes.append(write)
    }

    package func committed() { for work in commitWork { work() } }
    package func rolledBack() { for work in rollbackWork { work() } }

    // MARK: Zones

    package func zoneRow(_ zoneID: ZoneID) throws -> ZoneRow? {
        guard let known = t.zones[zoneID] else { throw miss(.zone(zoneID)) }
        return known
    }

    package func zoneRows(ownedBy ownerID: String) throws -> [(zone: ZoneRow, recordCount: Int)] {
        guard let known = t.ownedZones[ownerID] else { throw miss(.ownedZones(ownerID)) }
        return known
    }

    package func insertZone(uid: [UInt8], id: ZoneID, created: Double) throws -> Int64 {
        if try zoneRow(id) != nil { throw StoreError(.alreadyExists, "zone '\(id.name)' already exists") }
        guard let rowID = t.newZoneIDs[id] else { throw miss(.newZoneID(id)) }
        try write(.insertZone(rowID: rowID, uid: uid, id: id, created: created))
        t.zones[id] = ZoneRow(rowID: rowID, uid: uid, id: id, sequence: 0, created: Date(timeIntervalSince1970: created), logFormat: 1)
        t.heads[rowID] = .some(nil)
        t.logs[rowID] = (0, [])
        t.wrappedKeys[rowID] = [:]
        t.chainedKeys[rowID] = [:]
        t.schemaRows[rowID] = [:]
        t.records[rowID] = [:]
        t.tombstoneFlags[rowID] = false
        t.zoneDetails.insert(rowID)
        return rowID
    }

    package func markZoneLogged(zoneRowID: Int64) throws {} // every zone on PostgreSQL has a log

    package func deleteZone(zoneRowID: Int64) throws {
        try write(.deleteZone(rowID: zoneRowID))
        for (id, row) in t.zones where row?.rowID == zoneRowID { t.zones[id] = .some(nil) }
    }

    package func deletedZone(uid: [UInt8]) throws -> DeletedZoneRow? {
        guard let known = t.deletedZones[uid] else { throw miss(.deletedZone(uid: uid)) }
        return known
    }

    package func touchZone(zoneRowID: Int64) throws { try write(.touchZone(rowID: zoneRowID)) }

    package func noteZoneGone(_ zone: ZoneRow, for users: Set<String>, reason: String) throws {
        try write(.zoneGone(zone, users: users, reason: reason))
    }

    package func noteZoneBack(_ zone: ZoneRow, for user: String) throws { try write(.zoneBack(zone, user: user)) }

    // MARK: Zone logs

    package func logHead(zoneRowID: Int64) throws -> (seq: Int64, hash: Digest32)? {
        guard let head = t.heads[zoneRowID] else { throw miss(.log(zoneRowID: zoneRowID, after: Int64.max)) }
        return head
    }

    package func logEntries(zoneRowID: Int64, after seq: Int64) throws -> [StoredLogEntry] {
        guard let known = t.logs[zoneRowID], known.after <= seq else { throw miss(.log(zoneRowID: zoneRowID, after: seq)) }
        return known.entries.filter { $0.seq > seq }
    }

    package func logEntry(zoneRowID: Int64, seq: Int64) throws -> StoredLogEntry? {
        if let known = t.entries[zoneRowID]?[seq] { return known }
        if let head = t.heads[zoneRowID], (head?.seq ?? 0) < seq { return nil }
        throw miss(.logEntry(zoneRowID: zoneRowID, seq: seq))
    }

    package func appendLogEntry(zoneRowID: Int64, entry: LogEntry, body: [UInt8], signature: [UInt8], hash: Digest32,
                        entries list: [UInt8]?, names: [UInt8]?) throws {
        let head = try logHead(zoneRowID: zoneRowID)?.seq ?? 0
        // The session verified a newer head than this run read (another of its operations
        // committed since): this run's reads are stale, and it runs again on fresh ones.
        if entry.seq > head + 1 { throw SnapshotConflict() }
        guard entry.seq == head + 1 else { throw StoreError(.internalError, "a log entry was written past the zone's head") }
        try write(.appendLog(zoneRowID: zoneRowID, head: head, entry: entry, body: body, signature: signature, hash: hash,
                             entries: list, names: names))
        let stored = StoredLogEntry(seq: entry.seq, body: body, signature: signature, entries: list, names: names)
        t.heads[zoneRowID] = .some((entry.seq, hash))
        if var known = t.logs[zoneRowID] {
            known.entries.append(StoredLogEntry(seq: entry.seq, body: body, signature: signature, entries: nil, names: nil))
            t.logs[zoneRowID] = known
        }
        t.entries[zoneRowID, default: [:]][entry.seq] = .some(stored)
    }

    // MARK: Zone keys

    private func requireDetails(_ zoneRowID: Int64) throws {
        guard t.zoneDetails.contains(zoneRowID) else {
            // Keys and schema come with the zone's row: find the zone this row id is.
            guard let id = t.zones.first(where: { $0.value?.rowID == zoneRowID })?.key else {
                throw StoreError(.internalError, "a zone was used before its row was read")
            }
            throw miss(.zone(id))
        }
    }

    package func wrappedKey(zoneRowID: Int64, epoch: Int64, memberID: String) throws -> [UInt8]? {
        try requireDetails(zoneRowID)
        return t.wrappedKeys[zoneRowID]?[epoch]?[memberID]
    }

    package func chainedKey(zoneRowID: Int64, epoch: Int64) throws -> [UInt8]? {
        try requireDetails(zoneRowID)
        return t.chainedKeys[zoneRowID]?[epoch]
    }

    package func insertWrappedKey(zoneRowID: Int64, epoch: Int64, memberID: String, wrapped: [UInt8]) throws {
        try write(.wrappedKey(zoneRowID: zoneRowID, epoch: epoch, memberID: memberID, wrapped: wrapped))
        t.wrappedKeys[zoneRowID, default: [:]][epoch, default: [:]][memberID] = wrapped
    }

    // MARK: Shares

    package func storeWrappedKey(zoneRowID: Int64, epoch: Int64, memberID: String, wrapped: [UInt8]) throws {
        try write(.storeWrappedKey(zoneRowID: zoneRowID, epoch: epoch, memberID: memberID, wrapped: wrapped))
        t.wrappedKeys[zoneRowID, default: [:]][epoch, default: [:]][memberID] = wrapped
    }

    package func deleteWrappedKeys(zoneRowID: Int64, memberID: String?) throws {
        try write(.deleteWrappedKeys(zoneRowID: zoneRowID, memberID: memberID))
        if let memberID {
            for epoch in (t.wrappedKeys[zoneRowID] ?? [:]).keys { t.wrappedKeys[zoneRowID]?[epoch]?[memberID] = nil }
        } else {
            t.wrappedKeys[zoneRowID] = [:]
        }
    }

    package func storeChainedKey(zoneRowID: Int64, epoch: Int64, sealed: [UInt8]) throws {
        try write(.storeChainedKey(zoneRowID: zoneRowID, epoch: epoch, sealed: sealed))
        t.chainedKeys[zoneRowID, default: [:]][epoch] = sealed
    }

    package func deleteOlderKeys(zoneRowID: Int64, before epoch: Int64) throws {
        try write(.deleteOlderKeys(zoneRowID: zoneRowID, before: epoch))
        t.chainedKeys[zoneRowID] = [:]
        t.wrappedKeys[zoneRowID] = t.wrappedKeys[zoneRowID]?.filter { $0.key >= epoch }
    }

    package func noteZoneEpoch(zoneRowID: Int64, epoch: Int64) throws {} // PostgreSQL keeps no copy of the log's epoch

    package func shareLink(zoneRowID: Int64) throws -> (epoch: Int64, sealedKey: [UInt8], sealedSecret: [UInt8])? {
        try requireDetails(zoneRowID)
        return t.shareLinks[zoneRowID] ?? nil
    }

    package func storeShareLink(zoneRowID: Int64, epoch: Int64, sealedKey: [UInt8], sealedSecret: [UInt8]) throws {
        try write(.storeShareLink(zoneRowID: zoneRowID, epoch: epoch, sealedKey: sealedKey, sealedSecret: sealedSecret))
        t.shareLinks[zoneRowID] = .some((epoch, sealedKey, sealedSecret))
    }

    package func deleteShareLink(zoneRowID: Int64) throws {
        try write(.deleteShareLink(zoneRowID: zoneRowID))
        t.shareLinks[zoneRowID] = .some(nil)
    }

    package func setZoneMembers(zoneRowID: Int64, members: Set<String>, shareUID: [UInt8]?) throws {
        try write(.setZoneMembers(zoneRowID: zoneRowID, members: members, shareUID: shareUID))
    }

    package func addZoneMember(zoneRowID: Int64, userID: String) throws {
        try write(.addZoneMember(zoneRowID: zoneRowID, userID: userID))
    }

    package func zoneRows(shareUID: [UInt8]) throws -> [ZoneRow] {
        guard let known = t.shareZones[shareUID] else { throw miss(.shareZones(shareUID: shareUID)) }
        return known
    }

    package func zoneRows(ownedByOrListing userID: String) throws -> [ZoneRow] {
        guard let known = t.listingZones[userID] else { throw miss(.listingZones(userID: userID)) }
        return known
    }

    package func zoneRows(sharedWith memberID: String) throws -> [(zone: ZoneRow, recordCount: Int)] {
        guard let known = t.sharedZones[memberID] else { throw miss(.sharedZones(memberID: memberID)) }
        return known
    }

    // MARK: Schema

    package func fieldSchemaRows(zoneRowID: Int64, recordType: String) throws -> [(field: String, valueType: String, encrypted: Bool)] {
        try requireDetails(zoneRowID)
        return t.schemaRows[zoneRowID]?[recordType] ?? []
    }

    package func insertFieldSchema(zoneRowID: Int64, recordType: String, field: String, schema: FieldSchema) throws {
        try write(.fieldSchema(zoneRowID: zoneRowID, recordType: recordType, field: field, schema: schema))
        t.schemaRows[zoneRowID, default: [:]][recordType, default: []].append((field, schema.type.description, schema.encrypted))
    }

    package func allFieldSchemaRows(zoneRowID: Int64) throws -> [String: [(field: String, valueType: String, encrypted: Bool)]] {
        try requireDetails(zoneRowID)
        return t.schemaRows[zoneRowID] ?? [:]
    }

    package func deleteFieldSchema(zoneRowID: Int64, recordType: String, field: String) throws {
        try write(.dropFieldSchema(zoneRowID: zoneRowID, recordType: recordType, field: field))
        t.schemaRows[zoneRowID]?[recordType]?.removeAll { $0.field == field }
        if t.schemaRows[zoneRowID]?[recordType]?.isEmpty == true { t.schemaRows[zoneRowID]?[recordType] = nil }
    }

    // MARK: Contacts

    package func contactCard(userID: String) throws -> (card: [UInt8], added: Double)? {
        guard let known = t.contacts[userID] else { throw miss(.contact(userID)) }
        return known
    }

    package func prefetchContacts(userIDs: [String]) throws {
        let unknown = Set(userIDs).filter { t.contacts[$0] == nil }
        guard !unknown.isEmpty else { return }
        for id in unknown.sorted() { _ = miss(.contact(id)) }
        throw Miss()
    }

    package static func searchKey(email: String?, name: String?) -> String { "\(email.map { "e:" + $0 } ?? "")\u{0}\(name.map { "n:" + $0 } ?? "")" }

    package func contactUserIDs(email: String?, name: String?) throws -> [String] {
        guard let ids = t.contactSearches[Self.searchKey(email: email, name: name)] else { throw miss(.contactIDs(email: email, name: name)) }
        return ids
    }

    package func storeContact(userID: String, name: String, email: String?, signingKey: [UInt8], boxKey: [UInt8], card: [UInt8],
                      cardCreated: String, added: Double) throws {
        try write(.contact(userID: userID, name: name, email: email, signingKey: signingKey, boxKey: boxKey, card: card,
                           cardCreated: cardCreated, added: added))
        t.contacts[userID] = .some((card, added))
    }

    // MARK: Records

    /// The rows of `names` (nil: none of that name), fetching every unknown one in one go.
    private func rows(_ zoneRowID: Int64, _ names: [String]) throws -> [StoredRow?] {
        let known = t.records[zoneRowID] ?? [:]
        let unknown = names.filter { known[$0] == nil }
        guard unknown.isEmpty else { throw miss(.records(zoneRowID: zoneRowID, names: unknown)) }
        return names.map { known[$0] ?? nil }
    }

    private func row(_ zoneRowID: Int64, _ name: String) throws -> StoredRow? { try rows(zoneRowID, [name])[0] }

    package func recordRow(zoneRowID: Int64, name: String) throws -> StoredRow? { try row(zoneRowID, name) }

    package func readRecordRows(zoneRowID: Int64, names: [String], into add: (StoredRow) -> Void) throws {
        for case let row? in try rows(zoneRowID, names) { add(row) }
    }

    package func readRecordRows(zoneRowID: Int64, after: String, limit: Int, into add: (StoredRow) -> Void) throws {
        guard let names = t.pages[zoneRowID]?["\(limit):\(after)"] else { throw miss(.page(zoneRowID: zoneRowID, after: after, limit: limit)) }
        for case let row? in try rows(zoneRowID, names) { add(row) }
    }

    package func readRecordRows(zoneRowID: Int64, sealedBefore epoch: Int64, after: String, limit: Int, into add: (StoredRow) -> Void) throws {
        let key = "sealed<\(epoch):\(limit):\(after)"
        guard let names = t.pages[zoneRowID]?[key] else { throw miss(.sealedPage(zoneRowID: zoneRowID, before: epoch, after: after, limit: limit)) }
        for case let row? in try rows(zoneRowID, names) { add(row) }
    }

    package func recordTypes(zoneRowID: Int64, names: [String]) throws -> [String: String] {
        var types = [String: String]()
        for case let row? in try rows(zoneRowID, names) { types[row.name] = row.type }
        return types
    }

    package func recordParent(zoneRowID: Int64, name: String) throws -> String?? {
        guard let row = try row(zoneRowID, name) else { return nil }
        return .some(row.parent)
    }

    package func children(zoneRowID: Int64, of parent: String) throws -> [String] {
        guard let fetched = t.childNames[zoneRowID]?[parent] else { throw miss(.children(zoneRowID: zoneRowID, parent: parent)) }
        // As this operation's writes leave them: a fetched child may have moved or gone, and a
        // row written here may name the parent.
        let known = t.records[zoneRowID] ?? [:]
        var names = Set(fetched.filter { name in known[name].map { $0?.parent == parent } ?? true })
        for (name, row) in known where row?.parent == parent { names.insert(name) }
        return names.sorted()
    }

    package func hasChildren(zoneRowID: Int64, parent: String) throws -> Bool { try !children(zoneRowID: zoneRowID, of: parent).isEmpty }

    package func recordExists(zoneRowID: Int64, name: String) throws -> Bool { try row(zoneRowID, name) != nil }

    package func insertRecord(_ version: SealedVersion, zoneRowID: Int64) throws {
        guard try row(zoneRowID, version.stamp.name) == nil else {
            throw StoreError(.internalError, "record '\(version.stamp.name)' could not be written: the zone has a row of that name")
        }
        try write(.insertRecord(zoneRowID: zoneRowID, version))
        t.records[zoneRowID, default: [:]][version.stamp.name] = .some(Self.row(version))
    }

    package func replaceRecord(_ version: SealedVersion, zoneRowID: Int64) throws {
        guard let stored = try row(zoneRowID, version.stamp.name), stored.type == version.stamp.type else {
            throw StoreError(.internalError, "record '\(version.stamp.name)' could not be rewritten")
        }
        try write(.replaceRecord(zoneRowID: zoneRowID, version, storedSeq: stored.seq, keep: false))
        t.records[zoneRowID, default: [:]][version.stamp.name] = .some(Self.row(version))
    }

    package func deleteRecord(zoneRowID: Int64, name: String, expectedSeq: Int64?) throws -> Bool {
        guard let stored = try row(zoneRowID, name), expectedSeq == nil || stored.seq == expectedSeq else { return false }
        try write(.deleteRecord(zoneRowID: zoneRowID, name: name, storedSeq: stored.seq))
        t.records[zoneRowID, default: [:]][name] = .some(nil)
        return true
    }

    func recordWriter(zoneRowID: Int64, authorID: String) throws -> any RecordRowWriter {
        PostgresRecordWriter(snapshot: self, zoneRowID: zoneRowID)
    }

    package func prefetchRecords(zoneRowID: Int64, saving records: [Record], deleting deletions: [RecordDeletion]) throws {
        _ = try rows(zoneRowID, records.map(\.name) + deletions.map(\.name))
    }

    package func prefetchAncestors(zoneRowID: Int64, of name: String) throws {
        // Known when the walk up from `name` through the rows read ends at a root or a missing row.
        var current: String? = name, seen = Set<String>()
        while let step = current, seen.insert(step).inserted {
            guard let known = t.records[zoneRowID]?[step] else { throw miss(.ancestors(zoneRowID: zoneRowID, of: step)) }
            current = known?.parent
        }
    }

    package func prefetchParentChecks(zoneRowID: Int64, children: [String], parents: [String]) throws {
        let known = t.records[zoneRowID] ?? [:]
        let rowsNeeded = Array(Set(parents).filter { known[$0] == nil })
        let childrenNeeded = Array(Set(children).filter { t.childNames[zoneRowID]?[$0] == nil })
        if !rowsNeeded.isEmpty { _ = miss(.records(zoneRowID: zoneRowID, names: rowsNeeded.sorted())) }
        if !childrenNeeded.isEmpty { _ = miss(.childrenOfAny(zoneRowID: zoneRowID, parents: childrenNeeded.sorted())) }
        if missed { throw Miss() }
    }

    package final class PostgresRecordWriter: RecordRowWriter {
        package let snapshot: StorageSnapshot
        package let zoneRowID: Int64

        package init(snapshot: StorageSnapshot, zoneRowID: Int64) {
            self.snapshot = snapshot
            self.zoneRowID = zoneRowID
        }

        package func insertIfAbsent(_ version: SealedVersion) throws -> Bool {
            guard try snapshot.row(zoneRowID, version.stamp.name) == nil else { return false }
            try snapshot.insertRecord(version, zoneRowID: zoneRowID)
            return true
        }

        package func update(_ version: SealedVersion, expectedSeq: Int64?) throws -> (creator: String, created: Double)? {
            guard let stored = try snapshot.row(zoneRowID, version.stamp.name), stored.type == version.stamp.type,
                  expectedSeq == nil || stored.seq == expectedSeq else { return nil }
            try snapshot.write(.replaceRecord(zoneRowID: zoneRowID, version, storedSeq: stored.seq, keep: true))
            var kept = version.stamp
            kept.creatorID = stored.creatorID
            kept.created = stored.created
            snapshot.t.records[zoneRowID, default: [:]][kept.name] = .some(StorageSnapshot.row(SealedVersion(
                stamp: kept, plain: version.plain, plainTypes: version.plainTypes, sealed: version.sealed, digest: version.digest)))
            return (stored.creatorID, stored.created)
        }

        package func finish() {}
    }

    package static func row(_ version: SealedVersion) -> StoredRow {
        let v = version.stamp
        return StoredRow.make(name: v.name, type: v.type, parent: v.parent, epoch: v.epoch, seq: v.seq, membershipSeq: v.membershipSeq,
                              creatorID: v.creatorID, modifierID: v.modifierID, created: v.created, modified: v.modified,
                              plain: version.plain, sealed: version.sealed)
    }

    // MARK: Queries

    func queryRecordRows(zoneRowID: Int64, plan: QueryPlan, into add: (StoredRow) -> Void) throws -> Bool {
        guard let page = t.queries[zoneRowID]?[plan] else { throw miss(.query(zoneRowID: zoneRowID, plan: plan)) }
        for case let row? in try rows(zoneRowID, page.names) { add(row) }
        return page.more
    }

    func querySortValues(zoneRowID: Int64, plan: QueryPlan, name: String) throws -> [QueryCursor.SortValue] {
        guard let page = t.queries[zoneRowID]?[plan] else { throw miss(.query(zoneRowID: zoneRowID, plan: plan)) }
        guard page.names.last == name, let values = page.lastSortValues else {
            throw StoreError(.internalError, "the sort values of record '\(name)' were not read with its page")
        }
        return values
    }

    // MARK: Tombstones

    package func addTombstone(zoneRowID: Int64, name: String, seq: Int64, authorID: String, label: String?, time: Double) throws {
        try write(.addTombstone(zoneRowID: zoneRowID, name: name, seq: seq, authorID: authorID, label: label, time: time))
        t.tombstoneFlags[zoneRowID] = true
    }

    package func removeTombstone(zoneRowID: Int64, name: String) throws {
        try write(.removeTombstone(zoneRowID: zoneRowID, name: name))
    }

    package func hasTombstones(zoneRowID: Int64) throws -> Bool {
        guard let known = t.tombstoneFlags[zoneRowID] else { throw miss(.tombstones(zoneRowID: zoneRowID)) }
        return known
    }

    // MARK: Change feeds

    /// The key of a page of a change feed in ``Tables``.
    package static func pageKey(_ seq: Int64, _ name: String?, _ limit: Int) -> String { "\(seq):\(limit):\(name.map { "+" + $0 } ?? "")" }

    package func compactedSeq(zoneRowID: Int64) throws -> Int64 {
        try requireDetails(zoneRowID)
        return t.compacted[zoneRowID] ?? 0
    }

    package func zoneExists(uid: [UInt8]) throws -> Bool {
        guard let known = t.uids[uid] else { throw miss(.zoneUID(uid)) }
        return known
    }

    package func changedRecordRows(zoneRowID: Int64, afterSeq: Int64, afterName: String?, limit: Int) throws
        -> [(seq: Int64, name: String, row: Result<StoredRow, StoreError>)] {
        guard let names = t.changePages[zoneRowID]?[Self.pageKey(afterSeq, afterName, limit)] else {
            throw miss(.changes(zoneRowID: zoneRowID, afterSeq: afterSeq, afterName: afterName, limit: limit))
        }
        return try rows(zoneRowID, names).compactMap { $0.map { ($0.seq, $0.name, .success($0)) } }
    }

    package func tombstones(zoneRowID: Int64, afterSeq: Int64, afterName: String?, limit: Int) throws -> [(seq: Int64, name: String)] {
        guard let list = t.tombstonePages[zoneRowID]?[Self.pageKey(afterSeq, afterName, limit)] else {
            throw miss(.changes(zoneRowID: zoneRowID, afterSeq: afterSeq, afterName: afterName, limit: limit))
        }
        return list
    }

    package func compactTombstones(zoneRowID: Int64, through horizon: Int64) throws -> Int {
        guard let count = t.tombstoneCounts[zoneRowID]?[horizon] else { throw miss(.tombstoneCount(zoneRowID: zoneRowID, through: horizon)) }
        try write(.compactTombstones(zoneRowID: zoneRowID, through: horizon))
        return count
    }

    package func databaseCounter() throws -> (current: Int64, compacted: Int64) {
        guard let counter = t.counter else { throw miss(.counter) }
        return counter
    }

    package func zoneRowsChanged(ownedBy ownerID: String, since: Int64) throws -> [ZoneRow] {
        guard let rows = t.changedZones[ownerID]?[since] else { throw miss(.changedZones(ownerID: ownerID, since: since)) }
        return rows
    }

    package func zoneRowsChanged(sharedWith memberID: String, since: Int64) throws -> [ZoneRow] {
        guard let rows = t.changedSharedZones[memberID]?[since] else { throw miss(.changedSharedZones(memberID: memberID, since: since)) }
        return rows
    }

    package func zoneTombstones(userID: String, since: Int64, owned: Bool) throws -> [DeletedZone] {
        guard let list = t.zoneTombstones["\(owned):\(since):\(userID)"] else { throw miss(.zoneTombstones(userID: userID, since: since, owned: owned)) }
        return list
    }

    // MARK: Audit

    package func contactColumns() throws -> [(userID: String, name: String, email: String?, signingKey: [UInt8], boxKey: [UInt8], cardCreated: String)] {
        guard let known = t.contactColumns else { throw miss(.contactColumns) }
        return known
    }

    package func zoneCaches(zoneRowID: Int64) throws -> (sequence: Int64, epoch: Int64?, shareUID: [UInt8]?) {
        try requireDetails(zoneRowID)
        guard let zone = t.zones.values.first(where: { $0?.rowID == zoneRowID }) ?? nil else {
            throw StoreError(.zoneNotFound, "the zone was deleted")
        }
        return (zone.sequence, nil, t.zoneShareUIDs[zoneRowID] ?? nil)
    }

    package func zoneMemberIDs(zoneRowID: Int64) throws -> Set<String> {
        try requireDetails(zoneRowID)
        return t.zoneMembers[zoneRowID] ?? []
    }

    package func storedLogHashes(zoneRowID: Int64) throws -> [Int64: [UInt8]] {
        guard let known = t.logHashes[zoneRowID] else { throw miss(.logHashes(zoneRowID: zoneRowID)) }
        return known
    }

    package func tombstoneSeqs(zoneRowID: Int64) throws -> [String: Int64] {
        guard let known = t.tombstoneLists[zoneRowID] else { throw miss(.tombstoneList(zoneRowID: zoneRowID)) }
        return known
    }

    // MARK: Transactions

    func afterCommit(using hooks: CommitHooks, _ work: @escaping @Sendable () -> Void) { commitWork.append(work) }

    package func afterTransaction(onCommit: @escaping @Sendable () -> Void, onRollback: @escaping @Sendable () -> Void) {
        commitWork.append(onCommit)
        rollbackWork.append(onRollback)
    }
}

extension StorageSnapshot.Tables: Sendable where Row: Sendable {}

extension StorageSnapshot.Write {
    /// The zone a write is to, by row id (nil for a contact card).
    package var zoneRowID: Int64? {
        switch self {
        case .insertZone(let z, _, _, _), .deleteZone(let z), .touchZone(let z), .appendLog(let z, _, _, _, _, _, _, _),
             .wrappedKey(let z, _, _, _), .fieldSchema(let z, _, _, _), .dropFieldSchema(let z, _, _), .insertRecord(let z, _), .replaceRecord(let z, _, _, _),
             .deleteRecord(let z, _, _), .addTombstone(let z, _, _, _, _, _), .removeTombstone(let z, _), .compactTombstones(let z, _),
             .storeWrappedKey(let z, _, _, _), .deleteWrappedKeys(let z, _), .storeChainedKey(let z, _, _), .storeShareLink(let z, _, _, _),
             .deleteShareLink(let z), .deleteOlderKeys(let z, _), .setZoneMembers(let z, _, _), .addZoneMember(let z, _):
            return z
        case .zoneGone(let zone, _, _), .zoneBack(let zone, _):
            return zone.rowID
        case .contact:
            return nil
        }
    }
}

import CofferCrypto
import Foundation
import Logging
import PostgresNIO

/// A Coffer store in a PostgreSQL database: the schema of ``PostgresMigrations``, reached
/// through a ``PostgresConnector`` (a pool with timeouts of its own), and the driver that runs
/// the engine's operations against ``StorageSnapshot``s.
final class PostgresStorage: SnapshotDriver {
    let connector: PostgresConnector
    let storeID: [UInt8]
    /// Wakes live change streams when a commit touches a zone.
    let changes: PostgresChangeListener
    var logger: Logger { connector.logger }

    private init(connector: PostgresConnector, storeID: [UInt8]) {
        self.connector = connector
        self.storeID = storeID
        changes = PostgresChangeListener(connector: connector)
    }

    /// Connects, applies the migrations the database lacks, and reads the store's id.
    static func open(url: PostgresURL, password: String?, timeouts: PostgresConnector.Timeouts, logger: Logger) async throws -> PostgresStorage {
        let connector = PostgresConnector(url: url, password: password, timeouts: timeouts, logger: logger)
        do {
            let id = try await PostgresMigrations.migrate(connector)
            return PostgresStorage(connector: connector, storeID: id)
        } catch let error as PostgresDecodingError {
            await connector.close()
            throw changed(error)
        } catch {
            await connector.close()
            throw error
        }
    }

    func close() async {
        await changes.stop()
        await connector.close()
    }

    func waitForChange(upTo interval: Duration) async throws {
        await changes.wait(upTo: interval)
        try Task.checkCancellation()
    }

    var storeDescription: String { "the PostgreSQL store at \(connector.url.serverDescription)" }

    /// A row that holds what Coffer never writes there (NULL in a column it always fills, or a
    /// value of another type): someone changed the database past its constraints. Names the
    /// column, never the value.
    static func changed(_ error: PostgresDecodingError) -> StoreError {
        StoreError(.integrityFailure, "column '\(error.columnName)' holds NULL or a value of another type than Coffer writes: the store was changed")
    }

    // MARK: - Reads

    private static let recordColumns = "name, type, parent, plain, sealed, epoch, seq, creator_id, modifier_id, created_at, modified_at, membership_seq"

    /// Fetches what a run of `snapshot` missed, in one read-only transaction (one snapshot of
    /// the database for all of it).
    func fetch(_ needs: [StorageSnapshot.Need], into snapshot: StorageSnapshot) async throws {
        do { try await fetchRows(needs, into: snapshot) } catch let error as PostgresDecodingError { throw Self.changed(error) }
    }

    private func fetchRows(_ needs: [StorageSnapshot.Need], into snapshot: StorageSnapshot) async throws {
        let basis = snapshot.basis
        let (rows, moved) = try await connector.transaction { tx in
            try await tx.query("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ")
            return try await Self.read(needs, basis: basis, tx)
        }
        snapshot.absorb(rows, moved: moved) { $0.row }
    }

    /// Reads `needs` in the transaction `tx` (at REPEATABLE READ: one state of the database for
    /// all of it), with whether a zone `basis` read before moved on since.
    fileprivate static func read(_ needs: [StorageSnapshot.Need], basis: StorageSnapshot.FetchBasis,
                                 _ tx: PostgresTransaction) async throws -> (Fetched, moved: Bool) {
        // Whether a zone read before moved on since, or went: what was read of it then is stale.
        var moved = false
        for (zone, seq) in basis.heads {
            let now = try await tx.query("SELECT max(seq) FROM zone_log WHERE zone_id = \(zone)").first?.decode(Int64?.self)
            if now != seq { moved = true }
        }
        if !moved, !basis.zones.isEmpty {
            let ids = basis.zones.sorted()
            let present = try await tx.query("SELECT count(*) FROM zone WHERE id = ANY(\(ids))").first?.decode(Int64.self) ?? 0
            if present != Int64(ids.count) { moved = true }
        }
        var fetched = Fetched()
        var cards = [String](), logEntries = [Int64: [Int64]]()
        for need in needs {
            switch need {
            case .contact(let user): cards.append(user)
            case .logEntry(let zone, let seq): logEntries[zone, default: []].append(seq)
            default: try await Self.fetch(need, tx, into: &fetched)
            }
        }
        for (zone, seqs) in logEntries.sorted(by: { $0.key < $1.key }) { try await Self.fetchLogEntries(seqs, zone: zone, tx, into: &fetched) }
        // The authors of entries read, whose cards check their signatures.
        let authors = Set(fetched.logs.values.flatMap { $0.entries.compactMap { LogEntry.decode($0.body)?.authorID } })
            .subtracting(basis.contacts).subtracting(fetched.contacts.keys)
        try await Self.fetchContacts(Array(Set(cards).union(authors)).sorted(), tx, into: &fetched)
        return (fetched, moved)
    }

    /// A pin of one REPEATABLE READ transaction, held open on one connection until closed
    /// (see ``PostgresReadPin``).
    func pinReads() async throws -> (any ReadPin)? { PostgresReadPin(connector: connector) }

    /// What one fetch read, merged into the snapshot once the read transaction ends.
    typealias Fetched = StorageSnapshot.Tables<RowValues>

    private static func fetch(_ need: StorageSnapshot.Need, _ tx: PostgresTransaction, into f: inout Fetched) async throws {
        // Kept as one function: a switch with one query per kind of read (`StorageSnapshot.Need`), listed
        // together so that a new kind is added beside the others, as in `SQLiteSnapshotDriver`.
        switch need {
        case .zone(let id):
            guard let row = try await tx.query("SELECT id, uid, sequence, created_at, compacted_seq FROM zone WHERE owner_id = \(id.ownerID) AND name = \(id.name)").first else {
                f.zones[id] = .some(nil)
                return
            }
            let (rowID, uid, sequence, created, compacted) = try row.decode((Int64, Data, Int64, Double, Int64).self)
            f.compacted[rowID] = compacted
            guard uid.count == 16 else { throw StoreError(.integrityFailure, "zone '\(id.name)' has a damaged row: the store was changed") }
            f.zones[id] = ZoneRow(rowID: rowID, uid: Array(uid), id: id, sequence: sequence, created: Date(timeIntervalSince1970: created), logFormat: 1)
            try await fetchHead(rowID, tx, into: &f)
            var keys = [Int64: [String: [UInt8]]]()
            for row in try await tx.query("SELECT epoch, member_id, wrapped_key FROM zone_key WHERE zone_id = \(rowID)") {
                let (epoch, member, wrapped) = try row.decode((Int64, String, Data).self)
                keys[epoch, default: [:]][member] = Array(wrapped)
            }
            f.wrappedKeys[rowID] = keys
            var chain = [Int64: [UInt8]]()
            for row in try await tx.query("SELECT epoch, sealed_key FROM zone_key_chain WHERE zone_id = \(rowID)") {
                let (epoch, sealed) = try row.decode((Int64, Data).self)
                chain[epoch] = Array(sealed)
            }
            f.chainedKeys[rowID] = chain
            var schema = [String: [(field: String, valueType: String, encrypted: Bool)]]()
            for row in try await tx.query("SELECT record_type, field, value_type, encrypted FROM field_schema WHERE zone_id = \(rowID)") {
                let (type, field, valueType, encrypted) = try row.decode((String, String, String, Bool).self)
                schema[type, default: []].append((field, valueType, encrypted))
            }
            f.schemaRows[rowID] = schema
            f.zoneShareUIDs[rowID] = try await tx.query("SELECT share_uid FROM zone WHERE id = \(rowID)").first?.decode(Data?.self).map(Array.init)
            f.zoneMembers[rowID] = Set(try await tx.query("SELECT user_id FROM zone_member WHERE zone_id = \(rowID)").map { try $0.decode(String.self) })
            let link = try await tx.query("SELECT epoch, sealed_key, sealed_secret FROM share_link WHERE zone_id = \(rowID)").first
            f.shareLinks[rowID] = .some(try link.map { row in
                let (epoch, key, secret) = try row.decode((Int64, Data, Data).self)
                return (epoch, Array(key), Array(secret))
            })
            try await fetch(.tombstones(zoneRowID: rowID), tx, into: &f)
            f.zoneDetails.insert(rowID)
        case .ownedZones(let owner):
            var list = [(zone: ZoneRow, recordCount: Int)]()
            for row in try await tx.query("""
                SELECT z.id, z.uid, z.name, z.sequence, z.created_at, (SELECT count(*) FROM record r WHERE r.zone_id = z.id)
                FROM zone z WHERE z.owner_id = \(owner) ORDER BY z.name
                """) {
                let (rowID, uid, name, sequence, created, count) = try row.decode((Int64, Data, String, Int64, Double, Int64).self)
                guard uid.count == 16 else { throw StoreError(.integrityFailure, "zone '\(Names.printable(name))' has a damaged row: the store was changed") }
                let zone = ZoneRow(rowID: rowID, uid: Array(uid), id: ZoneID(name: name, ownerID: owner), sequence: sequence,
                                   created: Date(timeIntervalSince1970: created), logFormat: 1)
                list.append((zone, Int(count)))
                f.zones[zone.id] = zone // its keys and schema are fetched by name when asked for
            }
            f.ownedZones[owner] = list
        case .newZoneID(let id):
            guard let row = try await tx.query("SELECT nextval(pg_get_serial_sequence('zone', 'id'))").first else {
                throw StoreError(.internalError, "PostgreSQL gave no zone id")
            }
            f.newZoneIDs[id] = try row.decode(Int64.self)
        case .log(let zone, let after):
            try await fetchHead(zone, tx, into: &f)
            guard after != .max else { return }
            var list = [StoredLogEntry]()
            for row in try await tx.query("SELECT seq, body, signature FROM zone_log WHERE zone_id = \(zone) AND seq > \(after) ORDER BY seq") {
                let (seq, body, signature) = try row.decode((Int64, Data, Data).self)
                list.append(StoredLogEntry(seq: seq, body: Array(body), signature: Array(signature), entries: nil, names: nil))
            }
            f.logs[zone] = (after, list)
        case .logEntry(let zone, let seq):
            try await fetchLogEntries([seq], zone: zone, tx, into: &f)
        case .contact(let user):
            let row = try await tx.query("SELECT card, added_at FROM contact WHERE user_id = \(user)").first
            // `.some(nil)`: the store has no card for the user (assigning nil would drop the key).
            f.contacts[user] = .some(try row.map { row in
                let (card, added) = try row.decode((Data, Double).self)
                return (Array(card), added)
            })
        case .contactIDs(let email, let name):
            let rows: [PostgresRow]
            if let email {
                rows = try await tx.query("SELECT user_id FROM contact WHERE lower(email) = lower(\(email))")
            } else if let name {
                rows = try await tx.query("SELECT user_id FROM contact WHERE lower(name) = lower(\(name))")
            } else {
                rows = try await tx.query("SELECT user_id FROM contact")
            }
            f.contactSearches[StorageSnapshot.searchKey(email: email, name: name)] = try rows.map { try $0.decode(String.self) }
        case .records(let zone, let names):
            var found = [String: RowValues?]()
            for name in names { found[name] = .some(nil) }
            for row in try await tx.query(PostgresQuery(unsafeSQL: "SELECT \(recordColumns) FROM record WHERE zone_id = $1 AND name = ANY($2)",
                                                        binds: try binds(zone, names))) {
                let stored = try storedRow(row)
                found[stored.name] = .some(stored)
            }
            f.records[zone, default: [:]].merge(found) { _, new in new }
        case .page(let zone, let after, let limit):
            var names = [String]()
            for row in try await tx.query(PostgresQuery(unsafeSQL: "SELECT \(recordColumns) FROM record WHERE zone_id = $1 AND name > $2 ORDER BY name LIMIT $3",
                                                        binds: try binds(zone, after, Int64(limit)))) {
                let stored = try storedRow(row)
                names.append(stored.name)
                f.records[zone, default: [:]][stored.name] = .some(stored)
            }
            f.pages[zone, default: [:]]["\(limit):\(after)"] = names
        case .sealedPage(let zone, let epoch, let after, let limit):
            var names = [String]()
            for row in try await tx.query(PostgresQuery(unsafeSQL: """
                SELECT \(recordColumns) FROM record WHERE zone_id = $1 AND sealed IS NOT NULL AND epoch < $2 AND name > $3 ORDER BY name LIMIT $4
                """, binds: try binds(zone, epoch, after, Int64(limit)))) {
                let stored = try storedRow(row)
                names.append(stored.name)
                f.records[zone, default: [:]][stored.name] = .some(stored)
            }
            f.pages[zone, default: [:]]["sealed<\(epoch):\(limit):\(after)"] = names
        case .ancestors(let zone, let name):
            // The chain of parents above `name`, in one statement (a loop stored in the table
            // ends at the depth limit).
            var parents = [String: String?]()
            for row in try await tx.query(PostgresQuery(unsafeSQL: """
                WITH RECURSIVE a(name, parent, depth) AS (
                    SELECT name, parent, 0 FROM record WHERE zone_id = $1 AND name = $2
                    UNION ALL
                    SELECT r.name, r.parent, a.depth + 1 FROM record r JOIN a ON r.zone_id = $1 AND r.name = a.parent WHERE a.depth < 10000
                )
                SELECT \(recordColumns) FROM record WHERE zone_id = $1 AND name IN (SELECT name FROM a)
                """, binds: try binds(zone, name))) {
                let stored = try storedRow(row)
                parents[stored.name] = stored.parent
                f.records[zone, default: [:]][stored.name] = .some(stored)
            }
            // The name the chain ends at, when it is no record: known to be missing.
            var current: String? = name, seen = Set<String>()
            while let step = current, seen.insert(step).inserted {
                guard let parent = parents[step] else {
                    f.records[zone, default: [:]][step] = .some(nil)
                    break
                }
                current = parent
            }
        case .children(let zone, let parent):
            var names = Set<String>()
            for row in try await tx.query("SELECT name FROM record WHERE zone_id = \(zone) AND parent = \(parent)") { names.insert(try row.decode(String.self)) }
            f.childNames[zone, default: [:]][parent] = names
        case .childrenOfAny(let zone, let parents):
            var children = [String: Set<String>]()
            for parent in parents { children[parent] = [] }
            for row in try await tx.query(PostgresQuery(unsafeSQL: "SELECT name, parent FROM record WHERE zone_id = $1 AND parent = ANY($2)",
                                                        binds: try binds(zone, parents))) {
                let (name, parent) = try row.decode((String, String).self)
                children[parent, default: []].insert(name)
            }
            f.childNames[zone, default: [:]].merge(children) { _, new in new }
        case .tombstones(let zone):
            let row = try await tx.query("SELECT EXISTS (SELECT 1 FROM record_tombstone WHERE zone_id = \(zone))").first
            f.tombstoneFlags[zone] = try row?.decode(Bool.self) ?? false
        case .changes(let zone, let seq, let name, let limit):
            let key = StorageSnapshot.pageKey(seq, name, limit)
            var names = [String]()
            for row in try await tx.query(PostgresQuery(unsafeSQL: """
                SELECT \(recordColumns) FROM record WHERE zone_id = $1 AND (seq > $2 OR (seq = $2 AND name > $3 AND $4)) ORDER BY seq, name LIMIT $5
                """, binds: try binds(zone, seq, name ?? "", name != nil, Int64(limit)))) {
                let stored = try storedRow(row)
                names.append(stored.name)
                f.records[zone, default: [:]][stored.name] = .some(stored)
            }
            f.changePages[zone, default: [:]][key] = names
            var tombstones = [(seq: Int64, name: String)]()
            for row in try await tx.query("""
                SELECT seq, name FROM record_tombstone WHERE zone_id = \(zone) AND (seq > \(seq) OR (seq = \(seq) AND name > \(name ?? "") AND \(name != nil)))
                ORDER BY seq, name LIMIT \(Int64(limit))
                """) {
                tombstones.append(try row.decode((Int64, String).self))
            }
            f.tombstonePages[zone, default: [:]][key] = tombstones
        case .zoneUID(let uid):
            f.uids[uid] = try await tx.query("SELECT 1 FROM zone WHERE uid = \(Data(uid))").first != nil
        case .deletedZone(let uid):
            let row = try await tx.query("""
                SELECT owner_id, name, genesis_body, genesis_signature, deletion_body, deletion_signature FROM deleted_zone WHERE uid = \(Data(uid))
                """).first
            f.deletedZones[uid] = .some(try row.map { row in
                let (owner, name, genesis, genesisSignature, deletion, deletionSignature) = try row.decode((String, String, Data, Data, Data, Data).self)
                return DeletedZoneRow(uid: uid, id: ZoneID(name: name, ownerID: owner), genesisBody: Array(genesis), genesisSignature: Array(genesisSignature),
                                      deletionBody: Array(deletion), deletionSignature: Array(deletionSignature))
            })
        case .counter:
            guard let row = try await tx.query("SELECT db_seq, compacted_db_seq FROM store_counter WHERE id = 1").first else {
                throw StoreError(.integrityFailure, "the store has no change counter (its row was deleted): the store was changed")
            }
            let (current, compacted) = try row.decode((Int64, Int64).self)
            f.counter = (current, compacted)
        case .changedZones(let owner, let since):
            var rows = [ZoneRow]()
            for row in try await tx.query("SELECT id, uid, name, sequence, created_at FROM zone WHERE owner_id = \(owner) AND db_seq > \(since) ORDER BY db_seq") {
                let (rowID, uid, name, sequence, created) = try row.decode((Int64, Data, String, Int64, Double).self)
                guard uid.count == 16 else { throw StoreError(.integrityFailure, "zone '\(Names.printable(name))' has a damaged row: the store was changed") }
                let zone = ZoneRow(rowID: rowID, uid: Array(uid), id: ZoneID(name: name, ownerID: owner), sequence: sequence,
                                   created: Date(timeIntervalSince1970: created), logFormat: 1)
                rows.append(zone)
                f.zones[zone.id] = zone
            }
            f.changedZones[owner, default: [:]][since] = rows
        case .zoneTombstones(let user, let since, let owned):
            var list = [DeletedZone]()
            for row in try await tx.query("""
                SELECT owner_id, name, reason FROM zone_tombstone WHERE user_id = \(user) AND db_seq > \(since) AND (owner_id = \(user)) = \(owned) ORDER BY db_seq
                """) {
                let (owner, name, reason) = try row.decode((String, String, String).self)
                list.append(DeletedZone(zoneID: ZoneID(name: name, ownerID: owner), reason: reason))
            }
            f.zoneTombstones["\(owned):\(since):\(user)"] = list
        case .query(let zone, let plan):
            var names = [String]()
            let rows: [PostgresRow]
            do {
                rows = try await tx.query(PostgresQueries.select(plan, zoneRowID: zone, columns: recordColumns))
            } catch let error as StoreError where (error.underlying as? PSQLError)?.serverInfo?[.sqlState] == "22P02" {
                // `plain::jsonb` failed: a row holds what Coffer never writes there.
                throw StoreError(.integrityFailure, "a record of type \(plan.recordType) holds plain values that are not JSON: the store was changed")
            }
            for row in rows.prefix(plan.limit ?? .max) {
                let stored = try storedRow(row)
                names.append(stored.name)
                f.records[zone, default: [:]][stored.name] = .some(stored)
            }
            let more = plan.limit.map { rows.count > $0 } ?? false
            var last: [QueryCursor.SortValue]?
            if more, let name = names.last {
                guard let row = try await tx.query(PostgresQueries.selectSortValues(plan, zoneRowID: zone, name: name)).first else {
                    throw StoreError(.internalError, "record '\(name)' left the zone during its own read")
                }
                let cells = row.makeRandomAccess()
                last = try plan.sorts.indices.map { PostgresQueries.sortValue(try cells[$0].decode(String?.self), plan.sorts[$0].type) }
            }
            f.queries[zone, default: [:]][plan] = StorageSnapshot.QueryPage(names: names, more: more, lastSortValues: last)
        case .contactColumns:
            f.contactColumns = try await tx.query("SELECT user_id, name, email, signing_key, box_key, card_created FROM contact ORDER BY user_id").map { row in
                let (id, name, email, signing, box, created) = try row.decode((String, String, String?, Data, Data, String).self)
                return (id, name, email, Array(signing), Array(box), created)
            }
        case .logHashes(let zone):
            var hashes = [Int64: [UInt8]]()
            for row in try await tx.query("SELECT seq, hash FROM zone_log WHERE zone_id = \(zone)") {
                let (seq, hash) = try row.decode((Int64, Data).self)
                hashes[seq] = Array(hash)
            }
            f.logHashes[zone] = hashes
        case .allRows(let zone):
            var names = [String]()
            for row in try await tx.query(PostgresQuery(unsafeSQL: "SELECT \(recordColumns) FROM record WHERE zone_id = $1 ORDER BY name", binds: try binds(zone))) {
                let stored = try storedRow(row)
                names.append(stored.name)
                f.records[zone, default: [:]][stored.name] = .some(stored)
            }
            f.pages[zone, default: [:]]["all"] = names
        case .tombstoneList(let zone):
            var list = [String: Int64]()
            for row in try await tx.query("SELECT name, seq FROM record_tombstone WHERE zone_id = \(zone)") {
                let (name, seq) = try row.decode((String, Int64).self)
                list[name] = seq
            }
            f.tombstoneLists[zone] = list
        case .shareZones(let uid):
            f.shareZones[uid] = try await zoneRows(tx.query("\(unescaped: zoneColumns) FROM zone z WHERE z.share_uid = \(Data(uid)) ORDER BY z.id"),
                                                   into: &f).map(\.zone)
        case .listingZones(let user):
            f.listingZones[user] = try await zoneRows(tx.query("""
                \(unescaped: zoneColumns) FROM zone z
                WHERE z.owner_id = \(user) OR EXISTS (SELECT 1 FROM zone_member m WHERE m.zone_id = z.id AND m.user_id = \(user))
                ORDER BY z.owner_id = \(user) DESC, z.name
                """), into: &f).map(\.zone)
        case .sharedZones(let member):
            f.sharedZones[member] = try await zoneRows(tx.query("""
                \(unescaped: zoneColumns), (SELECT count(*) FROM record r WHERE r.zone_id = z.id) FROM zone z
                WHERE z.owner_id <> \(member) AND EXISTS (SELECT 1 FROM zone_member m WHERE m.zone_id = z.id AND m.user_id = \(member))
                ORDER BY z.owner_id, z.name
                """), counted: true, into: &f)
        case .changedSharedZones(let member, let since):
            f.changedSharedZones[member, default: [:]][since] = try await zoneRows(tx.query("""
                \(unescaped: zoneColumns) FROM zone z WHERE z.owner_id <> \(member) AND z.db_seq > \(since)
                  AND EXISTS (SELECT 1 FROM zone_member m WHERE m.zone_id = z.id AND m.user_id = \(member))
                ORDER BY z.db_seq
                """), into: &f).map(\.zone)
        case .tombstoneCount(let zone, let through):
            let row = try await tx.query("SELECT count(*) FROM record_tombstone WHERE zone_id = \(zone) AND seq <= \(through)").first
            f.tombstoneCounts[zone, default: [:]][through] = Int(try row?.decode(Int64.self) ?? 0)
        }
    }

    /// Makes sure each field's query index exists (``PostgresQueries/indexSQL(recordType:field:type:)``),
    /// creating the missing ones one at a time under the store's advisory lock, so that
    /// processes that meet a new field at once do not race to create its index.
    func ensureQueryIndexes(recordType: String, fields: [(field: String, type: FieldType)]) async throws {
        let wanted = fields.map { (sql: PostgresQueries.indexSQL(recordType: recordType, field: $0.field, type: $0.type),
                                   name: PostgresQueries.indexName(recordType: recordType, field: $0.field, type: $0.type)) }
        let names = wanted.map(\.name)
        let existing = Set(try await connector.query(PostgresQuery(unsafeSQL: "SELECT indexname FROM pg_indexes WHERE tablename = 'record' AND indexname = ANY($1)",
                                                                   binds: try Self.binds(names))).map { try $0.decode(String.self) })
        let missing = wanted.filter { !existing.contains($0.name) }
        guard !missing.isEmpty else { return }
        try await connector.transaction { tx in
            try await tx.query("SELECT pg_advisory_xact_lock(\(PostgresMigrations.lockKey))")
            for index in missing { try await tx.query(PostgresQuery(unsafeSQL: index.sql)) }
        }
        connector.logger.info("query index created", metadata: ["type": "\(recordType)", "indexes": "\(missing.map(\.name))"])
    }

    /// The types the zones' schemas give these fields of a record type (plain queryable ones,
    /// each type once).
    func fieldTypes(recordType: String, fields: [String]) async throws -> [(field: String, type: FieldType)] {
        try await connector.query(PostgresQuery(unsafeSQL: """
            SELECT DISTINCT field, value_type FROM field_schema WHERE record_type = $1 AND field = ANY($2) AND NOT encrypted ORDER BY field, value_type
            """, binds: try Self.binds(recordType, fields))).compactMap { row in
            let (field, name) = try row.decode((String, String).self)
            guard let type = FieldType(name: name), type.isQueryable else { return nil }
            return (field, type)
        }
    }

    /// The row id, uid, name and owner of each zone of these row ids, names and uids that the
    /// store has (what a server needs to look up the zones a request names).
    func zoneIdentities(rowIDs: Set<Int64>, named: Set<ZoneID>, uids: Set<[UInt8]>) async throws -> [(rowID: Int64, uid: [UInt8], id: ZoneID)] {
        var ids = rowIDs
        for id in named {
            if let row = try await connector.query("SELECT id FROM zone WHERE owner_id = \(id.ownerID) AND name = \(id.name)").first {
                ids.insert(try row.decode(Int64.self))
            }
        }
        if !uids.isEmpty {
            let hex = uids.map { Hex.encode($0) }
            for row in try await connector.query("SELECT id FROM zone WHERE uid IN (SELECT decode(h, 'hex') FROM unnest(\(hex)::text[]) AS h)") {
                ids.insert(try row.decode(Int64.self))
            }
        }
        guard !ids.isEmpty else { return [] }
        return try await connector.query("SELECT id, uid, owner_id, name FROM zone WHERE id = ANY(\(ids.sorted()))").map { row in
            let (id, uid, owner, name) = try row.decode((Int64, Data, String, String).self)
            return (id, Array(uid), ZoneID(name: name, ownerID: owner))
        }
    }

    /// The columns ``zoneRows(_:counted:into:)`` reads, from `zone z`.
    private static let zoneColumns = "SELECT z.id, z.uid, z.owner_id, z.name, z.sequence, z.created_at"

    /// Zone rows selected with ``zoneColumns`` (and, `counted`, a record count after them),
    /// each also noted as the zone's row (its keys and schema are fetched by name when asked for).
    private static func zoneRows(_ rows: [PostgresRow], counted: Bool = false, into f: inout Fetched) throws -> [(zone: ZoneRow, recordCount: Int)] {
        try rows.map { row in
            let zone: ZoneRow, count: Int64
            let (rowID, uid, owner, name, sequence, created): (Int64, Data, String, String, Int64, Double)
            if counted {
                (rowID, uid, owner, name, sequence, created, count) = try row.decode((Int64, Data, String, String, Int64, Double, Int64).self)
            } else {
                (rowID, uid, owner, name, sequence, created) = try row.decode((Int64, Data, String, String, Int64, Double).self)
                count = 0
            }
            guard uid.count == 16 else { throw StoreError(.integrityFailure, "zone '\(Names.printable(name))' has a damaged row: the store was changed") }
            zone = ZoneRow(rowID: rowID, uid: Array(uid), id: ZoneID(name: name, ownerID: owner), sequence: sequence,
                           created: Date(timeIntervalSince1970: created), logFormat: 1)
            f.zones[zone.id] = zone
            return (zone, Int(count))
        }
    }

    /// Log entries of a zone with their lists, a thousand a statement (`.some(nil)` for one the
    /// store does not have), and the zone's head.
    private static func fetchLogEntries(_ seqs: [Int64], zone: Int64, _ tx: PostgresTransaction, into f: inout Fetched) async throws {
        for start in stride(from: 0, to: seqs.count, by: 1_000) {
            let part = Array(seqs[start..<min(start + 1_000, seqs.count)])
            for seq in part { f.entries[zone, default: [:]][seq] = .some(nil) }
            for row in try await tx.query(PostgresQuery(unsafeSQL: "SELECT seq, body, signature, entries, names FROM zone_log WHERE zone_id = $1 AND seq = ANY($2)",
                                                        binds: try binds(zone, part))) {
                let (seq, body, signature, entries, names) = try row.decode((Int64, Data, Data, Data?, Data?).self)
                f.entries[zone, default: [:]][seq] = .some(StoredLogEntry(seq: seq, body: Array(body), signature: Array(signature),
                                                                          entries: entries.map(Array.init), names: names.map(Array.init)))
            }
        }
        if f.heads[zone] == nil { try await fetchHead(zone, tx, into: &f) }
    }

    /// The cards of `users`, in one statement (`.some(nil)` for a user the store has no card of).
    private static func fetchContacts(_ users: [String], _ tx: PostgresTransaction, into f: inout Fetched) async throws {
        guard !users.isEmpty else { return }
        for user in users { f.contacts[user] = .some(nil) }
        for row in try await tx.query(PostgresQuery(unsafeSQL: "SELECT user_id, card, added_at FROM contact WHERE user_id = ANY($1)",
                                                    binds: try binds(users))) {
            let (user, card, added) = try row.decode((String, Data, Double).self)
            f.contacts[user] = .some((Array(card), added))
        }
    }

    private static func fetchHead(_ zone: Int64, _ tx: PostgresTransaction, into f: inout Fetched) async throws {
        if let row = try await tx.query("SELECT seq, hash FROM zone_log WHERE zone_id = \(zone) ORDER BY seq DESC LIMIT 1").first {
            let (seq, hash) = try row.decode((Int64, Data).self)
            f.heads[zone] = .some((seq, hash.count == 32 ? Digest32(Array(hash)) : .zero))
        } else {
            f.heads[zone] = .some(nil)
        }
    }

    private static func binds(_ values: any PostgresEncodable...) throws -> PostgresBindings {
        var bindings = PostgresBindings()
        for value in values { try bindings.append(value) }
        return bindings
    }

    /// A record row's values as read, made into a ``StoredRow`` once the read ends.
    struct RowValues: Sendable {
        let name: String, type: String, parent: String?, plain: String, sealed: Data?, epoch: Int64, seq: Int64
        let creator: String, modifier: String, created: Double, modified: Double, membershipSeq: Int64

        var row: StoredRow {
            StoredRow.make(name: name, type: type, parent: parent, epoch: epoch, seq: seq, membershipSeq: membershipSeq, creatorID: creator,
                           modifierID: modifier, created: created, modified: modified, plain: Array(plain.utf8), sealed: sealed.map(Array.init))
        }
    }

    private static func storedRow(_ row: PostgresRow) throws -> RowValues {
        let (name, type, parent, plain, sealed, epoch, seq, creator, modifier, created, modified, membership) =
            try row.decode((String, String, String?, String, Data?, Int64, Int64, String, String, Double, Double, Int64).self)
        return RowValues(name: name, type: type, parent: parent, plain: plain, sealed: sealed, epoch: epoch, seq: seq, creator: creator,
                         modifier: modifier, created: created, modified: modified, membershipSeq: membership)
    }

    // MARK: - Writes

    /// Applies an operation's writes in one transaction. Each zone whose log it extends is
    /// locked first (in row id order), so commits to one zone serialize, and its head must be
    /// the one the operation extended; each record row it changes must be as it was read.
    func apply(_ writes: [StorageSnapshot.Write], operation: SnapshotOperation?) async throws {
        do { try await applyWrites(writes, operation: operation) } catch let error as PostgresDecodingError { throw Self.changed(error) }
    }

    private func applyWrites(_ writes: [StorageSnapshot.Write], operation: SnapshotOperation?) async throws {
        var heads = [Int64: Int64]()
        for case .appendLog(let zone, let head, _, _, _, _, _, _) in writes where heads[zone] == nil { heads[zone] = head }
        let inserted = Set(writes.compactMap { if case .insertZone(let rowID, _, _, _) = $0 { rowID } else { nil } })
        let locks = heads.sorted { $0.key < $1.key }.filter { !inserted.contains($0.key) }
        let touched = Set(heads.keys).union(writes.compactMap { write -> Int64? in
            switch write {
            case .deleteZone(let zone), .touchZone(let zone): zone
            default: nil
            }
        })
        do {
            try await connector.transaction { tx in
                if let operation {
                    // A concurrent transaction with the same id makes this insert wait for its end.
                    guard try await !tx.query("""
                        INSERT INTO server_operation (id, user_id, applied_at) VALUES (\(Data(operation.id)), \(operation.userID), \(Date().timeIntervalSince1970))
                        ON CONFLICT DO NOTHING RETURNING 1
                        """).isEmpty else { throw OperationApplied() }
                }
                for (zone, head) in locks {
                    guard let row = try await tx.query("SELECT sequence FROM zone WHERE id = \(zone) FOR UPDATE").first,
                          try row.decode(Int64.self) == head else { throw SnapshotConflict() }
                }
                var i = 0
                while i < writes.count {
                    switch writes[i] {
                    case .insertRecord(let zone, _):
                        // A batch's new rows, one statement for all of them.
                        var versions = [SealedVersion]()
                        while i < writes.count, case .insertRecord(let next, let version) = writes[i], next == zone {
                            versions.append(version)
                            i += 1
                        }
                        try await Self.insertRecords(versions, zoneRowID: zone, tx)
                    case .appendLog(let zone, _, _, _, _, _, _, _):
                        // Entries appended to one zone in a row: one statement a thousand of
                        // them, and the zone's head moved once (a row updated once for each
                        // entry, in one transaction, leaves a chain of versions that each update
                        // walks: a zone of 100,000 entries copied at once took minutes a
                        // thousand entries).
                        var run = [LogAppend]()
                        while i < writes.count, case .appendLog(let next, _, let entry, let body, let signature, let hash, let entries, let names) = writes[i],
                              next == zone {
                            run.append(LogAppend(entry: entry, body: body, signature: signature, hash: hash, entries: entries, names: names))
                            i += 1
                        }
                        try await Self.appendLog(run, zoneRowID: zone, tx)
                    default:
                        try await Self.apply(writes[i], tx)
                        i += 1
                    }
                }
                // Delivered when the transaction commits, and only then.
                for zone in touched.sorted() {
                    try await tx.query("SELECT pg_notify(\(PostgresChangeListener.channel), \(String(zone)))")
                }
            }
        } catch let error as StoreError {
            // A unique or foreign key violation, a serialization failure or a deadlock: another
            // writer changed what this one read.
            if let state = (error.underlying as? PSQLError)?.serverInfo?[.sqlState], ["23505", "23503", "40001", "40P01"].contains(state) {
                throw SnapshotConflict()
            }
            throw error
        }
    }

    private static func expectRow(_ rows: [PostgresRow]) throws {
        guard !rows.isEmpty else { throw SnapshotConflict() }
    }

    /// Inserts new rows in one statement (their columns as arrays, `unnest`ed); every one must
    /// be new. With the `UPDATE` of `.replaceRecord`, the only SQL that writes a record row here.
    private static func insertRecords(_ versions: [SealedVersion], zoneRowID: Int64, _ tx: PostgresTransaction) async throws {
        let stamps = versions.map(\.stamp)
        let sql = """
            INSERT INTO record (zone_id, name, type, parent, plain, sealed, epoch, seq, membership_seq, creator_id, modifier_id, created_at, modified_at)
            SELECT $1, r.name, r.type, CASE WHEN r.has_parent THEN r.parent END, r.plain, CASE WHEN r.has_sealed THEN r.sealed END,
                   r.epoch, r.seq, r.membership_seq, r.creator_id, r.modifier_id, r.created_at, r.modified_at
            FROM unnest($2::text[], $3::text[], $4::text[], $5::bool[], $6::text[], $7::bytea[], $8::bool[], $9::int8[], $10::int8[],
                        $11::int8[], $12::text[], $13::text[], $14::float8[], $15::float8[])
                AS r(name, type, parent, has_parent, plain, sealed, has_sealed, epoch, seq, membership_seq, creator_id, modifier_id,
                     created_at, modified_at)
            ON CONFLICT (zone_id, name) DO NOTHING RETURNING name
            """
        let bindings = try binds(zoneRowID, stamps.map(\.name), stamps.map(\.type), stamps.map { $0.parent ?? "" }, stamps.map { $0.parent != nil },
                                 versions.map { String(decoding: $0.plain, as: UTF8.self) }, versions.map { ByteBuffer(bytes: $0.sealed ?? []) },
                                 versions.map { $0.sealed != nil }, stamps.map(\.epoch), stamps.map(\.seq), stamps.map(\.membershipSeq),
                                 stamps.map(\.creatorID), stamps.map(\.modifierID), stamps.map(\.created), stamps.map(\.modified))
        let inserted = try await tx.query(PostgresQuery(unsafeSQL: sql, binds: bindings))
        guard inserted.count == versions.count else { throw SnapshotConflict() }
    }

    /// A log entry to append, as a write carries it.
    struct LogAppend {
        let entry: LogEntry
        let body: [UInt8]
        let signature: [UInt8]
        let hash: Digest32
        let entries: [UInt8]?
        let names: [UInt8]?
    }

    /// Appends entries to a zone's log, a thousand a statement (every one must be new), then
    /// sets the zone's head to the last.
    private static func appendLog(_ run: [LogAppend], zoneRowID: Int64, _ tx: PostgresTransaction) async throws {
        let sql = """
            INSERT INTO zone_log (zone_id, seq, kind, author_id, body, signature, hash, entries, names)
            SELECT $1, e.seq, e.kind, e.author_id, e.body, e.signature, e.hash, CASE WHEN e.has_entries THEN e.entries END,
                   CASE WHEN e.has_names THEN e.names END
            FROM unnest($2::int8[], $3::int4[], $4::text[], $5::bytea[], $6::bytea[], $7::bytea[], $8::bool[], $9::bytea[], $10::bool[], $11::bytea[])
                AS e(seq, kind, author_id, body, signature, hash, has_entries, entries, has_names, names)
            ON CONFLICT DO NOTHING RETURNING seq
            """
        for start in stride(from: 0, to: run.count, by: 1_000) {
            let part = run[start..<min(start + 1_000, run.count)]
            let bindings = try binds(zoneRowID, part.map(\.entry.seq), part.map { Int32($0.entry.kind.rawValue) }, part.map(\.entry.authorID),
                                     part.map { ByteBuffer(bytes: $0.body) }, part.map { ByteBuffer(bytes: $0.signature) },
                                     part.map { ByteBuffer(bytes: $0.hash.bytes) }, part.map { $0.entries != nil },
                                     part.map { ByteBuffer(bytes: $0.entries ?? []) }, part.map { $0.names != nil }, part.map { ByteBuffer(bytes: $0.names ?? []) })
            let inserted = try await tx.query(PostgresQuery(unsafeSQL: sql, binds: bindings))
            guard inserted.count == part.count else { throw SnapshotConflict() }
        }
        if let last = run.last { try await tx.query("UPDATE zone SET sequence = \(last.entry.seq) WHERE id = \(zoneRowID)") }
    }

    private static func apply(_ write: StorageSnapshot.Write, _ tx: PostgresTransaction) async throws {
        // Kept as one function: a switch with one statement per kind of write (`StorageSnapshot.Write`),
        // listed together so that a new kind is added beside the others, as in `SQLiteSnapshotDriver`.
        switch write {
        case .insertZone(let rowID, let uid, let id, let created):
            try expectRow(try await tx.query("""
                INSERT INTO zone (id, uid, owner_id, name, sequence, created_at) VALUES (\(rowID), \(Data(uid)), \(id.ownerID), \(id.name), 0, \(created))
                ON CONFLICT DO NOTHING RETURNING id
                """))
        case .deleteZone(let rowID):
            // Its genesis and its owner's deletion stay, when the log ends with one (as on SQLite).
            try await tx.query("""
                INSERT INTO deleted_zone (uid, owner_id, name, genesis_body, genesis_signature, deletion_body, deletion_signature)
                SELECT z.uid, z.owner_id, z.name, g.body, g.signature, d.body, d.signature
                FROM zone z
                JOIN zone_log g ON g.zone_id = z.id AND g.seq = (SELECT min(seq) FROM zone_log WHERE zone_id = z.id)
                JOIN zone_log d ON d.zone_id = z.id AND d.seq = (SELECT max(seq) FROM zone_log WHERE zone_id = z.id)
                WHERE z.id = \(rowID) AND d.kind = \(Int32(LogEntry.Kind.deletion.rawValue))
                ON CONFLICT (uid) DO UPDATE SET owner_id = EXCLUDED.owner_id, name = EXCLUDED.name, genesis_body = EXCLUDED.genesis_body,
                    genesis_signature = EXCLUDED.genesis_signature, deletion_body = EXCLUDED.deletion_body, deletion_signature = EXCLUDED.deletion_signature
                """)
            try await tx.query("DELETE FROM zone WHERE id = \(rowID)")
        case .touchZone(let rowID):
            try await tx.query("UPDATE zone SET db_seq = (SELECT db_seq FROM store_counter WHERE id = 1) + 1 WHERE id = \(rowID)")
            try await tx.query("UPDATE store_counter SET db_seq = db_seq + 1 WHERE id = 1")
        case .zoneGone(let zone, let users, let reason):
            try await tx.query("UPDATE store_counter SET db_seq = db_seq + 1 WHERE id = 1")
            for user in users.sorted() {
                try await tx.query("""
                    INSERT INTO zone_tombstone (user_id, zone_uid, owner_id, name, db_seq, reason)
                    VALUES (\(user), \(Data(zone.uid)), \(zone.id.ownerID), \(zone.id.name), (SELECT db_seq FROM store_counter WHERE id = 1), \(reason))
                    ON CONFLICT (user_id, zone_uid) DO UPDATE SET owner_id = EXCLUDED.owner_id, name = EXCLUDED.name, db_seq = EXCLUDED.db_seq, reason = EXCLUDED.reason
                    """)
            }
        case .zoneBack(let zone, let user):
            try await tx.query("DELETE FROM zone_tombstone WHERE user_id = \(user) AND zone_uid = \(Data(zone.uid))")
        case .appendLog(let zone, _, let entry, let body, let signature, let hash, let entries, let names):
            try await appendLog([LogAppend(entry: entry, body: body, signature: signature, hash: hash, entries: entries, names: names)], zoneRowID: zone, tx)
        case .wrappedKey(let zone, let epoch, let member, let wrapped):
            try expectRow(try await tx.query("""
                INSERT INTO zone_key (zone_id, epoch, member_id, wrapped_key) VALUES (\(zone), \(epoch), \(member), \(Data(wrapped)))
                ON CONFLICT DO NOTHING RETURNING epoch
                """))
        case .fieldSchema(let zone, let type, let field, let schema):
            try expectRow(try await tx.query("""
                INSERT INTO field_schema (zone_id, record_type, field, value_type, encrypted) VALUES (\(zone), \(type), \(field), \(schema.type.description), \(schema.encrypted))
                ON CONFLICT DO NOTHING RETURNING field
                """))
        case .dropFieldSchema(let zone, let type, let field):
            try expectRow(try await tx.query("DELETE FROM field_schema WHERE zone_id = \(zone) AND record_type = \(type) AND field = \(field) RETURNING field"))
        case .insertRecord(let zone, let version):
            try await insertRecords([version], zoneRowID: zone, tx)
        case .replaceRecord(let zone, let version, let storedSeq, let keep):
            // With `keep`, the row keeps its stored creator and creation time.
            let v = version.stamp
            let plain = String(decoding: version.plain, as: UTF8.self), sealed = version.sealed.map { Data($0) }
            let creator: String? = keep ? nil : v.creatorID, created: Double? = keep ? nil : v.created
            try expectRow(try await tx.query("""
                UPDATE record SET parent = \(v.parent), plain = \(plain), sealed = \(sealed), epoch = \(v.epoch), seq = \(v.seq),
                    membership_seq = \(v.membershipSeq), modifier_id = \(v.modifierID), modified_at = \(v.modified),
                    creator_id = coalesce(\(creator), creator_id), created_at = coalesce(\(created), created_at)
                WHERE zone_id = \(zone) AND name = \(v.name) AND type = \(v.type) AND seq = \(storedSeq) RETURNING id
                """))
        case .deleteRecord(let zone, let name, let storedSeq):
            try expectRow(try await tx.query("DELETE FROM record WHERE zone_id = \(zone) AND name = \(name) AND seq = \(storedSeq) RETURNING id"))
        case .addTombstone(let zone, let name, let seq, let author, let label, let time):
            try await tx.query("""
                INSERT INTO record_tombstone (zone_id, name, seq, author_id, author_label, deleted_at) VALUES (\(zone), \(name), \(seq), \(author), \(label), \(time))
                ON CONFLICT (zone_id, name) DO UPDATE SET seq = EXCLUDED.seq, author_id = EXCLUDED.author_id, author_label = EXCLUDED.author_label,
                    deleted_at = EXCLUDED.deleted_at
                """)
        case .contact(let userID, let name, let email, let signingKey, let boxKey, let card, let cardCreated, let added):
            try await tx.query("""
                INSERT INTO contact (user_id, name, email, signing_key, box_key, card, card_created, added_at)
                VALUES (\(userID), \(name), \(email), \(Data(signingKey)), \(Data(boxKey)), \(Data(card)), \(cardCreated), \(added))
                ON CONFLICT (user_id) DO UPDATE SET name = EXCLUDED.name, email = EXCLUDED.email, signing_key = EXCLUDED.signing_key,
                    box_key = EXCLUDED.box_key, card = EXCLUDED.card, card_created = EXCLUDED.card_created, added_at = EXCLUDED.added_at
                """)
        case .compactTombstones(let zone, let through):
            try await tx.query("DELETE FROM record_tombstone WHERE zone_id = \(zone) AND seq <= \(through)")
            try await tx.query("UPDATE zone SET compacted_seq = greatest(compacted_seq, \(through)) WHERE id = \(zone)")
        case .storeWrappedKey(let zone, let epoch, let member, let wrapped):
            try await tx.query("""
                INSERT INTO zone_key (zone_id, epoch, member_id, wrapped_key) VALUES (\(zone), \(epoch), \(member), \(Data(wrapped)))
                ON CONFLICT (zone_id, epoch, member_id) DO UPDATE SET wrapped_key = EXCLUDED.wrapped_key
                """)
        case .deleteWrappedKeys(let zone, let member?):
            try await tx.query("DELETE FROM zone_key WHERE zone_id = \(zone) AND member_id = \(member)")
        case .deleteWrappedKeys(let zone, nil):
            try await tx.query("DELETE FROM zone_key WHERE zone_id = \(zone)")
        case .storeChainedKey(let zone, let epoch, let sealed):
            try await tx.query("""
                INSERT INTO zone_key_chain (zone_id, epoch, sealed_key) VALUES (\(zone), \(epoch), \(Data(sealed)))
                ON CONFLICT (zone_id, epoch) DO UPDATE SET sealed_key = EXCLUDED.sealed_key
                """)
        case .storeShareLink(let zone, let epoch, let key, let secret):
            try await tx.query("""
                INSERT INTO share_link (zone_id, epoch, sealed_key, sealed_secret) VALUES (\(zone), \(epoch), \(Data(key)), \(Data(secret)))
                ON CONFLICT (zone_id) DO UPDATE SET epoch = EXCLUDED.epoch, sealed_key = EXCLUDED.sealed_key, sealed_secret = EXCLUDED.sealed_secret
                """)
        case .deleteOlderKeys(let zone, let epoch):
            try await tx.query("DELETE FROM zone_key_chain WHERE zone_id = \(zone)")
            try await tx.query("DELETE FROM zone_key WHERE zone_id = \(zone) AND epoch < \(epoch)")
        case .deleteShareLink(let zone):
            try await tx.query("DELETE FROM share_link WHERE zone_id = \(zone)")
        case .setZoneMembers(let zone, let members, let shareUID):
            try await tx.query("DELETE FROM zone_member WHERE zone_id = \(zone)")
            if !members.isEmpty {
                try await tx.query("INSERT INTO zone_member (zone_id, user_id) SELECT \(zone), unnest(\(members.sorted())::text[])")
            }
            try await tx.query("UPDATE zone SET share_uid = \(shareUID.map { Data($0) }) WHERE id = \(zone)")
        case .addZoneMember(let zone, let user):
            try await tx.query("INSERT INTO zone_member (zone_id, user_id) VALUES (\(zone), \(user)) ON CONFLICT DO NOTHING")
        case .removeTombstone(let zone, let name):
            try await tx.query("DELETE FROM record_tombstone WHERE zone_id = \(zone) AND name = \(name)")
        }
    }
}

/// Reads of one state of a PostgreSQL database across several fetches: one transaction at
/// REPEATABLE READ (which writes nothing but a new zone's id from its sequence), on one
/// connection leased from the pool, begun at the first fetch and committed at ``close()``. The
/// transaction runs in a task of its own that takes the fetches one by one; a pin must be closed
/// (``SnapshotDriver/run(writing:pinned:_:)`` closes each one it takes), or its connection stays
/// leased.
final class PostgresReadPin: ReadPin {
    private struct Job: Sendable {
        let needs: [StorageSnapshot.Need]
        let basis: StorageSnapshot.FetchBasis
        let reply: CheckedContinuation<(PostgresStorage.Fetched, Bool), any Error>
    }

    private let jobs: AsyncStream<Job>.Continuation
    private let work: Task<Void, Never>

    init(connector: PostgresConnector) {
        let (stream, jobs) = AsyncStream<Job>.makeStream()
        self.jobs = jobs
        work = Task {
            var failure: (any Error)?
            do {
                try await connector.transaction { tx in
                    try await tx.query("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ")
                    for await job in stream {
                        do {
                            let (rows, moved) = try await PostgresStorage.read(job.needs, basis: job.basis, tx)
                            job.reply.resume(returning: (rows, moved))
                        } catch {
                            job.reply.resume(throwing: error)
                            throw error // the transaction is aborted: every later fetch fails too
                        }
                    }
                }
            } catch {
                failure = error
            }
            // A transaction that failed (or never began) fails the fetches still to come.
            for await job in stream {
                job.reply.resume(throwing: failure ?? StoreError(.internalError, "a PostgreSQL read pin was used after it was closed"))
            }
        }
    }

    func fetch(_ needs: [StorageSnapshot.Need], into snapshot: StorageSnapshot) async throws {
        let basis = snapshot.basis
        let (rows, moved): (PostgresStorage.Fetched, Bool)
        do {
            (rows, moved) = try await withCheckedThrowingContinuation { reply in
                if case .terminated = jobs.yield(Job(needs: needs, basis: basis, reply: reply)) {
                    reply.resume(throwing: StoreError(.internalError, "a PostgreSQL read pin was used after it was closed"))
                }
            }
        } catch let error as PostgresDecodingError {
            throw PostgresStorage.changed(error)
        }
        snapshot.absorb(rows, moved: moved) { $0.row }
    }

    func close() async {
        jobs.finish()
        await work.value
    }
}

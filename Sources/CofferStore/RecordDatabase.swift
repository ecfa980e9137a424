import Foundation

/// A user's view of the store's zones, as CloudKit's `CKDatabase`: the private database
/// holds the zones the user owns.
///
/// ```swift
/// let db = session.privateDatabase
/// let zone = try await db.createZone(named: "Notes")
/// var note = Record(type: "Note", name: "groceries", zone: zone)
/// note.values["title"] = "Shopping"
/// note.encryptedValues["body"] = "eggs, milk"
/// let saved = try await db.save(note)
/// let again = try await db.record(named: "groceries", in: zone)
/// ```
public struct RecordDatabase: Sendable {
    public enum Scope: String, Sendable {
        case `private`, shared
    }

    /// The whole session: a database is the session's public face (its zones, records and
    /// schema in one scope), and its calls go through every one of the session's services.
    let session: Session
    public let scope: Scope
    /// A label stored with every commit made through this value, so that a change feed reader
    /// can skip its own changes (Core Data's `transactionAuthor`). At most 255 bytes.
    public var transactionAuthor: String?

    /// The id of a zone of this database by name (in the private database, the user owns it).
    public func zoneID(named name: String) -> ZoneID {
        ZoneID(name: name, ownerID: session.userID)
    }

    // MARK: Zones

    /// Creates a zone with a fresh zone key wrapped to the owner.
    /// - Throws: `.alreadyExists`, `.invalidArguments` for a bad name.
    @discardableResult
    public func createZone(named name: String) async throws -> ZoneID {
        try requirePrivate()
        let zone = try await session.zoneDirectory.createZone(named: name).id
        // A zone made in a replica is the replica's alone until a push copies it to the server.
        if session.pendingChanges != nil, let uid = try await session.read({ db in try db.zoneRow(zone)?.uid }) {
            try await session.store.noteUnpushed(uid, true)
        }
        return zone
    }

    /// The zones of this database: those you own (private), or those shared with you that you
    /// accepted (shared).
    public func zones() async throws -> [Zone] {
        scope == .private ? try await session.zoneDirectory.ownedZones() : try await session.zoneDirectory.sharedZones()
    }

    /// ``zones()``, with the zones left out of it because they fail verification (their log
    /// does not verify, or does not reach what this user saw before), each with why.
    public func zoneList() async throws -> ZoneList {
        let (zones, refused) = scope == .private ? try await session.zoneDirectory.ownedZoneAccess() : try await session.zoneDirectory.sharedZoneAccess()
        return ZoneList(zones: zones, refused: refused.map { RefusedZone(id: $0.0, error: $0.1) })
    }

    /// Deletes a zone with its records, keys and schema.
    /// - Throws: `.zoneNotFound`, `.permissionFailure`.
    public func deleteZone(_ zone: ZoneID) async throws {
        try requireScope(zone)
        return try await session.zoneDirectory.deleteZone(zone)
    }

    // MARK: Records

    /// Saves one record and returns it with its new change tag.
    /// - Throws: `.serverRecordChanged` (with ``StoreError/serverRecord``) when the stored record
    ///   changed since `record` was fetched; `.invalidArguments` for names, types or a schema
    ///   mismatch; `.limitExceeded`; `.zoneNotFound`; `.permissionFailure`.
    /// - Parameters:
    ///   - record: the record to save, new or as fetched (with its change tag).
    ///   - policy: what the save does when the stored record changed since `record` was fetched.
    ///   - declarations: fields to fix before the save in its transaction (see ``FieldDeclaration``).
    public func save(_ record: Record, policy: SavePolicy = .ifServerRecordUnchanged, declaring declarations: [FieldDeclaration] = []) async throws -> Record {
        try requireScope(record.zoneID)
        if let pending = session.pendingChanges {
            return try await pending.enqueue(session: session, zone: record.zoneID, saving: [record], deleting: [], policy: policy).saved[0]
        }
        return try await session.writer.modify(zone: record.zoneID, saving: [record], deleting: [], policy: policy, authorLabel: transactionAuthor,
                           declaring: declarations).saved[0]
    }

    /// Saves and deletes records of one zone in one atomic batch (at most 400 records and 2 MiB).
    /// - Throws: `.partialFailure` with per-record errors when any item fails; nothing is saved then.
    /// - Parameters:
    ///   - records: the records to save.
    ///   - deletions: the records to delete.
    ///   - zone: the zone every saved and deleted record is in.
    ///   - policy: what a save does when its stored record changed since it was fetched.
    ///   - declarations: fields to fix in the batch's transaction (see ``FieldDeclaration``).
    public func modify(saving records: [Record], deleting deletions: [RecordDeletion] = [], in zone: ZoneID,
                       policy: SavePolicy = .ifServerRecordUnchanged, declaring declarations: [FieldDeclaration] = []) async throws -> ModifyResult {
        try requireScope(zone)
        if let pending = session.pendingChanges {
            return try await pending.enqueue(session: session, zone: zone, saving: records, deleting: deletions, policy: policy)
        }
        return try await session.writer.modify(zone: zone, saving: records, deleting: deletions, policy: policy, authorLabel: transactionAuthor,
                           declaring: declarations)
    }

    /// ``modify(saving:deleting:in:policy:declaring:)`` of records already checked and encoded
    /// for this zone (`prepared`, one a record, by `RecordWriter.prepare`): an import checks its
    /// whole file before the first save, and its save does not do that work again.
    func modify(saving records: [Record], prepared: [PreparedRecord], in zone: ZoneID, policy: SavePolicy,
                declaring declarations: [FieldDeclaration], time: Double? = nil) async throws -> ModifyResult {
        try requireScope(zone)
        if let pending = session.pendingChanges {
            return try await pending.enqueue(session: session, zone: zone, saving: records, deleting: [], policy: policy)
        }
        return try await session.writer.modify(zone: zone, saving: records, prepared: prepared, deleting: [], policy: policy,
                                        authorLabel: transactionAuthor, declaring: declarations, time: time)
    }

    /// The record named `name`.
    /// - Throws: `.unknownItem`, `.zoneNotFound`, `.integrityFailure` when its stored bytes fail authentication.
    public func record(named name: String, in zone: ZoneID) async throws -> Record {
        try requireScope(zone)
        guard let result = try await records(named: [name], in: zone)[name] else {
            throw StoreError(.unknownItem, "no record '\(name)' in zone '\(zone.name)'")
        }
        return try result.get()
    }

    /// Several records by name; each name maps to its record or its error.
    public func records(named names: [String], in zone: ZoneID) async throws -> [String: Result<Record, StoreError>] {
        try requireScope(zone)
        var found = try await session.reader.fetch(zone: zone, names: names)
        // A replica shows its pending changes over the confirmed records.
        if let pending = session.pendingChanges {
            for (name, change) in try await pending.latest(in: zone, names: names) {
                found[name] = change.record(modifier: session.userID).map { .success($0) } ?? .failure(StoreError(.unknownItem, "no record '\(name)' in zone '\(zone.name)' (deleted while offline; not synced yet)"))
            }
        }
        return found
    }

    /// Deletes one record, only if it is still at `changeTag` when one is given.
    public func delete(recordNamed name: String, in zone: ZoneID, ifMatch changeTag: String? = nil) async throws {
        try requireScope(zone)
        if let pending = session.pendingChanges {
            _ = try await pending.enqueue(session: session, zone: zone, saving: [], deleting: [RecordDeletion(name: name, ifMatch: changeTag)],
                                          policy: .ifServerRecordUnchanged)
            return
        }
        _ = try await session.writer.modify(zone: zone, saving: [], deleting: [RecordDeletion(name: name, ifMatch: changeTag)],
                               policy: .ifServerRecordUnchanged, authorLabel: transactionAuthor)
    }

    /// One page of the records of a type that match a query on plain fields.
    public func query(_ query: Query, in zone: ZoneID, cursor: QueryCursor? = nil) async throws -> QueryResult {
        try requireScope(zone)
        return try await session.reader.query(query, zone: zone, cursor: cursor)
    }

    /// Refuses a zone outside this database: the private database holds the zones this user
    /// owns, the shared database the zones others own (CloudKit keeps them apart the same way).
    /// - Throws: `.zoneNotFound`, naming the database the zone is in.
    func requireScope(_ zone: ZoneID) throws {
        let mine = zone.ownerID == session.userID
        switch scope {
        case .private where !mine:
            throw StoreError(.zoneNotFound, "zone '\(zone.name)' is not in your private database: it is owned by \(zone.ownerID); use the shared database")
        case .shared where mine:
            throw StoreError(.zoneNotFound, "zone '\(zone.name)' is not in your shared database: you own it; use the private database")
        default: break
        }
    }

    private func requirePrivate() throws {
        guard scope == .private else {
            throw StoreError(.permissionFailure, "zones are created in the private database")
        }
    }
}

/// A field's fixed type and whether it is encrypted, as the schema records it.
public struct FieldSchema: Sendable, Hashable {
    public let type: FieldType
    public let encrypted: Bool

    public init(type: FieldType, encrypted: Bool) {
        self.type = type
        self.encrypted = encrypted
    }
}

/// A field's type and encryption, fixed before the save that first uses it: needed for a list
/// field whose first value is empty, which carries no element type. Declarations passed to a save
/// are applied in its transaction, so a save that fails fixes nothing.
public struct FieldDeclaration: Sendable, Hashable {
    public let recordType: String
    public let field: String
    public let type: FieldType
    public let encrypted: Bool

    public init(_ field: String, of recordType: String, type: FieldType, encrypted: Bool) {
        self.recordType = recordType
        self.field = field
        self.type = type
        self.encrypted = encrypted
    }
}

extension RecordDatabase {
    /// The fields of a record type in a zone, as fixed by their first saves.
    public func schema(of recordType: String, in zone: ZoneID) async throws -> [String: FieldSchema] {
        try requireScope(zone)
        try Names.validateRecordType(recordType)
        let session = self.session
        return try await session.read { db in
            let row = try session.accessControl.zoneRow(db, zone)
            try session.accessControl.checkCanRead(db, zone: row)
            return try session.schemaRegistry.schema(db, zoneRowID: row.rowID, recordType: recordType, fresh: true)
        }
    }

    /// Fixes a field's type and encryption for a record type in a zone before any save (as
    /// CloudKit's schema does). A field already fixed must agree, or `.invalidArguments`.
    /// To fix a field only if a save succeeds, pass a ``FieldDeclaration`` to the save instead.
    public func defineField(_ field: String, of recordType: String, type: FieldType, encrypted: Bool, in zone: ZoneID) async throws {
        try requireScope(zone)
        let session = self.session
        try await session.store.write { db in
            let row = try session.accessControl.zoneRow(db, zone)
            try session.accessControl.checkCanWrite(db, zone: row)
            _ = try session.schemaRegistry.declareFields(db, zoneRowID: row.rowID, [FieldDeclaration(field, of: recordType, type: type, encrypted: encrypted)])
        }
    }

    /// The type of each named record that exists in the zone (names without a record are left
    /// out). Reads names and types only: nothing is decrypted.
    public func recordTypes(named names: [String], in zone: ZoneID) async throws -> [String: String] {
        try requireScope(zone)
        for name in names { try Names.validateRecord(name) }
        let session = self.session
        // One read per 1,000 names: each takes a bounded number of round trips and a bounded
        // answer where the backend reads across a network, however many names there are.
        var types = [String: String]()
        var start = names.startIndex
        guard !names.isEmpty else { return types }
        repeat {
            let chunk = Array(names[start..<min(start + 1_000, names.endIndex)])
            types.merge(try await session.read { db in
                let row = try session.accessControl.zoneRow(db, zone)
                try session.accessControl.checkCanRead(db, zone: row)
                return try db.recordTypes(zoneRowID: row.rowID, names: chunk)
            }) { _, new in new }
            start += chunk.count
        } while start < names.endIndex
        return types
    }

    /// Creates the query index of plain fields of a record type now, instead of at their first
    /// query (which otherwise pays the one-time cost of building it). On PostgreSQL, where a
    /// field's index depends on its type, the fields are indexed as the zones' schemas type
    /// them; a field no schema has yet gets its index at its first query.
    public func ensureIndex(recordType: String, fields: [String]) async throws {
        try Names.validateRecordType(recordType)
        for field in fields { try Names.validateFieldKey(field) }
        try await session.schemaRegistry.ensureIndexes(recordType: recordType, fieldNames: fields)
    }

    /// Every record of a zone, in pages ordered by name: pass the last name of a page as
    /// `after` to get the next. An empty page means the end.
    public func records(in zone: ZoneID, after name: String? = nil, limit: Int = 400) async throws -> [Record] {
        try requireScope(zone)
        precondition(limit > 0, "limit must be positive")
        let session = self.session
        let page = try await confirmedRecords(in: zone, after: name, limit: limit)
        guard let pending = session.pendingChanges else { return page }
        // A replica shows its pending changes over the confirmed records: those whose names
        // fall in this page's range (to the end, for the last page).
        let changes = try await pending.latest(in: zone)
        guard !changes.isEmpty else { return page }
        func precedes(_ a: String, _ b: String) -> Bool { Array(a.utf8).lexicographicallyPrecedes(Array(b.utf8)) }
        let end = page.count == limit ? page.last?.name : nil
        var byName = Dictionary(page.map { ($0.name, $0) }) { a, _ in a }
        for (changed, change) in changes where (name.map { precedes($0, changed) } ?? true) && (end.map { !precedes($0, changed) } ?? true) {
            byName[changed] = change.record(modifier: session.userID)
        }
        return byName.values.sorted { precedes($0.name, $1.name) }
    }

    private func confirmedRecords(in zone: ZoneID, after name: String?, limit: Int) async throws -> [Record] {
        let session = self.session
        return try await session.read { db in
            let row = try session.accessControl.zoneRow(db, zone)
            try session.accessControl.checkCanRead(db, zone: row)
            var records = [Record]()
            records.reserveCapacity(limit)
            try session.reader.decodeRows(db, zone: row, expected: limit, read: { add in
                try db.readRecordRows(zoneRowID: row.rowID, after: name ?? "", limit: limit, into: add)
            },
                                   deliver: { _, result in records.append(try result.get()) })
            return records
        }
    }
}

/// The zones of a database (``RecordDatabase/zoneList()``): those that verify, and those left out.
public struct ZoneList: Sendable {
    public let zones: [Zone]
    public let refused: [RefusedZone]
}

/// A zone left out of a list because it fails verification, with why (`run 'coffer audit'`).
public struct RefusedZone: Sendable {
    public let id: ZoneID
    public let error: StoreError

    public init(id: ZoneID, error: StoreError) {
        self.id = id
        self.error = error
    }
}

import Foundation
import GRDB

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
        return try session.createZone(named: name).id
    }

    /// The zones of this database: those you own (private), or those shared with you that you
    /// accepted (shared).
    public func zones() async throws -> [Zone] {
        scope == .private ? try session.ownedZones() : try session.sharedZones()
    }

    /// Deletes a zone with its records, keys and schema.
    /// - Throws: `.zoneNotFound`, `.permissionFailure`.
    public func deleteZone(_ zone: ZoneID) async throws {
        try session.deleteZone(zone)
    }

    // MARK: Records

    /// Saves one record and returns it with its new change tag.
    /// - Throws: `.serverRecordChanged` (with ``StoreError/serverRecord``) when the stored record
    ///   changed since `record` was fetched; `.invalidArguments` for names, types or a schema
    ///   mismatch; `.limitExceeded`; `.zoneNotFound`; `.permissionFailure`.
    public func save(_ record: Record, policy: SavePolicy = .ifServerRecordUnchanged) async throws -> Record {
        try session.modify(zone: record.zoneID, saving: [record], deleting: [], policy: policy, authorLabel: transactionAuthor).saved[0]
    }

    /// Saves and deletes records of one zone in one atomic batch (at most 400 records and 2 MiB).
    /// - Throws: `.partialFailure` with per-record errors when any item fails; nothing is saved then.
    public func modify(saving records: [Record], deleting deletions: [RecordDeletion] = [], in zone: ZoneID,
                       policy: SavePolicy = .ifServerRecordUnchanged) async throws -> ModifyResult {
        try session.modify(zone: zone, saving: records, deleting: deletions, policy: policy, authorLabel: transactionAuthor)
    }

    /// The record named `name`.
    /// - Throws: `.unknownItem`, `.zoneNotFound`, `.integrityFailure` when its stored bytes fail authentication.
    public func record(named name: String, in zone: ZoneID) async throws -> Record {
        guard let result = try session.fetch(zone: zone, names: [name])[name] else {
            throw StoreError(.unknownItem, "no record '\(name)' in zone '\(zone.name)'")
        }
        return try result.get()
    }

    /// Several records by name; each name maps to its record or its error.
    public func records(named names: [String], in zone: ZoneID) async throws -> [String: Result<Record, StoreError>] {
        try session.fetch(zone: zone, names: names)
    }

    /// Deletes one record, only if it is still at `changeTag` when one is given.
    public func delete(recordNamed name: String, in zone: ZoneID, ifMatch changeTag: String? = nil) async throws {
        _ = try session.modify(zone: zone, saving: [], deleting: [RecordDeletion(name: name, ifMatch: changeTag)],
                               policy: .ifServerRecordUnchanged, authorLabel: transactionAuthor)
    }

    /// One page of the records of a type that match a query on plain fields.
    public func query(_ query: Query, in zone: ZoneID, cursor: QueryCursor? = nil) async throws -> QueryResult {
        try session.query(query, zone: zone, cursor: cursor)
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

extension RecordDatabase {
    /// The fields of a record type in a zone, as fixed by their first saves.
    public func schema(of recordType: String, in zone: ZoneID) async throws -> [String: FieldSchema] {
        try Names.validateRecordType(recordType)
        let session = self.session
        return try session.store.read { db in
            let row = try ZoneRow.fetch(db, zone)
            try session.checkCanRead(db, zone: row)
            return try session.schema(db, zoneRowID: row.rowID, recordType: recordType, fresh: true)
                .mapValues { FieldSchema(type: $0.type, encrypted: $0.encrypted) }
        }
    }

    /// Fixes a field's type and encryption for a record type in a zone before any save (as
    /// CloudKit's schema does). A field already fixed must agree, or `.invalidArguments`.
    /// Needed for a list field whose first value is empty, which carries no element type.
    public func defineField(_ field: String, of recordType: String, type: FieldType, encrypted: Bool, in zone: ZoneID) async throws {
        try Names.validateRecordType(recordType)
        try Names.validateFieldKey(field)
        let session = self.session
        try session.store.write { db in
            let row = try ZoneRow.fetch(db, zone)
            try session.checkCanWrite(db, zone: row)
            let schema = try session.schema(db, zoneRowID: row.rowID, recordType: recordType, fresh: true)
            if let spec = schema[field] {
                guard spec.type == type, spec.encrypted == encrypted else {
                    throw StoreError(.invalidArguments, "field '\(field)' of \(recordType) is \(spec.encrypted ? "encrypted" : "plain") \(spec.type) (fixed by its first save)")
                }
                return
            }
            try db.execute(sql: "INSERT INTO field_schema (zone_id, record_type, field, value_type, encrypted) VALUES (?, ?, ?, ?, ?)",
                           arguments: [row.rowID, recordType, field, type.description, encrypted])
            let key = SchemaKey(zoneRowID: row.rowID, recordType: recordType)
            db.afterNextTransaction(onCommit: { _ in
                session.schemas.withLock { _ = $0.removeValue(forKey: key) }
                session.forgetRowContexts(zoneRowID: key.zoneRowID)
            })
        }
    }

    /// Creates the query index of plain fields of a record type now, instead of at their first
    /// query (which otherwise pays the one-time cost of building it).
    public func ensureIndex(recordType: String, fields: [String]) async throws {
        try Names.validateRecordType(recordType)
        for field in fields { try Names.validateFieldKey(field) }
        try session.ensureIndexes(recordType: recordType, fields: fields)
    }

    /// Every record of a zone, in pages ordered by name: pass the last name of a page as
    /// `after` to get the next. An empty page means the end.
    public func records(in zone: ZoneID, after name: String? = nil, limit: Int = 400) async throws -> [Record] {
        precondition(limit > 0, "limit must be positive")
        let session = self.session
        return try session.store.read { db in
            let row = try ZoneRow.fetch(db, zone)
            try session.checkCanRead(db, zone: row)
            let statement = try RawStatement(db.cachedStatement(sql: "SELECT \(Session.recordColumns) FROM record WHERE zone_id = ? AND name > ? ORDER BY name LIMIT ?"),
                                             arguments: [row.rowID, name ?? "", limit])
            var records = [Record]()
            records.reserveCapacity(limit)
            try session.decodeRows(db, zone: row, expected: limit, read: { add in try Session.readRows(statement, into: add) },
                                   deliver: { _, result in records.append(try result.get()) })
            return records
        }
    }
}

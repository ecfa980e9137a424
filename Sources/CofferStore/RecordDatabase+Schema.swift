import Foundation

extension RecordDatabase {
    /// Every record type of a zone with its fields (record type → field → spec), as fixed by
    /// their first saves or declared.
    ///
    /// ```swift
    /// let schema = try await db.schema(in: zone)
    /// print(SchemaFile(schema: schema).text)
    /// ```
    /// - Throws: `.zoneNotFound`; `.integrityFailure` for a schema row Coffer could not have written.
    public func schema(in zone: ZoneID) async throws -> [String: [String: FieldSchema]] {
        try requireScope(zone)
        return try await session.schemaChanges.zoneSchema(zone: zone)
    }

    /// Fixes, as the zone's owner, each declared field the zone does not have yet, in one
    /// transaction; a field it has already must agree. Returns the declarations that were new
    /// (none when the schema already had them all: declaring again changes nothing).
    ///
    /// ```swift
    /// let file = try SchemaFile(parsing: text)
    /// let added = try await db.addFields(file.declarations, in: zone)
    /// ```
    /// - Throws: `.invalidArguments` naming a field the zone has with another type or
    ///   encryption (nothing is fixed then); `.permissionFailure` for anyone but the owner.
    @discardableResult
    public func addFields(_ declarations: [FieldDeclaration], in zone: ZoneID) async throws -> [FieldDeclaration] {
        try requireScope(zone)
        return try await session.schemaChanges.addFields(declarations, zone: zone)
    }

    /// Removes a field from a record type's schema, as the zone's owner, when no record of the
    /// zone uses it; afterwards the name can be fixed again with any type. The drop writes an
    /// empty commit of the owner to the zone's log in the same transaction.
    ///
    /// ```swift
    /// try await db.dropField("titel", of: "Note", in: zone)
    /// ```
    /// - Throws: `.invalidArguments` when records use it (the message counts them);
    ///   `.unknownItem` when the type has no such field; `.integrityFailure` when a record of the
    ///   type fails verification; `.permissionFailure` for anyone but the owner.
    public func dropField(_ field: String, of recordType: String, in zone: ZoneID) async throws {
        try requireScope(zone)
        try await session.schemaChanges.dropFields([field], of: recordType, zone: zone, label: transactionAuthor)
    }

    /// Removes a record type (all its fields) from a zone's schema, as the zone's owner, when
    /// the zone has no record of the type. See ``dropField(_:of:in:)``.
    /// - Throws: `.invalidArguments` when records of the type exist (the message counts them);
    ///   `.unknownItem` when the schema has no such type; `.permissionFailure` for anyone but the owner.
    public func dropRecordType(_ recordType: String, in zone: ZoneID) async throws {
        try requireScope(zone)
        try await session.schemaChanges.dropFields(nil, of: recordType, zone: zone, label: transactionAuthor)
    }
}

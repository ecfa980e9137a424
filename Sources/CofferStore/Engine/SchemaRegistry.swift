import CofferCrypto
import Foundation

/// The schema of each zone's record types: declared by signed entries of the zone's log,
/// cached per session, and kept in the store's field indexes.
struct SchemaRegistry: Sendable {
    /// The store whose field indexes it keeps.
    let store: Store
    /// (zone row id, record type) → field → spec (``Session/schemas``).
    let schemas: Locked<[SchemaKey: [String: FieldSchema]]>
    /// Counts the cached schemas that lost or changed a field (``Session/schemaGeneration``).
    let schemaGeneration: Locked<Int>
    /// The kept row contexts, made from the cached schemas: dropped when a zone's schema changes.
    let rowContexts: RowContexts
}

extension SchemaRegistry {
    /// The schema of a record type in a zone, from the cache or the database.
    func schema(_ db: any StorageTransaction, zoneRowID: Int64, recordType: String, fresh: Bool = false) throws -> [String: FieldSchema] {
        let key = SchemaKey(zoneRowID: zoneRowID, recordType: recordType)
        if !fresh, let cached = schemas.withLock({ $0[key] }) { return cached }
        var fields = [String: FieldSchema]()
        for row in try db.fieldSchemaRows(zoneRowID: zoneRowID, recordType: recordType) {
            let name = row.valueType
            guard let type = FieldType(name: name) else {
                throw StoreError(.integrityFailure, "the schema of \(Names.printable(recordType)) names an unknown type '\(Names.printable(name))'")
            }
            // Writers skip the key checks of a record whose keys are all in its schema: so a
            // field name in the file must be one Coffer could have written.
            let field = row.field
            guard Names.isIdentifier(field) else {
                throw StoreError(.integrityFailure, "the schema of \(Names.printable(recordType)) names a field '\(Names.printable(field))' Coffer does not write: the store was changed")
            }
            fields[field] = FieldSchema(type: type, encrypted: row.encrypted)
        }
        let before = schemas.withLock { cache in
            defer { cache[key] = fields }
            return cache[key]
        }
        // The contexts kept were made with the schema cached: they stand while it is unchanged.
        if before != fields {
            if let before, before.contains(where: { fields[$0.key] != $0.value }) { schemaGeneration.withLock { $0 += 1 } }
            rowContexts.forget(zoneRowID: zoneRowID)
        }
        return fields
    }

    /// Checks a record's fields against the schema and adds the fields it introduces
    /// (with an index for each new queryable plain field). Throws `.invalidArguments` when a
    /// field's type or encryption disagrees with its first save.
    func applySchema(_ db: any StorageTransaction, zoneRowID: Int64, record: Record) throws {
        var known = try schema(db, zoneRowID: zoneRowID, recordType: record.recordType)
        if record.values.keys.contains(where: { known[$0] == nil }) || record.encryptedValues.keys.contains(where: { known[$0] == nil }) {
            // Another process may have added fields since this session cached the schema.
            known = try schema(db, zoneRowID: zoneRowID, recordType: record.recordType, fresh: true)
        }
        var added = [(String, FieldSchema)]()
        for (fields, encrypted) in [(record.values, false), (record.encryptedValues, true)] {
            for (key, value) in fields {
                if let spec = known[key] {
                    guard spec.encrypted == encrypted else {
                        throw StoreError(.invalidArguments, "field '\(key)' of \(record.recordType) is \(spec.encrypted ? "encrypted" : "plain") (fixed by its first save); it cannot be saved \(encrypted ? "encrypted" : "plain")")
                    }
                    guard Self.value(value, matches: spec.type) else {
                        throw StoreError(.invalidArguments, "field '\(key)' of \(record.recordType) has type \(spec.type) (fixed by its first save), not \(value.fieldType)")
                    }
                } else {
                    if case .list(let items) = value, items.isEmpty {
                        throw StoreError(.invalidArguments, "field '\(key)' of \(record.recordType) is new: its first save needs at least one list element, to fix its type")
                    }
                    let spec = FieldSchema(type: value.fieldType, encrypted: encrypted)
                    known[key] = spec
                    added.append((key, spec))
                }
            }
        }
        guard !added.isEmpty else { return }
        for (field, spec) in added { try db.insertFieldSchema(zoneRowID: zoneRowID, recordType: record.recordType, field: field, schema: spec) }
        let key = SchemaKey(zoneRowID: zoneRowID, recordType: record.recordType)
        // Only cache after the transaction commits; until then, a rollback must not leave fields behind.
        let snapshot = known
        db.afterTransaction(onCommit: { [self] in
            self.schemas.withLock { $0[key] = snapshot }
            self.rowContexts.forget(zoneRowID: zoneRowID)
        }, onRollback: { [self] in
            self.schemas.withLock { _ = $0.removeValue(forKey: key) }
            self.rowContexts.forget(zoneRowID: zoneRowID)
        })
    }

    /// Fixes the declared fields that are not fixed yet, in the caller's write transaction;
    /// a declared field already fixed must agree (`.invalidArguments`). Returns the record
    /// types whose schema it changed. The session's cached schemas of those types are dropped
    /// when the transaction ends, committed or rolled back, so a rolled-back save leaves no
    /// field behind, not even in memory.
    func declareFields(_ db: any StorageTransaction, zoneRowID: Int64, _ declarations: [FieldDeclaration]) throws -> Set<String> {
        guard !declarations.isEmpty else { return [] }
        var changed = Set<String>()
        var known = [String: [String: FieldSchema]]()
        for declaration in declarations {
            let (recordType, field) = (declaration.recordType, declaration.field)
            try Names.validateRecordType(recordType)
            try Names.validateFieldKey(field)
            if known[recordType] == nil { known[recordType] = try schema(db, zoneRowID: zoneRowID, recordType: recordType, fresh: true) }
            if let spec = known[recordType]?[field] {
                guard spec.type == declaration.type, spec.encrypted == declaration.encrypted else {
                    throw StoreError(.invalidArguments, "field '\(field)' of \(recordType) is \(spec.encrypted ? "encrypted" : "plain") \(spec.type) (fixed by its first save), not \(declaration.encrypted ? "encrypted" : "plain") \(declaration.type)")
                }
                continue
            }
            let spec = FieldSchema(type: declaration.type, encrypted: declaration.encrypted)
            try db.insertFieldSchema(zoneRowID: zoneRowID, recordType: recordType, field: field, schema: spec)
            known[recordType]?[field] = spec
            changed.insert(recordType)
        }
        guard !changed.isEmpty else { return [] }
        let keys = changed.map { SchemaKey(zoneRowID: zoneRowID, recordType: $0) }
        let forget: @Sendable () -> Void = { [self] in
            self.schemas.withLock { for key in keys { _ = $0.removeValue(forKey: key) } }
            self.rowContexts.forget(zoneRowID: zoneRowID)
        }
        db.afterTransaction(onCommit: forget, onRollback: forget)
        return changed
    }

    /// Forgets the cached schema of a type whose fields were dropped (``SchemaChanges/dropFields(_:of:zone:label:)``),
    /// with the row contexts made from it.
    func forgetDropped(_ key: SchemaKey) {
        schemas.withLock { _ = $0.removeValue(forKey: key) }
        schemaGeneration.withLock { $0 += 1 }
        rowContexts.forget(zoneRowID: key.zoneRowID)
    }

    /// Forgets the cached schemas of a zone, with its row contexts (after it is deleted).
    func forget(zoneRowID: Int64) {
        rowContexts.forget(zoneRowID: zoneRowID)
        schemas.withLock { cache in cache = cache.filter { $0.key.zoneRowID != zoneRowID } }
    }

    /// Whether a field saved with `value`, plain or encrypted, agrees with its fixed spec.
    static func field(_ value: RecordValue, encrypted: Bool, matches spec: FieldSchema) -> Bool {
        spec.encrypted == encrypted && Self.value(value, matches: spec.type)
    }

    static func value(_ value: RecordValue, matches type: FieldType) -> Bool {
        if case .list(let items) = value, items.isEmpty { return type.isList }
        return value.fieldType == type
    }
}

extension SchemaRegistry {
    /// Makes sure the expression index of each plain field exists, creating the missing ones
    /// (a one-time cost that grows with the number of records of the type). On SQLite, in a
    /// write transaction; on PostgreSQL, one `CREATE INDEX IF NOT EXISTS` each (see
    /// ``PostgresStorage/ensureQueryIndexes(recordType:fields:)``). The store remembers the
    /// (type, field) pairs it has seen indexed, by their SQLite index name.
    func ensureIndexes(recordType: String, fieldNames: [String]) async throws {
        switch store.backend {
        case .sqlite: try await ensureIndexes(recordType: recordType, fields: fieldNames.map { ($0, .string) }) // one index serves every type
        case .postgres(let storage):
            try await storage.ensureQueryIndexes(recordType: recordType, fields: try await storage.fieldTypes(recordType: recordType, fields: fieldNames))
        case .snapshot: break // the store behind the driver keeps its own indexes
        }
    }

    func ensureIndexes(recordType: String, fields: [(field: String, type: FieldType)]) async throws {
        // On PostgreSQL a field's index depends on its type (``PostgresQueries``): the store
        // remembers those it has seen by their PostgreSQL names.
        let names = fields.map { item in
            (field: item.field, type: item.type, index: store.isPostgres ? PostgresQueries.indexName(recordType: recordType, field: item.field, type: item.type)
                                                                         : SQLiteFieldIndex.name(recordType: recordType, field: item.field))
        }
        let known = store.knownIndexes.withLock { $0 }
        let missing = names.filter { !known.contains($0.index) }
        guard !missing.isEmpty else { return }
        switch store.backend {
        case .postgres(let storage):
            try await storage.ensureQueryIndexes(recordType: recordType, fields: missing.map { ($0.field, $0.type) })
        case .snapshot:
            return
        case .sqlite(let sqlite):
            let created = try await SQLiteLocalStorage(storage: sqlite).ensureFieldIndexes(recordType: recordType, fields: missing.map(\.field))
            if !created.isEmpty {
                store.logger.info("query index created", metadata: ["type": "\(recordType)", "fields": "\(created)"])
            }
        }
        store.knownIndexes.withLock { set in for item in missing { set.insert(item.index) } }
    }
}

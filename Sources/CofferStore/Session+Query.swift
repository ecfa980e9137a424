import Foundation
import GRDB

extension Session {
    func query(_ query: Query, zone zoneID: ZoneID, cursor: QueryCursor?) throws -> QueryResult {
        try Names.validateRecordType(query.recordType)
        if let limit = query.limit, !(1...Limits.maxQueryLimit).contains(limit) {
            throw StoreError(.invalidArguments, "a query limit is between 1 and \(Limits.maxQueryLimit)")
        }
        // Fields used in the query get their index first, once the query is known to be valid
        // and allowed (a refused query never writes).
        let fields = Set(query.predicates.map(\.field) + query.sort.map(\.field))
        let known = store.knownIndexes.withLock { $0 }
        let allIndexed = fields.allSatisfy { Names.isIdentifier($0) && known.contains(Self.indexName(recordType: query.recordType, field: $0)) }
        if !fields.isEmpty && !allIndexed {
            let valid: Bool = try store.read { db in
                let zone = try ZoneRow.fetch(db, zoneID)
                try self.checkCanRead(db, zone: zone)
                let schema = try self.schema(db, zoneRowID: zone.rowID, recordType: query.recordType, fresh: true)
                return fields.allSatisfy { field in
                    Names.isIdentifier(field) && (schema[field].map { !$0.encrypted && $0.type.isQueryable } ?? false)
                }
            }
            // An invalid query is refused by the read below, with the reason; it never creates an index.
            if valid { try ensureIndexes(recordType: query.recordType, fields: fields.sorted()) }
        }
        return try store.read { db in
            let zone = try ZoneRow.fetch(db, zoneID)
            try self.checkCanRead(db, zone: zone)
            if let cursor {
                guard cursor.zoneUID == zone.uid, cursor.queryFingerprint == query.fingerprint else {
                    throw StoreError(.invalidArguments, "this cursor belongs to another query or zone")
                }
            }
            var schema = try self.schema(db, zoneRowID: zone.rowID, recordType: query.recordType)
            func plainSpec(_ field: String, for use: String) throws -> FieldSpec {
                try Names.validateFieldKey(field)
                if schema[field] == nil { // another process may have added it since this session cached the schema
                    schema = try self.schema(db, zoneRowID: zone.rowID, recordType: query.recordType, fresh: true)
                }
                guard let spec = schema[field] else {
                    throw StoreError(.invalidArguments, "\(query.recordType) has no field '\(field)' in zone '\(zoneID.name)'")
                }
                guard !spec.encrypted else {
                    throw StoreError(.invalidArguments, "field '\(field)' is encrypted; encrypted fields cannot be \(use)")
                }
                guard spec.type.isQueryable else {
                    throw StoreError(.invalidArguments, "field '\(field)' has type \(spec.type), which cannot be \(use)")
                }
                return spec
            }

            var sql = "SELECT \(Self.recordColumns) FROM record WHERE zone_id = ? AND type = '\(query.recordType)'"
            var arguments: [any DatabaseValueConvertible] = [zone.rowID]
            for predicate in query.predicates {
                let spec = try plainSpec(predicate.field, for: "queried")
                let expr = Self.fieldExpression(predicate.field)
                let value = try Self.sqlValue(predicate.value, for: spec.type, field: predicate.field)
                if predicate.comparison == .beginsWith {
                    guard spec.type == .string || spec.type == .reference, case .string(let prefix) = value.storage else {
                        throw StoreError(.invalidArguments, "begins-with (^=) applies to string fields; '\(predicate.field)' is \(spec.type)")
                    }
                    sql += " AND \(expr) >= ?"
                    arguments.append(prefix)
                    if let upper = Self.prefixUpperBound(prefix) {
                        sql += " AND \(expr) < ?"
                        arguments.append(upper)
                    }
                } else {
                    sql += " AND \(expr) \(predicate.comparison.rawValue) ?"
                    arguments.append(value)
                }
            }
            var order = [String]()
            for sort in query.sort {
                _ = try plainSpec(sort.field, for: "sorted on")
                order.append("\(Self.fieldExpression(sort.field)) \(sort.ascending ? "ASC" : "DESC")")
            }
            order.append(Self.tieOrder(query))
            sql += " ORDER BY " + order.joined(separator: ", ")
            let offset = cursor?.offset ?? 0
            var more = false
            if let limit = query.limit {
                sql += " LIMIT ? OFFSET ?"
                arguments.append(limit + 1)
                arguments.append(offset)
            }
            let statement = try RawStatement(db.cachedStatement(sql: sql), arguments: StatementArguments(arguments))
            var records = [Record]()
            records.reserveCapacity(query.limit ?? 0)
            var refused = [String: StoreError]()
            try self.decodeRows(db, zone: zone, expected: query.limit, read: { add in
                more = try Self.readRows(statement, limit: query.limit ?? .max, probe: query.limit != nil, into: add)
            }, deliver: { row, result in
                switch result {
                case .success(let record): records.append(record)
                case .failure(let e as StoreError) where e.code == .integrityFailure:
                    refused[row.name] = e
                    self.store.logger.warning("record refused", metadata: ["zone": "\(zoneID.name)", "record": "\(row.name)"])
                case .failure(let error): throw error
                }
            })
            var next: QueryCursor?
            if let limit = query.limit, more {
                next = QueryCursor(zoneUID: zone.uid, queryFingerprint: query.fingerprint, offset: offset + Int64(limit))
            }
            return QueryResult(records: records, refused: refused, cursor: next)
        }
    }

    /// The last ORDER BY term of a query: ties (and the default order) by name. With filters or
    /// sort keys, `+name` keeps the planner from walking the (zone, name) index instead of the
    /// field's expression index; but where that index gives name order itself (equality on one
    /// field, or an ascending sort on the one field used), plain `name` lets SQLite stream rows
    /// from it instead of reading and sorting them all before returning the first.
    static func tieOrder(_ query: Query) -> String {
        let fields = Set(query.predicates.map(\.field) + query.sort.map(\.field))
        let streams = fields.count == 1 && (query.sort.isEmpty ? query.predicates.allSatisfy { $0.comparison == .equal }
                                                               : query.sort.count == 1 && query.sort[0].ascending)
        return fields.isEmpty || streams ? "name" : "+name"
    }

    /// The SQL value a plain field of `type` is compared as (the same as `json_extract` yields).
    static func sqlValue(_ value: RecordValue, for type: FieldType, field: String) throws -> DatabaseValue {
        switch (type, value) {
        case (.string, .string(let s)), (.reference, .reference(let s)), (.reference, .string(let s)): return s.databaseValue
        case (.int, .int(let v)): return v.databaseValue
        case (.double, .double(let v)): return v.databaseValue
        case (.double, .int(let v)): return Double(v).databaseValue
        case (.bool, .bool(let v)): return (v ? 1 : 0).databaseValue
        case (.date, .date(let d)): return d.timeIntervalSinceReferenceDate.databaseValue
        default:
            throw StoreError(.invalidArguments, "field '\(field)' has type \(type); cannot compare it with a \(value.fieldType)")
        }
    }

    /// The smallest string above every string that starts with `prefix` (byte order of UTF-8
    /// equals code point order): the prefix with its last scalar incremented. Nil when none exists.
    static func prefixUpperBound(_ prefix: String) -> String? {
        var scalars = Array(prefix.unicodeScalars)
        while let last = scalars.popLast() {
            var next = last.value + 1
            if next == 0xD800 { next = 0xE000 }
            if next <= 0x10FFFF, let scalar = Unicode.Scalar(next) {
                scalars.append(scalar)
                var s = String.UnicodeScalarView()
                s.append(contentsOf: scalars)
                return String(s)
            }
        }
        return nil
    }
}

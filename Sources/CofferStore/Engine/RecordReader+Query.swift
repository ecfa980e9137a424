import Foundation

extension RecordReader {
    func query(_ query: Query, zone zoneID: ZoneID, cursor: QueryCursor?) async throws -> QueryResult {
        try Names.validateRecordType(query.recordType)
        if let limit = query.limit, !(1...Limits.maxQueryLimit).contains(limit) {
            throw StoreError(.invalidArguments, "a query limit is between 1 and \(Limits.maxQueryLimit)")
        }
        // On SQLite, the fields used in the query get their index first, once the query is known
        // to be valid and allowed (a refused query never writes). On PostgreSQL, where an index
        // depends on the field's type, once the query has run (see below).
        let fields = Set(query.predicates.map(\.field) + query.sort.map(\.field))
        let known = store.knownIndexes.withLock { $0 }
        let allIndexed = fields.allSatisfy { Names.isIdentifier($0) && known.contains(SQLiteFieldIndex.name(recordType: query.recordType, field: $0)) }
        if store.isSQLite && !fields.isEmpty && !allIndexed {
            let valid: [(field: String, type: FieldType)]? = try await verifiedLogs.read { db in
                let zone = try self.accessControl.zoneRow(db, zoneID)
                try self.accessControl.checkCanRead(db, zone: zone)
                let schema = try self.schemaRegistry.schema(db, zoneRowID: zone.rowID, recordType: query.recordType, fresh: true)
                var typed = [(field: String, type: FieldType)]()
                for field in fields.sorted() {
                    guard Names.isIdentifier(field), let spec = schema[field], !spec.encrypted, spec.type.isQueryable else { return nil }
                    typed.append((field, spec.type))
                }
                return typed
            }
            // An invalid query is refused by the read below, with the reason; it never creates an index.
            if let valid { try await schemaRegistry.ensureIndexes(recordType: query.recordType, fields: valid) }
        }
        let (result, plan) = try await run(query, zone: zoneID, cursor: cursor)
        if store.isPostgres, !plan.predicates.isEmpty || !plan.sorts.isEmpty {
            try await schemaRegistry.ensureIndexes(recordType: query.recordType, fields: plan.fields)
        }
        return result
    }

    /// Runs a query whose fields have their indexes; returns its result and its plan.
    private func run(_ query: Query, zone zoneID: ZoneID, cursor: QueryCursor?) async throws -> (QueryResult, QueryPlan) {
        return try await verifiedLogs.read { db in
            let zone = try self.accessControl.zoneRow(db, zoneID)
            try self.accessControl.checkCanRead(db, zone: zone)
            let (plan, schema) = try self.plan(query, cursor: cursor, zone: zone, db)
            var more = false
            var records = [Record]()
            records.reserveCapacity(query.limit ?? 0)
            var refused = [String: StoreError]()
            var last: StoredRow? // a page's last row, for its cursor
            let paged = query.limit != nil
            // SQLite chose the rows through the field indexes, which no signature covers: each
            // record must match the query by its verified values, and come in the query's order.
            var check = QueryCheck(query, schema: schema)
            try self.decodeRows(db, zone: zone, expected: query.limit, read: { add in
                more = try db.queryRecordRows(zoneRowID: zone.rowID, plan: plan, into: add)
            }, deliver: { row, result in
                if paged { last = row }
                switch consume result { // the record moved into `records`, not copied
                case .success(let record):
                    guard check.matches(record) else {
                        refused[row.name] = StoreError(.integrityFailure, "record '\(row.name)' in zone '\(zoneID.name)' does not match the query, yet the store's index returned it: the store was changed")
                        return
                    }
                    if let previous = check.follow(record) {
                        throw StoreError(.integrityFailure, "the store's index returned records '\(previous)' and '\(row.name)' of zone '\(zoneID.name)' out of order: the store was changed")
                    }
                    records.append(record)
                case .failure(let e as StoreError) where e.code == .integrityFailure:
                    refused[row.name] = e
                    self.store.logger.warning("record refused", metadata: ["zone": "\(zoneID.name)", "record": "\(row.name)"])
                case .failure(let error): throw error
                }
            })
            var next: QueryCursor?
            if more, let last {
                next = QueryCursor(zoneUID: zone.uid, queryFingerprint: query.fingerprint,
                                   sortValues: try db.querySortValues(zoneRowID: zone.rowID, plan: plan, name: last.name), name: last.name)
            }
            return (QueryResult(records: records, refused: refused, cursor: next), plan)
        }
    }

    /// The plan of `query` on `zone`: each predicate's and sort key's field checked against the
    /// zone's schema (a plain field of a queryable type), the cursor checked as this query's,
    /// with the schema it was checked against (read again once when a field is missing: another
    /// process may have declared it since this session cached the schema).
    private func plan(_ query: Query, cursor: QueryCursor?, zone: ZoneRow, _ db: any StorageTransaction) throws -> (QueryPlan, [String: FieldSchema]) {
        if let cursor {
            guard cursor.zoneUID == zone.uid, cursor.queryFingerprint == query.fingerprint else {
                throw StoreError(.invalidArguments, "this cursor belongs to another query or zone")
            }
        }
        var schema = try schemaRegistry.schema(db, zoneRowID: zone.rowID, recordType: query.recordType)
        func plainSpec(_ field: String, for use: String) throws -> FieldSchema {
            try Names.validateFieldKey(field)
            if schema[field] == nil { // another process may have added it since this session cached the schema
                schema = try schemaRegistry.schema(db, zoneRowID: zone.rowID, recordType: query.recordType, fresh: true)
            }
            guard let spec = schema[field] else {
                throw StoreError(.invalidArguments, "\(query.recordType) has no field '\(field)' in zone '\(zone.id.name)'")
            }
            guard !spec.encrypted else {
                throw StoreError(.invalidArguments, "field '\(field)' is encrypted; encrypted fields cannot be \(use)")
            }
            guard spec.type.isQueryable else {
                throw StoreError(.invalidArguments, "field '\(field)' has type \(spec.type), which cannot be \(use)")
            }
            return spec
        }

        var predicates = [QueryPlan.Predicate]()
        for predicate in query.predicates {
            let spec = try plainSpec(predicate.field, for: "queried")
            let value = try Self.comparedValue(predicate.value, for: spec.type, field: predicate.field)
            if predicate.comparison == .beginsWith {
                guard spec.type == .string || spec.type == .reference, case .text = value else {
                    throw StoreError(.invalidArguments, "begins-with (^=) applies to string fields; '\(predicate.field)' is \(spec.type)")
                }
            }
            predicates.append(QueryPlan.Predicate(field: predicate.field, type: spec.type, comparison: predicate.comparison, value: value))
        }
        var sorts = [QueryPlan.Sort]()
        for sort in query.sort {
            sorts.append(QueryPlan.Sort(field: sort.field, type: try plainSpec(sort.field, for: "sorted on").type, ascending: sort.ascending))
        }
        var after: QueryPlan.Position?
        if let cursor {
            guard cursor.sortValues.count == query.sort.count,
                  zip(cursor.sortValues, sorts).allSatisfy({ $0.fits($1.type) }) else {
                throw StoreError(.invalidArguments, "this cursor does not fit the query's sort keys")
            }
            after = QueryPlan.Position(values: cursor.sortValues, name: cursor.name)
        }
        return (QueryPlan(recordType: query.recordType, predicates: predicates, sorts: sorts, after: after, limit: query.limit), schema)
    }

    /// What a query's records are checked against once verified, each as it is delivered:
    /// every predicate must hold by the record's own values, and the records must come in the
    /// query's order (on the first sort key that differs, NULL first ascending and last
    /// descending, then by name). Values compare as SQLite compares them (strings by UTF-8
    /// bytes, a missing field as NULL). Each predicate's and sort key's type is looked up once.
    struct QueryCheck {
        private let predicates: [(field: String, comparison: Query.Comparison, type: FieldType?, want: SQLKey?)]
        private let sorts: [(field: String, ascending: Bool, type: FieldType?)]
        private var previousKeys: [SQLKey?]
        private var previousName: String?

        init(_ query: Query, schema: [String: FieldSchema]) {
            predicates = query.predicates.map { p in
                (p.field, p.comparison, schema[p.field]?.type, schema[p.field].flatMap { SQLKey(p.value, type: $0.type) })
            }
            sorts = query.sort.map { ($0.field, $0.ascending, schema[$0.field]?.type) }
            previousKeys = Array(repeating: nil, count: sorts.count)
        }

        private static func key(_ record: Record, _ field: String, _ type: FieldType?) -> SQLKey? {
            guard let type, let value = record.values[field] else { return nil }
            return SQLKey(value, type: type)
        }

        func matches(_ record: Record) -> Bool {
            predicates.allSatisfy { p in
                guard let have = Self.key(record, p.field, p.type), let want = p.want else { return false }
                switch p.comparison {
                case .equal: return have == want
                case .notEqual: return have != want
                case .lessThan: return have < want
                case .lessThanOrEqual: return !(want < have)
                case .greaterThan: return want < have
                case .greaterThanOrEqual: return !(have < want)
                case .beginsWith:
                    guard case .text(let s) = have, case .text(let prefix) = want else { return false }
                    return s.utf8.starts(with: prefix.utf8)
                }
            }
        }

        /// Takes `record` as the latest one; returns the name of the one before it when it
        /// should have come after it, nil when the order holds.
        mutating func follow(_ record: Record) -> String? {
            defer { previousName = record.name }
            var ordered: Bool?
            for (i, sort) in sorts.enumerated() {
                let key = Self.key(record, sort.field, sort.type)
                defer { previousKeys[i] = key }
                guard previousName != nil, ordered == nil, key != previousKeys[i] else { continue }
                let less = switch (previousKeys[i], key) {
                case (nil, _): true
                case (_, nil): false
                case (let x?, let y?): x < y
                }
                ordered = less == sort.ascending
            }
            guard let previous = previousName else { return nil }
            // Record names are printable ASCII, where String's order is byte order.
            return ordered ?? (previous < record.name) ? nil : previous
        }
    }

    /// A plain value as SQLite compares it in a query: `json_extract` of its stored form.
    enum SQLKey: Equatable, Comparable {
        case int(Int64)
        case real(Double)
        case text(String)

        init?(_ value: RecordValue, type: FieldType) {
            switch (type, value) {
            case (.string, .string(let s)), (.reference, .reference(let s)), (.reference, .string(let s)): self = .text(s)
            case (.int, .int(let v)): self = .int(v)
            case (.double, .double(let v)): self = .real(v)
            case (.double, .int(let v)): self = .real(Double(v))
            case (.bool, .bool(let v)): self = .int(v ? 1 : 0)
            case (.date, .date(let d)): self = .real(d.timeIntervalSinceReferenceDate)
            default: return nil
            }
        }

        static func < (a: SQLKey, b: SQLKey) -> Bool {
            switch (a, b) {
            case (.int(let x), .int(let y)): return x < y
            case (.real(let x), .real(let y)): return x < y
            case (.text(let x), .text(let y)): return x.utf8.lexicographicallyPrecedes(y.utf8)
            default: return false // one field has one type
            }
        }

        static func == (a: SQLKey, b: SQLKey) -> Bool {
            switch (a, b) {
            case (.int(let x), .int(let y)): return x == y
            case (.real(let x), .real(let y)): return x == y
            case (.text(let x), .text(let y)): return x.utf8.elementsEqual(y.utf8)
            default: return false
            }
        }
    }

    /// The value a plain field of `type` is compared as (the same as SQLite's `json_extract`
    /// yields): text, an integer (bools as 0 and 1) or a double (dates as seconds since 2001).
    static func comparedValue(_ value: RecordValue, for type: FieldType, field: String) throws -> QueryCursor.SortValue {
        switch (type, value) {
        case (.string, .string(let s)), (.reference, .reference(let s)), (.reference, .string(let s)): return .text(s)
        case (.int, .int(let v)): return .int(v)
        case (.double, .double(let v)): return .double(v)
        case (.double, .int(let v)): return .double(Double(v))
        case (.bool, .bool(let v)): return .int(v ? 1 : 0)
        case (.date, .date(let d)): return .double(d.timeIntervalSinceReferenceDate)
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

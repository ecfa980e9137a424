import CofferCrypto
import Foundation
import PostgresNIO

/// Queries on PostgreSQL. `record.plain` is the JSON text the engine signed, kept byte for
/// byte; a query reads a field of it through `jsonb`:
/// - string and reference fields as text, `((plain::jsonb ->> 'f') COLLATE "C")`, so that they
///   compare and sort by bytes, as on SQLite;
/// - int, double, bool and date fields as JSON values, `(plain::jsonb -> 'f')`, which compare
///   as numbers (and false before true), again as on SQLite.
///
/// A missing field is NULL, first ascending and last descending (`NULLS FIRST`), as SQLite
/// orders it. Each (record type, field, kind) gets a partial expression index on first use,
/// ending with the record name, as on SQLite.
enum PostgresQueries {
    /// How a field is read: as text or as a JSON value.
    enum Kind: String {
        case text
        case json

        init(_ type: FieldType) {
            switch type {
            case .string, .reference: self = .text
            default: self = .json
            }
        }
    }

    /// The expression that reads a field (keys are identifiers, safe inline); the same text in
    /// the index and in queries.
    static func expression(_ field: String, _ type: FieldType) -> String {
        switch Kind(type) {
        case .text: "((plain::jsonb ->> '\(field)') COLLATE \"C\")"
        case .json: "(plain::jsonb -> '\(field)')"
        }
    }

    static func indexName(recordType: String, field: String, type: FieldType) -> String {
        let key = Array("coffer.pg.index.v1".utf8) + [0] + Array(recordType.utf8) + [0] + Array(field.utf8) + [0] + Array(Kind(type).rawValue.utf8)
        return "record_field_" + Hex.encode(BLAKE2b.hash(key, outputByteCount: 16).prefix(8))
    }

    static func indexSQL(recordType: String, field: String, type: FieldType) -> String {
        """
        CREATE INDEX IF NOT EXISTS \(indexName(recordType: recordType, field: field, type: type)) \
        ON record (zone_id, \(expression(field, type)) NULLS FIRST, name) WHERE type = '\(recordType)'
        """
    }

    /// A statement's arguments, numbered as they are added.
    struct Arguments {
        var bindings = PostgresBindings()

        mutating func add(_ value: some PostgresNonThrowingEncodable) -> String {
            bindings.append(value)
            return "$\(bindings.count)"
        }

        /// A compared value in the form the field is read as: text, or JSON text cast to `jsonb`.
        mutating func add(_ value: QueryCursor.SortValue, as type: FieldType) -> String {
            switch (Kind(type), value) {
            case (.text, .text(let s)): return add(s)
            case (.text, _): return add(PostgresQueries.json(value, type)) // never made: the engine checked the types
            case (.json, _): return add(PostgresQueries.json(value, type)) + "::jsonb"
            }
        }
    }

    /// A compared value as the JSON the engine stores for a field of `type`.
    static func json(_ value: QueryCursor.SortValue, _ type: FieldType) -> String {
        switch value {
        case .null: return "null"
        case .int(let v): return type == .bool ? (v != 0 ? "true" : "false") : String(v)
        case .double(let v): return v.isFinite ? PlainValuesCodec.formatDouble(v) : "null"
        case .text(let s):
            var out = [UInt8]()
            PlainValuesCodec.appendString(s, to: &out)
            return String(decoding: out, as: UTF8.self)
        }
    }

    /// The statement that selects a plan's rows (one more than its limit, to tell whether more follow).
    static func select(_ plan: QueryPlan, zoneRowID: Int64, columns: String) -> PostgresQuery {
        var a = Arguments()
        var sql = "SELECT \(columns) FROM record WHERE zone_id = \(a.add(zoneRowID)) AND type = '\(plan.recordType)'"
        for p in plan.predicates {
            let e = expression(p.field, p.type)
            if p.comparison == .beginsWith, case .text(let prefix) = p.value {
                sql += " AND \(e) >= \(a.add(prefix))"
                if let upper = RecordReader.prefixUpperBound(prefix) { sql += " AND \(e) < \(a.add(upper))" }
            } else {
                sql += " AND \(e) \(p.comparison == .notEqual ? "<>" : p.comparison.rawValue) \(a.add(p.value, as: p.type))"
            }
        }
        if let after = plan.after {
            // Each value is bound as its key's field reads; the name as text.
            let condition = QueryPlan.keysetCondition(expressions: plan.sorts.map { expression($0.field, $0.type) },
                                                      ascending: plan.sorts.map(\.ascending), after: after) { value, key in
                key.map { a.add(value, as: plan.sorts[$0].type) } ?? a.add(value, as: .string)
            }
            sql += " AND (\(condition))"
        }
        let order = plan.sorts.map { "\(expression($0.field, $0.type)) \($0.ascending ? "ASC NULLS FIRST" : "DESC NULLS LAST")" } + ["name"]
        sql += " ORDER BY " + order.joined(separator: ", ")
        if let limit = plan.limit { sql += " LIMIT \(a.add(Int64(limit) + 1))" }
        return PostgresQuery(unsafeSQL: sql, binds: a.bindings)
    }

    /// The statement that reads one row's sort values, each as text (NULL when missing).
    static func selectSortValues(_ plan: QueryPlan, zoneRowID: Int64, name: String) -> PostgresQuery {
        var a = Arguments()
        let columns = plan.sorts.map { s in
            Kind(s.type) == .text ? expression(s.field, s.type) : "\(expression(s.field, s.type))::text"
        }
        return PostgresQuery(unsafeSQL: "SELECT \(columns.joined(separator: ", ")) FROM record WHERE zone_id = \(a.add(zoneRowID)) AND name = \(a.add(name))",
                             binds: a.bindings)
    }

    /// A sort value read by ``selectSortValues(_:zoneRowID:name:)``, in the form a cursor keeps
    /// for a field of `type` (a value Coffer does not write there is kept as it reads, and the
    /// cursor then fits no query).
    static func sortValue(_ text: String?, _ type: FieldType) -> QueryCursor.SortValue {
        guard let text else { return .null }
        if Kind(type) == .text { return .text(text) }
        switch text {
        case "true": return .int(1)
        case "false": return .int(0)
        case "null": return .null
        default: break
        }
        switch type {
        case .int, .bool: if let v = Int64(text) { return .int(v) }
        default: if text.first != "\"", let v = Double(text), v.isFinite { return .double(v) }
        }
        return .text(text)
    }
}

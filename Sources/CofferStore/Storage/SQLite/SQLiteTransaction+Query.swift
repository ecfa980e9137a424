import Foundation
import GRDB

/// Queries on SQLite: each plain field is `json_extract(plain, '$.field')`, the expression the
/// field's index is built on (``SQLiteFieldIndex/sql(recordType:field:)``), compared as SQLite
/// compares values (text by bytes, NULL first).
extension SQLiteTransaction {
    func queryRecordRows(zoneRowID: Int64, plan: QueryPlan, into add: (StoredRow) -> Void) throws -> Bool {
        var sql = "SELECT \(SQLiteTransaction.recordColumns) FROM record WHERE zone_id = ? AND type = '\(plan.recordType)'"
        var arguments: [DatabaseValue] = [zoneRowID.databaseValue]
        func bind(_ value: QueryCursor.SortValue) -> String {
            arguments.append(value.databaseValue)
            return "?"
        }
        for predicate in plan.predicates {
            let expr = SQLiteFieldIndex.expression(predicate.field)
            if predicate.comparison == .beginsWith, case .text(let prefix) = predicate.value {
                sql += " AND \(expr) >= \(bind(.text(prefix)))"
                if let upper = RecordReader.prefixUpperBound(prefix) { sql += " AND \(expr) < \(bind(.text(upper)))" }
            } else {
                sql += " AND \(expr) \(predicate.comparison.rawValue) \(bind(predicate.value))"
            }
        }
        if let after = plan.after {
            let condition = QueryPlan.keysetCondition(expressions: plan.sorts.map { SQLiteFieldIndex.expression($0.field) },
                                                      ascending: plan.sorts.map(\.ascending), after: after) { value, _ in bind(value) }
            sql += " AND (\(condition))"
        }
        var order = plan.sorts.map { "\(SQLiteFieldIndex.expression($0.field)) \($0.ascending ? "ASC" : "DESC")" }
        order.append(Self.tieOrder(fields: Set(plan.fields.map(\.field)), comparisons: plan.predicates.map(\.comparison),
                                    ascending: plan.sorts.map(\.ascending)))
        sql += " ORDER BY " + order.joined(separator: ", ")
        if let limit = plan.limit { sql += " LIMIT \(bind(.int(Int64(limit) + 1)))" }
        let statement = try RawStatement(db.cachedStatement(sql: sql), arguments: StatementArguments(arguments))
        return try RecordRows.read(statement, limit: plan.limit ?? .max, probe: plan.limit != nil, into: add)
    }

    /// The values the named row was sorted on, as SQLite compared them (in the page's read
    /// transaction, so they are the ones the page was ordered by).
    func querySortValues(zoneRowID: Int64, plan: QueryPlan, name: String) throws -> [QueryCursor.SortValue] {
        guard !plan.sorts.isEmpty else { return [] }
        let columns = plan.sorts.map { SQLiteFieldIndex.expression($0.field) }.joined(separator: ", ")
        guard let row = try Row.fetchOne(db, sql: "SELECT \(columns) FROM record WHERE zone_id = ? AND name = ?", arguments: [zoneRowID, name]) else {
            throw StoreError(.internalError, "record '\(name)' left the zone during its own read")
        }
        return try (0..<plan.sorts.count).map { i in
            switch (row[i] as DatabaseValue).storage {
            case .null: return .null
            case .int64(let v): return .int(v)
            case .double(let v): return .double(v)
            case .string(let v): return .text(v)
            case .blob: throw StoreError(.internalError, "a sort value of record '\(name)' is a blob")
            }
        }
    }

    /// The last ORDER BY term on SQLite: ties (and the default order) by name. With filters or
    /// sort keys, `+name` keeps the planner from walking the (zone, name) index instead of the
    /// field's expression index; but where that index gives name order itself (equality on one
    /// field, or an ascending sort on the one field used), plain `name` lets SQLite stream rows
    /// from it instead of reading and sorting them all before returning the first.
    static func tieOrder(fields: Set<String>, comparisons: [Query.Comparison], ascending: [Bool]) -> String {
        let streams = fields.count == 1 && (ascending.isEmpty ? comparisons.allSatisfy { $0 == .equal }
                                                              : ascending.count == 1 && ascending[0])
        return fields.isEmpty || streams ? "name" : "+name"
    }

    /// ``tieOrder(fields:comparisons:ascending:)`` of a query as the store would plan it.
    static func tieOrder(_ query: Query) -> String {
        tieOrder(fields: Set(query.predicates.map(\.field) + query.sort.map(\.field)),
                 comparisons: query.predicates.map(\.comparison), ascending: query.sort.map(\.ascending))
    }
}

extension QueryCursor.SortValue {
    /// What SQLite compares it as.
    var databaseValue: DatabaseValue {
        switch self {
        case .null: return .null
        case .int(let v): return v.databaseValue
        case .double(let v): return v.databaseValue
        case .text(let v): return v.databaseValue
        }
    }
}

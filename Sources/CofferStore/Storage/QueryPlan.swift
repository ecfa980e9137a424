import Foundation

/// A query as a backend runs it: the rows of one record type in one zone whose plain fields
/// satisfy every predicate, ordered by the sort keys (a missing field first ascending, last
/// descending) and then by name, after a cursor's position, at most `limit` of them.
///
/// The engine made the plan from a ``Query`` it checked against the zone's schema: every field is
/// plain and queryable, and each value is in the form the field's values compare as. A backend
/// only selects rows; the engine checks each row it returns against the record's verified
/// values, since no signature covers an index.
package struct QueryPlan: Hashable, Sendable {
    package struct Predicate: Hashable, Sendable {
        package let field: String
        package let type: FieldType
        package let comparison: Query.Comparison
        /// The value compared with, never `.null`: text for string and reference fields, an
        /// integer for int and bool fields (1 is true), a double for double and date fields.
        let value: QueryCursor.SortValue
    }

    package struct Sort: Hashable, Sendable {
        package let field: String
        package let type: FieldType
        package let ascending: Bool
    }

    /// Where the previous page ended: its last row's sort values, as ``sortValues`` gave them,
    /// and its name.
    package struct Position: Hashable, Sendable {
        let values: [QueryCursor.SortValue]
        package let name: String
    }

    package let recordType: String
    package let predicates: [Predicate]
    package let sorts: [Sort]
    package let after: Position?
    /// At most this many rows; nil for all of them.
    package let limit: Int?

    /// The fields the plan reads, with their types, each once (the fields a backend indexes).
    package var fields: [(field: String, type: FieldType)] {
        var seen = Set<String>(), list = [(field: String, type: FieldType)]()
        for (field, type) in predicates.map({ ($0.field, $0.type) }) + sorts.map({ ($0.field, $0.type) }) where seen.insert(field).inserted {
            list.append((field, type))
        }
        return list
    }
}

extension QueryPlan {
    /// The rows after the plan's position in the order `ORDER BY sort…, name` gives, as SQL:
    /// after it on the first key, or equal on it and after it on the next, and so on, down to
    /// the name. A missing value (NULL) comes before every value ascending, after every value
    /// descending. When every key ascends and no value is NULL this is a row-value comparison,
    /// which both backends answer with a seek in the field's index. `expressions` reads each
    /// sort key; `bind` adds a value to the statement's arguments and returns its placeholder,
    /// given the value and the index of its sort key (nil for the name).
    static func keysetCondition(expressions: [String], ascending: [Bool], after position: Position,
                                bind: (QueryCursor.SortValue, Int?) -> String) -> String {
        let values = position.values
        let name = QueryCursor.SortValue.text(position.name)
        if ascending.allSatisfy({ $0 }), !values.contains(.null) {
            guard !expressions.isEmpty else { return "name > \(bind(name, nil))" }
            let placeholders = values.indices.map { bind(values[$0], $0) } + [bind(name, nil)]
            return "(\(expressions.joined(separator: ", ")), name) > (\(placeholders.joined(separator: ", ")))"
        }
        typealias Part = (bound: (value: QueryCursor.SortValue, key: Int?)?, sql: String) // `?` in `sql` stands for the bound value
        var terms = [String]()
        var equal = [Part]() // equal on every key so far
        func conjunction(_ parts: [Part]) -> String {
            parts.map { part in
                part.bound.map { part.sql.replacingOccurrences(of: "?", with: bind($0.value, $0.key)) } ?? part.sql
            }.joined(separator: " AND ")
        }
        for (i, value) in values.enumerated() {
            let e = expressions[i]
            let after: Part?
            switch (ascending[i], value) {
            case (true, .null): after = (nil, "\(e) IS NOT NULL")
            case (true, _): after = ((value, i), "\(e) > ?")
            case (false, .null): after = nil // NULL is last descending: nothing comes after it on this key
            case (false, _): after = ((value, i), "(\(e) < ? OR \(e) IS NULL)")
            }
            if let after { terms.append(conjunction(equal + [after])) }
            equal.append(value == .null ? (nil, "\(e) IS NULL") : ((value, i), "\(e) = ?"))
        }
        terms.append(conjunction(equal + [((name, nil), "name > ?")]))
        return terms.map { "(\($0))" }.joined(separator: " OR ")
    }
}

import CofferCrypto
import Foundation

/// The expression index of a plain field in an SQLite store: one per (record type, field),
/// shared by all zones, over `json_extract(plain, '$.field')` (the expression queries compare, in
/// `SQLiteTransaction+Query.swift`). Names and SQL are made here only.
enum SQLiteFieldIndex {
    /// The SQL expression that reads a plain field; the same text in indexes and queries.
    static func expression(_ field: String) -> String {
        "json_extract(plain, '$.\(field)')" // field keys are [A-Za-z][A-Za-z0-9_]*: safe inline
    }

    /// A partial expression index per (record type, plain field), shared by all zones. Its
    /// last column is the record name, so the rows of one value come out in name order: a
    /// query on `field = v` (or sorted on the field, ascending) needs no sorting, and returns its
    /// first row before it has read the others.
    static func sql(recordType: String, field: String) -> String {
        "CREATE INDEX IF NOT EXISTS \(Self.name(recordType: recordType, field: field)) ON record (zone_id, \(expression(field)), name) WHERE type = '\(recordType)'"
    }

    /// Whether `sql` is, word for word, the field index `name` that ``sql(recordType:field:)``
    /// makes (as SQLite stores it) or its version 1 predecessor: the only schema objects a store
    /// gains after its migrations.
    static func isFieldIndex(name: String, sql: String) -> Bool {
        let shape = /CREATE INDEX (record_field_[0-9a-f]{16}) ON record \(zone_id, json_extract\(plain, '\$\.([A-Za-z][A-Za-z0-9_]*)'\)(, name)?\) WHERE type = '([A-Za-z][A-Za-z0-9_]*)'/
        guard let match = sql.wholeMatch(of: shape), match.1 == name else { return false }
        let type = String(match.4), field = String(match.2)
        guard Names.isIdentifier(type), Names.isIdentifier(field) else { return false }
        return name == Self.name(recordType: type, field: field, version: match.3 == nil ? 1 : 2)
    }

    /// `record_field_` and 16 hex digits of BLAKE2b over the type and field: unambiguous.
    static func name(recordType: String, field: String) -> String {
        let key = SchemaFieldKey(recordType: recordType, field: field)
        if let known = indexNames.withLock({ $0[key] }) { return known }
        let name = Self.name(recordType: recordType, field: field, version: 2)
        indexNames.withLock { names in
            if names.count >= 4096 { names.removeAll() } // a bound, for processes that meet many types
            names[key] = name
        }
        return name
    }

    private struct SchemaFieldKey: Hashable {
        let recordType: String
        let field: String
    }

    /// Index names already computed (each is a BLAKE2b hash, and every query looks them up).
    private static let indexNames = Locked<[SchemaFieldKey: String]>([:])

    /// Version 1 indexes were (zone_id, expression) and are replaced by version 2 when met.
    static func name(recordType: String, field: String, version: Int) -> String {
        "record_field_" + Hex.encode(BLAKE2b.hash(Array("coffer.index.v\(version)".utf8) + [0] + Array(recordType.utf8) + [0] + Array(field.utf8),
                                                  outputByteCount: 16).prefix(8))
    }
}

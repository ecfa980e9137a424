import GRDB

/// Throwing reads of a row's values, used for every value Coffer reads through a GRDB `Row`.
///
/// GRDB's subscripts (`let name: String = row["name"]`, `row[0] as Int64`) trap on a NULL or on
/// a value that does not convert, and the schema does not rule either out: someone with write
/// access can set `PRAGMA writable_schema = ON`, drop a column's `NOT NULL` (or the table's
/// `STRICT`) from its `CREATE TABLE` text in `sqlite_schema`, write a NULL (or a value of
/// another type) into the column, and put the text back. SQLite never checks the rows again, and
/// the schema check at open sees the text Coffer made. These reads refuse such a value with an
/// `.integrityFailure` instead of ending the process.
extension Row {
    /// The value at `index`, which Coffer always writes: throws `.integrityFailure` on a NULL or
    /// on a value that does not convert to `T`.
    func required<T: DatabaseValueConvertible>(_ index: Int) throws -> T {
        let value = self[index] as DatabaseValue
        // NULL is refused first: a `T` that is itself optional (a dictionary's value type, say)
        // would otherwise decode it as nil.
        guard !value.isNull, let decoded = T.fromDatabaseValue(value) else { throw badValue(column: columnName(index), value) }
        return decoded
    }

    /// The value of the column `name`, which Coffer always writes: throws `.integrityFailure` on
    /// a NULL, on a value that does not convert to `T`, or when the row has no such column.
    func required<T: DatabaseValueConvertible>(_ name: String) throws -> T {
        let value = try databaseValue(name)
        guard !value.isNull, let decoded = T.fromDatabaseValue(value) else { throw badValue(column: name, value) }
        return decoded
    }

    /// The value at `index`, which may be NULL (nil); a value that does not convert to `T`
    /// throws `.integrityFailure`.
    func optional<T: DatabaseValueConvertible>(_ index: Int) throws -> T? {
        let value = self[index] as DatabaseValue
        if value.isNull { return nil }
        guard let decoded = T.fromDatabaseValue(value) else { throw badValue(column: columnName(index), value) }
        return decoded
    }

    /// The value of the column `name`, which may be NULL (nil); a value that does not convert
    /// to `T`, or a row without the column, throws `.integrityFailure`.
    func optional<T: DatabaseValueConvertible>(_ name: String) throws -> T? {
        let value = try databaseValue(name)
        if value.isNull { return nil }
        guard let decoded = T.fromDatabaseValue(value) else { throw badValue(column: name, value) }
        return decoded
    }

    private func databaseValue(_ name: String) throws -> DatabaseValue {
        guard hasColumn(name) else {
            throw StoreError(.integrityFailure, "the store gave a row without the column '\(name)': the store was changed")
        }
        return self[name] as DatabaseValue
    }

    private func columnName(_ index: Int) -> String {
        let names = Array(columnNames)
        return index < names.count ? names[index] : "#\(index)"
    }

    private func badValue(column: String, _ value: DatabaseValue) -> StoreError {
        value.isNull
            ? StoreError(.integrityFailure, "the store holds a NULL in column '\(column)', where Coffer always writes a value: the store was changed")
            : StoreError(.integrityFailure, "the store holds a value of the wrong type in column '\(column)': the store was changed")
    }
}

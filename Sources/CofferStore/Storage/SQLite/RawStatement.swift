import Foundation
import GRDB
internal import GRDBSQLite

/// SQLite's C API on a GRDB statement, for the record hot paths: binding and reading columns
/// in place costs a fraction of boxing each value as a `DatabaseValue`. Used only inside a
/// GRDB read or write block on that statement's connection; each use starts from a reset.
struct RawStatement {
    let handle: OpaquePointer

    /// Wraps a statement, reset with no bindings; or, with `arguments`, reset and bound to them.
    init(_ statement: Statement, arguments: StatementArguments? = nil) throws {
        handle = statement.sqliteStatement
        if let arguments {
            try statement.setArguments(arguments)
        } else {
            sqlite3_reset(handle)
            sqlite3_clear_bindings(handle)
        }
    }

    private static let transient = unsafeBitCast(-1, to: sqlite3_destructor_type.self)
    /// A valid pointer for empty text (SQLite reads no byte of it).
    nonisolated(unsafe) private static let empty: UnsafePointer<CChar> = {
        let p = UnsafeMutablePointer<CChar>.allocate(capacity: 1)
        p.pointee = 0
        return UnsafePointer(p)
    }()

    func bind(_ index: Int32, _ value: Int64) { sqlite3_bind_int64(handle, index, value) }
    func bind(_ index: Int32, _ value: Double) { sqlite3_bind_double(handle, index, value) }

    /// Text, copied by SQLite; nil binds NULL.
    func bind(_ index: Int32, _ value: String?) {
        guard var value else { sqlite3_bind_null(handle, index); return }
        _ = value.withUTF8 { utf8 in
            utf8.withMemoryRebound(to: CChar.self) { sqlite3_bind_text(handle, index, $0.baseAddress ?? Self.empty, Int32($0.count), Self.transient) }
        }
    }

    /// Text from bytes the caller keeps alive and unchanged until the statement is reset.
    func bindText(_ index: Int32, borrowing bytes: UnsafeRawBufferPointer) {
        sqlite3_bind_text(handle, index, bytes.baseAddress?.assumingMemoryBound(to: CChar.self) ?? Self.empty, Int32(bytes.count), nil)
    }

    /// A blob from bytes the caller keeps alive and unchanged until the statement is reset; nil binds NULL.
    func bindBlob(_ index: Int32, borrowing bytes: UnsafeRawBufferPointer?) {
        guard let bytes else { sqlite3_bind_null(handle, index); return }
        sqlite3_bind_blob(handle, index, bytes.baseAddress ?? UnsafeRawPointer(bitPattern: 1), Int32(bytes.count), nil)
    }

    /// Steps once: true when a row is ready, false when done.
    func step() throws -> Bool {
        switch sqlite3_step(handle) {
        case SQLITE_ROW: return true
        case SQLITE_DONE: return false
        case let code:
            let message = String(cString: sqlite3_errmsg(sqlite3_db_handle(handle)))
            sqlite3_reset(handle)
            throw DatabaseError(resultCode: ResultCode(rawValue: code), message: message)
        }
    }

    /// Ends a use: resets and drops the bindings (borrowed bytes are no longer read).
    func reset() {
        sqlite3_reset(handle)
        sqlite3_clear_bindings(handle)
    }

    /// Ends one step of a loop that binds every parameter again before the next: resets and
    /// keeps the bindings (clearing them frees SQLite's copies of bound text, which the next
    /// bind allocates again). The loop must call ``reset()`` on every way out.
    func resetKeepingBindings() {
        sqlite3_reset(handle)
    }

    /// Rows changed by the last step of this statement's connection.
    var changes: Int { Int(sqlite3_changes(sqlite3_db_handle(handle))) }

    func int64(_ column: Int32) -> Int64 { sqlite3_column_int64(handle, column) }
    func double(_ column: Int32) -> Double { sqlite3_column_double(handle, column) }
    func isNull(_ column: Int32) -> Bool { sqlite3_column_type(handle, column) == SQLITE_NULL }

    /// The column's bytes, valid until the next step or reset.
    func bytes(_ column: Int32) -> UnsafeRawBufferPointer {
        let pointer = sqlite3_column_blob(handle, column)
        let count = Int(sqlite3_column_bytes(handle, column))
        guard let pointer, count > 0 else { return UnsafeRawBufferPointer(start: nil, count: 0) }
        return UnsafeRawBufferPointer(start: pointer, count: count)
    }

    func text(_ column: Int32) -> String { String(decoding: bytes(column), as: UTF8.self) }
    func optionalText(_ column: Int32) -> String? { isNull(column) ? nil : text(column) }
}

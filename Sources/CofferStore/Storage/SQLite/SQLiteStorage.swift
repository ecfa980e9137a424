import Foundation
import GRDB
import Logging

/// An SQLite store file's connections (GRDB's pool: one writer, several readers), and how a
/// ``Store`` opens the file and runs its transactions on it.
final class SQLiteStorage: Sendable {
    let pool: DatabasePool
    /// The turns at the pool's reader connections, which every read of the file takes.
    let readers: SQLiteReadGate

    init(pool: DatabasePool) {
        self.pool = pool
        readers = SQLiteReadGate(permits: pool.configuration.maximumReaderCount)
    }

    /// Opens the store file at `url` (see ``Store/init(path:create:logger:)``), setting it up
    /// under its folder's lock when it is new or lacks migrations, and returns it with its id.
    /// A new store takes `newStoreID` as its id (a replica takes its server's), else a random one.
    static func open(url: URL, create: Bool, newStoreID: [UInt8]? = nil) throws -> (Store.Backend, [UInt8]) {
        let setup = try StoreFileLock(path: url.path, create: create)
        defer { setup.close() }
        do {
            // A new (empty) file is set up under the lock from the start: SQLite's first writes
            // to it (the WAL switch, the first migration) then happen in one process at a time.
            if setup.isEmpty { try setup.lock() }
            let dbPool = try DatabasePool(path: url.path, configuration: Store.sqliteConfiguration)
            let storeID: [UInt8]
            if let id = try Store.readyStoreID(dbPool) {
                storeID = id
            } else {
                try setup.lock()
                try Store.migrator.migrate(dbPool)
                storeID = try Store.makeStoreID(dbPool, newID: newStoreID)
            }
            try Store.checkTables(dbPool, path: url.path)
            return (.sqlite(SQLiteStorage(pool: dbPool)), storeID)
        } catch let error as DatabaseError {
            switch error.resultCode {
            case .SQLITE_BUSY, .SQLITE_LOCKED:
                throw StoreError(.busy, "the store at \(url.path) stayed busy (another process is writing); try again", underlying: error)
            case .SQLITE_READONLY, .SQLITE_CANTOPEN, .SQLITE_PERM:
                throw StoreError(.internalError, "cannot open the store at \(url.path): \(error.message ?? "\(error.resultCode)") "
                                 + "(this user must be able to read and write the file, its -wal and -shm files, and its folder)", underlying: error)
            case .SQLITE_CORRUPT, .SQLITE_NOTADB:
                throw Store.damaged(error, path: url.path) ?? error
            default:
                throw StoreError(.internalError, "cannot open the store at \(url.path): \(Names.printable(error.message ?? "\(error.resultCode)"))", underlying: error)
            }
        }
    }

    /// A read transaction on one of the pool's reader connections. The caller suspends while
    /// every connection is in use (``SQLiteReadGate``), then runs the read on its own thread: a
    /// read never waits for a lock (WAL: readers go on while another connection writes), so it
    /// holds the thread only for its own work, and the rows it makes are freed on the thread
    /// that made them.
    func read<T>(_ body: (GRDB.Database) throws -> T) async throws -> T {
        try await readers.withPermit { try readHoldingPermit(body) }
    }

    /// ``read(_:)`` for the synchronous entry points, which block while every reader connection
    /// is in use; in async code the async form is chosen.
    @_disfavoredOverload
    func read<T>(_ body: (GRDB.Database) throws -> T) throws -> T {
        try readers.withPermit { try readHoldingPermit(body) }
    }

    /// GRDB's blocking read, with its errors as ``StoreError``s: reached only holding a permit,
    /// so a reader connection is free and it does not wait.
    private func readHoldingPermit<T>(_ body: (GRDB.Database) throws -> T) throws -> T {
        do { return try pool.read(body) } catch { throw Store.map(error) }
    }

    /// A write transaction on GRDB's writer connection, suspending the caller while it waits its
    /// turn and runs; a write that deleted rows then truncates the write-ahead log.
    func write<T: Sendable>(logger: Logger, _ body: @escaping @Sendable (GRDB.Database) throws -> T) async throws -> T {
        let (result, deleted): (T, Bool)
        do { (result, deleted) = try await pool.write { db in try WriteAheadLogScrub.noting(db, body) } } catch { throw Store.map(error) }
        if deleted { truncateLog(logger: logger) }
        return result
    }

    /// ``write(logger:_:)`` with SQLite's foreign keys not enforced during the transaction: for
    /// rows put under a zone row id that a later transaction inserts (a pull's stage of a zone
    /// new to a replica, ``Store/stage(_:of:after:fresh:)``). Enforced again after it.
    func writeUnenforced<T: Sendable>(logger: Logger, _ body: @escaping @Sendable (GRDB.Database) throws -> T) async throws -> T {
        let (result, deleted): (T, Bool)
        do {
            (result, deleted) = try await pool.writeWithoutTransaction { db in
                try db.execute(sql: "PRAGMA foreign_keys = OFF")
                var outcome: (T, Bool)?
                let done = Result {
                    try db.inTransaction {
                        outcome = try WriteAheadLogScrub.noting(db, body)
                        return .commit
                    }
                }
                // Enforced again whatever the transaction did; a connection left without it fails.
                try db.execute(sql: "PRAGMA foreign_keys = ON")
                try done.get()
                guard let outcome else { throw StoreError(.internalError, "a stage transaction returned nothing") }
                return outcome
            }
        } catch {
            throw Store.map(error)
        }
        if deleted { truncateLog(logger: logger) }
        return result
    }

    /// ``write(logger:_:)`` on the calling thread, for the synchronous entry points.
    @_disfavoredOverload
    func write<T>(logger: Logger, _ body: (GRDB.Database) throws -> T) throws -> T {
        let (result, deleted): (T, Bool)
        do { (result, deleted) = try pool.write { db in try WriteAheadLogScrub.noting(db, body) } } catch { throw Store.map(error) }
        if deleted { truncateLog(logger: logger) }
        return result
    }

    /// Copies the write-ahead log into the file and truncates it (``WriteAheadLogScrub``).
    func truncateLog(logger: Logger) {
        WriteAheadLogScrub.truncate(pool, logger: logger)
    }
}

/// What only an SQLite store has, and GRDB's errors said as ``StoreError``s.
extension Store {
    /// The SQLite connections, for what only an SQLite store has: the upgrade of stores of the
    /// earlier format, and the field indexes' bookkeeping.
    /// - Throws: `.notSupported` naming `what` on a PostgreSQL store.
    func sqliteStorage(for what: @autoclosure () -> String) throws -> SQLiteStorage {
        switch backend {
        case .sqlite(let sqlite): return sqlite
        case .postgres: throw StoreError(.notSupported, "\(what()) is not available on a PostgreSQL store")
        case .snapshot(let driver): throw StoreError(.notSupported, "\(what()) is not available on \(driver.storeDescription)")
        }
    }

    /// The SQLite connections (tests and tools that look into the file).
    var dbPool: DatabasePool {
        guard case .sqlite(let sqlite) = backend else { preconditionFailure("not an SQLite store") }
        return sqlite.pool
    }

    /// ``read(_:)`` for the synchronous entry points (opening a store or a session, adding a
    /// contact), which block as their signatures say; in async code the async form is chosen.
    /// SQLite only: a PostgreSQL store takes the async forms.
    @_disfavoredOverload
    func read<T: Sendable>(_ body: (any StorageTransaction) throws -> T) throws -> T {
        try sqliteStorage(for: Self.synchronousCall).read { db in try body(SQLiteTransaction(db)) }
    }

    /// ``write(_:)`` for the synchronous entry points (see the synchronous ``read(_:)``).
    @_disfavoredOverload
    func write<T: Sendable>(_ body: (any StorageTransaction) throws -> T) throws -> T {
        try sqliteStorage(for: Self.synchronousCall).write(logger: logger) { db in try body(SQLiteTransaction(db)) }
    }

    static func map(_ error: any Error) -> any Error {
        if error is StoreError { return error }
        if let db = error as? DatabaseError {
            if db.resultCode == .SQLITE_BUSY || db.resultCode == .SQLITE_LOCKED {
                return StoreError(.busy, "the store stayed busy (another process is writing); try again", underlying: db)
            }
            if let damaged = damaged(db, path: nil) { return damaged }
            return StoreError(.internalError, "database error: \(Names.printable(db.message ?? "\(db.resultCode)"))", underlying: db)
        }
        // GRDB's scalar fetches (`String.fetchAll`, `Int64.fetchCursor`) throw this on a NULL or
        // a value of another type: a row no Coffer code wrote (see `Row.required(_:)`).
        if let decoding = error as? RowDecodingError {
            return StoreError(.integrityFailure, "the store holds a value Coffer did not write\(column(of: decoding)) "
                              + "(a NULL, or a value of another type): the store was changed", underlying: decoding)
        }
        return error
    }

    /// A damaged file (SQLite's "corrupt" or "not a database"), said in words of its own: the
    /// error's text may hold bytes of the damaged file.
    static func damaged(_ error: DatabaseError, path: String?) -> StoreError? {
        guard error.resultCode == .SQLITE_CORRUPT || error.resultCode == .SQLITE_NOTADB else { return nil }
        return StoreError(.integrityFailure, "the store file\(path.map { " at \($0)" } ?? "") is damaged; restore it from a backup (coffer restore)",
                          underlying: error)
    }

    /// " in column 'name'" for the column a GRDB decoding error names, or "". Only a plain
    /// column name is taken from the error's text, which also holds the row's values.
    static func column(of error: RowDecodingError) -> String {
        let text = "\(error)"
        guard let start = text.range(of: "column: \"")?.upperBound, let end = text[start...].firstIndex(of: "\"") else { return "" }
        let name = text[start..<end]
        guard !name.isEmpty, name.allSatisfy({ $0.isASCII && ($0.isLetter || $0.isNumber || $0 == "_") }) else { return "" }
        return " in column '\(name)'"
    }
}

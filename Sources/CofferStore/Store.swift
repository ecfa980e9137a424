import CofferCrypto
import CofferVault
import Foundation
import GRDB
import Logging

/// A Coffer store that several users' sessions act on: one SQLite database (WAL), the
/// default, or a PostgreSQL database that several processes share.
///
/// ```swift
/// let store = try Store(path: "notes.sqlite")
/// try store.addContact(try ContactCard.verify(cardData))
/// ```
///
/// An SQLite file is created with mode 0600 if it does not exist. Connections run with foreign
/// keys and `secure_delete` on; the schema is built by named migrations (see
/// `Storage/SQLite/Store+Migrations.swift`) that never change once released. For PostgreSQL,
/// see ``init(postgres:password:connectTimeout:queryTimeout:logger:)``.
public final class Store: Sendable {
    /// The database file; for a PostgreSQL store, its `postgres://` URL.
    public let url: URL
    /// 16 random bytes that name this store (in share URLs and change tokens). Ciphertexts do
    /// not bind it: a zone moves between stores whole.
    public let storeID: [UInt8]
    let backend: Backend
    let logger: Logger
    /// Names of the query indexes known to exist.
    let knownIndexes = Locked<Set<String>>([])
    /// User id → the verified contact of a stored card, with the card's hash (see
    /// ``verifiedContact(_:userID:)``).
    let verifiedCards = Locked<[String: (digest: [UInt8], contact: Contact)]>([:])

    /// Opens the store at `path`, creating it when `create` is true and no file is there.
    ///
    /// Processes that open a new store at once agree on one file and one store id: the file is
    /// created with `O_EXCL` (never replacing one another process made), and a store that is new
    /// or lacks migrations is set up under an exclusive lock on its folder, which later opens take
    /// only when they find the set-up unfinished.
    /// - Throws: ``StoreError`` `.unknownItem` when there is no store at `path` and `create` is
    ///   false, or the folder does not exist; `.busy` when the store stayed locked;
    ///   `.internalError` when the file cannot be opened or is not a Coffer store.
    public init(path: String, create: Bool = true, logger: Logger = Vault.disabledLogger) throws {
        let url = URL(fileURLWithPath: path)
        self.url = url
        self.logger = logger
        let folder = url.deletingLastPathComponent()
        guard FileManager.default.fileExists(atPath: folder.path) else {
            throw StoreError(.unknownItem, "the folder \(folder.path) does not exist")
        }
        let setup = try StoreFileLock(path: url.path, create: create)
        defer { setup.close() }
        do {
            // A new (empty) file is set up under the lock from the start: SQLite's first writes
            // to it (the WAL switch, the first migration) then happen in one process at a time.
            if setup.isEmpty { try setup.lock() }
            let dbPool = try DatabasePool(path: url.path, configuration: Self.sqliteConfiguration)
            if let id = try Self.readyStoreID(dbPool) {
                storeID = id
            } else {
                try setup.lock()
                try Self.migrator.migrate(dbPool)
                storeID = try Self.makeStoreID(dbPool)
            }
            try Self.checkTables(dbPool, path: url.path)
            backend = .sqlite(dbPool)
        } catch let error as DatabaseError {
            switch error.resultCode {
            case .SQLITE_BUSY, .SQLITE_LOCKED:
                throw StoreError(.busy, "the store at \(url.path) stayed busy (another process is writing); try again", underlying: error)
            case .SQLITE_READONLY, .SQLITE_CANTOPEN, .SQLITE_PERM:
                throw StoreError(.internalError, "cannot open the store at \(url.path): \(error.message ?? "\(error.resultCode)") "
                                 + "(this user must be able to read and write the file, its -wal and -shm files, and its folder)", underlying: error)
            case .SQLITE_CORRUPT, .SQLITE_NOTADB:
                throw Self.damaged(error, path: url.path) ?? error
            default:
                throw StoreError(.internalError, "cannot open the store at \(url.path): \(Names.printable(error.message ?? "\(error.resultCode)"))", underlying: error)
            }
        }
        logger.debug("store opened", metadata: ["path": "\(url.path)"])
    }

    /// Opens the Coffer store in a PostgreSQL database, setting it up on first use (its own
    /// named migrations, applied under an advisory lock, so that several processes may open a
    /// new database at once).
    ///
    /// ```swift
    /// let url = try PostgresURL("postgres://coffer@db.internal/coffer")
    /// let store = try await Store(postgres: url, password: PostgresPassword.lookup(for: url))
    /// ```
    ///
    /// Several processes (instances of a service) may use one database at once: commits to a
    /// zone serialize on its row, and each checks that the rows it changes are as it read them.
    /// Call ``close()`` when done with the store.
    /// - Parameters:
    ///   - postgres: the database; it must exist (Coffer makes its tables in it).
    ///   - password: the password, if the server asks for one (``PostgresPassword`` finds it
    ///     in `PGPASSWORD` or `~/.pgpass`); never in the URL.
    ///   - connectTimeout: how long to wait for a connection before giving up.
    ///   - queryTimeout: how long one statement may run.
    ///   - logger: where the store and its connections log (nothing by default).
    /// - Throws: `.serviceUnavailable` when the server cannot be reached or does not answer in
    ///   time; `.internalError` when the database was set up by a newer Coffer.
    public init(postgres: PostgresURL, password: String? = nil, connectTimeout: Duration = .seconds(10), queryTimeout: Duration = .seconds(30),
                logger: Logger = Vault.disabledLogger) async throws {
        let storage = try await PostgresStorage.open(url: postgres, password: password,
                                                     timeouts: PostgresConnector.Timeouts(connect: connectTimeout, query: queryTimeout), logger: logger)
        url = URL(string: postgres.description) ?? URL(fileURLWithPath: "/")
        storeID = storage.storeID
        backend = .postgres(storage)
        self.logger = logger
        logger.debug("store opened", metadata: ["postgres": "\(postgres)"])
    }

    /// A store over a backend opened elsewhere, whose id the caller read from it.
    init(url: URL, storeID: [UInt8], backend: Backend, logger: Logger) {
        self.url = url
        self.storeID = storeID
        self.backend = backend
        self.logger = logger
    }

    /// Waits until a commit may have changed a zone, or `interval` has passed: a live stream's
    /// wait between polls. On PostgreSQL a commit by any process wakes it at once
    /// (LISTEN/NOTIFY); on a server, a commit through the server; on SQLite it waits the interval.
    func waitForChange(upTo interval: Duration) async throws {
        switch backend {
        case .sqlite: try await Task.sleep(for: interval)
        case .postgres(let storage): try await storage.waitForChange(upTo: interval)
        case .snapshot(let driver): try await driver.waitForChange(upTo: interval)
        }
    }

    /// Closes a PostgreSQL store's connections (an SQLite store closes its file when released).
    /// Calls after it fail with `.serviceUnavailable`.
    public func close() async {
        switch backend {
        case .sqlite(let pool): WriteAheadLogScrub.truncate(pool, logger: logger)
        case .postgres(let storage): await storage.close()
        case .snapshot(let driver): await driver.close()
        }
    }

    /// Runs a read of the store. On SQLite: on one of GRDB's reader connections, on the calling
    /// thread. A read never waits for a lock (WAL: readers go on while another connection
    /// writes), so it holds its thread only for its own work; run there, the records it makes
    /// are freed on the thread that made them. (Through GRDB's async `read`, which runs the
    /// closure on a GRDB queue and suspends the caller, fetching cost about 12% more CPU per
    /// record in `coffer-bench records`: see Docs/Performance.md.) On PostgreSQL: through
    /// ``SnapshotDriver/run(writing:_:)``, suspending while rows are fetched.
    func read<T: Sendable>(_ body: @escaping @Sendable (any StorageTransaction) throws -> T) async throws -> T {
        switch PinnedReads.of(self) {
        case .sqlite(let pin)?: return try pin.read(body)
        case .driver(let pin)?:
            switch backend {
            case .postgres(let storage): return try await storage.run(writing: false, pinned: pin, body)
            case .snapshot(let driver): return try await driver.run(writing: false, pinned: pin, body)
            case .sqlite: preconditionFailure("an SQLite store's reads are pinned on its own connection")
            }
        case nil: break
        }
        switch backend {
        case .sqlite(let pool): return try pool.readOnCallingThread(body)
        case .postgres(let storage): return try await storage.run(writing: false, body)
        case .snapshot(let driver): return try await driver.run(writing: false, body)
        }
    }

    /// Runs a write transaction, suspending the caller while it waits its turn and runs. On
    /// SQLite: on GRDB's writer connection; on PostgreSQL: its writes applied at once, checked
    /// against what it read (``SnapshotDriver/run(writing:_:)``).
    func write<T: Sendable>(_ body: @escaping @Sendable (any StorageTransaction) throws -> T) async throws -> T {
        switch backend {
        case .sqlite(let pool):
            let (result, deleted): (T, Bool)
            do { (result, deleted) = try await pool.write { db in try WriteAheadLogScrub.noting(db, body) } } catch { throw Self.map(error) }
            if deleted { WriteAheadLogScrub.truncate(pool, logger: logger) }
            return result
        case .postgres(let storage):
            // Its reads may be older than what another session of this process verified since
            // (the write's checks then refuse its commit, and it runs again on fresh reads): a
            // lagging read, as ``Session/read(_:)`` notes one.
            let generation = Session.advances.withLock { $0.counter }
            return try await storage.run(writing: true) { db in try Session.noting(db, generation, body) }
        case .snapshot(let driver):
            let generation = Session.advances.withLock { $0.counter }
            return try await driver.run(writing: true) { db in try Session.noting(db, generation, body) }
        }
    }

    /// The SQLite connections, for what only an SQLite store has: the upgrade of stores of the
    /// earlier format, and the field indexes' bookkeeping.
    /// - Throws: `.notSupported` naming `what` on a PostgreSQL store.
    func sqlite(for what: @autoclosure () -> String) throws -> DatabasePool {
        switch backend {
        case .sqlite(let pool): return pool
        case .postgres: throw StoreError(.notSupported, "\(what()) is not available on a PostgreSQL store")
        case .snapshot(let driver): throw StoreError(.notSupported, "\(what()) is not available on \(driver.storeDescription)")
        }
    }

    /// What a synchronous entry point on a PostgreSQL store is told to use instead.
    static let synchronousCall = "this synchronous call (use its async form: openSession(vault:) for session(vault:), "
        + "and addContact, contacts and contact(matching:) with await)"

    /// Whether the store is in PostgreSQL.
    package var isPostgres: Bool {
        if case .postgres = backend { return true }
        return false
    }

    /// Whether the store is an SQLite file of this process's.
    var isSQLite: Bool {
        if case .sqlite = backend { return true }
        return false
    }

    /// The SQLite connections (tests and tools that look into the file).
    var dbPool: DatabasePool {
        guard case .sqlite(let pool) = backend else { preconditionFailure("not an SQLite store") }
        return pool
    }

    /// ``read(_:)`` for the synchronous entry points (opening a store or a session, adding a
    /// contact), which block as their signatures say; in async code the async form is chosen.
    /// SQLite only: a PostgreSQL store takes the async forms.
    @_disfavoredOverload
    func read<T: Sendable>(_ body: (GRDB.Database) throws -> T) throws -> T {
        let pool = try sqlite(for: Self.synchronousCall)
        do { return try pool.read(body) } catch { throw Self.map(error) }
    }

    /// ``write(_:)`` for the synchronous entry points (see the synchronous ``read(_:)``).
    @_disfavoredOverload
    func write<T: Sendable>(_ body: (GRDB.Database) throws -> T) throws -> T {
        let pool = try sqlite(for: Self.synchronousCall)
        let (result, deleted): (T, Bool)
        do { (result, deleted) = try pool.write { db in try WriteAheadLogScrub.noting(db, body) } } catch { throw Self.map(error) }
        if deleted { WriteAheadLogScrub.truncate(pool, logger: logger) }
        return result
    }

    /// How long an SQLite connection waits for another one's lock, in milliseconds.
    static let busyTimeout = 10_000

    /// On SQLite, copies the write-ahead log into the store file and truncates it, so that
    /// nothing deleted or replaced lingers there (a write that deletes does this itself; this is
    /// for the end of a process that edited values). Gives up quietly while another connection
    /// holds the log. Does nothing on other backends.
    public func truncateWriteAheadLog() {
        if case .sqlite(let pool) = backend { WriteAheadLogScrub.truncate(pool, logger: logger) }
    }

    /// Where a store keeps its rows.
    enum Backend: Sendable {
        case sqlite(DatabasePool)
        case postgres(PostgresStorage)
        /// A store reached through another driver of ``StorageSnapshot``s (a Coffer server).
        case snapshot(any SnapshotDriver)
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

import CofferCrypto
import CofferVault
import Foundation
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
        (backend, storeID) = try SQLiteStorage.open(url: url, create: create)
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
        case .sqlite(let sqlite): sqlite.truncateLog(logger: logger)
        case .postgres(let storage): await storage.close()
        case .snapshot(let driver): await driver.close()
        }
    }

    /// Runs a read of the store. On SQLite: on one of GRDB's reader connections, the caller
    /// suspended while every connection is in use, then the read run on its thread
    /// (``SQLiteStorage/read(_:)``). On PostgreSQL: through ``SnapshotDriver/run(writing:_:)``,
    /// suspending while rows are fetched.
    func read<T: Sendable>(_ body: @escaping @Sendable (any StorageTransaction) throws -> T) async throws -> T {
        switch PinnedReads.of(self) {
        case .sqlite(let pin)?: return try pin.read { db in try body(SQLiteTransaction(db)) }
        case .driver(let pin)?:
            switch backend {
            case .postgres(let storage): return try await storage.run(writing: false, pinned: pin, body)
            case .snapshot(let driver): return try await driver.run(writing: false, pinned: pin, body)
            case .sqlite: preconditionFailure("an SQLite store's reads are pinned on its own connection")
            }
        case nil: break
        }
        switch backend {
        case .sqlite(let sqlite): return try await sqlite.read { db in try body(SQLiteTransaction(db)) }
        case .postgres(let storage): return try await storage.run(writing: false, body)
        case .snapshot(let driver): return try await driver.run(writing: false, body)
        }
    }

    /// Runs a write transaction, suspending the caller while it waits its turn and runs. On
    /// SQLite: on GRDB's writer connection; on PostgreSQL: its writes applied at once, checked
    /// against what it read (``SnapshotDriver/run(writing:_:)``).
    func write<T: Sendable>(_ body: @escaping @Sendable (any StorageTransaction) throws -> T) async throws -> T {
        switch backend {
        case .sqlite(let sqlite): return try await sqlite.write(logger: logger) { db in try body(SQLiteTransaction(db)) }
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

    /// How long an SQLite connection waits for another one's lock, in milliseconds.
    static let busyTimeout = 10_000

    /// On SQLite, copies the write-ahead log into the store file and truncates it, so that
    /// nothing deleted or replaced lingers there (a write that deletes does this itself; this is
    /// for the end of a process that edited values). Gives up quietly while another connection
    /// holds the log. Does nothing on other backends.
    public func truncateWriteAheadLog() {
        if case .sqlite(let sqlite) = backend { sqlite.truncateLog(logger: logger) }
    }

    /// Where a store keeps its rows.
    enum Backend: Sendable {
        case sqlite(SQLiteStorage)
        case postgres(PostgresStorage)
        /// A store reached through another driver of ``StorageSnapshot``s (a Coffer server).
        case snapshot(any SnapshotDriver)
    }
}

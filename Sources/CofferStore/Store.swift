import CofferCrypto
import CofferVault
import Foundation
import GRDB
import Logging

/// A Coffer store: one SQLite database (WAL) that several users' sessions act on.
///
/// ```swift
/// let store = try Store(path: "notes.sqlite")
/// try store.addContact(try ContactCard.verify(cardData))
/// ```
///
/// The file is created with mode 0600 if it does not exist. Connections run with foreign
/// keys and `secure_delete` on; the schema is built by named migrations (see
/// `Storage/SQLite/Store+Migrations.swift`) that never change once released.
public final class Store: Sendable {
    /// The database file.
    public let url: URL
    /// 16 random bytes that name this store (in share URLs and change tokens). Ciphertexts do
    /// not bind it: a zone moves between stores whole.
    public let storeID: [UInt8]
    let dbPool: DatabasePool
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
        var config = Configuration()
        config.foreignKeysEnabled = true
        config.busyMode = .timeout(10)
        config.label = "coffer"
        config.prepareDatabase { db in
            try db.execute(sql: "PRAGMA secure_delete = ON")
            try db.execute(sql: "PRAGMA synchronous = NORMAL")
        }
        do {
            // A new (empty) file is set up under the lock from the start: SQLite's first writes
            // to it (the WAL switch, the first migration) then happen in one process at a time.
            if setup.isEmpty { try setup.lock() }
            dbPool = try DatabasePool(path: url.path, configuration: config)
            if let id = try Self.readyStoreID(dbPool) {
                storeID = id
            } else {
                try setup.lock()
                try Self.migrator.migrate(dbPool)
                storeID = try Self.makeStoreID(dbPool)
            }
            try Self.checkTables(dbPool, path: url.path)
        } catch let error as DatabaseError {
            switch error.resultCode {
            case .SQLITE_BUSY, .SQLITE_LOCKED:
                throw StoreError(.busy, "the store at \(url.path) stayed busy (another process is writing); try again", underlying: error)
            case .SQLITE_READONLY, .SQLITE_CANTOPEN, .SQLITE_PERM:
                throw StoreError(.internalError, "cannot open the store at \(url.path): \(error.message ?? "\(error.resultCode)") "
                                 + "(this user must be able to read and write the file, its -wal and -shm files, and its folder)", underlying: error)
            default:
                throw StoreError(.internalError, "cannot open the store at \(url.path): \(error.message ?? "\(error.resultCode)")", underlying: error)
            }
        }
        logger.debug("store opened", metadata: ["path": "\(url.path)"])
    }

    /// Every table, index, trigger and view the migrations make (`sqlite_schema`), from a fresh
    /// in-memory database: what every store's schema must be, no more and no less.
    static let expectedSchema: [String: String] = {
        do {
            let queue = try DatabaseQueue()
            try migrator.migrate(queue)
            return try queue.read(schemaObjects)
        } catch {
            preconditionFailure("the migrations do not run on an empty database: \(error)")
        }
    }()

    /// `type name` to its SQL, for the schema objects SQLite does not make itself, less the
    /// field indexes that queries create (checked word for word against what they would make).
    static func schemaObjects(_ db: Database) throws -> [String: String] {
        try Row.fetchAll(db, sql: "SELECT type, name, sql FROM sqlite_schema WHERE name NOT LIKE 'sqlite_%'")
            .reduce(into: [String: String]()) { objects, row in
                let type: String = try row.required(0), name: String = try row.required(1), sql = try row.optional(2) as String? ?? ""
                if type == "index", Session.isFieldIndex(name: name, sql: sql) { return }
                objects["\(type) '\(name)'"] = sql
            }
    }

    /// Refuses a store whose schema is not the one the migrations make: someone with write
    /// access could rewrite `sqlite_schema` (dropping a `NOT NULL` or a unique index, say) so
    /// that reads meet rows no code expects, or add a trigger that edits what a writer wrote.
    static func checkTables(_ pool: DatabasePool, path: String) throws {
        let actual = try pool.read(schemaObjects)
        for key in Set(expectedSchema.keys).union(actual.keys).sorted() where actual[key] != expectedSchema[key] {
            let what = actual[key] == nil ? "has no \(key)" : expectedSchema[key] == nil ? "has a \(key) that Coffer did not make"
                : "has a \(key) that is not the one Coffer made"
            throw StoreError(.integrityFailure, "the store at \(path) \(what): the store was changed")
        }
    }

    /// The store's id when the store has every migration and an id; nil when it needs setting
    /// up. Only reads, so opening a ready store never waits for another process's write.
    static func readyStoreID(_ pool: DatabasePool) throws -> [UInt8]? {
        try pool.read { db in
            guard try migrator.hasCompletedMigrations(db) else { return nil }
            return try Data.fetchOne(db, sql: "SELECT value FROM store_meta WHERE key = 'store_id'").map(Array.init)
        }
    }

    /// The store's id, made when the store has none (under the set-up lock).
    static func makeStoreID(_ pool: DatabasePool) throws -> [UInt8] {
        try pool.write { db in
            if let existing = try Data.fetchOne(db, sql: "SELECT value FROM store_meta WHERE key = 'store_id'") { return Array(existing) }
            let id = SecureRandom.bytes(count: 16)
            try db.execute(sql: "INSERT INTO store_meta (key, value) VALUES ('store_id', ?)", arguments: [Data(id)])
            return id
        }
    }

    /// Runs a read on one of GRDB's reader connections, on the calling thread, and maps database
    /// errors to ``StoreError``. A read never waits for a lock (WAL: readers go on while another
    /// connection writes), so it holds its thread only for its own work; run there, the records
    /// it makes are freed on the thread that made them. (Through GRDB's async `read`, which runs
    /// the closure on a GRDB queue and suspends the caller, fetching cost about 12% more CPU per
    /// record in `coffer-bench records`: see Docs/Performance.md.)
    func read<T: Sendable>(_ body: @escaping @Sendable (Database) throws -> T) async throws -> T {
        try readBlocking(body)
    }

    /// Runs a write transaction on GRDB's writer connection, suspending the caller while it
    /// waits its turn and runs, and maps database errors to ``StoreError``.
    func write<T: Sendable>(_ body: @escaping @Sendable (Database) throws -> T) async throws -> T {
        do { return try await dbPool.write(body) } catch { throw Self.map(error) }
    }

    /// ``read(_:)`` on the calling thread, for the synchronous entry points (opening a store or
    /// a session, adding a contact), which block as their signatures say.
    func readBlocking<T: Sendable>(_ body: (Database) throws -> T) throws -> T {
        do { return try dbPool.read(body) } catch { throw Self.map(error) }
    }

    /// ``write(_:)`` on the calling thread, for the synchronous entry points.
    func writeBlocking<T: Sendable>(_ body: (Database) throws -> T) throws -> T {
        do { return try dbPool.write(body) } catch { throw Self.map(error) }
    }

    static func map(_ error: any Error) -> any Error {
        if error is StoreError { return error }
        if let db = error as? DatabaseError {
            if db.resultCode == .SQLITE_BUSY || db.resultCode == .SQLITE_LOCKED {
                return StoreError(.busy, "the store stayed busy (another process is writing); try again", underlying: db)
            }
            return StoreError(.internalError, "database error: \(db.message ?? "\(db.resultCode)")", underlying: db)
        }
        // GRDB's scalar fetches (`String.fetchAll`, `Int64.fetchCursor`) throw this on a NULL or
        // a value of another type: a row no Coffer code wrote (see `Row.required(_:)`).
        if let decoding = error as? RowDecodingError {
            return StoreError(.integrityFailure, "the store holds a value Coffer did not write\(column(of: decoding)) "
                              + "(a NULL, or a value of another type): the store was changed", underlying: decoding)
        }
        return error
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

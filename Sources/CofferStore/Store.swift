import CofferCrypto
import CofferVault
import Foundation
import GRDB
import Logging
import Synchronization

/// A Coffer store: one SQLite database (WAL) that several users' sessions act on.
///
/// ```swift
/// let store = try Store(path: "notes.sqlite")
/// try store.addContact(try ContactCard.verify(cardData))
/// ```
///
/// The file is created with mode 0600 if it does not exist. Connections run with foreign
/// keys and `secure_delete` on; the schema is built by named migrations (see
/// `Store+Migrations.swift`) that never change once released.
public final class Store: Sendable {
    /// The database file.
    public let url: URL
    /// 16 random bytes that name this store; bound into every ciphertext's associated data.
    public let storeID: [UInt8]
    let dbPool: DatabasePool
    let logger: Logger
    /// Names of the query indexes known to exist.
    let knownIndexes = Mutex<Set<String>>([])

    /// How long the helper threads that seal, hash and decode records keep looking for more work
    /// after a batch or read before they sleep. The threads are shared by every store in the
    /// process, and so is this setting. A batch or read that comes within the window finds them
    /// awake; waking a sleeping thread costs tens to hundreds of microseconds on a virtual
    /// machine. The price is up to this much of one core spent looking after each burst of work.
    /// Default 2 ms (or `COFFER_HELPER_SPIN_US` microseconds when set at launch); `.zero` lets
    /// them sleep at once; at most 100 ms (longer values are taken as 100 ms, negative as zero).
    public static var helperSpinWindow: Duration {
        get { .nanoseconds(Int64(Parallel.spinNanoseconds)) }
        set { Parallel.setSpin(newValue) }
    }

    /// Opens (creating if needed) the store at `path`.
    /// - Throws: ``StoreError`` `.internalError` when the file cannot be opened or is not a Coffer store.
    public init(path: String, logger: Logger = Vault.disabledLogger) throws {
        let url = URL(fileURLWithPath: path)
        self.url = url
        self.logger = logger
        let folder = url.deletingLastPathComponent()
        guard FileManager.default.fileExists(atPath: folder.path) else {
            throw StoreError(.unknownItem, "the folder \(folder.path) does not exist")
        }
        if !FileManager.default.fileExists(atPath: url.path) {
            // Create it private before SQLite does (SQLite gives -wal and -shm the same mode).
            _ = FileManager.default.createFile(atPath: url.path, contents: nil, attributes: [.posixPermissions: 0o600])
        }
        var config = Configuration()
        config.foreignKeysEnabled = true
        config.busyMode = .timeout(10)
        config.label = "coffer"
        config.prepareDatabase { db in
            try db.execute(sql: "PRAGMA secure_delete = ON")
            try db.execute(sql: "PRAGMA synchronous = NORMAL")
        }
        do {
            dbPool = try DatabasePool(path: url.path, configuration: config)
            try Self.migrate(dbPool)
            storeID = try Self.storeID(dbPool)
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

    /// Applies the migrations a store lacks; a store that has them all is only read, so opening
    /// never waits for another process's write. Each migration runs in its own transaction, and
    /// processes that open a new store at once race to apply them: one that finds a migration
    /// applied under it (its "already exists" error) checks again and goes on.
    static func migrate(_ pool: DatabasePool) throws {
        var attempt = 0
        while try !pool.read({ try migrator.hasCompletedMigrations($0) }) {
            do {
                try migrator.migrate(pool)
                return
            } catch let error as DatabaseError where error.resultCode == .SQLITE_ERROR && attempt < 20 {
                attempt += 1
                Thread.sleep(forTimeInterval: 0.01 * Double(attempt))
            }
        }
    }

    /// The store's id, read; made (in a write) only when the store is new.
    static func storeID(_ pool: DatabasePool) throws -> [UInt8] {
        if let existing = try pool.read({ try Data.fetchOne($0, sql: "SELECT value FROM store_meta WHERE key = 'store_id'") }) {
            return Array(existing)
        }
        return try pool.write { db in
            if let existing = try Data.fetchOne(db, sql: "SELECT value FROM store_meta WHERE key = 'store_id'") { return Array(existing) }
            let id = SecureRandom.bytes(count: 16)
            try db.execute(sql: "INSERT INTO store_meta (key, value) VALUES ('store_id', ?)", arguments: [Data(id)])
            return id
        }
    }

    /// Runs a read, mapping database errors to ``StoreError``.
    func read<T: Sendable>(_ body: @Sendable (Database) throws -> T) throws -> T {
        do { return try dbPool.read(body) } catch { throw Self.map(error) }
    }

    /// Runs a write transaction, mapping database errors to ``StoreError``.
    func write<T: Sendable>(_ body: @Sendable (Database) throws -> T) throws -> T {
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
        return error
    }
}

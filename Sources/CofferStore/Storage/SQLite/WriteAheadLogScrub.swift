import CofferCrypto
import GRDB
import Logging

/// What keeps deleted values out of an SQLite store's write-ahead log.
///
/// `secure_delete` zeroes what a deletion frees in the store file, but the write-ahead log still
/// holds the pages the deleted rows were written in, until it is copied into the file and
/// truncated. So a write transaction that deletes records, zones, tombstones or keys is noted
/// (``note(_:)``), and once it commits the store copies the log into the file and truncates it
/// to nothing (``truncate(_:logger:)``); the store does the same when it closes, and the `coffer`
/// CLI when a command ends, so that an edited value's older versions go too.
enum WriteAheadLogScrub {
    /// The connections whose current write deleted something.
    private static let pending = Locked(Set<ObjectIdentifier>())

    /// Notes that the transaction on `db` deleted something.
    static func note(_ db: Database) {
        _ = pending.withLock { $0.insert(ObjectIdentifier(db)) }
    }

    /// Whether the transaction on `db` deleted something (and forgets it).
    static func take(_ db: Database) -> Bool {
        pending.withLock { $0.remove(ObjectIdentifier(db)) != nil }
    }

    /// Runs a write's `body` on `db`, with whether it deleted something.
    static func noting<T>(_ db: Database, _ body: (Database) throws -> T) throws -> (T, deleted: Bool) {
        do {
            let result = try body(db)
            return (result, take(db))
        } catch {
            _ = take(db)
            throw error
        }
    }

    /// How long a truncation waits for a reader of an older state to finish before it gives up
    /// (the next one, at the latest when the store closes, does it).
    static let patience = 250

    /// Copies the write-ahead log into the store file and truncates it. Quietly does nothing when
    /// another connection reads or writes for longer than ``patience`` milliseconds.
    static func truncate(_ pool: DatabasePool, logger: Logger) {
        do {
            try pool.writeWithoutTransaction { db in
                try db.execute(sql: "PRAGMA busy_timeout = \(patience)")
                defer { try? db.execute(sql: "PRAGMA busy_timeout = \(Store.busyTimeout)") }
                _ = try db.checkpoint(.truncate)
            }
        } catch {
            logger.debug("the write-ahead log was not truncated (a reader or writer held it); the next truncation will", metadata: ["error": "\(error)"])
        }
    }
}

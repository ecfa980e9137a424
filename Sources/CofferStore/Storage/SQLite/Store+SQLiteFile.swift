import CofferCrypto
import Foundation
import GRDB

/// An SQLite store file: its connections' configuration, the schema it must have, and its id.
extension Store {
    /// Every connection's configuration: foreign keys on, deleted content overwritten
    /// (`secure_delete`), a busy connection waiting ``busyTimeout`` for another's lock.
    static var sqliteConfiguration: Configuration {
        var config = Configuration()
        config.foreignKeysEnabled = true
        config.busyMode = .timeout(Double(busyTimeout) / 1000)
        config.label = "coffer"
        config.prepareDatabase { db in
            try db.execute(sql: "PRAGMA secure_delete = ON")
            try db.execute(sql: "PRAGMA synchronous = NORMAL")
        }
        return config
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
                if type == "index", SQLiteFieldIndex.isFieldIndex(name: name, sql: sql) { return }
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
    static func makeStoreID(_ pool: DatabasePool, newID: [UInt8]? = nil) throws -> [UInt8] {
        try pool.write { db in
            if let existing = try Data.fetchOne(db, sql: "SELECT value FROM store_meta WHERE key = 'store_id'") { return Array(existing) }
            let id = newID ?? SecureRandom.bytes(count: 16)
            try db.execute(sql: "INSERT INTO store_meta (key, value) VALUES ('store_id', ?)", arguments: [Data(id)])
            return id
        }
    }
}

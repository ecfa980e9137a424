import CofferCrypto
import Foundation
import GRDB
import Logging

/// A replica file: an SQLite store that holds one user's copy of the zones they sync with one
/// server (see ``Replica``). It has the server's store id, so the user's marks and change tokens
/// name the same store, and says in `store_meta` whose replica it is and of which server.
extension Store {
    /// Opens the replica at `url` of the server at `origin`, whose store id is `storeID`, for
    /// `userID`, creating it when `create` is true and no file is there.
    /// - Throws: `.integrityFailure` for a file that is a store of its own, or the replica of
    ///   another server or another user; `.unknownItem` when there is no replica and `create` is
    ///   false; as ``init(path:create:logger:)``.
    static func replica(at url: URL, storeID: [UInt8], origin: String, userID: String, create: Bool, logger: Logger) throws -> Store {
        let folder = url.deletingLastPathComponent()
        if create, !FileManager.default.fileExists(atPath: folder.path) {
            try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
        }
        guard FileManager.default.fileExists(atPath: folder.path) else { throw StoreError(.unknownItem, "the folder \(folder.path) does not exist") }
        if !create, !FileManager.default.fileExists(atPath: url.path) {
            throw StoreError(.unknownItem, "there is no replica at \(url.path)")
        }
        let (backend, id) = try SQLiteStorage.open(url: url, create: create, newStoreID: storeID)
        guard case .sqlite(let storage) = backend else { throw StoreError(.internalError, "a replica is an SQLite file") }
        let owner: (user: String?, origin: String?)
        do {
            owner = try storage.pool.write { db in
                let user = try Data.fetchOne(db, sql: "SELECT value FROM store_meta WHERE key = 'replica_user'").flatMap { String(data: $0, encoding: .utf8) }
                let of = try Data.fetchOne(db, sql: "SELECT value FROM store_meta WHERE key = 'replica_of'").flatMap { String(data: $0, encoding: .utf8) }
                if user == nil, of == nil, id == storeID, try Self.isEmptyStore(db) {
                    // Made just now (or left empty by an earlier first run): it becomes this user's replica.
                    try db.execute(sql: "INSERT INTO store_meta (key, value) VALUES ('replica_user', ?), ('replica_of', ?)",
                                   arguments: [Data(userID.utf8), Data(origin.utf8)])
                    return (userID, origin)
                }
                return (user, of)
            }
        } catch {
            throw Store.map(error)
        }
        guard let user = owner.user, let of = owner.origin else {
            throw StoreError(.integrityFailure, "\(url.path) is a store of its own, not a replica of a server: give another --replica file")
        }
        guard id == storeID else {
            throw StoreError(.integrityFailure, "\(url.path) is the replica of another server (\(of), store \(Hex.encode(id))), not of \(origin): give another --replica file")
        }
        guard user == userID else {
            throw StoreError(.integrityFailure, "\(url.path) is another user's replica (\(Names.printable(user))), not yours: give another --replica file")
        }
        let store = Store(url: url, storeID: id, backend: backend, logger: logger)
        logger.debug("replica opened", metadata: ["path": "\(url.path)"])
        return store
    }

    /// Whether the store holds no zone and no card: a file made for a replica and not used yet.
    private static func isEmptyStore(_ db: Database) throws -> Bool {
        try Int.fetchOne(db, sql: "SELECT (SELECT count(*) FROM zone) + (SELECT count(*) FROM contact)") == 0
    }

    /// Notes that a pull brought the zone `zone` up to its server's state at `date`.
    func noteSync(of zone: ZoneID, at date: Date) async throws {
        let storage = try sqliteStorage(for: "a replica's sync record")
        let when = date.timeIntervalSince1970
        do {
            try await storage.write(logger: logger) { db in
                guard let uid = try Data.fetchOne(db, sql: "SELECT uid FROM zone WHERE owner_id = ? AND name = ?", arguments: [zone.ownerID, zone.name]) else { return }
                try db.execute(sql: "INSERT OR REPLACE INTO store_meta (key, value) VALUES (?, ?)",
                               arguments: ["synced:" + Hex.encode(Array(uid)), Data(String(when).utf8)])
            }
        } catch {
            throw Store.map(error)
        }
    }

    /// Zone uid to when a pull last brought the zone up to its server's state.
    func lastSyncs() async throws -> [[UInt8]: Date] {
        let storage = try sqliteStorage(for: "a replica's sync record")
        do {
            return try await storage.read { db in
                var found = [[UInt8]: Date]()
                for row in try Row.fetchAll(db, sql: "SELECT key, value FROM store_meta WHERE key LIKE 'synced:%'") {
                    let key: String = row[0], value: Data = row[1]
                    guard let uid = Hex.decode(String(key.dropFirst(7))), let seconds = Double(String(decoding: value, as: UTF8.self)) else { continue }
                    found[uid] = Date(timeIntervalSince1970: seconds)
                }
                return found
            }
        } catch {
            throw Store.map(error)
        }
    }
}

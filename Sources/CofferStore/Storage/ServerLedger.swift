import Foundation

/// What a Coffer server keeps in its store beside the zones, and the lookups it makes there: the
/// nonces of signed requests (a replay is refused), the operation ids of batches it applied (a
/// batch sent again is applied once), each user's stage (parts of one batch, committed together),
/// zones by row id, name or uid, and the query indexes a read needs. Each local backend
/// implements it (`Storage/SQLite`, `Storage/Postgres`), so that the server holds no SQL.
///
/// Nothing here is believed by a client: a nonce or an operation id only keeps the server from
/// doing a request's work twice, and a stage is checked as a whole batch when it is committed.
package protocol ServerLedger: Sendable {
    /// Notes `nonce` of `userID`'s request, seen at `seenAt` (seconds since 1970); false when
    /// the user sent it before. With `forgetBefore`, first forgets nonces seen before then.
    func noteNonce(_ nonce: [UInt8], userID: String, seenAt: Double, forgetBefore: Double?) async throws -> Bool
    /// Whether the batch of this operation id was applied (its id is recorded with it, in the
    /// same transaction).
    func wasApplied(_ operation: SnapshotOperation) async throws -> Bool

    /// Keeps part `part` of the user's stage (the request body, with its hash), replacing one
    /// of that number, after forgetting every stage part put before `forgetBefore`.
    /// - Throws: `.limitExceeded` when the user's stage would then hold over `limit` bytes.
    func putStagePart(_ part: Int, hash: [UInt8], body: Data, userID: String, at now: Double, forgetBefore: Double, limit: Int) async throws
    /// The number and hash of each part of the user's stage, in order.
    func stageHashes(userID: String) async throws -> [(part: Int, hash: Data)]
    /// The request body of part `part` of the user's stage, if it holds one.
    func stagedBody(_ part: Int, userID: String) async throws -> Data?
    /// Empties the user's stage.
    func dropStage(userID: String) async throws

    /// The row id, uid, name and owner of each zone of these row ids, names and uids that the
    /// store has.
    func zoneIdentities(rowIDs: Set<Int64>, named: Set<ZoneID>, uids: Set<[UInt8]>) async throws -> [(rowID: Int64, uid: [UInt8], id: ZoneID)]
    /// Makes the query indexes a query of `recordType` filtering or sorting on `fields` in zone
    /// `zoneRowID` needs, for the fields a zone's schema has as plain, and no other.
    func ensureQueryIndexes(zoneRowID: Int64, recordType: String, fields: [String]) async throws
    /// Waits until another process on the same store may have committed a batch, or `interval`
    /// has passed; returns at once on a store no other process serves (an SQLite file).
    func waitForOtherInstances(upTo interval: Duration) async throws
}

/// A local store as a whole (an SQLite file or a PostgreSQL database), as a restore and a
/// server see it: besides a server's ledger, whether it holds any zone, and its id.
package protocol LocalStorage: ServerLedger {
    /// Whether the store holds any zone, of any user.
    func hasZones() async throws -> Bool
    /// Gives the store, which must hold no zone, the id `id`.
    /// - Throws: `.alreadyExists` when it holds a zone.
    func adoptStoreID(_ id: [UInt8]) async throws
}

extension Store {
    /// This local store as a whole: what a server keeps beside its zones, and what a restore
    /// asks of it.
    /// - Throws: `.notSupported` naming `what` for a store reached through a server.
    package func localStorage(for what: @autoclosure () -> String) throws -> any LocalStorage {
        switch backend {
        case .sqlite(let sqlite): return SQLiteLocalStorage(storage: sqlite)
        case .postgres(let storage): return storage
        case .snapshot(let driver): throw StoreError(.notSupported, "\(what()) is not available on \(driver.storeDescription)")
        }
    }
}

import CofferCrypto
import CofferVault
import Foundation

/// The zones a user owns or takes part in: creating and deleting them, listing them, and
/// checking the store's lists against the user's marks (a zone left out of a list is found).
struct ZoneDirectory: Sendable {
    /// The store the zones are in.
    let store: Store
    /// The acting user's vault: their id, their signing key, the key zone keys are wrapped to, their marks.
    let vault: Vault
    /// Takes the key of a zone created, forgets that of one deleted.
    let keyRing: KeyRing
    /// The zones' logs: a zone's genesis and deletion are signed entries.
    let verifiedLogs: VerifiedLogs
    /// Who may read a zone (and delete it: its owner).
    let accessControl: AccessControl
    /// The cached schemas, forgotten with a zone deleted.
    let schemaRegistry: SchemaRegistry
    /// The kept row contexts: a new zone may have the row id of a deleted one.
    let rowContexts: RowContexts

    /// The acting user's id.
    var userID: String { vault.identity.userID }
}

extension ZoneDirectory {
    func createZone(named name: String) async throws -> Zone {
        try Names.validateZone(name)
        if let origin = try await store.movedZoneOrigin(ZoneID(name: name, ownerID: userID)) {
            throw StoreError(.alreadyExists, "zone '\(name)' was moved to the server at \(origin) ('coffer zone push'); work on it there, with --server \(origin)")
        }
        let zoneKey = SymmetricKey()
        let uid = SecureRandom.bytes(count: 16)
        let wrapped = KeyRing.wrapZoneKey(zoneKey, zoneUID: uid, epoch: 1, to: vault.boxKey.publicKey)
        let owner = userID
        let now = Date()
        let rowID: Int64 = try await store.write { db in
            let id = ZoneID(name: name, ownerID: owner)
            let rowID = try db.insertZone(uid: uid, id: id, created: now.timeIntervalSince1970)
            // The owner is the zone's first member: the key is wrapped to their X25519 key, and
            // the genesis commits to it.
            try db.insertWrappedKey(zoneRowID: rowID, epoch: 1, memberID: owner, wrapped: wrapped)
            let zone = ZoneRow(rowID: rowID, uid: uid, id: id, sequence: 0, created: now, logFormat: 1)
            let genesis = GenesisPayload(zoneName: name,
                                         state: StatePayload(epoch: 1, newCommitments: [1: KeyRing.commitment(to: zoneKey, zoneUID: uid, epoch: 1)], share: nil),
                                         records: .empty)
            try self.writeGenesis(db, zone: zone, seq: 1, payload: genesis, time: now.timeIntervalSince1970)
            try db.touchZone(zoneRowID: rowID)
            return rowID
        }
        keyRing.replace(zoneRowID: rowID, with: zoneKey, epoch: 1)
        rowContexts.forget(zoneRowID: rowID) // a new zone may have the row id of a deleted one
        verifiedLogs.forgetCommits(zoneRowID: rowID)
        store.logger.info("zone created", metadata: ["zone": "\(name)"])
        return Zone(id: ZoneID(name: name, ownerID: owner), created: now, keyEpoch: 1, sequence: 1, recordCount: 0)
    }

    /// Signs and stores a zone's first entry (in the caller's write transaction) and keeps the
    /// zone's log for the session once the transaction commits.
    @discardableResult
    func writeGenesis(_ db: any StorageTransaction, zone: ZoneRow, seq: Int64, payload: GenesisPayload, time: Double,
                      entries: [UInt8]? = nil, names: [UInt8]? = nil) throws -> ZoneLog {
        let entry = LogEntry(zoneUID: zone.uid, seq: seq, prev: .zero, kind: .genesis, authorID: userID, time: time, payload: payload.encoded)
        let body = entry.body
        let signature = vault.signingKey.signature(for: body)
        let hash = LogEntry.hash(body: body, signature: signature)
        let log: ZoneLog
        let stored = StoredLogEntry(seq: entry.seq, body: body, signature: signature, entries: nil, names: nil)
        do { log = ZoneLog(state: try verifiedLogs.verifier(db, zone: zone).genesis(stored, signed: false)) }
        catch let refusal as ZoneState.Refusal { throw StoreError(.internalError, "zone '\(zone.id.name)': \(refusal.reason)") }
        try db.appendLogEntry(zoneRowID: zone.rowID, entry: entry, body: body, signature: signature, hash: hash, entries: entries, names: names)
        try db.markZoneLogged(zoneRowID: zone.rowID)
        verifiedLogs.keepOnCommit(db, log, zoneRowID: zone.rowID)
        return log
    }

    /// The zones this user owns whose log verifies.
    func ownedZones() async throws -> [Zone] { try await ownedZoneAccess().zones }

    /// ``ownedZones()``, and the owned zones refused because their log fails verification
    /// (`.integrityFailure`): left out of the list, reported by `audit`.
    func ownedZoneAccess() async throws -> (zones: [Zone], refused: [(ZoneID, StoreError)]) {
        let owner = userID
        return try await verifiedLogs.read { db in
            var refused = [(ZoneID, StoreError)]()
            let zones = try db.eachGathering(db.zoneRows(ownedBy: owner)) { zone, recordCount -> Zone? in
                do {
                    let state = try self.verifiedLogs.zoneState(db, zone: zone)
                    return Zone(id: zone.id, created: Date(timeIntervalSince1970: state.created), keyEpoch: state.epoch, sequence: state.headSeq, recordCount: recordCount)
                } catch let error as StoreError where error.code == .integrityFailure || error.code == .permissionFailure {
                    refused.append((zone.id, error))
                    return nil
                }
            }
            return (zones, refused)
        }
    }

    func deleteZone(_ zoneID: ZoneID) async throws {
        let me = userID
        let (rowID, uid): (Int64, [UInt8]) = try await store.write { db in
            let zone = try self.accessControl.zoneRow(db, zoneID)
            guard zone.id.ownerID == me else {
                throw StoreError(.permissionFailure, "only the owner can delete zone '\(zoneID.name)'")
            }
            var viewers = [me]
            if var log = try? self.verifiedLogs.zoneLog(db, zone: zone), log.refusedTail == nil {
                // The owner's signed deletion ends the log, in the same write: the store keeps it
                // with the genesis, so that those who read the zone learn its owner deleted it (a
                // server deletes a zone, and notes it gone for others, only with it). A zone whose
                // log does not verify, or of the store's earlier format, goes without one.
                viewers = log.state.readers
                try self.verifiedLogs.appendEntry(db, zone: zone, log: &log, kind: .deletion, payload: [], time: Date().timeIntervalSince1970)
            }
            try db.noteZoneGone(zone, for: Set(viewers), reason: "deleted")
            try db.deleteZone(zoneRowID: zone.rowID)
            return (zone.rowID, zone.uid)
        }
        // Its cached keys, logs and schemas go with it.
        keyRing.forget(zoneRowID: rowID)
        verifiedLogs.forget(zoneRowID: rowID)
        schemaRegistry.forget(zoneRowID: rowID)
        // The zone is gone on purpose: this user's mark says so, and a copy of it put back in
        // the file later is refused.
        try? vault.marks.reset(zone: uid, to: ZoneMark.deletion(zoneUID: uid, ownerID: me))
        store.logger.info("zone deleted", metadata: ["zone": "\(zoneID.name)"])
    }
}

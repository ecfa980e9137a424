import CofferCrypto
import Foundation
import Logging

/// What a Coffer server (the `CofferServer` module) reads of the local store it serves, beside
/// the ``StorageSnapshot`` reads and writes its clients send and its ledger (``LocalStorage``):
/// the checks it makes before it applies a batch need a zone's verified state, stored cards and
/// the rows a batch keeps. Every answer here is checked against signed data, as a client
/// checks it.
extension Store {
    /// Opens the local store a server keeps, an SQLite file (made if missing) or a
    /// `postgres://` URL, with the driver that runs its clients' reads and batches.
    package static func openServed(_ location: String, logger: Logger) async throws -> (store: Store, driver: any SnapshotDriver) {
        if PostgresURL.isPostgresURL(location.lowercased()) {
            let url = try PostgresURL(location)
            let store = try await Store(postgres: url, password: PostgresPassword.lookup(for: url), logger: logger)
            guard case .postgres(let storage) = store.backend else { preconditionFailure("a PostgreSQL store") }
            return (store, storage)
        }
        let store = try Store(path: location, logger: logger)
        return (store, SQLiteSnapshotDriver(storage: try store.sqliteStorage(for: "a served store"), logger: logger))
    }

    /// The signing key of a user whose card the store holds and verifies; nil for an unknown user.
    package func verifiedSigningKey(of userID: String) async throws -> Ed25519.PublicKey? {
        try await read { [self] db in try verifiedContact(db, userID: userID)?.identity.signingKey }
    }

    /// The stored sequence, creator and creation time of these records of a zone, by name.
    package func storedStamps(zoneRowID: Int64, names: [String]) async throws -> [String: (seq: Int64, creatorID: String, created: Double)] {
        try await read { db in
            var rows = [String: (seq: Int64, creatorID: String, created: Double)]()
            try db.readRecordRows(zoneRowID: zoneRowID, names: names) { rows[$0.name] = ($0.seq, $0.creatorID, $0.created) }
            return rows
        }
    }

    /// The schema rows of these record types in the zone `zone` (at row id `zoneRowID`), by type.
    package func fieldSchemaRows(zone: ZoneID, zoneRowID: Int64, recordTypes: Set<String>) async throws
        -> [String: [(field: String, valueType: String, encrypted: Bool)]] {
        try await read { db in
            // (PostgreSQL's snapshot reads a zone's schema with its row.)
            _ = try db.zoneRow(zone)
            return try recordTypes.reduce(into: [String: [(field: String, valueType: String, encrypted: Bool)]]()) {
                $0[$1] = try db.fieldSchemaRows(zoneRowID: zoneRowID, recordType: $1)
            }
        }
    }

    /// One stored log entry of a zone, with its record lists; nil when the zone has no entry `seq`.
    package func storedLogEntry(zoneRowID: Int64, seq: Int64) async throws -> StoredLogEntry? {
        try await read { db in try db.logEntry(zoneRowID: zoneRowID, seq: seq) }
    }

    /// A zone's stored log entries after `seq`, in order, without their record lists.
    package func storedLogEntries(zoneRowID: Int64, after seq: Int64) async throws -> [StoredLogEntry] {
        try await read { db in try db.logEntries(zoneRowID: zoneRowID, after: seq) }
    }

    /// The zone's state as its stored log verifies (each entry signed by the stored card of its
    /// author, and allowed by the state before it), read on from `known` while the store's log
    /// still holds `known`'s head, else from the genesis.
    /// - Throws: `.integrityFailure` naming the entry that does not verify, or a zone with no log.
    package func verifiedZoneState(rowID: Int64, uid: [UInt8], zone: ZoneID, from known: ZoneState?) async throws -> ZoneState {
        try await read { [self] db in
            var cached = known
            if let head = cached?.headSeq, try db.logEntry(zoneRowID: rowID, seq: head).map({ $0.hash }) != cached?.headHash { cached = nil }
            var state = cached
            let verifier = ZoneLogVerifier(uid: uid, zone: zone) { try self.verifiedContact(db, userID: $0)?.identity.signingKey }
            for stored in try db.logEntries(zoneRowID: rowID, after: cached?.headSeq ?? 0) {
                do { try verifier.next(stored, to: &state) } catch let refusal as ZoneState.Refusal {
                    throw StoreError(.integrityFailure, "entry \(refusal.seq) of zone '\(zone.name)' does not verify on the server: \(refusal.reason)")
                }
            }
            guard let state else { throw StoreError(.integrityFailure, "zone '\(zone.name)' has no log") }
            return state
        }
    }

    /// The store's change counter (what `changes/wait` compares).
    package func changeCounter() async throws -> Int64 {
        try await read { db in try db.databaseCounter().current }
    }
}

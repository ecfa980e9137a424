import CofferVault
import Foundation

/// What ``Session/pushZone(_:to:progress:)`` copied.
public struct PushResult: Sendable {
    /// Log entries copied, the genesis included.
    public let entries: Int
    /// Record rows copied.
    public let records: Int
}

extension Session {
    /// Copies a zone this user owns, whole, from this store onto `target` (a Coffer server, or
    /// another local store): its row, its signed log with every entry's record lists, its
    /// wrapped and chained keys, its public link, member lookups and schema, its record rows as
    /// stored, and the cards of everyone who signed its log. Nothing is sealed or signed again:
    /// record envelopes bind the zone, not the store, so every signature and ciphertext stays
    /// valid, and this user's marks for the zone hold on the copy. The zone stays here too.
    ///
    /// The zone is verified here first (its log, and every record row against it), then written
    /// whole or not at all (see ``applyWhole(_:to:progress:)``): the zone with its log, keys
    /// and schema, then its rows, 400 a batch.
    /// - Throws: `.permissionFailure` for a zone this user does not own; `.alreadyExists` when
    ///   `target` has a zone of that name of this user's; `.integrityFailure` when the zone here
    ///   fails verification; `.notSupported` when this store is a server's.
    public func pushZone(_ zoneID: ZoneID, to target: Store, progress: @Sendable (_ done: Int, _ total: Int) -> Void = { _, _ in })
        async throws -> PushResult {
        let destination = try Self.driver(of: target, for: "pushing a zone onto it")
        let reserved = try await Self.fetch([.zone(zoneID), .newZoneID(zoneID)], from: destination)
        if case .some(.some) = reserved.zones[zoneID] {
            throw StoreError(.alreadyExists, "the target store already has your zone '\(zoneID.name)'")
        }
        guard let newRowID = reserved.newZoneIDs[zoneID] else { throw StoreError(.internalError, "the target store reserved no zone id") }
        // Verified here first: nothing that fails verification is copied.
        let (zone, state) = try await read { db in
            let zone = try self.zoneRow(db, zoneID)
            _ = try self.requireOwner(db, zone: zone, to: "push it")
            return (zone, try self.zoneState(db, zone: zone))
        }
        let report = try await store.withPinnedReads { try await auditZone(zoneID) }
        if let finding = report.findings.first {
            throw StoreError(.integrityFailure, "zone '\(zoneID.name)' does not verify here, so it is not pushed: \(finding.message)")
        }
        let source = try Self.driver(of: store, for: "pushing a zone from it")
        let rowID = zone.rowID
        // Everything of the zone, read from one state of this store.
        var t = try await Self.fetch([.zone(zoneID), .log(zoneRowID: rowID, after: 0), .allRows(zoneRowID: rowID), .tombstoneList(zoneRowID: rowID)],
                                     from: source)
        guard let log = t.logs[rowID]?.entries, log.last?.seq == state.headSeq else {
            throw StoreError(.busy, "zone '\(zoneID.name)' changed while it was read; push it again")
        }
        let listed = log.filter { ZoneCopy.isListed($0.body) }
        t.merge(try await Self.fetch(listed.map { .logEntry(zoneRowID: rowID, seq: $0.seq) }, from: source)) { $0 }
        let authors = Set(log.compactMap { LogEntry.decode($0.body)?.authorID }).union([userID])
        t.merge(try await Self.fetch(authors.sorted().map { .contact($0) }, from: source)) { $0 }

        // The cards, then the zone whole (see ``ZoneCopy``).
        let copy = try ZoneCopy(zone: zone, from: t)
        let head = try authors.sorted().map { user -> StorageSnapshot.Write in
            guard let stored = t.contacts[user] ?? nil else { throw StoreError(.integrityFailure, "the card of \(user), who signed zone '\(zoneID.name)', is missing") }
            return try Self.contactWrite(card: stored.card, added: stored.added)
        }
        let batches = try copy.batches(zoneRowID: newRowID, head: head)
        try await Self.applyWhole(batches, to: destination) { done, total, _ in progress(done, total) }
        store.logger.info("zone pushed", metadata: ["zone": "\(zoneID.name)", "entries": "\(log.count)", "records": "\(copy.rows.count)"])
        return PushResult(entries: log.count, records: copy.rows.count)
    }

    /// Applies `batches` to `driver` as one batch, whole or not at all: a local store takes them
    /// in one transaction; a Coffer server through its stage, each batch in a request of its
    /// own, applied together by a last one (a run cut short and made again sends only what the
    /// server lacks). `progress` gets the batches done and their number, and whether the server
    /// had that one already (on a local store, once, after the transaction). With `operation`,
    /// the store records it as applied in the same transaction (see ``wasApplied(_:on:)``).
    static func applyWhole(_ batches: [[StorageSnapshot.Write]], to driver: any SnapshotDriver, operation: SnapshotOperation? = nil,
                           progress: (_ done: Int, _ total: Int, _ held: Bool) -> Void = { _, _, _ in }) async throws {
        if let remote = driver as? RemoteStorage {
            try await remote.applyStaged(batches, operation: operation?.id, progress: progress)
        } else {
            try await driver.apply(Array(batches.joined()), operation: operation)
            progress(batches.count, batches.count, false)
        }
    }

    /// Whether `store` recorded this user's `operation` as applied (see
    /// ``applyWhole(_:to:operation:progress:)``).
    static func wasApplied(_ operation: SnapshotOperation, on store: Store) async throws -> Bool {
        if case .snapshot(let driver as RemoteStorage) = store.backend { return try await driver.wasApplied(operation.id) }
        return try await store.localStorage(for: "an operation's record").wasApplied(operation)
    }

    /// The write that stores a contact card as it was added.
    static func contactWrite(card bytes: [UInt8], added: Double) throws -> StorageSnapshot.Write {
        let card = try ContactCard.verify(Data(bytes))
        let identity = card.identity
        return .contact(userID: identity.userID, name: identity.name, email: identity.email,
                        signingKey: Array(identity.signingKey.rawRepresentation), boxKey: Array(identity.boxKey.rawRepresentation),
                        card: bytes, cardCreated: card.created, added: added)
    }

    /// What `needs` read from `driver`, in one fetch.
    static func fetch(_ needs: [StorageSnapshot.Need], from driver: any SnapshotDriver, pin: (any ReadPin)? = nil) async throws -> StorageSnapshot.Tables<StoredRow> {
        guard !needs.isEmpty else { return StorageSnapshot.Tables() }
        let snapshot = StorageSnapshot(writable: false)
        if let pin { try await pin.fetch(needs, into: snapshot) } else { try await driver.fetch(needs, into: snapshot) }
        return snapshot.fetched
    }

    /// A snapshot driver over `store`'s backend.
    static func driver(of store: Store, for what: String) throws -> any SnapshotDriver {
        switch store.backend {
        case .sqlite(let sqlite): return SQLiteSnapshotDriver(pool: sqlite.pool, logger: store.logger)
        case .postgres(let storage): return storage
        case .snapshot(let driver):
            guard what.hasSuffix("onto it") else { throw StoreError(.notSupported, "\(what) is not available on \(driver.storeDescription)") }
            return driver
        }
    }
}

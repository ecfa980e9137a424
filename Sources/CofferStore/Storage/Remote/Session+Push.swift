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
    /// The zone is verified here first (its log, and every record row against it), then sent
    /// in batches: the zone with its log, keys and schema, then its rows, 400 at a time.
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
        let report: AuditReport = try await read { db in try self.auditZone(db, zoneID) }
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
        let listed = log.filter { stored in LogEntry.decode(stored.body).map { [.commit, .rewrite, .genesis].contains($0.kind) } ?? false }
        t.merge(try await Self.fetch(listed.map { .logEntry(zoneRowID: rowID, seq: $0.seq) }, from: source)) { $0 }
        let authors = Set(log.compactMap { LogEntry.decode($0.body)?.authorID }).union([userID])
        t.merge(try await Self.fetch(authors.sorted().map { .contact($0) }, from: source)) { $0 }


        // The cards, the zone and its log, keys and schema.
        var head = [StorageSnapshot.Write]()
        for user in authors.sorted() {
            guard let stored = t.contacts[user] ?? nil else { throw StoreError(.integrityFailure, "the card of \(user), who signed zone '\(zoneID.name)', is missing") }
            let card = try ContactCard.verify(Data(stored.card))
            let identity = card.identity
            head.append(.contact(userID: identity.userID, name: identity.name, email: identity.email,
                                 signingKey: Array(identity.signingKey.rawRepresentation), boxKey: Array(identity.boxKey.rawRepresentation),
                                 card: stored.card, cardCreated: card.created, added: stored.added))
        }
        head.append(.insertZone(rowID: newRowID, uid: zone.uid, id: zoneID, created: zone.created.timeIntervalSince1970))
        var batches = [[StorageSnapshot.Write]]()
        var current = head
        for stored in log {
            guard let entry = LogEntry.decode(stored.body) else { throw StoreError(.integrityFailure, "zone '\(zoneID.name)' holds a malformed log entry") }
            let lists = (t.entries[rowID]?[stored.seq] ?? nil)
            current.append(.appendLog(zoneRowID: newRowID, head: stored.seq - 1, entry: entry, body: stored.body, signature: stored.signature,
                                      hash: stored.hash, entries: lists?.entries, names: lists?.names))
            if current.count >= 2_000 {
                batches.append(current)
                current = []
            }
        }
        for (epoch, members) in (t.wrappedKeys[rowID] ?? [:]).sorted(by: { $0.key < $1.key }) {
            for (member, wrapped) in members.sorted(by: { $0.key < $1.key }) {
                current.append(.wrappedKey(zoneRowID: newRowID, epoch: epoch, memberID: member, wrapped: wrapped))
            }
        }
        for (epoch, sealed) in (t.chainedKeys[rowID] ?? [:]).sorted(by: { $0.key < $1.key }) {
            current.append(.storeChainedKey(zoneRowID: newRowID, epoch: epoch, sealed: sealed))
        }
        if let link = t.shareLinks[rowID] ?? nil {
            current.append(.storeShareLink(zoneRowID: newRowID, epoch: link.epoch, sealedKey: link.sealedKey, sealedSecret: link.sealedSecret))
        }
        current.append(.setZoneMembers(zoneRowID: newRowID, members: t.zoneMembers[rowID] ?? [], shareUID: t.zoneShareUIDs[rowID] ?? nil))
        var schema = [String: [String: FieldType]]()
        for (recordType, fields) in (t.schemaRows[rowID] ?? [:]).sorted(by: { $0.key < $1.key }) {
            for field in fields {
                guard let type = FieldType(name: field.valueType) else { throw StoreError(.integrityFailure, "zone '\(zoneID.name)' has a schema row of unknown type") }
                schema[recordType, default: [:]][field.field] = type
                current.append(.fieldSchema(zoneRowID: newRowID, recordType: recordType, field: field.field,
                                            schema: FieldSchema(type: type, encrypted: field.encrypted)))
            }
        }
        // Deleted names, for the change feed: each deletion's author, time and label are its
        // commit's, which the log signs.
        let entriesBySeq = Dictionary(log.compactMap { stored in LogEntry.decode(stored.body).map { (stored.seq, $0) } }, uniquingKeysWith: { a, _ in a })
        for (name, seq) in (t.tombstoneLists[rowID] ?? [:]).sorted(by: { $0.key < $1.key }) {
            guard let entry = entriesBySeq[seq] else { continue }
            current.append(.addTombstone(zoneRowID: newRowID, name: name, seq: seq, authorID: entry.authorID,
                                         label: RecordsPayload.decode(entry.payload)?.label, time: entry.time))
        }
        current.append(.touchZone(rowID: newRowID))
        batches.append(current)

        // The rows as stored, 400 a batch; each carries its plain values' types, which its
        // version hash signs.
        let names = t.pages[rowID]?["all"] ?? []
        var rows = [StorageSnapshot.Write]()
        for name in names {
            guard let row = t.records[rowID]?[name] ?? nil else { continue }
            let count = row.plainCount
            let version: SealedVersion = try row.withBytes { bytes in
                let plain = UnsafeRawBufferPointer(rebasing: bytes[..<count])
                let values = try PlainValuesCodec.decode(plain, typeOf: { schema[row.type]?[$0] })
                let sealed = row.hasSealed ? Array(bytes[count...]) : nil
                let stamp = VersionStamp(name: row.name, type: row.type, parent: row.parent, seq: row.seq, epoch: row.epoch,
                                         membershipSeq: row.membershipSeq, creatorID: row.creatorID, modifierID: row.modifierID,
                                         created: row.created, modified: row.modified)
                return SealedVersion(stamp: stamp, plain: Array(plain), plainTypes: PlainValuesCodec.typeCodes(values), sealed: sealed, digest: .zero)
            }
            rows.append(.insertRecord(zoneRowID: newRowID, version))
            if rows.count == Limits.maxBatchRecords {
                batches.append(rows)
                rows = []
            }
        }
        if !rows.isEmpty { batches.append(rows) }
        for (i, batch) in batches.enumerated() {
            try await destination.apply(batch, operation: nil)
            progress(i + 1, batches.count)
        }
        store.logger.info("zone pushed", metadata: ["zone": "\(zoneID.name)", "entries": "\(log.count)", "records": "\(names.count)"])
        return PushResult(entries: log.count, records: names.count)
    }

    /// What `needs` read from `driver`, in one fetch.
    static func fetch(_ needs: [StorageSnapshot.Need], from driver: any SnapshotDriver) async throws -> StorageSnapshot.Tables<StoredRow> {
        guard !needs.isEmpty else { return StorageSnapshot.Tables() }
        let snapshot = StorageSnapshot(writable: false)
        try await driver.fetch(needs, into: snapshot)
        return snapshot.fetched
    }

    /// A snapshot driver over `store`'s backend.
    static func driver(of store: Store, for what: String) throws -> any SnapshotDriver {
        switch store.backend {
        case .sqlite(let pool): return SQLiteSnapshotDriver(pool: pool, logger: store.logger)
        case .postgres(let storage): return storage
        case .snapshot(let driver):
            guard what.hasSuffix("onto it") else { throw StoreError(.notSupported, "\(what) is not available on \(driver.storeDescription)") }
            return driver
        }
    }
}

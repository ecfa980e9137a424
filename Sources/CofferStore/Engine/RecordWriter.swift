import CofferCrypto
import CofferVault
import Foundation

/// The engine's one path that seals and writes record rows: it checks a batch, seals it, signs
/// the commit that names it, and stores rows and entry in one transaction. Saves and deletes
/// (``modify(zone:saving:prepared:deleting:policy:authorLabel:declaring:time:)``), rekeys, legacy
/// upgrades and moves (``storeVersion(_:zone:stamp:plain:plainTypes:sealedPlaintext:key:replacing:into:)``)
/// write through it; a restore and `zone push` copy rows already sealed and signed, as stored.
struct RecordWriter: Sendable {
    /// The acting user's id: the author of what it writes.
    let userID: String
    /// The store written to.
    let store: Store
    /// The zone keys that seal what it writes (and, for a rekey, the keys it replaces).
    let keyRing: KeyRing
    /// The zones' logs: each write signs an entry.
    let verifiedLogs: VerifiedLogs
    /// Who may write a zone (and rekey it: its owner).
    let accessControl: AccessControl
    /// The schemas a write is checked against and extends.
    let schemaRegistry: SchemaRegistry
    /// The current rows a write replaces, checked before it does.
    let reader: RecordReader
    /// The kept row contexts: a rekey drops those that hold the keys it drops.
    let rowContexts: RowContexts
}

extension RecordWriter {
    // MARK: - Validation

    /// `sized`: the caller has checked the record's size against ``Limits/maxRecordBytes``
    /// already (a batch weighs each record once, for its own limit). `typeChecked`: the record
    /// type is one the caller validated (a batch validates each of its types once).
    /// `keysChecked`: every field key is in the type's schema, plain or encrypted as the record
    /// has it (so each key is valid, and none is both plain and encrypted); values are still
    /// checked.
    static func prepare(_ record: Record, zone: ZoneID, sized: Bool = false, typeChecked: Bool = false,
                        keysChecked: Bool = false) throws -> PreparedRecord {
        let expectedSeq = try check(record, zone: zone, sized: sized, typeChecked: typeChecked, keysChecked: keysChecked)
        let (plain, plainTypes) = PlainValuesCodec.encodeWithTypes(record.values)
        let sealed = record.encryptedValues.isEmpty ? nil : SealedValuesCodec.encode(record.encryptedValues)
        return PreparedRecord(plain: plain, plainTypes: plainTypes, sealedPlaintext: sealed, expectedSeq: expectedSeq)
    }

    /// The checks of ``prepare(_:zone:sized:typeChecked:keysChecked:)``, in its order, without
    /// encoding anything: the change tag's sequence, if the record carries one.
    static func check(_ record: Record, zone: ZoneID, sized: Bool = false, typeChecked: Bool = false,
                      keysChecked: Bool = false) throws -> Int64? {
        guard record.zoneID == zone else {
            throw StoreError(.invalidArguments, "record '\(record.name)' belongs to zone '\(record.zoneID.name)', not '\(zone.name)'; a batch covers one zone")
        }
        try Names.validateRecord(record.name)
        if !typeChecked { try Names.validateRecordType(record.recordType) }
        guard record.values.count + record.encryptedValues.count <= Limits.maxFieldsPerRecord else {
            throw StoreError(.limitExceeded, "record '\(record.name)' has \(record.values.count + record.encryptedValues.count) fields; the limit is \(Limits.maxFieldsPerRecord)")
        }
        if let parent = record.parent { try Names.validateRecord(parent) }
        for (key, value) in record.values { try validateField(key, value, record: record.name, encrypted: false, keyChecked: keysChecked) }
        for (key, value) in record.encryptedValues {
            try validateField(key, value, record: record.name, encrypted: true, keyChecked: keysChecked)
            guard keysChecked || record.values[key] == nil else {
                throw StoreError(.invalidArguments, "field '\(key)' of '\(record.name)' is both plain and encrypted")
            }
        }
        // The limit counts what the fields hold (a string's UTF-8, bytes as bytes, 8 per number),
        // not how they are encoded, so a field weighs the same plain or encrypted.
        if !sized { try checkSize(record, Self.payloadSize(record.values) + Self.payloadSize(record.encryptedValues)) }
        return try record.changeTag.map(ChangeTag.parse)
    }

    static func checkSize(_ record: Record, _ size: Int) throws {
        guard size <= Limits.maxRecordBytes else {
            throw StoreError(.limitExceeded, "record '\(record.name)' has \(size) bytes of fields; the limit is \(Limits.maxRecordBytes)")
        }
    }

    static func payloadSize(_ values: [String: RecordValue]) -> Int {
        func size(_ v: RecordValue) -> Int {
            switch v {
            case .string(let s), .reference(let s): return s.utf8.count
            case .bytes(let b): return b.count
            case .bool: return 1
            case .int, .double, .date: return 8
            case .list(let items): return items.reduce(0) { $0 + size($1) }
            }
        }
        return values.reduce(0) { $0 + $1.key.utf8.count + size($1.value) }
    }

    static func validateField(_ key: String, _ value: RecordValue, record: String, encrypted: Bool, keyChecked: Bool = false) throws {
        if !keyChecked { try Names.validateFieldKey(key) }
        func check(_ v: RecordValue, inList: Bool) throws {
            switch v {
            case .double(let d) where !d.isFinite:
                throw StoreError(.invalidArguments, "field '\(key)' of '\(record)' is not a finite number")
            case .date(let d) where !d.timeIntervalSince1970.isFinite:
                throw StoreError(.invalidArguments, "field '\(key)' of '\(record)' is not a valid date")
            case .reference(let name):
                // Named by its field, not quoted: the reference may be an encrypted value.
                guard (try? Names.validateRecord(name)) != nil else {
                    throw StoreError(.invalidArguments, "field '\(key)'\(encrypted ? " (encrypted)" : "") of '\(record)' is not a record name (1 to 255 printable ASCII characters, not starting with '_')")
                }
            case .list(let items):
                guard !inList else { throw StoreError(.invalidArguments, "field '\(key)' of '\(record)' nests lists") }
                guard let first = items.first else { return }
                for item in items {
                    guard item.fieldType == first.fieldType else {
                        throw StoreError(.invalidArguments, "field '\(key)' of '\(record)' mixes \(first.fieldType) and \(item.fieldType) in one list")
                    }
                    try check(item, inList: true)
                }
            default: break
            }
        }
        try check(value, inList: false)
    }

    // MARK: - Modify

    /// Validates, encodes, seals and hashes one record for a batch. Pure: runs on any thread.
    /// `given`: the record as ``prepare(_:zone:sized:typeChecked:keysChecked:)`` already
    /// prepared it for this zone (checked and encoded), so that only sealing and hashing remain.
    static func sealWrite(_ record: Record, _ context: WriteContext, prepared given: PreparedRecord? = nil) -> Result<SealedWrite, any Error> {
        Result {
            // A type with a cached schema was validated when the batch started; a record whose
            // every field is in it as given needs no more schema work, and its keys no checks.
            let schema = context.schemas[record.recordType]
            let checked = schema.map { schema in
                record.values.allSatisfy { key, value in schema[key].map { SchemaRegistry.field(value, encrypted: false, matches: $0) } ?? false }
                    && record.encryptedValues.allSatisfy { key, value in schema[key].map { SchemaRegistry.field(value, encrypted: true, matches: $0) } ?? false }
            } ?? false
            let prepared = try given ?? prepare(record, zone: context.zone.id, sized: context.sized, typeChecked: schema != nil, keysChecked: checked)
            let stamp = VersionStamp(name: record.name, type: record.recordType, parent: record.parent, seq: context.seq, epoch: context.epoch,
                                     membershipSeq: context.membershipSeq, creatorID: context.authorID, modifierID: context.authorID,
                                     created: context.time, modified: context.time)
            let version = RecordSealer.seal(stamp, plain: prepared.plain, plainTypes: prepared.plainTypes, sealedPlaintext: prepared.sealedPlaintext,
                                            key: context.key, zone: context.zone, nonces: context.nonces, presealed: prepared.presealed)
            var result = record
            result.changeTag = context.changeTag
            result.modifierID = context.authorID
            result.modified = Date(timeIntervalSince1970: context.time)
            result.keyEpoch = context.epoch
            result.transactionAuthor = context.authorLabel
            result.fetchedValues = record.values
            result.fetchedEncryptedValues = record.encryptedValues
            result.creatorID = context.authorID
            result.created = result.modified
            return SealedWrite(result: result, version: version, expectedSeq: prepared.expectedSeq, schemaChecked: checked)
        }
    }

    /// What a write begun now would seal and stamp with, checked as a write checks it (this
    /// user may write the zone; the key is the one its owner committed to).
    func sealingKey(for zoneID: ZoneID) async throws -> SealingKey {
        try await verifiedLogs.read { db in
            let zone = try self.accessControl.zoneRow(db, zoneID)
            let access = try self.accessControl.checkCanWrite(db, zone: zone)
            let key = try self.keyRing.zoneKey(db, zone: zone, epoch: access.state.epoch, state: access.state)
            return SealingKey(zone: zone, epoch: access.state.epoch, key: key, headSeq: access.state.headSeq,
                              membershipSeq: access.state.ownerSeq, authorID: self.userID)
        }
    }

    /// Saves and deletes records of one zone atomically: all or nothing. Each record is
    /// encoded, sealed, hashed and written in turn, on the calling thread.
    ///
    /// `prepared`: each record of `records` as ``prepare(_:zone:sized:typeChecked:keysChecked:)``
    /// gave it for this zone (a caller that checked the records before, as an import does), so
    /// that they are not checked and encoded again. Not with `.changedKeys`, which merges each
    /// record over its stored version.
    /// `time`: the batch's time (its records' modification time and its log entry's), when the
    /// caller stamped `prepared` with it; now otherwise.
    func modify(zone zoneID: ZoneID, saving records: [Record], prepared: [PreparedRecord]? = nil, deleting deletions: [RecordDeletion],
                policy: SavePolicy, authorLabel: String? = nil, declaring declarations: [FieldDeclaration] = [],
                time: Double? = nil, confirming: [[UInt8]] = []) async throws -> ModifyResult {
        precondition(prepared == nil || (prepared!.count == records.count && policy != .changedKeys), "prepared records are one a record, not for .changedKeys")
        let deleteSeqs = try Self.checkBatch(records, deleting: deletions, authorLabel: authorLabel)
        let total = records.count + deletions.count
        let me = userID
        let now = time ?? Date().timeIntervalSince1970
        // A system call per 64 nonces instead of one per sealed record (no more drawn than the
        // batch can use: a single save draws one).
        let nonces = NonceReserve(chunk: min(64, records.count))

        return try await store.write { db in
            let zone = try self.accessControl.zoneRow(db, zoneID)
            let access = try self.accessControl.checkCanWrite(db, zone: zone)
            var log = access.log
            try db.prefetchRecords(zoneRowID: zone.rowID, saving: records, deleting: deletions)
            _ = try self.schemaRegistry.declareFields(db, zoneRowID: zone.rowID, declarations)
            let epoch = log.state.epoch
            let key = try self.keyRing.zoneKey(db, zone: zone, epoch: epoch, state: log.state)
            let seq = log.state.headSeq + 1
            let membershipSeq = log.state.ownerSeq
            var commit = CommitBuilder(zoneUID: zone.uid, seq: seq, capacity: total)
            try db.touchZone(zoneRowID: zone.rowID)
            // A saved name supersedes its tombstone, so each name is in the change feed once.
            let hasTombstones = try db.hasTombstones(zoneRowID: zone.rowID)
            let schemas = try self.freshSchemas(db, zone: zone, of: records)
            let context = WriteContext(zone: zone, key: key, epoch: epoch, seq: seq, membershipSeq: membershipSeq,
                                       authorID: me, authorLabel: authorLabel, time: now, schemas: schemas, nonces: nonces,
                                       sized: policy != .changedKeys)
            // The records to seal: `records`, or under `.changedKeys` each merged over its stored
            // version before sealing, so that it is sealed once, as it is written.
            var batch = records
            if policy == .changedKeys {
                for i in batch.indices {
                    if let over = try self.mergeChangedKeys(db, zone: zone, batch[i]) { batch[i] = over }
                }
            }
            // Parents as stored before the batch, of the records that name one (checked below).
            let priorParents = try Self.storedParents(db, zone: zone, names: records.compactMap { $0.parent == nil ? nil : $0.name })

            var failures = [String: StoreError]()
            let saved = try self.write(batch, prepared: prepared, context, db, policy: policy, hasTombstones: hasTombstones,
                                       into: &commit, failures: &failures)
            let deleted = try self.delete(deletions, expecting: deleteSeqs, db, zone: zone, seq: seq, label: authorLabel, time: now,
                                          into: &commit, failures: &failures)

            try Self.checkParents(of: saved, db, zone: zone, priorParents: priorParents, failures: &failures)

            if !failures.isEmpty {
                // Atomic: nothing of the batch is kept. A lone failure is reported as itself.
                if total == 1, let only = failures.values.first { throw only }
                let names = failures.keys.sorted()
                throw StoreError(.partialFailure, "\(failures.count) of \(total) records failed (\(names.prefix(5).joined(separator: ", "))\(names.count > 5 ? ", …" : "")); nothing was saved",
                                 partialErrors: failures)
            }
            try commit.write(db, logs: verifiedLogs, zone: zone, log: &log, kind: .commit, label: authorLabel, time: now, confirming: confirming)
            return ModifyResult(saved: saved, deleted: deleted)
        }
    }

    /// Seals each record of the batch and writes its row (new, or over the stored one as
    /// `policy` allows), adding its version hash to `commit` and clearing its tombstone; a record
    /// that cannot be written is a failure. Returns the records saved, as saved.
    private func write(_ batch: [Record], prepared: [PreparedRecord]?, _ context: WriteContext, _ db: any StorageTransaction,
                       policy: SavePolicy, hasTombstones: Bool, into commit: inout CommitBuilder,
                       failures: inout [String: StoreError]) throws -> [Record] {
        let zone = context.zone
        var saved = [Record]()
        saved.reserveCapacity(batch.count)
        let writer = try db.recordWriter(zoneRowID: zone.rowID, authorID: context.authorID)
        defer { writer.finish() }
        for i in batch.indices {
            // Consumed, not copied out of the result (a copy retains and releases every
            // field of the record).
            var write: SealedWrite
            let sealed = Self.sealWrite(batch[i], context, prepared: prepared?[i])
            switch consume sealed {
            case .success(let sealed): write = sealed
            case .failure(let error): throw error
            }
            if !write.schemaChecked { try self.schemaRegistry.applySchema(db, zoneRowID: zone.rowID, record: write.result) }
            var written = false
            var stored: (creator: String, created: Double)?
            if write.expectedSeq == nil || policy != .ifServerRecordUnchanged {
                written = try writer.insertIfAbsent(write.version)
            }
            if !written && (write.expectedSeq != nil || policy != .ifServerRecordUnchanged) {
                // The new version keeps the stored creator and creation time: they must be
                // ones a signed entry vouches for, not an edit of the file.
                try self.reader.verifyStoredRow(db, zone: zone, name: write.result.name)
                stored = try writer.update(write.version, expectedSeq: policy == .ifServerRecordUnchanged ? write.expectedSeq : nil)
                written = stored != nil
            }
            if written {
                if let stored {
                    commit.addRecord(write.version.digest(zoneUID: zone.uid, creatorID: stored.creator, created: stored.created),
                                     name: write.result.name)
                    write.result.creatorID = stored.creator
                    write.result.created = Date(timeIntervalSince1970: stored.created)
                } else {
                    commit.addRecord(write.version.digest, name: write.result.name)
                }
                if hasTombstones { try db.removeTombstone(zoneRowID: zone.rowID, name: write.result.name) }
                // Moved out of `write` (swapped with an empty record), not copied: a copy
                // retains and then releases every field.
                var result = Record(type: "", name: "", zone: ZoneID(name: "", ownerID: ""), parent: nil, values: [:], encryptedValues: [:])
                swap(&result, &write.result)
                saved.append(result)
            } else {
                failures[write.result.name] = try self.saveFailure(db, zone: zone, record: write.result, expectedSeq: write.expectedSeq)
            }
        }
        return saved
    }

    /// Checks a batch before its transaction: its label, its size (records and bytes of fields),
    /// its names (each valid, none twice). Returns the stored seq each deletion expects (from its
    /// change tag), nil where it gives none.
    private static func checkBatch(_ records: [Record], deleting deletions: [RecordDeletion], authorLabel: String?) throws -> [Int64?] {
        if let authorLabel, authorLabel.utf8.count > 255 || authorLabel.containsControlCharacters {
            throw StoreError(.invalidArguments, "a transaction author is at most 255 bytes with no control characters")
        }
        let total = records.count + deletions.count
        guard total <= Limits.maxBatchRecords else {
            throw StoreError(.limitExceeded, "a batch holds at most \(Limits.maxBatchRecords) records (this one has \(total)); split it and retry")
        }
        for deletion in deletions { try Names.validateRecord(deletion.name) }
        let deleteSeqs = try deletions.map { try $0.changeTag.map(ChangeTag.parse) }
        var bytes = 0
        for i in records.indices { // by index: `for record in records` copies each record
            let size = Self.payloadSize(records[i].values) + Self.payloadSize(records[i].encryptedValues)
            try Self.checkSize(records[i], size)
            bytes += size
        }
        guard bytes <= Limits.maxBatchBytes else {
            throw StoreError(.limitExceeded, "a batch holds at most \(Limits.maxBatchBytes) bytes of fields (this one has \(bytes)); split it and retry")
        }
        var names = Set<String>(minimumCapacity: total)
        for name in records.lazy.map(\.name) + deletions.map(\.name) where !names.insert(name).inserted {
            throw StoreError(.invalidArguments, "record '\(name)' appears twice in one batch")
        }
        return deleteSeqs
    }

    /// The schema of each record type of `records`, read afresh in the write's transaction: the
    /// zone's owner may have dropped a field since this session cached it (a field saved then is
    /// fixed again).
    private func freshSchemas(_ db: any StorageTransaction, zone: ZoneRow, of records: [Record]) throws -> [String: [String: FieldSchema]] {
        var schemas = [String: [String: FieldSchema]]()
        // Each type once (a batch is usually of one type: hashed once, not once a record).
        var types = Set<String>(), previous: String?
        for i in records.indices where records[i].recordType != previous {
            types.insert(records[i].recordType)
            previous = records[i].recordType
        }
        for type in types where Names.isIdentifier(type) {
            schemas[type] = try self.schemaRegistry.schema(db, zoneRowID: zone.rowID, recordType: type, fresh: true)
        }
        return schemas
    }

    /// Deletes the batch's deletions (each at the seq its change tag names, when it gives one),
    /// adding each to `commit` and leaving its tombstone; a record that changed or is missing is a
    /// failure. Returns the names deleted.
    private func delete(_ deletions: [RecordDeletion], expecting deleteSeqs: [Int64?], _ db: any StorageTransaction, zone: ZoneRow, seq: Int64,
                        label: String?, time now: Double, into commit: inout CommitBuilder, failures: inout [String: StoreError]) throws -> [String] {
        let me = userID, zoneID = zone.id
        var deleted = [String]()
        for (deletion, expected) in zip(deletions, deleteSeqs) {
            if try db.deleteRecord(zoneRowID: zone.rowID, name: deletion.name, expectedSeq: expected) {
                deleted.append(deletion.name)
                commit.addDeletion(name: deletion.name)
                try db.addTombstone(zoneRowID: zone.rowID, name: deletion.name, seq: seq, authorID: me, label: label, time: now)
            } else if let server = try self.reader.fetchRow(db, zone: zone, name: deletion.name) {
                failures[deletion.name] = StoreError(.serverRecordChanged, "record '\(deletion.name)' changed since change tag \(deletion.changeTag ?? "?"); fetch it and retry", serverRecord: server)
            } else {
                failures[deletion.name] = StoreError(.unknownItem, "no record '\(deletion.name)' in zone '\(zoneID.name)'")
            }
        }
        return deleted
    }

    /// Checks the parents the batch sets or changes, adding a failure for each that is wrong.
    private static func checkParents(of saved: [Record], _ db: any StorageTransaction, zone: ZoneRow, priorParents: [String: String?],
                                     failures: inout [String: StoreError]) throws {
        // A parent set or changed by this batch must be a record of the zone once the batch is
        // applied (CloudKit's `.referenceViolation`), and must not make a record its own
        // ancestor. A parent already stored is not checked again: it may since have been
        // deleted, or stayed behind when its child moved to a shared zone.
        var acyclic = Set<String>()
        // What the checks below read, said at once (a backend that reads across a network
        // fetches it together).
        let checked = saved.indices.compactMap { i in saved[i].parent.flatMap { priorParents[saved[i].name] != .some($0) ? (saved[i].name, $0) : nil } }
        if !checked.isEmpty {
            try db.prefetchParentChecks(zoneRowID: zone.rowID, children: checked.map(\.0), parents: checked.map(\.1))
        }
        for i in saved.indices { // by index: a `for record in saved` copies each record
            guard let parent = saved[i].parent, priorParents[saved[i].name] != .some(parent) else { continue }
            let name = saved[i].name
            if let failure = try Self.parentFailure(db, zone: zone, name: name, parent: parent, acyclic: &acyclic) {
                failures[name] = failure
            }
        }
    }

    /// The stored parent (nil: none) of each named record that exists.
    private static func storedParents(_ db: any StorageTransaction, zone: ZoneRow, names: [String]) throws -> [String: String?] {
        var parents = [String: String?]()
        for name in names {
            if let parent = try db.recordParent(zoneRowID: zone.rowID, name: name) { parents[name] = parent }
        }
        return parents
    }

    /// Why `parent` cannot be the parent of record `name` (in the zone as the batch leaves it):
    /// it is the record itself, it does not exist, or `name` is among its ancestors.
    ///
    /// `acyclic` carries, across one batch's checks, names whose chain of parents is known to end
    /// (at a root or a missing record) in the zone as the batch leaves it: `name` cannot be above
    /// such a record, or that chain would loop through `name`, so a walk stops at the first one.
    /// A batch that saves a chain therefore walks it once, not once per record.
    private static func parentFailure(_ db: any StorageTransaction, zone: ZoneRow, name: String, parent: String,
                                      acyclic: inout Set<String>) throws -> StoreError? {
        guard parent != name else { return StoreError(.invalidArguments, "record '\(name)' cannot be its own parent") }
        guard let grandparent = try db.recordParent(zoneRowID: zone.rowID, name: parent) else {
            return StoreError(.referenceViolation, "parent '\(parent)' of record '\(name)' is not a record of zone '\(zone.id.name)'; save the parent first, or in the same batch")
        }
        // A cycle through `name` needs a record whose parent is `name`: without one, the walk up
        // is not needed (a chain saved parent first, as import saves it, never walks).
        guard try db.hasChildren(zoneRowID: zone.rowID, parent: name) else { return nil }
        if let grandparent, !acyclic.contains(grandparent) { try db.prefetchAncestors(zoneRowID: zone.rowID, of: grandparent) }
        var ancestor: String? = grandparent
        var walked: [String] = [name, parent], seen = Set(walked)
        while let current = ancestor, !acyclic.contains(current) {
            if current == name {
                return StoreError(.invalidArguments, "parent '\(parent)' of record '\(name)' would make a cycle: '\(name)' is an ancestor of '\(parent)'")
            }
            guard seen.insert(current).inserted else { return nil } // a cycle above, made before this check existed
            walked.append(current)
            ancestor = try db.recordParent(zoneRowID: zone.rowID, name: current) ?? nil // a missing ancestor ends the walk: not this save's doing
        }
        acyclic.formUnion(walked) // every chain walked here ends
        return nil
    }

    /// Why a save wrote nothing: a stale tag, an existing record saved as new, or a type change.
    /// `expectedSeq` is the change tag the save carried (`record` already holds the tag it would
    /// have been given).
    private func saveFailure(_ db: any StorageTransaction, zone: ZoneRow, record: Record, expectedSeq: Int64?) throws -> StoreError {
        guard let server = try reader.fetchRow(db, zone: zone, name: record.name) else {
            return StoreError(.unknownItem, "record '\(record.name)' no longer exists in zone '\(zone.id.name)'; save it as new (without a change tag)")
        }
        if server.recordType != record.recordType {
            return StoreError(.invalidArguments, "record '\(record.name)' is of type \(server.recordType); its type cannot change to \(record.recordType)")
        }
        let mine = expectedSeq.map { "change tag \(ChangeTag.make($0))" } ?? "no change tag (a new record)"
        return StoreError(.serverRecordChanged, "record '\(record.name)' changed: it is at change tag \(server.changeTag ?? "?"), the save had \(mine); fetch it, merge, and retry",
                          serverRecord: server)
    }

    /// For `.changedKeys`: the stored record with only the keys this value changed applied
    /// (nil when nothing is stored under its name).
    private func mergeChangedKeys(_ db: any StorageTransaction, zone: ZoneRow, _ record: Record) throws -> Record? {
        guard let server = try reader.fetchRow(db, zone: zone, name: record.name) else { return nil }
        guard server.recordType == record.recordType else {
            throw StoreError(.invalidArguments, "record '\(record.name)' is of type \(server.recordType); its type cannot change to \(record.recordType)")
        }
        var merged = server
        let changed = record.changedKeys
        for key in changed {
            merged.values[key] = record.values[key]
            merged.encryptedValues[key] = record.encryptedValues[key]
        }
        merged.parent = record.parent ?? server.parent
        merged.changeTag = server.changeTag
        merged.fetchedValues = nil
        return merged
    }

    // MARK: - Fetch

    // MARK: - Permissions

}

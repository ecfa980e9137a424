import CofferCrypto
import Foundation

enum DecodeOutcome: Sendable {
    case record(Record)
    case failed(any Error)
    /// A field is not in the schema the session had: another process may have added it.
    case staleSchema
}

extension RecordReader {
    /// Checks a stored row against its signed commit, decodes its plain values and opens its
    /// sealed ones. Pure: runs on any thread.
    /// With `final`, a field missing from the schema is an integrity failure rather than `.staleSchema`.
    static func decode(_ row: StoredRow, context: RowContext, zone: ZoneRow, final: Bool = false) -> DecodeOutcome {
        decode(row, commit: context.commit, author: context.commit.authorID, creatorID: row.creatorID, modifierID: row.modifierID,
               label: context.commit.label, schema: context.schema, key: context.key, zone: zone, final: final)
    }

    /// ``decode(_:context:zone:final:)`` with each part given on its own (a ``DecodeWorker``
    /// passes the schema and key it kept from the last row).
    /// The row's version hash must be one of its log entry's, checked before anything else is
    /// believed but its plain values, which are parsed first (with the schema's types: the hash
    /// signs each field's type); in a commit, the modifier and modification time must be the
    /// commit's author and time (a rewrite by the owner keeps each record's own).
    static func decode(_ row: StoredRow, commit: VerifiedCommit, author: String, creatorID: String, modifierID: String, label: String?,
                       schema: [String: FieldSchema], key: Result<SymmetricKey, any Error>?, zone: ZoneRow,
                       final: Bool = false, scratch: UnsafeMutableRawBufferPointer? = nil,
                       fieldTypes: UnsafeMutablePointer<FieldTypeCache>? = nil) -> DecodeOutcome {
        fieldTypes?.pointee.begin()
        return row.withBytes { all -> DecodeOutcome in
            let plain = UnsafeRawBufferPointer(rebasing: all[0..<row.plainCount])
            let sealed = row.hasSealed ? UnsafeRawBufferPointer(rebasing: all[row.plainCount...]) : nil
            return withUnsafeTemporaryAllocation(of: UInt8.self, capacity: Limits.maxFieldsPerRecord) { codes -> DecodeOutcome in
                let values: [String: RecordValue], count: Int
                let typeOf: (String) -> FieldType? = { key in fieldTypes.map { $0.pointee.type(of: key, in: schema) } ?? schema[key]?.type }
                do { (values, count) = try PlainValuesCodec.decode(plain, typeOf: typeOf, codes: codes) } catch {
                    // What Coffer wrote parses with the schema it was written under: a field the
                    // session's schema lacks may have been added since by another process.
                    if final { return .failed(mismatch(row, zone: zone, plain: error)) }
                    return .staleSchema
                }
                guard matches(row, commit, author: author, modifier: modifierID, zone: zone, plain: plain,
                              plainTypes: UnsafeRawBufferPointer(UnsafeBufferPointer(rebasing: codes[0..<count])), sealed: sealed) else {
                    // A field the session's schema has with another type: the owner may have
                    // dropped it and it was fixed again since; read the schema again first.
                    if !final { return .staleSchema }
                    return .failed(mismatch(row, zone: zone))
                }
                return opened(row, values: values, sealed: sealed, changeTag: row.seq == commit.seq ? commit.changeTag : ChangeTag.make(row.seq),
                              creatorID: creatorID, modifierID: modifierID, label: label,
                              schema: schema, key: key, zone: zone, final: final, scratch: scratch)
            }
        }
    }

    /// The rest of ``decode(_:commit:author:creatorID:modifierID:label:schema:key:zone:final:scratch:)``
    /// once the row matched its entry: opens the sealed values and makes the record.
    @inline(__always)
    private static func opened(_ row: StoredRow, values: [String: RecordValue], sealed: UnsafeRawBufferPointer?, changeTag: String, creatorID: String,
                               modifierID: String, label: String?, schema: [String: FieldSchema], key: Result<SymmetricKey, any Error>?,
                               zone: ZoneRow, final: Bool, scratch: UnsafeMutableRawBufferPointer?) -> DecodeOutcome {
        do {
            var record = Record(type: row.type, name: row.name, zone: zone.id, parent: row.parent, values: values, encryptedValues: [:])
            if let sealed {
                let keyID: UInt32
                do { keyID = try Envelope.keyID(of: sealed) } catch {
                    throw StoreError(.integrityFailure, "record '\(row.name)': its encrypted values are damaged", underlying: error as? CryptoError)
                }
                guard Int64(keyID) == row.epoch else {
                    throw StoreError(.integrityFailure, "record '\(row.name)': its encrypted values name key epoch \(keyID), the row says \(row.epoch)")
                }
                guard let key = try key?.get() else { throw StoreError(.internalError, "no key was looked up for record '\(row.name)'") }
                var sealedValues = [String: RecordValue]()
                do {
                    try RecordSealer.withAssociatedData(zone: zone, name: row.name, type: row.type, epoch: row.epoch) { ad in
                        try Envelope.withOpened(sealed, using: key, authenticating: ad, scratch: scratch) { sealedValues = try SealedValuesCodec.decode($0) }
                    }
                } catch let error as CryptoError {
                    throw StoreError(.integrityFailure, "record '\(row.name)' in zone '\(zone.id.name)': its encrypted values fail authentication (changed or moved)",
                                     underlying: error)
                }
                for (key, value) in sealedValues {
                    guard let spec = schema[key] else {
                        if final { throw StoreError(.integrityFailure, "record '\(row.name)': encrypted field '\(key)' does not match the schema") }
                        return .staleSchema
                    }
                    guard SchemaRegistry.field(value, encrypted: true, matches: spec) else {
                        if !final { return .staleSchema }
                        throw StoreError(.integrityFailure, "record '\(row.name)': encrypted field '\(key)' does not match the schema")
                    }
                }
                record.encryptedValues = sealedValues
            }
            record.keyEpoch = row.epoch
            record.changeTag = changeTag
            record.creatorID = creatorID
            record.created = Date(timeIntervalSince1970: row.created)
            record.modifierID = modifierID // in the version hash, and the commit's author
            record.transactionAuthor = label
            record.modified = Date(timeIntervalSince1970: row.modified)
            record.fetchedValues = record.values
            record.fetchedEncryptedValues = record.encryptedValues
            return .record(record)
        } catch {
            return .failed(error)
        }
    }

    /// Whether a stored row is a version its log entry signs: its version hash is one of the
    /// entry's, at the entry's epoch and owner's entry; in a commit, its modifier and modification
    /// time are the commit's author and time.
    /// `author` and `modifier` are the commit's author and the row's modifier (a decoding thread
    /// passes its own copies).
    static func matches(_ row: StoredRow, _ commit: VerifiedCommit, author: String, modifier: String, zone: ZoneRow,
                        plain: UnsafeRawBufferPointer, plainTypes: UnsafeRawBufferPointer, sealed: UnsafeRawBufferPointer?) -> Bool {
        let hash = RecordSealer.versionHash(zoneUID: zone.uid, name: row.name, type: row.type, parent: row.parent, seq: row.seq,
                                              epoch: row.epoch, membershipSeq: row.membershipSeq, creatorID: row.creatorID,
                                              modifierID: row.modifierID, created: row.created, modified: row.modified,
                                              plain: plain, plainTypes: plainTypes, sealed: sealed)
        return commit.entries.contains(hash) && row.epoch == commit.epoch && row.membershipSeq == commit.ownerSeq
            && (commit.kind != .commit || (modifier == author && row.modified == commit.time))
    }

    static func mismatch(_ row: StoredRow, zone: ZoneRow, plain error: (any Error)? = nil) -> StoreError {
        guard let error else {
            return StoreError(.integrityFailure, "record '\(row.name)' in zone '\(zone.id.name)' does not match its signed log entry \(row.seq): it was changed in the file")
        }
        let why = (error as? StoreError)?.message ?? "\(error)"
        return StoreError(.integrityFailure, "record '\(row.name)' in zone '\(zone.id.name)' does not match its signed log entry \(row.seq) (\(why)): it or its zone's schema was changed in the file")
    }

    /// Checks a stored row against its log entry without opening it (nothing when no row has
    /// the name): before an update carries its creator and creation time into a new version.
    func verifyStoredRow(_ db: any StorageTransaction, zone: ZoneRow, name: String) throws {
        guard let row = try db.recordRow(zoneRowID: zone.rowID, name: name) else { return }
        try verifyStoredRow(db, zone: zone, row: row)
    }

    /// Checks `row`, read from the zone, as ``verifyStoredRow(_:zone:name:)`` does.
    func verifyStoredRow(_ db: any StorageTransaction, zone: ZoneRow, row: StoredRow) throws {
        let context = try context(db, zone: zone, row: row).mapError { Self.rowError($0, row: row, zone: zone) }.get()
        var schema = context.schema
        for attempt in 0..<2 {
            let plain: Result<[UInt8], any Error> = row.withBytes { all in
                Result { try Self.typeCodes(UnsafeRawBufferPointer(rebasing: all[0..<row.plainCount]), schema: schema) }
            }
            guard case .success(let types) = plain else {
                // A field another process added since this session read the schema: once more.
                if attempt == 0 { schema = try self.schemaRegistry.schema(db, zoneRowID: zone.rowID, recordType: row.type, fresh: true); continue }
                if case .failure(let error) = plain { throw Self.mismatch(row, zone: zone, plain: error) }
                return
            }
            let ok = row.withBytes { all in
                types.withUnsafeBytes { t in
                    Self.matches(row, context.commit, author: context.commit.authorID, modifier: row.modifierID, zone: zone,
                                 plain: UnsafeRawBufferPointer(rebasing: all[0..<row.plainCount]), plainTypes: t,
                                 sealed: row.hasSealed ? UnsafeRawBufferPointer(rebasing: all[row.plainCount...]) : nil)
                }
            }
            guard ok else { throw Self.mismatch(row, zone: zone) }
            return
        }
    }

    /// The type codes of a stored row's plain values, parsed with the schema's types.
    static func typeCodes(_ plain: UnsafeRawBufferPointer, schema: [String: FieldSchema]) throws -> [UInt8] {
        try withUnsafeTemporaryAllocation(of: UInt8.self, capacity: Limits.maxFieldsPerRecord) { codes in
            let count = try PlainValuesCodec.decode(plain, typeOf: { schema[$0]?.type }, codes: codes).codes
            return Array(codes[0..<count])
        }
    }

    /// Why a context could not be made: its commit fails verification.
    struct CommitRefused: Error {
        let reason: StoreError
    }

    /// A context's error as a row's: a refused commit refuses the row, by the row's own name.
    static func rowError(_ error: any Error, row: StoredRow, zone: ZoneRow) -> any Error {
        guard let refused = error as? CommitRefused else { return error }
        return StoreError(.integrityFailure, "record '\(row.name)' in zone '\(zone.id.name)' is refused: \(refused.reason.message)")
    }

    /// The context of a row, from the session caches (reading and verifying on a miss). A
    /// refused commit fails with ``CommitRefused`` (see ``rowError(_:row:zone:)``). A context
    /// whose commit, schema and key were all found is kept for later reads (``rowContexts``):
    /// a query's rows each meet a different commit, and making their contexts again on every
    /// read showed in profiles of the query path.
    func context(_ db: any StorageTransaction, zone: ZoneRow, row: StoredRow, key memoKey: RowContextKey? = nil,
                 log given: ZoneLog? = nil) -> Result<RowContext, any Error> {
        let memoKey = memoKey ?? RowContextKey(row)
        if given == nil, let kept = rowContexts.withLock({ $0[zone.rowID]?[memoKey] }) { return .success(kept) }
        let made = Result { () throws -> RowContext in
            let log = try given ?? verifiedLogs.zoneLog(db, zone: zone)
            let commit: VerifiedCommit
            do { commit = try verifiedLogs.verifiedCommit(db, zone: zone, seq: row.seq, log: log, cached: given == nil) } catch let e as StoreError where e.code == .integrityFailure {
                throw CommitRefused(reason: e) // named per row by `rowError`: rows of one commit share this context
            }
            let generation = schemaRegistry.schemaGeneration.withLock { $0 }
            let schema = try self.schemaRegistry.schema(db, zoneRowID: zone.rowID, recordType: row.type)
            let key = row.hasSealed ? Result { try keyRing.zoneKey(db, zone: zone, epoch: row.epoch, state: log.state, cached: given == nil) } : nil
            return RowContext(commit: commit, schema: schema, key: key, schemaGeneration: generation)
        }
        // Only whole contexts of the session's own log are kept: a missing key (no access yet,
        // say) is looked up again.
        guard given == nil else { return made }
        switch made {
        case .success(let context):
            if case .failure? = context.key { break }
            rowContexts.withLock { $0[zone.rowID, default: [:]][memoKey] = context }
        case .failure: break
        }
        return made
    }

    /// Decodes rows read on this (database) thread. `read` calls its argument once per row, in
    /// order; `deliver` then gets one result per row in that order; a row that fails its checks
    /// gives its error, so callers decide whether to skip it (queries, feeds) or fail.
    /// `expected` (the most rows `read` adds, when known) sizes the lists.
    func decodeRows(_ db: any StorageTransaction, zone: ZoneRow, expected: Int? = nil,
                    read: (_ add: (StoredRow) -> Void) throws -> Void,
                    deliver: (StoredRow, consuming Result<Record, any Error>) throws -> Void) throws {
        try withDecodeWorker(zone: zone) { worker in
            try decodeRows(db, zone: zone, worker: worker, expected: expected, read: read, deliver: deliver)
        }
    }

    /// Lends a decode worker pointed at `zone` (its caches kept from the session's earlier
    /// reads), for the length of `body`. Reads running at once each get their own.
    func withDecodeWorker<R>(zone: ZoneRow, _ body: (DecodeWorker) throws -> R) rethrows -> R {
        let worker = decodeWorkers.withLock { $0.popLast() } ?? DecodeWorker(zone: zone)
        worker.begin(zone: zone)
        defer { decodeWorkers.withLock { if $0.count < 8 { $0.append(worker) } } }
        return try body(worker)
    }

    private func decodeRows(_ db: any StorageTransaction, zone: ZoneRow, worker: DecodeWorker, expected: Int?,
                            read: (_ add: (StoredRow) -> Void) throws -> Void,
                            deliver: (StoredRow, consuming Result<Record, any Error>) throws -> Void) throws {
        var rows = [StoredRow]()
        rows.reserveCapacity(expected ?? 64) // growing from nothing showed in profiles of unlimited queries
        var contexts = [Result<RowContext, any Error>]()
        contexts.reserveCapacity(expected ?? 64)
        // Rows of one commit share their context: look it up once per commit and type in this
        // read (the last one first: rows of a commit often come in a run). `known` also holds
        // the failed ones, which the session does not keep, so a refused commit is checked once.
        var known = [RowContextKey: Result<RowContext, any Error>](minimumCapacity: min(expected ?? 64, 128))
        var last: (key: RowContextKey, context: Result<RowContext, any Error>)?
        try read { row in
            let key = RowContextKey(row)
            let context: Result<RowContext, any Error>
            if let last, last.key == key {
                context = last.context
            } else if let found = known[key] {
                context = found
                last = (key, context)
            } else {
                context = self.context(db, zone: zone, row: row, key: key)
                known[key] = context
                last = (key, context)
            }
            rows.append(row)
            contexts.append(context)
        }
        for i in rows.indices {
            let row = rows[i]
            switch contexts[i] {
            case .failure(let error): // its commit was refused, or could not be read
                try deliver(row, .failure(Self.rowError(error, row: row, zone: zone)))
            case .success(let context):
                switch worker.decode(row, context) {
                case .record(let record): try deliver(row, .success(record))
                case .failed(let error): try deliver(row, .failure(error))
                case .staleSchema: try deliver(row, Result { try self.decodeOne(db, zone: zone, row: row) })
                }
            }
        }
    }
}

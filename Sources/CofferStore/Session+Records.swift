import CofferCrypto
import Foundation
import GRDB

/// A record prepared for writing: validated, with its fields encoded (not yet sealed).
struct PreparedRecord: Sendable {
    var record: Record
    var plainJSON: String
    var sealedPlaintext: [UInt8]?
    let expectedSeq: Int64?
}

/// The outcome of a batch.
public struct ModifyResult: Sendable {
    /// The saved records, with their new change tags, in the order given.
    public let saved: [Record]
    /// The names deleted.
    public let deleted: [String]
}

/// A record to delete, optionally only if it is still at `changeTag`.
public struct RecordDeletion: Sendable, Hashable {
    public let name: String
    public let changeTag: String?

    public init(name: String, ifMatch changeTag: String? = nil) {
        self.name = name
        self.changeTag = changeTag
    }
}

enum ChangeTag {
    static func make(_ seq: Int64) -> String { String(seq, radix: 36) }

    static func parse(_ tag: String) throws -> Int64 {
        guard !tag.isEmpty, tag.count <= 13, let v = Int64(tag, radix: 36), v > 0, make(v) == tag else {
            throw StoreError(.invalidArguments, "'\(Names.printable(tag))' is not a change tag")
        }
        return v
    }
}

extension Session {
    // MARK: - Validation

    static func prepare(_ record: Record, zone: ZoneID) throws -> PreparedRecord {
        guard record.zoneID == zone else {
            throw StoreError(.invalidArguments, "record '\(record.name)' belongs to zone '\(record.zoneID.name)', not '\(zone.name)'; a batch covers one zone")
        }
        try Names.validateRecord(record.name)
        try Names.validateRecordType(record.recordType)
        guard record.values.count + record.encryptedValues.count <= Limits.maxFieldsPerRecord else {
            throw StoreError(.limitExceeded, "record '\(record.name)' has \(record.values.count + record.encryptedValues.count) fields; the limit is \(Limits.maxFieldsPerRecord)")
        }
        if let parent = record.parent { try Names.validateRecord(parent) }
        for (key, value) in record.values { try validateField(key, value, record: record.name) }
        for (key, value) in record.encryptedValues {
            try validateField(key, value, record: record.name)
            guard record.values[key] == nil else {
                throw StoreError(.invalidArguments, "field '\(key)' of '\(record.name)' is both plain and encrypted")
            }
        }
        let plain = PlainValuesCodec.encode(record.values)
        let sealed = record.encryptedValues.isEmpty ? nil : SealedValuesCodec.encode(record.encryptedValues)
        // The limit counts what the fields hold (a string's UTF-8, bytes as bytes, 8 per number),
        // not how they are encoded, so a field weighs the same plain or encrypted.
        let size = Self.payloadSize(record.values) + Self.payloadSize(record.encryptedValues)
        guard size <= Limits.maxRecordBytes else {
            throw StoreError(.limitExceeded, "record '\(record.name)' has \(size) bytes of fields; the limit is \(Limits.maxRecordBytes)")
        }
        return PreparedRecord(record: record, plainJSON: plain, sealedPlaintext: sealed,
                              expectedSeq: try record.changeTag.map(ChangeTag.parse))
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

    static func validateField(_ key: String, _ value: RecordValue, record: String) throws {
        try Names.validateFieldKey(key)
        func check(_ v: RecordValue, inList: Bool) throws {
            switch v {
            case .double(let d) where !d.isFinite:
                throw StoreError(.invalidArguments, "field '\(key)' of '\(record)' is not a finite number")
            case .date(let d) where !d.timeIntervalSince1970.isFinite:
                throw StoreError(.invalidArguments, "field '\(key)' of '\(record)' is not a valid date")
            case .reference(let name): try Names.validateRecord(name)
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

    /// Saves and deletes records of one zone atomically: all or nothing.
    func modify(zone zoneID: ZoneID, saving records: [Record], deleting deletions: [RecordDeletion],
                policy: SavePolicy, authorLabel: String? = nil) throws -> ModifyResult {
        if let authorLabel, authorLabel.utf8.count > 255 || authorLabel.unicodeScalars.contains(where: { $0.value < 0x20 }) {
            throw StoreError(.invalidArguments, "a transaction author is at most 255 bytes with no control characters")
        }
        let total = records.count + deletions.count
        guard total <= Limits.maxBatchRecords else {
            throw StoreError(.limitExceeded, "a batch holds at most \(Limits.maxBatchRecords) records (this one has \(total)); split it and retry")
        }
        let preparedInput = try records.map { try Self.prepare($0, zone: zoneID) }
        for deletion in deletions { try Names.validateRecord(deletion.name) }
        let deleteSeqs = try deletions.map { try $0.changeTag.map(ChangeTag.parse) }
        let bytes = preparedInput.reduce(0) { $0 + Self.payloadSize($1.record.values) + Self.payloadSize($1.record.encryptedValues) }
        guard bytes <= Limits.maxBatchBytes else {
            throw StoreError(.limitExceeded, "a batch holds at most \(Limits.maxBatchBytes) bytes of fields (this one has \(bytes)); split it and retry")
        }
        var names = Set<String>()
        for name in preparedInput.map(\.record.name) + deletions.map(\.name) where !names.insert(name).inserted {
            throw StoreError(.invalidArguments, "record '\(name)' appears twice in one batch")
        }
        let me = userID
        let storeID = store.storeID
        let now = Date().timeIntervalSince1970

        return try store.write { db in
            var prepared = preparedInput
            let zone = try ZoneRow.fetch(db, zoneID)
            try self.checkCanWrite(db, zone: zone)
            let epoch = zone.currentEpoch
            let key = try self.zoneKey(db, zone: zone, epoch: epoch)
            let seq = zone.sequence + 1
            try db.execute(sql: "UPDATE zone SET sequence = ? WHERE id = ?", arguments: [seq, zone.rowID])
            let membershipSeq = zone.membershipSeq
            var commit = CommitBuilder(zone: zone, seq: seq, membershipSeq: membershipSeq, epoch: epoch, authorID: me,
                                       authorLabel: authorLabel, time: now)
            try Self.touch(db, zoneRowID: zone.rowID)
            // A saved name supersedes its tombstone, so each name is in the change feed once.
            let hasTombstones = try Bool.fetchOne(db, sql: "SELECT EXISTS (SELECT 1 FROM record_tombstone WHERE zone_id = ?)",
                                                  arguments: [zone.rowID]) ?? false

            var failures = [String: StoreError]()
            var saved = [Record]()
            saved.reserveCapacity(prepared.count)
            let insert = try db.cachedStatement(sql: """
                INSERT INTO record (zone_id, name, type, parent, plain, sealed, epoch, seq, membership_seq, creator_id, modifier_id, created_at, modified_at)
                VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT (zone_id, name) DO NOTHING
                """)
            for i in prepared.indices {
                if policy == .changedKeys, let merged = try self.mergeChangedKeys(db, zone: zone, prepared[i]) {
                    prepared[i] = merged
                }
                let item = prepared[i]
                let record = item.record
                try self.applySchema(db, zoneRowID: zone.rowID, record: record)
                let sealed: Data? = item.sealedPlaintext.map { plaintext in
                    Data(Envelope.seal(plaintext, using: key, keyID: UInt32(truncatingIfNeeded: epoch),
                                       authenticating: Self.associatedData(storeID: storeID, zone: zone, name: record.name,
                                                                           type: record.recordType, epoch: epoch)).bytes)
                }
                var result = record
                result.changeTag = ChangeTag.make(seq)
                result.modifierID = me
                result.modified = Date(timeIntervalSince1970: now)
                result.keyEpoch = epoch
                result.transactionAuthor = authorLabel
                result.fetchedValues = record.values
                result.fetchedEncryptedValues = record.encryptedValues

                var written = false
                if item.expectedSeq == nil || policy != .ifServerRecordUnchanged {
                    try insert.execute(arguments: [zone.rowID, record.name, record.recordType, record.parent, item.plainJSON, sealed,
                                                   epoch, seq, membershipSeq, me, me, now, now])
                    if db.changesCount == 1 {
                        written = true
                        result.creatorID = me
                        result.created = Date(timeIntervalSince1970: now)
                    }
                }
                if !written && (item.expectedSeq != nil || policy != .ifServerRecordUnchanged) {
                    let update = try db.cachedStatement(sql: """
                        UPDATE record SET parent = ?, plain = ?, sealed = ?, epoch = ?, seq = ?, membership_seq = ?, modifier_id = ?, modified_at = ?
                        WHERE zone_id = ? AND name = ? AND type = ? AND (? IS NULL OR seq = ?)
                        RETURNING creator_id, created_at
                        """)
                    let guardSeq: Int64? = policy == .ifServerRecordUnchanged ? item.expectedSeq : nil
                    if let row = try Row.fetchOne(update, arguments: [record.parent, item.plainJSON, sealed, epoch, seq, membershipSeq, me, now,
                                                                      zone.rowID, record.name, record.recordType, guardSeq, guardSeq]) {
                        written = true
                        result.creatorID = row[0]
                        result.created = Date(timeIntervalSince1970: row[1])
                    }
                }
                if written {
                    let hash = Self.hash(zone: zone, name: record.name, type: record.recordType, parent: record.parent, seq: seq,
                                         epoch: epoch, membershipSeq: membershipSeq, creatorID: result.creatorID!,
                                         created: result.created!.timeIntervalSince1970, modified: now, plain: item.plainJSON, sealed: sealed)
                    commit.addRecord(hash)
                    if hasTombstones {
                        try db.cachedStatement(sql: "DELETE FROM record_tombstone WHERE zone_id = ? AND name = ?")
                            .execute(arguments: [zone.rowID, record.name])
                    }
                    saved.append(result)
                } else {
                    failures[record.name] = try self.saveFailure(db, zone: zone, record: record)
                }
            }

            var deleted = [String]()
            let delete = try db.cachedStatement(sql: "DELETE FROM record WHERE zone_id = ? AND name = ? AND (? IS NULL OR seq = ?)")
            for (deletion, expected) in zip(deletions, deleteSeqs) {
                try delete.execute(arguments: [zone.rowID, deletion.name, expected, expected])
                if db.changesCount == 1 {
                    deleted.append(deletion.name)
                    commit.addDeletion(name: deletion.name)
                    try db.cachedStatement(sql: """
                        INSERT OR REPLACE INTO record_tombstone (zone_id, name, seq, author_id, author_label, deleted_at) VALUES (?, ?, ?, ?, ?, ?)
                        """).execute(arguments: [zone.rowID, deletion.name, seq, me, authorLabel, now])
                } else if let server = try self.fetchRow(db, zone: zone, name: deletion.name) {
                    failures[deletion.name] = StoreError(.serverRecordChanged, "record '\(deletion.name)' changed since change tag \(deletion.changeTag ?? "?"); fetch it and retry", serverRecord: server)
                } else {
                    failures[deletion.name] = StoreError(.unknownItem, "no record '\(deletion.name)' in zone '\(zoneID.name)'")
                }
            }

            if !failures.isEmpty {
                // Atomic: nothing of the batch is kept. A lone failure is reported as itself.
                if total == 1, let only = failures.values.first { throw only }
                let names = failures.keys.sorted()
                throw StoreError(.partialFailure, "\(failures.count) of \(total) records failed (\(names.prefix(5).joined(separator: ", "))\(names.count > 5 ? ", …" : "")); nothing was saved",
                                 partialErrors: failures)
            }
            try commit.write(db, signer: self.vault.signingKey)
            return ModifyResult(saved: saved, deleted: deleted)
        }
    }

    /// Why a save wrote nothing: a stale tag, an existing record saved as new, or a type change.
    private func saveFailure(_ db: GRDB.Database, zone: ZoneRow, record: Record) throws -> StoreError {
        guard let server = try fetchRow(db, zone: zone, name: record.name) else {
            return StoreError(.unknownItem, "record '\(record.name)' no longer exists in zone '\(zone.id.name)'; save it as new (without a change tag)")
        }
        if server.recordType != record.recordType {
            return StoreError(.invalidArguments, "record '\(record.name)' is a \(server.recordType); its type cannot change to \(record.recordType)")
        }
        let mine = record.changeTag.map { "change tag \($0)" } ?? "no change tag (a new record)"
        return StoreError(.serverRecordChanged, "record '\(record.name)' changed: it is at change tag \(server.changeTag ?? "?"), the save had \(mine); fetch it, merge, and retry",
                          serverRecord: server)
    }

    /// For `.changedKeys`: the stored record with only the keys this value changed applied.
    private func mergeChangedKeys(_ db: GRDB.Database, zone: ZoneRow, _ item: PreparedRecord) throws -> PreparedRecord? {
        guard let server = try fetchRow(db, zone: zone, name: item.record.name) else { return nil }
        guard server.recordType == item.record.recordType else {
            throw StoreError(.invalidArguments, "record '\(item.record.name)' is a \(server.recordType); its type cannot change to \(item.record.recordType)")
        }
        var merged = server
        let changed = item.record.changedKeys
        for key in changed {
            merged.values[key] = item.record.values[key]
            merged.encryptedValues[key] = item.record.encryptedValues[key]
        }
        merged.parent = item.record.parent ?? server.parent
        merged.changeTag = server.changeTag
        var prepared = try Self.prepare(merged, zone: zone.id)
        prepared.record.fetchedValues = nil
        return prepared
    }

    // MARK: - Fetch

    /// The record named `name`, or nil.
    func fetchRow(_ db: GRDB.Database, zone: ZoneRow, name: String) throws -> Record? {
        let statement = try db.cachedStatement(sql: "SELECT \(Self.recordColumns) FROM record WHERE zone_id = ? AND name = ?")
        let rows = try Row.fetchCursor(statement, arguments: [zone.rowID, name])
        guard let row = try rows.next() else { return nil }
        return try decodeRecord(db, zone: zone, row: row)
    }

    static let recordColumns = "name, type, parent, plain, sealed, epoch, seq, creator_id, modifier_id, created_at, modified_at, membership_seq"

    /// Decodes a row selected with ``recordColumns``, opening its sealed values. Give it the
    /// live row of a cursor: the plain and sealed columns are read in place, without copies.
    func decodeRecord(_ db: GRDB.Database, zone: ZoneRow, row: Row) throws -> Record {
        let name: String = row[0]
        let type: String = row[1]
        let parent: String? = row[2]
        let epoch: Int64 = row[5]
        let seq: Int64 = row[6]
        let creator: String = row[7]
        let created: Double = row[9]
        let modified: Double = row[10]
        let membershipSeq: Int64 = row[11]
        var record = Record(type: type, name: name, zone: zone.id, parent: parent)
        let commit: VerifiedCommit
        do { commit = try verifiedCommit(db, zone: zone, seq: seq) } catch let e as StoreError where e.code == .integrityFailure {
            throw StoreError(.integrityFailure, "record '\(name)' in zone '\(zone.id.name)' is refused: \(e.message)")
        }
        var schema = try self.schema(db, zoneRowID: zone.rowID, recordType: type)
        // The plain and sealed columns are read in place, once: hashed for the signature check,
        // then decoded and opened.
        let (values, sealedValues) = try row.withUnsafeData(atIndex: 3) { plainData -> ([String: RecordValue], [String: RecordValue]?) in
            guard let plainData else { throw StoreError(.integrityFailure, "record '\(name)' has no plain values column") }
            return try row.withUnsafeData(atIndex: 4) { sealedData in
                try plainData.withUnsafeBytes { plain in
                    try Self.withOptionalBytes(sealedData) { sealed in
                        let hash = CommitBuilder.recordHash(zoneUID: zone.uid, name: name, type: type, parent: parent, seq: seq, epoch: epoch,
                                                            membershipSeq: membershipSeq, creatorID: creator, created: created,
                                                            modified: modified, plain: plain, sealed: sealed)
                        guard commit.entries.contains(hash) else {
                            throw StoreError(.integrityFailure, "record '\(name)' in zone '\(zone.id.name)' does not match its signed commit \(seq): it was changed in the file")
                        }
                        let values: [String: RecordValue]
                        do {
                            values = try PlainValuesCodec.decode(plain) { schema[$0]?.type }
                        } catch {
                            // Another process may have added fields since this session cached the schema.
                            schema = try self.schema(db, zoneRowID: zone.rowID, recordType: type, fresh: true)
                            values = try PlainValuesCodec.decode(plain) { schema[$0]?.type }
                        }
                        guard let sealed else { return (values, nil) }
                        let keyID: UInt32
                        do { keyID = try Envelope.keyID(of: sealed) } catch {
                            throw StoreError(.integrityFailure, "record '\(name)': its encrypted values are damaged", underlying: error as? CryptoError)
                        }
                        guard Int64(keyID) == epoch else {
                            throw StoreError(.integrityFailure, "record '\(name)': its encrypted values name key epoch \(keyID), the row says \(epoch)")
                        }
                        let key = try zoneKey(db, zone: zone, epoch: epoch)
                        let ad = Self.associatedData(storeID: store.storeID, zone: zone, name: name, type: type, epoch: epoch)
                        let plaintext: [UInt8]
                        do {
                            plaintext = try ad.withUnsafeBytes { try Envelope.open(sealed, using: key, authenticating: $0) }
                        } catch {
                            throw StoreError(.integrityFailure, "record '\(name)' in zone '\(zone.id.name)': its encrypted values fail authentication (changed or moved)",
                                             underlying: error as? CryptoError)
                        }
                        return (values, try SealedValuesCodec.decode(plaintext))
                    }
                }
            }
        }
        record.values = values
        if let sealedValues {
            if sealedValues.keys.contains(where: { schema[$0] == nil }) {
                schema = try self.schema(db, zoneRowID: zone.rowID, recordType: type, fresh: true)
            }
            for (key, value) in sealedValues {
                guard let spec = schema[key], spec.encrypted, Self.value(value, matches: spec.type) else {
                    throw StoreError(.integrityFailure, "record '\(name)': encrypted field '\(key)' does not match the schema")
                }
            }
            record.encryptedValues = sealedValues
        }
        record.keyEpoch = epoch
        record.changeTag = ChangeTag.make(seq)
        record.creatorID = creator
        record.modifierID = commit.authorID // signed, unlike the row's modifier column
        record.transactionAuthor = commit.authorLabel
        record.created = Date(timeIntervalSince1970: created)
        record.modified = Date(timeIntervalSince1970: commit.time)
        record.fetchedValues = record.values
        record.fetchedEncryptedValues = record.encryptedValues
        return record
    }

    static func withOptionalBytes<R>(_ data: Data?, _ body: (UnsafeRawBufferPointer?) throws -> R) rethrows -> R {
        guard let data else { return try body(nil) }
        return try data.withUnsafeBytes { try body($0) }
    }

    func fetch(zone zoneID: ZoneID, names: [String]) throws -> [String: Result<Record, StoreError>] {
        try store.read { db in
            let zone = try ZoneRow.fetch(db, zoneID)
            try self.checkCanRead(db, zone: zone)
            var out = [String: Result<Record, StoreError>](minimumCapacity: names.count)
            for name in names {
                do {
                    if let record = try self.fetchRow(db, zone: zone, name: name) {
                        out[name] = .success(record)
                    } else {
                        out[name] = .failure(StoreError(.unknownItem, "no record '\(name)' in zone '\(zoneID.name)'"))
                    }
                } catch let e as StoreError where e.code == .integrityFailure {
                    out[name] = .failure(e)
                }
            }
            return out
        }
    }

    // MARK: - Permissions

    /// The owner and accepted participants read; the key of the current epoch must be reachable.
    func checkCanRead(_ db: GRDB.Database, zone: ZoneRow) throws {
        let access = try requireRead(db, zone: zone)
        _ = try zoneKey(db, zone: zone, epoch: zone.currentEpoch, share: access.share)
    }

    /// The owner and read-write participants write.
    func checkCanWrite(_ db: GRDB.Database, zone: ZoneRow) throws {
        let access = try requireWrite(db, zone: zone)
        _ = try zoneKey(db, zone: zone, epoch: zone.currentEpoch, share: access.share)
    }
}

import CofferCrypto
import Foundation

extension RecordWriter {
    /// Re-seals every record still under an older key epoch with the current zone key, then
    /// deletes the key chain, so that older keys open nothing in this file any more. Owner only.
    ///
    /// Every record to re-seal is first verified as a read verifies it (its version in a signed
    /// log entry, its sealed values opening) and must be its name's latest version in the log
    /// (not an older signed version put back, nor one put back after its deletion): a record that
    /// fails stops the re-key, named, before anything is written, so a re-key never signs what
    /// it did not verify as current. The records are then
    /// re-sealed in rewrites of 400 (owner-signed log entries that keep each record's creator,
    /// modifier and times; each batch verifies its records again). Returns the number re-sealed.
    func rekeyRecords(zone zoneID: ZoneID, progress: (_ done: Int, _ total: Int) -> Void) async throws -> Int {
        // Each name's latest entry in the log: a row must be its name's latest version, not an
        // older signed one put back (which a re-key would otherwise sign again as current). The
        // rows are verified a page at a time, each page in a read of its own.
        var latest = [String: LatestVersion](), through: Int64 = 0, total = 0, after = ""
        while true {
            let known = (latest, through), start = after
            let page: (count: Int, last: String?, latest: [String: LatestVersion], through: Int64) = try await verifiedLogs.read { db in
                let zone = try self.accessControl.zoneRow(db, zoneID)
                let access = try self.accessControl.requireOwner(db, zone: zone, to: "re-key it")
                var latest = known.0
                let through = try self.verifiedLogs.latestVersions(db, zone: zone, log: access.log, after: known.1, into: &latest)
                var rows = [StoredRow]()
                try db.readRecordRows(zoneRowID: zone.rowID, sealedBefore: access.state.epoch, after: start, limit: 400) { rows.append($0) }
                for row in rows {
                    do {
                        _ = try self.reader.decodeOne(db, zone: zone, row: row)
                        try VerifiedLogs.checkLatest(name: row.name, seq: row.seq, zone: zone, latest: latest)
                    } catch let error as StoreError where error.code == .integrityFailure {
                        throw StoreError(.integrityFailure, "re-key stopped before writing anything: \(error.message)", underlying: error)
                    }
                }
                return (rows.count, rows.last?.name, latest, through)
            }
            (latest, through) = (page.latest, page.through)
            total += page.count
            guard let last = page.last, page.count == 400 else { break }
            after = last
        }
        var done = 0
        progress(0, total)
        while true {
            let known = (latest, through)
            let count: Int
            (count, latest, through) = try await store.write { db -> (Int, [String: LatestVersion], Int64) in
                let zone = try self.accessControl.zoneRow(db, zoneID)
                var log = try self.accessControl.requireOwner(db, zone: zone, to: "re-key it").log
                let current = log.state.epoch
                var latest = known.0
                let through = try self.verifiedLogs.latestVersions(db, zone: zone, log: log, after: known.1, into: &latest)
                var rows = [StoredRow]()
                try db.readRecordRows(zoneRowID: zone.rowID, sealedBefore: current, after: "", limit: 400) { rows.append($0) }
                if rows.isEmpty {
                    // Every record is at the current epoch: the chain of older keys can go.
                    try db.deleteOlderKeys(zoneRowID: zone.rowID, before: current)
                    let rowID = zone.rowID
                    db.afterTransaction(onCommit: { [self] in
                        self.keyRing.keepOnly(epoch: current, zoneRowID: rowID)
                        self.rowContexts.forget(zoneRowID: rowID) // they hold the dropped keys too
                    }, onRollback: {})
                    return (0, latest, through)
                }
                var records = [RewrittenRecord]()
                for stored in rows {
                    let record: Record
                    do {
                        record = try self.reader.decodeOne(db, zone: zone, row: stored)
                        try VerifiedLogs.checkLatest(name: stored.name, seq: stored.seq, zone: zone, latest: latest)
                    } catch let error as StoreError where error.code == .integrityFailure {
                        throw StoreError(.integrityFailure, "re-key stopped: \(error.message)", underlying: error)
                    }
                    records.append(RewrittenRecord(verified: record, stored: stored))
                }
                try self.rewrite(db, zone: zone, log: &log, records: records, label: "coffer.rekey")
                try db.touchZone(zoneRowID: zone.rowID)
                return (rows.count, latest, through)
            }
            if count == 0 { break }
            done += count
            progress(min(done, total), max(total, done))
        }
        store.logger.info("zone re-keyed", metadata: ["zone": "\(zoneID.name)", "records": "\(done)"])
        return done
    }

    /// Writes verified records again, sealed under the zone's current key, as one owner-signed
    /// rewrite entry at the head of `log` (each row updated in place, keeping its creator,
    /// modifier and times).
    func rewrite(_ db: any StorageTransaction, zone: ZoneRow, log: inout ZoneLog, records: [RewrittenRecord], label: String) throws {
        let state = log.state
        let seq = state.headSeq + 1
        var commit = CommitBuilder(zoneUID: zone.uid, seq: seq)
        try writeVersions(db, zone: zone, records: records, seq: seq, epoch: state.epoch, ownerSeq: state.ownerSeq,
                          key: try keyRing.zoneKey(db, zone: zone, epoch: state.epoch, state: state), into: &commit)
        try commit.write(db, logs: verifiedLogs, zone: zone, log: &log, kind: .rewrite, label: label, time: Date().timeIntervalSince1970)
    }

    /// Seals and stores each record as the version of entry `seq` (updating its row), adding its
    /// version hash to `commit`.
    func writeVersions(_ db: any StorageTransaction, zone: ZoneRow, records: [RewrittenRecord], seq: Int64, epoch: Int64, ownerSeq: Int64,
                       key: SymmetricKey, into commit: inout CommitBuilder) throws {
        for r in records {
            let stamp = VersionStamp(name: r.name, type: r.type, parent: r.parent, seq: seq, epoch: epoch, membershipSeq: ownerSeq,
                                     creatorID: r.creatorID, modifierID: r.modifierID, created: r.created, modified: r.modified)
            try storeVersion(db, zone: zone, stamp: stamp, plain: r.plain, plainTypes: r.plainTypes, sealedPlaintext: r.sealedPlaintext,
                             key: key, replacing: true, into: &commit)
        }
    }

    /// Seals a version of a record under `key` and stores it, as a new row or (`replacing`) in
    /// place of the stored row of its name, adding its version hash to `commit`. Every row the
    /// engine writes outside a save (rewrites, upgrades, moves) goes through here; a save's rows
    /// go through the storage's ``RecordRowWriter`` in `modify`.
    func storeVersion(_ db: any StorageTransaction, zone: ZoneRow, stamp: VersionStamp, plain: [UInt8], plainTypes: [UInt8],
                      sealedPlaintext: [UInt8]?, key: SymmetricKey, replacing: Bool, into commit: inout CommitBuilder) throws {
        let version = RecordSealer.seal(stamp, plain: plain, plainTypes: plainTypes, sealedPlaintext: sealedPlaintext, key: key, zone: zone)
        if replacing { try db.replaceRecord(version, zoneRowID: zone.rowID) } else { try db.insertRecord(version, zoneRowID: zone.rowID) }
        commit.addRecord(version.digest, name: stamp.name)
    }

}

/// A verified record version to write again (re-key, upgrade): its plain values' JSON as
/// stored, its sealed values to seal again, and the creator, modifier and times it keeps.
struct RewrittenRecord: Sendable {
    let name: String
    let type: String
    let parent: String?
    let plain: [UInt8]
    /// The type code of each plain field, in key order (``PlainValuesCodec/typeCodes(_:)``).
    let plainTypes: [UInt8]
    let sealedPlaintext: [UInt8]?
    let creatorID: String
    let modifierID: String
    let created: Double
    let modified: Double

    /// From a record a read verified and the row it came from (whose plain bytes it keeps).
    init(verified record: Record, stored: StoredRow) {
        name = record.name
        type = record.recordType
        parent = record.parent
        plain = stored.withBytes { Array($0[0..<stored.plainCount]) }
        plainTypes = PlainValuesCodec.typeCodes(record.values)
        sealedPlaintext = record.encryptedValues.isEmpty ? nil : SealedValuesCodec.encode(record.encryptedValues)
        creatorID = stored.creatorID
        modifierID = stored.modifierID
        created = stored.created
        modified = stored.modified
    }

    init(name: String, type: String, parent: String?, plain: [UInt8], plainTypes: [UInt8], sealedPlaintext: [UInt8]?, creatorID: String,
         modifierID: String, created: Double, modified: Double) {
        self.name = name
        self.type = type
        self.parent = parent
        self.plain = plain
        self.plainTypes = plainTypes
        self.sealedPlaintext = sealedPlaintext
        self.creatorID = creatorID
        self.modifierID = modifierID
        self.created = created
        self.modified = modified
    }
}

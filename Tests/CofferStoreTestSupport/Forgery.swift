import CofferCrypto
import CofferVault
import Foundation
import GRDB
import Testing
@testable import CofferStore

// Records and log entries written behind the library's back, signed with what a user holds:
// what a participant who bypasses the library, or someone who can write the store, can do.

extension TestStore {
    /// Writes, with SQL and what a participant holds (their zone key and signing key), a record
    /// `name` and a commit signed by `signer` at the head of the zone's log, as someone bypassing
    /// the library would. The commit claims the owner's entry `ownerSeq` and key `epoch` (the
    /// zone's current ones by default). Returns the commit's sequence.
    @discardableResult
    package func forge(in zone: ZoneID, signer: Session, name: String, title: String, body: String? = "forged body",
               ownerSeq: Int64? = nil, epoch keyEpoch: Int64? = nil, label: String? = nil,
               entry adjust: @escaping @Sendable (inout LogEntry) -> Void = { _ in }) async throws -> Int64 {
        if let postgres { // through the storage calls (see forgeCommit), on the database itself (around a server)
            let target = backend.isServer ? try await Self.open(postgres) : store
            if backend.isServer { others.withLock { $0.append(target) } }
            return try await target.write { db in
                try forgeCommit(db, zone: zone, signer: signer, name: name, title: title, body: body, ownerSeq: ownerSeq, epoch: keyEpoch, label: label,
                                entry: adjust)
            }
        }
        return try sqlite { db in try forgeCommit(SQLiteTransaction(db), zone: zone, signer: signer, name: name, title: title, body: body, ownerSeq: ownerSeq,
                                               epoch: keyEpoch, label: label, entry: adjust) }
    }
}

/// Writes a record row and a commit entry signed by `signer` at the head of the zone's log, in
/// `db` (a connection of the attacker's own), with what `signer` holds: see ``TestStore/forge(in:signer:name:title:body:ownerSeq:epoch:label:entry:)``.
@discardableResult
package func forgeCommit(_ db: any StorageTransaction, zone: ZoneID, signer: Session, name: String, title: String, body: String?,
                 ownerSeq: Int64? = nil, epoch keyEpoch: Int64? = nil, label: String? = nil, key given: SymmetricKey? = nil,
                 entry adjust: (inout LogEntry) -> Void = { _ in }) throws -> Int64 {
    let row = try #require(try db.zoneRow(zone))
    let state = try signer.verifiedLogs.walkLog(db, zone: row, signaturesAfter: Int64.max)
    let head = try db.logHead(zoneRowID: row.rowID)!
    let seq = head.seq + 1
    let membership = ownerSeq ?? state.state.ownerSeq
    let epoch = keyEpoch ?? state.state.epoch
    let now = Date().timeIntervalSince1970
    let plain = Array(PlainValuesCodec.encode(["title": .string(title)]).utf8)
    var sealed: [UInt8]?
    if let body {
        let key = try given ?? signer.keyRing.zoneKey(db, zone: row, epoch: epoch, state: state.state)
        let ad = RecordSealer.associatedData(zone: row, name: name, type: "Note", epoch: epoch)
        sealed = Envelope.seal(SealedValuesCodec.encode(["body": .string(body)]), using: key,
                               keyID: UInt32(epoch), authenticating: ad).bytes
    }
    let types = PlainValuesCodec.typeCodes(["title": .string(title)])
    let hash = plain.withUnsafeBytes { p in
        types.withUnsafeBytes { t in
            RecordReader.withOptionalBytes(sealed) { s in
                RecordSealer.versionHash(zoneUID: row.uid, name: name, type: "Note", parent: nil, seq: seq, epoch: epoch,
                                         membershipSeq: membership, creatorID: signer.userID, modifierID: signer.userID,
                                         created: now, modified: now, plain: p, plainTypes: t, sealed: s).bytes
            }
        }
    }
    if let sqlite = (db as? SQLiteTransaction)?.db {
        try sqlite.execute(sql: """
            INSERT OR REPLACE INTO record (zone_id, name, type, parent, plain, sealed, epoch, seq, membership_seq, creator_id, modifier_id, created_at, modified_at)
            VALUES (?, ?, 'Note', NULL, ?, ?, ?, ?, ?, ?, ?, ?, ?)
            """, arguments: [row.rowID, name, String(decoding: plain, as: UTF8.self), sealed.map { Data($0) }, epoch, seq, membership,
                             signer.userID, signer.userID, now, now])
    } else {
        // Through the storage calls, whose writes check nothing the engine checks (a backend's
        // writer only stores what it is given).
        let version = SealedVersion(stamp: VersionStamp(name: name, type: "Note", parent: nil, seq: seq, epoch: epoch, membershipSeq: membership,
                                                        creatorID: signer.userID, modifierID: signer.userID, created: now, modified: now),
                                    plain: plain, plainTypes: types, sealed: sealed, digest: Digest32(hash))
        if try db.recordExists(zoneRowID: row.rowID, name: name) {
            try db.replaceRecord(version, zoneRowID: row.rowID)
        } else {
            try db.insertRecord(version, zoneRowID: row.rowID)
        }
    }
    var commit = CommitBuilder(zoneUID: row.uid, seq: seq)
    commit.addRecord(hash, name: name)
    let payload = RecordsPayload(epoch: epoch, ownerSeq: membership, label: label, records: commit.summary)
    try forgeEntry(db, zone: zone, signer: signer, kind: .commit, payload: payload.encoded, entries: commit.entries, names: commit.names, time: now,
                   entry: adjust)
    return seq
}

/// Appends a log entry signed by `signer` (any kind, any payload) at the head of the zone's log,
/// or at `seq` with `prev`, with a raw SQL connection: the library's rules are not applied.
/// `adjust` may change the entry's format fields before it is signed.
@discardableResult
package func forgeEntry(_ db: any StorageTransaction, zone: ZoneID, signer: Session, kind: LogEntry.Kind, payload: [UInt8], entries: [UInt8]? = nil,
                names: [UInt8]? = nil, seq given: Int64? = nil, prev: Digest32? = nil, time: Double = Date().timeIntervalSince1970,
                entry adjust: (inout LogEntry) -> Void = { _ in }) throws -> Int64 {
    let row = try #require(try db.zoneRow(zone))
    let head = try db.logHead(zoneRowID: row.rowID)
    let seq = given ?? (head?.seq ?? 0) + 1
    var entry = LogEntry(zoneUID: row.uid, seq: seq, prev: prev ?? head?.hash ?? .zero, kind: kind, authorID: signer.userID, time: time,
                         payload: payload)
    adjust(&entry)
    let body = entry.body
    let signature = signer.vault.signingKey.signature(for: body)
    if let sqlite = (db as? SQLiteTransaction)?.db { // an entry put in the place of one already there (SQLite tests rewrite history)
        try sqlite.execute(sql: "DELETE FROM zone_log WHERE zone_id = ? AND seq = ?", arguments: [row.rowID, seq])
    }
    try db.appendLogEntry(zoneRowID: row.rowID, entry: entry, body: body, signature: signature,
                            hash: LogEntry.hash(body: body, signature: signature), entries: entries, names: names)
    return seq
}

/// Rewrites a stored log entry's body with SQL (its signature and hash columns kept), as
/// someone editing the file would: `change` gets the decoded entry and returns the new one.
package func editEntry(_ db: Database, zoneRowID: Int64, seq: Int64, _ change: (LogEntry) -> LogEntry) throws {
    let body = try #require(try Data.fetchOne(db, sql: "SELECT body FROM zone_log WHERE zone_id = ? AND seq = ?", arguments: [zoneRowID, seq]))
    let entry = try #require(LogEntry.decode(Array(body)))
    try db.execute(sql: "UPDATE zone_log SET body = ? WHERE zone_id = ? AND seq = ?", arguments: [Data(change(entry).body), zoneRowID, seq])
    #expect(db.changesCount == 1)
}

/// Sets the transaction author label of a stored commit (see ``editEntry``).
package func editEntryLabel(_ db: Database, zoneRowID: Int64, seq: Int64, to label: String?) throws {
    try editEntry(db, zoneRowID: zoneRowID, seq: seq) { entry in
        let payload = RecordsPayload.decode(entry.payload)!
        return LogEntry(zoneUID: entry.zoneUID, seq: entry.seq, prev: entry.prev, kind: entry.kind, authorID: entry.authorID, time: entry.time,
                        payload: RecordsPayload(epoch: payload.epoch, ownerSeq: payload.ownerSeq, label: label, records: payload.records).encoded)
    }
}

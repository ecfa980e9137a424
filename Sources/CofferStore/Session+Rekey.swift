import CofferCrypto
import Foundation
import GRDB

extension Session {
    /// Re-seals every record still under an older key epoch with the current zone key, in
    /// transactions of 400 records, then deletes the key chain, so that older keys open nothing
    /// in this file any more. Owner only. Returns the number of records re-sealed.
    func rekeyRecords(zone zoneID: ZoneID, progress: (_ done: Int, _ total: Int) -> Void) throws -> Int {
        let total: Int = try store.read { db in
            let zone = try ZoneRow.fetch(db, zoneID)
            _ = try self.requireOwner(db, zone: zone, to: "re-key it")
            return try Int.fetchOne(db, sql: "SELECT count(*) FROM record WHERE zone_id = ? AND sealed IS NOT NULL AND epoch < ?",
                                    arguments: [zone.rowID, zone.currentEpoch]) ?? 0
        }
        var done = 0
        progress(0, total)
        while true {
            let count: Int = try store.write { db in
                let zone = try ZoneRow.fetch(db, zoneID)
                let access = try self.requireOwner(db, zone: zone, to: "re-key it")
                let current = zone.currentEpoch
                let key = try self.zoneKey(db, zone: zone, epoch: current, share: access.share)
                let rows = try Row.fetchAll(db, sql: """
                    SELECT id, name, type, sealed, epoch, parent, plain, creator_id, created_at FROM record
                    WHERE zone_id = ? AND sealed IS NOT NULL AND epoch < ? LIMIT 400
                    """, arguments: [zone.rowID, current])
                // A re-seal is a rewrite: a new commit, signed by the owner, with new change tags.
                let seq = zone.sequence + 1
                let now = Date().timeIntervalSince1970
                var commit = CommitBuilder(zone: zone, seq: seq, membershipSeq: zone.membershipSeq, epoch: current, authorID: self.userID,
                                           authorLabel: "coffer.rekey", time: now)
                if !rows.isEmpty {
                    try db.execute(sql: "UPDATE zone SET sequence = ? WHERE id = ?", arguments: [seq, zone.rowID])
                    try Self.touch(db, zoneRowID: zone.rowID)
                }
                for row in rows {
                    let name: String = row["name"], type: String = row["type"], epoch: Int64 = row["epoch"]
                    let oldKey = try self.zoneKey(db, zone: zone, epoch: epoch)
                    let sealed: Data = row["sealed"]
                    let plaintext: [UInt8]
                    do {
                        plaintext = try Envelope(bytes: Array(sealed)).open(
                            using: oldKey, authenticating: Self.associatedData(storeID: self.store.storeID, zone: zone, name: name, type: type, epoch: epoch))
                    } catch {
                        throw StoreError(.integrityFailure, "record '\(name)': its encrypted values fail authentication; re-key stopped",
                                         underlying: error as? CryptoError)
                    }
                    let resealed = Envelope.seal(plaintext, using: key, keyID: UInt32(truncatingIfNeeded: current),
                                                 authenticating: Self.associatedData(storeID: self.store.storeID, zone: zone, name: name, type: type, epoch: current))
                    try db.execute(sql: "UPDATE record SET sealed = ?, epoch = ?, seq = ?, membership_seq = ?, modifier_id = ?, modified_at = ? WHERE id = ?",
                                   arguments: [Data(resealed.bytes), current, seq, zone.membershipSeq, self.userID, now, row["id"] as Int64])
                    let plain: String = row["plain"]
                    commit.addRecord(Self.hash(zone: zone, name: name, type: type, parent: row["parent"], seq: seq, epoch: current,
                                               membershipSeq: zone.membershipSeq, creatorID: row["creator_id"], created: row["created_at"],
                                               modified: now, plain: plain, sealed: Data(resealed.bytes)), name: name)
                }
                if !rows.isEmpty { try commit.write(db, signer: self.vault.signingKey) }
                if rows.isEmpty {
                    // Every record is at the current epoch: the chain of older keys can go.
                    try db.execute(sql: "DELETE FROM zone_key_chain WHERE zone_id = ?", arguments: [zone.rowID])
                    try db.execute(sql: "DELETE FROM zone_key WHERE zone_id = ? AND epoch < ?", arguments: [zone.rowID, current])
                    let rowID = zone.rowID
                    db.afterNextTransaction(onCommit: { [self] _ in
                        self.zoneKeys.withLock { cache in cache[rowID] = cache[rowID]?.filter { $0.key == current } }
                        self.forgetRowContexts(zoneRowID: rowID) // they hold the dropped keys too
                    })
                }
                return rows.count
            }
            if count == 0 { break }
            done += count
            progress(min(done, total), max(total, done))
        }
        store.logger.info("zone re-keyed", metadata: ["zone": "\(zoneID.name)", "records": "\(done)"])
        return done
    }

    /// Moves records and their descendants (by parent reference) from one zone of this user
    /// into another, creating it if needed, in one transaction: as Core Data's `share(_:to:)`
    /// does before sharing. Returns the names moved.
    func moveRecords(named names: [String], from sourceID: ZoneID, to targetName: String) throws -> (ZoneID, [String]) {
        for name in names { try Names.validateRecord(name) }
        let me = userID
        var created: Zone?
        if try store.read({ db in try Bool.fetchOne(db, sql: "SELECT 1 FROM zone WHERE owner_id = ? AND name = ?", arguments: [me, targetName]) }) != true {
            created = try createZone(named: targetName)
        }
        let targetID = ZoneID(name: targetName, ownerID: me)
        do {
            let moved: [String] = try store.write { db in
                let source = try ZoneRow.fetch(db, sourceID)
                let target = try ZoneRow.fetch(db, targetID)
                _ = try self.requireOwner(db, zone: source, to: "move its records")
                let targetAccess = try self.requireOwner(db, zone: target, to: "receive records")
                guard source.rowID != target.rowID else { throw StoreError(.invalidArguments, "the records are already in zone '\(targetName)'") }
                // The records and, transitively, their children.
                var all = [String](), queue = names, seen = Set<String>()
                while let name = queue.popLast() {
                    guard seen.insert(name).inserted else { continue }
                    all.append(name)
                    queue += try String.fetchAll(db, sql: "SELECT name FROM record WHERE zone_id = ? AND parent = ?", arguments: [source.rowID, name])
                }
                let taken = try all.filter { name in
                    try Bool.fetchOne(db, sql: "SELECT 1 FROM record WHERE zone_id = ? AND name = ?", arguments: [target.rowID, name]) == true
                }
                guard taken.isEmpty else {
                    throw StoreError(.alreadyExists, "zone '\(targetName)' already has a record named \(taken.sorted().prefix(5).map { "'\($0)'" }.joined(separator: ", ")); nothing was moved")
                }
                var records = [Record]()
                for name in all {
                    guard let record = try self.fetchRow(db, zone: source, name: name) else {
                        throw StoreError(.unknownItem, "no record '\(name)' in zone '\(sourceID.name)'")
                    }
                    records.append(record)
                }
                let key = try self.zoneKey(db, zone: target, epoch: target.currentEpoch, share: targetAccess.share)
                let seq = target.sequence + 1, sourceSeq = source.sequence + 1
                let now = Date().timeIntervalSince1970
                try db.execute(sql: "UPDATE zone SET sequence = ? WHERE id = ?", arguments: [seq, target.rowID])
                try db.execute(sql: "UPDATE zone SET sequence = ? WHERE id = ?", arguments: [sourceSeq, source.rowID])
                var added = CommitBuilder(zone: target, seq: seq, membershipSeq: target.membershipSeq, epoch: target.currentEpoch,
                                          authorID: me, authorLabel: "coffer.move", time: now)
                var removed = CommitBuilder(zone: source, seq: sourceSeq, membershipSeq: source.membershipSeq, epoch: source.currentEpoch,
                                            authorID: me, authorLabel: "coffer.move", time: now)
                for old in records {
                    let record = Record(type: old.recordType, name: old.name, zone: targetID, parent: old.parent, values: old.values,
                                        encryptedValues: old.encryptedValues)
                    let prepared = try Self.prepare(record, zone: targetID)
                    try self.applySchema(db, zoneRowID: target.rowID, record: record)
                    let sealed = prepared.sealedPlaintext.map {
                        Data(Envelope.seal($0, using: key, keyID: UInt32(truncatingIfNeeded: target.currentEpoch),
                                           authenticating: Self.associatedData(storeID: self.store.storeID, zone: target, name: record.name,
                                                                               type: record.recordType, epoch: target.currentEpoch)).bytes)
                    }
                    let creator = old.creatorID ?? me, created = old.created?.timeIntervalSince1970 ?? now
                    try db.execute(sql: """
                        INSERT INTO record (zone_id, name, type, parent, plain, sealed, epoch, seq, membership_seq, creator_id, modifier_id, created_at, modified_at)
                        VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
                        """, arguments: [target.rowID, record.name, record.recordType, record.parent, prepared.plainJSON, sealed,
                                         target.currentEpoch, seq, target.membershipSeq, creator, me, created, now])
                    added.addRecord(Self.hash(zone: target, name: record.name, type: record.recordType, parent: record.parent, seq: seq,
                                              epoch: target.currentEpoch, membershipSeq: target.membershipSeq, creatorID: creator, created: created,
                                              modified: now, plain: prepared.plainJSON, sealed: sealed), name: record.name)
                    try db.execute(sql: "DELETE FROM record WHERE zone_id = ? AND name = ?", arguments: [source.rowID, record.name])
                    removed.addDeletion(name: record.name)
                    try db.execute(sql: "DELETE FROM record_tombstone WHERE zone_id = ? AND name = ?", arguments: [target.rowID, record.name])
                    try db.execute(sql: """
                        INSERT OR REPLACE INTO record_tombstone (zone_id, name, seq, author_id, author_label, deleted_at) VALUES (?, ?, ?, ?, ?, ?)
                        """, arguments: [source.rowID, record.name, sourceSeq, me, "coffer.move", now])
                }
                try added.write(db, signer: self.vault.signingKey)
                try removed.write(db, signer: self.vault.signingKey)
                try Self.touch(db, zoneRowID: target.rowID)
                try Self.touch(db, zoneRowID: source.rowID)
                return all
            }
            return (targetID, moved)
        } catch {
            if created != nil { try? deleteZone(targetID) } // nothing moved: do not leave an empty zone behind
            throw error
        }
    }

    /// Zones shared with this user that they accepted and may read now.
    func sharedZones() throws -> [Zone] { try sharedZoneAccess().zones }

    /// ``sharedZones()``, and the accepted zones refused because their share or membership
    /// fails verification (`.integrityFailure`): left out of the list, reported by `audit`.
    func sharedZoneAccess() throws -> (zones: [Zone], refused: [(ZoneID, StoreError)]) {
        let me = userID
        return try store.read { db in
            var refused = [(ZoneID, StoreError)]()
            let rows = try Row.fetchAll(db, sql: """
                SELECT z.*, (SELECT count(*) FROM record r WHERE r.zone_id = z.id) AS record_count
                FROM zone z JOIN share s ON s.zone_id = z.id
                WHERE z.owner_id != ? AND (EXISTS (SELECT 1 FROM share_acceptance a WHERE a.zone_id = z.id AND a.user_id = ? AND a.state = 1))
                ORDER BY z.owner_id, z.name
                """, arguments: [me, me])
            let zones = try rows.compactMap { row -> Zone? in
                let zone = try ZoneRow(row: row)
                do { _ = try self.access(db, zone: zone) } catch let error as StoreError where error.code == .integrityFailure {
                    refused.append((zone.id, error))
                    return nil
                } catch {
                    return nil // removed, left, link turned off: no longer this user's to read
                }
                return Zone(id: zone.id, created: zone.created, keyEpoch: zone.currentEpoch, sequence: zone.sequence, recordCount: row["record_count"])
            }
            return (zones, refused)
        }
    }
}

extension Session {
    /// A record version's hash from its stored forms (see ``CommitBuilder/recordHash``).
    static func hash(zone: ZoneRow, name: String, type: String, parent: String?, seq: Int64, epoch: Int64, membershipSeq: Int64,
                     creatorID: String, created: Double, modified: Double, plain: String, sealed: Data?) -> [UInt8] {
        var plain = plain
        return plain.withUTF8 { p in
            withOptionalBytes(sealed) { s in
                CommitBuilder.recordHash(zoneUID: zone.uid, name: name, type: type, parent: parent, seq: seq, epoch: epoch,
                                         membershipSeq: membershipSeq, creatorID: creatorID, created: created, modified: modified,
                                         plain: UnsafeRawBufferPointer(p), sealed: s)
            }
        }
    }
}

import CofferCrypto
import Foundation

extension ShareService {
    /// Moves records and their descendants (by parent reference) from one zone of this user
    /// into another, creating it if needed, in one transaction: as Core Data's `share(_:to:)`
    /// does before sharing. Each record is read verified from the source, written to the target
    /// in a commit that keeps its creator and creation time, and deleted from the source in a
    /// commit. Returns the names moved.
    func moveRecords(named names: [String], from sourceID: ZoneID, to targetName: String) async throws -> (ZoneID, [String]) {
        for name in names { try Names.validateRecord(name) }
        let me = userID
        var created: Zone?
        if try await verifiedLogs.read({ db in try db.zoneRow(ZoneID(name: targetName, ownerID: me)) }) == nil {
            created = try await zoneDirectory.createZone(named: targetName)
        }
        let targetID = ZoneID(name: targetName, ownerID: me)
        do {
            let moved: [String] = try await store.write { db in
                let source = try self.accessControl.zoneRow(db, sourceID)
                let target = try self.accessControl.zoneRow(db, targetID)
                var sourceLog = try self.accessControl.requireOwner(db, zone: source, to: "move its records").log
                var targetLog = try self.accessControl.requireOwner(db, zone: target, to: "receive records").log
                guard source.rowID != target.rowID else { throw StoreError(.invalidArguments, "the records are already in zone '\(targetName)'") }
                // The records and, transitively, their children, a generation at a time (each
                // generation's reads in one round where the backend fetches).
                var all = [String](), generation = names, seen = Set<String>()
                while !generation.isEmpty {
                    let fresh = generation.filter { seen.insert($0).inserted }
                    all += fresh
                    generation = try db.eachGathering(fresh) { try db.children(zoneRowID: source.rowID, of: $0) }.flatMap { $0 }
                }
                let taken = try db.eachGathering(all) { try db.recordExists(zoneRowID: target.rowID, name: $0) ? $0 : nil }
                guard taken.isEmpty else {
                    throw StoreError(.alreadyExists, "zone '\(targetName)' already has a record named \(taken.sorted().prefix(5).map { "'\($0)'" }.joined(separator: ", ")); nothing was moved")
                }
                let records: [Record] = try db.eachGathering(all) { name in
                    guard let record = try self.reader.fetchRow(db, zone: source, name: name) else {
                        throw StoreError(.unknownItem, "no record '\(name)' in zone '\(sourceID.name)'")
                    }
                    return record
                }
                let state = targetLog.state
                let epoch = state.epoch
                let key = try self.keyRing.zoneKey(db, zone: target, epoch: epoch, state: state)
                let seq = state.headSeq + 1, sourceSeq = sourceLog.state.headSeq + 1
                let now = Date().timeIntervalSince1970
                var added = CommitBuilder(zoneUID: target.uid, seq: seq)
                var removed = CommitBuilder(zoneUID: source.uid, seq: sourceSeq)
                for old in records {
                    let record = Record(type: old.recordType, name: old.name, zone: targetID, parent: old.parent, values: old.values,
                                        encryptedValues: old.encryptedValues)
                    let prepared = try RecordWriter.prepare(record, zone: targetID)
                    try self.schemaRegistry.applySchema(db, zoneRowID: target.rowID, record: record)
                    // A new version in the target that keeps the record's creator and creation time.
                    let stamp = VersionStamp(name: record.name, type: record.recordType, parent: record.parent, seq: seq, epoch: epoch,
                                             membershipSeq: state.ownerSeq, creatorID: old.creatorID ?? me, modifierID: me,
                                             created: old.created?.timeIntervalSince1970 ?? now, modified: now)
                    try self.writer.storeVersion(db, zone: target, stamp: stamp, plain: prepared.plain, plainTypes: prepared.plainTypes,
                                                         sealedPlaintext: prepared.sealedPlaintext, key: key, replacing: false, into: &added)
                    _ = try db.deleteRecord(zoneRowID: source.rowID, name: record.name, expectedSeq: nil)
                    removed.addDeletion(name: record.name)
                    try db.removeTombstone(zoneRowID: target.rowID, name: record.name)
                    try db.addTombstone(zoneRowID: source.rowID, name: record.name, seq: sourceSeq, authorID: me, label: "coffer.move", time: now)
                }
                try added.write(db, logs: verifiedLogs, zone: target, log: &targetLog, kind: .commit, label: "coffer.move", time: now)
                try removed.write(db, logs: verifiedLogs, zone: source, log: &sourceLog, kind: .commit, label: "coffer.move", time: now)
                try db.touchZone(zoneRowID: target.rowID)
                try db.touchZone(zoneRowID: source.rowID)
                return all
            }
            return (targetID, moved)
        } catch {
            if created != nil { try? await zoneDirectory.deleteZone(targetID) } // nothing moved: do not leave an empty zone behind
            throw error
        }
    }
}

import CofferCrypto
import CofferVault
import Foundation

extension ZoneDirectory {
    /// The uids of `zones`, rows of the store: those this user owns or is listed in from one
    /// read of their list (a read a zone costs a round of reads through a server or PostgreSQL),
    /// any other one by one.
    func zoneUIDs(_ zones: [ZoneID]) async throws -> Set<[UInt8]> {
        let wanted = Set(zones)
        return try await verifiedLogs.read { db in
            var found = [ZoneID: [UInt8]]()
            for row in try db.zoneRows(ownedByOrListing: self.userID) where wanted.contains(row.id) { found[row.id] = row.uid }
            for id in wanted where found[id] == nil {
                if let row = try db.zoneRow(id) { found[id] = row.uid }
            }
            return Set(found.values)
        }
    }

    /// The zones of this user's marks (those a deletion mark does not close) that `listed`
    /// leaves out. Each is a `.log` finding, unless the store holds the zone and its log, verified
    /// from its genesis, extends the mark and says this user may not read it now (removed, left,
    /// invited only, the share stopped), or the store kept the zone's genesis and its owner's
    /// signed deletion at or past the mark (``VerifiedLogs/verifiedDeletion(_:_:mark:)``): the mark is then
    /// closed (made a deletion mark), and later audits skip it. The store's lists are not signed,
    /// and a zone left out of them otherwise is hidden or lost (a rollback to before it existed,
    /// an interrupted restore).
    /// Only the marks of zones this user verified in this store are checked (or whose store the
    /// marks file does not say: it was written by an earlier build): a vault used with several
    /// stores holds marks of zones that another store keeps.
    /// - Parameter skipping: uids already reported.
    /// - Returns: how many marks were checked, and the findings.
    func unlistedMarkedZones(listed: [ZoneID], skipping: Set<[UInt8]> = []) async throws -> (checked: Int, findings: [AuditFinding]) {
        let open: [ZoneMark]
        do {
            let here = store.storeID
            open = try vault.marks.all().filter { mark in
                guard !mark.isDeletion else { return false }
                let stores = try vault.marks.stores(ofZone: mark.zoneUID)
                return stores.isEmpty || stores.contains(here)
            }.sorted { $0.zoneUID.lexicographicallyPrecedes($1.zoneUID) }
        } catch let error as VaultError {
            throw StoreError(.integrityFailure, "your marks file cannot be read: \(error.message)", underlying: error)
        }
        guard !open.isEmpty else { return (0, []) }
        let shown = try await zoneUIDs(listed)
        var findings = [AuditFinding]()
        for mark in open where !shown.contains(mark.zoneUID) && !skipping.contains(mark.zoneUID) {
            let outcome: Unlisted
            do { outcome = try await verifiedLogs.read { db in try self.checkUnlisted(db, mark) } } catch let error as StoreError {
                // A store (a server) that refuses to show it.
                findings.append(AuditFinding(kind: .log, zone: nil, subject: "zone \(Hex.encode(mark.zoneUID))",
                                             message: "\(verifiedLogs.describeZone(uid: mark.zoneUID, ownerID: mark.ownerID)) cannot be read (you verified its log up to entry \(mark.seq)): \(error.message)",
                                             zoneOwnerID: mark.ownerID))
                continue
            }
            switch outcome {
            case .unreadable: break
            case .finding(let finding): findings.append(finding)
            case .deleted: try closeMark(mark)
            }
        }
        return (open.count, findings)
    }

    /// What ``checkUnlisted(_:_:)`` found of a marked zone the store does not list.
    enum Unlisted: Sendable {
        /// Its verified log says this user may not read it now.
        case unreadable
        /// Its owner deleted it after the mark, as the store's record of the deletion proves.
        case deleted
        case finding(AuditFinding)
    }

    /// One marked zone the store does not list for this user.
    func checkUnlisted(_ db: any StorageTransaction, _ mark: ZoneMark) throws -> Unlisted {
        let uid = Hex.encode(mark.zoneUID)
        func finding(_ zone: ZoneID?, _ message: String) -> Unlisted {
            .finding(AuditFinding(kind: .log, zone: zone, subject: zone == nil ? "zone \(uid)" : "log", message: message, zoneOwnerID: mark.ownerID))
        }
        let seen = "you verified its log up to entry \(mark.seq)"
        let named = verifiedLogs.describeZone(uid: mark.zoneUID, ownerID: mark.ownerID)
        // Deleted by its owner, if the store kept the genesis and the owner's signed deletion
        // (a server does not show a participant the owner's list of zones).
        do {
            if let kept = try db.deletedZone(uid: mark.zoneUID) {
                _ = try verifiedLogs.verifiedDeletion(db, kept, mark: mark)
                return .deleted
            }
        } catch let error as StoreError {
            return finding(nil, error.message)
        }
        let found: ZoneRow?
        do { found = try zoneRow(db, uid: mark.zoneUID, ownerID: mark.ownerID) } catch let error as StoreError {
            return finding(nil, "\(named) cannot be read (\(seen)): \(error.message)")
        }
        guard let zone = found else {
            return finding(nil, "\(named) is not in this store (\(seen)), and the store has no record of its owner deleting it: "
                           + "it was hidden from you or lost (a rollback, an interrupted restore)")
        }
        guard zone.id.ownerID == mark.ownerID else {
            return finding(zone.id, "zone '\(zone.id.name)' is owned by \(verifiedLogs.describeUser(zone.id.ownerID)) in this store, but you saw it owned by \(verifiedLogs.describeUser(mark.ownerID)): the store was changed")
        }
        do {
            let log = try verifiedLogs.walkLog(db, zone: zone, signaturesAfter: 0)
            if let tail = log.refusedTail { return finding(zone.id, tail.error.message) }
            _ = try verifiedLogs.extendsMark(db, log, zone: zone, mark: mark)
            guard AccessControl.mayRead(log.state, userID) else { return .unreadable } // the signed log says why
            return finding(zone.id, "\(verifiedLogs.describeZone(zone)) is not in the store's list of your zones, yet its log says you may read it (\(seen)): it was hidden from you")
        } catch let error as StoreError {
            return finding(zone.id, error.message)
        }
    }

    /// Closes the mark of a zone whose owner's deletion this user verified: it becomes a deletion
    /// mark (see ``ZoneMark/deletion(zoneUID:ownerID:)``), which later audits skip and which
    /// refuses a copy of the zone put back.
    func closeMark(_ mark: ZoneMark) throws {
        do { try vault.marks.reset(zone: mark.zoneUID, to: ZoneMark.deletion(zoneUID: mark.zoneUID, ownerID: mark.ownerID)) } catch {
            throw StoreError(.internalError, "your marks file could not be written: \(error)", underlying: error as? VaultError)
        }
        store.logger.info("zone mark closed by its owner's deletion", metadata: ["zone": "\(Hex.encode(mark.zoneUID))"])
    }

    /// The row of the zone `uid` owned by `ownerID`, among the zones this user owns or is listed
    /// in, and those of `ownerID`; nil when the store shows it nowhere.
    func zoneRow(_ db: any StorageTransaction, uid: [UInt8], ownerID: String) throws -> ZoneRow? {
        if let row = try db.zoneRows(ownedByOrListing: userID).first(where: { $0.uid == uid }) { return row }
        guard ownerID != userID else { return nil }
        return try db.zoneRows(ownedBy: ownerID).first { $0.zone.uid == uid }?.zone
    }

}

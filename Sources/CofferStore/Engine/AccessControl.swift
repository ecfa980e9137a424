import CofferCrypto
import CofferVault
import Foundation

/// Who may do what in a zone, from its verified log: the owner, accepted participants with
/// their permission, joiners of the current link. Every read and write asks it first.
struct AccessControl: Sendable {
    /// The acting user's id.
    let userID: String
    /// The zone keys: a read or write checks that the current one opens.
    let keyRing: KeyRing
    /// The zones' logs, which say who may do what (and, for a missing zone, whether its owner deleted it).
    let verifiedLogs: VerifiedLogs
}

/// What the acting user may do in a zone, from its verified log.
struct ZoneAccess: Sendable {
    let zone: ZoneRow
    let log: ZoneLog
    let isOwner: Bool
    let role: Share.Participant.Role
    let permission: SharePermission

    var state: ZoneState { log.state }
    var canWrite: Bool { isOwner || permission == .readWrite }
}

extension AccessControl {
    /// The zone's row, found by name and owner; a missing zone's error names the acting user as
    /// "you", or says that its owner deleted it when the store kept a deletion this user can
    /// verify (``VerifiedLogs/provenDeletion(_:_:)``).
    func zoneRow(_ db: any StorageTransaction, _ zoneID: ZoneID) throws -> ZoneRow {
        guard let zone = try db.zoneRow(zoneID) else {
            throw try verifiedLogs.provenDeletion(db, zoneID) ?? ZoneRow.notFound(zoneID, owner: verifiedLogs.describeUser(zoneID.ownerID))
        }
        return zone
    }

    /// The acting user's access to a zone, from its verified log: the owner; a named participant
    /// who accepted (and was not removed since); or a joiner of the current public link.
    /// Throws `.permissionFailure` (removed, left, not accepted, link turned off) or
    /// `.zoneNotFound` (never shared with this user).
    func access(_ db: any StorageTransaction, zone: ZoneRow) throws -> ZoneAccess {
        let me = userID
        let log = try verifiedLogs.zoneLog(db, zone: zone)
        let state = log.state
        if state.ownerID == me {
            return ZoneAccess(zone: zone, log: log, isOwner: true, role: .owner, permission: .readWrite)
        }
        guard let share = state.share else {
            throw StoreError(.zoneNotFound, "\(verifiedLogs.describeZone(zone)) is not shared with you")
        }
        if let p = share.participants[me], p.role == .privateUser {
            if p.status == .removed {
                throw StoreError(.permissionFailure, "you were removed from the share of zone '\(zone.id.name)'; you can no longer read or write it")
            }
            switch state.acceptances[me] {
            case .accepted?: return ZoneAccess(zone: zone, log: log, isOwner: false, role: .privateUser, permission: p.permission)
            case .left?: throw StoreError(.permissionFailure, "you left the share of zone '\(zone.id.name)'; accept its URL again to rejoin")
            case nil: throw StoreError(.permissionFailure, "you are invited to zone '\(zone.id.name)' but have not accepted; run 'coffer share accept URL'")
            }
        }
        switch state.linkJoiners[me] {
        case .accepted?:
            return ZoneAccess(zone: zone, log: log, isOwner: false, role: .publicUser, permission: share.publicPermission)
        case .left?:
            throw StoreError(.permissionFailure, "you left the share of zone '\(zone.id.name)'; accept its URL again to rejoin")
        case nil:
            if share.participants[me]?.role == .publicUser {
                throw StoreError(.permissionFailure, "the owner turned off the public link of zone '\(zone.id.name)'; you no longer take part")
            }
        }
        throw StoreError(.zoneNotFound, "\(verifiedLogs.describeZone(zone)) is not shared with you")
    }

    func requireRead(_ db: any StorageTransaction, zone: ZoneRow) throws -> ZoneAccess {
        try access(db, zone: zone)
    }

    func requireWrite(_ db: any StorageTransaction, zone: ZoneRow) throws -> ZoneAccess {
        let access = try access(db, zone: zone)
        guard access.canWrite else {
            throw StoreError(.permissionFailure, "you have read-only access to zone '\(zone.id.name)'; ask its owner for read-write")
        }
        return access
    }

    func requireOwner(_ db: any StorageTransaction, zone: ZoneRow, to action: String) throws -> ZoneAccess {
        guard zone.id.ownerID == userID else {
            // Not the owner by the row; the log would say the same (its genesis names the owner).
            _ = try access(db, zone: zone)
            throw StoreError(.permissionFailure, "only the owner of zone '\(zone.id.name)' can \(action)")
        }
        return try access(db, zone: zone)
    }
}

extension AccessControl {
    /// Whether the log's state lets `user` read the zone now (as ``access(_:zone:)`` decides).
    static func mayRead(_ state: ZoneState, _ user: String) -> Bool {
        if state.ownerID == user { return true }
        guard let share = state.share else { return false }
        if let p = share.participants[user], p.role == .privateUser {
            return p.status != .removed && state.acceptances[user] == .accepted
        }
        return state.linkJoiners[user] == .accepted
    }
}

extension AccessControl {
    /// The owner and accepted participants read; the key of the current epoch must be reachable
    /// and match its commitment.
    @discardableResult
    func checkCanRead(_ db: any StorageTransaction, zone: ZoneRow) throws -> ZoneAccess {
        let access = try requireRead(db, zone: zone)
        _ = try keyRing.zoneKey(db, zone: zone, epoch: access.state.epoch, state: access.state)
        return access
    }

    /// The owner and read-write participants write.
    @discardableResult
    func checkCanWrite(_ db: any StorageTransaction, zone: ZoneRow) throws -> ZoneAccess {
        let access = try requireWrite(db, zone: zone)
        _ = try keyRing.zoneKey(db, zone: zone, epoch: access.state.epoch, state: access.state)
        return access
    }
}

import CofferCrypto
import CofferVault
import Foundation
import GRDB

/// What the acting user may do in a zone, from its owner and its verified share.
struct ZoneAccess: Sendable {
    let zone: ZoneRow
    let isOwner: Bool
    let role: Share.Participant.Role
    let permission: SharePermission
    /// The verified share, when the zone is shared.
    let share: ShareContent?

    var canWrite: Bool { isOwner || permission == .readWrite }
}

extension Session {
    /// The acting user's access to a zone, checking the owner's signature on its share and the
    /// user's own signed acceptance. Throws `.permissionFailure` (removed, left, not accepted)
    /// or `.zoneNotFound` (never shared with this user).
    func access(_ db: GRDB.Database, zone: ZoneRow) throws -> ZoneAccess {
        let me = userID
        let loaded = try ShareContent.load(db, zone: zone)
        if let (content, signature) = loaded { try verify(db, content, signature: signature, zone: zone) }
        if zone.id.ownerID == me {
            return ZoneAccess(zone: zone, isOwner: true, role: .owner, permission: .readWrite, share: loaded?.0)
        }
        guard let (share, _) = loaded else {
            throw StoreError(.zoneNotFound, "zone '\(zone.id.name)' of \(zone.id.ownerID) is not shared with you")
        }
        let acceptance = try self.acceptance(db, zone: zone, share: share, userID: me)
        if let entry = share.entries.first(where: { $0.userID == me }) {
            if entry.status == .removed {
                throw StoreError(.permissionFailure, "you were removed from the share of zone '\(zone.id.name)'; you can no longer read or write it")
            }
            if entry.role == .privateUser {
                switch acceptance?.state {
                case .accepted?: return ZoneAccess(zone: zone, isOwner: false, role: .privateUser, permission: entry.permission, share: share)
                case .left?: throw StoreError(.permissionFailure, "you left the share of zone '\(zone.id.name)'; accept its URL again to rejoin")
                case nil: throw StoreError(.permissionFailure, "you are invited to zone '\(zone.id.name)' but have not accepted; run 'coffer share accept URL'")
                }
            }
        }
        if let acceptance, acceptance.role == .publicUser {
            guard acceptance.state == .accepted else {
                throw StoreError(.permissionFailure, "you left the share of zone '\(zone.id.name)'; accept its URL again to rejoin")
            }
            guard share.publicPermission != .none else {
                throw StoreError(.permissionFailure, "the owner turned off the public link of zone '\(zone.id.name)'; you no longer take part")
            }
            return ZoneAccess(zone: zone, isOwner: false, role: .publicUser, permission: share.publicPermission, share: share)
        }
        throw StoreError(.zoneNotFound, "zone '\(zone.id.name)' of \(zone.id.ownerID) is not shared with you")
    }

    func requireRead(_ db: GRDB.Database, zone: ZoneRow) throws -> ZoneAccess {
        try access(db, zone: zone)
    }

    func requireWrite(_ db: GRDB.Database, zone: ZoneRow) throws -> ZoneAccess {
        let access = try access(db, zone: zone)
        guard access.canWrite else {
            throw StoreError(.permissionFailure, "you have read-only access to zone '\(zone.id.name)'; ask its owner for read-write")
        }
        return access
    }

    func requireOwner(_ db: GRDB.Database, zone: ZoneRow, to action: String) throws -> ZoneAccess {
        let access = try access(db, zone: zone)
        guard access.isOwner else {
            throw StoreError(.permissionFailure, "only the owner of zone '\(zone.id.name)' can \(action)")
        }
        return access
    }

    /// Checks the owner's signature over the share (cached per signature for the session).
    func verify(_ db: GRDB.Database, _ content: ShareContent, signature: [UInt8], zone: ZoneRow) throws {
        let bytes = content.signedBytes
        let cacheKey = BLAKE2b.hash(bytes + signature)
        if verifiedShares.withLock({ $0.contains(cacheKey) }) { return }
        let owner = try signingKey(db, of: zone.id.ownerID, zone: zone)
        guard owner.isValidSignature(signature, for: bytes) else {
            throw StoreError(.integrityFailure, "the share of zone '\(zone.id.name)' fails its owner's signature: the store was changed")
        }
        verifiedShares.withLock { _ = $0.insert(cacheKey) }
    }

    /// A user's signing key from the contact table, checked against the user id (a hash of the
    /// key), so a user id names exactly one key: checked keys are cached for the session.
    func signingKey(_ db: GRDB.Database, of userID: String, zone: ZoneRow) throws -> Ed25519.PublicKey {
        if let known = signingKeys.withLock({ $0[userID] }) { return known }
        guard let data = try Data.fetchOne(db.cachedStatement(sql: "SELECT signing_key FROM contact WHERE user_id = ?"), arguments: [userID]) else {
            throw StoreError(.integrityFailure, "the owner of zone '\(zone.id.name)' is not a known contact")
        }
        let key = try Ed25519.PublicKey(rawRepresentation: Array(data))
        guard UserIdentity.userID(for: key) == userID else {
            throw StoreError(.integrityFailure, "the stored contact \(userID) does not match its signing key")
        }
        signingKeys.withLock { $0[userID] = key }
        return key
    }

    /// A participant's verified acceptance record, if any.
    func acceptance(_ db: GRDB.Database, zone: ZoneRow, share: ShareContent, userID: String) throws -> Acceptance? {
        guard let row = try Row.fetchOne(db, sql: "SELECT * FROM share_acceptance WHERE zone_id = ? AND user_id = ?",
                                         arguments: [zone.rowID, userID]) else { return nil }
        guard let role = Share.Participant.Role(rawValue: row["role"]), let state = Acceptance.State(rawValue: row["state"]) else {
            throw StoreError(.integrityFailure, "the acceptance of \(userID) in zone '\(zone.id.name)' is damaged")
        }
        let acceptance = Acceptance(userID: userID, role: role, state: state, at: row["at"], signature: Array(row["signature"] as Data))
        let key = try signingKey(db, of: userID, zone: zone)
        guard key.isValidSignature(acceptance.signature, for: Acceptance.signedBytes(shareUID: share.shareUID, userID: userID,
                                                                                     role: role, state: state, at: acceptance.at)) else {
            throw StoreError(.integrityFailure, "the acceptance of \(userID) in zone '\(zone.id.name)' fails its signature")
        }
        return acceptance
    }
}

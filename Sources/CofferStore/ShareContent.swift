import CofferCrypto
import Foundation
import GRDB

/// The content of a share that its owner signs, as stored in `share` and `share_participant`
/// plus the named participants' wrapped keys of the current epoch. See `Docs/Sharing.md`.
struct ShareContent: Sendable {
    struct Entry: Sendable, Hashable {
        let userID: String
        let role: Share.Participant.Role
        let permission: SharePermission
        /// `.pending` (invited) or `.removed` by the owner; acceptance is the participant's own signed record.
        let status: Share.Participant.Status
        /// The zone key of the current epoch wrapped to them; empty when removed.
        let wrappedKey: [UInt8]
    }

    let zoneUID: [UInt8]
    let shareUID: [UInt8]
    let ownerID: String
    var title: String
    var publicPermission: SharePermission
    var version: Int64
    var epoch: Int64
    var keyCommitment: [UInt8]
    var linkSealedKey: [UInt8]?
    var linkSecretSealed: [UInt8]?
    var entries: [Entry]
    let created: Double
    var modified: Double

    /// The canonical bytes the owner signs: a domain string, then every field in a fixed order,
    /// variable-length fields prefixed by a 4-byte big-endian length, participants sorted by user id.
    var signedBytes: [UInt8] {
        var out = Array("coffer.share.v1".utf8) + [0]
        func framed(_ bytes: [UInt8]) { out += BigEndian.bytes(UInt32(bytes.count)) + bytes }
        framed(zoneUID)
        framed(shareUID)
        framed(Array(ownerID.utf8))
        framed(Array(title.utf8))
        out.append(UInt8(publicPermission.rawValue))
        out += BigEndian.bytes(Int64(version)) + BigEndian.bytes(Int64(epoch))
        framed(keyCommitment)
        framed(linkSealedKey ?? [])
        framed(linkSecretSealed ?? [])
        out += BigEndian.bytes(created.bitPattern) + BigEndian.bytes(modified.bitPattern)
        let sorted = entries.sorted { $0.userID < $1.userID }
        out += BigEndian.bytes(UInt32(sorted.count))
        for e in sorted {
            framed(Array(e.userID.utf8))
            out += [UInt8(e.role.rawValue), UInt8(e.permission.rawValue), UInt8(e.status.rawValue)]
            framed(e.wrappedKey)
        }
        return out
    }

    /// A commitment to a zone key that reveals nothing about it: keyed BLAKE2b-256 of a domain
    /// string, the zone uid and the epoch. A member checks an unwrapped key against the signed one.
    static func commitment(to key: SymmetricKey, zoneUID: [UInt8], epoch: Int64) -> [UInt8] {
        BLAKE2b.keyedHash(Array("coffer.zone-key-commitment.v1".utf8) + zoneUID + BigEndian.bytes(Int64(epoch)), key: key)
            .unsafeCopiedBytes()
    }

    // MARK: - Storage

    /// Loads the share of a zone (nil when the zone is not shared).
    static func load(_ db: GRDB.Database, zone: ZoneRow) throws -> (ShareContent, signature: [UInt8])? {
        guard let row = try Row.fetchOne(db.cachedStatement(sql: "SELECT * FROM share WHERE zone_id = ?"), arguments: [zone.rowID]) else { return nil }
        func damaged(_ what: String) -> StoreError {
            StoreError(.integrityFailure, "the share of zone '\(zone.id.name)' is damaged (\(what))")
        }
        guard let permission = SharePermission(rawValue: row["public_permission"]) else { throw damaged("public permission") }
        let epoch: Int64 = row["epoch"]
        var entries = [Entry]()
        for p in try Row.fetchAll(db, sql: "SELECT * FROM share_participant WHERE zone_id = ? ORDER BY user_id", arguments: [zone.rowID]) {
            let userID: String = p["user_id"]
            guard let role = Share.Participant.Role(rawValue: p["role"]), role != .owner,
                  let perm = SharePermission(rawValue: p["permission"]), perm != .none,
                  let status = Share.Participant.Status(rawValue: p["status"]), status != .accepted else {
                throw damaged("participant \(userID)")
            }
            let wrapped = try Data.fetchOne(db, sql: "SELECT wrapped_key FROM zone_key WHERE zone_id = ? AND epoch = ? AND member_id = ?",
                                            arguments: [zone.rowID, epoch, userID])
            entries.append(Entry(userID: userID, role: role, permission: perm, status: status,
                                 wrappedKey: status == .removed || role == .publicUser ? [] : Array(wrapped ?? Data())))
        }
        let content = ShareContent(
            zoneUID: zone.uid, shareUID: Array(row["share_uid"] as Data), ownerID: zone.id.ownerID, title: row["title"],
            publicPermission: permission, version: row["version"], epoch: epoch,
            keyCommitment: Array(row["key_commitment"] as Data),
            linkSealedKey: (row["link_sealed_key"] as Data?).map(Array.init),
            linkSecretSealed: (row["link_secret_sealed"] as Data?).map(Array.init),
            entries: entries, created: row["created_at"], modified: row["modified_at"])
        return (content, Array(row["signature"] as Data))
    }

    /// Writes the share rows (replacing what was there) with the owner's signature.
    func save(_ db: GRDB.Database, zoneRowID: Int64, signature: [UInt8]) throws {
        try db.execute(sql: """
            INSERT INTO share (zone_id, share_uid, title, public_permission, version, epoch, key_commitment, link_sealed_key,
                               link_secret_sealed, created_at, modified_at, signature)
            VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
            ON CONFLICT (zone_id) DO UPDATE SET title = excluded.title, public_permission = excluded.public_permission,
                version = excluded.version, epoch = excluded.epoch, key_commitment = excluded.key_commitment,
                link_sealed_key = excluded.link_sealed_key, link_secret_sealed = excluded.link_secret_sealed,
                modified_at = excluded.modified_at, signature = excluded.signature
            """, arguments: [zoneRowID, Data(shareUID), title, publicPermission.rawValue, version, epoch, Data(keyCommitment),
                             linkSealedKey.map { Data($0) }, linkSecretSealed.map { Data($0) }, created, modified, Data(signature)])
        try db.execute(sql: "DELETE FROM share_participant WHERE zone_id = ?", arguments: [zoneRowID])
        for e in entries {
            try db.execute(sql: "INSERT INTO share_participant (zone_id, user_id, role, permission, status) VALUES (?, ?, ?, ?, ?)",
                           arguments: [zoneRowID, e.userID, e.role.rawValue, e.permission.rawValue, e.status.rawValue])
        }
    }
}

/// A participant's own signed record: they accepted the share (named or by link), or left it.
struct Acceptance: Sendable {
    enum State: Int { case accepted = 1, left = 2 }
    let userID: String
    let role: Share.Participant.Role
    let state: State
    let at: Double
    let signature: [UInt8]

    static func signedBytes(shareUID: [UInt8], userID: String, role: Share.Participant.Role, state: State, at: Double) -> [UInt8] {
        var out = Array("coffer.share-acceptance.v1".utf8) + [0] + shareUID
        let id = Array(userID.utf8)
        out += BigEndian.bytes(UInt32(id.count)) + id
        out += [UInt8(role.rawValue), UInt8(state.rawValue)] + BigEndian.bytes(at.bitPattern)
        return out
    }
}

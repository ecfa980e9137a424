import CofferCrypto
import Foundation
import GRDB

/// A commit whose signature and writer have been checked.
struct VerifiedCommit: Sendable {
    let seq: Int64
    let authorID: String
    let authorLabel: String?
    let membershipSeq: Int64
    let epoch: Int64
    let time: Double
    let entries: DigestSet
}

extension Session {
    /// The commit `seq` of a zone, verified: its hash chain link, the author's signature, and
    /// that the author was the owner or a read-write member at the commit's membership sequence.
    func verifiedCommit(_ db: GRDB.Database, zone: ZoneRow, seq: Int64) throws -> VerifiedCommit {
        if let cached = commits.withLock({ $0[zone.rowID]?[seq] }) { return cached }
        guard let row = try Row.fetchOne(db.cachedStatement(sql: "SELECT * FROM zone_commit WHERE zone_id = ? AND seq = ?"), arguments: [zone.rowID, seq]) else {
            throw StoreError(.integrityFailure, "commit \(seq) of zone '\(zone.id.name)' is missing: the store was changed")
        }
        let authorID: String = row["author_id"]
        let label: String? = row["author_label"]
        let membershipSeq: Int64 = row["membership_seq"], epoch: Int64 = row["epoch"], time: Double = row["committed_at"]
        let prev = Array(row["prev_hash"] as Data), entries = Array(row["entries"] as Data)
        let signature = Array(row["signature"] as Data), storedHash = Array(row["hash"] as Data)
        // The names are signed (their hash), not parsed here: reads do not use them, and only
        // their author could sign a malformed list, which audit reports.
        let names = (row["names"] as Data?).map(Array.init)
        guard entries.count % 32 == 0 else { throw StoreError(.integrityFailure, "commit \(seq) of zone '\(zone.id.name)' is damaged") }
        let bytes = CommitBuilder.signedBytes(zoneUID: zone.uid, seq: seq, membershipSeq: membershipSeq, epoch: epoch, authorID: authorID,
                                              authorLabel: label, time: time, prevHash: prev, entries: entries, names: names)
        let key = try signingKey(db, of: authorID, zone: zone)
        guard key.isValidSignature(signature, for: bytes), BLAKE2b.hash(bytes + signature) == storedHash else {
            throw StoreError(.integrityFailure, "commit \(seq) of zone '\(zone.id.name)' fails its author's signature: the store was changed")
        }
        try checkWriter(db, zone: zone, authorID: authorID, membershipSeq: membershipSeq, commitSeq: seq)
        let verified = VerifiedCommit(seq: seq, authorID: authorID, authorLabel: label, membershipSeq: membershipSeq, epoch: epoch,
                                      time: time, entries: entries.withUnsafeBytes { DigestSet(entries: $0) })
        commits.withLock { $0[zone.rowID, default: [:]][seq] = verified }
        return verified
    }

    /// Throws unless `authorID` could write the zone at membership sequence `membershipSeq`:
    /// the owner always; others only as read-write members in the owner-signed entry of that
    /// sequence (or while the public permission was read-write).
    func checkWriter(_ db: GRDB.Database, zone: ZoneRow, authorID: String, membershipSeq: Int64, commitSeq: Int64) throws {
        if authorID == zone.id.ownerID { return }
        let refused = StoreError(.integrityFailure, "commit \(commitSeq) of zone '\(zone.id.name)' was signed by \(authorID), who was not a read-write participant at membership \(membershipSeq)")
        guard membershipSeq > 0, membershipSeq <= zone.membershipSeq else { throw refused }
        let entry = try membership(db, zone: zone, seq: membershipSeq)
        guard entry.members[authorID] == .readWrite || entry.publicPermission == .readWrite else { throw refused }
        // The claimed membership must have been in force at this commit: after the entry was
        // made and no later than the next entry. Commit sequences are contiguous, so a writer who
        // was later demoted or removed cannot backdate a new commit into an old membership.
        let late = StoreError(.integrityFailure, "commit \(commitSeq) of zone '\(zone.id.name)' by \(authorID) claims membership \(membershipSeq), which was no longer in force")
        guard commitSeq > entry.fromCommit else { throw late }
        if membershipSeq < zone.membershipSeq {
            let next = try membership(db, zone: zone, seq: membershipSeq + 1)
            guard commitSeq <= next.fromCommit else { throw late }
        }
    }

    /// The owner-signed membership entry `seq` of a zone, verified and cached.
    func membership(_ db: GRDB.Database, zone: ZoneRow, seq: Int64) throws -> MembershipEntry {
        if let cached = memberships.withLock({ $0[zone.rowID]?[seq] }) { return cached }
        guard let row = try Row.fetchOne(db, sql: "SELECT content, signature FROM membership_log WHERE zone_id = ? AND seq = ?",
                                         arguments: [zone.rowID, seq]) else {
            throw StoreError(.integrityFailure, "membership \(seq) of zone '\(zone.id.name)' is missing: the store was changed")
        }
        let content = Array(row["content"] as Data), signature = Array(row["signature"] as Data)
        let owner = try signingKey(db, of: zone.id.ownerID, zone: zone)
        guard owner.isValidSignature(signature, for: content), let entry = MembershipEntry.decode(content, zoneUID: zone.uid), entry.seq == seq else {
            throw StoreError(.integrityFailure, "membership \(seq) of zone '\(zone.id.name)' fails its owner's signature: the store was changed")
        }
        memberships.withLock { $0[zone.rowID, default: [:]][seq] = entry }
        return entry
    }

    /// Appends the owner-signed membership entry for the share's current state (or, with no
    /// share, for "owner only") and moves the zone's membership sequence to it.
    func logMembership(_ db: GRDB.Database, zone: ZoneRow, seq: Int64, epoch: Int64, share: ShareContent?) throws {
        var members = [String: SharePermission]()
        for e in share?.entries ?? [] where e.status != .removed && e.role == .privateUser { members[e.userID] = e.permission }
        let fromCommit = try Int64.fetchOne(db, sql: "SELECT sequence FROM zone WHERE id = ?", arguments: [zone.rowID]) ?? zone.sequence
        let entry = MembershipEntry(seq: seq, fromCommit: fromCommit, epoch: epoch, publicPermission: share?.publicPermission ?? .none, members: members)
        let content = entry.encoded(zoneUID: zone.uid)
        try db.execute(sql: "INSERT INTO membership_log (zone_id, seq, content, signature) VALUES (?, ?, ?, ?)",
                       arguments: [zone.rowID, seq, Data(content), Data(vault.signingKey.signature(for: content))])
        try db.execute(sql: "UPDATE zone SET membership_seq = ? WHERE id = ?", arguments: [seq, zone.rowID])
    }
}

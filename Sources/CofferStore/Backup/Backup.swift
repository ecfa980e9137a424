import CofferCrypto
import CofferVault
import Foundation

/// A backup of everything one user owns or can read in a store, read from one state of it:
/// each zone whole (its signed log, wrapped keys, share link and members, schema, deleted names
/// and record rows, all as stored, nothing opened or signed again) and the store's contact
/// cards. Made by ``Session/makeBackup(progress:)``; put into an empty store by
/// ``Session/restore(_:resettingMarks:progress:)``.
///
/// On disk it is sealed to its user: ``sealed(by:)`` encrypts it under a fresh file key that
/// only the vault's X25519 key opens, and signs the whole file with the vault's Ed25519 key;
/// ``init(sealed:vault:)`` opens it only with that vault, and refuses any change to any byte.
/// The format is in `Docs/Backup.md`.
///
/// ```swift
/// let backup = try await session.makeBackup()
/// try Data(backup.sealed(by: vault)).write(to: url)
/// let again = try Backup(sealed: Array(try Data(contentsOf: url)), vault: vault)
/// ```
public struct Backup: Sendable {
    /// One zone of a backup, as a summary.
    public struct ZoneSummary: Sendable, Hashable {
        public let zone: ZoneID
        /// The position of the last entry of the zone's log in the backup.
        public let headSeq: Int64
        public let entries: Int
        public let records: Int
    }

    /// A contact card as the store held it.
    struct Card: Sendable {
        let card: [UInt8]
        /// When the store added it (seconds since 1970).
        let added: Double
    }

    /// The user who made the backup, whose vault alone opens it.
    public let userID: String
    /// When it was made (to the millisecond).
    public let created: Date
    /// The id of the store it was made from.
    public let storeID: [UInt8]
    var cards: [Card]
    var zones: [ZoneCopy]

    init(userID: String, created: Date, storeID: [UInt8], cards: [Card], zones: [ZoneCopy]) {
        self.userID = userID
        self.created = Date(timeIntervalSince1970: (created.timeIntervalSince1970 * 1000).rounded(.down) / 1000)
        self.storeID = storeID
        self.cards = cards
        self.zones = zones
    }

    /// Each zone, in the backup's order (zones the user owns, then those shared with them).
    public var summaries: [ZoneSummary] {
        zones.map { ZoneSummary(zone: $0.id, headSeq: $0.headSeq, entries: $0.log.count, records: $0.rows.count) }
    }

    /// Record rows in all zones.
    public var recordCount: Int { zones.reduce(0) { $0 + $1.rows.count } }

    /// The id under which a store records this backup's restore as done, in the restore's own
    /// transaction: a restore stopped after its write, run again, finds it and goes on (a store
    /// that holds the same zones without it was not made by restoring this backup). 16 bytes of
    /// BLAKE2b over the user, the store id, the creation time and each zone's uid and log head.
    var restoreID: [UInt8] {
        var bytes = Array("coffer.restore.v1".utf8) + Array(userID.utf8) + storeID
        withUnsafeBytes(of: created.timeIntervalSince1970.bitPattern.bigEndian) { bytes += $0 }
        for zone in zones { bytes += zone.uid + (zone.log.last?.hash.bytes ?? []) }
        return BLAKE2b.hash(bytes, outputByteCount: 16)
    }

    /// Contact cards.
    public var contactCount: Int { cards.count }

    /// The backup file: encoded, sealed under a fresh file key that only `vault` opens, and
    /// signed with `vault`'s identity key.
    /// - Throws: `.permissionFailure` when `vault` is not the backup's user's.
    public func sealed(by vault: Vault) throws -> [UInt8] {
        guard vault.identity.userID == userID else { throw StoreError(.permissionFailure, "a backup is sealed by the vault of its own user") }
        return try BackupFormat.seal(self, by: vault)
    }

    /// Opens a backup file with the vault of the user who made it, checking its signature
    /// first: a file changed anywhere, cut short or grown is refused.
    /// - Throws: `.invalidArguments` for a file that is not a backup, or of another format
    ///   version; `.integrityFailure` for one that was damaged or changed; `.permissionFailure`
    ///   for another user's backup.
    public init(sealed file: [UInt8], vault: Vault) throws {
        self = try BackupFormat.open(file, vault: vault)
    }
}

// MARK: - Rollback

extension Backup {
    /// How a zone of a backup stands against what its user verified before (their marks): a
    /// backup older than what they saw takes the zone back, which their marks would refuse
    /// until they are reset to the backup's head.
    public struct MarkCheck: Sendable, Hashable {
        public enum Standing: Sendable, Hashable {
            /// The backup reaches what the user saw (or they saw nothing of the zone): the marks stay.
            case current
            /// The backup ends `entries` entries before what the user saw.
            case older(entries: Int64)
            /// The backup's log has another entry where the user saw theirs: another history.
            case forked
            /// The user deleted the zone since.
            case deleted
        }
        public let zone: ZoneID
        public let backupSeq: Int64
        /// The position the user verified, when they did (nil for a deleted zone's mark).
        public let seenSeq: Int64?
        public let standing: Standing

        /// Whether restoring takes the user's marks back (to be confirmed).
        public var isRollback: Bool { standing != .current }
    }

    /// Each zone's standing against `marks` (the user's, read from their marks file).
    /// - Throws: ``StoreError`` `.integrityFailure` when the marks file cannot be read.
    public func markChecks(against marks: MarkBook) throws -> [MarkCheck] {
        try zones.map { zone in
            let mark: ZoneMark?
            do { mark = try marks.mark(forZone: zone.uid) } catch let error as VaultError {
                throw StoreError(.integrityFailure, "your marks file cannot be read: \(error.message)", underlying: error)
            }
            guard let mark else { return MarkCheck(zone: zone.id, backupSeq: zone.headSeq, seenSeq: nil, standing: .current) }
            if mark.isDeletion { return MarkCheck(zone: zone.id, backupSeq: zone.headSeq, seenSeq: nil, standing: .deleted) }
            if mark.seq > zone.headSeq {
                return MarkCheck(zone: zone.id, backupSeq: zone.headSeq, seenSeq: mark.seq, standing: .older(entries: mark.seq - zone.headSeq))
            }
            let entry = zone.log.first { $0.seq == mark.seq }
            guard entry?.hash.bytes == mark.hash, mark.ownerID == zone.id.ownerID else {
                return MarkCheck(zone: zone.id, backupSeq: zone.headSeq, seenSeq: mark.seq, standing: .forked)
            }
            return MarkCheck(zone: zone.id, backupSeq: zone.headSeq, seenSeq: mark.seq, standing: .current)
        }
    }

    /// The marks a restore sets for the zones `checks` finds rolled back: each zone's head in
    /// the backup.
    func headMarks(for checks: [MarkCheck]) throws -> [ZoneMark] {
        let rolledBack = Set(checks.filter(\.isRollback).map(\.zone))
        return try zones.filter { rolledBack.contains($0.id) }.compactMap { zone in
            guard let last = zone.log.last else { return nil }
            return try ZoneMark(zoneUID: zone.uid, ownerID: zone.id.ownerID, seq: last.seq, hash: last.hash.bytes)
        }
    }
}

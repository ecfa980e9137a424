/// One zone's high-water mark: the newest entry of its signed log this user verified.
///
/// A reader keeps one per zone in its ``MarkBook`` and refuses a log that ends below it, so a
/// store file put back to an older copy is noticed.
///
/// ```swift
/// let mark = try ZoneMark(zoneUID: uid, ownerID: owner, seq: 42, hash: commitHash)
/// vault.marks.advance(to: mark)
/// try vault.marks.save()
/// ```
public struct ZoneMark: Sendable, Hashable {
    /// The zone's uid (16 bytes).
    public let zoneUID: [UInt8]
    /// The zone owner's user id (32 lowercase hexadecimal digits).
    public let ownerID: String
    /// The position of the entry in the zone's log (0 or more).
    public let seq: Int64
    /// The entry's hash (32 bytes).
    public let hash: [UInt8]

    public static let zoneUIDByteCount = 16
    public static let hashByteCount = 32

    /// - Throws: ``VaultError`` `.invalidArguments` for a zone uid that is not 16 bytes, an owner
    ///   id that is not a user id, a negative `seq`, or a hash that is not 32 bytes.
    public init(zoneUID: [UInt8], ownerID: String, seq: Int64, hash: [UInt8]) throws {
        guard zoneUID.count == Self.zoneUIDByteCount else {
            throw VaultError(.invalidArguments, "a zone uid has \(Self.zoneUIDByteCount) bytes, not \(zoneUID.count)")
        }
        guard UserIdentity.isWellFormed(userID: ownerID) else {
            throw VaultError(.invalidArguments, "a zone mark's owner is a user id (32 lowercase hexadecimal digits)")
        }
        guard seq >= 0 else { throw VaultError(.invalidArguments, "a zone mark's position is 0 or more, not \(seq)") }
        guard hash.count == Self.hashByteCount else {
            throw VaultError(.invalidArguments, "a zone mark's hash has \(Self.hashByteCount) bytes, not \(hash.count)")
        }
        self.zoneUID = zoneUID
        self.ownerID = ownerID
        self.seq = seq
        self.hash = hash
    }

    /// The mark a zone's owner keeps after deleting the zone, and a reader once they verified the
    /// owner's signed deletion: at a position no log reaches (`Int64.max`, all-ones hash), so
    /// that no copy of the zone put back later is taken for current, and no merge of marks
    /// lowers it.
    public static func deletion(zoneUID: [UInt8], ownerID: String) throws -> ZoneMark {
        try ZoneMark(zoneUID: zoneUID, ownerID: ownerID, seq: .max, hash: [UInt8](repeating: 0xff, count: hashByteCount))
    }

    /// Whether this is a ``deletion(zoneUID:ownerID:)`` mark.
    public var isDeletion: Bool { seq == .max }
}

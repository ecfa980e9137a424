import CofferCrypto
import Foundation

/// An opaque, versioned position in a change feed (CloudKit's `CKServerChangeToken`).
///
/// Encoded form (``string``): base64url (no padding) of
///
/// | bytes | field |
/// | --- | --- |
/// | 3 | magic `CCT` |
/// | 1 | version `0x01` |
/// | 1 | kind: `1` zone, `2` private database, `3` shared database |
/// | 16 | store id |
/// | 16 | zone uid (zone tokens) or BLAKE2b-128 of the user id (database tokens) |
/// | 8 | sequence (commit sequence, or the store's database sequence) |
/// | 1 | `1` when a record name follows (a page that ended inside a commit), else `0` |
/// | 2 + n | name length and UTF-8 name, when present |
///
/// A decoder refuses anything else with `.invalidArguments`; a token of another store, of a
/// deleted zone or older than the zone's compacted history fails with `.zoneNotFound` or
/// `.changeTokenExpired`.
public struct ChangeToken: Sendable, Hashable, CustomStringConvertible {
    enum Kind: UInt8 {
        case zone = 1, privateDatabase = 2, sharedDatabase = 3
    }

    static let magic = Array("CCT".utf8)
    static let version: UInt8 = 1

    let kind: Kind
    let storeID: [UInt8]
    let scopeID: [UInt8]
    let seq: Int64
    /// The last record name delivered within commit `seq`; nil means all of `seq` was delivered.
    let name: String?

    init(kind: Kind, storeID: [UInt8], scopeID: [UInt8], seq: Int64, name: String?) {
        self.kind = kind
        self.storeID = storeID
        self.scopeID = scopeID
        self.seq = seq
        self.name = name
    }

    /// The printable token.
    public var string: String {
        var bytes = Self.magic + [Self.version, kind.rawValue] + storeID + scopeID + BigEndian.bytes(Int64(seq))
        if let name {
            let utf8 = Array(name.utf8)
            bytes += [1] + BigEndian.bytes(UInt16(utf8.count)) + utf8
        } else {
            bytes += [0]
        }
        return Base64URL.encode(bytes)
    }

    public var description: String { string }

    /// Parses a token printed by ``string``.
    public init(string: String) throws {
        func bad(_ why: String) -> StoreError { StoreError(.invalidArguments, "not a change token: \(why)") }
        guard string.utf8.count <= 512, let bytes = Base64URL.decode(string) else { throw bad("not base64url") }
        let parsed: ChangeToken = try bytes.withUnsafeBytes { raw in
            var r = RawReader(raw, what: "change token")
            do {
                guard Array(try r.take(3)) == Self.magic else { throw bad("bad magic") }
                let v = try r.u8()
                guard v == Self.version else { throw bad("unsupported version \(v)") }
                guard let kind = Kind(rawValue: try r.u8()) else { throw bad("unknown kind") }
                let store = Array(try r.take(16)), scope = Array(try r.take(16))
                let seq = Int64(bitPattern: try r.u64())
                guard seq >= 0 else { throw bad("negative sequence") }
                var name: String?
                switch try r.u8() {
                case 0: break
                case 1:
                    let n = Int(try r.u16())
                    name = try r.utf8(count: n)
                default: throw bad("bad flag")
                }
                guard r.remaining == 0 else { throw bad("trailing bytes") }
                return ChangeToken(kind: kind, storeID: store, scopeID: scope, seq: seq, name: name)
            } catch let e as StoreError where e.code == .integrityFailure {
                throw bad("truncated")
            }
        }
        self = parsed
    }

    static func userScope(_ userID: String) -> [UInt8] {
        BLAKE2b.hash(Array("coffer.change-token.user.v1".utf8) + Array(userID.utf8), outputByteCount: 16)
    }
}

/// A deleted record in a zone change feed.
public struct DeletedRecord: Sendable, Hashable {
    public let name: String
    /// Who deleted it, and the transaction author string they set.
    public let authorID: String
    public let transactionAuthor: String?
    public let deleted: Date
}

/// One page of a zone's changes (CloudKit's `CKFetchRecordZoneChangesOperation`).
public struct ZoneChanges: Sendable {
    /// Records changed since the token, latest version, decrypted, in commit order. Each
    /// carries its author (`modifierID`) and `transactionAuthor`.
    public let changed: [Record]
    public let deleted: [DeletedRecord]
    /// Changed records refused because they fail verification; never returned as records.
    public let refused: [String: StoreError]
    /// Pass it as `since` for the next page.
    public let token: ChangeToken
    /// More changes wait: ask again with ``token``.
    public let moreComing: Bool
}

/// A zone that left a user's view.
public struct DeletedZone: Sendable, Hashable {
    public let zoneID: ZoneID
    /// `deleted`, `removed`, `left` or `share stopped`.
    public let reason: String
}

/// Changes of a database (CloudKit's `CKFetchDatabaseChangesOperation`).
public struct DatabaseChanges: Sendable {
    public let changed: [ZoneID]
    public let deleted: [DeletedZone]
    public let token: ChangeToken
    public let moreComing: Bool
}

import CofferCrypto
import Foundation

/// A record prepared for writing: validated, with its fields encoded (not yet sealed).
struct PreparedRecord: Sendable {
    /// The plain values' JSON (UTF-8).
    var plain: [UInt8]
    /// The plain values' type codes, in key order (what the version hash signs of their types).
    var plainTypes: [UInt8]
    var sealedPlaintext: [UInt8]?
    let expectedSeq: Int64?

    var plainJSON: String { String(decoding: plain, as: UTF8.self) }
}

/// What a batch's records are sealed and hashed with: fixed when its transaction starts. A
/// class: every record of the batch reads it without copying it.
final class WriteContext: Sendable {
    let zone: ZoneRow
    let key: SymmetricKey
    let epoch: Int64
    let seq: Int64
    let membershipSeq: Int64
    let authorID: String
    let authorLabel: String?
    let time: Double
    /// The schema of each record type of the batch, as cached when the transaction started.
    let schemas: [String: [String: FieldSchema]]
    /// The batch's nonces, drawn from libsodium up to 64 at a time (nil: each seal draws its own).
    let nonces: NonceReserve?
    /// The records were weighed against ``Limits/maxRecordBytes`` as given, and are sealed as
    /// given (not merged over their stored versions, which a seal must weigh again).
    let sized: Bool
    /// ``ChangeTag/make(_:)`` of `seq`.
    let changeTag: String

    init(zone: ZoneRow, key: SymmetricKey, epoch: Int64, seq: Int64, membershipSeq: Int64, authorID: String, authorLabel: String?,
         time: Double, schemas: [String: [String: FieldSchema]], nonces: NonceReserve? = nil, sized: Bool = false) {
        self.sized = sized
        changeTag = ChangeTag.make(seq)
        self.zone = zone
        self.key = key
        self.epoch = epoch
        self.seq = seq
        self.membershipSeq = membershipSeq
        self.authorID = authorID
        self.authorLabel = authorLabel
        self.time = time
        self.schemas = schemas
        self.nonces = nonces
    }
}

/// A record encoded, sealed and hashed for writing, as if it were new (creator and creation
/// time the writer's): the common case. An update fills in the stored creator and rehashes.
struct SealedWrite: Sendable {
    var result: Record
    /// Stamped as new: an update keeps the stored creator and creation time, and is hashed again.
    let version: SealedVersion
    let expectedSeq: Int64?
    /// Every field is in the cached schema with its type and encryption: no schema work left.
    let schemaChecked: Bool
}

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
    /// This record already sealed and hashed for its batch, ahead of the batch's transaction (an
    /// import seals a batch while the batch before it is written, with the change tag it
    /// expects). The transaction uses it when it writes at the same stamp; at the same key epoch
    /// only, it hashes the sealed bytes again; otherwise it seals again.
    var presealed: Presealed?

    /// A version sealed and hashed in one zone.
    struct Presealed: Sendable {
        let zoneUID: [UInt8]
        let version: SealedVersion
    }

    var plainJSON: String { String(decoding: plain, as: UTF8.self) }
}

/// What a write begun now would seal and stamp with (see ``PreparedRecord/presealed``): the
/// zone's key and epoch, the log's head and the owner's entry in force, the writer.
struct SealingKey: Sendable {
    let zone: ZoneRow
    let epoch: Int64
    let key: SymmetricKey
    let headSeq: Int64
    let membershipSeq: Int64
    let authorID: String

    /// Seals and hashes `record` (prepared as `prepared`) as new, as a batch that writes log
    /// entry `seq` at `time` would, with a nonce from `nonces`.
    func preseal(_ prepared: inout PreparedRecord, of record: Record, seq: Int64, time: Double, nonces: NonceReserve?) {
        let stamp = VersionStamp(name: record.name, type: record.recordType, parent: record.parent, seq: seq, epoch: epoch,
                                 membershipSeq: membershipSeq, creatorID: authorID, modifierID: authorID, created: time, modified: time)
        let version = RecordSealer.seal(stamp, plain: prepared.plain, plainTypes: prepared.plainTypes, sealedPlaintext: prepared.sealedPlaintext,
                                        key: key, zone: zone, nonces: nonces)
        prepared.presealed = PreparedRecord.Presealed(zoneUID: zone.uid, version: version)
    }
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

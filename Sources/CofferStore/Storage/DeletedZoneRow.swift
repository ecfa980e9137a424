import Foundation

/// What a store keeps of a zone its owner deleted: the zone's uid, owner and name, and the first
/// and last entries of its log, its genesis and its owner's deletion (each its signed body and
/// signature, as stored). Its rows, keys and other entries are gone. A reader who verified the
/// zone before learns from it that the zone's owner deleted it; nothing of it is believed until
/// both entries verify against the owner's card (see ``VerifiedLogs/verifiedDeletion(_:_:mark:)``).
package struct DeletedZoneRow: Sendable {
    package let uid: [UInt8]
    package let id: ZoneID
    package let genesis: StoredLogEntry
    package let deletion: StoredLogEntry

    /// A row of stored bytes; each entry's sequence is the one its body names (0 when the body
    /// does not decode, which verification refuses).
    package init(uid: [UInt8], id: ZoneID, genesisBody: [UInt8], genesisSignature: [UInt8], deletionBody: [UInt8], deletionSignature: [UInt8]) {
        func stored(_ body: [UInt8], _ signature: [UInt8]) -> StoredLogEntry {
            StoredLogEntry(seq: LogEntry.decode(body)?.seq ?? 0, body: body, signature: signature, entries: nil, names: nil)
        }
        self.uid = uid
        self.id = id
        genesis = stored(genesisBody, genesisSignature)
        deletion = stored(deletionBody, deletionSignature)
    }
}

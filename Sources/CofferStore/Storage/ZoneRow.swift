import Foundation

/// A zone's row as stored. Only its row id, uid, name and owner are used, and the uid, name and
/// owner only once the zone's log (whose genesis names them) verified; `sequence` is a cache of
/// the log's head for change tokens.
package struct ZoneRow: Sendable {
    package let rowID: Int64
    package let uid: [UInt8]
    package let id: ZoneID
    package let sequence: Int64
    package let created: Date
    /// `0`: a zone of the earlier store format, not yet upgraded by its owner; `1`: it has a log.
    package let logFormat: Int64

    package init(rowID: Int64, uid: [UInt8], id: ZoneID, sequence: Int64, created: Date, logFormat: Int64) {
        self.rowID = rowID
        self.uid = uid
        self.id = id
        self.sequence = sequence
        self.created = created
        self.logFormat = logFormat
    }
}

extension ZoneRow {
    /// The error for a zone that is not in the store (its owner named as "you" when it is the
    /// acting user: see ``AccessControl/zoneRow(_:_:)``).
    package static func notFound(_ zoneID: ZoneID, owner: String? = nil) -> StoreError {
        StoreError(.zoneNotFound, "no zone '\(zoneID.name)' owned by \(owner ?? zoneID.ownerID)")
    }
}

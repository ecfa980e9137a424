import Foundation
import GRDB

/// A zone's row as stored. Only its row id, uid, name and owner are used, and the uid, name and
/// owner only once the zone's log (whose genesis names them) verified; `sequence` is a cache of
/// the log's head for change tokens.
struct ZoneRow: Sendable {
    let rowID: Int64
    let uid: [UInt8]
    let id: ZoneID
    let sequence: Int64
    let created: Date
    /// `0`: a zone of the earlier store format, not yet upgraded by its owner; `1`: it has a log.
    let logFormat: Int64
}

extension ZoneRow {
    /// The error for a zone that is not in the store (its owner named as "you" when it is the
    /// acting user: see ``Session/zoneRow(_:_:)``).
    static func notFound(_ zoneID: ZoneID, owner: String? = nil) -> StoreError {
        StoreError(.zoneNotFound, "no zone '\(zoneID.name)' owned by \(owner ?? zoneID.ownerID)")
    }

    init(row: Row) throws {
        let uid: Data = try row.required("uid")
        rowID = try row.required("id")
        self.uid = Array(uid)
        id = ZoneID(name: try row.required("name"), ownerID: try row.required("owner_id"))
        sequence = try row.required("sequence")
        created = Date(timeIntervalSince1970: try row.required("created_at"))
        logFormat = try row.required("log_format")
    }
}

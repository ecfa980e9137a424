import CofferCrypto
import Foundation
import GRDB
internal import GRDBSQLite

/// A record row copied out of SQLite: everything a reader needs to check it against its
/// signed commit and open it, away from the database thread.
///
/// A class: one reference moves more cheaply than a struct of strings and arrays. Its bytes
/// (the plain values' JSON, then the sealed envelope, if any) are stored in the object's own
/// allocation: one `malloc` a row, not two. Nothing in a row changes after
/// ``make(_:plain:sealed:)``.
final class StoredRow: ManagedBuffer<StoredRow.Fields, UInt8> {
    struct Fields {
        let name: String
        let type: String
        let parent: String?
        let epoch: Int64
        let seq: Int64
        let membershipSeq: Int64
        let creatorID: String
        let modifierID: String
        let created: Double
        let modified: Double
        let plainCount: Int
        let sealedCount: Int
        let hasSealed: Bool
    }

    var name: String { header.name }
    var type: String { header.type }
    var parent: String? { header.parent }
    var epoch: Int64 { header.epoch }
    var seq: Int64 { header.seq }
    var membershipSeq: Int64 { header.membershipSeq }
    var creatorID: String { header.creatorID }
    var modifierID: String { header.modifierID }
    var created: Double { header.created }
    var modified: Double { header.modified }
    var plainCount: Int { header.plainCount }
    var hasSealed: Bool { header.hasSealed }

    /// A row whose bytes are `plain` followed by `sealed` (nil when the row has no sealed values).
    static func make(_ fields: (name: String, type: String, parent: String?, epoch: Int64, seq: Int64, membershipSeq: Int64,
                                creatorID: String, modifierID: String, created: Double, modified: Double),
                     plain: UnsafeRawBufferPointer, sealed: UnsafeRawBufferPointer?) -> StoredRow {
        let sealedCount = sealed?.count ?? 0
        let row = unsafeDowncast(create(minimumCapacity: plain.count + sealedCount) { _ in
            Fields(name: fields.name, type: fields.type, parent: fields.parent, epoch: fields.epoch, seq: fields.seq,
                   membershipSeq: fields.membershipSeq, creatorID: fields.creatorID, modifierID: fields.modifierID, created: fields.created,
                   modified: fields.modified,
                   plainCount: plain.count, sealedCount: sealedCount, hasSealed: sealed != nil)
        }, to: StoredRow.self)
        row.withUnsafeMutablePointerToElements { out in
            let raw = UnsafeMutableRawPointer(out)
            if plain.count > 0 { raw.copyMemory(from: plain.baseAddress!, byteCount: plain.count) }
            if let sealed, sealed.count > 0 { (raw + plain.count).copyMemory(from: sealed.baseAddress!, byteCount: sealed.count) }
        }
        return row
    }

    static func make(name: String, type: String, parent: String?, epoch: Int64, seq: Int64, membershipSeq: Int64, creatorID: String,
                     modifierID: String, created: Double, modified: Double, plain: [UInt8], sealed: [UInt8]?) -> StoredRow {
        plain.withUnsafeBytes { plain in
            Session.withOptionalBytes(sealed) { sealed in
                make((name, type, parent, epoch, seq, membershipSeq, creatorID, modifierID, created, modified), plain: plain, sealed: sealed)
            }
        }
    }

    /// Reads the current row of a statement selecting `Database.recordColumns`.
    static func read(_ s: RawStatement, creatorCache: inout Session.CreatorCache?) -> StoredRow {
        // Creators and modifiers repeat from row to row: keep one String for a run of equal ids.
        // The cache is used in place (a copy in and out would retain and release its four values
        // on every row).
        if creatorCache == nil { creatorCache = Session.CreatorCache() }
        let creatorID = Session.cachedText(s.bytes(7), in: &creatorCache!.creator)
        // Most rows were last modified by their creator: one String for both.
        let modifier = s.bytes(8)
        let modifierID = Session.sameBytes(modifier, creatorCache!.creator?.bytes) ? creatorID
            : Session.cachedText(modifier, in: &creatorCache!.modifier)
        let name = s.text(0), type = s.text(1), parent = s.optionalText(2)
        // Each column is read once and in its stored type, so no read converts (and frees) the
        // bytes another pointer here refers to; they stay valid until the next step.
        let sealed: UnsafeRawBufferPointer? = s.isNull(4) ? nil : s.bytes(4)
        return make((name, type, parent, s.int64(5), s.int64(6), s.int64(11), creatorID, modifierID, s.double(9), s.double(10)),
                    plain: s.bytes(3), sealed: sealed)
    }

    /// The plain values' JSON followed by the sealed envelope (if any), valid inside `body`.
    func withBytes<R>(_ body: (UnsafeRawBufferPointer) throws -> R) rethrows -> R {
        try withUnsafeMutablePointerToElements { base in
            try body(UnsafeRawBufferPointer(start: base, count: header.plainCount + header.sealedCount))
        }
    }
}

extension StoredRow {
    /// Copies a GRDB row selected with `Database.recordColumns`.
    static func make(row: Row) throws -> StoredRow {
        let sealed: Data? = try row.optional(4)
        return make(name: try row.required(0), type: try row.required(1), parent: try row.optional(2), epoch: try row.required(5),
                    seq: try row.required(6), membershipSeq: try row.required(11), creatorID: try row.required(7),
                    modifierID: try row.required(8),
                    created: try row.required(9), modified: try row.required(10), plain: Array((try row.required(3) as String).utf8),
                    sealed: sealed.map(Array.init))
    }
}

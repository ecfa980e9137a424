import CofferCrypto
import Foundation

/// A record row copied out of SQLite: everything a reader needs to check it against its
/// signed commit and open it, away from the database thread.
///
/// A class: one reference moves more cheaply than a struct of strings and arrays. Its bytes
/// (the plain values' JSON, then the sealed envelope, if any) are stored in the object's own
/// allocation: one `malloc` a row, not two. Nothing in a row changes after
/// ``make(_:plain:sealed:)``.
package final class StoredRow: ManagedBuffer<StoredRow.Fields, UInt8> {
    package struct Fields {
        package let name: String
        package let type: String
        package let parent: String?
        package let epoch: Int64
        package let seq: Int64
        package let membershipSeq: Int64
        package let creatorID: String
        package let modifierID: String
        package let created: Double
        package let modified: Double
        package let plainCount: Int
        package let sealedCount: Int
        package let hasSealed: Bool
    }

    package var name: String { header.name }
    package var type: String { header.type }
    package var parent: String? { header.parent }
    package var epoch: Int64 { header.epoch }
    package var seq: Int64 { header.seq }
    package var membershipSeq: Int64 { header.membershipSeq }
    package var creatorID: String { header.creatorID }
    package var modifierID: String { header.modifierID }
    package var created: Double { header.created }
    package var modified: Double { header.modified }
    package var plainCount: Int { header.plainCount }
    package var hasSealed: Bool { header.hasSealed }

    /// A row whose bytes are `plain` followed by `sealed` (nil when the row has no sealed values).
    package static func make(_ fields: (name: String, type: String, parent: String?, epoch: Int64, seq: Int64, membershipSeq: Int64,
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

    package static func make(name: String, type: String, parent: String?, epoch: Int64, seq: Int64, membershipSeq: Int64, creatorID: String,
                     modifierID: String, created: Double, modified: Double, plain: [UInt8], sealed: [UInt8]?) -> StoredRow {
        plain.withUnsafeBytes { plain in
            RecordReader.withOptionalBytes(sealed) { sealed in
                make((name, type, parent, epoch, seq, membershipSeq, creatorID, modifierID, created, modified), plain: plain, sealed: sealed)
            }
        }
    }

    /// The plain values' JSON followed by the sealed envelope (if any), valid inside `body`.
    package func withBytes<R>(_ body: (UnsafeRawBufferPointer) throws -> R) rethrows -> R {
        try withUnsafeMutablePointerToElements { base in
            try body(UnsafeRawBufferPointer(start: base, count: header.plainCount + header.sealedCount))
        }
    }
}

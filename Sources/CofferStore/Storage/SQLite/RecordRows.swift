import Foundation
import GRDB

/// Record rows read off SQLite statements that select `SQLiteTransaction.recordColumns`: stepped in
/// place, each row copied once into a ``StoredRow`` (what the engine opens and checks).
enum RecordRows {
    /// Runs a statement selecting `SQLiteTransaction.recordColumns` (arguments already bound) and adds each
    /// row it returns, up to `limit` rows, then resets it. With `probe`, returns whether a row
    /// beyond the limit exists (a query's next page); otherwise false.
    @discardableResult
    static func read(_ statement: RawStatement, limit: Int = .max, probe: Bool = false, into add: (StoredRow) -> Void) throws -> Bool {
        var creators: CreatorCache?
        return try read(statement, limit: limit, probe: probe, creators: &creators, into: add)
    }

    /// The last creator and modifier ids read, kept from row to row (and from lookup to lookup)
    /// so that a run of rows by one user shares one `String`.
    struct CreatorCache {
        var creator: (bytes: [UInt8], id: String)?
        var modifier: (bytes: [UInt8], id: String)?
    }

    /// Whether `bytes` are `kept`, byte for byte.
    static func sameBytes(_ bytes: UnsafeRawBufferPointer, _ kept: [UInt8]?) -> Bool {
        guard let kept, kept.count == bytes.count else { return false }
        return kept.withUnsafeBytes { bytes.count == 0 || memcmp($0.baseAddress!, bytes.baseAddress!, bytes.count) == 0 }
    }

    /// The text of `bytes`, as the kept `String` when it is the same as the last one.
    static func cachedText(_ bytes: UnsafeRawBufferPointer, in slot: inout (bytes: [UInt8], id: String)?) -> String {
        if let kept = slot, sameBytes(bytes, kept.bytes) { return kept.id }
        let text = String(decoding: bytes, as: UTF8.self)
        slot = (Array(bytes), text)
        return text
    }

    /// ``read(_:limit:probe:into:)`` for a loop of lookups on one statement: the creator
    /// cache carries over between calls, and with `keepingBindings` the statement is reset
    /// without dropping its bindings (the caller binds every parameter again before the next
    /// call, and calls ``RawStatement/reset()`` once the loop ends).
    @discardableResult
    static func read(_ statement: RawStatement, limit: Int = .max, probe: Bool = false, keepingBindings: Bool = false,
                         creators: inout CreatorCache?, into add: (StoredRow) -> Void) throws -> Bool {
        defer { if keepingBindings { statement.resetKeepingBindings() } else { statement.reset() } }
        var n = 0
        while n < limit {
            guard try statement.step() else { return false }
            add(StoredRow.read(statement, creatorCache: &creators))
            n += 1
        }
        return probe ? try statement.step() : false
    }
}

extension StoredRow {
    /// Reads the current row of a statement selecting `SQLiteTransaction.recordColumns`.
    static func read(_ s: RawStatement, creatorCache: inout RecordRows.CreatorCache?) -> StoredRow {
        // Creators and modifiers repeat from row to row: keep one String for a run of equal ids.
        // The cache is used in place (a copy in and out would retain and release its four values
        // on every row).
        if creatorCache == nil { creatorCache = RecordRows.CreatorCache() }
        let creatorID = RecordRows.cachedText(s.bytes(7), in: &creatorCache!.creator)
        // Most rows were last modified by their creator: one String for both.
        let modifier = s.bytes(8)
        let modifierID = RecordRows.sameBytes(modifier, creatorCache!.creator?.bytes) ? creatorID
            : RecordRows.cachedText(modifier, in: &creatorCache!.modifier)
        let name = s.text(0), type = s.text(1), parent = s.optionalText(2)
        // Each column is read once and in its stored type, so no read converts (and frees) the
        // bytes another pointer here refers to; they stay valid until the next step.
        let sealed: UnsafeRawBufferPointer? = s.isNull(4) ? nil : s.bytes(4)
        return make((name, type, parent, s.int64(5), s.int64(6), s.int64(11), creatorID, modifierID, s.double(9), s.double(10)),
                    plain: s.bytes(3), sealed: sealed)
    }
}

extension StoredRow {
    /// Copies a GRDB row selected with `SQLiteTransaction.recordColumns`.
    package static func make(row: Row) throws -> StoredRow {
        let sealed: Data? = try row.optional(4)
        return make(name: try row.required(0), type: try row.required(1), parent: try row.optional(2), epoch: try row.required(5),
                    seq: try row.required(6), membershipSeq: try row.required(11), creatorID: try row.required(7),
                    modifierID: try row.required(8),
                    created: try row.required(9), modified: try row.required(10), plain: Array((try row.required(3) as String).utf8),
                    sealed: sealed.map(Array.init))
    }
}

import CofferCrypto

/// What a row needs besides itself to be checked and opened, looked up on the database
/// thread (each from a session cache after its first use).
final class RowContext: Sendable {
    let commit: VerifiedCommit
    let schema: [String: FieldSchema]
    /// The zone key of the row's epoch, when it has sealed values: or why there is none. The
    /// error is raised only once the row passed its commit check, so a tampered epoch column
    /// reads as the damage it is, not as a missing key.
    let key: Result<SymmetricKey, any Error>?
    /// `schema.count`, readable from other threads without touching the dictionary's reference count.
    let schemaCount: Int
    /// The session's ``Session/schemaGeneration`` when the context was made.
    let schemaGeneration: Int

    init(commit: VerifiedCommit, schema: [String: FieldSchema], key: Result<SymmetricKey, any Error>?, schemaGeneration: Int = 0) {
        self.commit = commit
        self.schema = schema
        self.key = key
        schemaCount = schema.count
        self.schemaGeneration = schemaGeneration
    }
}

/// What a row's context depends on: its commit, epoch, type and whether it has sealed values.
struct RowContextKey: Hashable {
    let seq: Int64
    let epoch: Int64
    let sealed: Bool
    let type: String

    init(_ row: StoredRow) {
        seq = row.seq
        epoch = row.epoch
        sealed = row.hasSealed
        type = row.type
    }
}

struct SchemaKey: Hashable {
    let zoneRowID: Int64
    let recordType: String
}

/// Zone row id → the contexts of its rows kept between reads (``Session/rowContexts``).
typealias RowContexts = Locked<[Int64: [RowContextKey: RowContext]]>

extension Locked where Value == [Int64: [RowContextKey: RowContext]] {
    /// Drops the kept row contexts of a zone: called wherever the schema or key caches they
    /// were made from change.
    func forget(zoneRowID: Int64) {
        withLock { _ = $0.removeValue(forKey: zoneRowID) }
    }
}

/// Size and count limits, as CloudKit's.
public enum Limits {
    /// A record's fields, at most 1 MiB: keys plus values (UTF-8 of strings, bytes, 8 bytes per number).
    public static let maxRecordBytes = 1 << 20
    /// Records saved and deleted in one batch.
    public static let maxBatchRecords = 400
    /// Bytes of all fields in one batch, at most 2 MiB.
    public static let maxBatchBytes = 2 << 20
    /// Fields (plain and encrypted) of one record.
    public static let maxFieldsPerRecord = 1024
    /// Records a query page returns at most.
    public static let maxQueryLimit = 10_000
    /// The highest sequence of a zone's log entry, and the highest key epoch (2^53): far beyond
    /// any real zone, and low enough that no sequence or epoch read from a store can overflow.
    static let maxLogSequence: Int64 = 1 << 53
}

/// The outcome of a batch.
public struct ModifyResult: Sendable {
    /// The saved records, with their new change tags, in the order given.
    public let saved: [Record]
    /// The names deleted.
    public let deleted: [String]
}

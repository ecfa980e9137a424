/// A record to delete, optionally only if it is still at `changeTag`.
public struct RecordDeletion: Sendable, Hashable {
    public let name: String
    public let changeTag: String?

    public init(name: String, ifMatch changeTag: String? = nil) {
        self.name = name
        self.changeTag = changeTag
    }
}

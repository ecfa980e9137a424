/// A server's store id as a user first met it at one origin, kept in the marks file (as ssh
/// keeps a host key): a server that answers at that origin with another store id, or another
/// origin that answers with a store id pinned here, is refused. See ``MarkBook/checkPin(origin:storeID:)``.
public struct ServerPin: Sendable, Hashable {
    /// The origin in normal form (`https://coffer.example.com:443`).
    public let origin: String
    /// The store's id (16 bytes).
    public let storeID: [UInt8]

    public init(origin: String, storeID: [UInt8]) {
        self.origin = origin
        self.storeID = storeID
    }

    public static let storeIDByteCount = 16
    public static let maxOriginByteCount = 255

    /// Whether `origin` can be a pin's origin: printable ASCII without spaces, `http://` or
    /// `https://`, at most 255 bytes. (The store module writes it in normal form.)
    public static func isNormalOrigin(_ origin: String) -> Bool {
        let bytes = Array(origin.utf8)
        return bytes.count <= maxOriginByteCount && (origin.hasPrefix("http://") || origin.hasPrefix("https://"))
            && bytes.allSatisfy { (0x21...0x7e).contains($0) }
    }

    /// What a store id at an origin is, against the pins.
    public enum Check: Sendable, Equatable {
        /// The origin was pinned to this store id before.
        case known
        /// First contact: the store id is now pinned to the origin.
        case pinned
        /// The origin is pinned to another store id.
        case otherStore(pinned: [UInt8])
        /// The store id is pinned to another origin.
        case pinnedElsewhere(origin: String)
    }
}

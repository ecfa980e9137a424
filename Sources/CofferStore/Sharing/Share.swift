import Foundation

/// What a participant may do in a shared zone.
public enum SharePermission: Int, Sendable, Hashable, CaseIterable, CustomStringConvertible {
    /// No one (for the public permission: the link does not admit anyone).
    case none = 0
    case readOnly = 1
    case readWrite = 2

    public var description: String {
        switch self {
        case .none: return "none"
        case .readOnly: return "read-only"
        case .readWrite: return "read-write"
        }
    }

    /// Parses `none`, `read-only`, `read-write`.
    public init?(name: String) {
        guard let match = Self.allCases.first(where: { $0.description == name }) else { return nil }
        self = match
    }
}

/// A share: one zone, its owner, a title, a public permission and participants (CloudKit's `CKShare`).
public struct Share: Sendable, Hashable {
    public struct Participant: Sendable, Hashable {
        public enum Role: Int, Sendable, Hashable, CustomStringConvertible {
            case owner = 0
            /// Invited by name.
            case privateUser = 1
            /// Joined through the public link.
            case publicUser = 2

            public var description: String {
                switch self {
                case .owner: return "owner"
                case .privateUser: return "private"
                case .publicUser: return "public"
                }
            }
        }

        public enum Status: Int, Sendable, Hashable, CustomStringConvertible {
            case pending = 0
            case accepted = 1
            /// Removed by the owner, or left.
            case removed = 2

            public var description: String {
                switch self {
                case .pending: return "pending"
                case .accepted: return "accepted"
                case .removed: return "removed"
                }
            }
        }

        public let userID: String
        /// The contact's name, when the store knows them.
        public let name: String?
        public let email: String?
        public let role: Role
        public let permission: SharePermission
        public let status: Status
        /// True when the participant left on their own (status `.removed`).
        public let left: Bool
    }

    public let zoneID: ZoneID
    public let title: String
    public let publicPermission: SharePermission
    /// The owner first, then participants by user id.
    public let participants: [Participant]
    /// The URL to send to participants (with the link secret when the public permission is not none).
    public let url: String
    /// The membership version: it grows with every change of the share.
    public let version: Int64
    /// The zone key epoch the share is at.
    public let keyEpoch: Int64
    public let created: Date
    public let modified: Date

    public var owner: Participant { participants[0] }
}

/// Limits of shares.
extension Limits {
    /// Participants of one share, the owner not counted (as CloudKit).
    public static let maxParticipants = 100
    /// A share title.
    public static let maxShareTitleBytes = 1024
}

import CofferVault
import Foundation

/// A user known to the store: the identity from a verified contact card.
public struct Contact: Sendable, Hashable {
    public let identity: UserIdentity
    /// The card's creation time (ISO 8601), as signed.
    public let cardCreated: String
    /// When the card was added to this store.
    public let added: Date

    public var userID: String { identity.userID }
    public var name: String { identity.name }
    public var email: String? { identity.email }
    public var fingerprint: String { identity.fingerprint }
}

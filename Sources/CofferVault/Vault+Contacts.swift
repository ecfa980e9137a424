import CofferCrypto
import Foundation

extension Vault {
    /// The service of the vault items that pin contact cards.
    public static let pinnedContactService = "coffer.contact"

    /// Pins a verified contact card in the vault: an item of service `coffer.contact`, account
    /// the card's user id, with its name and email as attributes and the card as its value (a
    /// newer card of the same user replaces it). Pinned cards are the ones a name or an email
    /// may resolve to when the store is not the user's own (a server's directory holds anyone's
    /// self-signed cards, under any name and email they claim).
    public func pin(_ card: ContactCard) throws {
        let identity = card.identity
        var attributes = ["name": identity.name]
        if let email = identity.email { attributes["email"] = email }
        let value = SecureBytes(copying: card.jsonData())
        let query = VaultItemQuery(service: Self.pinnedContactService, account: identity.userID)
        if items(matching: query).isEmpty {
            try addItem(service: Self.pinnedContactService, account: identity.userID, label: "contact \(identity.name)",
                        attributes: attributes, secret: value)
        } else {
            try updateItems(matching: query, secret: value, label: "contact \(identity.name)", attributes: attributes)
        }
    }

    /// Whether a card of `userID` is pinned.
    public func isPinned(userID: String) -> Bool {
        !items(matching: VaultItemQuery(service: Self.pinnedContactService, account: userID)).isEmpty
    }

    /// The user ids of the pinned cards whose email, or else whose name, is `who` (compared
    /// without case). Each pinned card is verified again: an item whose card does not verify,
    /// or is of another user id than its account, is left out.
    public func pinnedUserIDs(matching who: String) -> [String] {
        let cards = items(matching: VaultItemQuery(service: Self.pinnedContactService)).compactMap { item -> ContactCard? in
            guard let card = try? item.secret.withUnsafeBytes({ try ContactCard.verify(Data($0)) }), card.identity.userID == item.account else { return nil }
            return card
        }
        let wanted = who.lowercased()
        let byEmail = cards.filter { $0.identity.email?.lowercased() == wanted }
        let matches = byEmail.isEmpty ? cards.filter { $0.identity.name.lowercased() == wanted } : byEmail
        return matches.map(\.identity.userID)
    }
}

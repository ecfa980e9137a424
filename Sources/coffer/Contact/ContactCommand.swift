import ArgumentParser
import CofferStore
import CofferVault
import Foundation

extension Coffer {
    struct ContactCommand: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "contact",
            abstract: "Other users' contact cards, kept in the store.",
            subcommands: [Add.self, List.self]
        )
    }
}

/// The JSON shape of a contact.
struct ContactJSON: Encodable {
    let userID: String
    let name: String
    let email: String?
    let fingerprint: String
    let cardCreated: String
    let added: Date

    init(_ contact: Contact) {
        userID = contact.userID
        name = contact.name
        email = contact.email
        fingerprint = contact.fingerprint
        cardCreated = contact.cardCreated
        added = contact.added
    }
}

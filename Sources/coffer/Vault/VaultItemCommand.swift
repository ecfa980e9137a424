import ArgumentParser
import CofferCrypto
import CofferVault
import Foundation

extension Coffer.VaultCommand {
    struct ItemCommand: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "item",
            abstract: "Keychain-like items: secrets kept for a service and account.",
            subcommands: [Add.self, Get.self, List.self, Update.self, Delete.self]
        )
    }
}

/// The JSON shape of an item in `vault item list`: never the secret.
struct ItemJSON: Encodable {
    let service: String
    let account: String
    let label: String
    let itemClass: String
    let attributes: [String: String]
    let created: Date
    let modified: Date

    init(_ item: VaultItem) {
        service = item.service
        account = item.account
        label = item.label
        itemClass = item.itemClass.description
        attributes = item.attributes
        created = item.createdDate
        modified = item.modifiedDate
    }

    enum CodingKeys: String, CodingKey { case service, account, label, itemClass = "class", attributes, created, modified }
}

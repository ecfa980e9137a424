import ArgumentParser
import CofferStore
import CofferVault
import Foundation

extension Coffer.ContactCommand {
    struct Add: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Verify someone's contact card, add it to the store and pin it in your vault.",
            discussion: "Compare the fingerprint it prints with its owner (aloud, or by another channel) before you share with them. Names and emails given to share commands and ZONE@OWNER resolve only to cards you added so (or give the user id).")

        @Argument(help: ArgumentHelp("The card file ('-' for stdin).", valueName: "file")) var file: String
        @OptionGroup var quiet: QuietOption
        @OptionGroup var global: GlobalOptions

        func run() async throws {
            let data: Data
            if file == "-" {
                data = FileHandle.standardInput.readData(ofLength: ContactCard.maxEncodedBytes + 1)
            } else {
                guard FileManager.default.fileExists(atPath: file), let read = FileManager.default.contents(atPath: file) else {
                    throw CLIError(ExitStatus.notFound, "cannot read the contact card \(file)")
                }
                data = read
            }
            let card = try ContactCard.verify(data)
            // The card is also pinned in the vault: names and emails resolve only to pinned cards.
            // A local store takes a card without a vault (there is then no one to pin it for).
            let hasVault = try global.serverURL() != nil || FileManager.default.fileExists(atPath: global.vaultURL.path)
            let vault: Vault? = if hasVault { try global.openVault() } else { nil }
            let store = try await global.openStore(create: true) { try vault ?? global.openVault() }
            let result = try await store.addContact(card)
            try vault?.pin(card)
            let contact = try await store.contact(matching: card.identity.userID)
            quiet.apply()
            if global.json {
                struct Added: Encodable { let result: String; let contact: ContactJSON }
                try Output.json(Added(result: "\(result)", contact: ContactJSON(contact)))
                return
            }
            let who = contact.name + (contact.email.map { " <\($0)>" } ?? "")
            switch result {
            case .added: Output.line("Added \(who).")
            case .updated: Output.line("Updated \(who) with a newer card.")
            case .unchanged: Output.line("\(who) is already known; nothing changed.")
            }
            Output.fields([("User ID", contact.userID), ("Fingerprint", contact.fingerprint)])
        }
    }
}

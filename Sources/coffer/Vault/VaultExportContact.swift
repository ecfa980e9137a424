import ArgumentParser
import CofferVault
import Foundation

extension Coffer.VaultCommand {
    struct ExportContact: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "export-contact",
            abstract: "Print your public contact card (self-signed JSON) for others to 'coffer contact add'.")

        @Option(help: ArgumentHelp("Write the card to this file (it must not exist) instead of stdout.", valueName: "file"))
        var output: String?
        @OptionGroup var global: VaultOptions

        func run() async throws {
            let vault = try global.openVault()
            let card = ContactCard(vault: vault).jsonData()
            guard try Output.file(card, to: output), let output else { return }
            if global.json {
                try Output.json(["file": output, "userID": vault.identity.userID, "fingerprint": vault.identity.fingerprint])
            } else {
                Output.line("Wrote the contact card of \(vault.identity.name) to \(output)")
                Output.line("Fingerprint: \(vault.identity.fingerprint)")
            }
        }
    }
}

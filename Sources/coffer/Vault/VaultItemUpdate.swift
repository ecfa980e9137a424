import ArgumentParser
import CofferCrypto
import CofferVault
import Foundation

extension Coffer.VaultCommand.ItemCommand {
    struct Update: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Replace an item's secret (read from stdin, as item add does) and/or its label.",
            discussion: "The item keeps its created date; its modified date becomes now. With --keep-secret only the label changes.")

        @Option(help: "The service.") var service: String
        @Option(help: "The account.") var account: String
        @Option(help: "A new label.") var label: String?
        @Flag(help: "Keep the secret: change only the label (nothing is read from stdin).") var keepSecret = false
        @OptionGroup var quiet: QuietOption
        @OptionGroup var global: VaultOptions

        func validate() throws {
            if keepSecret && label == nil { throw CLIError.usage("--keep-secret leaves nothing to change: give --label too") }
        }

        func run() async throws {
            let vault = try global.openVault()
            // Missing: 66 before a secret is asked for.
            _ = try vault.item(service: service, account: account)
            let secret = keepSecret ? nil : try SecretInput.read(prompt: "New secret for \(service) (\(account)): ")
            try vault.updateItems(matching: VaultItemQuery(itemClass: .generic, service: service, account: account),
                                  secret: secret, label: label)
            quiet.apply()
            if global.json {
                try Output.json(ItemJSON(try vault.item(service: service, account: account)))
            } else {
                let what = [secret != nil ? "secret" : nil, label != nil ? "label" : nil].compactMap { $0 }.joined(separator: " and ")
                Output.line("Updated the \(what) of the item for \(service) (\(account)).")
            }
        }
    }
}

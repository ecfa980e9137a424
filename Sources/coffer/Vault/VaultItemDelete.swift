import ArgumentParser
import CofferVault

extension Coffer.VaultCommand.ItemCommand {
    struct Delete: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Delete an item.")

        @Option(help: "The service.") var service: String
        @Option(help: "The account.") var account: String
        @OptionGroup var quiet: QuietOption
        @OptionGroup var global: VaultOptions

        func run() async throws {
            let vault = try global.openVault()
            try vault.deleteItems(matching: VaultItemQuery(itemClass: .generic, service: service, account: account))
            quiet.apply()
            if global.json {
                try Output.json(["deleted": ["service": service, "account": account]])
            } else {
                Output.line("Deleted the item for \(service) (\(account)).")
            }
        }
    }
}

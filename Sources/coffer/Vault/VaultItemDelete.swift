import ArgumentParser
import CofferVault

extension Coffer.VaultCommand.ItemCommand {
    struct Delete: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Delete an item.")

        @Option(help: "The service.") var service: String
        @Option(help: "The account.") var account: String
        @OptionGroup var global: GlobalOptions

        func run() async throws {
            let vault = try global.openVault()
            try vault.deleteItems(matching: VaultItemQuery(itemClass: .generic, service: service, account: account))
            if global.json {
                try Output.json(["deleted": ["service": service, "account": account]])
            } else {
                Output.line("Deleted the item for \(service) (\(account)).")
            }
        }
    }
}

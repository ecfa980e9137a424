import ArgumentParser
import CofferVault

extension Coffer.VaultCommand {
    struct Show: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Show your user id, name, email and fingerprint (no secret).")

        @OptionGroup var global: VaultOptions

        func run() async throws {
            let vault = try global.openVault()
            if global.json {
                try Output.json(IdentityJSON(vault.identity))
            } else {
                ShowIdentity.print(vault)
            }
        }
    }
}

import ArgumentParser
import CofferStore

extension Coffer.ContactCommand {
    struct List: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "List the contacts in the store.")

        @OptionGroup var global: GlobalOptions

        func run() async throws {
            let contacts = try await global.openStore(create: false, vault: global.openVault).contacts()
            if global.json {
                try Output.json(["contacts": contacts.map(ContactJSON.init)])
                return
            }
            if contacts.isEmpty {
                Output.line("No contacts. Add one with 'coffer contact add CARD'.")
                return
            }
            Table.print([["NAME", "EMAIL", "USER ID", "FINGERPRINT"]] + contacts.map {
                [$0.name, $0.email ?? "-", $0.userID, $0.fingerprint]
            })
        }
    }
}

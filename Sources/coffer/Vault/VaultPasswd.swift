import ArgumentParser
import CofferVault

extension Coffer.VaultCommand {
    struct Passwd: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Change the vault passphrase (new one from COFFER_NEW_PASSPHRASE or a prompt).",
            discussion: """
                The vault key stays the same, so an old copy of the file still opens with the old passphrase. \
                With --rekey, a new vault key re-seals the body and every key file stops working.
                """)

        @Flag(help: "Also re-key the vault body under a new vault key, dropping all key files.") var rekey = false
        @Option(help: "A new Argon2id cost: interactive, moderate or sensitive.") var kdf: KDFPreset?
        @OptionGroup var global: GlobalOptions

        func run() async throws {
            kdf?.warnIfForTestsOnly()
            let vault = try global.openVault()
            let newPassphrase = try Passphrase.read(fileFlag: nil, environment: global.environment,
                                                    prompt: "New passphrase: ", confirm: true,
                                                    envName: "COFFER_NEW_PASSPHRASE", fileEnvName: "COFFER_NEW_PASSPHRASE_FILE")
            if rekey {
                try vault.rekey(passphrase: newPassphrase, kdf: kdf?.parameters)
            } else {
                try vault.changePassphrase(to: newPassphrase, kdf: kdf?.parameters)
            }
            if global.json {
                struct Changed: Encodable { let userID: String, rekeyed: Bool }
                try Output.json(Changed(userID: vault.identity.userID, rekeyed: rekey))
            } else {
                Output.line(rekey ? "Passphrase changed and vault re-keyed; key files no longer open it."
                                  : "Passphrase changed. Old copies of the file still open with the old passphrase; use --rekey to prevent that.")
            }
        }
    }
}

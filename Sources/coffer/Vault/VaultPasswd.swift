import ArgumentParser
import CofferVault

extension Coffer.VaultCommand {
    struct Passwd: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Change the vault passphrase (new one from COFFER_NEW_PASSPHRASE or a prompt).",
            discussion: """
                The vault key stays the same and key files keep working. With --rekey, a new vault key \
                re-seals the body and key files stop working on this file. Either way the identity keys \
                stay the same, so an old copy of the vault file still opens with the old passphrase (or \
                an old key file) and yields your identity; only a new identity makes old copies worthless.
                """)

        @Flag(help: "Also re-seal the vault under a new vault key, dropping all key files (old copies keep the same identity keys).")
        var rekey = false
        @Option(help: "A new Argon2id cost: interactive, moderate or sensitive.") var kdf: KDFPreset?
        @OptionGroup var quiet: QuietOption
        @OptionGroup var global: VaultOptions

        static let changedMessage = """
            Passphrase changed; key files still open the vault. An old copy of the vault file still opens \
            with the old passphrase and yields your identity (--rekey does not change that).
            """
        static let rekeyedMessage = """
            Passphrase changed and vault re-keyed: key files and the old passphrase no longer open this file. \
            The identity keys are the same, so an old copy of the vault file still opens with the old passphrase \
            or an old key file and yields your identity; only a new identity makes old copies worthless.
            """

        func run() async throws {
            kdf?.warnIfForTestsOnly()
            let vault = try global.openVault()
            let newPassphrase = try Passphrase.read(fileFlag: nil, environment: global.environment,
                                                    prompt: "New passphrase: ", confirm: true,
                                                    envName: "COFFER_NEW_PASSPHRASE", fileEnvName: "COFFER_NEW_PASSPHRASE_FILE")
            PassphraseWarning.warnIfWeak(newPassphrase)
            if rekey {
                try vault.rekey(passphrase: newPassphrase, kdf: kdf?.parameters)
                // The agent's key no longer opens this file: it forgets it.
                _ = try? AgentUnlock.lock(vaultAt: global.vaultURL, environment: global.environment)
            } else {
                try vault.changePassphrase(to: newPassphrase, kdf: kdf?.parameters)
            }
            quiet.apply()
            if global.json {
                struct Changed: Encodable { let userID: String, rekeyed: Bool }
                try Output.json(Changed(userID: vault.identity.userID, rekeyed: rekey))
            } else {
                Output.line(rekey ? Self.rekeyedMessage : Self.changedMessage)
            }
        }
    }
}

import ArgumentParser
import CofferCrypto
import CofferVault
import Foundation

extension Coffer.VaultCommand {
    struct Init: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Create a vault with a new identity (Ed25519 and X25519 keys).",
            discussion: "The passphrase comes from COFFER_PASSPHRASE, --passphrase-file, or a prompt (asked twice).")

        @Option(help: "Your name, as others will see it.") var name: String
        @Option(help: "Your email, by which others can find you.") var email: String?
        @Option(help: "Argon2id cost: interactive, moderate (default) or sensitive.") var kdf: KDFPreset = .moderate
        @OptionGroup var global: VaultOptions

        func run() async throws {
            if global.keyFile != nil { throw CLIError.usage("vault init needs a passphrase; add key files later with 'coffer vault keyfile'") }
            let url = global.vaultURL
            var isFolder: ObjCBool = false
            if FileManager.default.fileExists(atPath: url.path, isDirectory: &isFolder) {
                throw CLIError(ExitStatus.alreadyExists, isFolder.boolValue
                    ? "\(url.path) is a folder; give the path of a new vault file"
                    : "a vault already exists at \(url.path); nothing was changed")
            }
            kdf.warnIfForTestsOnly()
            try global.ensureFolder(for: url)
            let passphrase = try Passphrase.read(fileFlag: global.passphraseFile, environment: global.environment,
                                                 prompt: "New passphrase for \(url.path): ", confirm: true)
            PassphraseWarning.warnIfWeak(passphrase)
            let vault = try Vault.create(at: url, name: name, email: email, passphrase: passphrase, kdf: kdf.parameters)
            if global.json {
                try Output.json(IdentityJSON(vault.identity))
            } else {
                Output.line("Created vault \(url.path)")
                ShowIdentity.print(vault)
            }
        }
    }
}

/// The human form of `vault show`.
enum ShowIdentity {
    static func print(_ vault: Vault) {
        let identity = vault.identity
        var unlock = "passphrase"
        if let kdf = vault.passphraseParameters {
            unlock += " (Argon2id \(KDFPreset.name(of: kdf)): \(kdf.opsLimit) passes, " + (kdf.memoryKiB >= 1024 ? "\(kdf.memoryKiB / 1024) MiB)" : "\(kdf.memoryKiB) KiB)")
        }
        if vault.keyFileCount > 0 { unlock += ", \(vault.keyFileCount) key file\(vault.keyFileCount == 1 ? "" : "s")" }
        Output.fields([
            ("User ID", identity.userID),
            ("Name", identity.name),
            ("Email", identity.email ?? "-"),
            ("Fingerprint", identity.fingerprint),
            ("Created", Output.iso(vault.created)),
            ("Unlocks with", unlock),
            ("Items", String(vault.items().count)),
        ])
    }
}

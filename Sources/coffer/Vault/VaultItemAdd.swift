import ArgumentParser
import CofferCrypto
import CofferVault
import Foundation

extension Coffer.VaultCommand.ItemCommand {
    struct Add: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Add an item; the secret is read from stdin (one trailing newline is dropped).")

        @Option(help: "The service the secret is for.") var service: String
        @Option(help: "The account at that service.") var account: String
        @Option(help: "A label to show in lists.") var label: String?
        @OptionGroup var quiet: QuietOption
        @OptionGroup var global: VaultOptions

        func run() async throws {
            let vault = try global.openVault()
            let secret = try SecretInput.read(prompt: "Secret for \(service) (\(account)): ")
            try vault.addItem(service: service, account: account, label: label, secret: secret)
            quiet.apply()
            if global.json {
                try Output.json(ItemJSON(try vault.item(service: service, account: account)))
            } else {
                Output.line("Added the item for \(service) (\(account)).")
            }
        }
    }
}

/// Reads a secret from stdin (or, on a terminal, a prompt without echo, asked twice) into guarded memory.
enum SecretInput {
    static func read(prompt: String) throws -> SecureBytes {
        if isatty(STDIN_FILENO) != 0, let tty = Terminal.open() {
            defer { tty.close() }
            let secret = try tty.readHidden(prompt: prompt, what: "secret")
            guard secret.count > 0 else { throw CLIError.usage("the secret is empty") }
            let again = try tty.readHidden(prompt: "Repeat the secret: ", what: "secret")
            guard secret == again else { throw CLIError.usage("the secrets do not match; nothing was saved") }
            return secret
        }
        var data = FileHandle.standardInput.readData(ofLength: VaultItem.maxSecretBytes + 3)
        defer { data.resetBytes(in: 0..<data.count) }
        if data.last == 0x0a { data.removeLast(); if data.last == 0x0d { data.removeLast() } }
        guard data.count <= VaultItem.maxSecretBytes else {
            throw CLIError(ExitStatus.dataError, "the secret is larger than \(VaultItem.maxSecretBytes) bytes")
        }
        guard !data.isEmpty else { throw CLIError.usage("no secret on stdin: pipe it in, e.g. 'printf %s \"$TOKEN\" | coffer vault item add …'") }
        return data.withUnsafeBytes { SecureBytes(copying: $0) }
    }
}

import ArgumentParser
import CofferVault
import Foundation

extension Coffer.VaultCommand {
    struct Keyfile: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Make a new 32-byte key file (mode 0600) that also unlocks this vault, for services; list or revoke key files.",
            discussion: """
                A key file's id is 16 hex digits derived from its slot's public salt; it says nothing \
                about the key. --revoke removes that slot: the key file no longer opens this file (an \
                old copy of the vault still opens with it). The last slot that opens the vault cannot \
                be revoked.
                """)

        @Option(help: ArgumentHelp("Where to write a new key file (it must not exist).", valueName: "file"))
        var output: String?
        @Flag(help: "List the key files that open this vault: their ids, no secret.")
        var list = false
        @Option(help: ArgumentHelp("Remove the key-file slot with this id (from --list).", valueName: "id"))
        var revoke: String?
        @OptionGroup var global: VaultOptions

        func validate() throws {
            let given = [output != nil, list, revoke != nil].filter { $0 }.count
            if given == 0 { throw CLIError.usage("give --output FILE (a new key file), --list or --revoke ID") }
            if given > 1 { throw CLIError.usage("give one of --output, --list and --revoke") }
            if output == "-" { throw CLIError.usage("a key file is written to a file, not to stdout: give --output FILE") }
        }

        func run() async throws {
            let vault = try global.openVault()
            if list { return try printList(vault) }
            if let revoke { return try revokeSlot(revoke, of: vault) }
            guard let output else { return }
            let id = try vault.addKeyFile(at: URL(fileURLWithPath: output))
            if global.json {
                struct Written: Encodable { let file: String, keyFiles: Int, id: String }
                try Output.json(Written(file: output, keyFiles: vault.keyFileCount, id: id))
            } else {
                Output.line("Wrote key file \(output) (mode 0600). Anyone holding it can open the vault: guard it.")
                Output.line("Key file id: \(id) ('coffer vault keyfile --revoke \(id)' revokes it).")
            }
        }

        private func printList(_ vault: Vault) throws {
            let ids = vault.keyFiles.map(\.id)
            if global.json {
                struct Listed: Encodable { let keyFiles: [[String: String]], passphrase: Bool }
                try Output.json(Listed(keyFiles: ids.map { ["id": $0] }, passphrase: vault.passphraseParameters != nil))
            } else if ids.isEmpty {
                Output.line("No key files.")
            } else {
                Table.print([["ID"]] + ids.map { [$0] })
            }
        }

        private func revokeSlot(_ id: String, of vault: Vault) throws {
            do {
                try vault.revokeKeyFile(id: id)
            } catch let e as VaultError where e.code == .invalidArguments {
                throw CLIError(ExitStatus.denied, e.message)
            }
            if global.json {
                struct Revoked: Encodable { let revoked: String, keyFiles: Int }
                try Output.json(Revoked(revoked: id, keyFiles: vault.keyFileCount))
            } else {
                Output.line("Revoked key file \(id): it no longer opens \(vault.url.path) (an old copy of the vault still opens with it).")
            }
        }
    }
}

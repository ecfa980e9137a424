import ArgumentParser
import CofferVault
import Foundation

extension Coffer.VaultCommand {
    struct Keyfile: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Make a new 32-byte key file (mode 0600) that also unlocks this vault, for services.")

        @Option(help: ArgumentHelp("Where to write the key file (it must not exist).", valueName: "file"))
        var output: String
        @OptionGroup var global: VaultOptions

        func validate() throws {
            if output == "-" { throw CLIError.usage("a key file is written to a file, not to stdout: give --output FILE") }
        }

        func run() async throws {
            let vault = try global.openVault()
            try vault.addKeyFile(at: URL(fileURLWithPath: output))
            if global.json {
                struct Written: Encodable { let file: String, keyFiles: Int }
                try Output.json(Written(file: output, keyFiles: vault.keyFileCount))
            } else {
                Output.line("Wrote key file \(output) (mode 0600). Anyone holding it can open the vault: guard it.")
            }
        }
    }
}

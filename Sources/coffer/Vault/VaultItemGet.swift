import ArgumentParser
import CofferVault
import Foundation

extension Coffer.VaultCommand.ItemCommand {
    struct Get: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Print an item's secret to stdout (a newline follows only on a terminal).")

        @Option(help: "The service.") var service: String
        @Option(help: "The account.") var account: String
        @OptionGroup var global: GlobalOptions

        func validate() throws {
            if global.json {
                throw CLIError.usage("item get prints the secret itself, and Coffer never puts secrets in JSON; use 'vault item list --json' for metadata")
            }
        }

        func run() async throws {
            let vault = try global.openVault()
            let item = try vault.item(service: service, account: account)
            item.secret.withUnsafeBytes { raw in
                var written = 0
                while written < raw.count {
                    let n = write(STDOUT_FILENO, raw.baseAddress! + written, raw.count - written)
                    if n <= 0 { break }
                    written += n
                }
            }
            if isatty(STDOUT_FILENO) != 0 { Output.line() }
        }
    }
}

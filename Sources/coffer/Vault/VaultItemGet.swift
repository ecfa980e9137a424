import ArgumentParser
import CofferVault
import Foundation

extension Coffer.VaultCommand.ItemCommand {
    struct Get: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Print an item's secret to stdout (a newline follows only on a terminal).",
            discussion: """
                With --json, prints the item as 'vault item list --json' shows it plus its secret: "secret" \
                holds the text when the secret is UTF-8 text, otherwise "secretBase64" holds its bytes. It is \
                the one JSON output whose job is a secret: keep it out of logs and files.
                """)

        @Option(help: "The service.") var service: String
        @Option(help: "The account.") var account: String
        @OptionGroup var global: VaultOptions

        func run() async throws {
            let vault = try global.openVault()
            let item = try vault.item(service: service, account: account)
            if global.json {
                try printJSON(item)
                return
            }
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

        /// The item's metadata and its secret, as one JSON document.
        private func printJSON(_ item: VaultItem) throws {
            var object = try JSONSerialization.jsonObject(with: Output.jsonData(ItemJSON(item))) as? [String: Any] ?? [:]
            item.secret.withUnsafeBytes { raw in
                let bytes = Array(raw)
                if let text = String(validating: bytes, as: UTF8.self) {
                    object["secret"] = text
                } else {
                    object["secretBase64"] = Data(bytes).base64EncodedString()
                }
            }
            try RecordOutput.printJSON(object)
        }
    }
}

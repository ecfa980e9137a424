import ArgumentParser
import CofferVault

extension Coffer.VaultCommand.ItemCommand {
    struct List: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "List items: service, account, label, dates; never the secrets.")

        @Option(help: "Only items for this service.") var service: String?
        @OptionGroup var global: VaultOptions

        func run() async throws {
            let vault = try global.openVault()
            let items = vault.items(matching: VaultItemQuery(service: service))
            if global.json {
                try Output.json(["items": items.map(ItemJSON.init)])
                return
            }
            if items.isEmpty {
                Output.line("No items.")
                return
            }
            let rows = [["SERVICE", "ACCOUNT", "LABEL", "CREATED", "MODIFIED"]] + items.map {
                [$0.service, $0.account, $0.label, Output.iso($0.createdDate), Output.iso($0.modifiedDate)]
            }
            Table.print(rows)
        }
    }
}

/// Plain text columns.
enum Table {
    static func print(_ rows: [[String]]) {
        guard let first = rows.first else { return }
        let widths = first.indices.map { column in rows.map { $0[column].count }.max() ?? 0 }
        for row in rows {
            let cells = row.enumerated().map { i, cell in
                i == row.count - 1 ? cell : cell + String(repeating: " ", count: widths[i] - cell.count)
            }
            Output.line(cells.joined(separator: "  "))
        }
    }
}

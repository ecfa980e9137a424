import ArgumentParser
import CofferCrypto
import CofferStore
import CofferVault
import Foundation

extension Coffer {
    struct ServerCommand: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "server",
            abstract: "The servers you met: the store id each answered with at first contact.",
            discussion: """
                The first time you reach a server, its store id is pinned to the URL you dialled (in \
                your vault's marks file), as ssh pins a host key. Later, a server at that URL with \
                another store id is refused, and so is a server at another URL that answers with a \
                store id pinned here: every request you sign names the URL and the store id, so a \
                server cannot pass on your requests to another, or pose as it.
                """,
            subcommands: [List.self, Forget.self]
        )
    }
}

extension Coffer.ServerCommand {
    struct List: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "List the servers pinned in your marks file, with their store ids.")

        @OptionGroup var global: VaultOptions

        func run() async throws {
            let pins = try Self.pins(of: try global.openVault())
            if global.json {
                try Output.json(["servers": pins.map { ["url": $0.origin, "storeID": Hex.encode($0.storeID)] }])
                return
            }
            if pins.isEmpty {
                Output.line("No server pinned yet: the first command with --server pins its store id.")
                return
            }
            Table.print([["URL", "STORE ID"]] + pins.map { [$0.origin, Hex.encode($0.storeID)] })
        }

        static func pins(of vault: Vault) throws -> [ServerPin] {
            do { return try vault.marks.pins() } catch let error as VaultError {
                throw StoreError(.integrityFailure, "your marks file cannot be read: \(error.message)", underlying: error)
            }
        }
    }

    struct Forget: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Drop the store id pinned for URL, after a deliberate move or restore of that server, so the next contact pins anew.")

        @Argument(help: ArgumentHelp("The server's URL, as you dial it (http://HOST:PORT).", valueName: "url"))
        var url: String

        @OptionGroup var global: VaultOptions
        @OptionGroup var quiet: QuietOption

        func validate() throws {
            do { _ = try ServerOrigin(url) } catch let error as StoreError { throw CLIError.usage(error.message) }
        }

        func run() async throws {
            let origin = try ServerOrigin(url)
            let vault = try global.openVault()
            let dropped: ServerPin?
            do { dropped = try vault.marks.forgetPin(origin: origin.text) } catch let error as VaultError {
                throw StoreError(error.code == .busy ? .busy : .integrityFailure, "your marks file cannot be written: \(error.message)", underlying: error)
            }
            guard let dropped else {
                throw StoreError(.unknownItem, "no server is pinned for \(origin) (see 'coffer server list')")
            }
            quiet.apply()
            if global.json {
                try Output.json(["url": dropped.origin, "storeID": Hex.encode(dropped.storeID)])
            } else {
                Output.line("Forgot store \(Hex.encode(dropped.storeID)) of \(dropped.origin); the next contact pins the store id it answers with.")
            }
        }
    }
}

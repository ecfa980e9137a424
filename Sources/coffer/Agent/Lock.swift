import ArgumentParser
import CofferVault
import Foundation

extension Coffer {
    struct Lock: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Make the unlock agent forget this vault's key now and exit.",
            discussion: "Exit 0 whether or not an agent held the key; the output says which (--json: locked true or false).")

        @OptionGroup var global: VaultOptions

        func run() async throws {
            try global.requireVault()
            let vault = try AgentUnlock.mapErrors { try AgentRuntime.realPath(ofVault: global.vaultURL.path) }
            let locked = try AgentUnlock.lock(vaultAt: global.vaultURL, environment: global.environment)
            if global.json {
                struct Locked: Encodable { let vault: String, locked: Bool }
                try Output.json(Locked(vault: vault, locked: locked))
            } else {
                Output.line(locked ? "Locked: the agent forgot the key of \(vault)." : "No agent held the key of \(vault); nothing to lock.")
            }
        }
    }
}

import CofferVault
import Foundation
import Logging

/// The CLI's side of the unlock agent: a vault opened with the agent's key, and the agent's
/// errors as exit codes.
enum AgentUnlock {
    private static let logger = Logger(label: "coffer.agent")

    /// The vault at `url` opened with the key of the agent that holds it, or nil when no agent
    /// runs for it, it refuses, or its key does not open the file (re-keyed since): then the
    /// caller unlocks the usual way.
    static func openVault(at url: URL, environment: [String: String]) -> Vault? {
        do {
            let client = try VaultAgentClient(vault: url.path, environment: environment)
            return try Vault.open(at: url, vaultKey: client.vaultKey())
        } catch {
            logger.debug("the unlock agent was not used", metadata: ["reason": "\(error)"])
            return nil
        }
    }

    /// Asks the agent of the vault at `url`, if one runs, to forget its key; true if one did.
    @discardableResult
    static func lock(vaultAt url: URL, environment: [String: String]) throws -> Bool {
        do {
            try VaultAgentClient(vault: url.path, environment: environment).lock()
            return true
        } catch let e as AgentError where e.code == .notRunning {
            return false
        } catch let e as AgentError {
            throw cliError(e)
        }
    }

    /// The exit code of an agent error: refused or an unsafe folder 77, a malformed answer 65,
    /// no agent 66, anything else 1.
    static func cliError(_ error: AgentError) -> CLIError {
        switch error.code {
        case .notRunning: return CLIError(ExitStatus.notFound, error.message)
        case .refused, .unsafeFolder: return CLIError(ExitStatus.denied, error.message)
        case .malformed: return CLIError(ExitStatus.dataError, error.message)
        case .io: return CLIError(ExitStatus.failure, error.message)
        }
    }

    /// Runs `body`, turning an agent error into its exit code.
    static func mapErrors<R>(_ body: () throws -> R) throws -> R {
        do { return try body() } catch let e as AgentError { throw cliError(e) }
    }
}

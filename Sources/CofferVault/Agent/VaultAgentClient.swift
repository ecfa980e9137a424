import CofferCrypto
import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// Asks the unlock agent of one vault for its key, its status, or to lock.
///
/// ```swift
/// let client = try VaultAgentClient(vault: url.path, environment: ProcessInfo.processInfo.environment)
/// if let key = try? client.vaultKey() { let vault = try Vault.open(at: url, vaultKey: key) }
/// ```
///
/// The client trusts an agent that runs as this user or as root (who can read any process's
/// memory anyway), by the socket's peer credentials: an agent of another user, which could
/// only hand out a key that does not open the vault, is refused before anything is sent.
package struct VaultAgentClient: Sendable {
    /// The vault's real path, which the agent checks against its own.
    package let vault: String
    package let socketPath: String

    /// - Throws: ``AgentError`` `.notRunning` for a vault that does not exist, `.unsafeFolder`
    ///   for a socket path too long.
    package init(vault path: String, environment: [String: String]) throws {
        vault = try AgentRuntime.realPath(ofVault: path)
        socketPath = try AgentRuntime(environment: environment).socketPath(forVault: vault)
    }

    /// The vault key.
    package func vaultKey() throws -> SymmetricKey {
        switch try ask(.key(vault: vault)) {
        case .key(let key): return key
        case .refused(_, let message): throw AgentError(.refused, message)
        default: throw AgentError(.malformed, "the agent answered a key request with something else")
        }
    }

    /// Which vault, which process, until when.
    package func status() throws -> AgentStatus {
        switch try ask(.status(vault: vault)) {
        case .status(let status): return status
        case .refused(_, let message): throw AgentError(.refused, message)
        default: throw AgentError(.malformed, "the agent answered a status request with something else")
        }
    }

    /// Asks the agent to forget the key and exit; it answers once its socket is gone.
    package func lock() throws {
        switch try ask(.lock(vault: vault)) {
        case .locked: return
        case .refused(_, let message): throw AgentError(.refused, message)
        default: throw AgentError(.malformed, "the agent answered a lock request with something else")
        }
    }

    private func ask(_ request: AgentRequest) throws -> AgentResponse {
        let fd = try AgentSocket.connect(to: socketPath)
        defer { close(fd) }
        let peer = try AgentSocket.peer(of: fd)
        guard peer.uid == getuid() || peer.uid == 0 else {
            throw AgentError(.refused, "the agent's socket \(socketPath) belongs to a process of user id \(peer.uid), not yours; it was not used")
        }
        try AgentSocket.send(fd, request.encoded())
        return try AgentResponse.decode(try AgentSocket.receive(fd))
    }
}

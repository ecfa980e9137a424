/// An error of the unlock agent or its client. The message never holds a key.
package struct AgentError: Error, Sendable, CustomStringConvertible {
    package enum Code: Sendable, Equatable {
        /// No agent answers for this vault: no socket, or a stale one (the agent was killed).
        case notRunning
        /// The agent refused the request (another user, another vault, a malformed request),
        /// or the client refused the agent (it runs as another user).
        case refused
        /// A message that does not follow the protocol.
        case malformed
        /// The runtime folder is not safe to use (another owner, group or others may enter it,
        /// a symbolic link), or the socket's path is too long.
        case unsafeFolder
        /// The system refused (a socket call failed, the agent did not start).
        case io
    }

    package let code: Code
    package let message: String

    package init(_ code: Code, _ message: String) {
        self.code = code
        self.message = message
    }

    package var description: String { message }
}

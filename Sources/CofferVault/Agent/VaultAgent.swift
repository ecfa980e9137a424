import CofferCrypto
import Foundation
import Logging
#if canImport(Glibc)
import Glibc
#endif

/// The unlock agent: holds one vault's key in guarded memory and hands it, over a Unix socket,
/// to processes of the same user, until it expires, is locked, or is stopped.
///
/// ```swift
/// let agent = try VaultAgent(vault: realPath, key: vault.vaultKey, lifetime: 900, runtime: AgentRuntime(environment: env))
/// try agent.serve(stop: signalPipe)   // returns after expiry, a lock request or a byte on `stop`
/// ```
///
/// It serves one connection at a time: each gets one answer and is closed. A peer whose user id
/// (`SO_PEERCRED`, the kernel's word) is not the agent's is refused and logged, with its uid and
/// pid only. When it ends, the key is released (libsodium zeroes it) and the socket removed,
/// if the path still names this agent's socket (a newer agent may have replaced it).
package final class VaultAgent {
    package let vault: String
    package let socketPath: String
    /// When the key is forgotten, on the wall clock (for status); the agent itself counts on a
    /// clock that runs on while the machine sleeps (`CLOCK_BOOTTIME`).
    package let expires: Date
    private var key: SymmetricKey?
    private let deadline: Double
    private let listener: Int32
    private let socketFile: FileIdentity
    private let logger: Logger
    private let uid = getuid()

    /// Checks the runtime folder (made if missing), and listens at the vault's socket, replacing
    /// any socket left there. `lifetime` is in seconds.
    ///
    /// - Throws: ``AgentError`` `.unsafeFolder`, `.io`.
    package init(vault: String, key: SymmetricKey, lifetime: Int, runtime: AgentRuntime,
                 logger: Logger = Vault.disabledLogger) throws {
        try runtime.prepareFolder()
        self.vault = vault
        self.key = key
        self.logger = logger
        socketPath = try runtime.socketPath(forVault: vault)
        (listener, socketFile) = try AgentSocket.listen(at: socketPath)
        deadline = Self.now() + Double(lifetime)
        expires = Date().addingTimeInterval(Double(lifetime))
        logger.info("agent started", metadata: ["pid": "\(getpid())", "seconds": "\(lifetime)"])
    }

    deinit { close(listener) }

    /// Seconds on `CLOCK_BOOTTIME`.
    private static func now() -> Double {
        var t = timespec()
        clock_gettime(CLOCK_BOOTTIME, &t)
        return Double(t.tv_sec) + Double(t.tv_nsec) / 1e9
    }

    /// How the agent stopped.
    package enum Ending: String, Sendable {
        case expired, locked, stopped
        /// Its socket was removed or replaced by another agent's.
        case replaced
    }

    /// Serves until the key expires, a lock request comes, `stop` becomes readable (a signal
    /// handler writes to it) or the socket is no longer this agent's. Then forgets the key and
    /// removes the socket.
    @discardableResult
    package func serve(stop: Int32) -> Ending {
        let ending = loop(stop: stop)
        forget()
        logger.info("agent ended", metadata: ["reason": "\(ending.rawValue)"])
        return ending
    }

    private func loop(stop: Int32) -> Ending {
        while true {
            let remaining = deadline - Self.now()
            if remaining <= 0 { return .expired }
            // Wakes at least every 5 s to see that the socket is still this agent's.
            let wait = Int32(min(remaining * 1000, 5000).rounded(.up))
            var fds = [pollfd(fd: listener, events: Int16(POLLIN), revents: 0), pollfd(fd: stop, events: Int16(POLLIN), revents: 0)]
            let ready = poll(&fds, 2, wait)
            if ready < 0 && errno != EINTR { return .stopped }
            if fds[1].revents != 0 { return .stopped }
            if FileIdentity(socketPath) != socketFile { return .replaced }
            if fds[0].revents & Int16(POLLIN) != 0, handleConnection() { return .locked }
        }
    }

    /// Accepts one connection and answers it; true when it asked to lock.
    private func handleConnection() -> Bool {
        let fd = accept(listener, nil, nil)
        guard fd >= 0 else { return false }
        _ = fcntl(fd, F_SETFD, FD_CLOEXEC)
        defer { close(fd) }
        AgentSocket.setTimeouts(fd)
        guard let peer = try? AgentSocket.peer(of: fd) else { return false }
        let request: AgentRequest
        do {
            let body = try AgentSocket.receive(fd)
            request = try AgentRequest.decode(body.unsafeCopiedBytes())
        } catch {
            if peer.uid != uid { refuseOtherUser(fd, peer); return false }
            logger.notice("agent refused a malformed request", metadata: ["pid": "\(peer.pid)"])
            try? AgentSocket.send(fd, AgentResponse.refused(.malformed, "malformed request: \(error)").encoded())
            return false
        }
        guard peer.uid == uid else { refuseOtherUser(fd, peer); return false }
        guard request.vault == vault else {
            try? AgentSocket.send(fd, AgentResponse.refused(.otherVault, "this agent holds the key of \(vault), not of \(request.vault)").encoded())
            return false
        }
        switch request {
        case .key:
            guard let key else { return false }
            logger.debug("agent gave the vault key", metadata: ["pid": "\(peer.pid)"])
            try? AgentSocket.send(fd, AgentResponse.key(key).encoded())
            return false
        case .status:
            try? AgentSocket.send(fd, AgentResponse.status(AgentStatus(vault: vault, pid: getpid(), expires: expires)).encoded())
            return false
        case .lock:
            // Forget first, answer after: once the client hears "locked", no key and no socket remain.
            forget()
            try? AgentSocket.send(fd, AgentResponse.locked.encoded())
            return true
        }
    }

    private func refuseOtherUser(_ fd: Int32, _ peer: AgentSocket.Peer) {
        logger.warning("agent refused a process of another user", metadata: ["uid": "\(peer.uid)", "pid": "\(peer.pid)"])
        try? AgentSocket.send(fd, AgentResponse.refused(.otherUser, "this agent serves only user id \(uid); the request came from user id \(peer.uid)").encoded())
    }

    /// Releases the key (libsodium zeroes its guarded memory) and removes the socket if it is
    /// still this agent's.
    private func forget() {
        key = nil
        if FileIdentity(socketPath) == socketFile { unlink(socketPath) }
    }
}

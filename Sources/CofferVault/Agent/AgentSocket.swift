import CofferCrypto
import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// The Unix-socket calls of the unlock agent and its client: listen, connect, the peer's
/// credentials, and frames (``AgentFrame``) read and written whole, with a time limit.
package enum AgentSocket {
    /// The size of `sockaddr_un.sun_path`, the terminating zero included.
    static let maxPathBytes = 108
    /// How long a read or a write on a connection may wait.
    static let ioTimeoutSeconds = 2
    /// How long a client waits for an answer: longer than the agent gives one connection, so a
    /// client queued behind a silent one is still answered.
    static let clientTimeoutSeconds = 5

    /// Who is at the other end of a connection (`SO_PEERCRED`: the kernel's word, not the peer's).
    package struct Peer: Sendable {
        package let pid: Int32
        package let uid: UInt32
    }

    /// `struct ucred`, which Swift's Glibc module does not import.
    private struct UCred {
        var pid: Int32 = 0
        var uid: UInt32 = 0
        var gid: UInt32 = 0
    }

    package static func peer(of fd: Int32) throws -> Peer {
        var cred = UCred()
        var length = socklen_t(MemoryLayout<UCred>.size)
        guard getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &length) == 0, length == socklen_t(MemoryLayout<UCred>.size) else {
            throw AgentError(.io, "cannot read the credentials of the socket's peer: \(String(cString: strerror(errno)))")
        }
        return Peer(pid: cred.pid, uid: cred.uid)
    }

    private static func newSocket() throws -> Int32 {
        let fd = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard fd >= 0 else { throw AgentError(.io, "cannot make a Unix socket: \(String(cString: strerror(errno)))") }
        return fd
    }

    private static func withAddress<R>(_ path: String, _ body: (UnsafePointer<sockaddr>, socklen_t) -> R) throws -> R {
        let bytes = Array(path.utf8)
        guard bytes.count < maxPathBytes else { throw AgentError(.unsafeFolder, "the socket path \(path) is too long") }
        var address = sockaddr_un()
        address.sun_family = sa_family_t(AF_UNIX)
        withUnsafeMutableBytes(of: &address.sun_path) { sunPath in
            sunPath.copyBytes(from: bytes)
            sunPath[bytes.count] = 0
        }
        return withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { body($0, socklen_t(MemoryLayout<sockaddr_un>.size)) }
        }
    }

    /// Sets the read and write time limits of `fd`.
    static func setTimeouts(_ fd: Int32, seconds: Int = ioTimeoutSeconds) {
        var limit = timeval(tv_sec: seconds, tv_usec: 0)
        _ = setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &limit, socklen_t(MemoryLayout<timeval>.size))
        _ = setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &limit, socklen_t(MemoryLayout<timeval>.size))
    }

    /// Connects to the agent's socket at `path`. No socket there, or one nobody listens on (an
    /// agent that was killed), is `.notRunning`.
    package static func connect(to path: String) throws -> Int32 {
        let fd = try newSocket()
        setTimeouts(fd, seconds: clientTimeoutSeconds)
        let result = try withAddress(path) { Glibc.connect(fd, $0, $1) }
        guard result == 0 else {
            let code = errno
            close(fd)
            if code == ENOENT || code == ECONNREFUSED || code == ENOTDIR {
                throw AgentError(.notRunning, code == ECONNREFUSED ? "the agent's socket \(path) is stale: no agent listens on it" : "no agent runs for this vault")
            }
            throw AgentError(.io, "cannot connect to the agent's socket \(path): \(String(cString: strerror(code)))")
        }
        return fd
    }

    /// A listening socket at `path`, mode 0600: bound under a temporary name in the same
    /// folder, then renamed over `path`, so that it replaces a stale socket at once and a client
    /// never finds one with a looser mode. Returns the socket and the file's identity, by which
    /// the agent later removes only its own socket.
    package static func listen(at path: String) throws -> (fd: Int32, file: FileIdentity) {
        let fd = try newSocket()
        let temporary = path + "." + Hex.encode(SecureRandom.bytes(count: 4))
        var ok = false
        defer {
            if !ok {
                unlink(temporary)
                close(fd)
            }
        }
        let saved = umask(0o177)
        let bound = try withAddress(temporary) { bind(fd, $0, $1) }
        let bindError = errno
        umask(saved)
        guard bound == 0 else { throw AgentError(.io, "cannot make the socket \(temporary): \(String(cString: strerror(bindError)))") }
        guard chmod(temporary, 0o600) == 0, Glibc.listen(fd, 16) == 0 else {
            throw AgentError(.io, "cannot listen on \(temporary): \(String(cString: strerror(errno)))")
        }
        guard rename(temporary, path) == 0 else {
            throw AgentError(.io, "cannot put the socket at \(path): \(String(cString: strerror(errno)))")
        }
        ok = true
        guard let file = FileIdentity(path) else { throw AgentError(.io, "the socket \(path) vanished as it was made") }
        return (fd, file)
    }

    /// Writes a frame: the length, then `body` from guarded memory.
    package static func send(_ fd: Int32, _ body: SecureBytes) throws {
        precondition(body.count <= AgentFrame.maxBody, "agent frame too large")
        try writeAll(fd, BigEndian.bytes(UInt32(body.count)).withUnsafeBytes { Array($0) })
        try body.withUnsafeBytes { try writeAll(fd, $0) }
    }

    package static func send(_ fd: Int32, _ body: [UInt8]) throws {
        try send(fd, SecureBytes(copying: body))
    }

    private static func writeAll(_ fd: Int32, _ bytes: [UInt8]) throws {
        try bytes.withUnsafeBytes { try writeAll(fd, $0) }
    }

    private static func writeAll(_ fd: Int32, _ raw: UnsafeRawBufferPointer) throws {
        var written = 0
        while written < raw.count {
            let n = Glibc.send(fd, raw.baseAddress! + written, raw.count - written, Int32(MSG_NOSIGNAL))
            if n < 0 {
                if errno == EINTR { continue }
                throw AgentError(.io, "cannot write to the agent's socket: \(String(cString: strerror(errno)))")
            }
            written += n
        }
    }

    /// Reads one frame into guarded memory. A length of 0 or over ``AgentFrame/maxBody``, or a
    /// connection that ends early or stays silent past the time limit, fails.
    package static func receive(_ fd: Int32) throws -> SecureBytes {
        var header = [UInt8](repeating: 0, count: 4)
        try header.withUnsafeMutableBytes { try readAll(fd, $0) }
        let length = header.reduce(0) { $0 << 8 | Int($1) }
        guard (1...AgentFrame.maxBody).contains(length) else {
            throw AgentError(.malformed, "an agent message of \(length) bytes is out of bounds")
        }
        // A failed read zeroes and frees what it read.
        return try SecureBytes(count: length) { try readAll(fd, $0) }
    }

    private static func readAll(_ fd: Int32, _ buffer: UnsafeMutableRawBufferPointer) throws {
        var total = 0
        while total < buffer.count {
            let n = recv(fd, buffer.baseAddress! + total, buffer.count - total, 0)
            if n < 0 {
                if errno == EINTR { continue }
                if errno == EAGAIN || errno == EWOULDBLOCK { throw AgentError(.io, "the other end of the agent's socket stayed silent too long") }
                throw AgentError(.io, "cannot read the agent's socket: \(String(cString: strerror(errno)))")
            }
            if n == 0 { throw AgentError(.malformed, "the connection to the agent closed in the middle of a message") }
            total += n
        }
    }
}

/// A file's device and inode: which file a path names now.
package struct FileIdentity: Equatable, Sendable {
    let device: UInt64
    let inode: UInt64

    /// The file at `path` now (not following a symbolic link), if any.
    package init?(_ path: String) {
        var st = stat()
        guard lstat(path, &st) == 0 else { return nil }
        device = UInt64(st.st_dev)
        inode = UInt64(st.st_ino)
    }
}

import CofferCrypto
import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// Where unlock agents put their sockets: `$XDG_RUNTIME_DIR/coffer/`, or, where
/// `XDG_RUNTIME_DIR` is unset or not absolute (as for root), `/tmp/coffer-UID/`. One socket per
/// vault, named from a hash of the vault's real path.
package struct AgentRuntime: Sendable {
    /// The folder that holds the sockets.
    package let folder: String
    /// The folder it lives in, which must exist (`$XDG_RUNTIME_DIR`, or `/tmp`).
    let parent: String

    package init(environment: [String: String]) {
        if let xdg = environment["XDG_RUNTIME_DIR"], xdg.hasPrefix("/") {
            parent = xdg
            folder = (xdg.hasSuffix("/") ? xdg : xdg + "/") + "coffer"
        } else {
            parent = "/tmp"
            folder = "/tmp/coffer-\(getuid())"
        }
    }

    /// The real path of the vault at `path` (symbolic links and `..` resolved), which names its
    /// agent whichever way the path was written.
    package static func realPath(ofVault path: String) throws -> String {
        guard let resolved = realpath(path, nil) else {
            if errno == ENOENT { throw AgentError(.notRunning, "no vault at \(path)") }
            throw AgentError(.io, "cannot resolve \(path): \(String(cString: strerror(errno)))")
        }
        defer { free(resolved) }
        return String(cString: resolved)
    }

    /// The socket of the agent for the vault whose real path is `vault`: 20 hex digits of
    /// BLAKE2b over `coffer.agent.v1` and the path, then `.sock`.
    package func socketPath(forVault vault: String) throws -> String {
        let hash = BLAKE2b.hash(Array("coffer.agent.v1\0".utf8) + Array(vault.utf8), outputByteCount: 16)
        let path = folder + "/" + Hex.encode(hash.prefix(10)) + ".sock"
        // The agent binds `<path>.<8 hex digits>` first, then renames it (``AgentSocket/listen(at:)``).
        let longest = AgentSocket.maxPathBytes - 1 - 9
        guard path.utf8.count <= longest else {
            throw AgentError(.unsafeFolder, "the agent's socket path \(path) is too long for a Unix socket (at most \(longest) bytes here); set XDG_RUNTIME_DIR to a shorter folder")
        }
        return path
    }

    /// Makes the folder (mode 0700) if it is missing, then checks that this user alone may use
    /// it: a folder, not a symbolic link, owned by this user, mode 0700. Refuses anything else
    /// rather than repair it, since another user may have made it to catch the socket.
    package func prepareFolder() throws {
        var st = stat()
        if lstat(parent, &st) != 0 || (st.st_mode & S_IFMT) != S_IFDIR {
            throw AgentError(.unsafeFolder, "\(parent) is not a folder; the unlock agent keeps its socket in $XDG_RUNTIME_DIR/coffer, or /tmp/coffer-UID when XDG_RUNTIME_DIR is unset")
        }
        if mkdir(folder, 0o700) == 0 {
            _ = chmod(folder, 0o700) // whatever the umask
        } else if errno != EEXIST {
            throw AgentError(.io, "cannot create \(folder): \(String(cString: strerror(errno)))")
        }
        try checkFolder()
    }

    /// Refuses a folder that is a symbolic link, not a folder, owned by another user, or open to others.
    package func checkFolder() throws {
        var st = stat()
        guard lstat(folder, &st) == 0 else {
            throw AgentError(.io, "cannot read \(folder): \(String(cString: strerror(errno)))")
        }
        let kind = st.st_mode & S_IFMT
        if kind == S_IFLNK { throw AgentError(.unsafeFolder, "refusing \(folder): it is a symbolic link; remove it and run 'coffer unlock' again") }
        guard kind == S_IFDIR else { throw AgentError(.unsafeFolder, "refusing \(folder): it is not a folder; remove it and run 'coffer unlock' again") }
        guard st.st_uid == getuid() else {
            throw AgentError(.unsafeFolder, "refusing \(folder): it belongs to user id \(st.st_uid), not to you (\(getuid())); another user may have made it to catch the agent's socket")
        }
        let mode = st.st_mode & 0o7777
        guard mode == 0o700 else {
            throw AgentError(.unsafeFolder, "refusing \(folder): its mode is 0\(String(mode, radix: 8)), not 0700; 'chmod 700 \(folder)' if you made it so")
        }
    }
}

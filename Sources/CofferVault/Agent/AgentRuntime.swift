import CofferCrypto
import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// Where unlock agents put their sockets: `$XDG_RUNTIME_DIR/coffer/`, or, where
/// `XDG_RUNTIME_DIR` is unset or not absolute (as for root), `/tmp/coffer-UID/`. Another local
/// user can make `/tmp/coffer-UID` first: when it is there and unusable (a symbolic link, not a
/// folder, another user's, another mode than 0700), the sockets go to a folder under the user's
/// home instead, `$XDG_CACHE_HOME/coffer/agent/` (or `~/.cache/coffer/agent/`), and every
/// command that looks for an agent decides the same way. One socket per vault, named from a hash
/// of the vault's real path.
package struct AgentRuntime: Sendable {
    /// The folder that holds the sockets.
    package let folder: String
    /// The folder it lives in, which must exist (`$XDG_RUNTIME_DIR`, or `/tmp`), or, for the
    /// folder under the home, is made (mode 0700) when missing.
    let parent: String
    /// Whether ``folder`` is the one under the home, because `/tmp/coffer-UID` is unusable.
    package let isFallback: Bool
    /// For the folder under the home: why `/tmp/coffer-UID` is not used, and where the socket is
    /// instead (one line, for standard error).
    package let note: String?

    package init(environment: [String: String]) {
        if let xdg = environment["XDG_RUNTIME_DIR"], xdg.hasPrefix("/") {
            parent = xdg
            folder = (xdg.hasSuffix("/") ? xdg : xdg + "/") + "coffer"
            isFallback = false
            note = nil
            return
        }
        let shared = "/tmp/coffer-\(getuid())"
        if let problem = Self.problem(with: shared), let home = Self.homeFolder(environment) {
            parent = home + "/coffer"
            folder = parent + "/agent"
            isFallback = true
            note = "note: \(shared) \(problem); the agent's socket is in \(folder)"
        } else {
            parent = "/tmp"
            folder = shared
            isFallback = false
            note = nil
        }
    }

    /// The environment an agent started for this runtime needs to find its folder again:
    /// `XDG_RUNTIME_DIR`, and for the folder under the home, `HOME` and `XDG_CACHE_HOME`.
    package static func agentEnvironment(_ environment: [String: String]) -> [String: String] {
        var kept = [String: String]()
        if let xdg = environment["XDG_RUNTIME_DIR"] { kept["XDG_RUNTIME_DIR"] = xdg }
        if AgentRuntime(environment: environment).isFallback {
            for name in ["HOME", "XDG_CACHE_HOME"] { kept[name] = environment[name] }
        }
        return kept
    }

    /// `$XDG_CACHE_HOME`, else `$HOME/.cache`, when absolute; nil without either.
    static func homeFolder(_ environment: [String: String]) -> String? {
        func trimmed(_ path: String) -> String { path.count > 1 && path.hasSuffix("/") ? String(path.dropLast()) : path }
        if let cache = environment["XDG_CACHE_HOME"], cache.hasPrefix("/") { return trimmed(cache) }
        if let home = environment["HOME"], home.hasPrefix("/"), home != "/" { return trimmed(home) + "/.cache" }
        return nil
    }

    /// Why the folder at `path` cannot hold this user's sockets (a symbolic link, not a folder,
    /// another user's, another mode than 0700); nil when it is missing or usable.
    static func problem(with path: String) -> String? {
        var st = stat()
        guard lstat(path, &st) == 0 else { return nil }
        let kind = st.st_mode & S_IFMT
        if kind == S_IFLNK { return "is a symbolic link" }
        guard kind == S_IFDIR else { return "is not a folder" }
        guard st.st_uid == getuid() else { return "belongs to another user (user id \(st.st_uid))" }
        let mode = st.st_mode & 0o7777
        guard mode == 0o700 else { return "has mode 0\(String(mode, radix: 8)), not 0700" }
        return nil
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
        if isFallback {
            // `~/.cache` and `~/.cache/coffer`, made for this user alone when missing.
            let cache = String(parent.dropLast("/coffer".count))
            for path in [cache, parent] where mkdir(path, 0o700) != 0 && errno != EEXIST {
                throw AgentError(.io, "cannot create \(path): \(String(cString: strerror(errno)))")
            }
        }
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

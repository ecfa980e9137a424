import CofferCrypto
import CofferVault
import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// Starts the unlock agent: this same program (`/proc/self/exe agent-run`) in a new session, so
/// that it outlives the terminal. Swift cannot `fork` safely, hence `posix_spawn`.
///
/// The child's standard input is a pipe that carries the 32-byte vault key, never its argv or
/// environment (it gets only `XDG_RUNTIME_DIR`, and `HOME` and `XDG_CACHE_HOME` when its socket
/// goes under the home, see ``AgentRuntime``); its standard output is a pipe on which it
/// reports one line once it listens (``AgentReadiness``), or why it could not; its standard error
/// is `/dev/null`, or the file `COFFER_AGENT_LOG` names (appended to, mode 0600).
enum AgentLauncher {
    /// How long `unlock` waits for the agent to report.
    static let readyTimeout: Int32 = 10_000

    /// `POSIX_SPAWN_SETSID` (glibc 2.26), which Swift's Glibc module does not import.
    private static let spawnSetSID: Int16 = 0x80

    private typealias AddClosefrom = @convention(c) (UnsafeMutablePointer<posix_spawn_file_actions_t>, Int32) -> Int32

    /// glibc's `posix_spawn_file_actions_addclosefrom_np` (2.34), which Swift's Glibc module does not declare.
    private static let addClosefrom: AddClosefrom? = {
        guard let symbol = dlsym(dlopen(nil, RTLD_NOW), "posix_spawn_file_actions_addclosefrom_np") else { return nil }
        return unsafeBitCast(symbol, to: AddClosefrom.self)
    }()

    /// Starts an agent for the vault whose real path is `vault`, hands it `key`, and waits until
    /// it listens.
    static func start(vault: String, key: SymmetricKey, seconds: Int, environment: [String: String]) throws -> AgentReadiness {
        _ = signal(SIGPIPE, SIG_IGN) // an agent that dies before reading the key
        let keyPipe = try pipePair(), readyPipe = try pipePair()
        let errorFD = openLog(environment["COFFER_AGENT_LOG"])
        defer { if errorFD >= 0 { close(errorFD) } }
        guard errorFD >= 0 else {
            for fd in [keyPipe.0, keyPipe.1, readyPipe.0, readyPipe.1] { close(fd) }
            throw CLIError(ExitStatus.failure, "cannot open the agent's log \(environment["COFFER_AGENT_LOG"] ?? "/dev/null"): \(String(cString: strerror(errno)))")
        }

        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        posix_spawn_file_actions_adddup2(&actions, keyPipe.read, 0)
        posix_spawn_file_actions_adddup2(&actions, readyPipe.write, 1)
        posix_spawn_file_actions_adddup2(&actions, errorFD, 2)
        if let addClosefrom { _ = addClosefrom(&actions, 3) } // the pipes are close-on-exec anyway

        var attributes = posix_spawnattr_t()
        posix_spawnattr_init(&attributes)
        defer { posix_spawnattr_destroy(&attributes) }
        var none = sigset_t(), defaults = sigset_t()
        sigemptyset(&none)
        sigemptyset(&defaults)
        for signal in [SIGTERM, SIGINT, SIGHUP, SIGPIPE] { sigaddset(&defaults, signal) }
        posix_spawnattr_setsigmask(&attributes, &none)
        posix_spawnattr_setsigdefault(&attributes, &defaults)
        posix_spawnattr_setflags(&attributes, spawnSetSID | Int16(POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF))

        let arguments = ["coffer", "agent-run", "--vault", vault, "--seconds", String(seconds)]
        let environmentLines = AgentRuntime.agentEnvironment(environment).sorted { $0.key < $1.key }.map { "\($0.key)=\($0.value)" }
        let argv: [UnsafeMutablePointer<CChar>?] = arguments.map { strdup($0) } + [nil]
        let envp: [UnsafeMutablePointer<CChar>?] = environmentLines.map { strdup($0) } + [nil]
        defer { for pointer in argv + envp { free(pointer) } }
        var pid: pid_t = 0
        let spawned = posix_spawn(&pid, "/proc/self/exe", &actions, &attributes, argv, envp)
        close(keyPipe.read)
        close(readyPipe.write)
        defer { close(readyPipe.read) }
        guard spawned == 0 else {
            close(keyPipe.write)
            throw CLIError(ExitStatus.failure, "cannot start the unlock agent: \(String(cString: strerror(spawned)))")
        }
        let sent = key.withUnsafeBytes { writeAll(keyPipe.write, $0) }
        close(keyPipe.write)
        guard sent else { throw CLIError(ExitStatus.failure, "the unlock agent exited before it took the key") }
        return try AgentReadiness.read(from: readyPipe.read, pid: pid, timeout: readyTimeout)
    }

    private static func pipePair() throws -> (read: Int32, write: Int32) {
        var fds: [Int32] = [-1, -1]
        guard pipe(&fds) == 0 else { throw CLIError(ExitStatus.failure, "cannot make a pipe: \(String(cString: strerror(errno)))") }
        for fd in fds { _ = fcntl(fd, F_SETFD, FD_CLOEXEC) }
        return (fds[0], fds[1])
    }

    private static func openLog(_ path: String?) -> Int32 {
        guard let path, !path.isEmpty else { return open("/dev/null", O_WRONLY | O_CLOEXEC) }
        return open(path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0o600)
    }

    private static func writeAll(_ fd: Int32, _ raw: UnsafeRawBufferPointer) -> Bool {
        var written = 0
        while written < raw.count {
            let n = write(fd, raw.baseAddress! + written, raw.count - written)
            if n < 0 && errno == EINTR { continue }
            if n <= 0 { return false }
            written += n
        }
        return true
    }
}

/// The one line the agent writes on its standard output when it starts:
/// `ready TAB pid TAB expiry (ms since 1970) TAB socket path`, or `error TAB exit code TAB message`.
struct AgentReadiness {
    let pid: Int32
    let expires: Date
    let socket: String

    static func readyLine(pid: Int32, expires: Date, socket: String) -> String {
        "ready\t\(pid)\t\(Int64((expires.timeIntervalSince1970 * 1000).rounded()))\t\(socket)\n"
    }

    static func errorLine(status: Int32, message: String) -> String {
        "error\t\(status)\t\(Output.oneLine(message))\n"
    }

    /// Reads the line from `fd`, waiting at most `timeout` ms.
    static func read(from fd: Int32, pid: Int32, timeout: Int32) throws -> AgentReadiness {
        var bytes = [UInt8]()
        var buffer = [UInt8](repeating: 0, count: 4096)
        let end = ContinuousClock.now + .milliseconds(Int(timeout))
        while !bytes.contains(0x0a) && bytes.count < 65536 {
            let left = end - ContinuousClock.now
            guard left > .zero else {
                kill(pid, SIGTERM)
                throw CLIError(ExitStatus.failure, "the unlock agent did not report within \(timeout / 1000) s; it was stopped")
            }
            var pfd = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
            let waitMS = Int32(left.components.seconds * 1000 + left.components.attoseconds / 1_000_000_000_000_000)
            if poll(&pfd, 1, max(waitMS, 1)) <= 0 { continue }
            let n = buffer.withUnsafeMutableBytes { Glibc.read(fd, $0.baseAddress!, $0.count) }
            if n < 0 && errno == EINTR { continue }
            if n <= 0 { break }
            bytes += buffer[0..<n]
        }
        let line = String(decoding: bytes.prefix { $0 != 0x0a }, as: UTF8.self)
        let parts = line.split(separator: "\t", maxSplits: 3, omittingEmptySubsequences: false).map(String.init)
        if parts.count == 4, parts[0] == "ready", let readyPID = Int32(parts[1]), readyPID == pid, let millis = Int64(parts[2]) {
            return AgentReadiness(pid: pid, expires: Date(timeIntervalSince1970: Double(millis) / 1000), socket: parts[3])
        }
        if parts.count == 3, parts[0] == "error", let status = Int32(parts[1]) {
            throw CLIError(status, parts[2])
        }
        var status: Int32 = 0
        let exited = waitpid(pid, &status, WNOHANG) == pid
        throw CLIError(ExitStatus.failure, exited ? "the unlock agent exited before it was ready" : "the unlock agent did not say it was ready")
    }
}

import ArgumentParser
import CofferCrypto
import CofferVault
import Foundation
import Logging
#if canImport(Glibc)
import Glibc
#endif

extension Coffer {
    /// The unlock agent's process, which `coffer unlock` starts (see ``AgentLauncher``); not for
    /// people, so hidden from help.
    struct AgentRun: ParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "agent-run",
            abstract: "The unlock agent's process; 'coffer unlock' starts it.",
            shouldDisplay: false)

        @Option(help: "The vault's real path.") var vault: String
        @Option(help: "Seconds to keep the key.") var seconds: Int

        func validate() throws {
            guard (1...AgentDuration.maximum).contains(seconds) else { throw CLIError.usage("--seconds is 1 to \(AgentDuration.maximum)") }
        }

        func run() throws {
            // Before the key arrives: no core dump, and no ptrace or /proc/PID/mem by processes of
            // this user (root still can).
            AgentProcess.hardenMemory()
            guard isatty(STDIN_FILENO) == 0 else {
                throw CLIError.usage("agent-run is started by 'coffer unlock', which hands it the vault key; run that instead")
            }
            let stop = AgentProcess.stopOnSignals()
            let agent: VaultAgent
            do {
                agent = try makeAgent()
            } catch {
                let (status, message) = ErrorReporter.describe(error)
                let failure = (error as? AgentError).map(AgentUnlock.cliError)
                AgentProcess.report(AgentReadiness.errorLine(status: failure?.status ?? status ?? ExitStatus.failure,
                                                             message: failure?.message ?? message ?? "\(error)"))
                throw ExitCode(failure?.status ?? status ?? ExitStatus.failure)
            }
            _ = chdir("/")
            AgentProcess.report(AgentReadiness.readyLine(pid: getpid(), expires: agent.expires, socket: agent.socketPath))
            agent.serve(stop: stop)
        }

        /// Reads the key from standard input (exactly 32 bytes, then the end), then listens.
        private func makeAgent() throws -> VaultAgent {
            var logger = Logger(label: "coffer.agent") { StreamLogHandler.standardError(label: $0) }
            logger.logLevel = .info
            let key = try AgentProcess.readKey()
            return try VaultAgent(vault: vault, key: key, lifetime: seconds,
                                  runtime: AgentRuntime(environment: ProcessInfo.processInfo.environment), logger: logger)
        }
    }
}

/// What the agent's process does to itself.
enum AgentProcess {
    /// `PR_SET_DUMPABLE` (linux/prctl.h), which Swift's Glibc module does not import.
    private static let prSetDumpable: Int32 = 4

    private typealias Prctl = @convention(c) (Int32, UInt, UInt, UInt, UInt) -> Int32

    /// `prctl(PR_SET_DUMPABLE, 0)`: no core dump, and the process's memory closed to ptrace and
    /// `/proc/PID/mem` by other processes of the same user. Also a zero core-size limit.
    static func hardenMemory() {
        var none = rlimit(rlim_cur: 0, rlim_max: 0)
        _ = setrlimit(__rlimit_resource_t(RLIMIT_CORE.rawValue), &none)
        // prctl is variadic in C; called with all five integer arguments, as the kernel reads them.
        if let symbol = dlsym(dlopen(nil, RTLD_NOW), "prctl") {
            _ = unsafeBitCast(symbol, to: Prctl.self)(prSetDumpable, 0, 0, 0, 0)
        }
    }

    /// The write end of the pipe that the signal handler writes to.
    nonisolated(unsafe) private static var signalPipe: Int32 = -1

    /// SIGTERM, SIGINT and SIGHUP write a byte to a pipe, whose read end this returns: the
    /// agent's loop wakes on it, forgets the key and removes its socket.
    static func stopOnSignals() -> Int32 {
        var fds: [Int32] = [-1, -1]
        guard pipe(&fds) == 0 else { return -1 }
        for fd in fds { _ = fcntl(fd, F_SETFD, FD_CLOEXEC) }
        _ = fcntl(fds[1], F_SETFL, O_NONBLOCK) // a handler never blocks
        signalPipe = fds[1]
        for sig in [SIGTERM, SIGINT, SIGHUP] {
            _ = signal(sig) { _ in
                var byte: UInt8 = 1
                _ = write(AgentProcess.signalPipe, &byte, 1)
            }
        }
        _ = signal(SIGPIPE, SIG_IGN)
        return fds[0]
    }

    /// The vault key from standard input into guarded memory: exactly 32 bytes, then the end.
    static func readKey() throws -> SymmetricKey {
        var short = false
        let bytes = SecureBytes(count: SymmetricKey.byteCount) { buffer in
            var total = 0
            while total < buffer.count {
                let n = read(STDIN_FILENO, buffer.baseAddress! + total, buffer.count - total)
                if n < 0 && errno == EINTR { continue }
                if n <= 0 { short = true; break }
                total += n
            }
        }
        var extra: UInt8 = 0
        let more = read(STDIN_FILENO, &extra, 1)
        extra = 0
        guard !short, more == 0 else {
            throw CLIError(ExitStatus.dataError, "the unlock agent takes exactly \(SymmetricKey.byteCount) bytes of key on its standard input")
        }
        let devNull = open("/dev/null", O_RDONLY | O_CLOEXEC)
        if devNull >= 0 { dup2(devNull, STDIN_FILENO); close(devNull) }
        return try SymmetricKey(bytes: bytes)
    }

    /// Writes `line` to standard output (the pipe `coffer unlock` reads) and closes it.
    static func report(_ line: String) {
        let bytes = Array(line.utf8)
        _ = bytes.withUnsafeBytes { write(STDOUT_FILENO, $0.baseAddress!, $0.count) }
        let devNull = open("/dev/null", O_WRONLY | O_CLOEXEC)
        if devNull >= 0 { dup2(devNull, STDOUT_FILENO); close(devNull) }
    }
}

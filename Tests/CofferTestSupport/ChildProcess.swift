import Foundation
#if canImport(Glibc)
import Glibc
#endif

// Runs a program as a child process for the tests: the CLI as a user runs it, the sqlite3 shell,
// the example program.
//
// Not Foundation's `Process`: on Linux its `run()` lists /proc/self/fd to close the child's
// descriptors and reads past glibc's buffer once about 1,350 are open (swift-corelibs-foundation
// pull request 5472), which the store tests reach when many of them hold stores at once. Here the
// child is started with `posix_spawn`, its descriptors from 3 up are closed by the spawn itself
// (`posix_spawn_file_actions_addclosefrom_np`), so that no child inherits another test's pipes
// and keeps them open.

/// One finished run of a child process.
public struct ChildResult: Sendable {
    /// The exit status; 128 + the signal number when the process died from a signal.
    public let status: Int32
    public let stdout: Data
    public let stderr: Data
    public let seconds: Double
    /// The process ran past its time limit and was killed.
    public let timedOut: Bool
}

public struct ChildProcessError: Error, CustomStringConvertible {
    public let description: String
}

public enum ChildProcess {
    /// Runs `executable` with `arguments` (not including argv[0]), exactly `environment`, `stdin`
    /// as its standard input (nil: /dev/null) and `directory` as its working folder. Kills it
    /// after `timeout` seconds. Waits in poll(2) on the calling thread; async code gets the form
    /// of the same name that suspends.
    @_disfavoredOverload
    public static func run(_ executable: String, _ arguments: [String], environment: [String: String], stdin: Data? = nil,
                           directory: String? = nil, timeout: Double) throws -> ChildResult {
        let child = try Child(executable, arguments, environment: environment, stdin: stdin, directory: directory, timeout: timeout)
        while !child.pump(waitMilliseconds: 100) {}
        return child.finish()
    }

    /// ``run(_:_:environment:stdin:directory:timeout:)`` for async tests: waits by sleeping the
    /// task between looks at the pipes, so that it holds no thread of the cooperative pool.
    public static func run(_ executable: String, _ arguments: [String], environment: [String: String], stdin: Data? = nil,
                           directory: String? = nil, timeout: Double) async throws -> ChildResult {
        let child = try Child(executable, arguments, environment: environment, stdin: stdin, directory: directory, timeout: timeout)
        while !child.pump(waitMilliseconds: 0) { try? await Task.sleep(for: .milliseconds(10)) }
        return child.finish()
    }

    /// A child left running (a server): its output is read as the test looks at it.
    public final class Running: @unchecked Sendable {
        private let child: Child
        private let lock = NSLock()

        /// Starts `executable`; it is killed after `timeout` seconds if still running.
        public init(_ executable: String, _ arguments: [String], environment: [String: String], directory: String? = nil,
                    timeout: Double) throws {
            child = try Child(executable, arguments, environment: environment, stdin: nil, directory: directory, timeout: timeout)
        }

        public var pid: pid_t { child.pid }

        /// What it wrote so far, and its exit status once it ended.
        public func look() -> (stdout: String, stderr: String, status: Int32?) {
            lock.withLock {
                _ = child.pump(waitMilliseconds: 0)
                return (String(decoding: child.out, as: UTF8.self), String(decoding: child.err, as: UTF8.self), child.exitStatus)
            }
        }

        /// Waits (sleeping the task) until `found` finds something in its standard output, the
        /// child ends, or `seconds` pass. (It looks once more at the end: a task of a busy test
        /// run may wake only after the deadline.)
        public func waitForOutput<T>(seconds: Double, _ found: (String) -> T?) async -> T? {
            let end = Date().addingTimeInterval(seconds)
            while Date() < end {
                let now = look()
                if let value = found(now.stdout) { return value }
                if now.status != nil { return nil }
                try? await Task.sleep(for: .milliseconds(20))
            }
            return found(look().stdout)
        }

        /// Sends `signal` and waits up to `seconds` for the child to end; its result.
        @discardableResult
        public func stop(_ signal: Int32 = SIGTERM, seconds: Double = 20) async -> ChildResult {
            kill(child.pid, signal)
            let end = Date().addingTimeInterval(seconds)
            while look().status == nil, Date() < end { try? await Task.sleep(for: .milliseconds(20)) }
            if look().status == nil { kill(child.pid, SIGKILL) }
            while !lock.withLock({ child.pump(waitMilliseconds: 0) }) { try? await Task.sleep(for: .milliseconds(10)) }
            return lock.withLock { child.finish() }
        }
    }

    private typealias AddChdir = @convention(c) (UnsafeMutablePointer<posix_spawn_file_actions_t>, UnsafePointer<CChar>) -> Int32
    private typealias AddClosefrom = @convention(c) (UnsafeMutablePointer<posix_spawn_file_actions_t>, Int32) -> Int32

    /// glibc's `_np` spawn actions (2.29 and 2.34), which Swift's Glibc module does not declare.
    private static let spawnActions: (chdir: AddChdir, closefrom: AddClosefrom)? = {
        _ = signal(SIGPIPE, SIG_IGN) // a child that exits before reading all of its stdin
        let handle = dlopen(nil, RTLD_NOW)
        guard let chdir = dlsym(handle, "posix_spawn_file_actions_addchdir_np"),
              let closefrom = dlsym(handle, "posix_spawn_file_actions_addclosefrom_np") else { return nil }
        return (unsafeBitCast(chdir, to: AddChdir.self), unsafeBitCast(closefrom, to: AddClosefrom.self))
    }()

    fileprivate final class Child {
        let pid: pid_t
        let started = Date()
        let deadline: Date
        var out = Data(), err = Data()
        var outFD: Int32, errFD: Int32, inFD: Int32
        var input: [UInt8], written = 0
        var exitStatus: Int32?
        var exitedAt: Date?
        var timedOut = false

        init(_ executable: String, _ arguments: [String], environment: [String: String], stdin: Data?, directory: String?,
             timeout: Double) throws {
            guard let actions = ChildProcess.spawnActions else {
                throw ChildProcessError(description: "this C library has no posix_spawn_file_actions_addclosefrom_np (glibc 2.34 or later)")
            }
            deadline = started.addingTimeInterval(timeout)
            input = stdin.map(Array.init) ?? []
            func pipePair() throws -> (read: Int32, write: Int32) {
                var fds: [Int32] = [-1, -1]
                guard pipe(&fds) == 0 else { throw ChildProcessError(description: "pipe: \(String(cString: strerror(errno)))") }
                for fd in fds { _ = fcntl(fd, F_SETFD, FD_CLOEXEC) }
                return (fds[0], fds[1])
            }
            let outPipe = try pipePair(), errPipe = try pipePair()
            let inPipe: (read: Int32, write: Int32) = stdin == nil ? (open("/dev/null", O_RDONLY | O_CLOEXEC), -1) : try pipePair()
            guard inPipe.read >= 0 else { throw ChildProcessError(description: "cannot open /dev/null") }

            var fileActions = posix_spawn_file_actions_t()
            posix_spawn_file_actions_init(&fileActions)
            defer { posix_spawn_file_actions_destroy(&fileActions) }
            posix_spawn_file_actions_adddup2(&fileActions, inPipe.read, 0)
            posix_spawn_file_actions_adddup2(&fileActions, outPipe.write, 1)
            posix_spawn_file_actions_adddup2(&fileActions, errPipe.write, 2)
            _ = actions.closefrom(&fileActions, 3)
            if let directory { _ = actions.chdir(&fileActions, directory) }

            let argv: [UnsafeMutablePointer<CChar>?] = ([executable] + arguments).map { strdup($0) } + [nil]
            let envp: [UnsafeMutablePointer<CChar>?] = environment.map { strdup("\($0.key)=\($0.value)") } + [nil]
            defer { for pointer in argv + envp { free(pointer) } }
            var pid: pid_t = 0
            let spawned = posix_spawn(&pid, executable, &fileActions, nil, argv, envp)
            // The child's ends, which only the child keeps.
            for fd in [inPipe.read, outPipe.write, errPipe.write] { close(fd) }
            guard spawned == 0 else {
                for fd in [outPipe.read, errPipe.read, inPipe.write] where fd >= 0 { close(fd) }
                throw ChildProcessError(description: "cannot start \(executable): \(String(cString: strerror(spawned)))")
            }
            self.pid = pid
            outFD = outPipe.read
            errFD = errPipe.read
            inFD = inPipe.write
            for fd in [outFD, errFD, inFD] where fd >= 0 { _ = fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK) }
            if inFD >= 0 && input.isEmpty { closeInput() }
        }

        func closeInput() {
            close(inFD)
            inFD = -1
        }

        /// Moves what is ready through the pipes, waiting up to `waitMilliseconds` for something
        /// to be; true when the run is over (output closed and the child reaped).
        func pump(waitMilliseconds: Int32) -> Bool {
            var fds = [pollfd]()
            if outFD >= 0 { fds.append(pollfd(fd: outFD, events: Int16(POLLIN), revents: 0)) }
            if errFD >= 0 { fds.append(pollfd(fd: errFD, events: Int16(POLLIN), revents: 0)) }
            if inFD >= 0 { fds.append(pollfd(fd: inFD, events: Int16(POLLOUT), revents: 0)) }
            if !fds.isEmpty { _ = poll(&fds, nfds_t(fds.count), waitMilliseconds) }
            drain(&outFD, into: &out)
            drain(&errFD, into: &err)
            if inFD >= 0 {
                let n = input.withUnsafeBytes { write(inFD, $0.baseAddress! + written, $0.count - written) }
                if n > 0 { written += n }
                if written == input.count || (n < 0 && errno != EAGAIN && errno != EINTR) { closeInput() }
            }
            if exitStatus == nil {
                var status: Int32 = 0
                if waitpid(pid, &status, WNOHANG) == pid {
                    exitStatus = status & 0x7f == 0 ? (status >> 8) & 0xff : 128 + (status & 0x7f)
                    exitedAt = Date()
                }
            }
            if exitStatus == nil && !timedOut && Date() > deadline {
                timedOut = true
                kill(pid, SIGKILL)
            }
            // A child that left a process of its own holding the pipes: stop reading 5 s after it exited.
            if let exitedAt, Date().timeIntervalSince(exitedAt) > 5 {
                for fd in [outFD, errFD] where fd >= 0 { close(fd) }
                outFD = -1
                errFD = -1
            }
            if outFD < 0 && errFD < 0 && exitStatus != nil && inFD >= 0 { closeInput() }
            return outFD < 0 && errFD < 0 && exitStatus != nil
        }

        private func drain(_ fd: inout Int32, into data: inout Data) {
            guard fd >= 0 else { return }
            var buffer = [UInt8](repeating: 0, count: 65536)
            while true {
                let n = read(fd, &buffer, buffer.count)
                if n > 0 { data.append(contentsOf: buffer[0..<n]); continue }
                if n == 0 || (errno != EAGAIN && errno != EINTR) {
                    close(fd)
                    fd = -1
                }
                return
            }
        }

        func finish() -> ChildResult {
            ChildResult(status: exitStatus ?? -1, stdout: out, stderr: err, seconds: Date().timeIntervalSince(started), timedOut: timedOut)
        }
    }
}

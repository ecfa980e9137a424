import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// A `coffer serve` process of a test's own, listening on a free port of the loopback interface.
public final class ServerChild: Sendable {
    /// `http://127.0.0.1:PORT`.
    public let url: String
    public let store: String
    public let process: ChildProcess.Running

    private init(url: String, store: String, process: ChildProcess.Running) {
        self.url = url
        self.store = store
        self.process = process
    }

    /// Starts `executable serve --listen 127.0.0.1:0 --store STORE` and waits until it prints the
    /// address it listens on. `publicURL`: another URL it serves (`--public-url`), as a second
    /// instance or a restarted server serves the first one's, which its clients pinned.
    /// `listen`: another address (the same port again, as a server restarted there).
    public static func start(executable: String, store: String, directory: String, environment: [String: String],
                             publicURL: String? = nil, listen: String = "127.0.0.1:0") async throws -> ServerChild {
        let process = try ChildProcess.Running(executable, ["serve", "--listen", listen, "--store", store]
                                                   + (publicURL.map { ["--public-url", $0] } ?? []),
                                               environment: environment, directory: directory, timeout: 1800)
        let url = await process.waitForOutput(seconds: 180) { out -> String? in
            guard let range = out.range(of: #"http://127\.0\.0\.1:[0-9]+"#, options: .regularExpression) else { return nil }
            return String(out[range])
        }
        guard let url else {
            let result = await process.stop(SIGKILL)
            throw ChildProcessError(description: "coffer serve did not start\nstdout: \(String(decoding: result.stdout, as: UTF8.self))\n"
                                    + "stderr: \(String(decoding: result.stderr, as: UTF8.self))")
        }
        return ServerChild(url: url, store: store, process: process)
    }

    /// Stops the server with `signal` (SIGTERM: gracefully) and returns how it ended.
    @discardableResult
    public func stop(_ signal: Int32 = SIGTERM) async -> ChildResult { await process.stop(signal) }
}

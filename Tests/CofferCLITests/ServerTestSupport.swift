import CofferTestSupport
import Foundation

/// A `coffer serve` of the test's own, on loopback, over a store of the sandbox (an SQLite file,
/// or a `postgres://` URL).
typealias ServerProcess = ServerChild

extension ServerChild {
    static func start(store: String, in sandbox: Sandbox, env: [String: String] = [:], listen: String = "127.0.0.1:0") async throws -> ServerChild {
        try await start(executable: try CofferProcess.executableURL().path, store: store, directory: sandbox.root.path,
                        environment: sandbox.baseEnvironment.merging(env) { _, new in new }, listen: listen)
    }
}

import CofferTestSupport
import Foundation
import Testing

/// A `coffer serve` of the test's own, on loopback, over a store of the sandbox (an SQLite file,
/// or a `postgres://` URL).
typealias ServerProcess = ServerChild

extension ServerChild {
    static func start(store: String, in sandbox: Sandbox, env: [String: String] = [:], listen: String = "127.0.0.1:0") async throws -> ServerChild {
        try await start(executable: try CofferProcess.executableURL().path, store: store, directory: sandbox.root.path,
                        environment: sandbox.baseEnvironment.merging(env) { _, new in new }, listen: listen)
    }
}

/// A database of its own on the test PostgreSQL server (`COFFER_TEST_POSTGRES`, which `make
/// test` starts), made with `psql` and dropped by ``drop()``.
struct ScratchDatabase {
    static let server = ProcessInfo.processInfo.environment["COFFER_TEST_POSTGRES"]
    /// Whether the PostgreSQL tests run (`COFFER_TEST_POSTGRES=skip` leaves them out).
    static var enabled: Bool { server != "skip" }

    /// The new database's URL.
    let url: String
    private let admin: (String) throws -> Void

    init(prefix: String) throws {
        let server = try #require(Self.server.flatMap { $0.isEmpty ? nil : $0 }, "COFFER_TEST_POSTGRES is not set: run the tests with `make test`")
        let components = try #require(URLComponents(string: server))
        let host = components.queryItems?.first { $0.name == "host" }?.value
        let psql = try #require((["/usr/bin/psql"] + ((try? FileManager.default.contentsOfDirectory(atPath: "/usr/lib/postgresql")) ?? [])
            .map { "/usr/lib/postgresql/\($0)/bin/psql" }).first { FileManager.default.isExecutableFile(atPath: $0) }, "psql is not installed")
        let admin = { (sql: String) throws in
            var args = ["-X", "-q", "-d", String(components.path.dropFirst()), "-U", components.user ?? "postgres", "-c", sql]
            if let host { args += ["-h", host] }
            let r = try ChildProcess.run(psql, args, environment: ProcessInfo.processInfo.environment, timeout: 60)
            try #require(r.status == 0, "psql \(sql): \(String(decoding: r.stderr, as: UTF8.self))")
        }
        self.admin = admin
        let database = "\(prefix)_\(UInt32.random(in: 0...UInt32.max))"
        try admin("CREATE DATABASE \(database)")
        var target = components
        target.path = "/" + database
        url = try #require(target.string)
        name = database
    }

    private let name: String

    func drop() { try? admin("DROP DATABASE \(name) WITH (FORCE)") }
}

import AsyncHTTPClient
import CofferCrypto
import CofferTestSupport
import CofferVault
import Foundation
import GRDB
import NIOCore
import NIOHTTP1
import PostgresNIO
import Testing
@testable import CofferStore
#if canImport(Glibc)
import Glibc
#endif

/// A `coffer serve` process of the test's own over a fresh store (an SQLite file of a temporary
/// folder, or a new PostgreSQL database), and client stores that work through it.
package struct ServerFixture {
    package let backend: TestBackend
    package let folder: URL
    package let server: ServerChild
    /// What the server was started with: the SQLite file's path or the database's URL.
    package let location: String
    /// The server's SQLite file (nil on PostgreSQL), for tests that play a hostile server.
    package var storePath: String? { backend == .sqlite ? location : nil }
    package let postgres: PostgresURL?
    package let clients = Locked<[Store]>([])
    /// Whether the test killed the server itself (then it is not expected to stop cleanly).
    package let killed = Locked(false)

    /// Kills the server (SIGKILL), as a crash would.
    package func kill() async {
        killed.withLock { $0 = true }
        await server.stop(SIGKILL)
    }

    package var url: URL { URL(string: server.url)! }

    /// Lists `userID` in the member lookup of the zone `row` names, in the server's store (SQLite
    /// or PostgreSQL) behind the server's back, as someone with the store's file or database can.
    package func listInMemberLookup(_ row: ZoneRow, _ userID: String) async throws {
        if let storePath {
            let queue = try DatabaseQueue(path: storePath)
            try await queue.write { db in
                try db.execute(sql: "INSERT INTO zone_member (zone_id, user_id) VALUES (?, ?)", arguments: [try serverRowID(db, row), userID])
            }
            try queue.close()
        } else {
            try await withPostgresAdmin(postgres) { admin in
                try await admin.query("INSERT INTO zone_member (zone_id, user_id) SELECT id, \(userID) FROM zone WHERE uid = \(Data(row.uid))")
            }
        }
    }

    /// A user of the server: a vault of their own, a store on the server, a session.
    package func user(_ name: String, _ email: String) async throws -> (vault: Vault, store: Store, session: Session) {
        let vault = try makeVault(in: folder, file: "\(UUID().uuidString).coffer", name: name, email: email)
        let store = try await client(vault)
        return (vault, store, try await store.openSession(vault: vault))
    }

    /// Another store object on the server for `vault` (another process of that user's). With
    /// `server` (another instance, or the server restarted), requests go there and name the
    /// fixture's first server, whose URL the others serve too.
    package func client(_ vault: Vault, server: ServerChild? = nil) async throws -> Store {
        let store = try await Store(server: URL(string: (server ?? self.server).url)!, naming: url, vault: vault, timeout: .seconds(60))
        clients.withLock { $0.append(store) }
        return store
    }

    /// Starts another server process on the same store (a second instance, or the server
    /// restarted), serving the first one's URL too.
    package func secondInstance() async throws -> ServerChild {
        try await ServerChild.start(executable: try serverExecutable(), store: location, directory: folder.path, environment: serverEnvironment,
                                    publicURL: server.url)
    }

    /// Sends a raw request to the server: the status and the body (a JSON object, or empty).
    package func raw(_ method: String, _ target: String, body: Data = Data(), headers: [(String, String)] = [], to other: ServerChild? = nil)
        async throws -> (status: Int, body: [String: Any]) {
        let answer = try await rawData(method, target, body: body, headers: headers, to: other)
        return (answer.status, (try? JSONSerialization.jsonObject(with: answer.body)) as? [String: Any] ?? [:])
    }

    /// Sends a raw request to the server: the status, the answer's content type and its bytes.
    package func rawData(_ method: String, _ target: String, body: Data = Data(), headers: [(String, String)] = [], to other: ServerChild? = nil)
        async throws -> (status: Int, contentType: String?, body: Data) {
        var request = HTTPClientRequest(url: (other ?? server).url + target)
        request.method = HTTPMethod(rawValue: method)
        for (name, value) in headers { request.headers.add(name: name, value: value) }
        if !body.isEmpty { request.body = .bytes(ByteBuffer(bytes: body)) }
        let response = try await HTTPClient.shared.execute(request, timeout: .seconds(60))
        let data = Data((try await response.body.collect(upTo: 1 << 26)).readableBytesView)
        return (Int(response.status.code), response.headers.first(name: "content-type"), data)
    }

    /// A request signed as `vault`, sent raw: the status, the answer's content type and bytes.
    package func signedData(_ vault: Vault, _ method: String, _ target: String, body: Data = Data()) async throws
        -> (status: Int, contentType: String?, body: Data) {
        try await rawData(method, target, body: body, headers: try await signature(vault, method, target, body: body))
    }

    /// A request signed as `vault` (its date `now`) for the fixture's server (its URL and store
    /// id), sent raw to it or to `other`.
    package func signed(_ vault: Vault, _ method: String, _ target: String, body: Data = Data(), now: Date = Date(), to other: ServerChild? = nil)
        async throws -> (status: Int, body: [String: Any]) {
        let signature = try await signature(vault, method, target, body: body, now: now)
        return try await raw(method, target, body: body, headers: signature, to: other)
    }

    /// The headers of a request signed as `vault` for the fixture's server.
    package func signature(_ vault: Vault, _ method: String, _ target: String, body: Data = Data(), now: Date = Date()) async throws -> [(String, String)] {
        let signature = RequestSignature.sign(method: method, target: target, body: body, vault: vault, origin: try ServerOrigin(url),
                                              storeID: try await storeID(), now: now)
        return signature.headers.map { ($0.name, $0.value) }
    }

    /// The server's store id, as it answers `GET /v1/store`.
    package func storeID(of other: ServerChild? = nil) async throws -> [UInt8] {
        let info = try await raw("GET", "/v1/store", to: other)
        let text = try #require(info.body["storeID"] as? String)
        return Array(try #require(Data(base64Encoded: text)))
    }

    package var serverEnvironment: [String: String] { ProcessInfo.processInfo.environment }
}

/// The row id a server's SQLite store keeps a zone under (requests name zones by uid, and each
/// client numbers them for itself).
package func serverRowID(_ db: Database, _ row: ZoneRow) throws -> Int64 {
    try #require(try Int64.fetchOne(db, sql: "SELECT id FROM zone WHERE uid = ?", arguments: [Data(row.uid)]))
}

package func serverExecutable() throws -> String {
    try #require(cofferExecutable(), "the coffer executable is not built next to the tests (swift build --build-tests)").path
}

/// Runs `body` with a server on a fresh store of `backend`; stops the server (SIGTERM) and
/// expects it to stop cleanly.
package func withServer<R>(_ backend: TestBackend, _ body: (ServerFixture) async throws -> R) async throws -> R {
    try await withTemporaryFolder { folder in
        func run(location: String, postgres: PostgresURL?) async throws -> R {
            let server = try await ServerChild.start(executable: try serverExecutable(), store: location, directory: folder.path,
                                                     environment: ProcessInfo.processInfo.environment)
            let fixture = ServerFixture(backend: backend, folder: folder, server: server, location: location, postgres: postgres)
            do {
                let result = try await body(fixture)
                for store in fixture.clients.withLock({ $0 }) { await store.close() }
                let stopped = await server.stop()
                #expect(stopped.status == 0 || fixture.killed.withLock { $0 }, "the server did not stop cleanly: \(String(decoding: stopped.stderr, as: UTF8.self))")
                return result
            } catch {
                await server.stop(SIGKILL)
                throw error
            }
        }
        switch backend {
        case .sqlite, .server:
            return try await run(location: folder.appendingPathComponent("server.sqlite").path, postgres: nil)
        case .postgres, .serverOnPostgres:
            return try await PostgresTestServer.withDatabase { connector in
                try await run(location: connector.url.description, postgres: connector.url)
            }
        }
    }
}

/// The `coffer` executable next to the test bundle (the folder of /proc/self/exe), if built.
package func cofferExecutable() -> URL? {
    guard let exe = try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/exe") else { return nil }
    let url = URL(fileURLWithPath: exe).deletingLastPathComponent().appendingPathComponent("coffer")
    return FileManager.default.isExecutableFile(atPath: url.path) ? url : nil
}

/// Runs `coffer` with `arguments` and `environment`; kills it after `timeout` seconds.
package func runCoffer(_ executable: URL, _ arguments: [String], environment: [String: String],
                     timeout: TimeInterval = 60) async throws -> (status: Int32, out: String, err: String) {
    let run = try await ChildProcess.run(executable.path, arguments, environment: environment, timeout: timeout)
    if run.timedOut { throw TestTimeout(seconds: Int(timeout)) }
    return (run.status, String(decoding: run.stdout, as: UTF8.self), String(decoding: run.stderr, as: UTF8.self))
}

import Foundation
import PostgresNIO
import Testing
@testable import CofferStore

/// The PostgreSQL server the PostgreSQL tests use, from `COFFER_TEST_POSTGRES`:
/// - a `postgres://` URL: that server; each test gets a database of its own, made from the one
///   the URL names and dropped afterwards, so tests run in parallel;
/// - `skip`: the PostgreSQL tests are skipped, and each says so in the output;
/// - unset: they fail, saying how to run them (`make test` starts a throwaway server through
///   `.ci/with-postgres`).
package enum PostgresTestServer {
    package static let variable = ProcessInfo.processInfo.environment["COFFER_TEST_POSTGRES"]

    package static var isSkipped: Bool { variable == "skip" }

    /// Timeouts for tests that do not test timeouts: generous, since a busy test process can
    /// keep a connection waiting for a thread for longer than the library's defaults.
    package static let timeouts = PostgresConnector.Timeouts(connect: .seconds(60), query: .seconds(60))

    /// The server's URL, or an error that fails the test.
    package static func url() throws -> PostgresURL {
        guard let variable, !variable.isEmpty else {
            throw StoreError(.invalidArguments, "COFFER_TEST_POSTGRES is not set: run the tests with `make test` (it starts a "
                + "throwaway PostgreSQL), or set COFFER_TEST_POSTGRES to a postgres:// URL, or to `skip` to leave them out")
        }
        return try PostgresURL(variable)
    }

    /// At most this many tests hold a database of their own at once: Swift Testing starts
    /// hundreds of test cases together, and their connection pools went past the server's
    /// `max_connections` (then a connect waits until its timeout). The others wait their turn
    /// before they start.
    package static let slots = TestSlots(8)

    /// Runs `body` with a connector to a new, empty database, which is dropped afterwards.
    /// `timeouts` are the connector's; creating and dropping the database keep the generous
    /// ``timeouts`` (on a busy machine, `CREATE DATABASE` alone can take seconds).
    package static func withDatabase<Result>(
        timeouts: PostgresConnector.Timeouts = PostgresTestServer.timeouts,
        _ body: (PostgresConnector) async throws -> Result
    ) async throws -> Result {
        let server = try url()
        await slots.acquire()
        defer { Task { await slots.release() } }
        let admin = PostgresConnector(url: server, password: PostgresPassword.lookup(for: server), timeouts: Self.timeouts)
        let name = "coffer_t_" + String(UInt64.random(in: .min ... .max), radix: 16)
        do {
            try await admin.query(PostgresQuery(unsafeSQL: "CREATE DATABASE \(name)"))
        } catch {
            await admin.close()
            throw error
        }
        let url = PostgresURL(user: server.user, database: name, endpoint: server.endpoint)
        let connector = PostgresConnector(url: url, password: PostgresPassword.lookup(for: url), timeouts: timeouts)
        let result: Result
        do {
            result = try await body(connector)
        } catch {
            await connector.close()
            _ = try? await admin.query(PostgresQuery(unsafeSQL: "DROP DATABASE \(name) WITH (FORCE)"))
            await admin.close()
            throw error
        }
        await connector.close()
        try await admin.query(PostgresQuery(unsafeSQL: "DROP DATABASE \(name) WITH (FORCE)"))
        await admin.close()
        return result
    }
}

extension Trait where Self == ConditionTrait {
    /// Runs the test unless `COFFER_TEST_POSTGRES=skip`; unset, the test runs and fails.
    package static var postgres: Self {
        .enabled(if: !PostgresTestServer.isSkipped, "COFFER_TEST_POSTGRES=skip: the PostgreSQL tests are left out")
    }
}

/// A counting semaphore for async tests: `acquire` suspends while every slot is taken.
package actor TestSlots {
    private var free: Int
    private var waiting = [CheckedContinuation<Void, Never>]()

    package init(_ count: Int) { free = count }

    package func acquire() async {
        if free > 0 {
            free -= 1
            return
        }
        await withCheckedContinuation { waiting.append($0) }
    }

    package func release() {
        if waiting.isEmpty { free += 1 } else { waiting.removeFirst().resume() }
    }
}

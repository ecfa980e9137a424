import CofferCrypto
import CofferTestSupport
import CofferVault
import Foundation
import Testing
@testable import CofferStore

/// The storage backends a test runs on: SQLite always; PostgreSQL too unless
/// `COFFER_TEST_POSTGRES=skip` (the PostgreSQL-only tests print the skip).
enum TestBackend: String, Sendable, CustomTestStringConvertible {
    case sqlite
    case postgres

    static var all: [TestBackend] { PostgresTestServer.isSkipped ? [.sqlite] : [.sqlite, .postgres] }

    var testDescription: String { rawValue }
}

/// A store on one backend, with Alice acting in it.
struct BackendFixture: StoreFixture {
    let backend: TestBackend
    let folder: URL
    let store: Store
    let vault: Vault
    let session: Session
    var db: RecordDatabase { session.privateDatabase }
    /// The database's URL, for a second store object on it (a second instance of a service).
    let postgres: PostgresURL?

    /// A new session of Alice's, with empty caches (everything read and verified again).
    func freshSession() async throws -> Session { try await store.openSession(vault: vault) }

    /// Another store object on the same database: another process's view.
    func otherStore() async throws -> Store {
        if let postgres { return try await Self.open(postgres) }
        return try Store(path: store.url.path)
    }

    /// A store on the database, with the tests' timeouts (``PostgresTestServer/timeouts``).
    static func open(_ url: PostgresURL) async throws -> Store {
        try await Store(postgres: url, password: PostgresPassword.lookup(for: url), connectTimeout: PostgresTestServer.timeouts.connect,
                        queryTimeout: PostgresTestServer.timeouts.query)
    }

    /// Another user, in this store.
    func otherSession(name: String = "Bob Builder", email: String = "bob@example.com") async throws -> Session {
        let vault = try makeVault(in: folder, file: "\(UUID().uuidString).coffer", name: name, email: email)
        return try await store.openSession(vault: vault)
    }
}

/// Runs `body` with a fresh store on `backend` (a new PostgreSQL database, dropped afterwards).
func withBackendStore<R>(_ backend: TestBackend, _ body: (BackendFixture) async throws -> R) async throws -> R {
    try await withTemporaryFolder { folder async throws in
        let vault = try makeVault(in: folder)
        switch backend {
        case .sqlite:
            let store = try Store(path: storePath(in: folder))
            let session = try await store.openSession(vault: vault)
            return try await body(BackendFixture(backend: backend, folder: folder, store: store, vault: vault, session: session, postgres: nil))
        case .postgres:
            return try await withPostgresStore { store, url in
                let session = try await store.openSession(vault: vault)
                return try await body(BackendFixture(backend: backend, folder: folder, store: store, vault: vault, session: session, postgres: url))
            }
        }
    }
}

/// Runs `body` with a store on a fresh PostgreSQL database (dropped afterwards), then closes the
/// store, and each store `others` holds by then, whether `body` throws or not.
func withPostgresStore<R>(closing others: Locked<[Store]>? = nil, _ body: (Store, PostgresURL) async throws -> R) async throws -> R {
    try await PostgresTestServer.withDatabase { connector in
        let store = try await BackendFixture.open(connector.url)
        func close() async {
            for other in others?.withLock({ $0 }) ?? [] { await other.close() }
            await store.close()
        }
        do {
            let result = try await body(store, connector.url)
            await close()
            return result
        } catch {
            await close()
            throw error
        }
    }
}

/// Runs `body` with a connection of its own to the PostgreSQL database at `url` (nil: not a
/// PostgreSQL store, which fails the test), as someone with access to the database would;
/// closes it afterwards.
func withPostgresAdmin<T>(_ url: PostgresURL?, _ body: (PostgresConnector) async throws -> T) async throws -> T {
    let url = try #require(url)
    let admin = PostgresConnector(url: url, password: PostgresPassword.lookup(for: url), timeouts: PostgresTestServer.timeouts)
    do {
        let result = try await body(admin)
        await admin.close()
        return result
    } catch {
        await admin.close()
        throw error
    }
}

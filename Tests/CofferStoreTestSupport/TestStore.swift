import CofferCrypto
import CofferTestSupport
import CofferVault
import Foundation
import GRDB
import PostgresNIO
import Testing
@testable import CofferStore

/// Where a test's store is, and how its users reach it.
package enum TestBackend: String, Sendable, CustomTestStringConvertible {
    /// An SQLite file, opened in the test's process.
    case sqlite
    /// A fresh PostgreSQL database, dropped afterwards.
    case postgres
    /// A `coffer serve` process of the test's own over an SQLite file, reached over loopback;
    /// each user has a store object of their own on it, as each client process does.
    case server
    /// The same, over a fresh PostgreSQL database.
    case serverOnPostgres

    /// The backends a store opened in process runs on: SQLite always; PostgreSQL too unless
    /// `COFFER_TEST_POSTGRES=skip` (the PostgreSQL-only tests print the skip).
    package static var local: [TestBackend] { PostgresTestServer.isSkipped ? [.sqlite] : [.sqlite, .postgres] }

    /// Every backend: ``local``, and a server over each of them.
    package static var all: [TestBackend] { PostgresTestServer.isSkipped ? [.sqlite, .server] : [.sqlite, .postgres, .server, .serverOnPostgres] }

    /// Whether users reach the store through a server process.
    package var isServer: Bool { self == .server || self == .serverOnPostgres }

    package var testDescription: String { rawValue }
}

/// A test's store on one backend, with Alice acting in it, and the other users, sessions and
/// store objects a test adds. The one fixture of the store tests: see ``withStore(_:_:)``.
package struct TestStore: Sendable {
    package let backend: TestBackend
    /// The test's temporary folder (vaults are kept in `vaults/` under it).
    package let folder: URL
    /// Alice's store object.
    package let store: Store
    package let vault: Vault
    package let alice: Session
    /// The database, on PostgreSQL (directly or behind the server).
    package let postgres: PostgresURL?
    /// The server process, on ``TestBackend/server`` and ``TestBackend/serverOnPostgres``.
    package let server: ServerFixture?
    /// Store objects the test opened on the PostgreSQL database itself, closed when the test ends.
    package let others: Locked<[Store]>

    /// Alice's private database.
    package var db: RecordDatabase { alice.privateDatabase }

    /// The SQLite file: the store's own, or the one the server serves.
    package var path: String { server?.storePath ?? store.url.path }

    /// A new user with a vault of their own and a session on the store (through a store object
    /// of their own behind a server), whose card Alice pinned, as `coffer contact add` does: her
    /// names and emails resolve to it.
    package func user(_ name: String, _ email: String) async throws -> Session {
        let vault = try makeVault(in: folder, name: name, email: email)
        try alice.vault.pin(ContactCard(vault: vault))
        let store = try await server?.client(vault) ?? self.store
        return try await store.openSession(vault: vault)
    }

    /// A new session of the same user on the same store object: nothing cached (verified logs,
    /// keys, memberships, schemas), so everything is read and verified again.
    package func fresh(_ session: Session) async throws -> Session {
        try await session.store.openSession(vault: session.vault)
    }

    /// Another store object on the same file, database or server, acting for `vault` (Alice's
    /// by default): another process's view.
    package func otherStore(for vault: Vault? = nil) async throws -> Store {
        if let server { return try await server.client(vault ?? self.vault) }
        guard let postgres else { return try Store(path: store.url.path) }
        let store = try await Self.open(postgres)
        others.withLock { $0.append(store) }
        return store
    }

    /// The same user in another process: a session on a store object of its own.
    package func otherStoreSession(_ session: Session) async throws -> Session {
        try await otherStore(for: session.vault).openSession(vault: session.vault)
    }

    /// The same user on a machine that never saw the store: the vault opened again from its
    /// file with no marks, on a store object of its own.
    package func stranger(_ session: Session) async throws -> Session {
        let vault = try Vault.open(at: session.vault.url, passphrase: secure(testPassphrase))
        for mark in try vault.marks.all() { try vault.marks.reset(zone: mark.zoneUID, to: nil) }
        return try await otherStore(for: vault).openSession(vault: vault)
    }

    /// The same store reached through `other` (another way to the same file or database, such
    /// as a server's snapshot driver over its connections), with Alice's session opened on it.
    package func reached(through other: Store) async throws -> TestStore {
        TestStore(backend: backend, folder: folder, store: other, vault: vault, alice: try await other.openSession(vault: vault), postgres: postgres,
                  server: server, others: others)
    }

    /// A store on the database, with the tests' timeouts (``PostgresTestServer/timeouts``).
    package static func open(_ url: PostgresURL) async throws -> Store {
        try await Store(postgres: url, password: PostgresPassword.lookup(for: url), connectTimeout: PostgresTestServer.timeouts.connect,
                        queryTimeout: PostgresTestServer.timeouts.query)
    }

    /// Alice's zone `name` with notes of the given names (``makeNote(_:in:title:body:parent:)``),
    /// each saved in its own commit.
    package func makeZone(_ name: String = "Notes", notes: [String] = ["n1", "n2"]) async throws -> ZoneID {
        let zone = try await db.createZone(named: name)
        for note in notes { _ = try await db.save(makeNote(note, in: zone)) }
        return zone
    }

    /// Shares `zone` (titled "Shared notes"), invites each user with their permission (in
    /// order) and has them accept.
    package func share(_ zone: ZoneID, with members: [(Session, SharePermission)]) async throws {
        _ = try await alice.share(zone: zone, title: "Shared notes")
        for (member, permission) in members {
            let share = try await alice.addParticipant(member.userID, permission: permission, to: zone)
            _ = try await member.acceptShare(url: share.url)
        }
    }

    /// Alice's zone "Family" with notes n1 and n2, shared (titled "Family notes", public
    /// permission none) and `who` invited with `permission` and, if `accept`, accepted.
    package func sharedWith(_ who: Session, _ permission: SharePermission, accept: Bool = true) async throws -> (ZoneID, Share) {
        let zone = try await makeZone("Family")
        _ = try await alice.share(zone: zone, title: "Family notes")
        let share = try await alice.addParticipant(who.userID, permission: permission, to: zone)
        if accept { _ = try await who.acceptShare(url: share.url) }
        return (zone, try await alice.fetchShare(in: zone))
    }
}

/// Runs `body` with a fresh store on `backend` and Alice's session on it; afterwards closes
/// every store object the test opened, stops the server, drops the database and removes the
/// folder, whether `body` throws or not.
@discardableResult
package func withStore<R>(_ backend: TestBackend = .sqlite, _ body: (TestStore) async throws -> R) async throws -> R {
    switch backend {
    case .sqlite:
        return try await withTemporaryFolder { folder in
            let vault = try makeVault(in: folder)
            let store = try Store(path: folder.appendingPathComponent("store.sqlite").path)
            let alice = try await store.openSession(vault: vault)
            return try await body(TestStore(backend: backend, folder: folder, store: store, vault: vault, alice: alice, postgres: nil, server: nil,
                                            others: Locked([])))
        }
    case .postgres:
        return try await withTemporaryFolder { folder in
            let vault = try makeVault(in: folder)
            let others = Locked<[Store]>([])
            return try await withPostgresStore(closing: others) { store, url in
                let alice = try await store.openSession(vault: vault)
                return try await body(TestStore(backend: backend, folder: folder, store: store, vault: vault, alice: alice, postgres: url, server: nil,
                                                others: others))
            }
        }
    case .server, .serverOnPostgres:
        return try await withServer(backend == .server ? .sqlite : .postgres) { server in
            let vault = try makeVault(in: server.folder)
            let store = try await server.client(vault)
            let alice = try await store.openSession(vault: vault)
            let others = Locked<[Store]>([])
            do {
                let result = try await body(TestStore(backend: backend, folder: server.folder, store: store, vault: vault, alice: alice,
                                                      postgres: server.postgres, server: server, others: others))
                for other in others.withLock({ $0 }) { await other.close() }
                return result
            } catch {
                for other in others.withLock({ $0 }) { await other.close() }
                throw error
            }
        }
    }
}

/// Runs `body` with a store on a fresh PostgreSQL database (dropped afterwards), then closes the
/// store, and each store `others` holds by then, whether `body` throws or not.
package func withPostgresStore<R>(closing others: Locked<[Store]>? = nil, _ body: (Store, PostgresURL) async throws -> R) async throws -> R {
    try await PostgresTestServer.withDatabase { connector in
        let store = try await TestStore.open(connector.url)
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
package func withPostgresAdmin<T>(_ url: PostgresURL?, _ body: (PostgresConnector) async throws -> T) async throws -> T {
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

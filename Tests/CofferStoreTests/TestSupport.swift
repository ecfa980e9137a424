import CofferCrypto
import CofferTestSupport
import CofferVault
import Foundation
import Testing
@testable import CofferStore

// Shared helpers for the store tests. Every vault made here uses `Argon2id.Parameters.min`;
// every test works in a fresh temporary folder that is removed afterwards.

let testPassphrase = "store-tests-passphrase-K8v2"

/// Creates a vault (fast KDF) in `folder/vaults/`.
func makeVault(in folder: URL, file: String = "alice.coffer", name: String = "Alice Liddell",
               email: String? = "alice@example.com") throws -> Vault {
    let vaults = folder.appendingPathComponent("vaults", isDirectory: true)
    try FileManager.default.createDirectory(at: vaults, withIntermediateDirectories: true)
    return try Vault.create(at: vaults.appendingPathComponent(file), name: name, email: email,
                            passphrase: secure(testPassphrase), kdf: .min)
}

/// The store file of a test folder.
func storePath(in folder: URL) -> String { folder.appendingPathComponent("store.sqlite").path }

/// A store with one user (Alice) acting in it.
/// A test's store and acting user, on any backend: what helpers shared by SQLite-only and
/// both-backend tests take.
protocol StoreFixture {
    var db: RecordDatabase { get }
}

struct Fixture: StoreFixture {
    let folder: URL
    let store: Store
    let vault: Vault
    let session: Session
    var db: RecordDatabase { session.privateDatabase }
    var path: String { store.url.path }

    /// A second user (Bob) in the same store.
    func otherSession(name: String = "Bob Builder", email: String = "bob@example.com") throws -> Session {
        let vault = try makeVault(in: folder, file: "\(UUID().uuidString).coffer", name: name, email: email)
        return try store.session(vault: vault)
    }

    /// A new session of the same user, with empty key and schema caches.
    func freshSession() throws -> Session { try store.session(vault: vault) }
}

/// Runs `body` with a store in a fresh folder and Alice's session on it.
@discardableResult
func withStore<R>(_ body: (Fixture) async throws -> R) async throws -> R {
    try await withTemporaryFolder { folder async throws in
        let vault = try makeVault(in: folder)
        let store = try Store(path: storePath(in: folder))
        let session = try store.session(vault: vault)
        return try await body(Fixture(folder: folder, store: store, vault: vault, session: session))
    }
}

/// Runs `body` and checks that it throws a ``StoreError`` with exactly `code`; returns the error.
@discardableResult
func expectStoreError<T>(_ code: StoreError.Code, _ comment: Comment? = nil,
                         sourceLocation: SourceLocation = #_sourceLocation,
                         _ body: () async throws -> T) async -> StoreError? {
    await expectStoreError(oneOf: [code], comment, sourceLocation: sourceLocation, body)
}

/// Runs `body` and checks that it throws a ``StoreError`` whose code is one of `codes`.
@discardableResult
func expectStoreError<T>(oneOf codes: [StoreError.Code], _ comment: Comment? = nil,
                         sourceLocation: SourceLocation = #_sourceLocation,
                         _ body: () async throws -> T) async -> StoreError? {
    let context = comment.map { " (\($0))" } ?? ""
    do {
        _ = try await body()
        Issue.record("expected a StoreError \(codes), but nothing was thrown\(context)", sourceLocation: sourceLocation)
        return nil
    } catch let error as StoreError {
        #expect(codes.contains(error.code), "expected \(codes), got .\(error.code): \(error.message)\(context)",
                sourceLocation: sourceLocation)
        return error
    } catch {
        Issue.record("expected a StoreError \(codes), got \(type(of: error)): \(error)\(context)", sourceLocation: sourceLocation)
        return nil
    }
}

/// The synchronous form, for codec and validation calls.
@discardableResult
func expectStoreErrorSync<T>(_ code: StoreError.Code, _ comment: Comment? = nil,
                             sourceLocation: SourceLocation = #_sourceLocation,
                             _ body: () throws -> T) -> StoreError? {
    let context = comment.map { " (\($0))" } ?? ""
    do {
        _ = try body()
        Issue.record("expected a StoreError .\(code), but nothing was thrown\(context)", sourceLocation: sourceLocation)
        return nil
    } catch let error as StoreError {
        #expect(error.code == code, "expected .\(code), got .\(error.code): \(error.message)\(context)",
                sourceLocation: sourceLocation)
        return error
    } catch {
        Issue.record("expected a StoreError .\(code), got \(type(of: error)): \(error)\(context)", sourceLocation: sourceLocation)
        return nil
    }
}

/// A record of `type` named `name` in `zone` with the given fields.
func makeRecord(_ type: String, _ name: String, in zone: ZoneID, parent: String? = nil,
                plain: [String: RecordValue] = [:], encrypted: [String: RecordValue] = [:]) -> Record {
    var record = Record(type: type, name: name, zone: zone, parent: parent)
    record.values = plain
    record.encryptedValues = encrypted
    return record
}

/// The record's string values' UTF-8 bytes: Swift's `==` on strings is canonical
/// equivalence, so exact round trips compare bytes too.
func utf8Fields(_ values: [String: RecordValue]) -> [String: [[UInt8]]] {
    values.compactMapValues { value -> [[UInt8]]? in
        switch value {
        case .string(let s), .reference(let s): return [Array(s.utf8)]
        case .list(let items):
            return items.compactMap { item -> [UInt8]? in
                switch item {
                case .string(let s), .reference(let s): return Array(s.utf8)
                default: return nil
                }
            }
        default: return nil
        }
    }
}

/// The record names of a query page, in order.
func recordNames(_ records: [Record]) -> [String] { records.map(\.name) }

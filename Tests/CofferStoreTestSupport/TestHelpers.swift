import CofferCrypto
import CofferTestSupport
import CofferVault
import Foundation
import Testing
@testable import CofferStore

// The store tests' helpers. Every vault made here uses `Argon2id.Parameters.min`; every test
// works in a fresh temporary folder that is removed afterwards (see ``withStore(_:_:)``).

package let testPassphrase = "store-tests-passphrase-K8v2"

/// Creates a vault (fast KDF, ``testPassphrase``) in `folder/vaults/`, in a file named `file`
/// or one of its own.
package func makeVault(in folder: URL, file: String? = nil, name: String = "Alice", email: String? = "alice@example.com") throws -> Vault {
    let vaults = folder.appendingPathComponent("vaults", isDirectory: true)
    try FileManager.default.createDirectory(at: vaults, withIntermediateDirectories: true)
    return try Vault.create(at: vaults.appendingPathComponent(file ?? "\(UUID().uuidString).coffer"), name: name, email: email,
                            passphrase: secure(testPassphrase), kdf: .min)
}

/// The store file of a test folder.
package func storePath(in folder: URL) -> String { folder.appendingPathComponent("store.sqlite").path }

/// Runs `body` and checks that it throws a ``StoreError`` with exactly `code`; returns the error.
@discardableResult
package func expectStoreError<T>(_ code: StoreError.Code, _ comment: Comment? = nil,
                         sourceLocation: SourceLocation = #_sourceLocation,
                         _ body: () async throws -> T) async -> StoreError? {
    await expectStoreError(oneOf: [code], comment, sourceLocation: sourceLocation, body)
}

/// Runs `body` and checks that it throws a ``StoreError`` whose code is one of `codes`.
@discardableResult
package func expectStoreError<T>(oneOf codes: [StoreError.Code], _ comment: Comment? = nil,
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
package func expectStoreErrorSync<T>(_ code: StoreError.Code, _ comment: Comment? = nil,
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
package func makeRecord(_ type: String, _ name: String, in zone: ZoneID, parent: String? = nil,
                plain: [String: RecordValue] = [:], encrypted: [String: RecordValue] = [:]) -> Record {
    var record = Record(type: type, name: name, zone: zone, parent: parent)
    record.values = plain
    record.encryptedValues = encrypted
    return record
}

/// The record's string values' UTF-8 bytes: Swift's `==` on strings is canonical
/// equivalence, so exact round trips compare bytes too.
package func utf8Fields(_ values: [String: RecordValue]) -> [String: [[UInt8]]] {
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
package func recordNames(_ records: [Record]) -> [String] { records.map(\.name) }

/// A note: plain title (the name unless given), encrypted body, and an optional parent.
package func makeNote(_ name: String, in zone: ZoneID, title: String? = nil, body: String? = nil, parent: String? = nil) -> CofferStore.Record {
    var record = CofferStore.Record(type: "Note", name: name, zone: zone, parent: parent)
    record.values["title"] = .string(title ?? name)
    record.encryptedValues["body"] = .string(body ?? "body of \(name)")
    return record
}

/// The body of a fetched note.
package func noteBody(_ record: CofferStore.Record) -> String? { record.encryptedValues["body"]?.stringValue }

/// An audit finding reduced to what identifies it.
package struct Finding: Hashable, CustomStringConvertible {
    package let kind: AuditFinding.Kind
    package let subject: String
    package init(_ kind: AuditFinding.Kind, _ subject: String) {
        self.kind = kind
        self.subject = subject
    }
    package var description: String { "\(kind.rawValue):\(subject)" }
}

extension AuditReport {
    /// The findings as (kind, subject), for exact comparison.
    package var findingKeys: Set<Finding> { Set(findings.map { Finding($0.kind, $0.subject) }) }
}

/// One item of a zone change feed, in feed order.
package enum FeedItem: Hashable, CustomStringConvertible {
    case changed(String)
    case deleted(String)
    package var description: String {
        switch self {
        case .changed(let n): return "+\(n)"
        case .deleted(let n): return "-\(n)"
        }
    }
}

/// Items of a page in feed order, (seq, name): changed records carry their change tag's
/// sequence; deletions are placed by the caller's knowledge, so this returns both lists merged
/// by the sequence numbers given in `deletedSeqs`.
package func pageItems(_ page: ZoneChanges, deletedSeqs: [String: Int64]) throws -> [FeedItem] {
    var keyed = [(Int64, String, FeedItem)]()
    for record in page.changed {
        let seq = try ChangeTag.parse(try #require(record.changeTag))
        keyed.append((seq, record.name, .changed(record.name)))
    }
    for deletion in page.deleted {
        let seq = try #require(deletedSeqs[deletion.name], "no known sequence for deletion of \(deletion.name)")
        keyed.append((seq, deletion.name, .deleted(deletion.name)))
    }
    return keyed.sorted { ($0.0, $0.1) < ($1.0, $1.1) }.map(\.2)
}

/// base64url without padding, written independently of the library.
package func base64URL(_ bytes: [UInt8]) -> String {
    Data(bytes).base64EncodedString()
        .replacingOccurrences(of: "+", with: "-").replacingOccurrences(of: "/", with: "_").replacingOccurrences(of: "=", with: "")
}

/// Decodes base64url without padding.
package func base64URLDecode(_ text: String) -> [UInt8]? {
    var b64 = text.replacingOccurrences(of: "-", with: "+").replacingOccurrences(of: "_", with: "/")
    while b64.count % 4 != 0 { b64 += "=" }
    return Data(base64Encoded: b64).map(Array.init)
}

/// Thrown when a raced operation took too long.
package struct TestTimeout: Error, CustomStringConvertible {
    package let seconds: Int
    package var description: String { "timed out after \(seconds) s" }
}

/// Runs `body`, failing with ``TestTimeout`` if it has not finished after `seconds` (a guard
/// against a hang, generous: hundreds of tests share two cores).
package func withTimeout<T: Sendable>(seconds: Int = 30, _ body: @escaping @Sendable () async throws -> T) async throws -> T {
    try await withThrowingTaskGroup(of: T.self) { group in
        group.addTask { try await body() }
        group.addTask {
            try await Task.sleep(for: .seconds(seconds))
            throw TestTimeout(seconds: seconds)
        }
        defer { group.cancelAll() }
        return try await group.next()!
    }
}

/// What an operation did: allowed, or refused with a store error code.
package enum Outcome: Equatable, CustomStringConvertible {
    case allowed
    case refused(StoreError.Code)
    case otherError(String)

    package var description: String {
        switch self {
        case .allowed: return "allowed"
        case .refused(let code): return "\(code)"
        case .otherError(let text): return "other error: \(text)"
        }
    }
}

/// Runs `body` and reports what happened.
package func attempt<T>(_ body: () async throws -> T) async -> Outcome {
    do {
        _ = try await body()
        return .allowed
    } catch let error as StoreError {
        return .refused(error.code)
    } catch {
        return .otherError("\(type(of: error)): \(error)")
    }
}

extension Share {
    /// The participant with this user id.
    package func testParticipant(_ userID: String) -> Share.Participant? { participants.first { $0.userID == userID } }
}

/// Thread-safe collector for @Sendable callbacks.
package final class ProgressCalls: @unchecked Sendable {
    package init() {}
    private let lock = NSLock()
    private var items = [[Int]]()
    package func append(_ done: Int, _ total: Int) { lock.lock(); items.append([done, total]); lock.unlock() }
    package var calls: [[Int]] { lock.lock(); defer { lock.unlock() }; return items }
}

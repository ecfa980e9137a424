import CofferTestSupport
import CofferCrypto
import CofferVault
import CofferStoreTestSupport
import Foundation
import GRDB
import Testing
@testable import CofferStore
#if canImport(Glibc)
import Glibc
#endif

// Live change streams (Sources/CofferStore/CofferStore.docc/Changes.md, "Live changes"): they poll the store, so they see
// commits made through other Store objects and other processes; cancelling the iterating task
// ends them; losing the zone or access ends them with the error. Every wait is raced against a
// timeout so that no test can hang.

/// The first element of `stream`, or nil when it finishes without one; fails after `seconds`.
/// 30 s, not less: with the whole suite running on two cores, the store's SQLite calls that
/// still run synchronously on the cooperative pool's threads have kept a stream's 50 ms polls
/// from running for over 10 s (a stream alone yields in under a second).
func firstElement<T: Sendable>(_ stream: AsyncThrowingStream<T, Error>, seconds: Int = 30) async throws -> T? {
    try await withTimeout(seconds: seconds) {
        for try await element in stream { return element }
        return nil
    }
}

/// The code of the ``StoreError`` `stream` ends with, nil when it finishes without one, read
/// until it ends (within the timeout).
func endingCode<T: Sendable>(of stream: AsyncThrowingStream<T, Error>) async throws -> StoreError.Code? {
    try await withTimeout {
        do {
            for try await _ in stream {}
            return nil
        } catch let error as StoreError {
            return error.code
        }
    }
}

@Suite("Change streams")
struct ChangesStreamTests {
    @Test("a zone stream yields a page for a save made through a different Store object on the same file", arguments: TestBackend.all)
    func seesAnotherStoreObject(_ backend: TestBackend) async throws {
        try await withStore(backend) { h in
            let zone = try await h.makeZone(notes: ["n1"])
            let caughtUp = try await h.db.changes(in: zone, since: nil).token
            let stream = h.db.changeStream(in: zone, since: caughtUp, pollInterval: .milliseconds(50))
            let other = try await h.otherStoreSession(h.alice)
            let otherDB: RecordDatabase = {
                var db = other.privateDatabase
                db.transactionAuthor = "other-process"
                return db
            }()
            let writer = Task {
                try await Task.sleep(for: .milliseconds(300)) // the stream has polled a few times by now
                return try await otherDB.save(makeNote("remote", in: zone, title: "from elsewhere"))
            }
            let page = try #require(try await firstElement(stream))
            let saved = try await writer.value
            #expect(page.changed.map(\.name) == ["remote"])
            #expect(page.changed.first?.values["title"] == .string("from elsewhere"))
            #expect(page.changed.first?.encryptedValues["body"] == .string("body of remote"))
            #expect(page.changed.first?.changeTag == saved.changeTag)
            #expect(page.changed.first?.transactionAuthor == "other-process")
            #expect(page.deleted.isEmpty && page.refused.isEmpty)
            #expect(page.token.seq == 3)
        }
    }

    @Test("a zone stream's pages hold at most its limit", arguments: TestBackend.all)
    func streamLimit(_ backend: TestBackend) async throws {
        try await withStore(backend) { h in
            let zone = try await h.makeZone(notes: [])
            _ = try await h.db.modify(saving: (0..<7).map { makeNote("n\($0)", in: zone) }, in: zone)
            var sizes = [Int](), names = [String]()
            for try await page in h.db.changeStream(in: zone, since: nil, limit: 3, pollInterval: .milliseconds(20)) {
                sizes.append(page.changed.count)
                names += page.changed.map(\.name)
                if names.count >= 7 { break }
            }
            #expect(sizes == [3, 3, 1])
            #expect(names.sorted() == (0..<7).map { "n\($0)" })
        }
    }

    @Test("a stream from nil first yields what exists, then deletions as they happen", arguments: TestBackend.all)
    func yieldsExistingThenDeletions(_ backend: TestBackend) async throws {
        try await withStore(backend) { h in
            let zone = try await h.makeZone(notes: ["n1", "n2"])
            let stream = h.db.changeStream(in: zone, since: nil, pollInterval: .milliseconds(50))
            let pages: [ZoneChanges] = try await withTimeout {
                var pages = [ZoneChanges]()
                var deletedOnce = false
                for try await page in stream {
                    pages.append(page)
                    if !deletedOnce {
                        deletedOnce = true
                        try await h.otherStoreSession(h.alice).privateDatabase.delete(recordNamed: "n1", in: zone)
                    } else {
                        break
                    }
                }
                return pages
            }
            #expect(pages.count == 2)
            #expect(pages.first?.changed.map(\.name) == ["n1", "n2"])
            #expect(pages.last?.changed.isEmpty == true)
            #expect(pages.last?.deleted.map(\.name) == ["n1"])
        }
    }

    @Test("a zone stream sees a save made by another process (the coffer CLI)",
          .enabled(if: cofferExecutable() != nil, "the coffer executable is not built next to the test bundle"))
    func seesAnotherProcess() async throws {
        try await withStore { h in
            let executable = try #require(cofferExecutable())
            let zone = try await h.makeZone(notes: ["n1"])
            let caughtUp = try await h.db.changes(in: zone, since: nil).token
            let stream = h.db.changeStream(in: zone, since: caughtUp, pollInterval: .milliseconds(50))
            let environment = ["COFFER_PASSPHRASE": testPassphrase, "HOME": h.folder.path, "PATH": "/usr/bin:/bin",
                               "COFFER_LOG_LEVEL": "error"]
            let arguments = ["record", "put", "Notes", "from-process", "--type", "Note", "--set", "title=hello from a process",
                             "--store", h.path, "--vault", h.alice.vault.url.path]
            let runner = Task { try await runCoffer(executable, arguments, environment: environment) }
            let page = try #require(try await firstElement(stream, seconds: 60))
            let result = try await runner.value
            #expect(result.status == 0, "stdout: \(result.out)\nstderr: \(result.err)")
            #expect(page.changed.map(\.name) == ["from-process"])
            #expect(page.changed.first?.values["title"] == .string("hello from a process"))
            #expect(page.changed.first?.modifierID == h.alice.userID)
            #expect(page.refused.isEmpty)
            // The process's commit verifies for a fresh reader too.
            let fetched = try await h.fresh(h.alice).privateDatabase.record(named: "from-process", in: zone)
            #expect(fetched.changeTag == page.changed.first?.changeTag)
        }
    }

    @Test("cancelling the task that iterates ends the stream", arguments: TestBackend.all)
    func cancellingEndsStream(_ backend: TestBackend) async throws {
        try await withStore(backend) { h in
            let zone = try await h.makeZone(notes: ["n1"])
            let caughtUp = try await h.db.changes(in: zone, since: nil).token
            let stream = h.db.changeStream(in: zone, since: caughtUp, pollInterval: .milliseconds(20))
            let consumer = Task { () -> Int in
                var pages = 0
                for try await _ in stream { pages += 1 }
                return pages
            }
            try await Task.sleep(for: .milliseconds(200))
            consumer.cancel()
            let pages = try await withTimeout { try await consumer.value }
            #expect(pages == 0)
        }
    }

    @Test("cancelling ends a database stream too", arguments: TestBackend.all)
    func cancellingEndsDatabaseStream(_ backend: TestBackend) async throws {
        try await withStore(backend) { h in
            let token = try await h.db.databaseChanges(since: nil).token
            let stream = h.db.databaseChangeStream(since: token, pollInterval: .milliseconds(20))
            let consumer = Task { () -> Int in
                var pages = 0
                for try await _ in stream { pages += 1 }
                return pages
            }
            try await Task.sleep(for: .milliseconds(200))
            consumer.cancel()
            #expect(try await withTimeout { try await consumer.value } == 0)
        }
    }

    @Test("a zone deleted while streamed ends the stream with .zoneNotFound", arguments: TestBackend.all)
    func zoneDeletedEndsStream(_ backend: TestBackend) async throws {
        try await withStore(backend) { h in
            let zone = try await h.makeZone(notes: ["n1"])
            let caughtUp = try await h.db.changes(in: zone, since: nil).token
            let stream = h.db.changeStream(in: zone, since: caughtUp, pollInterval: .milliseconds(50))
            let deleter = Task {
                try await Task.sleep(for: .milliseconds(200))
                try await h.otherStoreSession(h.alice).privateDatabase.deleteZone(zone)
            }
            let outcome = try await endingCode(of: stream)
            try await deleter.value
            #expect(outcome == .zoneNotFound)
        }
    }

    @Test("a participant removed while streaming: the stream ends with .permissionFailure", arguments: TestBackend.all)
    func removedParticipantStreamEnds(_ backend: TestBackend) async throws {
        try await withStore(backend) { h in
            let zone = try await h.makeZone(notes: ["n1"])
            let bob = try await h.user("Bob", "bob@example.com")
            try await h.share(zone, with: [(bob, .readOnly)])
            let caughtUp = try await bob.sharedDatabase.changes(in: zone, since: nil).token
            let stream = bob.sharedDatabase.changeStream(in: zone, since: caughtUp, pollInterval: .milliseconds(50))
            let remover = Task {
                try await Task.sleep(for: .milliseconds(200))
                _ = try await h.alice.removeParticipant(bob.userID, from: zone)
            }
            let outcome = try await endingCode(of: stream)
            try await remover.value
            #expect(outcome == .permissionFailure)
        }
    }

    @Test("a database stream yields a zone created through another Store object", arguments: TestBackend.all)
    func databaseStreamSeesAnotherStoreObject(_ backend: TestBackend) async throws {
        try await withStore(backend) { h in
            _ = try await h.db.createZone(named: "First")
            let token = try await h.db.databaseChanges(since: nil).token
            let stream = h.db.databaseChangeStream(since: token, pollInterval: .milliseconds(50))
            let creator = Task {
                try await Task.sleep(for: .milliseconds(200))
                return try await h.otherStoreSession(h.alice).privateDatabase.createZone(named: "Later")
            }
            let page = try #require(try await firstElement(stream))
            let later = try await creator.value
            #expect(page.changed == [later])
            #expect(page.deleted.isEmpty)
        }
    }
}

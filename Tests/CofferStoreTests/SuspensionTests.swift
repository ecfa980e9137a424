import CofferCrypto
import Dispatch
import CofferStoreTestSupport
import Foundation
import GRDB
import Testing
@testable import CofferStore

@Suite("Store calls suspend")
struct SuspensionTests {
    /// A save that waits for another connection's write lock waits suspended: the thread it was
    /// called on runs other work meanwhile. The save and a plain task share an executor of one
    /// serial queue, the save first. Were the save blocking its thread, the plain task would run
    /// only once the save gave up with `.busy` after the busy timeout, and the save would fail.
    @Test("a save waiting on a locked database leaves its thread free for other tasks")
    func waitingSaveSuspends() async throws {
        try await withStore { f in
            let zone = try await f.db.createZone(named: "Notes")
            try await whileWriteLockHeld(on: f.path) {
                var note = Record(type: "Note", name: "n1", zone: zone)
                note.values["title"] = "waited"
                _ = try await f.db.save(note)
            }
            #expect(try await f.db.record(named: "n1", in: zone).values["title"] == "waited")
        }
    }

    /// Opening a session whose user's card the store does not hold yet waits for the write lock
    /// suspended: the open and a plain task share one serial executor, the open first, while
    /// another connection holds the lock. Were the open blocking its thread (the card's write
    /// waiting out the busy timeout), the plain task would run only after it.
    @Test("a session opening while another connection holds the write lock leaves its thread free")
    func openingSessionSuspends() async throws {
        try await withStore { f in
            let bob = try makeVault(in: f.folder, file: "bob.coffer", name: "Bob Builder", email: "bob@example.com")
            let opened = try await whileWriteLockHeld(on: f.path) { try await f.store.openSession(vault: bob).userID }
            #expect(opened == bob.identity.userID)
            #expect(try await f.store.contact(matching: "bob@example.com").identity.userID == bob.identity.userID, "Bob's card was stored")
        }
    }

    /// Runs `work` on a serial executor while another connection holds the store's write lock,
    /// then checks that a plain task queued behind it on the same executor ran while `work` was
    /// still waiting for the lock; lets the lock go and returns what `work` returned.
    private func whileWriteLockHeld<T: Sendable>(on path: String, sourceLocation: SourceLocation = #_sourceLocation,
                                                 _ work: @escaping @Sendable () async throws -> T) async throws -> T {
        var config = Configuration()
        config.allowsUnsafeTransactions = true // the lock is held across two accesses
        let other = try DatabaseQueue(path: path, configuration: config)
        try await other.writeWithoutTransaction { try $0.execute(sql: "BEGIN IMMEDIATE") }
        let finished = Locked(false)
        let executor = SerialTaskExecutor()
        let task = Task(executorPreference: executor) {
            let result = try await work()
            finished.withLock { $0 = true }
            return result
        }
        let ran = await Task(executorPreference: executor) { true }.value
        #expect(ran, sourceLocation: sourceLocation)
        #expect(!finished.withLock { $0 }, "the other connection still holds the write lock", sourceLocation: sourceLocation)
        try await other.writeWithoutTransaction { try $0.execute(sql: "COMMIT") }
        let result = try await task.value
        #expect(finished.withLock { $0 }, sourceLocation: sourceLocation)
        return result
    }

    /// Reads beyond the pool's reader connections wait suspended. Every reader connection is held
    /// by a thread outside the cooperative pool; then more reads than there are connections, from
    /// more tasks than the machine has cores, all start on one serial executor (one thread). Were
    /// a read blocking its thread while it waits for a connection, the executor would be stuck:
    /// no other task on it would run, and the holders would give up after 30 s. Instead every
    /// read waits at the gate, a task on the same executor runs, and once the connections come
    /// back every read finishes with the record.
    @Test("more reads than reader connections, from more tasks than cores, wait without holding a thread")
    func readsBeyondTheConnectionsSuspend() async throws {
        try await withStore { f in
            let zone = try await f.db.createZone(named: "Notes")
            var note = Record(type: "Note", name: "n1", zone: zone)
            note.values["title"] = "read"
            _ = try await f.db.save(note)
            let storage = try f.store.sqliteStorage(for: "a test")
            let connections = storage.pool.configuration.maximumReaderCount
            let holders = try await HeldReaders(storage, count: connections)

            let executor = SerialTaskExecutor()
            let count = 4 * ProcessInfo.processInfo.activeProcessorCount + connections
            let reads = (0..<count).map { _ in
                Task(executorPreference: executor) { try await f.db.record(named: "n1", in: zone).values["title"] }
            }
            try await waitUntil { storage.readers.waiting == count }
            let ran = await Task(executorPreference: executor) { true }.value
            #expect(ran, "a task ran on the executor every read is waiting on")
            #expect(storage.readers.waiting == count, "no read went ahead while every connection was held")

            let held = await holders.release()
            #expect(held.allSatisfy { $0 == .success }, "the holders were released, not timed out: \(held)")
            for read in reads { #expect(try await read.value == "read") }
            #expect(storage.readers.waiting == 0)
        }
    }

    /// A read waiting for a connection whose task is cancelled stops waiting with
    /// `CancellationError`, and takes no connection: once the holders let go, every connection
    /// serves reads again.
    @Test("a read cancelled while it waits for a connection ends and leaves the connections whole")
    func cancelledWaitingRead() async throws {
        try await withStore { f in
            let zone = try await f.db.createZone(named: "Notes")
            let storage = try f.store.sqliteStorage(for: "a test")
            let connections = storage.pool.configuration.maximumReaderCount
            let holders = try await HeldReaders(storage, count: connections)
            let waiting = Task { try await f.store.read { db in try db.zoneRow(zone) != nil } }
            try await waitUntil { storage.readers.waiting == 1 }
            waiting.cancel()
            await #expect(throws: CancellationError.self) { try await waiting.value }
            #expect(storage.readers.waiting == 0)
            let held = await holders.release()
            #expect(held.allSatisfy { $0 == .success })
            // Every permit came back: as many reads at once as there are connections, each holding one.
            let again = try await HeldReaders(storage, count: connections)
            _ = await again.release()
            #expect(try await f.store.read { db in try db.zoneRow(zone) != nil })
        }
    }
}

/// Threads outside the cooperative pool, each holding one of a store's reader connections (a
/// read through the gate that waits) until released, or for 30 s.
struct HeldReaders {
    private let release = DispatchSemaphore(value: 0)
    private let done = DispatchGroup()
    private let results = Locked<[DispatchTimeoutResult]>([])
    private let count: Int

    init(_ storage: SQLiteStorage, count: Int) async throws {
        self.count = count
        let holding = DispatchSemaphore(value: 0)
        for _ in 0..<count {
            let (release, results, done) = (self.release, self.results, self.done)
            done.enter()
            Thread.detachNewThread {
                let result = (try? storage.read { _ in
                    holding.signal()
                    return release.wait(timeout: .now() + 30)
                }) ?? .timedOut
                results.withLock { $0.append(result) }
                done.leave()
            }
        }
        await offThePool { for _ in 0..<count { holding.wait() } }
    }

    /// Lets the holders go; what each one's wait ended with.
    func release() async -> [DispatchTimeoutResult] {
        for _ in 0..<count { release.signal() }
        await offThePool { done.wait() }
        return results.withLock { $0 }
    }
}

/// Runs `body`, which blocks, on a thread outside the cooperative pool, the caller suspended.
func offThePool(_ body: @escaping @Sendable () -> Void) async {
    await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
        DispatchQueue.global().async {
            body()
            continuation.resume()
        }
    }
}

/// Waits (suspended, checking every 10 ms) until `condition` holds; fails the test after 30 s.
func waitUntil(sourceLocation: SourceLocation = #_sourceLocation, _ condition: () -> Bool) async throws {
    let deadline = ContinuousClock.now + .seconds(30)
    while !condition() {
        guard ContinuousClock.now < deadline else {
            Issue.record("the condition did not hold within 30 s", sourceLocation: sourceLocation)
            return
        }
        try await Task.sleep(for: .milliseconds(10))
    }
}

/// Runs the jobs of the tasks that prefer it one at a time, in order, on a serial queue: a job
/// that blocks holds up every job behind it.
final class SerialTaskExecutor: TaskExecutor, @unchecked Sendable {
    private let queue = DispatchQueue(label: "coffer.tests.serial-executor")

    func enqueue(_ job: consuming ExecutorJob) {
        let job = UnownedJob(job)
        queue.async { job.runSynchronously(on: self.asUnownedTaskExecutor()) }
    }
}

import CofferCrypto
import Dispatch
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
            var config = Configuration()
            config.allowsUnsafeTransactions = true // the lock is held across two accesses
            let other = try DatabaseQueue(path: f.path, configuration: config)
            try await other.writeWithoutTransaction { try $0.execute(sql: "BEGIN IMMEDIATE") }
            let finished = Locked(0)
            let executor = SerialTaskExecutor()
            let save = Task(executorPreference: executor) {
                var note = Record(type: "Note", name: "n1", zone: zone)
                note.values["title"] = "waited"
                _ = try await f.db.save(note)
                finished.withLock { $0 += 1 }
            }
            let ran = await Task(executorPreference: executor) { true }.value
            #expect(ran)
            #expect(finished.withLock { $0 } == 0, "the other connection still holds the write lock")
            try await other.writeWithoutTransaction { try $0.execute(sql: "COMMIT") }
            try await save.value
            #expect(finished.withLock { $0 } == 1)
            #expect(try await f.db.record(named: "n1", in: zone).values["title"] == "waited")
        }
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

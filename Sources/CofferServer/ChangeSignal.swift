import CofferCrypto
import Foundation

/// Wakes the tasks waiting for a change of the store in this process: each ``signal()`` starts
/// a new generation, and a wait for a later generation than the one it saw returns. No thread
/// of its own, no polling: waiters are continuations, resumed by the signal or their timeout.
final class ChangeSignal: Sendable {
    private struct State {
        var generation = 0
        var waiters = [UInt64: CheckedContinuation<Void, Never>]()
        var nextID: UInt64 = 0
    }
    private let state = Locked(State())

    var generation: Int { state.withLock { $0.generation } }

    func signal() {
        let waiters = state.withLock { state in
            state.generation += 1
            defer { state.waiters = [:] }
            return Array(state.waiters.values)
        }
        for waiter in waiters { waiter.resume() }
    }

    /// Returns once the generation is past `seen`, or `timeout` has passed, or the task is
    /// cancelled (then it throws).
    func wait(after seen: Int, upTo timeout: Duration) async throws {
        try await withThrowingTaskGroup(of: Void.self) { group in
            group.addTask { await self.waitForSignal(after: seen) }
            group.addTask { try await Task.sleep(for: timeout) }
            defer { group.cancelAll() }
            _ = try await group.next()
        }
        try Task.checkCancellation()
    }

    private func waitForSignal(after seen: Int) async {
        let id = state.withLock { state -> UInt64 in
            state.nextID += 1
            return state.nextID
        }
        await withTaskCancellationHandler {
            await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
                let resumeNow = state.withLock { state -> Bool in
                    if state.generation > seen || Task.isCancelled { return true }
                    state.waiters[id] = continuation
                    return false
                }
                if resumeNow { continuation.resume() }
            }
        } onCancel: {
            let waiter = state.withLock { $0.waiters.removeValue(forKey: id) }
            waiter?.resume()
        }
    }
}

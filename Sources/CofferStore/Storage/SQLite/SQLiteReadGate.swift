import CofferCrypto
import Dispatch

/// The turns at an SQLite store's reader connections: one permit per connection of GRDB's pool,
/// taken before a read and given back after it. An async read that finds every permit taken
/// suspends until one comes back; it never holds a thread while it waits.
///
/// A read runs on its caller's thread once it holds a permit (``SQLiteStorage/read(_:)``), so
/// GRDB's own wait for a connection, which blocks its thread, is never reached while the pool's
/// connections are all in use. Why not GRDB's async `read`: it hands its connection back only
/// when the awaiting task runs again, so a few threads of the cooperative pool blocked elsewhere
/// (a synchronous entry point, the write-ahead log's truncation, which waits for every reader)
/// could keep the connections from ever coming back; and it runs the read on a queue of its
/// own, which cost fetches about 12% more CPU per record (Docs/Performance.md, 2026-11-25).
///
/// ```swift
/// let gate = SQLiteReadGate(permits: pool.configuration.maximumReaderCount)
/// let count = try await gate.withPermit { try pool.read { db in try Int.fetchOne(db, sql: "SELECT 1") } }
/// ```
final class SQLiteReadGate: Sendable {
    /// Who waits for a permit: a task (resumed) or a blocked thread (signalled).
    private enum Waiter {
        case task(id: UInt64, CheckedContinuation<Void, any Error>)
        case thread(DispatchSemaphore)
    }

    private struct State {
        var free: Int
        var waiters: [Waiter] = []
        var nextID: UInt64 = 0
        /// Tasks that found no permit and have not registered their wait yet, and whether each
        /// was cancelled meanwhile (see ``acquire()``).
        var unregistered: [UInt64: Bool] = [:]
    }

    private let state: Locked<State>

    /// A gate with `permits` turns (at least one).
    init(permits: Int) {
        state = Locked(State(free: max(1, permits)))
    }

    /// How many callers wait for a permit now (for tests).
    var waiting: Int { state.withLock { $0.waiters.count } }

    /// Runs `body` holding a permit, suspending until one is free.
    /// - Throws: `CancellationError` when the task is cancelled while it waits; what `body` throws.
    func withPermit<T>(_ body: () throws -> T) async throws -> T {
        try await acquire()
        defer { release() }
        return try body()
    }

    /// ``withPermit(_:)`` for the synchronous entry points, which wait for a permit as their
    /// signatures say (the caller is not suspended); in async code the async form is chosen.
    @_disfavoredOverload
    func withPermit<T>(_ body: () throws -> T) rethrows -> T {
        let semaphore: DispatchSemaphore? = state.withLock { state in
            if state.free > 0 {
                state.free -= 1
                return nil
            }
            let semaphore = DispatchSemaphore(value: 0)
            state.waiters.append(.thread(semaphore))
            return semaphore
        }
        semaphore?.wait()
        defer { release() }
        return try body()
    }

    private func acquire() async throws {
        let id: UInt64? = state.withLock { state in
            if state.free > 0 {
                state.free -= 1
                return nil
            }
            state.nextID += 1
            state.unregistered[state.nextID] = false
            return state.nextID
        }
        guard let id else { return }
        try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Void, any Error>) in
                enum Outcome { case waiting, granted, cancelled }
                let outcome: Outcome = state.withLock { state in
                    if state.unregistered.removeValue(forKey: id) == true { return .cancelled }
                    if state.free > 0 {
                        state.free -= 1
                        return .granted
                    }
                    state.waiters.append(.task(id: id, continuation))
                    return .waiting
                }
                switch outcome {
                case .waiting: break
                case .granted: continuation.resume()
                case .cancelled: continuation.resume(throwing: CancellationError())
                }
            }
        } onCancel: {
            let continuation: CheckedContinuation<Void, any Error>? = state.withLock { state in
                if state.unregistered[id] != nil {
                    state.unregistered[id] = true
                    return nil
                }
                let index = state.waiters.firstIndex {
                    if case .task(let waiter, _) = $0 { return waiter == id }
                    return false
                }
                // Not waiting any more: it was given a permit, which it gives back after its read.
                guard let index else { return nil }
                guard case .task(_, let continuation) = state.waiters.remove(at: index) else { return nil }
                return continuation
            }
            continuation?.resume(throwing: CancellationError())
        }
    }

    /// Gives a permit back: to the longest waiter, or to the free ones.
    private func release() {
        let next: Waiter? = state.withLock { state in
            guard !state.waiters.isEmpty else {
                state.free += 1
                return nil
            }
            return state.waiters.removeFirst()
        }
        switch next {
        case .task(_, let continuation)?: continuation.resume()
        case .thread(let semaphore)?: semaphore.signal()
        case nil: break
        }
    }
}

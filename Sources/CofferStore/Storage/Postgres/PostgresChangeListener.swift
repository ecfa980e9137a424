import Logging
import PostgresNIO
import Synchronization

/// Wakes the live change streams of a PostgreSQL store when a commit to the database, by any
/// process, touches a zone: every commit sends `NOTIFY coffer_changes, '<zone row id>'` inside
/// its transaction (so it is delivered only if the commit is), and one connection of the store
/// listens while any stream waits.
///
/// A notification only wakes a stream, which then reads the zone's changes as always; nothing is
/// believed from it, and a lost one costs only the stream's poll interval (the fallback: a
/// stream polls anyway). The listening connection is opened on the first wait and kept until
/// the store closes; when it fails it is opened again on the next wait.
final class PostgresChangeListener: Sendable {
    static let channel = "coffer_changes"

    private struct State {
        var waiters = [Int: CheckedContinuation<Void, Never>]()
        var nextID = 0
        var listening: Task<Void, Never>?
    }

    private let state = Mutex(State())
    private let connector: PostgresConnector

    init(connector: PostgresConnector) {
        self.connector = connector
    }

    /// Returns when a commit touches a zone, or after `timeout`.
    func wait(upTo timeout: Duration) async {
        startListening()
        let id = state.withLock { state -> Int in
            state.nextID += 1
            return state.nextID
        }
        await withTaskGroup(of: Void.self) { group in
            group.addTask { try? await Task.sleep(for: timeout) }
            group.addTask {
                await withTaskCancellationHandler {
                    await withCheckedContinuation { continuation in
                        let cancelled = self.state.withLock { state -> Bool in
                            if Task.isCancelled { return true }
                            state.waiters[id] = continuation
                            return false
                        }
                        if cancelled { continuation.resume() }
                    }
                } onCancel: {
                    self.state.withLock { $0.waiters.removeValue(forKey: id) }?.resume()
                }
            }
            await group.next()
            group.cancelAll()
        }
    }

    /// Wakes every waiter (a notification names the zone's row id; each stream reads its own
    /// zone's changes to see whether it was the one).
    func notify() {
        let woken = state.withLock { state -> [CheckedContinuation<Void, Never>] in
            defer { state.waiters.removeAll() }
            return Array(state.waiters.values)
        }
        for continuation in woken { continuation.resume() }
    }

    private func startListening() {
        state.withLock { state in
            guard state.listening == nil else { return }
            state.listening = Task { [connector] in
                do {
                    try await connector.client.withConnection { connection in
                        try await connection.listen(on: Self.channel) { notifications in
                            for try await _ in notifications { self.notify() }
                        }
                    }
                } catch {
                    connector.logger.debug("change listener stopped", metadata: ["error": "\(String(describing: type(of: error)))"])
                }
                // Open again on the next wait.
                self.state.withLock { $0.listening = nil }
            }
        }
    }

    /// Stops listening (the store is closing).
    func stop() async {
        let task = state.withLock { $0.listening }
        task?.cancel()
        await task?.value
    }
}

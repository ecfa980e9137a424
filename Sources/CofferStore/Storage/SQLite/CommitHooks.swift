import CofferCrypto
import GRDB

/// Work a session runs once the write transaction it was queued in commits (or drops when it
/// rolls back), through one transaction observer per connection, registered the first time.
///
/// GRDB's `afterNextTransaction` adds an observer for each call, and adding an observer drops
/// every statement that can delete rows from the connection's statement caches: with one on
/// every save, the next save compiled its deleting statements again (about 100 µs each with the
/// record table's indexes). This observer watches no database events, so it changes nothing
/// about how statements run.
final class CommitHooks: TransactionObserver, Sendable {
    private struct State {
        var pending: [@Sendable () -> Void] = []
        /// The connections this observer is registered with (weakly: a closed one drops out).
        var connections: [WeakConnection] = []
    }

    private struct WeakConnection: @unchecked Sendable {
        weak var db: GRDB.Database?
    }

    private let state = Locked(State())

    /// Runs `work` after the current write transaction of `db` commits; a rollback drops it.
    func afterCommit(_ db: GRDB.Database, _ work: @escaping @Sendable () -> Void) {
        let register = state.withLock { state -> Bool in
            state.pending.append(work)
            state.connections.removeAll { $0.db == nil }
            guard !state.connections.contains(where: { $0.db === db }) else { return false }
            state.connections.append(WeakConnection(db: db))
            return true
        }
        if register { db.add(transactionObserver: self, extent: .observerLifetime) }
    }

    func observes(eventsOfKind eventKind: DatabaseEventKind) -> Bool { false }

    func databaseDidChange(with event: DatabaseEvent) {}

    func databaseDidCommit(_ db: GRDB.Database) {
        let work = state.withLock { state in
            defer { state.pending.removeAll(keepingCapacity: true) }
            return state.pending
        }
        for item in work { item() }
    }

    func databaseDidRollback(_ db: GRDB.Database) {
        state.withLock { $0.pending.removeAll(keepingCapacity: true) }
    }
}

import CofferCrypto
import Logging

/// A backend whose store operations run against a ``StorageSnapshot``: it fetches what a run of
/// the operation missed, and applies a run's writes at once, checked against what it read.
/// PostgreSQL is one (``PostgresStorage``); a Coffer server's client is another
/// (``RemoteStorage``).
package protocol SnapshotDriver: Sendable {
    var logger: Logger { get }
    /// Fetches what a run of `snapshot` missed, all of it of one state of the store, and merges
    /// it into `snapshot.fetched`. When a zone read before moved on since, what was read
    /// before is dropped first.
    func fetch(_ needs: [StorageSnapshot.Need], into snapshot: StorageSnapshot) async throws
    /// Applies a run's writes in one transaction of the store, or none of them. With an
    /// `operation` (a server applying a client's batch), its id is recorded in the same
    /// transaction, first: a batch whose id is recorded already is not applied again.
    /// - Throws: ``SnapshotConflict`` when another writer changed what the run read (a zone's
    ///   log head, a record row it replaces or deletes); ``OperationApplied`` when the
    ///   operation's id is recorded already.
    func apply(_ writes: [StorageSnapshot.Write], operation: SnapshotOperation?) async throws
    /// Waits until a commit may have changed a zone, or `interval` has passed (a live change
    /// stream's wait between polls).
    func waitForChange(upTo interval: Duration) async throws
    /// Ends the driver's connections; calls after it fail with `.serviceUnavailable`.
    func close() async
    /// "a store on the server at https://…": for messages.
    var storeDescription: String { get }
    /// Starts reads that all see one state of the store, however many fetches they take and
    /// whatever commits land meanwhile (see ``ReadPin``); nil where the backend has none.
    func pinReads() async throws -> (any ReadPin)?
}

/// Fetches of one state of the store: an operation that lost a race to a writer (a fetch found a
/// zone moved on, or its batch came second) runs again on a pin, so that its reads cannot be
/// overtaken a second time however busy the zone is. A pin holds something of the store's (a
/// PostgreSQL transaction, an SQLite read, a server's pin), so it is closed as soon as the run
/// that took it ends.
package protocol ReadPin: Sendable {
    /// As ``SnapshotDriver/fetch(_:into:)``, of the pinned state.
    func fetch(_ needs: [StorageSnapshot.Need], into snapshot: StorageSnapshot) async throws
    /// Releases what the pin holds. Fetches after it fail.
    func close() async
}

/// The read rounds of the store operations run in a task: a test (or a benchmark) that sets
/// ``current`` learns how many fetches each operation took, to show that no operation's number
/// of round trips grows with its size.
package final class ReadRounds: Sendable {
    package struct Tally: Sendable {
        /// Operations run.
        package var operations = 0
        /// Fetches, over all operations.
        package var rounds = 0
        /// The most fetches one operation took (its runs after a lost race included).
        package var most = 0
        /// Runs started afresh after a lost race (a zone moved on, a batch came second).
        package var restarts = 0
        /// The most runs one operation started afresh.
        package var mostRestarts = 0
        /// Runs made on a pin.
        package var pinnedRuns = 0
    }

    @TaskLocal package static var current: ReadRounds?

    package let tally = Locked(Tally())

    package init() {}

    package func noteOperation(rounds: Int, restarts: Int, pinnedRuns: Int) {
        tally.withLock {
            $0.operations += 1
            $0.rounds += rounds
            $0.most = max($0.most, rounds)
            $0.restarts += restarts
            $0.mostRestarts = max($0.mostRestarts, restarts)
            $0.pinnedRuns += pinnedRuns
        }
    }
}

/// A write that found the store changed since its reads: the operation runs again on fresh reads.
package struct SnapshotConflict: Error {}

/// A client's batch as a server applies it: its operation id (16 bytes the client chose) and
/// its user.
package struct SnapshotOperation: Sendable {
    package let id: [UInt8]
    package let userID: String

    package init(id: [UInt8], userID: String) {
        self.id = id
        self.userID = userID
    }
}

/// A batch whose operation id the store has recorded: it was applied before (a request sent again).
package struct OperationApplied: Error {}

extension SnapshotDriver {
    /// How often an operation may run again because it needed more rows (each run fetches what
    /// the last one missed; counted from its last fresh start), and how often it may start
    /// afresh because another writer committed first (its write lost, or a fetch found a zone
    /// moved on since the operation's earlier reads).
    package static var maxFetches: Int { 64 }
    package static var maxConflicts: Int { 32 }

    /// No pins by default.
    package func pinReads() async throws -> (any ReadPin)? { nil }

    /// Runs one store operation (see ``StorageSnapshot``): fetches what it reads, runs it again
    /// until it runs through, then applies its writes in one transaction, or runs it once more on
    /// fresh reads when another writer came first. A read's run after a lost race reads on a pin
    /// (``pinReads()``), taken afresh for each such run and closed when it ends.
    ///
    /// With `pinned` (a read inside ``Store/withPinnedReads(_:)``), every run reads on that pin,
    /// which stays open for the caller.
    func run<T>(writing: Bool, pinned: (any ReadPin)? = nil, _ body: (any StorageTransaction) throws -> T) async throws -> T {
        // Kept as one function: its nested steps share the run's counters, its pin and its snapshot,
        // which each of them changes; apart, they would pass all of them back and forth.
        let snapshot = StorageSnapshot(writable: writing)
        var fetches = 0, conflicts = 0, backoffs = 0
        var rounds = 0, pinnedRuns = pinned == nil ? 0 : 1
        var pin: (any ReadPin)?, pinning = false
        defer { ReadRounds.current?.noteOperation(rounds: rounds, restarts: conflicts, pinnedRuns: pinnedRuns) }
        func unpin() async {
            guard pinned == nil, let held = pin else { return }
            pin = nil
            await held.close()
        }
        /// Starts the reads over: what was read goes, and a read's next run reads on a pin of its own.
        func startOver() async throws {
            await unpin()
            snapshot.forgetRows()
            fetches = 0
            pinning = true
            try await backOff()
        }
        func conflicted() async throws {
            snapshot.rolledBack()
            conflicts += 1
            guard conflicts <= Self.maxConflicts else {
                throw StoreError(.busy, "the store stayed busy (other writers kept changing the same rows); try again")
            }
            try await startOver()
        }
        /// After losing a race, a pause of a random length that doubles with each loss (at most
        /// 64 ms): writers of one zone then take turns instead of reading it again together.
        func backOff() async throws {
            backoffs += 1
            try await Task.sleep(for: .microseconds(Int.random(in: 0...(500 << min(backoffs, 7)))))
        }
        func attempt() async throws -> T {
            pin = pinned
            while true {
                // Only a read takes a pin: a write's reads are checked again when it applies,
                // and it runs again on fresh ones anyway when another writer came first.
                if pinning, !writing, pin == nil, let taken = try await pinReads() {
                    pin = taken
                    pinnedRuns += 1
                }
                snapshot.beginRun()
                let result = Result { try body(snapshot) }
                if snapshot.missed {
                    snapshot.rolledBack()
                    fetches += 1
                    rounds += 1
                    guard fetches <= Self.maxFetches else {
                        throw StoreError(.busy, "the operation took more than \(Self.maxFetches) rounds of reads (it reads too much one piece at a time); try again")
                    }
                    logger.trace("snapshot fetch", metadata: ["needs": "\(snapshot.needs.count)", "run": "\(fetches)", "pinned": "\(pin != nil)"])
                    if let pin { try await pin.fetch(snapshot.needs, into: snapshot) } else { try await fetch(snapshot.needs, into: snapshot) }
                    if snapshot.lastFetchMoved {
                        // The fetch found a zone moved on: its reads start over (what was read
                        // before is gone), as after a lost write.
                        conflicts += 1
                        guard conflicts <= Self.maxConflicts else {
                            throw StoreError(.busy, "the store stayed busy (other writers kept changing what this operation reads); try again")
                        }
                        try await startOver()
                    }
                    continue
                }
                let value: T
                do { value = try result.get() } catch is SnapshotConflict {
                    // The run found its reads older than what the session verified: read again.
                    try await conflicted()
                    continue
                } catch {
                    snapshot.rolledBack()
                    throw error
                }
                // The reads are done: what the pin holds goes back before the batch is applied.
                await unpin()
                guard !snapshot.writes.isEmpty else {
                    snapshot.committed()
                    return value
                }
                do {
                    try await apply(snapshot.writes, operation: nil)
                    snapshot.committed()
                    return value
                } catch is SnapshotConflict {
                    try await conflicted()
                } catch {
                    snapshot.rolledBack()
                    throw error
                }
            }
        }
        do {
            let value = try await attempt()
            await unpin()
            return value
        } catch {
            await unpin()
            throw error
        }
    }
}

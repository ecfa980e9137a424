import Logging

/// A backend whose store operations run against a ``StorageSnapshot``: it fetches what a run of
/// the operation missed, and applies a run's writes at once, checked against what it read.
/// PostgreSQL is one (``PostgresStorage``); a Coffer server's client is another
/// (``RemoteStorage``).
protocol SnapshotDriver: Sendable {
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
}

/// A write that found the store changed since its reads: the operation runs again on fresh reads.
struct SnapshotConflict: Error {}

/// A client's batch as a server applies it: its operation id (16 bytes the client chose) and
/// its user.
struct SnapshotOperation: Sendable {
    let id: [UInt8]
    let userID: String
}

/// A batch whose operation id the store has recorded: it was applied before (a request sent again).
struct OperationApplied: Error {}

extension SnapshotDriver {
    /// How often an operation may run again because it needed more rows (each run fetches what
    /// the last one missed; counted from its last fresh start), and how often it may start
    /// afresh because another writer committed first (its write lost, or a fetch found a zone
    /// moved on since the operation's earlier reads).
    static var maxFetches: Int { 64 }
    static var maxConflicts: Int { 32 }

    /// Runs one store operation (see ``StorageSnapshot``): fetches what it reads, runs it again
    /// until it runs through, then applies its writes in one transaction, or runs it once more on
    /// fresh reads when another writer came first.
    func run<T>(writing: Bool, _ body: (any StorageTransaction) throws -> T) async throws -> T {
        let snapshot = StorageSnapshot(writable: writing)
        var fetches = 0, conflicts = 0, backoffs = 0
        func conflicted() async throws {
            snapshot.rolledBack()
            conflicts += 1
            guard conflicts <= Self.maxConflicts else {
                throw StoreError(.busy, "the store stayed busy (other writers kept changing the same rows); try again")
            }
            snapshot.forgetRows()
            fetches = 0
            try await backOff()
        }
        /// After losing a race, a pause of a random length that doubles with each loss (at most
        /// 64 ms): writers of one zone then take turns instead of reading it again together.
        func backOff() async throws {
            backoffs += 1
            try await Task.sleep(for: .microseconds(Int.random(in: 0...(500 << min(backoffs, 7)))))
        }
        while true {
            snapshot.beginRun()
            let result = Result { try body(snapshot) }
            if snapshot.missed {
                snapshot.rolledBack()
                fetches += 1
                guard fetches <= Self.maxFetches else {
                    throw StoreError(.busy, "the operation took more than \(Self.maxFetches) rounds of reads (it reads too much one piece at a time); try again")
                }
                logger.trace("snapshot fetch", metadata: ["needs": "\(snapshot.needs.count)", "run": "\(fetches)"])
                try await fetch(snapshot.needs, into: snapshot)
                if snapshot.lastFetchMoved {
                    // The fetch found a zone moved on: its reads start over (what was read
                    // before is gone), as after a lost write.
                    conflicts += 1
                    guard conflicts <= Self.maxConflicts else {
                        throw StoreError(.busy, "the store stayed busy (other writers kept changing what this operation reads); try again")
                    }
                    fetches = 0
                    try await backOff()
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
}

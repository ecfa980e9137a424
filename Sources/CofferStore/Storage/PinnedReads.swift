/// One state of a store for every read a task makes inside ``Store/withPinnedReads(_:)``:
/// however many operations it runs, and whatever other writers commit meanwhile, they all read
/// the state the pin was taken at. Writes are not pinned.
final class PinnedReads: Sendable {
    @TaskLocal static var current: PinnedReads?

    enum Pin: Sendable {
        /// A local SQLite file: reads run on the pin's connection, as ``Store/read(_:)`` runs them.
        case sqlite(SQLiteReadPin)
        /// A backend read through a snapshot driver (PostgreSQL, a server).
        case driver(any ReadPin)
    }

    let store: ObjectIdentifier
    let pin: Pin
    /// Where this process's advances of zone logs stood when the pin was taken: a read on the pin
    /// began then (see ``Session/isLaggingRead(_:zone:)``), so a log another session of this
    /// process advanced since is older on the pin, not rolled back.
    let generation: Int

    init(store: Store, pin: Pin) {
        self.store = ObjectIdentifier(store)
        self.pin = pin
        generation = Session.advances.withLock { $0.counter }
    }

    /// Where this process's advances stood when `store`'s reads in this task were pinned.
    static func generation(of store: Store) -> Int? {
        guard let current, current.store == ObjectIdentifier(store) else { return nil }
        return current.generation
    }

    /// The pin of `store`'s reads in this task, if they are pinned.
    static func of(_ store: Store) -> Pin? {
        guard let current, current.store == ObjectIdentifier(store) else { return nil }
        return current.pin
    }

    /// The pin to fetch with of `store`'s reads in this task, if they are pinned.
    static func readPin(of store: Store) -> (any ReadPin)? {
        guard let current, current.store == ObjectIdentifier(store) else { return nil }
        return current.readPin
    }

    /// The pin to fetch with, whichever the backend.
    var readPin: any ReadPin {
        switch pin {
        case .sqlite(let pin): pin
        case .driver(let pin): pin
        }
    }
}

extension Store {
    /// Runs `body` with every read of this store it makes (through any session of it) on one
    /// state of the store: a local file's read transaction, a PostgreSQL transaction at
    /// REPEATABLE READ, or a server's pin (see `Docs/Server.md`), held until `body` ends. What
    /// needs several operations to see one state (a backup: each zone verified, then read whole)
    /// runs in it, and a writer beside it never makes it start over.
    ///
    /// The user's marks should be loaded before (any read of a zone does): a mark another
    /// process advances while the pin is held is not read, so it cannot be newer than the pin.
    func withPinnedReads<T>(_ body: () async throws -> T) async throws -> T {
        let pin: PinnedReads.Pin
        switch backend {
        case .sqlite(let sqlite):
            pin = .sqlite(try SQLiteSnapshotDriver(storage: sqlite, logger: logger).pin())
        case .postgres(let storage):
            guard let taken = try await storage.pinReads() else { return try await body() }
            pin = .driver(taken)
        case .snapshot(let driver):
            guard let taken = try await driver.pinReads() else { return try await body() }
            pin = .driver(taken)
        }
        let pinned = PinnedReads(store: self, pin: pin)
        do {
            let result = try await PinnedReads.$current.withValue(pinned) { try await Self.keepingAlive(pinned.readPin, body) }
            await pinned.readPin.close()
            return result
        } catch {
            await pinned.readPin.close()
            throw error
        }
    }

    /// How often a server's pin is told it is still in use while `body` runs: well within the
    /// 30 s after which a server lets an unused pin go (a backup may verify a large zone for
    /// minutes between two reads).
    static let pinKeepAlive: Duration = .seconds(10)

    /// Runs `body`; while it runs, a child task keeps a server's pin alive. Other pins need nothing.
    private static func keepingAlive<T>(_ pin: any ReadPin, _ body: () async throws -> T) async throws -> T {
        guard let remote = pin as? RemoteReadPin else { return try await body() }
        return try await withThrowingTaskGroup(of: Void.self) { group in
            group.addTask {
                while true {
                    try await Task.sleep(for: pinKeepAlive)
                    await remote.keepAlive()
                }
            }
            defer { group.cancelAll() }
            return try await body()
        }
    }
}

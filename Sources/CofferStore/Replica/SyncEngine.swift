import CofferCrypto
import CofferVault
import Foundation
import Logging
import ServiceLifecycle

/// Keeps a user's ``Replica`` in step with its server, as a service of an application's
/// `ServiceGroup` (swift-service-lifecycle): it pulls every zone, then waits for the server's
/// next change (at most 30 s) and pulls again, pushing the replica's pending changes (writes made
/// offline) after each pull; when the server goes away it reopens the replica
/// with a backoff of 1 s doubling to 30 s, reading nothing meanwhile but what the replica holds.
/// Graceful shutdown ends ``run()`` between two steps.
///
/// Its state is the replica's: each zone's confirmed head, a pull's staged pages, the time of
/// each zone's last sync; a new engine on the same file goes on from there. An app that
/// schedules its own work calls ``fetchChanges()`` and ``sendChanges()`` instead of running it.
///
/// ```swift
/// let engine = try await SyncEngine(server: url, vault: vault, dataFolder: folder, logger: logger)
/// let group = ServiceGroup(services: [engine], logger: logger)
/// Task { for await event in engine.events { print(event) } }
/// try await group.run()
/// ```
public final class SyncEngine: Service, Sendable {
    /// What the engine did, in order.
    public enum Event: Sendable {
        /// A zone brought up to the server's state.
        case fetched(PulledZone)
        /// A zone dropped from the replica, and why (its owner deleted it, the user left or was removed).
        case zoneRemoved(ZoneID, why: String)
        /// A zone that could not be pulled, with why: one that fails verification on the server
        /// (rolled back, cut or forked, or altered) is refused, and the replica keeps its copy.
        case refused(ZoneID, StoreError)
        /// The server cannot be reached; the engine tries again after the delay given.
        case offline(String, retryIn: Duration)
        /// The server answers again.
        case online
        /// Pending changes of a zone the server's verified log now confirms.
        case sent(ZoneID, count: Int)
        /// A pending change and the server's version both changed the same fields: what the
        /// engine's ``Replica/ConflictPolicy`` did with it (kept both, by default).
        case conflict(Replica.Conflict)
        /// A pending change the server refused (the user lost write access, the zone went
        /// away), kept readable (``Replica/refusedChanges()``).
        case changeRefused(ZoneID, name: String, why: String)
    }

    /// The engine's events: every pull's zones, and the server going away and coming back.
    /// Events are kept for a reader that falls behind, up to 10,000 (the oldest dropped first).
    public let events: AsyncStream<Event>
    private let continuation: AsyncStream<Event>.Continuation
    private let current: Locked<Replica>
    private let policy: Replica.ConflictPolicy
    private let logger: Logger

    /// An engine for the vault's replica of the server at `server` (see
    /// ``Replica/open(server:vault:path:dataFolder:offline:connectTimeout:timeout:logger:)``),
    /// opened now, online or not.
    /// - Throws: as ``Replica/open(server:vault:path:dataFolder:offline:connectTimeout:timeout:logger:)``.
    public convenience init(server: URL, vault: Vault, path: URL? = nil, dataFolder: URL, policy: Replica.ConflictPolicy = .keepBoth,
                            logger: Logger = Vault.disabledLogger) async throws {
        self.init(replica: try await Replica.open(server: server, vault: vault, path: path, dataFolder: dataFolder, logger: logger), policy: policy,
                  logger: logger)
    }

    /// An engine for an open replica; `policy` says what its pushes do with conflicts.
    public init(replica: Replica, policy: Replica.ConflictPolicy = .keepBoth, logger: Logger = Vault.disabledLogger) {
        (events, continuation) = AsyncStream.makeStream(of: Event.self, bufferingPolicy: .bufferingNewest(10_000))
        current = Locked(replica)
        self.policy = policy
        self.logger = logger
    }

    deinit { continuation.finish() }

    /// The replica as the engine last opened it (read it through its ``Replica/session``).
    public var replica: Replica { current.withLock { $0 } }

    /// Pulls every zone now, reporting each as an event, and writes the user's marks.
    /// - Throws: `.serviceUnavailable` when the server cannot be reached (the engine then
    ///   reopens the replica at the next call).
    @discardableResult
    public func fetchChanges() async throws -> Replica.PullReport {
        var replica = self.replica
        if !replica.isOnline {
            replica = try await replica.reconnect()
            current.withLock { $0 = replica }
            continuation.yield(.online)
        }
        let report: Replica.PullReport
        do {
            // Where the server's change counter stands, read before the pull: a commit the pull
            // misses moves it on, so the next wait returns at once rather than sleep through it.
            try await replica.waitForServerChange(upTo: .zero)
            report = try await replica.pull()
        } catch let error as StoreError where error.code == .serviceUnavailable {
            current.withLock { $0 = replica.offline(error.message) }
            await replica.server?.store.close()
            throw error
        }
        for zone in report.pulled { continuation.yield(.fetched(zone)) }
        for (zone, why) in report.dropped { continuation.yield(.zoneRemoved(zone, why: why)) }
        for (zone, error) in report.failed { continuation.yield(.refused(zone, error)) }
        try replica.session.saveMarks()
        return report
    }

    /// Pushes the replica's pending changes now (see ``Replica/push(_:policy:progress:)``), reporting
    /// them as events, and writes the user's marks.
    /// - Throws: `.serviceUnavailable` when the server cannot be reached.
    @discardableResult
    public func sendChanges() async throws -> Replica.PushReport {
        let replica = self.replica
        let report: Replica.PushReport
        do { report = try await replica.push(policy: policy) } catch let error as StoreError where error.code == .serviceUnavailable {
            current.withLock { $0 = replica.offline(error.message) }
            await replica.server?.store.close()
            throw error
        }
        for (zone, count) in report.confirmed { continuation.yield(.sent(zone, count: count)) }
        for conflict in report.conflicts { continuation.yield(.conflict(conflict)) }
        for (zone, name, why) in report.refused { continuation.yield(.changeRefused(zone, name: name, why: why)) }
        for (zone, error) in report.failed { continuation.yield(.refused(zone, error)) }
        try replica.session.saveMarks()
        return report
    }

    /// Syncs until the task is cancelled or the service group shuts down gracefully; then
    /// returns (a cancellation is not an error here).
    public func run() async throws {
        try await cancelWhenGracefulShutdown {
            var delay = Duration.seconds(1)
            while !Task.isCancelled {
                do {
                    try await self.fetchChanges()
                    try await self.sendChanges()
                    delay = .seconds(1)
                    let replica = self.replica
                    do { try await replica.waitForServerChange(upTo: .seconds(30)) } catch let error as StoreError where error.code == .serviceUnavailable {
                        self.current.withLock { $0 = replica.offline(error.message) }
                        await replica.server?.store.close()
                        throw error
                    }
                } catch is CancellationError {
                    return
                } catch let error as StoreError where error.code == .serviceUnavailable {
                    self.logger.info("sync offline", metadata: ["error": "\(error.message)"])
                    self.continuation.yield(.offline(error.message, retryIn: delay))
                    do { try await Task.sleep(for: delay) } catch { return }
                    delay = min(delay * 2, .seconds(30))
                }
            }
        }
    }
}

import CofferCrypto
import CofferVault
import Foundation
import Logging

/// A user's local replica of the zones they sync with a Coffer server: an SQLite file that holds
/// each zone as the server does, sealed as at rest, with its signed log. Reads of it are local
/// (no round trip), so they go on while the server cannot be reached.
///
/// The replica is filled by ``pull(_:progress:)``: by log position, each zone's entries after
/// the replica's confirmed head and the rows they still list, verified before they are stored
/// (see ``ReplicaPull``). It holds confirmed entries only, so the user's marks never run ahead of
/// the server because of it.
///
/// ```swift
/// let replica = try await Replica.open(server: url, vault: alice, dataFolder: folder)
/// try await replica.pull()
/// let note = try await replica.session.privateDatabase.record(named: "n1", in: zone)
/// ```
public final class Replica: Sendable {
    /// The replica file's store.
    public let store: Store
    /// The user's session on the replica: every read of it is local and verified.
    public let session: Session
    /// The server's store and the user's session on it; nil while offline.
    public let server: (store: Store, session: Session)?
    /// Why the server is not used (unreachable, or offline by choice); nil when it is.
    public let offlineReason: String?
    /// The server's origin (`http://host:port`).
    public let origin: String
    /// The replica file.
    public var path: URL { store.url }

    /// How the server is reached again (``reconnect()``).
    private let serverURL: URL
    private let timeouts: (connect: Duration, request: Duration)

    private init(store: Store, session: Session, server: (store: Store, session: Session)?, offlineReason: String?, origin: String,
                 serverURL: URL, timeouts: (connect: Duration, request: Duration)) {
        self.store = store
        self.session = session
        self.server = server
        self.offlineReason = offlineReason
        self.origin = origin
        self.serverURL = serverURL
        self.timeouts = timeouts
    }

    /// This replica, reaching its server anew (after it went away): the same file and session,
    /// with a new connection, checked against the store id pinned for the server.
    /// - Throws: `.serviceUnavailable` when the server still cannot be reached; as
    ///   ``open(server:vault:path:dataFolder:offline:connectTimeout:timeout:logger:)``.
    public func reconnect() async throws -> Replica {
        let remote = try await Store(server: serverURL, naming: nil, vault: session.vault, connectTimeout: timeouts.connect, timeout: timeouts.request,
                                     logger: store.logger)
        guard remote.storeID == store.storeID else {
            await remote.close()
            throw StoreError(.integrityFailure, "the server at \(origin) now answers as another store than your replica's")
        }
        let serverSession = try await remote.openSession(vault: session.vault, advancesMarks: false)
        return Replica(store: store, session: session, server: (remote, serverSession), offlineReason: nil, origin: origin, serverURL: serverURL,
                       timeouts: timeouts)
    }

    /// This replica without its server (which stopped answering, as `reason` says).
    public func offline(_ reason: String) -> Replica {
        Replica(store: store, session: session, server: nil, offlineReason: reason, origin: origin, serverURL: serverURL, timeouts: timeouts)
    }

    /// Where a replica lives by default: `DATA/replicas/<store id>/<user id>.sqlite`.
    public static func defaultPath(dataFolder: URL, storeID: [UInt8], userID: String) -> URL {
        dataFolder.appendingPathComponent("replicas").appendingPathComponent(Hex.encode(storeID)).appendingPathComponent("\(userID).sqlite")
    }

    /// Opens (creating it when it is missing) the replica of the server at `server` for the
    /// vault's user, at `path` or the default path under `dataFolder`.
    ///
    /// Unless `offline`, it connects first, waiting at most `connectTimeout` for the connection;
    /// a server that cannot be reached leaves the replica offline (``offlineReason``), with the
    /// store id pinned for the server at an earlier contact.
    /// - Throws: `.serviceUnavailable` when the server cannot be reached and there is no replica
    ///   of it yet; `.integrityFailure` for a file that is not this server's replica for this
    ///   user, or a server whose store id is not the one pinned; as ``Store/init(server:vault:timeout:logger:)``.
    public static func open(server url: URL, vault: Vault, path: URL? = nil, dataFolder: URL, offline: Bool = false,
                            connectTimeout: Duration = .seconds(1), timeout: Duration = .seconds(30),
                            logger: Logger = Vault.disabledLogger) async throws -> Replica {
        let origin = try ServerOrigin(url).text
        var remote: Store?
        var reason: String? = offline ? "offline (--offline)" : nil
        if !offline {
            do {
                remote = try await Store(server: url, naming: nil, vault: vault, connectTimeout: connectTimeout, timeout: timeout, logger: logger)
            } catch let error as StoreError where error.code == .serviceUnavailable {
                reason = error.message
            }
        }
        let storeID: [UInt8]
        if let remote {
            storeID = remote.storeID
        } else {
            let pinned: [UInt8]?
            do { pinned = try vault.marks.pins().first { $0.origin == origin }?.storeID } catch let error as VaultError {
                throw StoreError(.integrityFailure, "your marks file cannot be read: \(error.message)", underlying: error)
            }
            guard let pinned else {
                throw StoreError(.serviceUnavailable, "\(reason ?? "the server at \(origin) cannot be reached"); you have no replica of it yet, so nothing can be read offline: connect once first")
            }
            storeID = pinned
        }
        let file = path ?? defaultPath(dataFolder: dataFolder, storeID: storeID, userID: vault.identity.userID)
        let local: Store
        do {
            local = try Store.replica(at: file, storeID: storeID, origin: origin, userID: vault.identity.userID, create: remote != nil, logger: logger)
        } catch let error as StoreError where error.code == .unknownItem && remote == nil {
            throw StoreError(.serviceUnavailable, "\(reason ?? "the server at \(origin) cannot be reached"); you have no replica of it at \(file.path) yet, so nothing can be read offline: connect once first")
        }
        let session = try await local.openSession(vault: vault)
        let pending = try PendingChanges(store: local, vault: vault)
        session.pendingChangesBox.withLock { $0 = pending }
        // Only the replica's pulls advance the marks (see ``Session/advancesMarks``).
        let serverSession = try await remote?.openSession(vault: vault, advancesMarks: false)
        return Replica(store: local, session: session, server: remote.flatMap { r in serverSession.map { (r, $0) } }, offlineReason: reason, origin: origin,
                       serverURL: url, timeouts: (connectTimeout, timeout))
    }

    /// Whether the server answered when the replica was opened.
    public var isOnline: Bool { server != nil }

    /// What ``pull(_:progress:)`` did: the zones brought up to date, and those that failed, each
    /// with why (the pull goes on past a failing zone).
    public struct PullReport: Sendable {
        public var pulled: [PulledZone] = []
        public var failed: [(zone: ZoneID, error: StoreError)] = []
        /// Zones the replica held that the server no longer shows this user, and whose signed
        /// log or deletion says why (deleted by their owner, or the user removed or gone): their
        /// rows and keys were dropped from the replica.
        public var dropped: [(zone: ZoneID, why: String)] = []
    }

    /// Brings `zones` (by default every zone the server shows this user: theirs, and those shared
    /// with them) up to the server's verified state. `progress` gets each zone as it starts
    /// (`.pulling(zone, records: 0)`) and after each page of rows it fetches.
    /// - Throws: `.serviceUnavailable` while offline.
    @discardableResult
    public func pull(_ zones: [ZoneID]? = nil, progress: @escaping @Sendable (SyncProgress) -> Void = { _ in }) async throws -> PullReport {
        guard let server else { throw StoreError(.serviceUnavailable, offlineReason ?? "the server cannot be reached") }
        guard case .snapshot(let remote) = server.store.backend, case .sqlite(let sqlite) = store.backend else {
            throw StoreError(.internalError, "a replica pulls from a server into an SQLite file")
        }
        var report = PullReport()
        // Zones made here offline are not on the server yet: there is nothing to pull of them.
        let unpushed = try await store.unpushedZones()
        var mine = [ZoneID]()
        var contradicted = [ZoneID: [UInt8]]()
        if !unpushed.isEmpty {
            let me = session.userID
            let made = try await session.read { db in try db.zoneRows(ownedBy: me).filter { unpushed.contains($0.zone.uid) }.map(\.zone) }
            for zone in made {
                // A zone named that the server has (this very zone: a push copied it and was cut
                // short, or the file was changed; or one of that name the user made elsewhere,
                // which this one joins): the zone is pulled, and the mark dropped once the pull
                // verified the server's log of it.
                if zones?.contains(zone.id) ?? false, try await server.session.read({ db in try db.zoneRow(zone.id) }) != nil {
                    contradicted[zone.id] = zone.uid
                } else {
                    mine.append(zone.id)
                }
            }
        }
        let list: [ZoneID]
        if let zones {
            list = zones.filter { !mine.contains($0) }
        } else {
            // A zone the server lists whose log fails verification is a failed zone, not a
            // missing one.
            let owned = try await server.session.privateDatabase.zoneList()
            let shared = try await server.session.sharedDatabase.zoneList()
            list = owned.zones.map(\.id) + shared.zones.map(\.id)
            report.failed = (owned.refused + shared.refused).map { ($0.id, $0.error) }
        }
        let puller = ReplicaPull(replica: session, remote: remote, local: SQLiteSnapshotDriver(storage: sqlite, logger: store.logger), progress: progress)
        if zones == nil {
            let listed = Set(list + report.failed.map(\.zone) + mine)
            // Every zone the file holds, as stored: one that reads leave out (the user's marks
            // say it was deleted, on another device) goes too.
            let me = session.userID
            let held = try await session.read { db in
                try db.zoneRows(ownedBy: me).map(\.zone.id) + db.zoneRows(sharedWith: me).map(\.zone.id)
            }
            try await dropGone(held.filter { !listed.contains($0) }, server: server.session, into: &report)
        }
        for zone in list {
            progress(.pulling(zone, records: 0))
            do {
                let pulled = try await puller.pull(zone)
                if let uid = contradicted[zone] { try await store.noteUnpushed(uid, false) }
                // The changes kept for the copy it replaced go with the zone that took its place.
                if let replaced = pulled.replaced { try await pendingChanges.refile(from: replaced.from, to: replaced.to) }
                report.pulled.append(pulled)
                try await store.noteSync(of: zone, at: Date())
            } catch let error as StoreError where zones != nil && [.zoneNotFound, .permissionFailure].contains(error.code) {
                // A zone named that the server no longer shows this user (deleted, left,
                // removed): dropped from the replica when its signed log or deletion says why.
                // The error stays the zone's: the server's word on why.
                var gone = PullReport()
                try await dropGone([zone], server: server.session, into: &gone)
                report.dropped += gone.dropped
                report.failed.append((zone, error))
            } catch let error as StoreError {
                store.logger.warning("zone not pulled", metadata: ["zone": "\(zone.name)", "error": "\(error.message)"])
                report.failed.append((zone, error))
            }
        }
        // After a pull of every zone the server shows, with none failed: a stage left for a
        // zone the replica does not hold (its pull was cut short, then the zone went from the
        // server, or was made again under another uid) is no zone's, and its rows go. (A pull of
        // that zone running in another process at this moment starts again at its next run.)
        if zones == nil, report.failed.isEmpty {
            for uid in try await store.stagesOfNoZone() { try await store.clearStage(of: uid) }
        }
        return report
    }

    /// Waits until a commit may have changed a zone on the server, or `interval` has passed.
    /// - Throws: `.serviceUnavailable` while offline, or when the server stops answering.
    public func waitForServerChange(upTo interval: Duration) async throws {
        guard let server else { throw StoreError(.serviceUnavailable, offlineReason ?? "the server cannot be reached") }
        try await server.store.waitForChange(upTo: interval)
    }

    /// Of `candidates`, the zones the replica holds that the server does not show this user: each one whose
    /// owner's signed deletion the server kept (at or past the replica's head), or whose signed
    /// log says this user may no longer read it, is dropped from the replica (`secure_delete`
    /// zeroes its pages, and the write-ahead log is truncated); any other is kept, and reported
    /// as failed: a zone that disappears without a signed entry was hidden or lost.
    private func dropGone(_ candidates: [ZoneID], server: Session, into report: inout PullReport) async throws {
        guard case .sqlite(let sqlite) = store.backend else { return }
        let driver = SQLiteSnapshotDriver(storage: sqlite, logger: store.logger)
        for zone in candidates {
            // The replica's copy, and its head; a zone the user's marks say they deleted goes.
            let held: (rowID: Int64, uid: [UInt8], mark: ZoneMark?)? = try await session.read { db in
                guard let row = try db.zoneRow(zone) else { return nil }
                if try self.session.verifiedLogs.storedMark(row)?.isDeletion == true { return (row.rowID, row.uid, nil) }
                return (row.rowID, row.uid, try self.session.verifiedLogs.zoneLog(db, zone: row).mark)
            }
            guard let (rowID, uid, known) = held else { continue }
            guard let mark = known else {
                try await driver.apply([.deleteZone(rowID: rowID)], operation: nil)
                try await store.clearStage(of: uid)
                session.verifiedLogs.forget(zoneRowID: rowID)
                report.dropped.append((zone, "deleted"))
                continue
            }
            let directory = server.zoneDirectory
            let outcome: ZoneDirectory.Unlisted
            do { outcome = try await server.read { db in try directory.checkUnlisted(db, mark) } } catch let error as StoreError where error.code != .serviceUnavailable {
                // A server that refuses to show it.
                report.failed.append((zone, StoreError(.integrityFailure, "the server no longer shows you zone '\(zone.name)' of \(zone.ownerID), and no signed entry says why (it answers: \(error.message)): it was hidden or lost; your replica keeps its copy")))
                continue
            }
            let why: String
            switch outcome {
            case .deleted:
                try directory.closeMark(mark)
                why = "deleted by its owner"
            case .unreadable:
                why = "no longer shared with you"
            case .finding(let finding):
                report.failed.append((zone, StoreError(.integrityFailure, finding.message + "; your replica keeps its copy")))
                continue
            }
            // With its rows a pull had staged: nothing of the zone stays.
            try await driver.apply([.deleteZone(rowID: rowID)], operation: nil)
            try await store.clearStage(of: uid)
            session.verifiedLogs.forget(zoneRowID: rowID)
            report.dropped.append((zone, why))
        }
    }

    /// One zone of the replica, as ``status()`` shows it.
    public struct ZoneStatus: Sendable {
        public let zone: ZoneID
        /// The confirmed head: the newest entry of the zone's log the replica holds, verified.
        public let confirmedSeq: Int64
        /// When a pull last brought the zone up to the server's state; nil before any.
        public let lastSync: Date?
        /// What fails verification in the replica's copy (empty when it verifies).
        public let findings: [String]
        /// Changes made offline and not pushed yet.
        public var pending = 0
        /// Changes kept as conflicts (``Replica/pendingConflicts()``).
        public var conflicts = 0
        /// Changes the server refused, kept (``Replica/refusedChanges()``).
        public var refused = 0
    }

    /// Every zone the replica holds, with its confirmed head and last sync.
    public func status() async throws -> [ZoneStatus] {
        let zones = try await session.privateDatabase.zones().map(\.id) + session.sharedDatabase.zones().map(\.id)
        let syncs = try await store.lastSyncs()
        let counts = try await pendingChanges.counts()
        var statuses = [ZoneStatus]()
        for zone in zones {
            let uid = try await session.read { db in try db.zoneRow(zone)?.uid }
            var status: ZoneStatus
            do {
                let head = try await session.read { db in
                    try self.session.verifiedLogs.zoneState(db, zone: try self.session.accessControl.zoneRow(db, zone)).headSeq
                }
                status = ZoneStatus(zone: zone, confirmedSeq: head, lastSync: uid.flatMap { syncs[$0] }, findings: [])
            } catch let error as StoreError {
                status = ZoneStatus(zone: zone, confirmedSeq: 0, lastSync: nil, findings: [error.message])
            }
            if let uid, let c = counts[uid] { (status.pending, status.conflicts, status.refused) = c }
            statuses.append(status)
        }
        // A zone dropped after a verified deletion or removal leaves only its refused changes.
        var gone = [ZoneID: Int]()
        for kept in try await pendingChanges.kept(.refused) where !zones.contains(kept.zone) { gone[kept.zone, default: 0] += 1 }
        for (zone, count) in gone.sorted(by: { $0.key.name < $1.key.name }) {
            var status = ZoneStatus(zone: zone, confirmedSeq: 0, lastSync: nil,
                                    findings: ["the zone is gone from your replica; only your changes the server refused are kept"])
            status.refused = count
            statuses.append(status)
        }
        return statuses
    }
}

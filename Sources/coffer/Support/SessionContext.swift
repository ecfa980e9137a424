import CofferCrypto
import CofferStore
import CofferVault
import Foundation

/// The acting user's session on the store, and zone arguments resolved against it.
struct SessionContext {
    let session: Session
    let store: Store
    /// On a PostgreSQL store or a server, whose calls all suspend: the verified contacts, read once, for the
    /// names output shows. (On SQLite, each is read when asked.)
    private let contacts: [String: Contact]?
    /// Whether the store is a server's.
    let throughServer: Bool
    /// With a server: the user's replica of it (see ``Replica``).
    let replica: Replica?
    /// Whether the command's reads come from the replica (a command that only reads records,
    /// schemas and zone lists): each zone it names is pulled first when the server answers.
    let readsLocally: Bool
    /// Whether the command's writes are kept in the replica as pending changes: a record write
    /// or import while the server cannot be reached (``init(_:createStore:readsLocally:queuesOffline:)``).
    let writesPending: Bool

    /// Opens the vault and the store. Each command states whether it may `createStore`: only one
    /// that can succeed on a new store (`zone create`, and `contact add` through
    /// ``GlobalOptions/openStore(create:)``). Every other command needs what only a store that
    /// exists holds (a zone, a share), so it fails with 66 instead of leaving an empty store.
    ///
    /// With a server, the command works through the user's replica of it: a command that only
    /// reads (`readsLocally`) reads the replica, after pulling each zone it names when the server
    /// answers, and reads it offline when the server does not; any other command needs the server
    /// (exit 69 without it), and the zones it names are pulled into the replica when it succeeds
    /// (``pullWrittenZones()``). A command that `queuesOffline` (record writes and imports)
    /// writes to the replica instead while the server cannot be reached: its writes are kept
    /// there as pending changes (``writesPending``), pushed at the next sync.
    init(_ global: GlobalOptions, createStore: Bool, readsLocally: Bool = false, queuesOffline: Bool = false) async throws {
        // A mistyped --store fails at once, before any passphrase prompt.
        try global.checkPostgresStore()
        if !createStore { try global.requireStore() }
        // The vault before the store: a wrong passphrase leaves no new store behind.
        let vault = try global.openVault()
        self.readsLocally = readsLocally
        var pending = false
        if let server = try global.serverURL() {
            let replica = try await global.openReplica(server: server, vault: vault)
            self.replica = replica
            if readsLocally {
                (store, session) = (replica.store, replica.session)
                if let reason = replica.offlineReason, !global.offline {
                    Output.note("offline: \(Output.oneLine(reason)); reading your replica as of its last sync")
                }
            } else if let remote = replica.server {
                (store, session) = remote
            } else if queuesOffline {
                (store, session) = (replica.store, replica.session)
                pending = true
            } else {
                throw CLIError(ExitStatus.unavailable, "\(Output.oneLine(replica.offlineReason ?? "the server cannot be reached")); this command needs the server (record reads, lists, queries, exports and schemas work offline from your replica, and record writes and imports are kept there until 'coffer sync')")
            }
            Self.opened.withLock { $0.append(replica.session) }
            writesPending = pending
            throughServer = true
            contacts = readsLocally ? nil : Dictionary(try await store.contacts().map { ($0.userID, $0) }) { a, _ in a }
        } else {
            replica = nil
            writesPending = false
            store = try await global.openStore(create: createStore) { vault }
            session = try await store.openSession(vault: vault)
            throughServer = false
            contacts = try global.postgresStore() != nil ? Dictionary(try await store.contacts().map { ($0.userID, $0) }) { a, _ in a } : nil
        }
        Self.opened.withLock { $0.append(session) }
    }

    /// The zones commands named through a server, with the replica each is pulled into when the
    /// command succeeds.
    private static let written = Locked<[(Replica, ZoneID)]>([])

    /// Pulls into the user's replica the zones the command named through the server (after it
    /// succeeded): the replica then holds what the command wrote, for reads offline, and the
    /// user's marks advance to it. A pull that fails is a warning: the command's work is done.
    static func pullWrittenZones() async {
        let pending = written.withLock { list in
            defer { list = [] }
            return list
        }
        for (replica, zone) in pending where replica.isOnline {
            do {
                // Changes kept offline in the zone go first: merged, signed and confirmed.
                let pushed = try await replica.push([zone])
                notePushed(pushed, replica: replica)
                // A zone the command deleted or left is dropped from the replica: nothing to say.
                let report = try await replica.pull([zone])
                if let failure = report.failed.first, !report.dropped.contains(where: { $0.zone == zone }) {
                    Output.note("warning: your replica was not updated: \(Output.oneLine(failure.error.message))")
                }
            } catch {
                Output.note("warning: your replica was not updated: \(Output.oneLine("\(error)"))")
            }
        }
    }

    /// Says on stderr what a push did besides confirming: conflicts kept, refusals, losses.
    static func notePushed(_ report: Replica.PushReport, replica: Replica) {
        let label = { (zone: ZoneID) in zone.ownerID == replica.session.userID ? zone.name : "\(zone.name)@\(zone.ownerID)" }
        for conflict in report.conflicts {
            Output.note("conflict: \(label(conflict.zone)) \(conflict.name): your offline change and the server's version both changed it (\(conflict.kind)); the server's version is kept, yours is under 'coffer conflict list'")
        }
        for refused in report.refused {
            Output.note("refused: \(label(refused.zone)) \(refused.name): \(Output.oneLine(refused.why)); your change is kept under 'coffer status'")
        }
        if report.lost > 0 {
            Output.note("warning: \(Output.count(report.lost, "pending change")) your vault recorded are missing from your replica file (an older copy of it, or an edit): they cannot be pushed")
        }
        for failed in report.failed {
            Output.note("warning: \(label(failed.zone)): your pending changes were not pushed: \(Output.oneLine(failed.error.message))")
        }
    }

    /// Says on stderr that the command's writes were kept in the replica (offline).
    func notePending(_ count: Int) {
        guard writesPending else { return }
        Output.note("offline: \(count == 1 ? "1 change" : "\(count) changes") saved locally, not yet synced")
    }

    /// The sessions this process opened: their marks are written when the command ends.
    private static let opened = Locked<[Session]>([])
    /// The stores this process opened: their write-ahead logs are truncated when the command ends.
    private static let stores = Locked<[Store]>([])

    /// Notes a store the command opened.
    static func opened(_ store: Store) {
        stores.withLock { $0.append(store) }
    }

    /// Ends the command, whether it succeeded or not. Writes the marks (the newest log entry
    /// verified, per zone) of every session it opened: what it verified stays verified (a
    /// failure to write is a warning, not the command's failure). Then truncates the
    /// write-ahead log of each local store it opened, so that no value it deleted or replaced
    /// lingers there.
    static func finish() {
        for session in opened.withLock({ $0 }) {
            do { try session.saveMarks() } catch {
                Output.err(Data("warning: \(Output.oneLine("\(error)"))\n".utf8))
            }
        }
        for store in stores.withLock({ $0 }) { store.truncateWriteAheadLog() }
    }

    /// The private database: the zones this user owns.
    var db: RecordDatabase { session.privateDatabase }

    /// The database that holds `zone`: private for a zone this user owns, shared otherwise.
    func db(_ zone: ZoneID) -> RecordDatabase { session.database(for: zone) }

    /// `NAME` (a zone I own) or `NAME@OWNER`, where OWNER is a user id, email or contact name.
    /// Zone names cannot contain `@`, so the first `@` splits.
    func zone(_ argument: String) async throws -> ZoneID {
        try await synced(zoneID(naming: argument))
    }

    /// The zone `argument` names (`ZONE` or `ZONE@OWNER`), without pulling it or checking that
    /// it exists.
    func zoneID(naming argument: String) async throws -> ZoneID {
        guard let at = argument.firstIndex(of: "@") else { return ZoneID(name: argument, ownerID: session.userID) }
        let name = String(argument[..<at]), owner = String(argument[argument.index(after: at)...])
        guard !name.isEmpty, !owner.isEmpty else { throw CLIError(ExitStatus.dataError, "'\(argument)' is not ZONE or ZONE@OWNER") }
        return ZoneID(name: name, ownerID: try await contact(matching: owner).userID)
    }

    /// The changes of `zone` the server refused, kept in the replica (none without one).
    func refusedChanges(in zone: ZoneID) async throws -> [PendingChanges.Kept] {
        try await replica?.refusedChanges().filter { $0.zone == zone } ?? []
    }

    /// With a replica that reads locally and a server that answers: pulls every zone the server
    /// shows this user, and returns those that failed (a server that stops answering meanwhile
    /// leaves the replica as it was, with a note).
    func pullAll() async throws -> [RefusedZone] {
        guard let replica, readsLocally, replica.isOnline else { return [] }
        let report: Replica.PullReport
        do { report = try await replica.pull() } catch let error as StoreError where error.code == .serviceUnavailable {
            Output.note("offline: \(Output.oneLine(error.message)); reading your replica as of its last sync")
            return []
        }
        return report.failed.map { RefusedZone(id: $0.zone, error: $0.error) }
    }

    /// A zone the command names: with a replica, pulled first for a command that reads it
    /// locally (a server that stops answering meanwhile leaves the replica as it was, with a
    /// note), or noted for ``pullWrittenZones()``.
    private func synced(_ zone: ZoneID) async throws -> ZoneID {
        guard let replica else {
            // A zone moved from this local store to a server: say where it went.
            if !throughServer, let origin = try await store.movedZoneOrigin(zone),
               try await !session.database(for: zone).zones().contains(where: { $0.id == zone }) {
                throw CLIError(ExitStatus.notFound, "zone '\(zone.name)' was moved to the server at \(origin) with 'coffer zone push': work on it with --server \(origin)")
            }
            return zone
        }
        guard readsLocally else {
            Self.written.withLock { $0.append((replica, zone)) }
            return zone
        }
        guard replica.isOnline else { return zone }
        let report: Replica.PullReport
        do { report = try await replica.pull([zone]) } catch let error as StoreError where error.code == .serviceUnavailable {
            Output.note("offline: \(Output.oneLine(error.message)); reading your replica as of its last sync")
            return zone
        }
        if let failure = report.failed.first {
            guard failure.error.code == .serviceUnavailable else { throw failure.error }
            Output.note("offline: \(Output.oneLine(failure.error.message)); reading your replica as of its last sync")
        }
        return zone
    }

    /// The contact `who` names: a user id (any verified card of that id in the store is the
    /// user's: the id is their key's), or an email or a name, which resolves only to a card this
    /// user pinned in their vault with `contact add` (or to themselves). A store's directory of
    /// cards holds whatever its writers put there, under any name and email, on a server and on a
    /// local store alike.
    func contact(matching who: String) async throws -> Contact {
        // Cards are looked up on the server when it answers: the replica holds only those of
        // the users who signed its zones.
        let store = replica?.server?.store ?? self.store
        guard !isUserID(who) else { return try await store.contact(matching: who) }
        let ids = session.pinnedUserIDs(matching: who)
        guard !ids.isEmpty else {
            throw CLIError(ExitStatus.notFound, "no contact you added matches '\(who)'; names and emails resolve only to cards you added with 'coffer contact add CARD' (or give the user id)")
        }
        guard ids.count == 1 else { throw CLIError(ExitStatus.dataError, "'\(who)' matches \(ids.count) of your contacts; name one by its user id") }
        return try await store.contact(matching: ids[0])
    }

    private func isUserID(_ text: String) -> Bool {
        text.utf8.count == 32 && text.utf8.allSatisfy { (48...57).contains($0) || (97...102).contains($0) }
    }

    /// A user's display name for output: the contact's name, or the id itself.
    func displayName(_ userID: String?) -> String {
        guard let userID else { return "-" }
        if userID == session.userID { return "\(session.vault.identity.name) (you)" }
        if let contacts { return contacts[userID]?.name ?? userID }
        return (try? store.contact(matching: userID).name) ?? userID
    }
}

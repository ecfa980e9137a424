import CofferCrypto
import CofferVault
import Foundation

/// One user acting on a store: their vault's keys, and caches of the zone keys and schemas
/// they have opened. Zone keys are unwrapped once per session and kept in guarded memory.
///
/// ```swift
/// let alice = try store.session(vault: aliceVault)
/// let zone = try await alice.privateDatabase.createZone(named: "Notes")
/// ```
public final class Session: Sendable {
    public let store: Store
    public let vault: Vault
    /// The zone keys this user opened.
    let keyRing: KeyRing
    /// (zone row id, record type) → field → spec. A field's entry keeps its type until its
    /// zone's owner drops it (``SchemaChanges/dropFields(_:of:zone:label:)``), when no record uses it.
    let schemas = Locked<[SchemaKey: [String: FieldSchema]]>([:])
    /// Counts the times this session saw a cached schema lose or change a field (a drop, here or
    /// by another process): a ``RowContext`` notes it, so that a ``DecodeWorker`` does not take a
    /// schema of as many fields for the same one.
    let schemaGeneration = Locked<Int>(0)
    /// Zone row id → the zone's log as verified so far (see ``ZoneLog``).
    let logs = Locked<[Int64: ZoneLog]>([:])
    /// What a write leaves for after its transaction commits (the log it extended, the mark).
    let commitHooks = CommitHooks()
    /// Zone row id → entry seq → a record entry of the log, checked against the verified chain.
    let commits = Locked<[Int64: [Int64: VerifiedCommit]]>([:])
    /// Zone row id → the context of a row by its commit, type, epoch and whether it has sealed
    /// values (see ``RecordReader/context(_:zone:row:)``), kept between reads. Each is made from the
    /// caches above, so a zone's are dropped whenever its schema or key caches change
    /// (`forget(zoneRowID:)` of ``RowContexts``). One made while another thread changes them may be
    /// kept with the older schema: its rows then decode as `.staleSchema` (a field it lacks, or a
    /// row that does not match its entry under it), which reads the schema afresh and decodes
    /// once more: slower once, never wrong.
    let rowContexts = RowContexts([:])
    /// Decode workers kept between reads (see ``DecodeWorker``).
    let decodeWorkers = Locked<[DecodeWorker]>([])
    /// When ``VerifiedLogs/advanceMark(_:flush:)`` last wrote the marks file (seconds since 1970).
    let lastMarkSave = Locked<Double>(Date().timeIntervalSince1970)

    /// Advances of zone logs and marks by the sessions of this process: a counter, and for each
    /// zone uid the counter's value at its last advance. A read notes the counter when it begins
    /// (``VerifiedLogs/read(_:)``), so that a read which began before a zone advanced is known to possibly see
    /// an older head of that zone's log.
    static let advances = Locked<(counter: Int, zones: [[UInt8]: Int])>((0, [:]))
    /// The counter each running read began at, by its connection.
    static let readStarts = Locked<[ObjectIdentifier: Int]>([:])

    /// Notes that these zones' logs or marks advanced.
    static func noteAdvance(_ zoneUIDs: some Sequence<[UInt8]>) {
        advances.withLock { a in
            a.counter += 1
            for uid in zoneUIDs { a.zones[uid] = a.counter }
        }
    }

    /// Whether verifying a zone's log advances the user's mark for it. A replica's session on
    /// its server does not: only the replica's pulls advance marks, once what was verified is
    /// stored in the replica, so that the marks never run ahead of it.
    let advancesMarks: Bool

    /// A replica's pending changes, when this is the replica's session: its saves and deletes
    /// are kept there, unsigned, and its reads show them.
    let pendingChangesBox = Locked<PendingChanges?>(nil)
    /// A replica's pending changes, when this is the session of a replica (``Replica/session``):
    /// every write through it is kept there until a push signs it.
    public var pendingChanges: PendingChanges? { pendingChangesBox.withLock { $0 } }

    init(store: Store, vault: Vault, advancesMarks: Bool = true) {
        self.store = store
        self.vault = vault
        self.advancesMarks = advancesMarks
        keyRing = KeyRing(vault: vault)
    }

    // The services this session's work goes through, each made of the parts it uses (see each type).
    var verifiedLogs: VerifiedLogs {
        VerifiedLogs(store: store, vault: vault, logs: logs, commits: commits, commitHooks: commitHooks, lastMarkSave: lastMarkSave,
                     advancesMarks: advancesMarks, schemaRegistry: schemaRegistry)
    }
    var schemaRegistry: SchemaRegistry {
        SchemaRegistry(store: store, schemas: schemas, schemaGeneration: schemaGeneration, rowContexts: rowContexts)
    }
    var accessControl: AccessControl { AccessControl(userID: userID, keyRing: keyRing, verifiedLogs: verifiedLogs) }
    var reader: RecordReader {
        RecordReader(store: store, keyRing: keyRing, verifiedLogs: verifiedLogs, accessControl: accessControl, schemaRegistry: schemaRegistry,
                     rowContexts: rowContexts, decodeWorkers: decodeWorkers)
    }
    var writer: RecordWriter {
        RecordWriter(userID: userID, store: store, keyRing: keyRing, verifiedLogs: verifiedLogs, accessControl: accessControl,
                     schemaRegistry: schemaRegistry, reader: reader, rowContexts: rowContexts)
    }
    var schemaChanges: SchemaChanges {
        SchemaChanges(store: store, keyRing: keyRing, verifiedLogs: verifiedLogs, accessControl: accessControl, schemaRegistry: schemaRegistry,
                      reader: reader)
    }
    var zoneDirectory: ZoneDirectory {
        ZoneDirectory(store: store, vault: vault, keyRing: keyRing, verifiedLogs: verifiedLogs, accessControl: accessControl,
                      schemaRegistry: schemaRegistry, rowContexts: rowContexts)
    }
    var sharing: ShareService {
        ShareService(store: store, vault: vault, keyRing: keyRing, verifiedLogs: verifiedLogs, accessControl: accessControl,
                     schemaRegistry: schemaRegistry, reader: reader, writer: writer, zoneDirectory: zoneDirectory, rowContexts: rowContexts)
    }
    var changeFeed: ChangeFeed {
        ChangeFeed(userID: userID, store: store, verifiedLogs: verifiedLogs, accessControl: accessControl, reader: reader)
    }
    var auditor: Auditor {
        Auditor(store: store, keyRing: keyRing, verifiedLogs: verifiedLogs, accessControl: accessControl, reader: reader)
    }
    var legacyUpgrade: LegacyUpgrade {
        LegacyUpgrade(store: store, vault: vault, keyRing: keyRing, verifiedLogs: verifiedLogs, schemaRegistry: schemaRegistry,
                      writer: writer, zoneDirectory: zoneDirectory, sharing: sharing, rowContexts: rowContexts)
    }
    var backupSource: BackupSource { BackupSource(verifiedLogs: verifiedLogs, auditor: auditor) }
    var backupRestore: BackupRestore { BackupRestore(store: store, vault: vault, auditor: auditor) }

    /// The acting user's id.
    public var userID: String { vault.identity.userID }

    /// The zones this user owns.
    public var privateDatabase: RecordDatabase { RecordDatabase(session: self, scope: .private) }

    /// The zones others shared with this user and that they accepted.
    public var sharedDatabase: RecordDatabase { RecordDatabase(session: self, scope: .shared) }

    /// The database that holds `zone`: ``privateDatabase`` for a zone this user owns,
    /// ``sharedDatabase`` for one another user owns.
    public func database(for zone: ZoneID) -> RecordDatabase {
        zone.ownerID == userID ? privateDatabase : sharedDatabase
    }

    /// Writes this user's high-water marks (the newest log entry verified, per zone) to the marks
    /// file beside the vault, when they advanced since the last write. Call it when a unit of
    /// work ends (the command line does, after every command); sessions also write them when
    /// they are released.
    /// - Throws: `.internalError` when the marks file cannot be written.
    public func saveMarks() throws {
        try Self.saveMarks(of: vault)
    }

    /// ``saveMarks()`` for the marks of `vault` (also when ``VerifiedLogs/advanceMark(_:flush:)``
    /// finds them due).
    static func saveMarks(of vault: Vault) throws {
        guard vault.marks.hasUnsavedChanges else { return }
        let before = Set((try? vault.marks.all()) ?? [])
        do { try vault.marks.save() } catch {
            throw StoreError(.internalError, "your marks file could not be written: \(error)", underlying: error as? VaultError)
        }
        // The merge may have brought in marks that another process advanced.
        let after = Set((try? vault.marks.all()) ?? [])
        Session.noteAdvance(after.subtracting(before).map(\.zoneUID))
    }

    deinit {
        try? saveMarks()
    }
}

extension Store {
    /// A session acting as the vault's user. Registers the user's own contact card in the
    /// store, so that others can find them, when the store does not hold their identity yet (a
    /// session of a known user only reads, and does not wait for another process's write).
    ///
    /// The user's high-water marks are read here, before any of the session's reads. Zones of
    /// the store's earlier format that this user owns are upgraded here, once: each is verified
    /// as it stands, re-sealed, and given a signed log (see `Docs/Security.md`).
    public func session(vault: Vault) throws -> Session {
        if (try? verifiedContact(userID: vault.identity.userID))??.identity != vault.identity {
            try addContact(ContactCard(vault: vault))
        }
        try Self.loadMarks(of: vault)
        let session = Session(store: self, vault: vault)
        try session.legacyUpgrade.upgradeLegacyZones()
        return session
    }

    /// Reads the user's high-water marks, before any of a new session's reads.
    /// - Throws: `.integrityFailure` when the marks file cannot be read.
    private static func loadMarks(of vault: Vault) throws {
        do { _ = try vault.marks.all() } catch let error as VaultError {
            throw StoreError(.integrityFailure, "your marks file cannot be read: \(error.message)", underlying: error)
        }
    }

    /// ``session(vault:)`` through the async store calls: the way to open a session on a
    /// PostgreSQL store or a server, and from async code on any store. It suspends, instead of
    /// holding its thread, while it waits for a connection or for another connection's write
    /// lock (to register the user's card); on SQLite, the one-time upgrade of zones of the
    /// earlier format, when the store has any, writes as ``session(vault:)`` does.
    ///
    /// ```swift
    /// let store = try await Store(postgres: url)
    /// let alice = try await store.openSession(vault: aliceVault)
    /// ```
    public func openSession(vault: Vault) async throws -> Session {
        try await openSession(vault: vault, advancesMarks: true)
    }

    /// ``openSession(vault:)``, whose verification advances the user's marks or not (see
    /// ``Session/advancesMarks``).
    func openSession(vault: Vault, advancesMarks: Bool) async throws -> Session {
        let identity = vault.identity
        if try await read({ db in try self.verifiedContact(db, userID: identity.userID) })?.identity != identity {
            try await addContact(ContactCard(vault: vault))
        }
        try Self.loadMarks(of: vault)
        let session = Session(store: self, vault: vault, advancesMarks: advancesMarks)
        // Only SQLite stores hold zones of the earlier format.
        if case .sqlite = backend { try await session.legacyUpgrade.upgradeLegacyZones() }
        return session
    }
}

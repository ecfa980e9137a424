import CofferCrypto
import CofferVault
import Foundation
import GRDB
import Testing
@testable import CofferStore

// Helpers of the signed-write, audit and change-feed tests (files named Signed*, Audit*,
// Changes*). Every name here starts with `signed`/`Signed` so that it cannot collide with the
// helpers of the other store tests. Vaults use `Argon2id.Parameters.min`; every test works in
// its own temporary folder, removed afterwards.

let signedPassphrase = "signed-tests-passphrase-Z3x9-quill"

/// A store in a fresh folder with its owner (Alice) acting in it.
struct SignedHarness: Sendable {
    let folder: URL
    let store: Store
    let owner: Session
    /// The database, on PostgreSQL.
    var postgres: PostgresURL? = nil
    /// Other store objects the test opened (on PostgreSQL, closed when the test ends).
    var others = Locked<[Store]>([])

    var path: String { store.url.path }
    var ownerDB: RecordDatabase { owner.privateDatabase }

    /// Runs `body` with a fresh store (an SQLite file, or a new PostgreSQL database) and Alice's
    /// session; removes the folder (and the database) afterwards.
    @discardableResult
    static func run<R>(_ backend: TestBackend = .sqlite, _ body: (SignedHarness) async throws -> R) async throws -> R {
        let folder = FileManager.default.temporaryDirectory
            .appendingPathComponent("coffer-signed-tests-\(UUID().uuidString)", isDirectory: true)
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: false,
                                                attributes: [.posixPermissions: 0o700])
        defer { try? FileManager.default.removeItem(at: folder) }
        let vault = try signedMakeVault(in: folder, name: "Alice Owner", email: "alice@example.com")
        switch backend {
        case .sqlite:
            let store = try Store(path: folder.appendingPathComponent("store.sqlite").path)
            return try await body(SignedHarness(folder: folder, store: store, owner: try store.session(vault: vault)))
        case .postgres:
            let others = Locked<[Store]>([])
            return try await withPostgresStore(closing: others) { store, url in
                try await body(SignedHarness(folder: folder, store: store, owner: try await store.openSession(vault: vault), postgres: url, others: others))
            }
        }
    }

    /// A new user with a vault of their own and a session on the store.
    func newUser(_ name: String, _ email: String) async throws -> Session {
        try await store.openSession(vault: try signedMakeVault(in: folder, name: name, email: email))
    }

    /// A new session of the same user: empty caches of verified commits, memberships, keys.
    func fresh(_ session: Session) async throws -> Session { try await store.openSession(vault: session.vault) }

    /// The same user on a machine that never saw the store: the vault opened again from its file,
    /// with no marks.
    func stranger(_ session: Session) async throws -> Session {
        let vault = try Vault.open(at: session.vault.url, passphrase: SecureBytes(copying: Array(signedPassphrase.utf8)))
        for mark in try vault.marks.all() { try vault.marks.reset(zone: mark.zoneUID, to: nil) }
        return try await otherStore().openSession(vault: vault)
    }

    /// Another `Store` object on the same file or database (as another process would open it)
    /// and a session on it.
    func otherStoreSession(_ session: Session) async throws -> Session {
        try await otherStore().openSession(vault: session.vault)
    }

    private func otherStore() async throws -> Store {
        guard let postgres else { return try Store(path: path) }
        let store = try await BackendFixture.open(postgres)
        others.withLock { $0.append(store) }
        return store
    }

    /// A second SQLite connection on the store's file, outside the library: what anyone with
    /// write access to the file can do.
    func sql<T>(_ body: (Database) throws -> T) throws -> T {
        var config = Configuration()
        config.busyMode = .timeout(10)
        let queue = try DatabaseQueue(path: path, configuration: config)
        defer { try? queue.close() }
        return try queue.write(body)
    }

    /// The zone's row as the library sees it (uid, name, owner, sequence).
    func zoneRow(_ zone: ZoneID) async throws -> ZoneRow {
        try #require(try await store.read { db in try db.zoneRow(zone) })
    }

    /// The zone's log as its owner verifies it now (all signatures checked).
    func state(_ zone: ZoneID) async throws -> ZoneState {
        let owner = self.owner
        return try await store.read { db in
            guard let row = try db.zoneRow(zone) else { throw StoreError(.zoneNotFound, "no zone \(zone.name)") }
            return try owner.verifiedLogs.walkLog(db, zone: row, signaturesAfter: 0).state
        }
    }

    /// Number of record entries (commits and rewrites) in a zone's log, by the kind each
    /// entry's body says.
    func commitCount(_ zone: ZoneID) async throws -> Int {
        try await store.read { db in
            guard let row = try db.zoneRow(zone) else { return -1 }
            return try db.logEntries(zoneRowID: row.rowID, after: 0).filter { stored in
                LogEntry.decode(stored.body).map { $0.kind == .commit || $0.kind == .rewrite } ?? false
            }.count
        }
    }

    /// Alice's zone `name` with notes of the given names, each saved in its own commit.
    func ownerZone(_ name: String = "Notes", notes: [String] = ["n1", "n2"]) async throws -> ZoneID {
        let zone = try await ownerDB.createZone(named: name)
        for note in notes { _ = try await ownerDB.save(signedNote(note, in: zone)) }
        return zone
    }

    /// Shares `zone`, invites each user with their permission (in order) and has them accept.
    func share(_ zone: ZoneID, with members: [(Session, SharePermission)]) async throws {
        _ = try await owner.share(zone: zone, title: "Shared notes")
        for (member, permission) in members {
            let share = try await owner.addParticipant(member.userID, permission: permission, to: zone)
            _ = try await member.acceptShare(url: share.url)
        }
    }

    /// Writes, with SQL and what a participant holds (their zone key and signing key), a record
    /// `name` and a commit signed by `signer` at the head of the zone's log, as someone bypassing
    /// the library would. The commit claims the owner's entry `ownerSeq` and key `epoch` (the
    /// zone's current ones by default). Returns the commit's sequence.
    @discardableResult
    func forge(in zone: ZoneID, signer: Session, name: String, title: String, body: String? = "forged body",
               ownerSeq: Int64? = nil, epoch keyEpoch: Int64? = nil, label: String? = nil,
               entry adjust: @escaping @Sendable (inout LogEntry) -> Void = { _ in }) async throws -> Int64 {
        if postgres != nil { // through the storage calls (see forgeCommit)
            return try await store.write { db in
                try forgeCommit(db, zone: zone, signer: signer, name: name, title: title, body: body, ownerSeq: ownerSeq, epoch: keyEpoch, label: label,
                                entry: adjust)
            }
        }
        return try sql { db in try forgeCommit(SQLiteTransaction(db), zone: zone, signer: signer, name: name, title: title, body: body, ownerSeq: ownerSeq,
                                               epoch: keyEpoch, label: label, entry: adjust) }
    }
}

/// Writes a record row and a commit entry signed by `signer` at the head of the zone's log, in
/// `db` (a connection of the attacker's own), with what `signer` holds: see ``SignedHarness/forge``.
@discardableResult
func forgeCommit(_ db: any StorageTransaction, zone: ZoneID, signer: Session, name: String, title: String, body: String?,
                 ownerSeq: Int64? = nil, epoch keyEpoch: Int64? = nil, label: String? = nil, key given: SymmetricKey? = nil,
                 entry adjust: (inout LogEntry) -> Void = { _ in }) throws -> Int64 {
    let row = try #require(try db.zoneRow(zone))
    let state = try signer.verifiedLogs.walkLog(db, zone: row, signaturesAfter: Int64.max)
    let head = try db.logHead(zoneRowID: row.rowID)!
    let seq = head.seq + 1
    let membership = ownerSeq ?? state.state.ownerSeq
    let epoch = keyEpoch ?? state.state.epoch
    let now = Date().timeIntervalSince1970
    let plain = Array(PlainValuesCodec.encode(["title": .string(title)]).utf8)
    var sealed: [UInt8]?
    if let body {
        let key = try given ?? signer.keyRing.zoneKey(db, zone: row, epoch: epoch, state: state.state)
        let ad = RecordSealer.associatedData(zone: row, name: name, type: "Note", epoch: epoch)
        sealed = Envelope.seal(SealedValuesCodec.encode(["body": .string(body)]), using: key,
                               keyID: UInt32(epoch), authenticating: ad).bytes
    }
    let types = PlainValuesCodec.typeCodes(["title": .string(title)])
    let hash = plain.withUnsafeBytes { p in
        types.withUnsafeBytes { t in
            RecordReader.withOptionalBytes(sealed) { s in
                RecordSealer.versionHash(zoneUID: row.uid, name: name, type: "Note", parent: nil, seq: seq, epoch: epoch,
                                         membershipSeq: membership, creatorID: signer.userID, modifierID: signer.userID,
                                         created: now, modified: now, plain: p, plainTypes: t, sealed: s).bytes
            }
        }
    }
    if let sqlite = db as? Database {
        try sqlite.execute(sql: """
            INSERT OR REPLACE INTO record (zone_id, name, type, parent, plain, sealed, epoch, seq, membership_seq, creator_id, modifier_id, created_at, modified_at)
            VALUES (?, ?, 'Note', NULL, ?, ?, ?, ?, ?, ?, ?, ?, ?)
            """, arguments: [row.rowID, name, String(decoding: plain, as: UTF8.self), sealed.map { Data($0) }, epoch, seq, membership,
                             signer.userID, signer.userID, now, now])
    } else {
        // Through the storage calls, whose writes check nothing the engine checks (a backend's
        // writer only stores what it is given).
        let version = SealedVersion(stamp: VersionStamp(name: name, type: "Note", parent: nil, seq: seq, epoch: epoch, membershipSeq: membership,
                                                        creatorID: signer.userID, modifierID: signer.userID, created: now, modified: now),
                                    plain: plain, plainTypes: types, sealed: sealed, digest: Digest32(hash))
        if try db.recordExists(zoneRowID: row.rowID, name: name) {
            try db.replaceRecord(version, zoneRowID: row.rowID)
        } else {
            try db.insertRecord(version, zoneRowID: row.rowID)
        }
    }
    var commit = CommitBuilder(zoneUID: row.uid, seq: seq)
    commit.addRecord(hash, name: name)
    let payload = RecordsPayload(epoch: epoch, ownerSeq: membership, label: label, records: commit.summary)
    try forgeEntry(db, zone: zone, signer: signer, kind: .commit, payload: payload.encoded, entries: commit.entries, names: commit.names, time: now,
                   entry: adjust)
    return seq
}

/// Appends a log entry signed by `signer` (any kind, any payload) at the head of the zone's log,
/// or at `seq` with `prev`, with a raw SQL connection: the library's rules are not applied.
/// `adjust` may change the entry's format fields before it is signed.
@discardableResult
func forgeEntry(_ db: any StorageTransaction, zone: ZoneID, signer: Session, kind: LogEntry.Kind, payload: [UInt8], entries: [UInt8]? = nil,
                names: [UInt8]? = nil, seq given: Int64? = nil, prev: Digest32? = nil, time: Double = Date().timeIntervalSince1970,
                entry adjust: (inout LogEntry) -> Void = { _ in }) throws -> Int64 {
    let row = try #require(try db.zoneRow(zone))
    let head = try db.logHead(zoneRowID: row.rowID)
    let seq = given ?? (head?.seq ?? 0) + 1
    var entry = LogEntry(zoneUID: row.uid, seq: seq, prev: prev ?? head?.hash ?? .zero, kind: kind, authorID: signer.userID, time: time,
                         payload: payload)
    adjust(&entry)
    let body = entry.body
    let signature = signer.vault.signingKey.signature(for: body)
    if let sqlite = db as? Database { // an entry put in the place of one already there (SQLite tests rewrite history)
        try sqlite.execute(sql: "DELETE FROM zone_log WHERE zone_id = ? AND seq = ?", arguments: [row.rowID, seq])
    }
    try db.appendLogEntry(zoneRowID: row.rowID, entry: entry, body: body, signature: signature,
                            hash: LogEntry.hash(body: body, signature: signature), entries: entries, names: names)
    return seq
}

/// A vault with a fast KDF in `folder/vaults/`.
func signedMakeVault(in folder: URL, name: String, email: String?) throws -> Vault {
    let vaults = folder.appendingPathComponent("vaults", isDirectory: true)
    try FileManager.default.createDirectory(at: vaults, withIntermediateDirectories: true)
    return try Vault.create(at: vaults.appendingPathComponent("\(UUID().uuidString).coffer"), name: name, email: email,
                            passphrase: SecureBytes(copying: Array(signedPassphrase.utf8)), kdf: .min)
}

/// A note: plain title, encrypted body.
func signedNote(_ name: String, in zone: ZoneID, title: String? = nil, body: String? = nil) -> CofferStore.Record {
    var record = CofferStore.Record(type: "Note", name: name, zone: zone)
    record.values["title"] = .string(title ?? "title of \(name)")
    record.encryptedValues["body"] = .string(body ?? "body of \(name)")
    return record
}

/// An audit finding reduced to what identifies it.
struct SignedFinding: Hashable, CustomStringConvertible {
    let kind: AuditFinding.Kind
    let subject: String
    init(_ kind: AuditFinding.Kind, _ subject: String) {
        self.kind = kind
        self.subject = subject
    }
    var description: String { "\(kind.rawValue):\(subject)" }
}

extension AuditReport {
    /// The findings as (kind, subject), for exact comparison.
    var signedKeys: Set<SignedFinding> { Set(findings.map { SignedFinding($0.kind, $0.subject) }) }
}

/// One item of a zone change feed, in feed order.
enum SignedFeedItem: Hashable, CustomStringConvertible {
    case changed(String)
    case deleted(String)
    var description: String {
        switch self {
        case .changed(let n): return "+\(n)"
        case .deleted(let n): return "-\(n)"
        }
    }
}

/// Items of a page in feed order, (seq, name): changed records carry their change tag's
/// sequence; deletions are placed by the caller's knowledge, so this returns both lists merged
/// by the sequence numbers given in `deletedSeqs`.
func signedPageItems(_ page: ZoneChanges, deletedSeqs: [String: Int64]) throws -> [SignedFeedItem] {
    var keyed = [(Int64, String, SignedFeedItem)]()
    for record in page.changed {
        let seq = try ChangeTag.parse(try #require(record.changeTag))
        keyed.append((seq, record.name, .changed(record.name)))
    }
    for deletion in page.deleted {
        let seq = try #require(deletedSeqs[deletion.name], "no known sequence for deletion of \(deletion.name)")
        keyed.append((seq, deletion.name, .deleted(deletion.name)))
    }
    return keyed.sorted { ($0.0, $0.1) < ($1.0, $1.1) }.map(\.2)
}

/// base64url without padding, written independently of the library.
func signedBase64URL(_ bytes: [UInt8]) -> String {
    Data(bytes).base64EncodedString()
        .replacingOccurrences(of: "+", with: "-").replacingOccurrences(of: "/", with: "_").replacingOccurrences(of: "=", with: "")
}

/// Decodes base64url without padding.
func signedBase64URLDecode(_ text: String) -> [UInt8]? {
    var b64 = text.replacingOccurrences(of: "-", with: "+").replacingOccurrences(of: "_", with: "/")
    while b64.count % 4 != 0 { b64 += "=" }
    return Data(base64Encoded: b64).map(Array.init)
}

/// Thrown when a raced operation took too long.
struct SignedTimeout: Error, CustomStringConvertible {
    let seconds: Int
    var description: String { "timed out after \(seconds) s" }
}

/// Runs `body`, failing with ``SignedTimeout`` if it has not finished after `seconds` (a guard
/// against a hang, generous: hundreds of tests share two cores).
func signedWithTimeout<T: Sendable>(seconds: Int = 30, _ body: @escaping @Sendable () async throws -> T) async throws -> T {
    try await withThrowingTaskGroup(of: T.self) { group in
        group.addTask { try await body() }
        group.addTask {
            try await Task.sleep(for: .seconds(seconds))
            throw SignedTimeout(seconds: seconds)
        }
        defer { group.cancelAll() }
        return try await group.next()!
    }
}

/// The row id of a zone, for SQL.
func signedRowID(_ h: SignedHarness, _ zone: ZoneID) async throws -> Int64 { try await h.zoneRow(zone).rowID }

/// Rewrites a stored log entry's body with SQL (its signature and hash columns kept), as
/// someone editing the file would: `change` gets the decoded entry and returns the new one.
func signedEditEntry(_ db: Database, zoneRowID: Int64, seq: Int64, _ change: (LogEntry) -> LogEntry) throws {
    let body = try #require(try Data.fetchOne(db, sql: "SELECT body FROM zone_log WHERE zone_id = ? AND seq = ?", arguments: [zoneRowID, seq]))
    let entry = try #require(LogEntry.decode(Array(body)))
    try db.execute(sql: "UPDATE zone_log SET body = ? WHERE zone_id = ? AND seq = ?", arguments: [Data(change(entry).body), zoneRowID, seq])
    #expect(db.changesCount == 1)
}

/// Sets the transaction author label of a stored commit (see ``signedEditEntry``).
func signedEditEntryLabel(_ db: Database, zoneRowID: Int64, seq: Int64, to label: String?) throws {
    try signedEditEntry(db, zoneRowID: zoneRowID, seq: seq) { entry in
        let payload = RecordsPayload.decode(entry.payload)!
        return LogEntry(zoneUID: entry.zoneUID, seq: entry.seq, prev: entry.prev, kind: entry.kind, authorID: entry.authorID, time: entry.time,
                        payload: RecordsPayload(epoch: payload.epoch, ownerSeq: payload.ownerSeq, label: label, records: payload.records).encoded)
    }
}

import CofferCrypto
import CofferVault
import CofferTestSupport
import Foundation
import GRDB
import PostgresNIO
import Testing
@testable import CofferStore

// Helpers of the sharing tests (files named Share*/Permission*). Every name here is distinct
// from the general store test helpers. Vaults use `Argon2id.Parameters.min`; every test works
// in its own temporary folder, removed afterwards.

let sharePassphrase = "share-tests-passphrase-Q7m4"

/// A store in a fresh folder (SQLite) or database (PostgreSQL) with Alice, the owner of the
/// zones under test, acting in it.
struct ShareFixture: Sendable {
    let folder: URL
    let store: Store
    let alice: Session
    /// The database, on PostgreSQL.
    let postgres: PostgresURL?

    /// Runs `body` with a fresh store and Alice's session; removes the folder (and database) afterwards.
    @discardableResult
    static func run<R>(_ backend: TestBackend = .sqlite, _ body: (ShareFixture) async throws -> R) async throws -> R {
        let folder = try makeTemporaryFolder(prefix: "coffer-share-tests")
        defer { try? FileManager.default.removeItem(at: folder) }
        let aliceVault = try makeShareVault(in: folder, name: "Alice", email: "alice@example.com")
        switch backend {
        case .sqlite:
            let store = try Store(path: folder.appendingPathComponent("store.sqlite").path)
            let fixture = ShareFixture(folder: folder, store: store, alice: try store.session(vault: aliceVault), postgres: nil)
            return try await body(fixture)
        case .postgres:
            return try await withPostgresStore { store, url in
                try await body(ShareFixture(folder: folder, store: store, alice: try await store.openSession(vault: aliceVault), postgres: url))
            }
        }
    }

    /// A new user with a vault of their own and a session on the store (their card is
    /// registered), whose card Alice pinned (as `coffer contact add` does): her names and
    /// emails resolve to it.
    func user(_ name: String, _ email: String) async throws -> Session {
        let vault = try makeShareVault(in: folder, name: name, email: email)
        try alice.vault.pin(try ContactCard(vault: vault))
        return try await store.openSession(vault: vault)
    }

    /// A new session of the same user: empty key and verified-share caches.
    func fresh(_ session: Session) async throws -> Session { try await store.openSession(vault: session.vault) }

    /// Runs SQL on the PostgreSQL database, as someone with access to it would.
    func sql<T>(_ body: (PostgresConnector) async throws -> T) async throws -> T {
        try await withPostgresAdmin(postgres, body)
    }

    /// A second SQLite connection on the store's file, outside the store: what anyone with
    /// write access to the file can do.
    func raw<T>(_ body: (Database) throws -> T) throws -> T {
        var config = Configuration()
        config.busyMode = .timeout(10)
        let queue = try DatabaseQueue(path: store.url.path, configuration: config)
        defer { try? queue.close() }
        return try queue.write(body)
    }

    /// The row id of one of Alice's zones.
    func zoneRowID(_ zone: ZoneID) throws -> Int64 {
        try raw { db in
            try #require(try Int64.fetchOne(db, sql: "SELECT id FROM zone WHERE owner_id = ? AND name = ?",
                                            arguments: [zone.ownerID, zone.name]))
        }
    }

    /// Creates Alice's zone `name` with notes of the given names (title plain, body encrypted).
    func aliceZone(_ name: String = "Family", notes: [String] = ["n1", "n2"]) async throws -> ZoneID {
        let zone = try await alice.privateDatabase.createZone(named: name)
        for note in notes { _ = try await alice.privateDatabase.save(shareNote(note, in: zone)) }
        return zone
    }

    /// Alice's zone "Family" with notes n1 and n2, shared (public permission none) and `who`
    /// invited with `permission` and, if `accept`, accepted.
    func sharedWith(_ who: Session, _ permission: SharePermission, accept: Bool = true) async throws -> (ZoneID, Share) {
        let zone = try await aliceZone()
        _ = try await alice.share(zone: zone, title: "Family notes")
        let share = try await alice.addParticipant(who.userID, permission: permission, to: zone)
        if accept { _ = try await who.acceptShare(url: share.url) }
        return (zone, try await alice.fetchShare(in: zone))
    }

    // MARK: Raw facts

    /// (epoch, member) of every `zone_key` row of the zone, sorted.
    func zoneKeyRows(_ zone: ZoneID) async throws -> [ShareKeyRow] {
        if postgres != nil {
            return try await sql { admin in
                try await admin.query("""
                    SELECT k.epoch, k.member_id FROM zone_key k JOIN zone z ON z.id = k.zone_id
                    WHERE z.owner_id = \(zone.ownerID) AND z.name = \(zone.name) ORDER BY k.epoch, k.member_id
                    """).map { row in
                    let (epoch, member) = try row.decode((Int64, String).self)
                    return ShareKeyRow(epoch: epoch, member: member)
                }
            }
        }
        let rowID = try zoneRowID(zone)
        return try raw { db in
            try Row.fetchAll(db, sql: "SELECT epoch, member_id FROM zone_key WHERE zone_id = ? ORDER BY epoch, member_id",
                             arguments: [rowID]).map { ShareKeyRow(epoch: $0[0], member: $0[1]) }
        }
    }

    /// The wrapped key of `member` at `epoch`, if any.
    func wrappedKey(_ zone: ZoneID, member: String, epoch: Int64) async throws -> [UInt8]? {
        if postgres != nil {
            return try await sql { admin in
                try await admin.query("""
                    SELECT k.wrapped_key FROM zone_key k JOIN zone z ON z.id = k.zone_id
                    WHERE z.owner_id = \(zone.ownerID) AND z.name = \(zone.name) AND k.epoch = \(epoch) AND k.member_id = \(member)
                    """).first.map { Array(try $0.decode(Data.self)) }
            }
        }
        let rowID = try zoneRowID(zone)
        return try raw { db in
            try Data.fetchOne(db, sql: "SELECT wrapped_key FROM zone_key WHERE zone_id = ? AND epoch = ? AND member_id = ?",
                              arguments: [rowID, epoch, member]).map { Array($0) }
        }
    }

    /// The epochs of `zone_key_chain` rows of the zone.
    func chainEpochs(_ zone: ZoneID) async throws -> [Int64] {
        if postgres != nil {
            return try await sql { admin in
                try await admin.query("""
                    SELECT c.epoch FROM zone_key_chain c JOIN zone z ON z.id = c.zone_id
                    WHERE z.owner_id = \(zone.ownerID) AND z.name = \(zone.name) ORDER BY c.epoch
                    """).map { try $0.decode(Int64.self) }
            }
        }
        let rowID = try zoneRowID(zone)
        return try raw { db in
            try Int64.fetchAll(db, sql: "SELECT epoch FROM zone_key_chain WHERE zone_id = ? ORDER BY epoch", arguments: [rowID])
        }
    }

    /// Record name → epoch column, from the file.
    func recordEpochs(_ zone: ZoneID) async throws -> [String: Int64] {
        if postgres != nil {
            return try await sql { admin in
                var out = [String: Int64]()
                for row in try await admin.query("""
                    SELECT r.name, r.epoch FROM record r JOIN zone z ON z.id = r.zone_id WHERE z.owner_id = \(zone.ownerID) AND z.name = \(zone.name)
                    """) {
                    let (name, epoch) = try row.decode((String, Int64).self)
                    out[name] = epoch
                }
                return out
            }
        }
        let rowID = try zoneRowID(zone)
        return try raw { db in
            var out = [String: Int64]()
            for row in try Row.fetchAll(db, sql: "SELECT name, epoch FROM record WHERE zone_id = ?", arguments: [rowID]) {
                out[row[0]] = row[1]
            }
            return out
        }
    }

    /// The raw `sealed` column of a record.
    func sealedBlob(_ zone: ZoneID, _ name: String) async throws -> [UInt8] {
        if postgres != nil {
            return try await sql { admin in
                Array(try #require(try await admin.query("""
                    SELECT r.sealed FROM record r JOIN zone z ON z.id = r.zone_id
                    WHERE z.owner_id = \(zone.ownerID) AND z.name = \(zone.name) AND r.name = \(name)
                    """).first).decode(Data.self))
            }
        }
        let rowID = try zoneRowID(zone)
        return try raw { db in
            Array(try #require(try Data.fetchOne(db, sql: "SELECT sealed FROM record WHERE zone_id = ? AND name = ?",
                                                 arguments: [rowID, name])))
        }
    }

    /// What the zone's log says, as its owner verifies it now.
    func state(_ zone: ZoneID) async throws -> ZoneState {
        let alice = self.alice
        return try await store.read { db in
            guard let row = try db.zoneRow(zone) else { throw StoreError(.zoneNotFound, "no zone \(zone.name)") }
            return try alice.verifiedLogs.walkLog(db, zone: row, signaturesAfter: 0).state
        }
    }

    enum LogCount { case share, participants, acceptances }

    /// From the zone's verified log: 1 when it is shared (else 0), its named participants (removed
    /// ones included), or the acceptances in force (named participants and link joiners).
    func logCount(_ what: LogCount, _ zone: ZoneID) async throws -> Int {
        let state = try await state(zone)
        switch what {
        case .share: return state.share == nil ? 0 : 1
        case .participants: return state.share?.participants.count ?? 0
        case .acceptances:
            return state.acceptances.values.filter { $0 == .accepted }.count + state.linkJoiners.values.filter { $0 == .accepted }.count
        }
    }

    /// The share uid of the zone's share, from its log.
    func shareUID(_ zone: ZoneID) async throws -> [UInt8] {
        try #require(try await state(zone).share?.shareUID)
    }

    /// The zone's row, read from the SQLite file (for synchronous checks).
    func sqliteZoneRow(_ zone: ZoneID) throws -> ZoneRow {
        try raw { db in try #require(try SQLiteTransaction(db).zoneRow(zone)) }
    }

    /// The zone's uid (bound into record associated data).
    func zoneRow(_ zone: ZoneID) async throws -> ZoneRow {
        try #require(try await store.read { db in try db.zoneRow(zone) })
    }
}

struct ShareKeyRow: Hashable, CustomStringConvertible {
    let epoch: Int64
    let member: String
    var description: String { "\(epoch):\(member.prefix(8))" }
}

/// A vault with a fast KDF in `folder/vaults/`.
func makeShareVault(in folder: URL, name: String, email: String?) throws -> Vault {
    let vaults = folder.appendingPathComponent("vaults", isDirectory: true)
    try FileManager.default.createDirectory(at: vaults, withIntermediateDirectories: true)
    return try Vault.create(at: vaults.appendingPathComponent("\(UUID().uuidString).coffer"), name: name, email: email,
                            passphrase: SecureBytes(copying: Array(sharePassphrase.utf8)), kdf: .min)
}

/// A note: plain title, encrypted body.
func shareNote(_ name: String, in zone: ZoneID, title: String? = nil, body: String? = nil, parent: String? = nil) -> CofferStore.Record {
    var record = CofferStore.Record(type: "Note", name: name, zone: zone, parent: parent)
    record.values["title"] = .string(title ?? name)
    record.encryptedValues["body"] = .string(body ?? "body of \(name)")
    return record
}

/// What an operation did: allowed, or refused with a store error code.
enum ShareOutcome: Equatable, CustomStringConvertible {
    case allowed
    case refused(StoreError.Code)
    case otherError(String)

    var description: String {
        switch self {
        case .allowed: return "allowed"
        case .refused(let code): return "\(code)"
        case .otherError(let text): return "other error: \(text)"
        }
    }
}

/// Runs `body` and reports what happened.
func shareOutcome<T>(_ body: () async throws -> T) async -> ShareOutcome {
    do {
        _ = try await body()
        return .allowed
    } catch let error as StoreError {
        return .refused(error.code)
    } catch {
        return .otherError("\(type(of: error)): \(error)")
    }
}

extension Share {
    /// The participant with this user id.
    func testParticipant(_ userID: String) -> Share.Participant? { participants.first { $0.userID == userID } }
}

/// Thread-safe collector for @Sendable callbacks.
final class ShareProgressLog: @unchecked Sendable {
    private let lock = NSLock()
    private var items = [[Int]]()
    func append(_ done: Int, _ total: Int) { lock.lock(); items.append([done, total]); lock.unlock() }
    var calls: [[Int]] { lock.lock(); defer { lock.unlock() }; return items }
}

/// The body of a fetched note.
func shareBody(_ record: CofferStore.Record) -> String? { record.encryptedValues["body"]?.stringValue }

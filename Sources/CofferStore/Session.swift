import CofferCrypto
import CofferVault
import Foundation
import GRDB
import Synchronization

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
    /// Zone row id → key epoch → zone key.
    let zoneKeys = Mutex<[Int64: [Int64: SymmetricKey]]>([:])
    /// (zone row id, record type) → field → spec. Schema entries never change once written.
    let schemas = Mutex<[SchemaKey: [String: FieldSpec]]>([:])
    /// Zone row id → commit seq → verified commit.
    let commits = Mutex<[Int64: [Int64: VerifiedCommit]]>([:])
    /// Zone row id → membership seq → verified entry.
    let memberships = Mutex<[Int64: [Int64: MembershipEntry]]>([:])
    /// Signatures of shares this session has verified.
    let verifiedShares = Mutex<Set<[UInt8]>>([])
    /// User id → signing key, checked against the id.
    let signingKeys = Mutex<[String: Ed25519.PublicKey]>([:])
    /// Zone row id → the context of a row by its commit, type, epoch and whether it has sealed
    /// values (see ``Session/context(_:zone:row:)``), kept between reads. Each is made from the
    /// caches above, so a zone's are dropped whenever its schema or key caches change
    /// (``forgetRowContexts(zoneRowID:)``). One made while another thread changes them may be
    /// kept with the older schema: schemas only grow, so its rows then decode as `.staleSchema`,
    /// which reads the schema afresh and drops the kept contexts: slower once, never wrong.
    let rowContexts = Mutex<[Int64: [RowContextKey: RowContext]]>([:])
    /// Sets of decode workers between reads (see ``DecodeWorker``).
    let decodeWorkers = Mutex<[[DecodeWorker]]>([])

    init(store: Store, vault: Vault) {
        self.store = store
        self.vault = vault
    }

    /// The acting user's id.
    public var userID: String { vault.identity.userID }

    /// The zones this user owns.
    public var privateDatabase: RecordDatabase { RecordDatabase(session: self, scope: .private) }

    /// The zones others shared with this user and that they accepted.
    public var sharedDatabase: RecordDatabase { RecordDatabase(session: self, scope: .shared) }
}

extension Store {
    /// A session acting as the vault's user. Registers the user's own contact card in the
    /// store, so that others can find them, when the store does not hold their identity yet (a
    /// session of a known user only reads, and does not wait for another process's write).
    public func session(vault: Vault) throws -> Session {
        if (try? contact(matching: vault.identity.userID))?.identity != vault.identity {
            try addContact(ContactCard(vault: vault))
        }
        return Session(store: self, vault: vault)
    }
}

/// What a row's context depends on: its commit, epoch, type and whether it has sealed values.
struct RowContextKey: Hashable {
    let seq: Int64
    let epoch: Int64
    let sealed: Bool
    let type: String

    init(_ row: StoredRow) {
        seq = row.seq
        epoch = row.epoch
        sealed = row.hasSealed
        type = row.type
    }
}

struct SchemaKey: Hashable {
    let zoneRowID: Int64
    let recordType: String
}

/// A field's fixed type and whether it is encrypted.
struct FieldSpec: Hashable, Sendable {
    let type: FieldType
    let encrypted: Bool
}

/// What a session knows about a zone row while it works on it.
struct ZoneRow: Sendable {
    let rowID: Int64
    let uid: [UInt8]
    let id: ZoneID
    let currentEpoch: Int64
    let sequence: Int64
    let membershipSeq: Int64
    let created: Date
}

extension ZoneRow {
    /// The zone's row, read through SQLite's C API (every record operation starts here).
    static func fetch(_ db: GRDB.Database, _ zoneID: ZoneID) throws -> ZoneRow {
        let statement = try RawStatement(db.cachedStatement(
            sql: "SELECT id, uid, current_epoch, sequence, membership_seq, created_at FROM zone WHERE owner_id = ? AND name = ?"))
        defer { statement.reset() }
        statement.bind(1, zoneID.ownerID)
        statement.bind(2, zoneID.name)
        guard try statement.step() else {
            throw StoreError(.zoneNotFound, "no zone '\(zoneID.name)'" + " owned by \(zoneID.ownerID)")
        }
        return ZoneRow(rowID: statement.int64(0), uid: Array(statement.bytes(1)), id: zoneID, currentEpoch: statement.int64(2),
                       sequence: statement.int64(3), membershipSeq: statement.int64(4),
                       created: Date(timeIntervalSince1970: statement.double(5)))
    }

    init(row: Row) throws {
        let uid: Data = row["uid"]
        rowID = row["id"]
        self.uid = Array(uid)
        id = ZoneID(name: row["name"], ownerID: row["owner_id"])
        currentEpoch = row["current_epoch"]
        sequence = row["sequence"]
        membershipSeq = row["membership_seq"]
        created = Date(timeIntervalSince1970: row["created_at"])
    }
}

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

    /// Opens the vault and the store. Each command states whether it may `createStore`: only one
    /// that can succeed on a new store (`zone create`, and `contact add` through
    /// ``GlobalOptions/openStore(create:)``). Every other command needs what only a store that
    /// exists holds (a zone, a share), so it fails with 66 instead of leaving an empty store.
    init(_ global: GlobalOptions, createStore: Bool) async throws {
        // A mistyped --store fails at once, before any passphrase prompt.
        try global.checkPostgresStore()
        if !createStore { try global.requireStore() }
        // The vault before the store: a wrong passphrase leaves no new store behind.
        let vault = try global.openVault()
        store = try await global.openStore(create: createStore) { vault }
        session = try await store.openSession(vault: vault)
        throughServer = try global.serverURL() != nil
        contacts = try global.postgresStore() != nil || global.serverURL() != nil ? Dictionary(try await store.contacts().map { ($0.userID, $0) }) { a, _ in a } : nil
        Self.opened.withLock { $0.append(session) }
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
        guard let at = argument.firstIndex(of: "@") else {
            return ZoneID(name: argument, ownerID: session.userID)
        }
        let name = String(argument[..<at]), owner = String(argument[argument.index(after: at)...])
        guard !name.isEmpty, !owner.isEmpty else { throw CLIError(ExitStatus.dataError, "'\(argument)' is not ZONE or ZONE@OWNER") }
        let ownerID = try await contact(matching: owner).userID
        return ZoneID(name: name, ownerID: ownerID)
    }

    /// The contact `who` names: a user id (any verified card of that id in the store is the
    /// user's: the id is their key's), or an email or a name, which resolves only to a card this
    /// user pinned in their vault with `contact add` (or to themselves). A store's directory of
    /// cards holds whatever its writers put there, under any name and email, on a server and on a
    /// local store alike.
    func contact(matching who: String) async throws -> Contact {
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

import CofferStore
import CofferVault
import Foundation

/// The acting user's session on the store, and zone arguments resolved against it.
struct SessionContext {
    let session: Session
    let store: Store

    init(_ global: GlobalOptions) throws {
        let vault = try global.openVault()
        store = try global.openStore()
        session = try store.session(vault: vault)
    }

    var db: RecordDatabase { session.privateDatabase }

    /// `NAME` (a zone I own) or `NAME@OWNER`, where OWNER is a user id, email or contact name.
    /// Zone names cannot contain `@`, so the first `@` splits.
    func zone(_ argument: String) throws -> ZoneID {
        guard let at = argument.firstIndex(of: "@") else {
            return ZoneID(name: argument, ownerID: session.userID)
        }
        let name = String(argument[..<at]), owner = String(argument[argument.index(after: at)...])
        guard !name.isEmpty, !owner.isEmpty else { throw CLIError(ExitStatus.dataError, "'\(argument)' is not ZONE or ZONE@OWNER") }
        let ownerID = try store.contact(matching: owner).userID
        return ZoneID(name: name, ownerID: ownerID)
    }

    /// A user's display name for output: the contact's name, or the id itself.
    func displayName(_ userID: String?) -> String {
        guard let userID else { return "-" }
        if userID == session.userID { return "\(session.vault.identity.name) (you)" }
        return (try? store.contact(matching: userID).name) ?? userID
    }
}

// The example program of the Embedding article (Sources/CofferStore/CofferStore.docc/Embedding.md): a service that keeps notes with an encrypted body.
// Tests build and run it, and check that the guide shows exactly this file.
import CofferCrypto
import CofferStore
import CofferVault
import Foundation

@main
struct NotesExample {
    static func main() async throws {
        // A throwaway folder; a real service keeps its vault and store in its data directory.
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("coffer-example-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: folder) }

        // 1. A vault holds the service's identity keys. Create it once; later, open it with the
        //    passphrase or with a key file (Vault.open(at:unlock: .keyFile(at:))).
        let passphrase = SecureBytes(copying: Array("example passphrase, not for production".utf8))
        let vaultURL = folder.appendingPathComponent("service.coffer")
        _ = try Vault.create(at: vaultURL, name: "Notes service", email: "notes@example.com",
                             passphrase: passphrase, kdf: .interactive)
        let vault = try Vault.open(at: vaultURL, passphrase: passphrase)

        // 2. A store is one SQLite file; a session acts as the vault's user.
        let store = try Store(path: folder.appendingPathComponent("notes.sqlite").path)
        let session = try store.session(vault: vault)
        let db = session.privateDatabase

        // 3. A zone has its own key; records in it get plain and encrypted fields.
        let zone = try await db.createZone(named: "Notes")
        var note = Record(type: "Note", name: "groceries", zone: zone)
        note.values["title"] = "Shopping"            // plain: queryable
        note.values["priority"] = 2
        note.encryptedValues["body"] = "eggs, milk"   // sealed under the zone key
        note = try await db.save(note)
        print("saved \(note.name) at change tag \(note.changeTag!)")

        // 4. Read it back, decrypted.
        let fetched = try await db.record(named: "groceries", in: zone)
        print("body: \(fetched.encryptedValues["body"]!)")

        // 5. Query plain fields (encrypted ones cannot be queried).
        let result = try await db.query(Query(recordType: "Note", predicates: [.init("priority", .greaterThanOrEqual, 1)]), in: zone)
        print("query found \(result.records.count) note(s)")

        // 6. Conflicts: saving a stale copy fails and carries the stored record.
        var stale = fetched
        var fresh = fetched
        fresh.encryptedValues["body"] = "eggs, milk, bread"
        _ = try await db.save(fresh)
        stale.values["title"] = "Groceries"
        do {
            _ = try await db.save(stale)
        } catch let error as StoreError where error.code == .serverRecordChanged {
            print("conflict: the store has \(error.serverRecord!.encryptedValues["body"]!)")
        }

        // 7. Sharing: another user (here a second vault on the same store) gets the zone key
        //    wrapped to their public key. The owner shares the zone and adds them; they accept
        //    the share's URL and find the zone in their shared database.
        let bobVaultURL = folder.appendingPathComponent("bob.coffer")
        _ = try Vault.create(at: bobVaultURL, name: "Bob", email: "bob@example.com", passphrase: passphrase, kdf: .interactive)
        let bob = try store.session(vault: try Vault.open(at: bobVaultURL, passphrase: passphrase)) // registers Bob's contact card
        _ = try await session.share(zone: zone, title: "Team notes")
        let share = try await session.addParticipant(bob.userID, permission: .readWrite, to: zone)
        let accepted = try await bob.acceptShare(url: share.url)
        var bobsCopy = try await bob.sharedDatabase.record(named: "groceries", in: accepted.zoneID)
        print("bob reads: \(bobsCopy.encryptedValues["body"]!)")
        bobsCopy.encryptedValues["body"] = "eggs, milk, bread, coffee"
        _ = try await bob.sharedDatabase.save(bobsCopy)
        let seen = try await db.record(named: "groceries", in: zone)
        print("the owner sees \(seen.encryptedValues["body"]!), saved by \(seen.modifierID == bob.userID ? "Bob" : "someone else")")
    }
}

// The PostgreSQL example program of the Embedding article (Sources/CofferStore/CofferStore.docc/Embedding.md): the notes service on a PostgreSQL database,
// run as two instances. Tests build and run it, and check that the guide shows exactly this file.
import CofferCrypto
import CofferStore
import CofferVault
import Foundation

@main
struct PostgresNotesExample {
    static func main() async throws {
        // The database, as postgres://USER@HOST[:PORT]/DB or postgres://USER@/DB?host=/socket/dir.
        // A password never goes in the URL: it comes from PGPASSWORD or ~/.pgpass.
        guard CommandLine.arguments.count == 2 else {
            print("usage: coffer-example-postgres postgres://USER@HOST/DB")
            exit(64)
        }
        let url = try PostgresURL(CommandLine.arguments[1])

        // The service's vault, as in the SQLite example (a throwaway one here).
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("coffer-example-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: folder) }
        let passphrase = SecureBytes(copying: Array("example passphrase, not for production".utf8))
        let vaultURL = folder.appendingPathComponent("service.coffer")
        _ = try Vault.create(at: vaultURL, name: "Notes service", passphrase: passphrase, kdf: .interactive)
        let vault = try Vault.open(at: vaultURL, passphrase: passphrase)

        // 1. The store is the database: Coffer sets up its tables on first use. Sessions open
        //    with `openSession`, which suspends while the database answers.
        let store = try await Store(postgres: url, password: PostgresPassword.lookup(for: url))
        let db = try await store.openSession(vault: vault).privateDatabase
        let zone = try await db.createZone(named: "Notes")
        var note = Record(type: "Note", name: "groceries", zone: zone)
        note.values["title"] = "Shopping"
        note.encryptedValues["body"] = "eggs, milk"
        note = try await db.save(note)
        print("saved \(note.name) at change tag \(note.changeTag!)")

        // 2. A second instance of the service: another Store on the same database, here in the
        //    same process. It reads and verifies everything itself, and saves on top.
        let other = try await Store(postgres: url, password: PostgresPassword.lookup(for: url))
        let otherDB = try await other.openSession(vault: vault).privateDatabase
        var copy = try await otherDB.record(named: "groceries", in: zone)
        print("the other instance reads: \(copy.encryptedValues["body"]!)")
        copy.encryptedValues["body"] = "eggs, milk, bread"
        _ = try await otherDB.save(copy)

        // 3. The first instance's copy is now stale: saving it is a conflict, not a lost write.
        note.values["title"] = "Groceries"
        do {
            _ = try await db.save(note)
        } catch let error as StoreError where error.code == .serverRecordChanged {
            print("conflict: the store has \(error.serverRecord!.encryptedValues["body"]!)")
        }
        await other.close()
        await store.close()
    }
}

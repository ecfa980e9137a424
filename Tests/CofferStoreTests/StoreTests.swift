import CofferCrypto
import CofferTestSupport
import CofferVault
import CofferStoreTestSupport
import Foundation
import GRDB
import Synchronization
import Testing
@testable import CofferStore

@Suite("Store: open, migrations, contacts")
struct StoreTests {
    // MARK: - Open

    @Test("a new store file is created with mode 0600, and so are its -wal and -shm")
    func newFileIsPrivate() async throws {
        try await withTemporaryFolder { folder async throws in
            let path = storePath(in: folder)
            #expect(!FileManager.default.fileExists(atPath: path))
            let store = try Store(path: path)
            let vault = try makeVault(in: folder)
            let session = try store.session(vault: vault)
            try await session.privateDatabase.createZone(named: "Notes")
            for file in [path, path + "-wal", path + "-shm"] {
                let attributes = try FileManager.default.attributesOfItem(atPath: file)
                let mode = (attributes[.posixPermissions] as? NSNumber)?.intValue
                #expect(mode == 0o600, "\(file) has mode \(String(mode ?? -1, radix: 8))")
            }
            #expect(store.url.path == path)
        }
    }

    @Test("opening a store as a known user and reading need no write lock: they go on while another process writes")
    func openWhileAnotherWrites() async throws {
        try await withStore { f async throws in
            let zone = try await f.db.createZone(named: "Z")
            _ = try await f.db.save(makeRecord("Note", "r", in: zone, plain: ["n": 1]))
            // Another connection holds the write lock (as a writer in the middle of a batch).
            let writer = try DatabaseQueue(path: f.path)
            let holding = DispatchSemaphore(value: 0), release = DispatchSemaphore(value: 0)
            Thread.detachNewThread {
                try? writer.write { db in
                    try db.execute(sql: "UPDATE zone SET sequence = sequence WHERE id = (SELECT min(id) FROM zone)")
                    holding.signal()
                    release.wait()
                }
            }
            holding.wait()
            let started = Date()
            let store = try Store(path: f.path)
            let session = try store.session(vault: f.vault)
            #expect(try await session.privateDatabase.record(named: "r", in: zone).values["n"] == 1)
            #expect(Date().timeIntervalSince(started) < 5, "the open waited for the write lock")
            // A write waits for the lock, then says the store stayed busy.
            await expectStoreError(.busy) { try await session.privateDatabase.save(makeRecord("Note", "w", in: zone)) }
            release.signal()
        }
    }

    @Test("processes opening a new store at once all succeed and agree on one store id")
    func concurrentFirstOpen() async throws {
        // Rounds of 8 threads opening one new path: each round is a fresh store, so the race of
        // creating the file, migrating it and making its id is run 25 times.
        try await withTemporaryFolder { folder async throws in
            for round in 0..<25 {
                let path = folder.appendingPathComponent("new-\(round).sqlite").path
                let results = Mutex<[String]>([])
                DispatchQueue.concurrentPerform(iterations: 8) { _ in
                    let outcome: String
                    do {
                        let store = try Store(path: path)
                        // What this open sees once every open is done must be the id it got.
                        outcome = Hex.encode(store.storeID)
                    } catch {
                        outcome = "\(error)"
                    }
                    results.withLock { $0.append(outcome) }
                }
                let ids = results.withLock { $0 }
                #expect(ids.count == 8 && Set(ids).count == 1 && ids[0].count == 32, "round \(round): \(ids)")
                // And the file holds that id: no open replaced the file another had written.
                let reopened = try Store(path: path)
                #expect(Hex.encode(reopened.storeID) == ids[0], "round \(round)")
            }
        }
    }

    @Test("connections run in WAL mode with foreign keys and secure_delete on")
    func pragmas() async throws {
        try await withStore { f async throws in
            for (label, pragmas) in [
                ("writer", try await f.store.dbPool.write { db in try Self.pragmas(db) }),
                ("reader", try await f.store.dbPool.read { db in try Self.pragmas(db) }),
            ] {
                #expect(pragmas.journal == "wal", "\(label)")
                #expect(pragmas.foreignKeys == 1, "\(label)")
                #expect(pragmas.secureDelete == 1, "\(label)")
            }
        }
    }

    static func pragmas(_ db: Database) throws -> (journal: String?, foreignKeys: Int?, secureDelete: Int?) {
        (try String.fetchOne(db, sql: "PRAGMA journal_mode"),
         try Int.fetchOne(db, sql: "PRAGMA foreign_keys"),
         try Int.fetchOne(db, sql: "PRAGMA secure_delete"))
    }

    @Test("a foreign key violation is refused by the database")
    func foreignKeysEnforced() async throws {
        try await withStore { f async throws in
            await #expect(throws: DatabaseError.self) {
                try await f.store.dbPool.write { db in
                    try db.execute(sql: "INSERT INTO zone_key (zone_id, epoch, member_id, wrapped_key) VALUES (9999, 1, 'x', x'00')")
                }
            }
        }
    }

    @Test("the named migrations are applied in order, and the schema has its tables")
    func migrations() async throws {
        try await withStore { f async throws in
            let (applied, tables) = try await f.store.dbPool.read { db in
                (try String.fetchAll(db, sql: "SELECT identifier FROM grdb_migrations ORDER BY rowid"),
                 try String.fetchAll(db, sql: "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%' ORDER BY name"))
            }
            // Issue 3's migrations come first, in order; later issues append theirs.
            #expect(Array(applied.prefix(2)) == ["v1-store-and-contacts", "v2-zones-and-records"])
            #expect(applied == Store.migrator.migrations)
            #expect(Set(["contact", "field_schema", "grdb_migrations", "record", "store_meta", "zone", "zone_key"]).isSubset(of: Set(tables)))
            #expect(try await f.store.dbPool.read { db in try Store.migrator.hasCompletedMigrations(db) })
        }
    }

    @Test("reopening keeps the store id and the data; two stores have different ids")
    func reopen() async throws {
        try await withTemporaryFolder { folder async throws in
            let path = storePath(in: folder)
            let vault = try makeVault(in: folder)
            var firstID: [UInt8] = []
            do {
                let store = try Store(path: path)
                firstID = store.storeID
                let alice = try store.session(vault: vault)
                let zone = try await alice.privateDatabase.createZone(named: "Notes")
                _ = try await alice.privateDatabase.save(makeRecord("Note", "n1", in: zone, plain: ["title": "kept"], encrypted: ["body": "sealed"]))
            }
            #expect(firstID.count == 16)
            let again = try Store(path: path)
            #expect(again.storeID == firstID)
            let alice = try again.session(vault: vault)
            let record = try await alice.privateDatabase.record(named: "n1", in: alice.privateDatabase.zoneID(named: "Notes"))
            #expect(record.values["title"] == "kept")
            #expect(record.encryptedValues["body"] == "sealed")
            let applied = try await again.dbPool.read { db in try String.fetchAll(db, sql: "SELECT identifier FROM grdb_migrations") }
            #expect(applied == Store.migrator.migrations)

            let other = try Store(path: folder.appendingPathComponent("other.sqlite").path)
            #expect(other.storeID.count == 16)
            #expect(other.storeID != firstID)
        }
    }

    @Test("a store in a missing folder is .unknownItem")
    func missingFolder() async throws {
        try await withTemporaryFolder { folder async throws in
            let path = folder.appendingPathComponent("nope/store.sqlite").path
            await expectStoreError(.unknownItem) { try Store(path: path) }
            #expect(!FileManager.default.fileExists(atPath: path))
        }
    }

    @Test("a file that is not a database is refused as a damaged store (.integrityFailure, with none of its bytes), not a crash, and is left as it was")
    func notADatabase() async throws {
        try await withTemporaryFolder { folder async throws in
            let path = storePath(in: folder)
            let garbage = Data((0..<8192).map { _ in UInt8.random(in: 0...255) })
            try garbage.write(to: URL(fileURLWithPath: path))
            let error = await expectStoreError(.integrityFailure) { try Store(path: path) }
            #expect(error?.message == "the store file at \(path) is damaged; restore it from a backup (coffer restore)")
            #expect(try Data(contentsOf: URL(fileURLWithPath: path)) == garbage)
        }
    }

    @Test("a SQLite database that is not a Coffer store is refused")
    func foreignDatabase() async throws {
        try await withTemporaryFolder { folder async throws in
            let path = storePath(in: folder)
            do {
                let queue = try DatabaseQueue(path: path)
                try await queue.write { db in
                    try db.execute(sql: "CREATE TABLE zone (something TEXT)")
                }
                try queue.close()
            }
            await expectStoreError(.internalError) { try Store(path: path) }
        }
    }

    /// Someone who can write the file can rewrite its schema: drop a `NOT NULL` so rows hold
    /// values no code expects, drop a unique index, or add a trigger that edits what a writer
    /// wrote after it was signed. Opening refuses each.
    @Test("a store whose schema was changed is refused at open", arguments: [
        "DROP INDEX record_parent",
        "DROP INDEX record_parent; CREATE INDEX record_parent ON record (zone_id, parent)",
        "DROP INDEX zone_log_head",
        "DROP INDEX zone_log_head; CREATE INDEX zone_log_head ON zone_log (zone_id, seq)",
        "CREATE INDEX record_field_0123456789abcdef ON record (zone_id, json_extract(plain, '$.title'), name) WHERE type = 'Note'",
        "CREATE TRIGGER edit AFTER INSERT ON record BEGIN UPDATE record SET values_blob = NULL WHERE rowid = NEW.rowid; END",
        "CREATE VIEW peek AS SELECT * FROM zone",
        "CREATE TABLE extra (x)",
        "NOT NULL",
    ])
    func changedSchema(change: String) async throws {
        try await withTemporaryFolder { folder async throws in
            let path = storePath(in: folder)
            do {
                let session = try Store(path: path).session(vault: try makeVault(in: folder))
                try await session.privateDatabase.createZone(named: "Notes")
            }
            let queue = try DatabaseQueue(path: path)
            try await queue.writeWithoutTransaction { db in
                if change == "NOT NULL" {
                    let sql = try #require(try String.fetchOne(db, sql: "SELECT sql FROM sqlite_schema WHERE name = 'zone'"))
                    #expect(sql.contains("NOT NULL"))
                    try db.execute(sql: "PRAGMA writable_schema = ON")
                    try db.execute(sql: "UPDATE sqlite_schema SET sql = ? WHERE name = 'zone'",
                                   arguments: [sql.replacingOccurrences(of: "NOT NULL", with: "")])
                    try db.execute(sql: "PRAGMA writable_schema = OFF")
                } else {
                    try db.execute(sql: change)
                }
            }
            try queue.close()
            let error = await expectStoreError(.integrityFailure) { try Store(path: path) }
            #expect(error?.message.contains("the store was changed") == true, "\(error?.message ?? "")")
        }
    }

    // MARK: - Contacts

    @Test("a session registers its user's contact card", arguments: TestBackend.all)
    func sessionRegistersCard(_ backend: TestBackend) async throws {
        try await withStore(backend) { f async throws in
            let contact = try await f.store.contact(matching: f.alice.userID)
            #expect(contact.userID == f.vault.identity.userID)
            #expect(contact.name == "Alice")
            #expect(contact.email == "alice@example.com")
            #expect(contact.fingerprint == f.vault.identity.fingerprint)
            #expect(contact.identity == f.vault.identity)
            #expect(try await f.store.contacts().map(\.userID) == [f.alice.userID])
        }
    }

    @Test("add, the same card again, a newer card, an older card: through the async calls and the blocking ones of the same names",
          arguments: [true, false])
    func addUpdateUnchanged(_ suspending: Bool) async throws {
        try await withTemporaryFolder { folder async throws in
            let store = try Store(path: storePath(in: folder))
            let bob = try makeVault(in: folder, file: "bob.coffer", name: "Bob Builder", email: "bob@example.com")
            let t0 = Date(timeIntervalSince1970: 1_700_000_000)
            let card = ContactCard(vault: bob, created: t0)
            // In a synchronous closure, the blocking overloads are the ones chosen.
            func add(_ card: ContactCard) async throws -> Store.ContactAddResult {
                suspending ? try await store.addContact(card) : try blocking { try store.addContact(card) }
            }
            func cardCreated() async throws -> String {
                suspending ? try await store.contact(matching: bob.identity.userID).cardCreated
                    : try blocking { try store.contact(matching: bob.identity.userID).cardCreated }
            }
            #expect(try await add(card) == .added)
            #expect(try await cardCreated() == "2023-11-14T22:13:20Z")
            #expect(try await add(card) == .unchanged)
            // A card that went through its JSON form is the same card.
            #expect(try await add(ContactCard.verify(card.jsonData())) == .unchanged)

            let newer = ContactCard(vault: bob, created: t0.addingTimeInterval(3600))
            #expect(try await add(newer) == .updated)
            #expect(try await cardCreated() == "2023-11-14T23:13:20Z")
            let storedCard = try await store.dbPool.read { db in
                try Data.fetchOne(db, sql: "SELECT card FROM contact WHERE user_id = ?", arguments: [bob.identity.userID])
            }
            #expect(storedCard == newer.jsonData())

            let older = ContactCard(vault: bob, created: t0.addingTimeInterval(-3600))
            #expect(try await add(older) == .unchanged)
            #expect(try await cardCreated() == "2023-11-14T23:13:20Z")
            #expect(try await (suspending ? store.contacts() : blocking { try store.contacts() }).count == 1)
        }
    }

    @Test("lookup by user id (any case), by email (any case), by name (any case)")
    func lookups() async throws {
        try await withTemporaryFolder { folder async throws in
            let store = try Store(path: storePath(in: folder))
            let alice = try makeVault(in: folder, file: "a.coffer", name: "Alice Liddell", email: "alice@example.com")
            let bob = try makeVault(in: folder, file: "b.coffer", name: "Bob Builder", email: "Bob@Example.com")
            let carol = try makeVault(in: folder, file: "c.coffer", name: "Carol", email: nil)
            for vault in [alice, bob, carol] { #expect(try await store.addContact(ContactCard(vault: vault)) == .added) }

            #expect(try await store.contact(matching: bob.identity.userID).userID == bob.identity.userID)
            #expect(try await store.contact(matching: bob.identity.userID.uppercased()).userID == bob.identity.userID)
            #expect(try await store.contact(matching: "bob@example.com").userID == bob.identity.userID)
            #expect(try await store.contact(matching: "BOB@EXAMPLE.COM").userID == bob.identity.userID)
            #expect(try await store.contact(matching: "alice liddell").userID == alice.identity.userID)
            #expect(try await store.contact(matching: "CAROL").userID == carol.identity.userID)
            #expect(try await store.contact(matching: "Carol").email == nil)
            await expectStoreError(.unknownItem) { try store.contact(matching: "dave@example.com") }
            await expectStoreError(.unknownItem) { try store.contact(matching: "Alice") }
            await expectStoreError(.unknownItem) { try store.contact(matching: "") }
            #expect(try await store.contacts().map(\.name) == ["Alice Liddell", "Bob Builder", "Carol"])
        }
    }

    @Test("a name or an email that matches several contacts is .invalidArguments; their user ids still work")
    func ambiguity() async throws {
        try await withTemporaryFolder { folder async throws in
            let store = try Store(path: storePath(in: folder))
            let sam1 = try makeVault(in: folder, file: "s1.coffer", name: "Sam", email: "sam@one.example")
            let sam2 = try makeVault(in: folder, file: "s2.coffer", name: "sam", email: "sam@two.example")
            let shared1 = try makeVault(in: folder, file: "x1.coffer", name: "Xavier", email: "team@example.com")
            let shared2 = try makeVault(in: folder, file: "x2.coffer", name: "Yolanda", email: "TEAM@example.com")
            for vault in [sam1, sam2, shared1, shared2] { try await store.addContact(ContactCard(vault: vault)) }

            let byName = await expectStoreError(.invalidArguments) { try store.contact(matching: "Sam") }
            #expect(byName?.message.contains("2 contacts") == true)
            await expectStoreError(.invalidArguments) { try store.contact(matching: "team@example.com") }
            #expect(try await store.contact(matching: sam1.identity.userID).email == "sam@one.example")
            #expect(try await store.contact(matching: sam2.identity.userID).email == "sam@two.example")
            #expect(try await store.contact(matching: "sam@two.example").userID == sam2.identity.userID)
            #expect(try await store.contact(matching: "xavier").userID == shared1.identity.userID)
        }
    }

    @Test("a stored contact is what its signed card says: edited columns are ignored, a card that does not verify or is another user's is .integrityFailure")
    func tamperedContact() async throws {
        try await withTemporaryFolder { folder async throws in
            let store = try Store(path: storePath(in: folder))
            let alice = try makeVault(in: folder, file: "a.coffer", name: "Alice Liddell", email: "alice@example.com")
            let bob = try makeVault(in: folder, file: "b.coffer", name: "Bob Builder", email: "bob@example.com")
            try await store.addContact(ContactCard(vault: alice))
            try await store.addContact(ContactCard(vault: bob))
            try await store.dbPool.write { db in
                try db.execute(sql: "UPDATE contact SET signing_key = ?, box_key = ?, name = 'Mallory' WHERE user_id = ?",
                               arguments: [Data(bob.identity.signingKey.rawRepresentation), Data(bob.identity.boxKey.rawRepresentation),
                                           alice.identity.userID])
            }
            #expect(try await store.contact(matching: alice.identity.userID).identity == alice.identity)
            await expectStoreError(.unknownItem, "the name column is not the card's") { try store.contact(matching: "Mallory") }
            // Bob's card in Alice's row: another user's card.
            try await store.dbPool.write { db in
                try db.execute(sql: "UPDATE contact SET card = ? WHERE user_id = ?", arguments: [ContactCard(vault: bob).jsonData(), alice.identity.userID])
            }
            let fresh = try Store(path: storePath(in: folder))
            await expectStoreError(.integrityFailure) { try fresh.verifiedContact(userID: alice.identity.userID) }
            #expect(try await fresh.contacts().map(\.userID) == [bob.identity.userID])
            #expect(try await fresh.contact(matching: "bob@example.com").userID == bob.identity.userID)
        }
    }

    @Test("two users' sessions on one store act as themselves", arguments: TestBackend.all)
    func twoSessions(_ backend: TestBackend) async throws {
        try await withStore(backend) { f async throws in
            let bob = try await f.user("Bob Builder", "bob@example.com")
            #expect(bob.userID != f.alice.userID)
            #expect(bob.store === f.store || backend.isServer, "in process, both act on the one store object")
            #expect(try await f.store.contacts().map(\.name) == ["Alice", "Bob Builder"])
            let aliceZone = try await f.db.createZone(named: "Notes")
            let bobZone = try await bob.privateDatabase.createZone(named: "Notes")
            #expect(aliceZone.ownerID == f.alice.userID)
            #expect(bobZone.ownerID == bob.userID)
            #expect(aliceZone != bobZone)
            #expect(f.db.scope == .private)
        }
    }
}

/// Runs `body` as written: in it, a call with a blocking and an async overload of the same name
/// takes the blocking one.
func blocking<T>(_ body: () throws -> T) rethrows -> T { try body() }

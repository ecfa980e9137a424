import Foundation
import Testing

/// A store path that does not exist (a mistyped `--store`): only commands that can succeed on a
/// new store create one; every other command fails with 66 naming the path and leaves no file.
@Suite("a missing store")
struct MissingStoreCommandTests {
    let sandbox: Sandbox
    let vault: String
    /// In a folder that exists, so that only the file is missing.
    let missing: String

    init() throws {
        sandbox = try Sandbox()
        vault = try sandbox.initVault("a.coffer")
        missing = sandbox.path("typo.sqlite")
    }

    /// Commands that need a store that exists: reads, and writes into a zone or share it would hold.
    static let needExistingStore: [[String]] = [
        ["zone", "list"], ["zone", "delete", "Notes"], ["zone", "rekey", "Notes"],
        ["record", "get", "Notes", "n1"], ["record", "query", "Notes", "--type", "Note"], ["record", "export", "Notes"],
        ["record", "put", "Notes", "n1", "--type", "Note", "--set", "title=x"], ["record", "delete", "Notes", "n1"],
        ["record", "import", "Notes", "IMPORT"],
        ["share", "create", "Notes"], ["share", "add", "Notes", "--participant", "bob@example.com", "--permission", "read-only"],
        ["share", "permission", "Notes", "--participant", "bob@example.com", "--permission", "read-only"],
        ["share", "public", "Notes", "none"], ["share", "remove", "Notes", "--participant", "bob@example.com"],
        ["share", "show", "Notes"], ["share", "url", "Notes"], ["share", "list"],
        ["share", "accept", "coffer://share/v1/00112233445566778899aabbccddeeff/00112233445566778899aabbccddeeff#AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA"],
        ["share", "leave", "Notes@bob@example.com"], ["share", "stop", "Notes"],
        ["changes", "Notes"], ["changes", "--database", "private"], ["audit"], ["contact", "list"],
    ]

    /// `args` with IMPORT replaced by an import file that exists.
    func arguments(_ args: [String]) throws -> [String] {
        let importFile = try sandbox.write("import.jsonl", "{\"name\": \"n1\", \"type\": \"Note\", \"values\": {}, \"encryptedValues\": {}}\n")
        return args.map { $0 == "IMPORT" ? importFile : $0 }
    }

    func expectNoStoreFiles(_ path: String, sourceLocation: SourceLocation = #_sourceLocation) {
        for file in [path, path + "-wal", path + "-shm"] {
            #expect(!sandbox.exists(file), "\(file) was created", sourceLocation: sourceLocation)
        }
    }

    @Test("a command that needs a store fails with 66 naming the path, and creates no file", arguments: needExistingStore)
    func refused(_ command: [String]) throws {
        let args = try arguments(command) + ["--vault", vault]
        for json in [false, true] {
            let r = try sandbox.coffer(args + ["--store", missing] + (json ? ["--json"] : []), env: withPassphrase)
            expectError(r, 66, mentioning: "no store at \(missing);")
            #expect(r.err.contains("--store or COFFER_STORE") && r.err.contains("coffer zone create"), "\(r)")
            expectNoStoreFiles(missing)
        }
        // The same path from COFFER_STORE.
        let r = try sandbox.coffer(args, env: withPassphrase.merging(["COFFER_STORE": missing]) { $1 })
        expectError(r, 66, mentioning: "no store at \(missing);")
        expectNoStoreFiles(missing)
    }

    @Test("a missing store is reported before any passphrase is asked for (66, not 64)")
    func beforePassphrase() throws {
        let r = try sandbox.coffer(["record", "get", "Notes", "n1", "--vault", vault, "--store", missing])
        expectError(r, 66, mentioning: "no store at \(missing);")
        expectNoStoreFiles(missing)
    }

    @Test("the default store: a read fails with 66 naming it and creates neither it nor its folder")
    func defaultStore() throws {
        let folder = sandbox.dataHome.appendingPathComponent("coffer").path
        let expected = folder + "/store.sqlite"
        let r = try sandbox.coffer(["zone", "list", "--vault", vault], env: withPassphrase)
        expectError(r, 66, mentioning: "no store at \(expected);")
        #expect(!sandbox.exists(folder), "the default folder was created by a read")
    }

    @Test("an empty file is no store: a read fails with 66 and leaves it empty")
    func emptyFile() throws {
        let empty = try sandbox.write("empty.sqlite", Data())
        let r = try sandbox.coffer(["zone", "list", "--vault", vault, "--store", empty], env: withPassphrase)
        expectError(r, 66, mentioning: "no store at \(empty) (the file is empty);")
        #expect(try sandbox.read(empty).isEmpty)
        #expect(!sandbox.exists(empty + "-wal"))
    }

    @Test("zone create and contact add create a missing store; a wrong passphrase creates none")
    func creators() throws {
        let wrong = try sandbox.coffer(["zone", "create", "Notes", "--vault", vault, "--store", missing],
                                       env: ["COFFER_PASSPHRASE": CofferProcess.wrongPassphrase])
        expectError(wrong, 77)
        expectNoStoreFiles(missing)

        expectSuccess(try sandbox.coffer(["zone", "create", "Notes", "--vault", vault, "--store", missing], env: withPassphrase))
        #expect(sandbox.exists(missing))
        let list = try sandbox.coffer(["zone", "list", "--vault", vault, "--store", missing], env: withPassphrase)
        expectSuccess(list)
        #expect(list.out.contains("Notes"), "\(list)")

        let card = sandbox.path("card.json")
        expectSuccess(try sandbox.coffer(["vault", "export-contact", "--output", card, "--vault", vault], env: withPassphrase))
        let other = sandbox.path("contacts.sqlite")
        expectSuccess(try sandbox.coffer(["contact", "add", card, "--store", other]))
        #expect(sandbox.exists(other))
    }

    @Test("vault commands never open the store")
    func vaultCommands() throws {
        let nowhere = sandbox.path("no-such-folder/store.sqlite")
        for args in [["vault", "show"], ["vault", "item", "list"], ["vault", "export-contact"]] {
            let r = try sandbox.coffer(args + ["--vault", vault, "--store", nowhere], env: withPassphrase)
            expectSuccess(r)
        }
        #expect(!sandbox.exists(sandbox.path("no-such-folder")))
        #expect(!sandbox.exists(sandbox.dataHome.appendingPathComponent("coffer").path))
    }
}

/// `--store postgres://…` and `COFFER_STORE=postgres://…`: a password in the URL is refused as a
/// usage error without being echoed, before any passphrase is read; a server that cannot be
/// reached is 69; on a real server (`COFFER_TEST_POSTGRES`, which `make test` starts), zones and
/// records work as on a file, and what needs SQLite says so.
@Suite("a PostgreSQL store URL")
struct PostgresStoreURLCommandTests {
    @Test("a password in the URL is refused (64), naming where passwords come from, never echoing it",
          arguments: [["zone", "list"], ["zone", "create", "Notes"], ["record", "get", "Notes", "n1"]])
    func passwordRefused(_ command: [String]) throws {
        let sandbox = try Sandbox()
        let vault = try sandbox.initVault("a.coffer")
        let url = "postgres://alice:Hunter2Secret@db.example.com/coffer"
        for r in [try sandbox.coffer(command + ["--vault", vault, "--store", url]),
                  try sandbox.coffer(command + ["--vault", vault], env: ["COFFER_STORE": url])] {
            expectError(r, 64, mentioning: "PGPASSWORD")
            #expect(!r.err.contains("Hunter2Secret") && !r.out.contains("Hunter2Secret"), "\(r)")
        }
        let bad = try sandbox.coffer(["zone", "list", "--vault", vault, "--store", "postgres://alice@db.example.com/coffer?sslmode=require"])
        expectError(bad, 64, mentioning: "--store")
    }

    @Test("a server that cannot be reached is 69, not a hang")
    func unreachable() throws {
        let sandbox = try Sandbox()
        let vault = try sandbox.initVault("a.coffer")
        let r = try sandbox.coffer(["zone", "list", "--vault", vault, "--store", "postgres://alice@/coffer?host=\(sandbox.path("no-server"))"],
                                   env: withPassphrase)
        expectError(r, 69, mentioning: "cannot be reached")
        // Commands that need no store are not stopped by a COFFER_STORE they do not use.
        let show = try sandbox.coffer(["vault", "show", "--vault", vault], env: withPassphrase.merging(["COFFER_STORE": "postgres://alice@/coffer?host=/nowhere"]) { $1 })
        #expect(show.status == 0, "\(show)")
    }

    static let server = ProcessInfo.processInfo.environment["COFFER_TEST_POSTGRES"]

    @Test("zones, records, queries, contacts, sharing and audit on PostgreSQL, as on a file; a plaintext scan needs files (64)",
          .enabled(if: server != "skip", "COFFER_TEST_POSTGRES=skip: the PostgreSQL tests are left out"))
    func onPostgres() throws {
        let url = try #require(Self.server.flatMap { $0.isEmpty ? nil : $0 }, "COFFER_TEST_POSTGRES is not set: run the tests with `make test`")
        let sandbox = try Sandbox()
        let vault = try sandbox.initVault("a.coffer")
        let env = withPassphrase.merging(["COFFER_STORE": url]) { $1 }
        expectSuccess(try sandbox.coffer(["zone", "create", "Notes", "--vault", vault], env: env))
        expectSuccess(try sandbox.coffer(["record", "put", "Notes", "n1", "--type", "Note", "--set", "title=Shopping",
                                          "--secret", "body=eggs, milk", "--vault", vault], env: env))
        let get = try sandbox.coffer(["record", "get", "Notes", "n1", "--json", "--vault", vault], env: env)
        expectSuccess(get)
        #expect(get.out.contains("eggs, milk") && get.out.contains("Shopping"), "\(get)")
        let list = try sandbox.coffer(["zone", "list", "--vault", vault], env: env)
        expectSuccess(list)
        #expect(list.out.contains("Notes"), "\(list)")
        // A query, with --json: the same output as on a file.
        expectSuccess(try sandbox.coffer(["record", "put", "Notes", "n2", "--type", "Note", "--set", "title=Books",
                                          "--vault", vault], env: env))
        let query = try sandbox.coffer(["record", "query", "Notes", "--type", "Note", "--where", "title^=Sh", "--json",
                                        "--vault", vault], env: env)
        expectSuccess(query)
        #expect(query.out.contains("n1") && !query.out.contains("n2") && query.out.contains("eggs, milk"), "\(query)")
        // Export, then import into a new zone: the same records.
        let export = try sandbox.coffer(["record", "export", "Notes", "--vault", vault], env: env)
        expectSuccess(export)
        let file = try sandbox.write("notes.jsonl", export.stdout)
        expectSuccess(try sandbox.coffer(["zone", "create", "Copy", "--vault", vault], env: env))
        expectSuccess(try sandbox.coffer(["record", "import", "Copy", file, "--vault", vault], env: env))
        let copied = try sandbox.coffer(["record", "get", "Copy", "n1", "--json", "--vault", vault], env: env)
        expectSuccess(copied)
        #expect(copied.out.contains("eggs, milk"), "\(copied)")
        // Contacts: another user's card, added and listed.
        let bob = try sandbox.initVault("b.coffer", name: "Bob", email: "bob@example.com")
        let card = sandbox.path("bob.json")
        expectSuccess(try sandbox.coffer(["vault", "export-contact", "--output", card, "--vault", bob], env: withPassphrase))
        expectSuccess(try sandbox.coffer(["contact", "add", card, "--vault", vault], env: env))
        let contacts = try sandbox.coffer(["contact", "list"], env: env)
        expectSuccess(contacts)
        #expect(contacts.out.contains("bob@example.com"), "\(contacts)")
        // Sharing: Alice invites Bob, Bob accepts and reads with his own vault.
        let share = try sandbox.coffer(["share", "create", "Notes", "--json", "--vault", vault], env: env)
        expectSuccess(share)
        let bobEnv = env.merging(["COFFER_VAULT": bob]) { $1 }
        // Bob adds Alice's card, as Alice added his: names resolve only to cards one added.
        let aliceCard = sandbox.path("alice.json")
        expectSuccess(try sandbox.coffer(["vault", "export-contact", "--output", aliceCard, "--vault", vault], env: withPassphrase))
        expectSuccess(try sandbox.coffer(["contact", "add", aliceCard], env: bobEnv))
        expectSuccess(try sandbox.coffer(["share", "add", "Notes", "--participant", "bob@example.com", "--permission", "read-only",
                                          "--vault", vault], env: env))
        let shown = try sandbox.coffer(["share", "url", "Notes", "--vault", vault], env: env)
        expectSuccess(shown)
        let shareURL = String(shown.out.split(whereSeparator: \.isNewline).first ?? "")
        expectSuccess(try sandbox.coffer(["share", "accept", shareURL], env: bobEnv))
        let read = try sandbox.coffer(["record", "get", "Notes@Alice", "n1"], env: bobEnv)
        expectSuccess(read)
        #expect(read.out.contains("eggs, milk"), "\(read)")
        // Audit verifies everything; scanning for plaintext needs the store's files.
        expectSuccess(try sandbox.coffer(["audit", "--vault", vault], env: env))
        expectError(try sandbox.coffer(["audit", "--plaintext", "eggs", "--vault", vault], env: env), 64, mentioning: "PostgreSQL")
        expectSuccess(try sandbox.coffer(["record", "delete", "Notes", "n1", "--vault", vault], env: env))
        expectError(try sandbox.coffer(["record", "get", "Notes", "n1", "--vault", vault], env: env), 66)
    }
}

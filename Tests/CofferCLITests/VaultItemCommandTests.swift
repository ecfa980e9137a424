import Foundation
import Synchronization
import Testing
#if canImport(Glibc)
import Glibc
#endif

/// `coffer vault item add|get|list|delete`: keychain-like items in the vault.
@Suite("coffer vault item")
struct VaultItemCommandTests {
    let sandbox: Sandbox
    let vault: String
    static let secret = "tok_LIVE-8f3a9c27e1-zircon"

    init() throws {
        sandbox = try Sandbox()
        vault = try sandbox.initVault()
    }

    @discardableResult
    func add(_ service: String, _ account: String, label: String? = nil, secret: Stdin,
             sourceLocation: SourceLocation = #_sourceLocation) throws -> CofferResult {
        var args = ["vault", "item", "add", "--service", service, "--account", account, "--vault", vault]
        if let label { args += ["--label", label] }
        return try sandbox.coffer(args, env: withPassphrase, stdin: secret, sourceLocation: sourceLocation)
    }

    func get(_ service: String, _ account: String, sourceLocation: SourceLocation = #_sourceLocation) throws -> CofferResult {
        try sandbox.coffer(["vault", "item", "get", "--service", service, "--account", account, "--vault", vault],
                           env: withPassphrase, sourceLocation: sourceLocation)
    }

    func listJSON(sourceLocation: SourceLocation = #_sourceLocation) throws -> (CofferResult, [[String: Any]]) {
        let r = try sandbox.coffer(["vault", "item", "list", "--json", "--vault", vault], env: withPassphrase, sourceLocation: sourceLocation)
        expectSuccess(r, sourceLocation: sourceLocation)
        let items = try #require(try jsonObject(r, sourceLocation: sourceLocation)["items"] as? [[String: Any]],
                                 "no 'items' array\n\(r)", sourceLocation: sourceLocation)
        return (r, items)
    }

    @Test("item add reads the secret from stdin; item get prints exactly it, with no newline")
    func addThenGet() throws {
        let added = try add("api.example.com", "alice", label: "Example API", secret: .text(Self.secret))
        expectSuccess(added)
        #expect(!added.out.contains(Self.secret))
        let r = try get("api.example.com", "alice")
        expectSuccess(r)
        #expect(r.stdout == Data(Self.secret.utf8), "\(r)")
    }

    @Test("one trailing newline on stdin is not part of the secret")
    func trailingNewlineDropped() throws {
        expectSuccess(try add("mail", "bob", secret: .text(Self.secret + "\n")))
        let r = try get("mail", "bob")
        expectSuccess(r)
        #expect(r.stdout == Data(Self.secret.utf8), "\(r)")
    }

    @Test("a secret with inner newlines and non-ASCII bytes comes back byte for byte")
    func multiLineSecret() throws {
        let secret = Data("-----BEGIN KEY-----\nline two é ✓\n\tthree\n-----END KEY-----".utf8) + Data([0x00, 0xff, 0x01])
        expectSuccess(try add("ssh", "deploy", secret: .data(secret)))
        let r = try get("ssh", "deploy")
        expectSuccess(r)
        #expect(r.stdout == secret)
    }

    @Test("item list shows service, account, label and dates as text, never the secret")
    func listText() throws {
        expectSuccess(try add("api.example.com", "alice", label: "Example API", secret: .text(Self.secret)))
        let r = try sandbox.coffer(["vault", "item", "list", "--vault", vault], env: withPassphrase)
        expectSuccess(r)
        #expect(!r.out.contains(Self.secret))
        let lines = r.outLines
        try #require(lines.count == 2, "expected a header and one row\n\(r)")
        #expect(cells(lines[0]) == ["SERVICE", "ACCOUNT", "LABEL", "CREATED", "MODIFIED"])
        let row = cells(lines[1])
        try #require(row.count == 5, "\(r)")
        #expect(row[0] == "api.example.com")
        #expect(row[1] == "alice")
        #expect(row[2] == "Example API")
        let iso = ISO8601DateFormatter()
        let created = try #require(iso.date(from: row[3]), "created is not ISO 8601: \(row[3])")
        #expect(iso.date(from: row[4]) != nil, "modified is not ISO 8601: \(row[4])")
        #expect(abs(created.timeIntervalSinceNow) < 300)
    }

    @Test("a service, account or label with a control character is refused (65): it would break item list", arguments: ["a\nb", "a\u{1b}[2Jb", "tab\there"])
    func controlCharacters(_ text: String) throws {
        expectError(try add(text, "alice", secret: .text(Self.secret)), 65)
        expectError(try add("svc", text, secret: .text(Self.secret)), 65)
        expectError(try add("svc", "alice", label: text, secret: .text(Self.secret)), 65)
        #expect(try listJSON().1.isEmpty)
    }

    @Test("item list on an empty vault succeeds and lists nothing")
    func listEmpty() throws {
        let (_, items) = try listJSON()
        #expect(items.isEmpty)
        let text = try sandbox.coffer(["vault", "item", "list", "--vault", vault], env: withPassphrase)
        expectSuccess(text)
        #expect(!text.out.contains("SERVICE"))
    }

    @Test("item list --json: service, account, label, created, modified; never the secret")
    func listJSONShape() throws {
        expectSuccess(try add("api.example.com", "alice", label: "Example API", secret: .text(Self.secret)))
        expectSuccess(try add("db.internal", "root", secret: .text("pg-\(Self.secret)")))
        let (r, items) = try listJSON()
        #expect(!r.out.contains(Self.secret))
        #expect(items.count == 2)
        let api = try #require(items.first { $0["service"] as? String == "api.example.com" }, "\(r)")
        #expect(api["account"] as? String == "alice")
        #expect(api["label"] as? String == "Example API")
        let iso = ISO8601DateFormatter()
        for key in ["created", "modified"] {
            let value = try #require(api[key] as? String, "missing \(key)\n\(r)")
            #expect(iso.date(from: value) != nil, "\(key) is not ISO 8601: \(value)")
        }
        let db = try #require(items.first { $0["service"] as? String == "db.internal" }, "\(r)")
        #expect(db["account"] as? String == "root")
        #expect(db["label"] != nil, "the label key must exist\n\(r)")
        for item in items {
            #expect(!item.keys.contains { $0.lowercased().contains("secret") }, "an item has a secret key: \(item.keys)")
        }
    }

    @Test("neither the secret nor the service name is in the vault file")
    func secretNotInVaultFile() throws {
        expectSuccess(try add("api.example.com", "alice", label: "Example API", secret: .text(Self.secret)))
        let bytes = try sandbox.read(vault)
        #expect(!contains(bytes, Self.secret))
        #expect(!contains(bytes, "api.example.com"))
        #expect(!contains(bytes, "Example API"))
        // And it is really there: a new process reads it back.
        #expect(try get("api.example.com", "alice").stdout == Data(Self.secret.utf8))
    }

    @Test("item delete removes the item; get afterwards fails with 66")
    func deleteThenGet() throws {
        expectSuccess(try add("api.example.com", "alice", secret: .text(Self.secret)))
        expectSuccess(try add("api.example.com", "bob", secret: .text("bobs-secret")))
        let r = try sandbox.coffer(["vault", "item", "delete", "--service", "api.example.com", "--account", "alice", "--vault", vault],
                                   env: withPassphrase)
        expectSuccess(r)
        expectError(try get("api.example.com", "alice"), 66)
        // The other item stays.
        #expect(try get("api.example.com", "bob").stdout == Data("bobs-secret".utf8))
        let (_, items) = try listJSON()
        #expect(items.map { $0["account"] as? String } == ["bob"])
        // Deleting it again: not found.
        let again = try sandbox.coffer(["vault", "item", "delete", "--service", "api.example.com", "--account", "alice", "--vault", vault],
                                       env: withPassphrase)
        expectError(again, 66)
    }

    @Test("item get of an item that never existed fails with 66")
    func getMissing() throws {
        expectError(try get("nothing.example", "nobody"), 66)
    }

    @Test("item add of an existing service and account fails with 73 and keeps the first secret")
    func addDuplicate() throws {
        expectSuccess(try add("api.example.com", "alice", secret: .text(Self.secret)))
        let r = try add("api.example.com", "alice", secret: .text("replacement-secret"))
        expectError(r, 73)
        #expect(try get("api.example.com", "alice").stdout == Data(Self.secret.utf8))
    }

    @Test("item get --json prints the item with its secret, once, on stdout; a missing item is a JSON error on stderr")
    func getJSON() throws {
        expectSuccess(try add("api.example.com", "alice", secret: .text(Self.secret)))
        let r = try sandbox.coffer(["vault", "item", "get", "--service", "api.example.com", "--account", "alice", "--json", "--vault", vault],
                                   env: withPassphrase)
        expectSuccess(r)
        #expect(try jsonObject(r)["secret"] as? String == Self.secret)
        #expect(r.out.components(separatedBy: Self.secret).count == 2 && !r.err.contains(Self.secret))
        let missing = try sandbox.coffer(["vault", "item", "get", "--service", "nope", "--account", "alice", "--json", "--vault", vault],
                                         env: withPassphrase)
        expectError(missing, 66)
    }

    @Test("item add with nothing on stdin fails with 64 and adds nothing")
    func addWithEmptyStdin() throws {
        let r = try add("api.example.com", "alice", secret: .null)
        expectError(r, 64)
        let (_, items) = try listJSON()
        #expect(items.isEmpty)
    }

    @Test("item commands with a wrong passphrase fail with 77 and reveal nothing")
    func itemsWithWrongPassphrase() throws {
        expectSuccess(try add("api.example.com", "alice", secret: .text(Self.secret)))
        let wrong = ["COFFER_PASSPHRASE": CofferProcess.wrongPassphrase]
        let runs = [
            try sandbox.coffer(["vault", "item", "get", "--service", "api.example.com", "--account", "alice", "--vault", vault], env: wrong),
            try sandbox.coffer(["vault", "item", "list", "--json", "--vault", vault], env: wrong),
            try sandbox.coffer(["vault", "item", "add", "--service", "x", "--account", "y", "--vault", vault], env: wrong, stdin: .text("z")),
            try sandbox.coffer(["vault", "item", "delete", "--service", "api.example.com", "--account", "alice", "--vault", vault], env: wrong),
        ]
        for r in runs {
            expectError(r, 77)
            #expect(!r.err.contains(Self.secret) && !r.err.contains("api.example.com"))
        }
        #expect(try get("api.example.com", "alice").stdout == Data(Self.secret.utf8))
    }

    @Test("8 item adds at once, each its own process: all exit 0 and every item is listed")
    func concurrentAdds() throws {
        let (sandbox, vault) = (self.sandbox, self.vault)
        let results = Mutex<[Int: CofferResult]>([:])
        let group = DispatchGroup()
        for i in 0..<8 {
            group.enter()
            Thread {
                defer { group.leave() }
                let r = try? sandbox.coffer(["vault", "item", "add", "--service", "svc-\(i)", "--account", "acct", "--vault", vault],
                                            env: withPassphrase, stdin: .text("secret-\(i)"))
                results.withLock { $0[i] = r }
            }.start()
        }
        group.wait()
        for i in 0..<8 {
            let r = try #require(results.withLock { $0[i] }, "process \(i) did not run")
            expectSuccess(r)
        }
        let (_, items) = try listJSON()
        #expect(Set(items.compactMap { $0["service"] as? String }) == Set((0..<8).map { "svc-\($0)" }))
        for i in 0..<8 { #expect(try get("svc-\(i)", "acct").stdout == Data("secret-\(i)".utf8)) }
    }

    @Test("item add while another process holds the vault's lock past the wait: 75, naming the vault, nothing added")
    func lockHeldTooLong() throws {
        let fd = open(vault + ".lock", O_RDWR | O_CREAT | O_CLOEXEC, 0o600)
        try #require(fd >= 0 && flock(fd, LOCK_EX) == 0)
        let r: CofferResult
        do {
            defer { close(fd) } // releases the lock
            r = try add("api.example.com", "alice", secret: .text(Self.secret))
        }
        expectError(r, 75, mentioning: vault)
        #expect(r.err.contains("stayed locked"), "\(r)")
        #expect(r.seconds >= 9.5, "gave up after \(r.seconds) s")
        #expect(try listJSON().1.isEmpty)
    }

    @Test("items are unlocked by a key file too")
    func itemsWithKeyFile() throws {
        expectSuccess(try add("api.example.com", "alice", secret: .text(Self.secret)))
        let key = sandbox.path("svc.key")
        expectSuccess(try sandbox.coffer(["vault", "keyfile", "--output", key, "--vault", vault], env: withPassphrase))
        let r = try sandbox.coffer(["vault", "item", "get", "--service", "api.example.com", "--account", "alice", "--vault", vault],
                                   env: ["COFFER_KEY_FILE": key])
        expectSuccess(r)
        #expect(r.stdout == Data(Self.secret.utf8))
    }
}

import ArgumentParser
import CofferCrypto
import CofferStore
import CofferVault
import Foundation

extension Coffer {
    struct Demo: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "The two-user walkthrough, narrated, through a coffer serve of its own, in a temporary folder.",
            discussion: """
                It starts a coffer serve on loopback over a store in its folder, and each user works \
                through it from a folder of their own (their vault and cards; no shared file). \
                Exits 0 only if every step behaved as narrated.
                """)

        @Option(help: ArgumentHelp("Work in this folder (kept afterwards) instead of a temporary one.", valueName: "dir"))
        var dir: String?

        func run() async throws {
            let folder: URL
            if let dir {
                folder = URL(fileURLWithPath: dir)
                try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
            } else {
                folder = FileManager.default.temporaryDirectory.appendingPathComponent("coffer-demo-\(Hex.encode(SecureRandom.bytes(count: 4)))")
                try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
            }
            defer { if dir == nil { try? FileManager.default.removeItem(at: folder) } }
            for name in ["alice/alice.coffer", "bob/bob.coffer", "carol/carol.coffer", "server/store.sqlite"]
            where FileManager.default.fileExists(atPath: folder.appendingPathComponent(name).path) {
                throw CLIError(ExitStatus.alreadyExists, "\(folder.appendingPathComponent(name).path) already exists; give the demo an empty --dir")
            }
            var demo = Walkthrough(folder: folder)
            let server = try Walkthrough.DemoServer.start(store: folder.appendingPathComponent("server/store.sqlite"))

            do {
                try await demo.run(server: server.url)
            } catch {
                server.stop()
                throw error
            }
            server.stop()
            Output.line()
            Output.line("Demo finished: \(demo.steps) steps, all as narrated." + (dir == nil ? "" : " Files kept in \(folder.path)."))
        }
    }
}

/// The narrated story. Each step states what should happen and checks that it did.
struct Walkthrough {
    let folder: URL
    var steps = 0

    mutating func step(_ text: String) {
        steps += 1
        Output.line()
        Output.line("[\(steps)] \(text)")
    }

    func say(_ text: String) { Output.line("    " + text) }

    func check(_ condition: Bool, _ what: String) throws {
        guard condition else { throw CLIError(ExitStatus.failure, "demo step failed: \(what)") }
        say("ok: \(what)")
    }

    mutating func run(server: URL) async throws {
        // Kept as one function: the walkthrough's steps in the order they are printed, read top to bottom
        // like its output.
        let passphrases = ["Alice": "alice: correct horse battery staple", "Bob": "bob: tr0ub4dor&3", "Carol": "carol: hunter2 hunter2"]
        func pass(_ who: String) -> SecureBytes { SecureBytes(copying: Array(passphrases[who]!.utf8)) }
        let storeURL = folder.appendingPathComponent("server/store.sqlite")
        func home(_ who: String) -> URL { folder.appendingPathComponent(who.lowercased(), isDirectory: true) }
        for who in ["Alice", "Bob", "Carol"] { try FileManager.default.createDirectory(at: home(who), withIntermediateDirectories: true) }
        // Secrets the story writes; the last step looks for them in the store's files.
        let secretBody = "eggs, milk, and the safe code 4711-\(Hex.encode(SecureRandom.bytes(count: 4)))"
        let bobsEdit = "Bob adds: coffee beans \(Hex.encode(SecureRandom.bytes(count: 4)))"
        let afterRemoval = "written after Bob left the share \(Hex.encode(SecureRandom.bytes(count: 4)))"
        let plainTitle = "Shopping list \(Hex.encode(SecureRandom.bytes(count: 3)))"

        step("A coffer serve runs on loopback (\(server.absoluteString)) over server/store.sqlite. It holds no vault and no zone key; Alice, Bob and Carol each work from a folder of their own, through it.")
        step("Alice and Bob each create a vault: identity keys under a passphrase (Argon2id 'interactive', so the demo is quick).")
        let aliceVault = try Vault.create(at: home("Alice").appendingPathComponent("alice.coffer"), name: "Alice", email: "alice@example.com",
                                          passphrase: pass("Alice"), kdf: .interactive)
        let bobVault = try Vault.create(at: home("Bob").appendingPathComponent("bob.coffer"), name: "Bob", email: "bob@example.com",
                                        passphrase: pass("Bob"), kdf: .interactive)
        for vault in [aliceVault, bobVault] {
            say("\(vault.identity.name): user id \(vault.identity.userID), fingerprint \(vault.identity.fingerprint)")
        }
        do {
            _ = try Vault.open(at: home("Alice").appendingPathComponent("alice.coffer"), passphrase: pass("Bob"))
            try check(false, "a wrong passphrase is refused")
        } catch let e as VaultError where e.code == .wrongPassphrase {
            say("Bob's passphrase does not open Alice's vault: \(e.message)")
        }

        step("They swap contact cards (self-signed JSON), pin each other's in their vaults, and compare fingerprints aloud.")
        let aliceStore = try await Store(server: server, vault: aliceVault)
        let bobStore = try await Store(server: server, vault: bobVault)
        let bobCard = ContactCard(vault: bobVault).jsonData(), aliceCard = ContactCard(vault: aliceVault).jsonData()
        try bobCard.write(to: home("Bob").appendingPathComponent("bob.card.json"))
        try aliceCard.write(to: home("Alice").appendingPathComponent("alice.card.json"))
        try aliceVault.pin(try ContactCard.verify(bobCard))
        try bobVault.pin(try ContactCard.verify(aliceCard))
        try check(aliceVault.pinnedUserIDs(matching: "bob@example.com") == [bobVault.identity.userID],
                  "Alice finds Bob by email among the cards she pinned, not in the server's directory")
        try check(try await aliceStore.contact(matching: bobVault.identity.userID).fingerprint == bobVault.identity.fingerprint,
                  "the fingerprint on Bob's card matches the one Bob reads out")
        let forged = Data(String(decoding: bobCard, as: UTF8.self).replacingOccurrences(of: "bob@example.com", with: "mallory@example.com").utf8)
        do {
            _ = try ContactCard.verify(forged)
            try check(false, "a card edited by Mallory is refused")
        } catch let e as VaultError {
            say("a copy of Bob's card with Mallory's email is refused: \(e.message)")
        }

        step("Alice saves notes: a plain, queryable title and an encrypted body.")
        let alice = try await aliceStore.openSession(vault: aliceVault)
        let bob = try await bobStore.openSession(vault: bobVault)
        let bobID = bobVault.identity.userID
        let zone = try await alice.privateDatabase.createZone(named: "Family")
        var note = Record(type: "Note", name: "groceries", zone: zone)
        note.values["title"] = .string(plainTitle)
        note.encryptedValues["body"] = .string(secretBody)
        note = try await alice.privateDatabase.save(note)
        say("saved 'groceries' (change tag \(note.changeTag!)): title in the clear, body sealed under the zone key")

        step("Alice shares the zone read-only with Bob; Bob accepts the URL and reads with his own vault.")
        let share = try await alice.share(zone: zone, title: "Family notes")
        _ = try await alice.addParticipant(bobID, permission: .readOnly, to: zone)
        say("share URL: \(share.url)")
        let accepted = try await bob.acceptShare(url: share.url)
        let bobReads = try await bob.sharedDatabase.record(named: "groceries", in: accepted.zoneID)
        try check(bobReads.encryptedValues["body"] == .string(secretBody), "Bob reads the encrypted body Alice wrote")
        try check(try await bob.sharedDatabase.zones().map(\.id) == [zone], "the zone is in Bob's shared database")

        step("Bob tries to change the note: refused, he is read-only.")
        var bobsCopy = bobReads
        bobsCopy.encryptedValues["body"] = .string(bobsEdit)
        do {
            _ = try await bob.sharedDatabase.save(bobsCopy)
            try check(false, "a read-only participant's write is refused")
        } catch let e as StoreError where e.code == .permissionFailure {
            say("refused: \(e.message)")
        }

        step("Alice makes Bob read-write; Bob's edit goes through and Alice sees it.")
        _ = try await alice.setPermission(.readWrite, for: bobID, in: zone)
        _ = try await bob.sharedDatabase.save(bobsCopy)
        let aliceSees = try await alice.privateDatabase.record(named: "groceries", in: zone)
        try check(aliceSees.encryptedValues["body"] == .string(bobsEdit) && aliceSees.modifierID == bobVault.identity.userID,
                  "Alice reads Bob's edit, marked as modified by Bob")
        var stale = note
        stale.encryptedValues["body"] = "Alice's older copy"
        do {
            _ = try await alice.privateDatabase.save(stale)
            try check(false, "Alice's stale copy does not overwrite Bob's edit")
        } catch let e as StoreError where e.code == .serverRecordChanged {
            say("Alice's save of her older copy fails with a conflict instead of overwriting Bob's edit")
        }

        step("Alice opens a read-only public link; Carol, who was never invited, joins with it and reads.")
        let carolVault = try Vault.create(at: home("Carol").appendingPathComponent("carol.coffer"), name: "Carol", email: "carol@example.com",
                                          passphrase: pass("Carol"), kdf: .interactive)
        let carol = try await Store(server: server, vault: carolVault).openSession(vault: carolVault)
        let publicShare = try await alice.setPublicPermission(.readOnly, in: zone)
        say("public URL (its fragment is the link secret): \(publicShare.url)")
        let carolAccepted = try await carol.acceptShare(url: publicShare.url)
        let carolReads = try await carol.sharedDatabase.record(named: "groceries", in: carolAccepted.zoneID)
        try check(carolReads.encryptedValues["body"] == .string(bobsEdit), "Carol reads the note through the link")

        step("Alice turns the link off (Carol, who joined by it, is removed) and removes Bob: the zone key rotates each time.")
        _ = try await alice.setPublicPermission(.none, in: zone)
        let afterBob = try await alice.removeParticipant(bobID, from: zone)
        say("key epoch is now \(afterBob.keyEpoch); only Alice holds the new key, the old ones are sealed under it")
        for (who, session) in [("Bob", bob), ("Carol", carol)] {
            do {
                _ = try await session.sharedDatabase.record(named: "groceries", in: zone)
                try check(false, "\(who) can no longer read")
            } catch let e as StoreError where e.code == .permissionFailure {
                say("\(who) reading now: \(e.message)")
            }
        }
        var later = Record(type: "Note", name: "after", zone: zone)
        later.encryptedValues["body"] = .string(afterRemoval)
        later = try await alice.privateDatabase.save(later)
        try check(later.keyEpoch == afterBob.keyEpoch, "Alice's new note is sealed under the new key epoch")
        try check(try await bob.sharedDatabase.zones().isEmpty, "the zone left Bob's shared database")
        try check(try await alice.fetchShare(in: zone).participants.contains { $0.userID == bobVault.identity.userID && $0.status == .removed },
                  "Alice can still show her share after removing Bob")

        step("Alice keeps an API token in her vault's keychain.")
        let token = "demo-token-\(Hex.encode(SecureRandom.bytes(count: 8)))"
        try aliceVault.addItem(service: "api.example.com", account: "alice", secret: SecureBytes(copying: Array(token.utf8)))
        let item = try Vault.open(at: home("Alice").appendingPathComponent("alice.coffer"), passphrase: pass("Alice")).item(service: "api.example.com", account: "alice")
        try check(item.secret == SecureBytes(copying: Array(token.utf8)), "the token reads back after reopening the vault")

        step("A look at the files on disk: no secret appears in the server's store (database, WAL, shared memory) or the vaults.")
        var files = [storeURL.path, storeURL.path + "-wal", storeURL.path + "-shm"].filter { FileManager.default.fileExists(atPath: $0) }
        files += ["Alice", "Bob", "Carol"].map { home($0).appendingPathComponent("\($0.lowercased()).coffer").path }
        var blob = Data()
        for path in files { blob += (FileManager.default.contents(atPath: path) ?? Data()) }
        say("scanned \(files.count) files, \(blob.count) bytes")
        for secret in [secretBody, bobsEdit, afterRemoval, token, passphrases["Alice"]!] {
            try check(blob.range(of: Data(secret.utf8)) == nil && blob.range(of: Data(secret.utf8).base64EncodedData()) == nil,
                      "'\(secret.prefix(24))…' is nowhere in the files")
        }
        try check(blob.range(of: Data(plainTitle.utf8)) != nil, "the plain title is there, as designed: the scan looks in the right place")
    }

    /// The demo's own `coffer serve`: this executable, on a free loopback port, over `store`.
    struct DemoServer {
        let process: Process
        let url: URL

        static func start(store: URL) throws -> DemoServer {
            try FileManager.default.createDirectory(at: store.deletingLastPathComponent(), withIntermediateDirectories: true)
            let executable = (try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/exe")) ?? CommandLine.arguments[0]
            let output = Pipe()
            let process = Process()
            process.executableURL = URL(fileURLWithPath: executable)
            process.arguments = ["serve", "--listen", "127.0.0.1:0", "--store", store.path]
            process.standardOutput = output
            process.standardError = FileHandle.nullDevice
            process.standardInput = FileHandle.nullDevice
            // It ends with the demo, however the demo ends (see `Serve`).
            process.environment = ProcessInfo.processInfo.environment.merging([Serve.parentVariable: String(getpid())]) { _, new in new }
            try process.run()
            // Its first line, once it listens, names the port the system gave it.
            var text = ""
            while !text.contains("\n") {
                let chunk = output.fileHandleForReading.availableData
                guard !chunk.isEmpty else { throw CLIError(ExitStatus.failure, "the demo's coffer serve stopped before it listened") }
                text += String(decoding: chunk, as: UTF8.self)
            }
            guard let range = text.range(of: #"http://127\.0\.0\.1:[0-9]+"#, options: .regularExpression), let url = URL(string: String(text[range])) else {
                process.terminate()
                throw CLIError(ExitStatus.failure, "the demo's coffer serve printed no address")
            }
            return DemoServer(process: process, url: url)
        }

        /// SIGTERM, and waits for it to end.
        func stop() {
            guard process.isRunning else { return }
            process.terminate()
            process.waitUntilExit()
        }
    }

    func fileMode(_ url: URL) throws -> (Int, Int) {
        let attributes = try FileManager.default.attributesOfItem(atPath: url.path)
        return ((attributes[.posixPermissions] as? Int) ?? -1, (attributes[.size] as? Int) ?? -1)
    }
}

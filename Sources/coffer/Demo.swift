import ArgumentParser
import CofferCrypto
import CofferStore
import CofferVault
import Foundation

extension Coffer {
    struct Demo: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "The two-user walkthrough, narrated, in a temporary folder.",
            discussion: "Exits 0 only if every step behaved as narrated.")

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
            var demo = Walkthrough(folder: folder)
            try demo.run()
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

    mutating func run() throws {
        let alicePass = SecureBytes(copying: Array("alice: correct horse battery staple".utf8))
        let bobPass = SecureBytes(copying: Array("bob: tr0ub4dor&3".utf8))
        let aliceURL = folder.appendingPathComponent("alice.coffer")
        let bobURL = folder.appendingPathComponent("bob.coffer")
        for url in [aliceURL, bobURL] where FileManager.default.fileExists(atPath: url.path) {
            throw CLIError(ExitStatus.alreadyExists, "\(url.path) already exists; give the demo an empty --dir")
        }

        step("Alice and Bob each create a vault (Argon2id 'interactive' preset, so the demo is quick).")
        let alice = try Vault.create(at: aliceURL, name: "Alice", email: "alice@example.com", passphrase: alicePass, kdf: .interactive)
        let bob = try Vault.create(at: bobURL, name: "Bob", email: "bob@example.com", passphrase: bobPass, kdf: .interactive)
        for vault in [alice, bob] {
            say("\(vault.identity.name): user id \(vault.identity.userID)")
            say("       fingerprint \(vault.identity.fingerprint)")
        }
        try check(alice.identity.userID != bob.identity.userID, "two distinct identities")

        step("Alice reopens her vault: a wrong passphrase is refused, the right one opens it.")
        do {
            _ = try Vault.open(at: aliceURL, passphrase: bobPass)
            try check(false, "a wrong passphrase is refused")
        } catch let e as VaultError where e.code == .wrongPassphrase {
            say("refused: \(e.message)")
        }
        let aliceAgain = try Vault.open(at: aliceURL, passphrase: alicePass)
        try check(aliceAgain.identity == alice.identity, "the same identity after reopening")

        step("They swap contact cards (self-signed JSON) and add them to a shared store.")
        let store = try Store(path: folder.appendingPathComponent("store.sqlite").path)
        let aliceCard = ContactCard(vault: alice).jsonData()
        let bobCard = ContactCard(vault: bob).jsonData()
        try aliceCard.write(to: folder.appendingPathComponent("alice.card.json"))
        try bobCard.write(to: folder.appendingPathComponent("bob.card.json"))
        try store.addContact(try ContactCard.verify(aliceCard))
        try store.addContact(try ContactCard.verify(bobCard))
        let bobSeenByAlice = try store.contact(matching: "bob@example.com")
        say("Alice looks Bob up by email: \(bobSeenByAlice.name), fingerprint \(bobSeenByAlice.fingerprint)")
        try check(bobSeenByAlice.fingerprint == bob.identity.fingerprint, "the fingerprint Bob reads aloud matches the card")
        try check(try store.contacts().count == 2, "the store knows both contacts")

        step("Mallory edits Bob's card to put her own email in it: the signature catches it.")
        let forged = Data(String(decoding: bobCard, as: UTF8.self).replacingOccurrences(of: "bob@example.com", with: "mallory@example.com").utf8)
        do {
            _ = try ContactCard.verify(forged)
            try check(false, "a changed card is refused")
        } catch let e as VaultError {
            say("refused: \(e.message)")
        }

        step("Alice keeps an API token in her vault's keychain.")
        let token = "demo-token-\(Hex.encode(SecureRandom.bytes(count: 8)))"
        try alice.addItem(service: "api.example.com", account: "alice", label: "Example API", secret: SecureBytes(copying: Array(token.utf8)))
        let reopened = try Vault.open(at: aliceURL, passphrase: alicePass)
        let item = try reopened.item(service: "api.example.com", account: "alice")
        try check(item.secret == SecureBytes(copying: Array(token.utf8)), "the token reads back after reopening")
        let fileBytes = try Data(contentsOf: aliceURL)
        try check(fileBytes.range(of: Data(token.utf8)) == nil && fileBytes.range(of: Data("api.example.com".utf8)) == nil,
                  "neither the token nor its service name appear in the vault file")
        let (mode, _) = try fileMode(aliceURL)
        try check(mode == 0o600, "the vault file is readable by its owner only (mode 0600)")

        step("Next (as the store grows): Alice saves notes with encrypted fields and shares them with Bob.")
        say("Records, zones and sharing arrive with the record store and sharing work; see README.md.")
    }

    func fileMode(_ url: URL) throws -> (Int, Int) {
        let attributes = try FileManager.default.attributesOfItem(atPath: url.path)
        return ((attributes[.posixPermissions] as? Int) ?? -1, (attributes[.size] as? Int) ?? -1)
    }
}

import Foundation
import Testing

/// `coffer vault export-contact` and `coffer contact add|list`.
@Suite("coffer contact")
struct ContactCommandTests {
    let sandbox: Sandbox
    let alice: String
    let bob: String
    let store: String

    /// The keys of a contact card: all public.
    static let cardKeys: Set<String> = ["format", "version", "userID", "name", "email", "signingKey", "boxKey", "created", "signature"]

    init() throws {
        sandbox = try Sandbox()
        alice = try sandbox.initVault("alice.coffer", name: "Alice", email: "alice@example.com")
        bob = try sandbox.initVault("bob.coffer", name: "Bob", email: "bob@example.com")
        store = sandbox.path("team.sqlite")
    }

    /// Bob's card, written to `bob.card.json`; returns its path and bytes.
    func bobCard(sourceLocation: SourceLocation = #_sourceLocation) throws -> (String, Data) {
        let r = try sandbox.coffer(["vault", "export-contact", "--vault", bob], env: withPassphrase, sourceLocation: sourceLocation)
        expectSuccess(r, sourceLocation: sourceLocation)
        return (try sandbox.write("bob.card.json", r.stdout), r.stdout)
    }

    func contactsJSON(store: String? = nil, env: [String: String] = [:],
                      sourceLocation: SourceLocation = #_sourceLocation) throws -> [[String: Any]] {
        let r = try sandbox.coffer(["contact", "list", "--json"] + (store.map { ["--store", $0] } ?? []), env: env,
                                   sourceLocation: sourceLocation)
        expectSuccess(r, sourceLocation: sourceLocation)
        return try #require(try jsonObject(r, sourceLocation: sourceLocation)["contacts"] as? [[String: Any]],
                            "no 'contacts' array\n\(r)", sourceLocation: sourceLocation)
    }

    /// The control for the forgery tests: the genuine card is accepted (into another store), so a
    /// refusal of the forged one is due to the change.
    func expectGenuineCardAccepted(_ card: String, sourceLocation: SourceLocation = #_sourceLocation) throws {
        let r = try sandbox.coffer(["contact", "add", card, "--store", sandbox.path("control.sqlite")], sourceLocation: sourceLocation)
        expectSuccess(r, sourceLocation: sourceLocation)
    }

    // MARK: - export-contact

    @Test("vault export-contact prints a self-signed card with public fields only")
    func exportToStdout() throws {
        let r = try sandbox.coffer(["vault", "export-contact", "--vault", bob], env: withPassphrase)
        expectSuccess(r)
        let card = try jsonObject(r)
        let identity = try sandbox.showJSON(bob)
        #expect(Set(card.keys) == Self.cardKeys, "unexpected card keys \(card.keys.sorted())")
        #expect(card["format"] as? String == "coffer-contact")
        #expect(card["version"] as? Int == 1)
        #expect(card["userID"] as? String == identity["userID"] as? String)
        #expect(card["name"] as? String == "Bob")
        #expect(card["email"] as? String == "bob@example.com")
        #expect(Data(base64Encoded: card["signature"] as? String ?? "")?.count == 64)
        #expect(Data(base64Encoded: card["signingKey"] as? String ?? "")?.count == 32)
    }

    @Test("vault export-contact --output FILE writes the card; an existing FILE fails with 73 and is kept")
    func exportToFile() throws {
        let file = sandbox.path("alice.card.json")
        let r = try sandbox.coffer(["vault", "export-contact", "--output", file, "--vault", alice], env: withPassphrase)
        expectSuccess(r)
        let identity = try sandbox.showJSON(alice)
        let fingerprint = try #require(identity["fingerprint"] as? String)
        #expect(r.out.contains(fingerprint), "the fingerprint to compare aloud is not printed\n\(r)")
        let card = try jsonObject(try sandbox.read(file))
        #expect(card["userID"] as? String == identity["userID"] as? String)
        #expect(card["name"] as? String == "Alice")

        let before = try sandbox.read(file)
        let again = try sandbox.coffer(["vault", "export-contact", "--output", file, "--vault", bob], env: withPassphrase)
        expectError(again, 73, mentioning: file)
        #expect(try sandbox.read(file) == before)

        let other = try sandbox.write("other.txt", "precious\n")
        expectError(try sandbox.coffer(["vault", "export-contact", "--output", other, "--vault", alice], env: withPassphrase), 73)
        #expect(try sandbox.read(other) == Data("precious\n".utf8))
    }

    // MARK: - contact add / list

    @Test("contact add verifies and imports another user's card; contact list shows it")
    func addAndList() throws {
        let (card, _) = try bobCard()
        let bobIdentity = try sandbox.showJSON(bob)
        let bobID = try #require(bobIdentity["userID"] as? String)
        let bobFingerprint = try #require(bobIdentity["fingerprint"] as? String)

        let r = try sandbox.coffer(["contact", "add", card, "--store", store])
        expectSuccess(r)
        #expect(r.outLines.first == "Added Bob <bob@example.com>.", "\(r)")
        #expect(r.out.contains(bobFingerprint), "the fingerprint to compare is not printed\n\(r)")
        #expect(r.out.contains(bobID))
        #expect(sandbox.exists(store))

        let list = try sandbox.coffer(["contact", "list", "--store", store])
        expectSuccess(list)
        let lines = list.outLines
        try #require(lines.count == 2, "expected a header and one row\n\(list)")
        #expect(lines[0].hasPrefix("NAME"))
        #expect(lines[0].contains("EMAIL") && lines[0].contains("FINGERPRINT"))
        #expect(cells(lines[1]) == ["Bob", "bob@example.com", bobID, bobFingerprint], "\(list)")

        let contacts = try contactsJSON(store: store)
        try #require(contacts.count == 1)
        #expect(contacts[0]["userID"] as? String == bobID)
        #expect(contacts[0]["name"] as? String == "Bob")
        #expect(contacts[0]["email"] as? String == "bob@example.com")
        #expect(contacts[0]["fingerprint"] as? String == bobFingerprint)
    }

    @Test("contact list where there is no store fails with 66 naming the path, and creates none")
    func listWithoutStore() throws {
        for args in [["contact", "list", "--store", store], ["contact", "list", "--store", store, "--json"]] {
            expectError(try sandbox.coffer(args), 66, mentioning: "no store at \(store)")
            #expect(!sandbox.exists(store), "contact list created a store")
        }
    }

    @Test("two users' cards in one store")
    func twoContacts() throws {
        let (bobFile, _) = try bobCard()
        let aliceFile = sandbox.path("alice.card.json")
        expectSuccess(try sandbox.coffer(["vault", "export-contact", "--output", aliceFile, "--vault", alice], env: withPassphrase))
        expectSuccess(try sandbox.coffer(["contact", "add", aliceFile, "--store", store]))
        expectSuccess(try sandbox.coffer(["contact", "add", bobFile, "--store", store]))
        let names = try contactsJSON(store: store).compactMap { $0["name"] as? String }.sorted()
        #expect(names == ["Alice", "Bob"])
    }

    @Test("adding the same card again says it is unchanged")
    func addSameCardAgain() throws {
        let (card, _) = try bobCard()
        let first = try sandbox.coffer(["contact", "add", card, "--store", store, "--json"])
        expectSuccess(first)
        #expect(try jsonObject(first)["result"] as? String == "added", "\(first)")

        let again = try sandbox.coffer(["contact", "add", card, "--store", store])
        expectSuccess(again)
        #expect(again.out.contains("nothing changed") || again.out.lowercased().contains("unchanged"), "\(again)")
        #expect(!again.out.contains("Added"))

        let json = try sandbox.coffer(["contact", "add", card, "--store", store, "--json"])
        expectSuccess(json)
        let object = try jsonObject(json)
        #expect(object["result"] as? String == "unchanged", "\(json)")
        #expect((object["contact"] as? [String: Any])?["name"] as? String == "Bob")
        #expect(try contactsJSON(store: store).count == 1)
    }

    @Test("a card with one character changed in the name fails with 65 and is not added")
    func tamperedName() throws {
        let (card, data) = try bobCard()
        try expectGenuineCardAccepted(card)
        let text = String(decoding: data, as: UTF8.self)
        #expect(text.components(separatedBy: "\"Bob\"").count == 2, "expected the name once in \(text)")
        let forged = text.replacingOccurrences(of: "\"Bob\"", with: "\"Rob\"")
        try #require(forged != text)
        let file = try sandbox.write("forged-name.json", forged)
        expectError(try sandbox.coffer(["contact", "add", file, "--store", store]), 65)
        #expect(!sandbox.exists(store), "a refused card made a store")
    }

    @Test("a card with one character changed in the email fails with 65 and is not added")
    func tamperedEmail() throws {
        let (card, data) = try bobCard()
        try expectGenuineCardAccepted(card)
        let text = String(decoding: data, as: UTF8.self)
        let forged = text.replacingOccurrences(of: "bob@example.com", with: "bob@exbmple.com")
        try #require(forged != text)
        let file = try sandbox.write("forged-email.json", forged)
        expectError(try sandbox.coffer(["contact", "add", file, "--store", store]), 65)
        #expect(!sandbox.exists(store), "a refused card made a store")
    }

    @Test("a card whose signature was changed by one character fails with 65")
    func tamperedSignature() throws {
        let (file, data) = try bobCard()
        try expectGenuineCardAccepted(file)
        var card = try jsonObject(data)
        var signature = try #require(Data(base64Encoded: card["signature"] as? String ?? ""))
        signature[10] ^= 0x01
        card["signature"] = signature.base64EncodedString()
        let forgedFile = try sandbox.write("forged-sig.json", try JSONSerialization.data(withJSONObject: card))
        expectError(try sandbox.coffer(["contact", "add", forgedFile, "--store", store]), 65)
    }

    @Test("a card that is not JSON fails with 65", arguments: [
        "this is not a contact card\n",
        "{\"format\": \"coffer-contact\", \"version\": 1,",
        "[1, 2, 3]\n",
        "{}\n",
    ])
    func notJSON(content: String) throws {
        let file = try sandbox.write("junk.json", content)
        expectError(try sandbox.coffer(["contact", "add", file, "--store", store]), 65)
    }

    @Test("a binary file as a card fails with 65")
    func binaryCard() throws {
        let file = try sandbox.write("random.bin", randomBytes(512))
        expectError(try sandbox.coffer(["contact", "add", file, "--store", store]), 65)
    }

    @Test("a missing card file fails with 66")
    func missingCard() throws {
        let file = sandbox.path("nobody.card.json")
        expectError(try sandbox.coffer(["contact", "add", file, "--store", store]), 66, mentioning: file)
    }

    @Test("contact add - reads the card from stdin")
    func addFromStdin() throws {
        let (_, data) = try bobCard()
        let r = try sandbox.coffer(["contact", "add", "-", "--store", store], stdin: .data(data))
        expectSuccess(r)
        #expect(r.outLines.first == "Added Bob <bob@example.com>.", "\(r)")
        #expect(try contactsJSON(store: store).first?["name"] as? String == "Bob")
        // A forged card on stdin is refused the same way.
        let forged = Data(String(decoding: data, as: UTF8.self).replacingOccurrences(of: "\"Bob\"", with: "\"Bab\"").utf8)
        expectError(try sandbox.coffer(["contact", "add", "-", "--store", store], stdin: .data(forged)), 65)
    }

    @Test("COFFER_STORE replaces --store")
    func storeEnvironmentVariable() throws {
        let (card, _) = try bobCard()
        let envStore = sandbox.path("env-store.sqlite")
        expectSuccess(try sandbox.coffer(["contact", "add", card], env: ["COFFER_STORE": envStore]))
        #expect(sandbox.exists(envStore))
        #expect(!sandbox.exists(sandbox.dataHome.appendingPathComponent("coffer/store.sqlite").path))
        #expect(try contactsJSON(env: ["COFFER_STORE": envStore]).first?["name"] as? String == "Bob")
        // The flag wins over the variable: it names a store that does not exist.
        expectError(try sandbox.coffer(["contact", "list", "--store", store], env: ["COFFER_STORE": envStore]), 66,
                    mentioning: "no store at \(store);")
    }

    @Test("without --store, the store lives in $XDG_DATA_HOME/coffer/")
    func defaultStoreLocation() throws {
        let (card, _) = try bobCard()
        expectSuccess(try sandbox.coffer(["contact", "add", card]))
        let expected = sandbox.dataHome.appendingPathComponent("coffer/store.sqlite").path
        #expect(sandbox.exists(expected))
        #expect(!sandbox.exists(sandbox.path(".local")))
        #expect(try contactsJSON().first?["name"] as? String == "Bob")
    }
}

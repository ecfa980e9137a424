import Foundation
import Testing

/// `coffer share …`: three users on one store. Alice owns the zone Notes; Bob and Carol take part.
@Suite("coffer share")
struct ShareCommandTests {
    let team: Team

    init() throws {
        team = try Team()
        // Users add each other's cards before sharing: names and emails resolve only to those.
        try team.exchangeCards(Who.allCases)
        try team.createZone(.alice, "Notes")
        try team.put(.alice, "Notes", "n1", type: "Note", set: ["title=Shared note"], secret: ["pin=4321"])
        try team.put(.alice, "Notes", "n2", type: "Note", set: ["title=Child"], extra: ["--parent", "n1"])
    }

    /// `Notes@alice's email`: how Bob and Carol name the zone.
    var shared: String { "Notes@\(Who.alice.email)" }

    /// coffer://share/v1/<32 hex>/<32 hex>, optionally with #<43 base64url characters>.
    func isShareURL(_ url: String, withSecret: Bool) -> Bool {
        let pattern = withSecret
            ? "^coffer://share/v1/[0-9a-f]{32}/[0-9a-f]{32}#[A-Za-z0-9_-]{43}$"
            : "^coffer://share/v1/[0-9a-f]{32}/[0-9a-f]{32}$"
        return url.range(of: pattern, options: .regularExpression) != nil
    }

    func show(_ who: Who = .alice, _ zone: String = "Notes", sourceLocation: SourceLocation = #_sourceLocation) throws -> [String: Any] {
        try team.json(who, ["share", "show", zone], sourceLocation: sourceLocation)
    }

    /// The participant entry of `who` in `share show --json`.
    func participant(_ who: Who, in share: [String: Any], sourceLocation: SourceLocation = #_sourceLocation) throws -> [String: Any] {
        try #require(objects(share, "participants").first { $0["user"] as? String == team.id(who) },
                     "\(who.name) is not among the participants: \(share)", sourceLocation: sourceLocation)
    }

    func createShare(sourceLocation: SourceLocation = #_sourceLocation) throws -> String {
        let r = try team.ok(.alice, ["share", "create", "Notes"], sourceLocation: sourceLocation)
        return r.out.trimmingCharacters(in: .whitespacesAndNewlines)
    }

    // MARK: - create, show, url

    @Test("share create prints the URL; share url and share show agree")
    func create() throws {
        let r = try team.ok(.alice, ["share", "create", "Notes", "--title", "Team notes"])
        #expect(r.outLines.count == 1, "\(r)")
        let url = try #require(r.outLines.first)
        #expect(isShareURL(url, withSecret: false), "not a share URL without a link secret: \(url)")

        let printed = try team.ok(.alice, ["share", "url", "Notes"])
        #expect(printed.out == url + "\n")

        let share = try show()
        #expect(share["url"] as? String == url)
        #expect(share["title"] as? String == "Team notes")
        #expect(share["owner"] as? String == team.id(.alice))
        #expect(share["publicPermission"] as? String == "none")
        let participants = objects(share, "participants")
        try #require(participants.count == 1, "a new share has the owner only: \(participants)")
        #expect(participants[0]["user"] as? String == team.id(.alice))
        #expect(participants[0]["role"] as? String == "owner")
        #expect(participants[0]["permission"] as? String == "read-write")
        #expect(participants[0]["status"] as? String == "accepted")
    }

    @Test("share create --json has url and zone")
    func createJSON() throws {
        let object = try team.json(.alice, ["share", "create", "Notes"])
        #expect(object["zone"] as? String == "Notes")
        let url = try #require(object["url"] as? String)
        #expect(isShareURL(url, withSecret: false), "\(url)")
        #expect(try show()["url"] as? String == url)
    }

    @Test("share create --public read-only prints a URL with the link secret")
    func createPublic() throws {
        let object = try team.json(.alice, ["share", "create", "Notes", "--public", "read-only"])
        let url = try #require(object["url"] as? String)
        #expect(isShareURL(url, withSecret: true), "\(url)")
        #expect(try show()["publicPermission"] as? String == "read-only")
    }

    @Test("share create on a zone that is already shared fails with 73; on a missing zone with 66")
    func createTwice() throws {
        let url = try createShare()
        try team.fails(.alice, ["share", "create", "Notes"], 73, mentioning: "Notes")
        #expect(try show()["url"] as? String == url, "the share changed")
        try team.fails(.alice, ["share", "create", "Nowhere"], 66)
    }

    @Test("share show, url, add of a zone that is not shared fail with 66")
    func notShared() throws {
        try team.fails(.alice, ["share", "show", "Notes"], 66)
        try team.fails(.alice, ["share", "url", "Notes"], 66)
        try team.fails(.alice, ["share", "add", "Notes", "--participant", Who.bob.email, "--permission", "read-only"], 66)
    }

    // MARK: - add

    enum Naming: String, CaseIterable, Sendable { case email, name, userID }

    func reference(_ who: Who, _ naming: Naming) -> String {
        switch naming {
        case .email: return who.email
        case .name: return who.name
        case .userID: return team.id(who)
        }
    }

    @Test("share add finds the participant by email, contact name or user id", arguments: Naming.allCases)
    func add(naming: Naming) throws {
        let url = try createShare()
        let added = try team.ok(.alice, ["share", "add", "Notes", "--participant", reference(.bob, naming), "--permission", "read-only"])
        // It says whom the name matched, by user id and fingerprint, to compare before sending the URL.
        let card = try team.json(.bob, ["vault", "show"])
        let (id, fingerprint) = (try #require(card["userID"] as? String), try #require(card["fingerprint"] as? String))
        #expect(added.out.contains(id) && added.out.contains(fingerprint), "\(added.out)")
        let bob = try participant(.bob, in: try show())
        #expect(bob["role"] as? String == "private")
        #expect(bob["permission"] as? String == "read-only")
        #expect(bob["status"] as? String == "pending")
        // Pending: nothing to read yet.
        try team.fails(.bob, ["record", "get", shared, "n1"], 77)
        try team.ok(.bob, ["share", "accept", url])
        #expect(try participant(.bob, in: try show())["status"] as? String == "accepted")
    }

    @Test("share add of someone unknown fails with 66 and adds nobody", arguments: ["dave@example.com", "Dave", String(repeating: "ab", count: 16)])
    func addUnknown(who: String) throws {
        try createShare()
        try team.fails(.alice, ["share", "add", "Notes", "--participant", who, "--permission", "read-only"], 66)
        #expect(objects(try show(), "participants").count == 1)
    }

    @Test("share add of someone who takes part already fails with 73")
    func addTwice() throws {
        try createShare()
        try team.ok(.alice, ["share", "add", "Notes", "--participant", "Bob", "--permission", "read-only"])
        try team.fails(.alice, ["share", "add", "Notes", "--participant", Who.bob.email, "--permission", "read-write"], 73)
        #expect(try participant(.bob, in: try show())["permission"] as? String == "read-only")
    }

    @Test("a bad --permission is a bad command line (64)")
    func badPermission() throws {
        try createShare()
        try team.fails(.alice, ["share", "add", "Notes", "--participant", "Bob", "--permission", "owner"], 64)
        try team.fails(.alice, ["share", "add", "Notes", "--participant", "Bob", "--permission", "none"], 64)
    }

    // MARK: - accept, ZONE@OWNER, permissions

    @Test("after accepting, record get ZONE@OWNER works with OWNER as email, name or user id", arguments: Naming.allCases)
    func acceptAndRead(naming: Naming) throws {
        try team.share(.alice, "Notes", with: [(.bob, "read-only")])
        let zone = "Notes@\(reference(.alice, naming))"
        let record = try team.get(.bob, zone, "n1")
        #expect(record["name"] as? String == "n1")
        #expect(json(record["values"] as? [String: Any] ?? [:], "title") == .string("Shared note"))
        #expect(json(record["encryptedValues"] as? [String: Any] ?? [:], "pin") == .string("4321"))
        #expect(record["creator"] as? String == team.id(.alice))
        #expect(try team.get(.bob, zone, "n2")["parent"] as? String == "n1")
    }

    @Test("share accept --json names the zone as the participant refers to it")
    func acceptJSON() throws {
        let url = try team.share(.alice, "Notes", with: [(.bob, "read-write")], accept: false)
        let accepted = try team.json(.bob, ["share", "accept", url])
        let zone = try #require(accepted["zone"] as? String)
        #expect(zone.hasPrefix("Notes@"), "\(accepted)")
        #expect(try team.get(.bob, zone, "n1")["name"] as? String == "n1")
    }

    @Test("a link joiner who never pinned the owner's card is shown a zone name that works; with --pin, the owner's email names it")
    func linkJoinerNamesTheZone() throws {
        let solo = try Team([.alice, .bob])
        try solo.createZone(.alice, "Notes")
        try solo.put(.alice, "Notes", "n1", type: "Note", set: ["title=hello"])
        let url = try #require(try solo.json(.alice, ["share", "create", "Notes", "--public", "read-only"])["url"] as? String)
        // Bob never added Alice's card: her email names nothing for him.
        let accepted = try solo.json(.bob, ["share", "accept", url])
        let zone = try #require(accepted["zone"] as? String)
        #expect(zone == "Notes@\(solo.id(.alice))" && accepted["ownerPinned"] as? Bool == false, "\(accepted)")
        #expect(try solo.get(.bob, zone, "n1")["name"] as? String == "n1", "the printed name does not work")
        try solo.fails(.bob, ["record", "get", "Notes@\(Who.alice.email)", "n1"], 66)
        let text = try solo.ok(.bob, ["share", "accept", url])
        #expect(text.out.contains("--pin") && text.out.contains("Notes@\(solo.id(.alice))"), "\(text)")

        let pinned = try solo.json(.bob, ["share", "accept", url, "--pin"])
        #expect(pinned["zone"] as? String == "Notes@\(Who.alice.email)" && pinned["ownerPinned"] as? Bool == true, "\(pinned)")
        #expect(try solo.get(.bob, "Notes@\(Who.alice.email)", "n1")["name"] as? String == "n1")
    }

    @Test("a read-only participant's record put and delete fail with 77; after read-write they succeed")
    func permissions() throws {
        try team.share(.alice, "Notes", with: [(.bob, "read-only")])
        try team.fails(.bob, team.putArguments(shared, "b1", type: "Note", set: ["title=by bob"]), 77)
        try team.fails(.bob, team.putArguments(shared, "n1", type: "Note", set: ["title=changed"]), 77)
        try team.fails(.bob, ["record", "delete", shared, "n2"], 77)
        try team.fails(.alice, ["record", "get", "Notes", "b1"], 66)
        #expect(json(try team.get(.alice, "Notes", "n1")["values"] as? [String: Any] ?? [:], "title") == .string("Shared note"))

        try team.ok(.alice, ["share", "permission", "Notes", "--participant", "Bob", "--permission", "read-write"])
        #expect(try participant(.bob, in: try show())["permission"] as? String == "read-write")
        let written = try team.put(.bob, shared, "b1", type: "Note", set: ["title=by bob"], secret: ["pin=0007"])
        #expect(written["creator"] as? String == team.id(.bob))
        let seen = try team.get(.alice, "Notes", "b1")
        #expect(json(seen["encryptedValues"] as? [String: Any] ?? [:], "pin") == .string("0007"))
        #expect(seen["creator"] as? String == team.id(.bob))
        try team.ok(.bob, ["record", "delete", shared, "n2"])
        try team.fails(.alice, ["record", "get", "Notes", "n2"], 66)

        // And back to read-only.
        try team.ok(.alice, ["share", "permission", "Notes", "--participant", team.id(.bob), "--permission", "read-only"])
        try team.fails(.bob, team.putArguments(shared, "b2", type: "Note", set: ["title=again"]), 77)
    }

    @Test("share permission of someone who is not a participant fails with 66")
    func permissionOfStranger() throws {
        try team.share(.alice, "Notes", with: [(.bob, "read-only")])
        try team.fails(.alice, ["share", "permission", "Notes", "--participant", "Carol", "--permission", "read-write"], 66)
        try team.fails(.alice, ["share", "permission", "Notes", "--participant", "dave@example.com", "--permission", "read-write"], 66)
        #expect(objects(try show(), "participants").count == 2)
    }

    @Test("a read-only participant's record import fails with 77 and imports nothing; their export is decrypted")
    func participantImportExport() throws {
        try team.share(.alice, "Notes", with: [(.bob, "read-only")])
        let file = try team.sandbox.write("bob.jsonl", #"{"name":"i1","type":"Note","values":{"title":"imported"},"encryptedValues":{}}"# + "\n")
        try team.fails(.bob, ["record", "import", shared, file], 77)
        try team.fails(.alice, ["record", "get", "Notes", "i1"], 66)
        let export = try team.ok(.bob, ["record", "export", shared])
        let lines = try jsonLines(export)
        #expect(recordNames(lines).sorted() == ["n1", "n2"])
        let n1 = try #require(lines.first { $0["name"] as? String == "n1" })
        #expect(json(n1["encryptedValues"] as? [String: Any] ?? [:], "pin") == .string("4321"))
    }

    @Test("only the owner changes the share: a participant gets 77")
    func participantCannotManage() throws {
        try team.share(.alice, "Notes", with: [(.bob, "read-write")])
        try team.fails(.bob, ["share", "add", shared, "--participant", "Carol", "--permission", "read-only"], 77)
        try team.fails(.bob, ["share", "permission", shared, "--participant", "Bob", "--permission", "read-write"], 77)
        try team.fails(.bob, ["share", "public", shared, "read-write"], 77)
        try team.fails(.bob, ["share", "stop", shared], 77)
        try team.fails(.bob, ["share", "create", shared], 77)
        #expect(objects(try show(), "participants").count == 2)
    }

    // MARK: - remove, leave, stop

    @Test("share remove: the removed participant's record get and put fail with 77; share show says removed")
    func remove() throws {
        try team.share(.alice, "Notes", with: [(.bob, "read-write"), (.carol, "read-only")])
        try team.ok(.alice, ["share", "remove", "Notes", "--participant", "Bob"])
        try team.fails(.bob, ["record", "get", shared, "n1"], 77)
        try team.fails(.bob, team.putArguments(shared, "b1", type: "Note", set: ["title=x"]), 77)
        #expect(try participant(.bob, in: try show())["status"] as? String == "removed")
        // The others keep reading, and the owner writes under the new key.
        try team.put(.alice, "Notes", "n3", type: "Note", set: ["title=after"], secret: ["pin=9999"])
        #expect(json(try team.get(.carol, shared, "n3")["encryptedValues"] as? [String: Any] ?? [:], "pin") == .string("9999"))
        #expect(try team.get(.carol, shared, "n1")["name"] as? String == "n1")
        try team.fails(.bob, ["record", "get", shared, "n3"], 77)
    }

    @Test("share remove of someone not in the share fails with 66")
    func removeUnknown() throws {
        try createShare()
        try team.fails(.alice, ["share", "remove", "Notes", "--participant", "nobody@example.com"], 66)
    }

    @Test("share remove while the share is public fails with 65 and keeps the participant")
    func removeWhilePublic() throws {
        try team.share(.alice, "Notes", with: [(.bob, "read-only")])
        try team.ok(.alice, ["share", "public", "Notes", "read-only"])
        try team.fails(.alice, ["share", "remove", "Notes", "--participant", "Bob"], 65)
        #expect(try participant(.bob, in: try show())["status"] as? String == "accepted")
        #expect(try team.get(.bob, shared, "n1")["name"] as? String == "n1")
    }

    @Test("share leave: the participant stops reading; accepting again while invited brings them back")
    func leave() throws {
        let url = try team.share(.alice, "Notes", with: [(.bob, "read-only")])
        try team.ok(.bob, ["share", "leave", shared])
        try team.fails(.bob, ["record", "get", shared, "n1"], 77)
        #expect(try participant(.bob, in: try show())["status"] as? String == "removed")
        // Alice's data is untouched.
        #expect(try team.get(.alice, "Notes", "n1")["name"] as? String == "n1")
        try team.ok(.bob, ["share", "accept", url])
        #expect(try team.get(.bob, shared, "n1")["name"] as? String == "n1")
    }

    @Test("share leave by the owner fails; stop is for the owner")
    func ownerCannotLeave() throws {
        try createShare()
        let r = try team.run(.alice, ["share", "leave", "Notes"])
        #expect(r.status != 0, "the owner left their own share\n\(r)")
        expectFailure(r, r.status)
        #expect(objects(try show(), "participants").count == 1)
    }

    @Test("share stop: participants lose the zone, the owner keeps the records, and the zone can be shared again")
    func stop() throws {
        try team.share(.alice, "Notes", with: [(.bob, "read-write")])
        try team.ok(.alice, ["share", "stop", "Notes"])
        try team.fails(.alice, ["share", "show", "Notes"], 66)
        // Bob is no longer a participant of anything: the zone is not found for him.
        try team.fails(.bob, ["record", "get", shared, "n1"], 66)
        let record = try team.get(.alice, "Notes", "n1")
        #expect(json(record["encryptedValues"] as? [String: Any] ?? [:], "pin") == .string("4321"))
        let again = try team.json(.alice, ["share", "create", "Notes"])
        #expect(isShareURL(again["url"] as? String ?? "", withSecret: false))
        #expect(objects(try show(), "participants").count == 1)
    }

    // MARK: - strangers and links

    @Test("a stranger accepting the URL without a link secret fails with 77 and reads nothing")
    func strangerWithoutFragment() throws {
        let url = try team.share(.alice, "Notes", with: [(.bob, "read-only")])
        try team.fails(.carol, ["share", "accept", url], 77)
        try team.fails(.carol, ["record", "get", shared, "n1"], 66)
        #expect(objects(try show(), "participants").count == 2)
    }

    @Test("a public read-only link lets Carol join and read, not write")
    func publicLink() throws {
        try createShare()
        let object = try team.json(.alice, ["share", "public", "Notes", "read-only"])
        let url = try #require(object["url"] as? String)
        #expect(isShareURL(url, withSecret: true), "\(url)")
        #expect(try team.ok(.alice, ["share", "url", "Notes"]).out == url + "\n")

        try team.ok(.carol, ["share", "accept", url])
        let record = try team.get(.carol, shared, "n1")
        #expect(json(record["encryptedValues"] as? [String: Any] ?? [:], "pin") == .string("4321"))
        try team.fails(.carol, team.putArguments(shared, "c1", type: "Note", set: ["title=by carol"]), 77)
        let carol = try participant(.carol, in: try show())
        #expect(carol["role"] as? String == "public")
        #expect(carol["status"] as? String == "accepted")

        // The link without its secret does not work for anyone else.
        let withoutSecret = String(url.prefix { $0 != "#" })
        try team.fails(.bob, ["share", "accept", withoutSecret], 77)
    }

    @Test("going public says which invitations it removed; the invitee then joins with the link")
    func goingPublicDropsPendingInvitee() throws {
        try createShare()
        try team.ok(.alice, ["share", "add", "Notes", "--participant", "bob@example.com", "--permission", "read-write"])
        let out = try team.ok(.alice, ["share", "public", "Notes", "read-only"]).out
        #expect(out.contains("Removed the invitations not yet accepted"), "\(out)")
        #expect(out.contains("Bob"), "\(out)")
        let url = try team.ok(.alice, ["share", "url", "Notes"]).out.trimmingCharacters(in: .whitespacesAndNewlines)
        try team.ok(.bob, ["share", "accept", url])
        #expect(try participant(.bob, in: try show())["role"] as? String == "public")
        #expect(try team.get(.bob, shared, "n1")["name"] as? String == "n1")
    }

    @Test("a public read-write link lets Carol write; back to none removes her")
    func publicReadWrite() throws {
        try team.json(.alice, ["share", "create", "Notes", "--public", "read-write"])
        let url = try team.ok(.alice, ["share", "url", "Notes"]).out.trimmingCharacters(in: .whitespacesAndNewlines)
        try team.ok(.carol, ["share", "accept", url])
        try team.put(.carol, shared, "c1", type: "Note", set: ["title=by carol"])
        #expect(try team.get(.alice, "Notes", "c1")["creator"] as? String == team.id(.carol))
        try team.ok(.alice, ["share", "public", "Notes", "none"])
        #expect(try show()["publicPermission"] as? String == "none")
        try team.fails(.carol, ["record", "get", shared, "n1"], 77)
        #expect(isShareURL(try show()["url"] as? String ?? "", withSecret: false))
    }

    @Test("a malformed share URL fails with 65", arguments: [
        "not a url",
        "https://example.com/share",
        "coffer://share/v2/00000000000000000000000000000000/00000000000000000000000000000000",
        "coffer://share/v1/zz/yy",
        "coffer://share/v1/ABCDEF00000000000000000000000000/00000000000000000000000000000000",
        "coffer://share/v1/0000000000000000000000000000000/00000000000000000000000000000000",
        "coffer://share/v1/00000000000000000000000000000000/00000000000000000000000000000000#short",
        "coffer://share/v1/00000000000000000000000000000000/00000000000000000000000000000000#" + String(repeating: "A", count: 200),
    ])
    func malformedURL(url: String) throws {
        try createShare()
        try team.fails(.bob, ["share", "accept", url], 65)
    }

    @Test("a well-formed URL of another store fails with 65")
    func otherStore() throws {
        let url = try createShare()
        let parts = url.components(separatedBy: "/")
        // coffer: "" share v1 <store> <share>
        let storeID = parts[4]
        let other = storeID.first == "0" ? "1" + storeID.dropFirst() : "0" + storeID.dropFirst()
        let forged = url.replacingOccurrences(of: storeID, with: other)
        // Well-formed, so not necessarily "malformed" (65): "not found" (66) fits too. Either way, one clear line.
        let r = try team.run(.bob, ["share", "accept", forged])
        #expect([65, 66].contains(r.status), "\(r)")
        expectFailure(r, r.status, mentioning: other)
    }

    // MARK: - list

    @Test("share list shows shares I own and shares I take part in")
    func list() throws {
        try team.share(.alice, "Notes", with: [(.bob, "read-only")])
        try team.createZone(.bob, "BobZone")
        try team.share(.bob, "BobZone", with: [])

        let aliceShares = objects(try team.json(.alice, ["share", "list"]), "shares")
        #expect(aliceShares.count == 1, "\(aliceShares)")
        #expect(aliceShares.first?["owner"] as? String == team.id(.alice))
        let aliceURL = try show()["url"] as? String
        #expect(aliceShares.first?["url"] as? String == aliceURL)

        let bobShares = objects(try team.json(.bob, ["share", "list"]), "shares")
        #expect(bobShares.count == 2, "\(bobShares)")
        #expect(Set(bobShares.compactMap { $0["owner"] as? String }) == [team.id(.alice), team.id(.bob)])

        #expect(objects(try team.json(.carol, ["share", "list"]), "shares").isEmpty)

        let text = try team.ok(.bob, ["share", "list"])
        #expect(text.out.contains("Notes"))
        #expect(text.out.contains("BobZone"))
    }

    // MARK: - sharing records

    @Test("share create ZONE --record n1 --into Z2 moves n1 and its children into the shared zone Z2")
    func shareRecords() throws {
        try team.put(.alice, "Notes", "n3", type: "Note", set: ["title=Grandchild"], extra: ["--parent", "n2"])
        try team.put(.alice, "Notes", "n4", type: "Note", set: ["title=Unrelated"], secret: ["pin=1111"])
        let object = try team.json(.alice, ["share", "create", "Notes", "--record", "n1", "--into", "Z2"])
        #expect(object["zone"] as? String == "Z2")
        let url = try #require(object["url"] as? String)
        #expect(isShareURL(url, withSecret: false))

        for name in ["n1", "n2", "n3"] {
            try team.fails(.alice, ["record", "get", "Notes", name], 66)
            let moved = try team.get(.alice, "Z2", name)
            #expect(moved["zone"] as? String == "Z2")
        }
        #expect(json(try team.get(.alice, "Z2", "n1")["encryptedValues"] as? [String: Any] ?? [:], "pin") == .string("4321"))
        #expect(try team.get(.alice, "Z2", "n3")["parent"] as? String == "n2")
        #expect(json(try team.get(.alice, "Notes", "n4")["encryptedValues"] as? [String: Any] ?? [:], "pin") == .string("1111"))
        try team.fails(.alice, ["record", "get", "Z2", "n4"], 66)

        #expect(try team.json(.alice, ["share", "show", "Z2"])["url"] as? String == url)
        try team.fails(.alice, ["share", "show", "Notes"], 66)

        try team.ok(.alice, ["share", "add", "Z2", "--participant", "Bob", "--permission", "read-only"])
        try team.ok(.bob, ["share", "accept", url])
        #expect(try team.get(.bob, "Z2@\(Who.alice.email)", "n3")["name"] as? String == "n3")
        try team.fails(.bob, ["record", "get", shared, "n4"], 66)
    }

    @Test("share create --record without --into is a bad command line (64)")
    func shareRecordsWithoutInto() throws {
        try team.fails(.alice, ["share", "create", "Notes", "--record", "n1"], 64)
        #expect(try team.get(.alice, "Notes", "n1")["zone"] as? String == "Notes")
    }
}

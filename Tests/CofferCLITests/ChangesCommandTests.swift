import Foundation
import Testing

/// `coffer changes ZONE` and `coffer changes --database private|shared`.
@Suite("coffer changes")
struct ChangesCommandTests {
    let team: Team

    @Test("an empty --store, --vault, --passphrase-file or --key-file is a bad command line (64), not the default")
    func emptyPathFlags() throws {
        for flag in ["--store", "--vault", "--passphrase-file", "--key-file"] {
            let r = try team.sandbox.coffer(["zone", "list", flag, ""], env: withPassphrase)
            expectError(r, 64)
            #expect(r.err.contains(flag), "\(r)")
        }
        #expect(!team.sandbox.exists(team.sandbox.dataHome.appendingPathComponent("coffer/store.sqlite").path))
    }

    @Test("--limit with --database is a bad command line (64), not silently ignored")
    func limitWithDatabase() throws {
        try team.fails(.alice, ["changes", "--database", "private", "--limit", "1"], 64, mentioning: "--limit")
        try team.ok(.alice, ["changes", "--database", "private"])
    }

    init() throws {
        team = try Team([.alice, .bob])
        try team.createZone(.alice, "Notes")
    }

    /// One page of `changes ARGS --json`.
    struct Page {
        let changed: [[String: Any]]
        let deleted: [String]
        let token: String
        let moreComing: Bool
        var changedNames: [String] { recordNames(changed) }
    }

    func page(_ args: [String], as who: Who = .alice, sourceLocation: SourceLocation = #_sourceLocation) throws -> Page {
        let object = try team.json(who, ["changes"] + args, sourceLocation: sourceLocation)
        for key in ["changed", "deleted", "token", "moreComing"] {
            #expect(object[key] != nil, "changes --json lacks '\(key)': \(object)", sourceLocation: sourceLocation)
        }
        let changed = try #require(object["changed"] as? [[String: Any]], "changed is not an array of records: \(object)",
                                   sourceLocation: sourceLocation)
        let deleted = try #require(object["deleted"] as? [Any], "deleted is not an array: \(object)", sourceLocation: sourceLocation)
        let token = try #require(object["token"] as? String, "token is not a string: \(object)", sourceLocation: sourceLocation)
        #expect(!token.isEmpty, sourceLocation: sourceLocation)
        let more = try #require(object["moreComing"] as? Bool, "moreComing is not a bool: \(object)", sourceLocation: sourceLocation)
        return Page(changed: changed, deleted: deleted.map { $0 as? String ?? "<not a name: \($0)>" }, token: token, moreComing: more)
    }

    /// `changes --database SCOPE --json`: changed zone references and deleted (zone, reason) pairs.
    func databasePage(_ who: Who, _ scope: String, since: String? = nil,
                      sourceLocation: SourceLocation = #_sourceLocation) throws -> (changed: [String], deleted: [[String: Any]], token: String) {
        let object = try team.json(who, ["changes", "--database", scope] + (since.map { ["--since", $0] } ?? []),
                                   sourceLocation: sourceLocation)
        let changed = try #require(object["changed"] as? [String], "changed: \(object)", sourceLocation: sourceLocation)
        let deleted = try #require(object["deleted"] as? [[String: Any]], "deleted: \(object)", sourceLocation: sourceLocation)
        let token = try #require(object["token"] as? String, "token: \(object)", sourceLocation: sourceLocation)
        #expect(object["moreComing"] is Bool, "moreComing: \(object)", sourceLocation: sourceLocation)
        return (changed, deleted, token)
    }

    /// r1…r5 saved, r2 deleted, r5 saved again.
    func history() throws {
        for i in 1...5 { try team.put(.alice, "Notes", "r\(i)", type: "Note", set: ["n:int=\(i)"], secret: ["s=secret-\(i)"]) }
        try team.ok(.alice, ["record", "delete", "Notes", "r2"])
        try team.put(.alice, "Notes", "r5", type: "Note", set: ["n:int=50"], secret: ["s=secret-50"])
    }

    // MARK: - zone changes

    @Test("changes ZONE --json: changed records (latest, decrypted), deleted names, token, moreComing")
    func fromTheBeginning() throws {
        try history()
        let p = try page(["Notes"])
        #expect(p.changedNames == ["r1", "r3", "r4", "r5"], "in commit order, each name once")
        #expect(p.deleted == ["r2"])
        #expect(p.moreComing == false)
        for record in p.changed { expectRecordShape(record) }
        let r5 = try #require(p.changed.last)
        #expect(json(r5["values"] as? [String: Any] ?? [:], "n") == .int(50))
        #expect(json(r5["encryptedValues"] as? [String: Any] ?? [:], "s") == .string("secret-50"))
        #expect(JSON(r5["changeTag"]) == JSON(try team.get(.alice, "Notes", "r5")["changeTag"]))
    }

    @Test("changes of a new zone: nothing changed, a token, no more coming")
    func emptyZone() throws {
        let p = try page(["Notes"])
        #expect(p.changed.isEmpty)
        #expect(p.deleted.isEmpty)
        #expect(p.moreComing == false)
    }

    @Test("--since TOKEN gives only the changes made after it")
    func since() throws {
        try history()
        let first = try page(["Notes"])
        try team.put(.alice, "Notes", "r6", type: "Note", set: ["n:int=6"])
        try team.ok(.alice, ["record", "delete", "Notes", "r3"])
        try team.put(.alice, "Notes", "r1", type: "Note", set: ["n:int=10"])

        let second = try page(["Notes", "--since", first.token])
        #expect(second.changedNames == ["r6", "r1"])
        #expect(second.deleted == ["r3"])
        #expect(second.moreComing == false)
        #expect(json(second.changed.last?["values"] as? [String: Any] ?? [:], "n") == .int(10))
        #expect(second.token != first.token)

        let third = try page(["Notes", "--since", second.token])
        #expect(third.changed.isEmpty)
        #expect(third.deleted.isEmpty)
        #expect(third.moreComing == false)

        // The old token still gives the same answer: tokens are positions, not cursors that get used up.
        let again = try page(["Notes", "--since", first.token])
        #expect(again.changedNames == ["r6", "r1"])
        #expect(again.deleted == ["r3"])
    }

    @Test("a deleted and saved-again name is a change, not a deletion")
    func deleteThenSave() throws {
        try team.put(.alice, "Notes", "r1", type: "Note", set: ["n:int=1"])
        let start = try page(["Notes"])
        try team.ok(.alice, ["record", "delete", "Notes", "r1"])
        try team.put(.alice, "Notes", "r1", type: "Note", set: ["n:int=2"])
        let p = try page(["Notes", "--since", start.token])
        #expect(p.changedNames == ["r1"])
        #expect(p.deleted.isEmpty)
    }

    @Test("--limit 2 pages with moreComing true; following the tokens yields every change exactly once")
    func pages() throws {
        try history()
        try team.put(.alice, "Notes", "r6", type: "Note", set: ["n:int=6"])
        try team.ok(.alice, ["record", "delete", "Notes", "r3"])
        // Expected in all: changed r1 r4 r5 r6, deleted r2 r3.
        var changed = [String](), deleted = [String]()
        var token: String?
        var pages = [Page]()
        repeat {
            let p = try page(["Notes", "--limit", "2"] + (token.map { ["--since", $0] } ?? []))
            #expect(p.changed.count + p.deleted.count <= 2, "a page of --limit 2 has \(p.changed.count + p.deleted.count) changes")
            changed += p.changedNames
            deleted += p.deleted
            token = p.token
            pages.append(p)
            try #require(pages.count <= 10, "moreComing never ends")
        } while pages.last!.moreComing
        #expect(pages.count >= 3, "6 changes in pages of 2 need at least 3 pages")
        #expect(pages.first?.moreComing == true)
        #expect(pages.first.map { $0.changed.count + $0.deleted.count } == 2)
        #expect(changed.sorted() == ["r1", "r4", "r5", "r6"], "changed across pages: \(changed)")
        #expect(deleted.sorted() == ["r2", "r3"], "deleted across pages: \(deleted)")
        // The last token is current.
        let after = try page(["Notes", "--since", try #require(token)])
        #expect(after.changed.isEmpty && after.deleted.isEmpty && !after.moreComing)
    }

    @Test("a malformed change token fails with 65", arguments: ["garbage", "", "Q0NUAQ", "AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA", "!!!"])
    func malformedToken(token: String) throws {
        try team.fails(.alice, ["changes", "Notes", "--since", token], 65)
    }

    @Test("a token with trailing bytes, or changed magic, fails with 65")
    func damagedToken() throws {
        let token = try page(["Notes"]).token
        try team.fails(.alice, ["changes", "Notes", "--since", token + "AA"], 65)
        let magic = (token.first == "Q" ? "R" : "Q") + token.dropFirst()
        try team.fails(.alice, ["changes", "Notes", "--since", String(magic)], 65)
    }

    @Test("a database token given for a zone, or a zone token for a database, fails with 65")
    func tokenOfAnotherKind() throws {
        let database = try databasePage(.alice, "private").token
        try team.fails(.alice, ["changes", "Notes", "--since", database], 65)
        let zone = try page(["Notes"]).token
        try team.fails(.alice, ["changes", "--database", "private", "--since", zone], 65)
    }

    @Test("a token of a deleted zone fails with 66, also once a zone of that name exists again")
    func tokenOfDeletedZone() throws {
        try team.createZone(.alice, "Tmp")
        try team.put(.alice, "Tmp", "t1", type: "Note", set: ["a=1"])
        let token = try page(["Tmp"]).token
        try team.ok(.alice, ["zone", "delete", "Tmp"])
        try team.fails(.alice, ["changes", "Tmp", "--since", token], 66)
        try team.createZone(.alice, "Tmp")
        try team.fails(.alice, ["changes", "Tmp", "--since", token], 66)
    }

    @Test("changes of a missing zone fails with 66")
    func missingZone() throws {
        try team.fails(.alice, ["changes", "Nowhere"], 66)
    }

    @Test("a participant reads the changes of a shared zone; modifier tells who wrote")
    func sharedZoneChanges() throws {
        try team.put(.alice, "Notes", "r1", type: "Note", set: ["n:int=1"], secret: ["s=one"])
        try team.share(.alice, "Notes", with: [(.bob, "read-write")])
        let shared = "Notes@\(Who.alice.email)"
        let first = try page([shared], as: .bob)
        #expect(first.changedNames == ["r1"])
        #expect(json(first.changed.first?["encryptedValues"] as? [String: Any] ?? [:], "s") == .string("one"))
        try team.put(.bob, shared, "b1", type: "Note", set: ["n:int=2"])
        let afterR1 = try page(["Notes", "--limit", "1"]).token
        let second = try page(["Notes", "--since", afterR1])
        #expect(second.changedNames == ["b1"])
        #expect(second.changed.first?["modifier"] as? String == team.id(.bob))
        let bobs = try page([shared, "--since", first.token], as: .bob)
        #expect(bobs.changedNames == ["b1"])
    }

    // MARK: - database changes

    @Test("changes --database private lists the zones that changed and the zones deleted")
    func privateDatabase() throws {
        try team.createZone(.alice, "Work")
        let start = try databasePage(.alice, "private")
        #expect(Set(start.changed) == ["Notes", "Work"], "\(start.changed)")
        #expect(start.deleted.isEmpty)

        try team.put(.alice, "Work", "w1", type: "Note", set: ["a=1"])
        let afterPut = try databasePage(.alice, "private", since: start.token)
        #expect(afterPut.changed == ["Work"])
        #expect(afterPut.deleted.isEmpty)

        try team.ok(.alice, ["zone", "delete", "Notes"])
        let afterDelete = try databasePage(.alice, "private", since: afterPut.token)
        #expect(afterDelete.changed.isEmpty, "\(afterDelete.changed)")
        #expect(afterDelete.deleted.map { $0["zone"] as? String } == ["Notes"], "\(afterDelete.deleted)")

        let nothing = try databasePage(.alice, "private", since: afterDelete.token)
        #expect(nothing.changed.isEmpty && nothing.deleted.isEmpty)
        // Bob's private database has none of Alice's zones.
        #expect(try databasePage(.bob, "private").changed.isEmpty)
    }

    @Test("changes --database shared as a participant: the zone after accepting; deleted after removal")
    func sharedDatabase() throws {
        try team.put(.alice, "Notes", "r1", type: "Note", set: ["a=1"])
        let url = try team.share(.alice, "Notes", with: [(.bob, "read-only")], accept: false)
        let before = try databasePage(.bob, "shared")
        #expect(before.changed.isEmpty, "a share not accepted yet is not in the shared database: \(before.changed)")

        try team.ok(.bob, ["share", "accept", url])
        let accepted = try databasePage(.bob, "shared", since: before.token)
        #expect(accepted.changed == ["Notes@\(team.id(.alice))"], "\(accepted.changed)")
        #expect(accepted.deleted.isEmpty)

        try team.put(.alice, "Notes", "r2", type: "Note", set: ["a=2"])
        let written = try databasePage(.bob, "shared", since: accepted.token)
        #expect(written.changed == ["Notes@\(team.id(.alice))"], "a change in the zone shows: \(written.changed)")

        try team.ok(.alice, ["share", "remove", "Notes", "--participant", "Bob"])
        let removed = try databasePage(.bob, "shared", since: written.token)
        #expect(removed.changed.isEmpty, "\(removed.changed)")
        #expect(removed.deleted.map { $0["zone"] as? String } == ["Notes@\(team.id(.alice))"], "\(removed.deleted)")
        #expect(removed.deleted.first?["reason"] as? String == "removed")
        // Alice's shared database is empty: she owns the zone.
        #expect(try databasePage(.alice, "shared").changed.isEmpty)
    }

    // MARK: - command line

    @Test("ZONE together with --database, or neither, is a bad command line (64)")
    func zoneAndDatabase() throws {
        try team.fails(.alice, ["changes", "Notes", "--database", "private"], 64)
        try team.fails(.alice, ["changes"], 64)
        try team.fails(.alice, ["changes", "--database", "public"], 64)
        try team.fails(.alice, ["changes", "Notes", "--limit", "0"], 64)
    }
}

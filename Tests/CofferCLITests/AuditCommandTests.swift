import Foundation
import Testing

/// `coffer audit`: verifying the store, finding tampering, proving a text is nowhere at rest.
@Suite("coffer audit")
struct AuditCommandTests {
    let team: Team

    init() throws {
        team = try Team([.alice, .bob])
        try team.createZone(.alice, "Notes")
        try team.put(.alice, "Notes", "n1", type: "Note", set: ["title=First"], secret: ["pin=1111"])
        try team.put(.alice, "Notes", "victim", type: "Note", set: ["title=Original", "count:int=7"], secret: ["pin=2222"])
        try team.put(.alice, "Notes", "gone", type: "Note", set: ["title=Deleted"])
        try team.ok(.alice, ["record", "delete", "Notes", "gone"])
    }

    /// `audit ARGS --json` as `who`, with its exit status.
    func audit(_ args: [String] = [], as who: Who = .alice, sourceLocation: SourceLocation = #_sourceLocation) throws -> (Int32, [String: Any]) {
        let r = try team.run(who, ["audit", "--json"] + args, sourceLocation: sourceLocation)
        #expect(r.err.isEmpty, "unexpected stderr\n\(r)", sourceLocation: sourceLocation)
        let object = try jsonObject(r, sourceLocation: sourceLocation)
        #expect(object["findings"] is [Any], "no findings array: \(object)", sourceLocation: sourceLocation)
        #expect(object["checked"] is [String: Any], "no checked counts: \(object)", sourceLocation: sourceLocation)
        return (r.status, object)
    }

    func checked(_ object: [String: Any]) -> [String: Any] { object["checked"] as? [String: Any] ?? [:] }

    @Test("--plaintext with an empty text is a bad command line (64), not a clean audit")
    func emptyPlaintext() throws {
        try team.fails(.alice, ["audit", "--plaintext", ""], 64, mentioning: "plaintext")
    }

    @Test("a clean store: exit 0, findings [] and the counts checked")
    func clean() throws {
        let (status, report) = try audit()
        #expect(status == 0)
        #expect(JSON(report["findings"]) == .array([]))
        let counts = checked(report)
        #expect(json(counts, "zones") == .int(1), "\(counts)")
        #expect(json(counts, "records") == .int(2), "\(counts)")
        #expect(json(counts, "commits") == .int(4), "three saves and a delete: \(counts)")
        #expect(json(counts, "shares") == .int(0), "\(counts)")

        let text = try team.run(.alice, ["audit"])
        expectSuccess(text)
        #expect(!text.out.isEmpty)
    }

    @Test("audit counts what the acting user can open: a participant checks the shared zone")
    func participantAudit() throws {
        try team.share(.alice, "Notes", with: [(.bob, "read-only")])
        let (status, report) = try audit(as: .bob)
        #expect(status == 0)
        #expect(JSON(report["findings"]) == .array([]))
        #expect(json(checked(report), "zones") == .int(1), "\(checked(report))")
        #expect(json(checked(report), "records") == .int(2), "\(checked(report))")
        #expect(json(checked(report), "shares") == .int(1), "\(checked(report))")
    }

    @Test("a plain value edited in the SQLite file: audit exits 1 and names the record; record get of it fails with 65")
    func tamperedPlainValue() throws {
        let before = try SQLiteShell.run(team.store, "SELECT plain FROM record WHERE name = 'victim';")
        #expect(before.contains("Original"), "the plain column is not where the test expects it: \(before)")
        try SQLiteShell.run(team.store, "UPDATE record SET plain = replace(plain, 'Original', 'Forged') WHERE name = 'victim';")
        let after = try SQLiteShell.run(team.store, "SELECT plain FROM record WHERE name = 'victim';")
        try #require(after.contains("Forged") && !after.contains("Original"), "the UPDATE did not change the value: \(after)")

        let (status, report) = try audit()
        #expect(status == 1)
        let findings = objects(report, "findings")
        #expect(findings.count == 1, "\(findings)")
        #expect(findings.first?["subject"] as? String == "victim", "\(findings)")
        #expect(findings.first?["zone"] as? String == "Notes", "\(findings)")

        let text = try team.run(.alice, ["audit"])
        #expect(text.status == 1, "\(text)")
        #expect(text.out.contains("victim"), "the text report does not name the record\n\(text)")

        let get = try team.run(.alice, ["record", "get", "Notes", "victim"])
        expectFailure(get, 65)
        #expect(!get.err.contains("Forged"))
        // The other record is fine.
        #expect(try team.get(.alice, "Notes", "n1")["name"] as? String == "n1")
        // Nor does the forged value appear in a query or the changes feed.
        let query = try team.run(.alice, ["record", "query", "Notes", "--type", "Note", "--where", "title = Forged", "--json"])
        #expect(!query.out.contains("Forged"), "a tampered record is returned by query\n\(query)")
        let changes = try team.run(.alice, ["changes", "Notes", "--json"])
        #expect(!changes.out.contains("Forged"), "a tampered record is returned by changes\n\(changes)")
    }

    @Test("a plain value set back to its original: audit is clean again")
    func tamperedAndRestored() throws {
        try SQLiteShell.run(team.store, "UPDATE record SET plain = replace(plain, 'Original', 'Forged') WHERE name = 'victim';")
        #expect(try audit().0 == 1)
        try SQLiteShell.run(team.store, "UPDATE record SET plain = replace(plain, 'Forged', 'Original') WHERE name = 'victim';")
        let (status, report) = try audit()
        #expect(status == 0)
        #expect(JSON(report["findings"]) == .array([]))
        #expect(json(try team.get(.alice, "Notes", "victim")["values"] as? [String: Any] ?? [:], "title") == .string("Original"))
    }

    @Test("a sealed value edited in the SQLite file: audit exits 1 and names the record")
    func tamperedSealedValue() throws {
        let hex = try SQLiteShell.run(team.store, "SELECT hex(sealed) FROM record WHERE name = 'victim';")
            .trimmingCharacters(in: .whitespacesAndNewlines)
        try #require(hex.count > 64, "victim has no sealed bytes: '\(hex)'")
        // Flip one bit in the middle of the ciphertext.
        var digits = Array(hex)
        let i = digits.count / 2
        digits[i] = digits[i] == "0" ? "1" : "0"
        try SQLiteShell.run(team.store, "UPDATE record SET sealed = X'\(String(digits))' WHERE name = 'victim';")
        let after = try SQLiteShell.run(team.store, "SELECT hex(sealed) FROM record WHERE name = 'victim';")
        try #require(after.trimmingCharacters(in: .whitespacesAndNewlines) == String(digits), "the UPDATE did not take")
        let (status, report) = try audit()
        #expect(status == 1)
        #expect(objects(report, "findings").first?["subject"] as? String == "victim", "\(report)")
        try team.fails(.alice, ["record", "get", "Notes", "victim"], 65)
    }

    @Test("--plaintext TEXT: a value saved with --secret is nowhere at rest (0); a plain value is found (1)")
    func plaintext() throws {
        let secret = "Secret-Canary-\(UUID().uuidString)"
        let plain = "Plain-Canary-\(UUID().uuidString)"
        try team.put(.alice, "Notes", "c1", type: "Canary", set: ["visible=\(plain)"], secret: ["hidden=\(secret)"])

        let (okStatus, okReport) = try audit(["--plaintext", secret])
        #expect(okStatus == 0)
        #expect(JSON(okReport["findings"]) == .array([]))
        #expect(json(checked(okReport), "plaintexts") == .int(1))

        let (foundStatus, foundReport) = try audit(["--plaintext", plain])
        #expect(foundStatus == 1)
        let findings = objects(foundReport, "findings")
        #expect(findings.count >= 1, "\(foundReport)")
        #expect(findings.allSatisfy { $0["kind"] as? String == "plaintext" }, "\(findings)")
        #expect(!findings.description.contains(plain), "the finding repeats the text it looked for")

        let (bothStatus, _) = try audit(["--plaintext", secret, "--plaintext", plain])
        #expect(bothStatus == 1)

        let text = try team.run(.alice, ["audit", "--plaintext", plain])
        #expect(text.status == 1)
        let quiet = try team.run(.alice, ["audit", "--plaintext", secret])
        expectSuccess(quiet)
    }
    @Test("audit --heads and --compare: users shown the same log agree (0); a fork, each shown another history, is found (1); an edited heads file is refused (65)")
    func headsAndCompare() throws {
        try team.share(.alice, "Notes", with: [(.bob, "read-write")])
        let heads = team.sandbox.path("alice.heads")
        let wrote = try team.json(.alice, ["audit", "--heads", "--output", heads])
        #expect(json(wrote, "zones") == .int(1), "\(wrote)")
        let same = try team.json(.bob, ["audit", "--compare", heads])
        #expect(json(same, "compared") == .int(1) && JSON(same["findings"]) == .array([]) && json(same, "ok") == .bool(true), "\(same)")
        #expect(json(same, "user") == .string(team.id(.alice)))
        try team.fails(.alice, ["audit", "--heads", "--output", heads], 73, mentioning: "already exists")
        try team.fails(.alice, ["audit", "--output", heads], 64, mentioning: "--heads")
        try team.fails(.alice, ["audit", "--heads", "--compare", heads], 64, mentioning: "separate")
        try team.fails(.bob, ["audit", "--compare", team.sandbox.path("missing.heads")], 66)

        // A fork: two copies of the store, and each user writes into one of them.
        try SQLiteShell.run(team.store, "PRAGMA wal_checkpoint(TRUNCATE);")
        let one = team.sandbox.path("one.sqlite"), two = team.sandbox.path("two.sqlite")
        try FileManager.default.copyItem(atPath: team.store, toPath: one)
        try FileManager.default.copyItem(atPath: team.store, toPath: two)
        func run(_ who: Who, _ args: [String], in store: String) throws -> CofferResult {
            try team.run(who, args + ["--store", store], storeFlag: false)
        }
        expectSuccess(try run(.alice, ["record", "put", "Notes", "fork", "--type", "Note", "--set", "title=one"], in: one))
        expectSuccess(try run(.bob, ["record", "put", "Notes@\(team.id(.alice))", "fork", "--type", "Note", "--set", "title=two"], in: two))
        let bobHeads = try run(.bob, ["audit", "--heads"], in: two)
        expectSuccess(bobHeads)
        let bobFile = team.sandbox.path("bob.heads")
        try Data(bobHeads.out.utf8).write(to: URL(fileURLWithPath: bobFile))
        let forked = try run(.alice, ["audit", "--compare", bobFile, "--json"], in: one)
        #expect(forked.status == 1, "\(forked)")
        let report = try jsonObject(forked)
        let findings = objects(report, "findings")
        #expect(findings.count == 1 && json(findings.first ?? [:], "kind") == .string("log") && json(findings.first ?? [:], "zone") == .string("Notes"),
                "\(report)")
        #expect((findings.first?["message"] as? String)?.contains("forked") == true, "\(report)")

        // One changed digit: the signature no longer verifies.
        let edited = team.sandbox.path("edited.heads")
        try Data(bobHeads.out.replacingOccurrences(of: "\"seq\" : ", with: "\"seq\" : 1").utf8).write(to: URL(fileURLWithPath: edited))
        let refused = try run(.alice, ["audit", "--compare", edited], in: one)
        expectFailure(refused, 65, mentioning: "signature")
    }

    /// The uid of `zone` in the store, as lowercase hex.
    func zoneUID(_ zone: String) throws -> String {
        let uid = try SQLiteShell.run(team.store, "SELECT lower(hex(uid)) FROM zone WHERE name = '\(zone)';").trimmingCharacters(in: .whitespacesAndNewlines)
        #expect(uid.count == 32, "\(uid)")
        return uid
    }

    @Test("a zone of the user's marks that the store no longer shows (its rows deleted) is a finding (1) naming its uid, not a clean audit")
    func markedZoneGone() throws {
        let uid = try zoneUID("Notes")
        try SQLiteShell.run(team.store, "PRAGMA foreign_keys = ON; DELETE FROM zone WHERE name = 'Notes';")
        #expect(try SQLiteShell.run(team.store, "SELECT count(*) FROM zone;").trimmingCharacters(in: .whitespacesAndNewlines) == "0")
        let (status, report) = try audit()
        #expect(status == 1, "\(report)")
        let findings = objects(report, "findings")
        #expect(findings.count == 1 && json(findings.first ?? [:], "subject") == .string("zone \(uid)")
                && json(findings.first ?? [:], "owner") == .string(team.id(.alice)) && json(findings.first ?? [:], "kind") == .string("log"), "\(report)")
        #expect(json(checked(report), "marks") == .int(1), "\(report)")
        let text = try team.run(.alice, ["audit"])
        #expect(text.status == 1 && text.out.contains(uid) && !text.out.contains("No problems found"), "\(text)")
    }

    @Test("zones that left the user's view on purpose are no findings: one they deleted, one whose share removed them")
    func zonesLeftOnPurpose() throws {
        try team.createZone(.alice, "Tmp")
        try team.put(.alice, "Tmp", "t1", type: "Note", set: ["title=Temporary"])
        try team.ok(.alice, ["zone", "delete", "Tmp"])
        try team.share(.alice, "Notes", with: [(.bob, "read-only")])
        #expect(try audit(as: .bob).0 == 0)
        try team.ok(.alice, ["share", "remove", "Notes", "--participant", team.id(.bob)])
        let (aliceStatus, aliceReport) = try audit()
        #expect(aliceStatus == 0, "\(aliceReport)")
        let (bobStatus, bobReport) = try audit(as: .bob)
        #expect(bobStatus == 0 && JSON(bobReport["findings"]) == .array([]), "\(bobReport)")
        #expect(json(checked(bobReport), "marks") == .int(1), "\(bobReport)")
    }

    @Test("a shared zone its owner deleted is no finding for a participant (0), whose next audit skips it; reading it says its owner deleted it (66)")
    func zoneDeletedByItsOwner() throws {
        try team.share(.alice, "Notes", with: [(.bob, "read-only")])
        try team.ok(.bob, ["record", "list", "Notes@\(team.id(.alice))"])
        try team.ok(.alice, ["zone", "delete", "Notes", "--yes"])
        let (status, report) = try audit(as: .bob)
        #expect(status == 0 && JSON(report["findings"]) == .array([]), "\(report)")
        #expect(json(checked(report), "marks") == .int(1), "\(report)")
        let (again, later) = try audit(as: .bob)
        #expect(again == 0 && json(checked(later), "marks") == .int(0), "the closed mark is not looked for again: \(later)")
        try team.fails(.bob, ["record", "list", "Notes@\(team.id(.alice))"], 66, mentioning: "was deleted by its owner")
    }

    @Test("audit --compare: a zone of the file that the store does not show is a finding (1); one whose log here says it is not yours is not")
    func compareZoneNotShown() throws {
        try team.createZone(.alice, "Private")
        try team.share(.alice, "Notes", with: [(.bob, "read-write")])
        let heads = team.sandbox.path("alice.heads")
        try team.ok(.alice, ["audit", "--heads", "--output", heads])
        let fine = try team.json(.bob, ["audit", "--compare", heads])
        #expect(json(fine, "ok") == .bool(true) && json(fine, "compared") == .int(1) && json(fine, "notHere") == .int(1), "\(fine)")

        let uid = try zoneUID("Notes")
        try SQLiteShell.run(team.store, "PRAGMA foreign_keys = ON; DELETE FROM zone WHERE name = 'Notes';")
        let r = try team.run(.bob, ["audit", "--compare", heads, "--json"])
        #expect(r.status == 1, "\(r)")
        let report = try jsonObject(r)
        let findings = objects(report, "findings")
        #expect(findings.contains { json($0, "subject") == .string("zone \(uid)") && ($0["message"] as? String)?.contains("up to entry") == true },
                "\(report)")
        #expect(report["checked"] is [String: Any], "\(report)")
        let text = try team.run(.alice, ["audit", "--compare", heads])
        #expect(text.status == 1 && text.out.contains(uid) && !text.out.contains("No fork found"), "\(text)")
    }
}

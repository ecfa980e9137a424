import Foundation
import Testing

/// `record query` and `changes` with records that fail verification (edited in the SQLite file):
/// what verified is printed, then exit 65 with an error naming the records left out;
/// `--allow-refused` keeps exit 0 and warns.
@Suite("records that fail verification")
struct RefusedRecordsCommandTests {
    let team: Team

    init() throws {
        team = try Team([.alice])
        try team.createZone(.alice, "Notes")
        try team.put(.alice, "Notes", "n1", type: "Note", set: ["title=Fine"], secret: ["pin=1111"])
        try team.put(.alice, "Notes", "victim", type: "Note", set: ["title=Original"], secret: ["pin=2222"])
    }

    /// Edits the plain values of the records named `names` in the store file, as an attacker with the file could.
    func tamper(_ names: [String], sourceLocation: SourceLocation = #_sourceLocation) throws {
        let list = names.map { "'\($0)'" }.joined(separator: ", ")
        try SQLiteShell.run(team.store, "UPDATE record SET plain = replace(plain, 'Original', 'Forged') WHERE name IN (\(list));",
                            sourceLocation: sourceLocation)
        let after = try SQLiteShell.run(team.store, "SELECT count(*) FROM record WHERE plain LIKE '%Forged%';", sourceLocation: sourceLocation)
        try #require(after.trimmingCharacters(in: .whitespacesAndNewlines) == String(names.count), "the UPDATE did not take",
                     sourceLocation: sourceLocation)
    }

    /// stderr is exactly one `error:` line, which names `names` and says exit 65.
    func expectRefusedError(_ r: CofferResult, naming names: [String], sourceLocation: SourceLocation = #_sourceLocation) {
        #expect(r.status == 65, "expected exit 65\n\(r)", sourceLocation: sourceLocation)
        #expect(isOneErrorLine(r.err, json: r.arguments.contains("--json") ? 65 : nil), "expected one error line\n\(r)", sourceLocation: sourceLocation)
        for name in names {
            #expect(r.err.contains("'\(name)'"), "the error does not name \(name)\n\(r)", sourceLocation: sourceLocation)
        }
        #expect(r.err.contains("--allow-refused"), "the error does not say how to accept it\n\(r)", sourceLocation: sourceLocation)
        #expect(!r.out.contains("Forged") && !r.err.contains("Forged"), "the forged value is shown\n\(r)", sourceLocation: sourceLocation)
    }

    @Test("record query: the records that verified on stdout, then exit 65 naming the refused one")
    func queryText() throws {
        try tamper(["victim"])
        let r = try team.run(.alice, ["record", "query", "Notes", "--type", "Note"])
        expectRefusedError(r, naming: ["victim"])
        #expect(r.err.contains("1 record failed verification"), "\(r)")
        #expect(r.outLines.count == 1 && r.outLines.first?.hasPrefix("n1 ") == true, "\(r)")
    }

    @Test("record query --json: stdout is complete, valid JSON with the refused names; exit 65")
    func queryJSON() throws {
        try tamper(["victim"])
        let r = try team.run(.alice, ["record", "query", "Notes", "--type", "Note", "--json"])
        expectRefusedError(r, naming: ["victim"])
        let object = try jsonObject(r)
        #expect(recordNames(objects(object, "records")) == ["n1"])
        #expect(objects(object, "refused").map { $0["name"] as? String } == ["victim"], "\(object)")
    }

    @Test("record query --allow-refused: exit 0, the same stdout, a warning naming the record on stderr")
    func queryAllowed() throws {
        try tamper(["victim"])
        for json in [false, true] {
            let refused = try team.run(.alice, ["record", "query", "Notes", "--type", "Note"] + (json ? ["--json"] : []))
            let allowed = try team.run(.alice, ["record", "query", "Notes", "--type", "Note", "--allow-refused"] + (json ? ["--json"] : []))
            expectSuccessWithNotes(allowed)
            #expect(allowed.out == refused.out, "\(allowed)")
            #expect(allowed.err.hasPrefix("warning: ") && allowed.err.contains("'victim'"), "\(allowed)")
        }
        // Nothing refused: no warning, no error.
        expectSuccess(try team.run(.alice, ["record", "query", "Notes", "--type", "Note", "--where", "title = Fine"]))
    }

    @Test("many refused records: the error names a few, then counts the rest")
    func manyRefused() throws {
        let names = (1...5).map { "bad\($0)" }
        for name in names { try team.put(.alice, "Notes", name, type: "Note", set: ["title=Original"]) }
        try tamper(names + ["victim"])
        let r = try team.run(.alice, ["record", "query", "Notes", "--type", "Note"])
        expectRefusedError(r, naming: ["bad1", "bad2", "bad3"])
        #expect(r.err.contains("6 records failed verification") && r.err.contains("and 3 more"), "\(r)")
        #expect(!r.err.contains("'victim'"), "more names than a few\n\(r)")
    }

    @Test("changes: the page with its token, then exit 65 naming the refused record; --allow-refused exits 0")
    func changes() throws {
        try tamper(["victim"])
        let text = try team.run(.alice, ["changes", "Notes"])
        expectRefusedError(text, naming: ["victim"])
        #expect(text.out.contains("changed n1 ") && text.outLines.contains { $0.hasPrefix("token: ") }, "\(text)")

        let json = try team.run(.alice, ["changes", "Notes", "--json"])
        expectRefusedError(json, naming: ["victim"])
        let object = try jsonObject(json)
        #expect(recordNames(objects(object, "changed")) == ["n1"])
        #expect(object["refused"] as? [String] == ["victim"], "\(object)")
        #expect(!((object["token"] as? String) ?? "").isEmpty)

        let allowed = try team.run(.alice, ["changes", "Notes", "--json", "--allow-refused"])
        expectSuccessWithNotes(allowed)
        #expect(allowed.out == json.out)
        #expect(allowed.err.hasPrefix("warning: ") && allowed.err.contains("'victim'"), "\(allowed)")

        try team.fails(.alice, ["changes", "--database", "private", "--allow-refused"], 64, mentioning: "--allow-refused")
    }

    @Test("changes --follow stops with 65 after the page that left a record out; with --allow-refused it keeps following")
    func follow() throws {
        try tamper(["victim"])
        let r = try team.run(.alice, ["changes", "Notes", "--follow", "--json"])
        expectRefusedError(r, naming: ["victim"])
        let pages = try jsonLines(r)
        #expect(pages.count == 1 && recordNames(objects(pages[0], "changed")) == ["n1"], "\(r)")

        // Interrupted after a few seconds: it was still following (130), having warned.
        let executable = try CofferProcess.executableURL().path
        let following = try team.sandbox.shell(
            "timeout --preserve-status -s INT 3 \"$0\" changes Notes --follow --allow-refused --json --vault \"$1\" --store \"$2\"; echo \"exit $?\" >&2",
            [executable, team.vault(.alice), team.store], env: withPassphrase)
        #expect(following.err.contains("warning: ") && following.err.contains("'victim'"), "\(following)")
        #expect(following.err.hasSuffix("exit 130\n"), "it stopped before it was interrupted\n\(following)")
        #expect(!following.err.contains("error:"), "\(following)")
        #expect(recordNames(objects(try jsonLines(following).first ?? [:], "changed")) == ["n1"], "\(following)")
    }
}

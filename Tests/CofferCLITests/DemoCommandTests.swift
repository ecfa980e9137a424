import Foundation
import Testing

/// `coffer demo [--dir DIR]`: the narrated two-user walkthrough.
@Suite("coffer demo")
struct DemoCommandTests {
    let sandbox: Sandbox

    init() throws { sandbox = try Sandbox() }

    @Test("coffer demo exits 0, says Demo finished, runs through a server of its own, and cleans up its temporary folder")
    func demoRuns() throws {
        let tmp = sandbox.path("tmp")
        try FileManager.default.createDirectory(atPath: tmp, withIntermediateDirectories: true)
        let r = try sandbox.coffer(["demo"], env: ["TMPDIR": tmp])
        expectSuccess(r)
        #expect(r.out.contains("Demo finished"), "\(r)")
        #expect(r.outLines.last?.hasPrefix("Demo finished") == true, "\(r)")
        #expect(r.out.contains("[1] "), "the steps are not narrated\n\(r)")
        #expect(r.out.contains("coffer serve runs on loopback (http://127.0.0.1:"), "\(r)")
        #expect(!r.out.contains("Files kept"))
        #expect(try FileManager.default.contentsOfDirectory(atPath: tmp).isEmpty, "the demo left files in TMPDIR")
        // The demo never writes to the user's data folder.
        #expect(!sandbox.exists(sandbox.dataHome.appendingPathComponent("coffer").path))
    }

    @Test("coffer demo --dir D keeps its files in D")
    func demoKeepsFiles() throws {
        let dir = sandbox.path("demo-files")
        let r = try sandbox.coffer(["demo", "--dir", dir])
        expectSuccess(r)
        #expect(r.out.contains("Demo finished"), "\(r)")
        #expect(r.out.contains(dir), "the folder is not named\n\(r)")
        // Each user's folder holds their vault and card; the server's, its store; nothing is shared.
        for name in ["alice/alice.coffer", "bob/bob.coffer", "carol/carol.coffer", "alice/alice.card.json", "bob/bob.card.json", "server/store.sqlite"] {
            #expect(sandbox.exists(dir + "/" + name), "\(name) is missing from \(dir)")
        }
        #expect(try FileManager.default.contentsOfDirectory(atPath: dir + "/bob").allSatisfy { !$0.hasSuffix(".sqlite") })
        #expect(try posixMode(dir + "/alice/alice.coffer") == 0o600)

        // The kept cards are real: another store accepts them.
        let store = sandbox.path("mine.sqlite")
        let added = try sandbox.coffer(["contact", "add", dir + "/bob/bob.card.json", "--store", store, "--json"])
        expectSuccess(added)
        let contact = try jsonObject(added)["contact"] as? [String: Any]
        #expect(contact?["name"] as? String == "Bob")
        #expect(contact?["email"] as? String == "bob@example.com")
        // The server's kept store holds every user's card: each published theirs.
        let list = try sandbox.coffer(["contact", "list", "--json", "--store", dir + "/server/store.sqlite"])
        expectSuccess(list)
        let names = (try jsonObject(list)["contacts"] as? [[String: Any]])?.compactMap { $0["name"] as? String }.sorted()
        #expect(names == ["Alice", "Bob", "Carol"])
    }

    @Test("coffer demo --dir D refuses a folder that already holds a demo, with one error line")
    func demoRefusesUsedFolder() throws {
        let dir = sandbox.path("demo-files")
        expectSuccess(try sandbox.coffer(["demo", "--dir", dir]))
        let before = try sandbox.read(dir + "/alice/alice.coffer")
        let again = try sandbox.coffer(["demo", "--dir", dir])
        expectError(again, 73)
        #expect(try sandbox.read(dir + "/alice/alice.coffer") == before)
    }
}

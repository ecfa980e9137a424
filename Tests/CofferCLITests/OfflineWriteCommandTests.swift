import CofferTestSupport
import Foundation
import Testing
#if canImport(Glibc)
import Glibc
#endif

/// Writes while the server is away, as users meet them: kept in the replica as pending changes
/// (a note on stderr, `"pending": true`), read back at once, pushed by `coffer sync` (or the next
/// write that reaches the server), merged with what others wrote meanwhile, and kept as
/// conflicts (`coffer conflict`) where both changed the same field.
@Suite("offline writes: pending changes, sync, conflicts")
struct OfflineWriteCommandTests {
    /// The address a server listens on (`127.0.0.1:PORT`), to start it again there.
    static func address(_ server: ServerProcess) -> String { String(server.url.dropFirst("http://".count)) }

    /// Runs a write while the server is away: it succeeds, saying on stderr that it was kept.
    static func offline(_ team: Team, _ who: Who, _ arguments: [String], sourceLocation: SourceLocation = #_sourceLocation) throws {
        let r = try team.run(who, arguments)
        #expect(r.status == 0 && r.err.contains("offline: 1 change saved locally, not yet synced"), "\(r)", sourceLocation: sourceLocation)
    }

    /// A `record list --json` page without the zone's label (which names the owner for a participant).
    static func withoutZones(_ list: [String: Any]) -> JSON {
        JSON((list["records"] as? [[String: Any]])?.map { $0.filter { $0.key != "zone" } })
    }

    /// The server's stores: an SQLite file, and a PostgreSQL database unless those tests are left out.
    static let serverStores = ScratchDatabase.enabled ? ["sqlite", "postgres"] : ["sqlite"]

    @Test("two laptops, one server: Alice writes offline while Bob writes; after the server returns both converge, with conflicts kept and resolved",
          arguments: serverStores)
    func twoLaptops(_ backend: String) async throws {
        let sandbox = try Sandbox()
        let database = backend == "postgres" ? try ScratchDatabase(prefix: "coffer_laptops") : nil
        defer { database?.drop() }
        let store = database?.url ?? sandbox.path("server.sqlite")
        var server = try await ServerProcess.start(store: store, in: sandbox)
        defer { Task { [server] in await server.stop(SIGKILL) } }
        let team = try Team([.alice, .bob], sandbox: sandbox, server: server.url)
        try team.createZone(.alice, "Notes")
        for name in ["n1", "n2", "n3"] { try team.put(.alice, "Notes", name, type: "Note", set: ["title=\(name)"], secret: ["body=body of \(name)"]) }
        try team.share(.alice, "Notes", with: [(.bob, "read-write")])
        try team.ok(.bob, ["sync"])
        await server.stop(SIGKILL)

        // Alice, offline: a new record, an edit of a field Bob edits too, an edit of one he does not, a delete.
        let put = try team.run(.alice, team.putArguments("Notes", "n4", type: "Note", set: ["title=made offline"], secret: ["body=secret offline"]) + ["--json"])
        #expect(put.status == 0, "\(put)")
        #expect(put.err.contains("offline: 1 change saved locally, not yet synced"))
        #expect(try jsonObject(put)["pending"] as? Bool == true)
        try Self.offline(team, .alice, ["record", "put", "Notes", "n1", "--type", "Note", "--set", "title=alice's title", "--merge"])
        try Self.offline(team, .alice, ["record", "put", "Notes", "n2", "--type", "Note", "--secret", "body=alice's body", "--merge"])
        let deleted = try team.run(.alice, ["record", "delete", "Notes", "n3", "--json"])
        #expect(deleted.status == 0, "\(deleted)")
        #expect(try jsonObject(deleted)["pending"] as? Bool == true)
        // Read back at once, from the replica.
        #expect(json(try team.json(.alice, ["record", "get", "Notes", "n4", "--offline"]), "encryptedValues") == JSON(["body": "secret offline"]))
        try team.fails(.alice, ["record", "get", "Notes", "n3", "--offline"], 66)
        let status = try jsonObject(try team.run(.alice, ["status", "--json"]))
        let zones = try #require(status["zones"] as? [[String: Any]])
        #expect(zones.first?["pending"] as? Int == 4)
        #expect(status["serverReachable"] as? Bool == false)
        // The change feed, read from the replica: confirmed changes under a confirmed token, the
        // pending ones flagged.
        let feed = try team.json(.alice, ["changes", "Notes", "--offline"])
        #expect((feed["pending"] as? [[String: Any]])?.map { $0["name"] as? String } == ["n1", "n2", "n4"])
        #expect(feed["pendingDeleted"] as? [String] == ["n3"])
        #expect((feed["changed"] as? [[String: Any]])?.map { $0["name"] as? String } == ["n1", "n2", "n3"])
        let feedText = try team.run(.alice, ["changes", "Notes", "--offline"])
        #expect(feedText.out.contains("pending deleted n3, not synced yet"), "\(feedText)")
        // What changes who holds which key needs the server.
        try team.fails(.alice, ["share", "remove", "Notes", "--participant", Who.bob.email], 69, mentioning: "needs the server")
        try team.fails(.alice, ["sync"], 69)

        // The server returns (the same address); Bob writes first: n1's title, n2's title.
        server = try await ServerProcess.start(store: store, in: sandbox, listen: Self.address(server))
        try team.ok(.bob, ["record", "put", "Notes@\(Who.alice.email)", "n1", "--type", "Note", "--set", "title=bob's title", "--merge"])
        try team.ok(.bob, ["record", "put", "Notes@\(Who.alice.email)", "n2", "--type", "Note", "--set", "title=bob's n2", "--merge"])

        let sync = try team.run(.alice, ["sync", "--json"])
        #expect(sync.status == 0, "conflicts are counted, not failures: \(sync)")
        let report = try jsonObject(sync)
        #expect((report["conflicts"] as? [[String: Any]])?.map { $0["name"] as? String } == ["n1"])
        #expect((report["pushed"] as? [[String: Any]])?.first?["changes"] as? Int == 3, "n4, n2 merged, n3 deleted")
        // n2 merged: Bob's title and Alice's body; n1 keeps the server's (Bob's) title.
        for who in [Who.alice, .bob] {
            try team.ok(who, ["sync"])
            let zone = who == .alice ? "Notes" : "Notes@\(Who.alice.email)"
            let n2 = try team.json(who, ["record", "get", zone, "n2"])
            #expect(json(n2, "values") == JSON(["title": "bob's n2"]))
            #expect(json(n2, "encryptedValues") == JSON(["body": "alice's body"]))
            #expect(json(try team.json(who, ["record", "get", zone, "n1"]), "values") == JSON(["title": "bob's title"]))
            #expect(json(try team.json(who, ["record", "get", zone, "n4"]), "encryptedValues") == JSON(["body": "secret offline"]))
            try team.fails(who, ["record", "get", zone, "n3"], 66)
        }
        // The conflict: both versions, with authors and dates; resolved with Alice's.
        let list = try team.json(.alice, ["conflict", "list"])
        let conflict = try #require((list["conflicts"] as? [[String: Any]])?.first)
        #expect(conflict["name"] as? String == "n1")
        #expect((conflict["server"] as? [String: Any])?["modifier"] as? String == team.id(.bob))
        #expect((conflict["local"] as? [String: Any])?["modifier"] as? String == team.id(.alice))
        let shown = try team.run(.alice, ["conflict", "show", "Notes", "n1"])
        #expect(shown.status == 0 && shown.out.contains("bob's title") && shown.out.contains("alice's title"), "\(shown)")
        try team.ok(.alice, ["conflict", "resolve", "Notes", "n1", "--take", "local"])
        #expect((try team.json(.alice, ["conflict", "list"])["conflicts"] as? [Any])?.isEmpty == true)
        try team.ok(.bob, ["sync"])
        #expect(json(try team.json(.bob, ["record", "get", "Notes@\(Who.alice.email)", "n1"]), "values") == JSON(["title": "alice's title"]))
        // Both replicas hold the same records and tags, and audit clean.
        let alices = try team.json(.alice, ["record", "list", "Notes"])
        let bobs = try team.json(.bob, ["record", "list", "Notes@\(Who.alice.email)"])
        #expect(Self.withoutZones(alices) == Self.withoutZones(bobs))
        #expect((alices["records"] as? [Any])?.count == 3)
        try team.ok(.alice, ["audit"])
        try team.ok(.bob, ["audit"])
        #expect((try jsonObject(try team.run(.alice, ["status", "--json"]))["zones"] as? [[String: Any]])?.first?["pending"] as? Int == 0)
    }

    @Test("a writer made read-only while offline: the change is refused at sync (77), kept, and shown by status")
    func refusedWhileOffline() async throws {
        let sandbox = try Sandbox()
        var server = try await ServerProcess.start(store: sandbox.path("server.sqlite"), in: sandbox)
        defer { Task { [server] in await server.stop(SIGKILL) } }
        let team = try Team([.alice, .bob], sandbox: sandbox, server: server.url)
        try team.createZone(.alice, "Notes")
        try team.put(.alice, "Notes", "n1", type: "Note", set: ["title=one"])
        try team.share(.alice, "Notes", with: [(.bob, "read-write")])
        try team.ok(.bob, ["sync"])
        await server.stop(SIGKILL)
        try Self.offline(team, .bob, team.putArguments("Notes@\(Who.alice.email)", "b1", type: "Note", set: ["title=bob offline"]))
        server = try await ServerProcess.start(store: sandbox.path("server.sqlite"), in: sandbox, listen: Self.address(server))
        try team.ok(.alice, ["share", "permission", "Notes", "--participant", Who.bob.email, "--permission", "read-only"])
        let sync = try team.run(.bob, ["sync", "--json"])
        #expect(sync.status == 77, "\(sync)")
        #expect((try jsonObject(sync)["refused"] as? [[String: Any]])?.first?["name"] as? String == "b1")
        let status = try team.json(.bob, ["status"])
        #expect((status["zones"] as? [[String: Any]])?.first?["refused"] as? Int == 1)
        try team.fails(.alice, ["record", "get", "Notes", "b1"], 66)
        // Bob's change stays readable, flagged.
        let kept = try team.run(.bob, ["record", "get", "Notes@\(Who.alice.email)", "b1", "--json"])
        #expect(kept.status == 0 && kept.err.contains("refused"), "\(kept)")
        let record = try jsonObject(kept)
        #expect(record["refused"] as? Bool == true)
        #expect(json(record, "values") == JSON(["title": "bob offline"]))
        // And exportable: flagged, beside the zone's records.
        func exported(_ arguments: [String]) throws -> [[String: Any]] {
            let r = try team.run(.bob, ["record", "export"] + arguments)
            #expect(r.status == 0, "\(r)")
            return try r.out.split(separator: "\n").map { try #require(try JSONSerialization.jsonObject(with: Data($0.utf8)) as? [String: Any]) }
        }
        let lines = try exported(["Notes@\(Who.alice.email)"])
        #expect(lines.map { $0["name"] as? String } == ["b1", "n1"])
        #expect(lines.map { $0["refused"] as? Bool } == [true, nil])

        // The zone deleted upstream: dropped from Bob's replica at his next sync, which keeps
        // his refused change, still readable and exportable (alone, with a warning).
        try team.ok(.alice, ["zone", "delete", "Notes", "--yes"])
        _ = try team.run(.bob, ["sync"])
        let after = try team.run(.bob, ["record", "get", "Notes@\(Who.alice.email)", "b1", "--json"])
        #expect(after.status == 0, "\(after)")
        #expect(json(try jsonObject(after), "values") == JSON(["title": "bob offline"]))
        let alone = try team.run(.bob, ["record", "export", "Notes@\(Who.alice.email)"])
        #expect(alone.status == 0 && alone.err.contains("only your refused changes are exported"), "\(alone)")
        #expect(alone.out.split(separator: "\n").count == 1 && alone.out.contains(#""refused":true"#), "\(alone)")
        let folder = sandbox.path("all")
        let all = try team.json(.bob, ["record", "export", "--all", "--output", folder])
        #expect(all["records"] as? Int == 1, "\(all)")
        // A file of refused changes imports as records again (the flags are read past).
        let file = sandbox.path("refused.jsonl")
        try Data(alone.out.utf8).write(to: URL(fileURLWithPath: file))
        try team.ok(.bob, ["record", "import", "Kept", file, "--create-zone"])
        #expect(json(try team.json(.bob, ["record", "get", "Kept", "b1"]), "values") == JSON(["title": "bob offline"]))
    }

    @Test("sync on a terminal: one progress line on stderr, pulled rows and pushed changes, cleared before the report")
    func progressOnTerminal() async throws {
        let sandbox = try Sandbox()
        var server = try await ServerProcess.start(store: sandbox.path("server.sqlite"), in: sandbox)
        defer { Task { [server] in await server.stop(SIGKILL) } }
        let team = try Team([.alice], sandbox: sandbox, server: server.url)
        try team.createZone(.alice, "Notes")
        try team.put(.alice, "Notes", "n1", type: "Note", set: ["title=one"])
        await server.stop(SIGKILL)
        for name in ["n2", "n3"] { try Self.offline(team, .alice, team.putArguments("Notes", name, type: "Note", set: ["title=\(name)"])) }
        server = try await ServerProcess.start(store: sandbox.path("server.sqlite"), in: sandbox, listen: Self.address(server))
        let command = [try CofferProcess.executableURL().path, "sync", "--vault", team.vault(.alice), "--server", server.url].joined(separator: " ")
        let shown = try sandbox.shell("script -qec \"$0\" /dev/null < /dev/null", [command], env: withPassphrase)
        #expect(shown.status == 0, "\(shown)")
        #expect(shown.out.contains("\rSyncing Notes: 0 records fetched\u{1b}[K"), "\(shown)")
        #expect(shown.out.contains("\rPushing Notes: 2 of 2 changes sent\u{1b}[K"), "\(shown)")
        #expect(shown.out.contains("\r\u{1b}[KNotes: "), "the line is cleared before the report: \(shown)")
        #expect(shown.out.contains("Notes: pushed 2 pending changes"), "\(shown)")
        // Without a terminal (or with --json) there is no progress line.
        let plain = try team.run(.alice, ["sync"])
        #expect(plain.status == 0 && !plain.err.contains("Syncing") && !plain.out.contains("\u{1b}"), "\(plain)")
    }

    @Test("a sync killed (kill -9) once the server accepted its first commit: the next sync applies every change once, with no duplicate and no loss")
    func killedPush() async throws {
        let sandbox = try Sandbox()
        let storePath = sandbox.path("server.sqlite")
        var server = try await ServerProcess.start(store: storePath, in: sandbox)
        defer { Task { [server] in await server.stop(SIGKILL) } }
        let team = try Team([.alice], sandbox: sandbox, server: server.url)
        try team.createZone(.alice, "Notes")
        try team.ok(.alice, ["sync"])
        await server.stop(SIGKILL)
        // 2,000 records imported offline: five commits of 400 when pushed.
        let lines = (0..<2_000).map { #"{"name": "r\#($0)", "type": "Note", "values": {"title": "t\#($0)"}, "encryptedValues": {"body": "secret \#($0)"}}"# }
        let input = sandbox.path("notes.jsonl")
        try Data((lines.joined(separator: "\n") + "\n").utf8).write(to: URL(fileURLWithPath: input))
        let imported = try team.run(.alice, ["record", "import", "Notes", input, "--json"])
        #expect(imported.status == 0 && imported.err.contains("offline: 2000 changes saved locally"), "\(imported)")
        #expect(try jsonObject(imported)["pending"] as? Bool == true)

        server = try await ServerProcess.start(store: storePath, in: sandbox, listen: Self.address(server))
        let shell = try #require(["/usr/bin/sqlite3", "/usr/local/bin/sqlite3", "/bin/sqlite3"].first { FileManager.default.isExecutableFile(atPath: $0) },
                                 "the sqlite3 shell is needed")
        func count(_ sql: String) -> Int {
            guard let run = try? ChildProcess.run(shell, ["-batch", storePath, sql], environment: ProcessInfo.processInfo.environment, timeout: 10),
                  run.status == 0 else { return -1 }
            return Int(String(decoding: run.stdout, as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines)) ?? -1
        }
        let entries = count("SELECT count(*) FROM zone_log")
        #expect(entries == 1, "the genesis")
        let sync = try ChildProcess.Running(try CofferProcess.executableURL().path, ["sync", "--vault", team.vault(.alice), "--server", server.url],
                                            environment: sandbox.baseEnvironment.merging(withPassphrase) { $1 }, directory: sandbox.root.path, timeout: 120)
        let deadline = ContinuousClock.now + .seconds(90)
        while count("SELECT count(*) FROM zone_log") <= entries && ContinuousClock.now < deadline {
            try await Task.sleep(for: .milliseconds(2))
        }
        let killed = await sync.stop(SIGKILL)
        let landed = count("SELECT count(*) FROM zone_log") - entries
        #expect(landed >= 1, "the server accepted a commit before the kill")
        if landed < 5 { #expect(killed.status != 0, "killed before it finished") }

        let again = try team.run(.alice, ["sync", "--json"])
        #expect(again.status == 0, "\(again)")
        #expect(count("SELECT count(*) FROM zone_log") - entries == 5, "five commits of 400: none signed twice")
        #expect(count("SELECT count(*) FROM record") == 2_000)
        let status = try team.json(.alice, ["status"])
        #expect((status["zones"] as? [[String: Any]])?.first?["pending"] as? Int == 0)
        #expect(json(try team.json(.alice, ["record", "get", "Notes", "r1999"]), "encryptedValues") == JSON(["body": "secret 1999"]))
    }
}

import CofferTestSupport
import Foundation
import Testing
#if canImport(Glibc)
import Glibc
#endif

/// The local replica as users meet it: `--server` commands read a replica of their own (under
/// `$XDG_DATA_HOME/coffer/replicas/`, or `--replica`), which keeps working when the server is
/// away; `coffer sync` and `coffer status`.
@Suite("the replica of a server: offline reads, sync, status")
struct ReplicaCommandTests {
    /// A server over an SQLite file of the sandbox and a team working through it; the body may
    /// stop the server (then it is not stopped again).
    static func withServer<R>(_ users: [Who] = [.alice], _ body: (Team, ServerProcess) async throws -> R) async throws -> R {
        let sandbox = try Sandbox()
        let server = try await ServerProcess.start(store: sandbox.path("server.sqlite"), in: sandbox)
        do {
            let result = try await body(try Team(users, sandbox: sandbox, server: server.url), server)
            await server.stop(SIGKILL)
            return result
        } catch {
            await server.stop(SIGKILL)
            throw error
        }
    }

    @Test("with the server stopped, reads come from the replica (a note on stderr); sharing and sync need the server (69); status says it is unreachable")
    func offlineReads() async throws {
        try await Self.withServer { team, server in
            try team.createZone(.alice, "Notes")
            try team.put(.alice, "Notes", "n1", type: "Note", set: ["title=hello"], secret: ["body=kept offline"])
            try team.put(.alice, "Notes", "n2", type: "Note", set: ["title=second"])
            #expect(json(try team.get(.alice, "Notes", "n1"), "encryptedValues") == JSON(["body": "kept offline"]))
            // The replica file: under the data folder, named by the server's store id and the user id.
            let replicas = team.sandbox.dataHome.appendingPathComponent("coffer/replicas").path
            let stores = try FileManager.default.contentsOfDirectory(atPath: replicas)
            #expect(stores.count == 1)
            #expect(try FileManager.default.contentsOfDirectory(atPath: "\(replicas)/\(stores[0])").filter { $0.hasSuffix(".sqlite") } == ["\(team.id(.alice)).sqlite"])
            await server.stop(SIGKILL)

            let read = try team.run(.alice, ["record", "get", "Notes", "n1", "--json"])
            #expect(read.status == 0, "\(read)")
            #expect(json(try jsonObject(read), "encryptedValues") == JSON(["body": "kept offline"]))
            #expect(read.err.contains("offline:") && read.err.contains("cannot be reached"))
            let offline = try team.run(.alice, ["record", "get", "Notes", "n2", "--offline", "--json"])
            #expect(offline.status == 0 && offline.err.isEmpty, "--offline does not try the server, and says nothing: \(offline)")
            let query = try team.run(.alice, ["record", "query", "Notes", "--type", "Note", "--offline", "--json"])
            #expect(query.status == 0, "\(query)")
            let list = try team.run(.alice, ["zone", "list", "--offline"])
            #expect(list.status == 0 && list.out.contains("Notes"), "\(list)")

            // Record writes are kept offline (see OfflineWriteCommandTests); sharing needs the server.
            try team.fails(.alice, ["share", "create", "Notes"], 69, mentioning: "needs the server")
            try team.fails(.alice, ["sync"], 69, mentioning: "cannot be reached")
            let status = try team.run(.alice, ["status", "--json"])
            #expect(status.status == 0, "\(status)")
            let report = try jsonObject(status)
            #expect(report["serverReachable"] as? Bool == false)
            let zones = try #require(report["zones"] as? [[String: Any]])
            #expect(zones.map { $0["zone"] as? String } == ["Notes"])
            #expect(zones.first?["confirmedSeq"] as? Int == 3, "the genesis and two commits")
            #expect(zones.first?["pending"] as? Int == 0)
            #expect(zones.first?["lastSync"] is String)
        }
    }

    @Test("a user who never reached the server has nothing to read offline: 69, saying so")
    func noReplicaYet() async throws {
        try await Self.withServer { team, server in
            await server.stop(SIGKILL)
            let bob = try team.sandbox.initVault("bob.vault", name: "Bob", email: "bob@example.com")
            let r = try team.sandbox.coffer(["record", "get", "Notes", "n1", "--vault", bob, "--server", server.url],
                                            env: ["COFFER_PASSPHRASE": CofferProcess.passphrase])
            expectError(r, 69, mentioning: "connect once first")
        }
    }

    @Test("sync pulls every zone and says what it fetched; status lists them; a second sync is up to date")
    func syncAndStatus() async throws {
        try await Self.withServer([.alice, .bob]) { team, _ in
            try team.createZone(.alice, "Notes")
            try team.createZone(.alice, "Work")
            try team.put(.alice, "Work", "w1", type: "Task", set: ["title=plan"])
            // Bob's replica of a zone Alice shares with him.
            try team.exchangeCards([.alice, .bob])
            let url = try #require(try team.json(.alice, ["share", "create", "Notes"])["url"] as? String)
            try team.ok(.alice, ["share", "add", "Notes", "--participant", Who.bob.email, "--permission", "read-only"])
            try team.ok(.bob, ["share", "accept", url])
            try team.put(.alice, "Notes", "n1", type: "Note", secret: ["body=for bob"])

            let sync = try team.json(.bob, ["sync"])
            let synced = try #require(sync["synced"] as? [[String: Any]])
            #expect(synced.count == 1)
            #expect((synced.first?["zone"] as? String)?.hasPrefix("Notes@") == true)
            #expect(synced.first?["records"] as? Int == 1)
            #expect((sync["failed"] as? [Any])?.isEmpty == true)
            #expect(json(try team.get(.bob, "Notes@\(Who.alice.email)", "n1"), "encryptedValues") == JSON(["body": "for bob"]))

            let text = try team.ok(.alice, ["sync"])
            #expect(text.out.contains("Notes:") && text.out.contains("Work:"), "\(text)")
            let again = try team.json(.alice, ["sync"])
            #expect((again["synced"] as? [[String: Any]])?.allSatisfy { $0["entries"] as? Int == 0 } == true, "nothing new the second time")
            let status = try team.json(.alice, ["status"])
            #expect(status["serverReachable"] as? Bool == true)
            #expect((status["zones"] as? [[String: Any]])?.compactMap { $0["zone"] as? String }.sorted() == ["Notes", "Work"])
        }
    }

    @Test("a server whose log was rolled back is refused by sync naming the zone (65), other zones go on, and reads of it fail the same way")
    func rolledBackServer() async throws {
        try await Self.withServer { team, _ in
            try team.createZone(.alice, "Notes")
            try team.createZone(.alice, "Work")
            try team.put(.alice, "Notes", "n1", type: "Note", set: ["title=one"])
            try team.put(.alice, "Notes", "n2", type: "Note", set: ["title=two"])
            try team.ok(.alice, ["sync"])
            let store = team.sandbox.path("server.sqlite")
            try SQLiteShell.run(store, """
                DELETE FROM record WHERE name = 'n2';
                DELETE FROM zone_log WHERE seq = 3 AND zone_id = (SELECT id FROM zone WHERE name = 'Notes');
                UPDATE zone SET sequence = 2 WHERE name = 'Notes';
                """)
            let sync = try team.run(.alice, ["sync"])
            #expect(sync.status == 65, "\(sync)")
            #expect(sync.err.contains("Notes") && sync.err.contains("rolled back"), "\(sync)")
            #expect(sync.out.contains("Work:"), "the other zone was synced: \(sync)")
            try team.fails(.alice, ["record", "get", "Notes", "n1"], 65, mentioning: "Notes")
            // Offline, the replica still holds what was verified.
            let offline = try team.run(.alice, ["record", "get", "Notes", "n2", "--offline", "--json"])
            #expect(offline.status == 0, "\(offline)")
        }
    }

    @Test("a file that is not this user's replica of this server is refused (65); --replica and --offline need a server (64)")
    func wrongReplicaFile() async throws {
        try await Self.withServer([.alice, .bob]) { team, _ in
            try team.createZone(.alice, "Notes")
            try team.ok(.alice, ["zone", "list", "--replica", team.sandbox.path("alice-replica.sqlite")])
            try team.fails(.bob, ["zone", "list", "--replica", team.sandbox.path("alice-replica.sqlite")], 65, mentioning: "another user's replica")
            // A store of its own.
            let own = try Team([.carol], sandbox: team.sandbox)
            try own.createZone(.carol, "Mine")
            try team.fails(.alice, ["zone", "list", "--replica", own.store], 65, mentioning: "not a replica")
            let flag = try team.sandbox.coffer(["zone", "list", "--vault", team.vault(.alice), "--offline"],
                                               env: ["COFFER_PASSPHRASE": CofferProcess.passphrase])
            expectError(flag, 64, mentioning: "--server")
            let sync = try team.sandbox.coffer(["sync", "--vault", team.vault(.alice), "--store", own.store],
                                               env: ["COFFER_PASSPHRASE": CofferProcess.passphrase])
            expectError(sync, 64, mentioning: "--server")
        }
    }

    @Test("sync --watch pulls another user's write into the replica as it lands, and keeps going")
    func watchPullsAsWritesLand() async throws {
        try await Self.withServer([.alice, .bob]) { team, server in
            try team.exchangeCards([.alice, .bob])
            try team.createZone(.alice, "Live")
            let url = try #require(try team.json(.alice, ["share", "create", "Live"])["url"] as? String)
            try team.ok(.alice, ["share", "add", "Live", "--participant", Who.bob.email, "--permission", "read-write"])
            try team.ok(.bob, ["share", "accept", url])
            let watch = try ChildProcess.Running(try CofferProcess.executableURL().path,
                                                 ["sync", "--watch", "--vault", team.vault(.alice), "--server", server.url],
                                                 environment: team.sandbox.baseEnvironment.merging(["COFFER_PASSPHRASE": CofferProcess.passphrase]) { _, new in new },
                                                 directory: team.sandbox.root.path, timeout: 300)
            // Its first round, then Bob writes, twice.
            let first = await watch.waitForOutput(seconds: 60) { $0.contains("Live:") ? true : nil }
            #expect(first == true)
            try team.put(.bob, "Live@\(Who.alice.email)", "from-bob", type: "Note", secret: ["body=live"])
            let seen = await watch.waitForOutput(seconds: 60) { $0.contains("1 record fetched") ? true : nil }
            try team.put(.bob, "Live@\(Who.alice.email)", "again", type: "Note", secret: ["body=again"])
            let twice = await watch.waitForOutput(seconds: 60) { $0.components(separatedBy: "1 record fetched").count > 2 ? true : nil }
            let result = await watch.stop(SIGTERM)
            #expect(seen == true && twice == true, "sync --watch did not pull Bob's records: \(String(decoding: result.stdout, as: UTF8.self)) \(String(decoding: result.stderr, as: UTF8.self))")
            // They are in Alice's replica: read with the server skipped.
            let offline = try team.run(.alice, ["record", "get", "Live", "again", "--offline", "--json"])
            #expect(offline.status == 0, "\(offline)")
            #expect(json(try jsonObject(offline), "encryptedValues") == JSON(["body": "again"]))
        }
    }
}

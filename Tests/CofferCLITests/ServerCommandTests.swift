import CofferTestSupport
import Foundation
import Testing
#if canImport(Glibc)
import Glibc
#endif

/// `coffer serve` as users run it: a server process on loopback, and users in the same sandbox
/// who share no file (each has a vault and marks; the store is the server's), working through
/// it with `--server` or `COFFER_SERVER`.
@Suite("coffer serve, and commands through --server")
struct ServerCommandTests {
    /// A server over an SQLite file of the sandbox, and a team working through it.
    static func withServer<R>(_ users: [Who] = Who.allCases, _ body: (Team, ServerProcess) async throws -> R) async throws -> R {
        let sandbox = try Sandbox()
        let server = try await ServerProcess.start(store: sandbox.path("server.sqlite"), in: sandbox)
        do {
            let team = try Team(users, sandbox: sandbox, server: server.url)
                let result = try await body(team, server)
            let stopped = await server.stop()
            #expect(stopped.status == 0, "the server did not stop cleanly on SIGTERM: \(String(decoding: stopped.stderr, as: UTF8.self))")
            return result
        } catch {
            await server.stop(SIGKILL)
            throw error
        }
    }

    /// The seeds' whole flow across users who share no file: a zone shared by name and by link,
    /// accepted; a read-only write refused; read-write edits both ways; a removal that rotates
    /// the key, after which the removed user gets nothing new; leave, stop, and share again.
    @Test func wholeFlowThroughAServer() async throws {
        try await Self.withServer { team, _ in
            #expect(!FileManager.default.fileExists(atPath: team.store), "no user has a store file of their own")
            // A name or email that no card of Alice's names is not taken from the server's directory.
            try team.createZone(.alice, "Trip")
            try team.put(.alice, "Trip", "plan", type: "Note", set: ["title=Lisbon"], secret: ["body=flights booked"])
            let url = try #require(try team.json(.alice, ["share", "create", "Trip"])["url"] as? String)
            try team.fails(.alice, ["share", "add", "Trip", "--participant", Who.bob.email, "--permission", "read-only"], 66,
                           mentioning: "contact add")
            // By name, once the cards are exchanged: Bob read-only, Carol read-write.
            try team.exchangeCards(Who.allCases)
            for (who, permission) in [(Who.bob, "read-only"), (.carol, "read-write")] {
                try team.ok(.alice, ["share", "add", "Trip", "--participant", who.email, "--permission", permission])
                try team.ok(who, ["share", "accept", url])
            }
            let bobsView = try team.get(.bob, "Trip@alice@example.com", "plan")
            #expect(json(bobsView, "encryptedValues") == JSON(["body": "flights booked"]))
            try team.fails(.bob, team.putArguments("Trip@alice@example.com", "bob-note", type: "Note", set: ["title=mine"]), 77,
                           mentioning: "read-only")
            // Read-write edits go both ways.
            try team.put(.carol, "Trip@alice@example.com", "hotel", type: "Note", set: ["title=Alfama"], secret: ["body=room 12"])
            #expect(json(try team.get(.alice, "Trip", "hotel"), "encryptedValues") == JSON(["body": "room 12"]))
            let changed = try team.put(.alice, "Trip", "hotel", type: "Note", set: ["title=Alfama"], secret: ["body=room 14"],
                                       extra: ["--if-match", "\(try #require(try team.get(.alice, "Trip", "hotel")["changeTag"]))"])
            #expect(json(changed, "encryptedFields") == JSON(["body"]))
            #expect(json(try team.get(.carol, "Trip@alice@example.com", "hotel"), "encryptedValues") == JSON(["body": "room 14"]))
            // Remove Carol: the key rotates, and what Alice writes after is not Carol's to read.
            let removed = try team.ok(.alice, ["share", "remove", "Trip", "--participant", Who.carol.email])
            #expect(removed.out.contains("rotated"))
            try team.put(.alice, "Trip", "after", type: "Note", set: ["title=later"], secret: ["body=new secret"])
            try team.fails(.carol, ["record", "get", "Trip@alice@example.com", "after"], 77, mentioning: "removed")
            // Bob leaves; Alice stops the share, then shares again by link.
            try team.ok(.bob, ["share", "leave", "Trip@alice@example.com"])
            try team.fails(.bob, ["record", "get", "Trip@alice@example.com", "plan"], 77)
            try team.ok(.alice, ["share", "stop", "Trip"])
            let link = try team.json(.alice, ["share", "create", "Trip", "--public", "read-only"])
            let linkURL = try #require(link["url"] as? String)
            try team.ok(.bob, ["share", "accept", linkURL])
            #expect(json(try team.get(.bob, "Trip@alice@example.com", "after"), "encryptedValues") == JSON(["body": "new secret"]))
            // Every user's audit of what they see is clean.
            for who in [Who.alice, .bob] { try team.ok(who, ["audit"]) }
        }
    }

    /// `changes --follow` through a server sees another user's commit, and stops on Ctrl-C.
    @Test func followSeesAnotherUsersCommit() async throws {
        try await Self.withServer([.alice, .bob]) { team, server in
            try team.exchangeCards([.alice, .bob])
            try team.createZone(.alice, "Live")
            let url = try #require(try team.json(.alice, ["share", "create", "Live"])["url"] as? String)
            try team.ok(.alice, ["share", "add", "Live", "--participant", Who.bob.email, "--permission", "read-write"])
            try team.ok(.bob, ["share", "accept", url])
            let follow = try ChildProcess.Running(try CofferProcess.executableURL().path,
                                                  ["changes", "Live", "--follow", "--json", "--vault", team.vault(.alice), "--server", server.url],
                                                  environment: team.sandbox.baseEnvironment.merging(["COFFER_PASSPHRASE": CofferProcess.passphrase]) { _, new in new },
                                                  directory: team.sandbox.root.path, timeout: 300)
            // Once it follows (its first, empty page printed), Bob writes.
            _ = await follow.waitForOutput(seconds: 60) { $0.contains("token") ? true : nil }
            try team.put(.bob, "Live@alice@example.com", "from-bob", type: "Note", secret: ["body=live"])
            let seen = await follow.waitForOutput(seconds: 60) { $0.contains("from-bob") ? true : nil }
            let result = await follow.stop(SIGINT)
            #expect(seen == true, "changes --follow did not print Bob's record: \(String(decoding: result.stdout, as: UTF8.self))")
            #expect(result.status == 130, "\(String(decoding: result.stderr, as: UTF8.self))")
        }
    }

    /// `changes --follow` through a server that restarts: it says so on stderr, tries again, and
    /// goes on from where it was once the server is back, printing what was written meanwhile.
    @Test func followReconnectsWhenTheServerRestarts() async throws {
        let sandbox = try Sandbox()
        let store = sandbox.path("server.sqlite")
        var server = try await ServerProcess.start(store: store, in: sandbox)
        do {
            let team = try Team([.alice], sandbox: sandbox, server: server.url)
            try team.createZone(.alice, "Live")
            try team.put(.alice, "Live", "before", type: "Note", set: ["title=one"])
            let follow = try ChildProcess.Running(try CofferProcess.executableURL().path,
                                                  ["changes", "Live", "--follow", "--json", "--vault", team.vault(.alice), "--server", server.url],
                                                  environment: team.sandbox.baseEnvironment.merging(["COFFER_PASSPHRASE": CofferProcess.passphrase]) { _, new in new },
                                                  directory: team.sandbox.root.path, timeout: 300)
            #expect(await follow.waitForOutput(seconds: 60) { $0.contains("before") ? true : nil } == true)
            await server.stop(SIGKILL)
            // It notices (its next poll fails) and says so, and keeps running.
            let noticed = await { () async -> Bool in
                for _ in 0..<300 {
                    if follow.look().stderr.contains("following again in") { return true }
                    try? await Task.sleep(for: .milliseconds(50))
                }
                return false
            }()
            #expect(noticed, "\(follow.look())")
            #expect(follow.look().status == nil, "changes --follow ended: \(follow.look())")
            // The server comes back on its port, with its store; a record written then is printed.
            let port = try #require(server.url.split(separator: ":").last)
            server = try await ServerProcess.start(store: store, in: sandbox, listen: "127.0.0.1:\(port)")
            try team.put(.alice, "Live", "after", type: "Note", set: ["title=two"])
            let seen = await follow.waitForOutput(seconds: 90) { $0.contains("after") ? true : nil }
            let result = await follow.stop(SIGINT)
            #expect(seen == true, "changes --follow did not go on after the restart: \(String(decoding: result.stdout, as: UTF8.self)) \(String(decoding: result.stderr, as: UTF8.self))")
            #expect(result.status == 130, "\(String(decoding: result.stderr, as: UTF8.self))")
            #expect(await server.stop().status == 0)
        } catch {
            await server.stop(SIGKILL)
            throw error
        }
    }

    /// `zone push` moves a local zone onto the server whole: its log, keys, share and records as
    /// they were signed and sealed, its deletions; its owner's audit through the server is clean,
    /// and its participant reads it there.
    @Test func pushMovesALocalZoneWhole() async throws {
        try await Self.withServer([.alice, .bob]) { team, server in
            let local = team.sandbox.path("local.sqlite")
            func alice(_ arguments: [String]) throws -> CofferResult {
                try team.sandbox.coffer(arguments + ["--vault", team.vault(.alice), "--store", local], env: ["COFFER_PASSPHRASE": CofferProcess.passphrase])
            }
            expectSuccess(try alice(["zone", "create", "Notes"]))
            for i in 1...3 { expectSuccess(try alice(team.putArguments("Notes", "n\(i)", type: "Note", set: ["title=t\(i)"], secret: ["body=secret \(i)"]))) }
            expectSuccess(try alice(["record", "delete", "Notes", "n2"]))
            let card = team.sandbox.path("bob-push-card.json")
            try team.ok(.bob, ["vault", "export-contact", "--output", card])
            expectSuccess(try alice(["contact", "add", card]))
            expectSuccess(try alice(["share", "create", "Notes"]))
            expectSuccess(try alice(["share", "add", "Notes", "--participant", Who.bob.email, "--permission", "read-only"]))
            // --server is the source's flag, not the target's: a usage error.
            expectError(try alice(["zone", "push", "Notes", "--server", server.url]), 64, mentioning: "--server")
            let pushed = try alice(["zone", "push", "Notes", "--to", server.url, "--json"])
            expectSuccess(pushed)
            let result = try jsonObject(pushed)
            #expect(json(result, "records") == .int(2))
            #expect(json(result, "zone") == .string("Notes"))
            expectError(try alice(["zone", "push", "Notes", "--to", server.url]), 73, mentioning: "already has")
            // Moved: the local copy is gone, and a mark says where it went.
            expectError(try alice(["record", "get", "Notes", "n1"]), 66, mentioning: "moved to the server at \(server.url)")
            expectError(try alice(["zone", "create", "Notes"]), 73, mentioning: "moved to the server")
            #expect(try SQLiteShell.run(local, "SELECT count(*) FROM zone; SELECT count(*) FROM record; SELECT count(*) FROM zone_log;")
                        .split(separator: "\n") == ["0", "0", "0"], "nothing of the zone is left in the local store")
            // Through the server: Alice's records, her audit, the deletion in the change feed.
            #expect(json(try team.get(.alice, "Notes", "n3"), "encryptedValues") == JSON(["body": "secret 3"]))
            try team.fails(.alice, ["record", "get", "Notes", "n2"], 66)
            try team.ok(.alice, ["audit"])
            let changes = try team.ok(.alice, ["changes", "Notes"])
            #expect(changes.out.contains("deleted n2"))
            // Bob, invited before the push, accepts on the server and reads.
            let url = try #require(try team.json(.alice, ["share", "show", "Notes"])["url"] as? String)
            try team.ok(.bob, ["share", "accept", url])
            #expect(json(try team.get(.bob, "Notes@\(team.id(.alice))", "n1"), "encryptedValues") == JSON(["body": "secret 1"]))
        }
    }

    /// Commands that only make sense on local files are a usage error through a server, and a
    /// server that cannot be reached is exit 69, at once.
    @Test func localOnlyCommandsAndUnreachableServers() async throws {
        try await Self.withServer([.alice]) { team, _ in
            try team.fails(.alice, ["audit", "--plaintext", "secret"], 64, mentioning: "local store")
            let r = try team.sandbox.coffer(["zone", "list", "--vault", team.vault(.alice), "--server", "http://127.0.0.1:1"],
                                            env: ["COFFER_PASSPHRASE": CofferProcess.passphrase])
            expectError(r, 69, mentioning: "cannot be reached")
            #expect(r.seconds < 20)
            let both = try team.sandbox.coffer(["zone", "list", "--vault", team.vault(.alice), "--server", "http://127.0.0.1:1", "--store", "x.sqlite"],
                                               env: ["COFFER_PASSPHRASE": CofferProcess.passphrase])
            expectError(both, 64, mentioning: "not both")
            let bad = try team.sandbox.coffer(["zone", "list", "--vault", team.vault(.alice), "--server", "ftp://example.com"],
                                              env: ["COFFER_PASSPHRASE": CofferProcess.passphrase])
            expectError(bad, 64, mentioning: "http")
        }
    }

    /// A second `coffer serve` on the port the first listens on: exit 69, the address named and
    /// why, no NIO error text, and no store file made.
    @Test func serveOnAPortInUse() async throws {
        try await Self.withServer([.alice]) { team, server in
            let address = String(server.url.dropFirst("http://".count))
            let store = team.sandbox.path("second.sqlite")
            let r = try team.sandbox.coffer(["serve", "--listen", address, "--store", store])
            expectFailure(r, 69, mentioning: "cannot listen on \(address): the address is in use")
            #expect(!FileManager.default.fileExists(atPath: store))
            // The first server is still there.
            try team.ok(.alice, ["zone", "list"])
        }
    }
}

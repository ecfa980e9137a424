import CofferTestSupport
import Foundation
import Testing
#if canImport(Glibc)
import Glibc
#endif

/// The commands of daily use, run as a user runs them, on a local store and through a server:
/// one field's value alone, listing a zone, `--quiet`, JSON errors, "did you mean" for a
/// misspelled command, the zone-delete question, `COFFER_LOG_LEVEL`, profiles, and help that
/// lists only the flags a command uses.
@Suite("daily use: single fields, record list, --quiet, JSON errors, suggestions, profiles, logging")
struct DailyUseCommandTests {
    /// A team of Alice and Bob on a local store, or through a `coffer serve` of their own.
    static func withTeam<R>(throughServer: Bool, _ body: (Team) async throws -> R) async throws -> R {
        guard throughServer else { return try await body(try Team([.alice, .bob])) }
        let sandbox = try Sandbox()
        let server = try await ServerProcess.start(store: sandbox.path("server.sqlite"), in: sandbox)
        do {
            let result = try await body(try Team([.alice, .bob], sandbox: sandbox, server: server.url))
            await server.stop()
            return result
        } catch {
            await server.stop(SIGKILL)
            throw error
        }
    }

    @Test("record get --field prints one value alone; --raw gives bytes as they are; a missing field is 66 with a suggestion",
          arguments: [false, true])
    func singleField(throughServer: Bool) async throws {
        try await Self.withTeam(throughServer: throughServer) { team in
            try team.createZone(.alice, "Files")
            let bytes = Data([0x89, 0x50, 0x4e, 0x47, 0x00, 0x0a, 0xff, 0x0d])
            let file = try team.sandbox.write("logo.png", bytes)
            try team.put(.alice, "Files", "logo", type: "File", set: ["title=Logo\nsecond line", "size:int=8", "png:bytes=@\(file)"],
                         secret: ["pin=0042"])
            #expect(try team.ok(.alice, ["record", "get", "Files", "logo", "--field", "pin"]).out == "0042\n")
            #expect(try team.ok(.alice, ["record", "get", "Files", "logo", "--field", "size"]).out == "8\n")
            #expect(try team.ok(.alice, ["record", "get", "Files", "logo", "--field", "title"]).out == "Logo\nsecond line\n")
            #expect(try team.ok(.alice, ["record", "get", "Files", "logo", "--field", "png"]).out == bytes.base64EncodedString() + "\n")
            #expect(try team.ok(.alice, ["record", "get", "Files", "logo", "--field", "png", "--raw"]).stdout == bytes)
            #expect(try team.ok(.alice, ["record", "get", "Files", "logo", "--field", "pin", "--raw"]).stdout == Data("0042".utf8))
            let one = try team.json(.alice, ["record", "get", "Files", "logo", "--field", "pin"])
            #expect(json(one, "field") == .string("pin") && json(one, "encrypted") == .bool(true) && json(one, "value") == .string("0042"))
            #expect(json(one, "type") == .string("string"))
            try team.fails(.alice, ["record", "get", "Files", "logo", "--field", "titel"], 66, mentioning: "did you mean 'title'")
            try team.fails(.alice, ["record", "get", "Files", "logo", "--raw"], 64, mentioning: "--field")
            try team.fails(.alice, ["record", "get", "Files", "nope", "--field", "pin"], 66)
        }
    }

    @Test("record list shows records of every type, no secret; --type filters; --json has the put shape", arguments: [false, true])
    func recordList(throughServer: Bool) async throws {
        try await Self.withTeam(throughServer: throughServer) { team in
            try team.createZone(.alice, "Mixed")
            #expect(try team.ok(.alice, ["record", "list", "Mixed"]).out == "No records in Mixed.\n")
            let secret = randomLetters(24)
            try team.put(.alice, "Mixed", "a-note", type: "Note", set: ["title=first"], secret: ["body=\(secret)"])
            try team.put(.alice, "Mixed", "b-task", type: "Task", set: ["done:bool=false"])
            try team.put(.alice, "Mixed", "c-note", type: "Note", set: ["title=second"])
            let text = try team.ok(.alice, ["record", "list", "Mixed"])
            #expect(text.outLines.count == 4, "\(text)")
            #expect(text.outLines.dropFirst().map { $0.split(separator: " ").prefix(2).joined(separator: " ") }
                == ["a-note Note", "b-task Task", "c-note Note"])
            #expect(!text.out.contains(secret))
            let listed = try team.json(.alice, ["record", "list", "Mixed"])
            let records = try #require(listed["records"] as? [[String: Any]])
            #expect(records.map { $0["name"] as? String } == ["a-note", "b-task", "c-note"])
            #expect(json(records[0], "encryptedFields") == JSON(["body"]) && records[0]["encryptedValues"] == nil)
            let notes = try team.ok(.alice, ["record", "list", "Mixed", "--type", "Note", "--limit", "1"])
            #expect(notes.outLines.count == 2 && notes.outLines[1].hasPrefix("a-note"), "\(notes)")
            try team.fails(.alice, ["record", "list", "Nowhere"], 66)
        }
    }

    @Test("--quiet: a write prints nothing on success; its errors still reach stderr", arguments: [false, true])
    func quiet(throughServer: Bool) async throws {
        try await Self.withTeam(throughServer: throughServer) { team in
            let created = try team.ok(.alice, ["zone", "create", "Q", "--quiet"])
            #expect(created.out.isEmpty)
            try team.put(.alice, "Q", "n", type: "Note", set: ["t=1"])
            #expect(try team.ok(.alice, ["record", "delete", "Q", "n", "-q"]).out.isEmpty)
            #expect(try team.ok(.alice, ["zone", "delete", "Q", "-q"]).out.isEmpty)
            try team.fails(.alice, ["zone", "delete", "Q", "-q"], 66)
        }
    }

    @Test("with --json an error is one JSON line on stderr: {error, code}, parse errors included")
    func jsonErrors() throws {
        let team = try Team([.alice])
        try team.createZone(.alice, "Z")
        for (args, code) in [(["record", "get", "Z", "missing", "--json"], Int32(66)),
                             (["record", "get", "Z", "missing", "--bogus", "--json"], 64),
                             (["record", "gte", "Z", "n", "--json"], 64),
                             (["zone", "create", "Z", "--json"], 73)] {
            let r = try team.run(.alice, args)
            #expect(r.status == code, "\(r)")
            #expect(r.stdout.isEmpty)
            #expect(r.err.hasSuffix("\n") && r.err.dropLast().split(separator: "\n").count == 1, "\(r)")
            let object = try jsonObject(r.stderr)
            #expect(object["code"] as? Int == Int(code) && (object["error"] as? String)?.isEmpty == false, "\(r)")
            #expect(Set(object.keys) == ["error", "code"])
        }
        // Without --json the line stays `error: …`.
        try team.fails(.alice, ["record", "get", "Z", "missing"], 66)
    }

    @Test("a misspelled subcommand gets a \"did you mean\"; an unknown one lists the commands (64)")
    func subcommandSuggestions() throws {
        let sandbox = try Sandbox()
        for (args, expected) in [(["recrod", "list", "Z"], "did you mean 'record'"), (["record", "gte", "Z", "n"], "did you mean 'get'"),
                                 (["zone", "lst"], "did you mean 'list'"), (["vault", "item", "lsit"], "did you mean 'list'"),
                                 (["share", "acept", "-"], "did you mean 'accept'")] {
            let r = try sandbox.coffer(args)
            expectFailure(r, 64, mentioning: expected)
        }
        expectFailure(try sandbox.coffer(["frobnicate"]), 64, mentioning: "the commands are vault, contact, zone, record")
        // A known command with a bad option keeps the parser's own message.
        expectFailure(try sandbox.coffer(["zone", "list", "--frob"]), 64, mentioning: "--frob")
    }

    @Test("vault item get --json prints the item with its secret (text, or base64 for bytes that are not UTF-8)")
    func vaultItemJSON() throws {
        let sandbox = try Sandbox()
        let vault = try sandbox.initVault()
        let env = withPassphrase.merging(["COFFER_VAULT": vault]) { _, new in new }
        _ = try sandbox.coffer(["vault", "item", "add", "--service", "api", "--account", "ci", "--label", "CI token"], env: env,
                               stdin: .data(Data("tok-123".utf8)))
        _ = try sandbox.coffer(["vault", "item", "add", "--service", "bin", "--account", "x"], env: env,
                               stdin: .data(Data([0xff, 0x00, 0x41])))
        let text = try sandbox.coffer(["vault", "item", "get", "--service", "api", "--account", "ci", "--json"], env: env)
        expectSuccess(text)
        let item = try jsonObject(text)
        #expect(item["secret"] as? String == "tok-123" && item["service"] as? String == "api" && item["label"] as? String == "CI token")
        #expect(item["created"] is String && item["class"] as? String == "generic")
        let binary = try jsonObject(try sandbox.coffer(["vault", "item", "get", "--service", "bin", "--account", "x", "--json"], env: env))
        #expect(binary["secretBase64"] as? String == Data([0xff, 0x00, 0x41]).base64EncodedString() && binary["secret"] == nil)
        // The listing still never shows a secret.
        #expect(!(try sandbox.coffer(["vault", "item", "list", "--json"], env: env)).out.contains("tok-123"))
    }

    @Test("zone delete of a zone with records asks on a terminal: no keeps it, yes deletes; --yes and scripts do not ask")
    func zoneDeleteAsks() throws {
        let team = try Team([.alice])
        for zone in ["Keep", "Gone", "Yes", "Empty", "Script"] { try team.createZone(.alice, zone) }
        for zone in ["Keep", "Gone", "Yes", "Script"] { try team.put(.alice, zone, "n", type: "Note", set: ["t=1"]) }
        let executable = try CofferProcess.executableURL().path
        func onTerminal(_ args: [String], typing line: String) throws -> CofferResult {
            let command = ([executable] + args + ["--vault", team.vault(.alice), "--store", team.store]).joined(separator: " ")
            return try team.sandbox.shell("(sleep 1; printf '%s\\n' \"$1\") | script -qec \"$0\" /dev/null", [command, line], env: withPassphrase)
        }
        let kept = try onTerminal(["zone", "delete", "Keep"], typing: "n")
        #expect(kept.out.contains("Delete zone Keep and its record for good? [y/N]") && kept.out.contains("was not deleted"), "\(kept)")
        let gone = try onTerminal(["zone", "delete", "Gone"], typing: "y")
        #expect(gone.out.contains("[y/N]") && gone.out.contains("Deleted zone Gone"), "\(gone)")
        let yes = try onTerminal(["zone", "delete", "Yes", "--yes"], typing: "")
        #expect(!yes.out.contains("[y/N]") && yes.out.contains("Deleted zone Yes"), "\(yes)")
        let empty = try onTerminal(["zone", "delete", "Empty"], typing: "")
        #expect(!empty.out.contains("[y/N]") && empty.out.contains("Deleted zone Empty"), "\(empty)")
        try team.ok(.alice, ["zone", "delete", "Script"]) // no terminal: as asked
        let zones = try #require(try team.json(.alice, ["zone", "list"])["zones"] as? [[String: Any]])
        #expect(zones.map { $0["name"] as? String } == ["Keep"])
    }

    @Test("COFFER_LOG_LEVEL: debug and trace log to stderr (never the passphrase); an unknown level is 64")
    func logLevel() throws {
        let team = try Team([.alice])
        try team.createZone(.alice, "L")
        for level in ["debug", "TRACE"] {
            let r = try team.run(.alice, ["zone", "list"], env: ["COFFER_LOG_LEVEL": level])
            #expect(r.status == 0)
            #expect(r.err.contains("vault opened") && r.err.contains("store opened"), "\(r)")
            #expect(!r.err.contains(CofferProcess.passphrase))
        }
        #expect(try team.run(.alice, ["zone", "list"]).err.isEmpty)
        let bad = try team.run(.alice, ["zone", "list"], env: ["COFFER_LOG_LEVEL": "loud"])
        expectFailure(bad, 64, mentioning: "COFFER_LOG_LEVEL")
        #expect(bad.err.contains("trace, debug, info"))
    }

    @Test("profiles in config.toml: default, --profile, COFFER_PROFILE; flags and environment win; bad files are refused")
    func profiles() async throws {
        let sandbox = try Sandbox()
        let vault = try sandbox.initVault()
        let config = sandbox.home.appendingPathComponent(".config/coffer")
        try FileManager.default.createDirectory(at: config, withIntermediateDirectories: true)
        func writeConfig(_ text: String) throws { try Data(text.utf8).write(to: config.appendingPathComponent("config.toml")) }
        try writeConfig("""
            default = "home"

            [profile.home]
            store = "\(sandbox.path("home.sqlite"))"
            vault = "\(vault)"

            [profile.work]
            store = "\(sandbox.path("work.sqlite"))"
            vault = "\(vault)"
            """)
        func zones(_ args: [String], env: [String: String] = [:]) throws -> [String] {
            let r = try sandbox.coffer(["zone", "list", "--json"] + args, env: withPassphrase.merging(env) { _, new in new })
            expectSuccess(r)
            return try #require(try jsonObject(r)["zones"] as? [[String: Any]]).compactMap { $0["name"] as? String }
        }
        expectSuccess(try sandbox.coffer(["zone", "create", "AtHome"], env: withPassphrase))
        expectSuccess(try sandbox.coffer(["zone", "create", "AtWork", "--profile", "work"], env: withPassphrase))
        #expect(FileManager.default.fileExists(atPath: sandbox.path("home.sqlite")) && FileManager.default.fileExists(atPath: sandbox.path("work.sqlite")))
        #expect(try zones([]) == ["AtHome"])
        #expect(try zones(["--profile", "work"]) == ["AtWork"])
        #expect(try zones([], env: ["COFFER_PROFILE": "work"]) == ["AtWork"])
        // The flag beats COFFER_PROFILE; COFFER_STORE and --store beat the profile.
        #expect(try zones(["--profile", "home"], env: ["COFFER_PROFILE": "work"]) == ["AtHome"])
        #expect(try zones([], env: ["COFFER_PROFILE": "work", "COFFER_STORE": sandbox.path("home.sqlite")]) == ["AtHome"])
        #expect(try zones(["--store", sandbox.path("work.sqlite")]) == ["AtWork"])
        expectFailure(try sandbox.coffer(["zone", "list", "--profile", "play"], env: withPassphrase), 64, mentioning: "profiles: home, work")

        // A server profile: the commands go through it.
        let server = try await ServerProcess.start(store: sandbox.path("server.sqlite"), in: sandbox)
        defer { _ = Task { await server.stop(SIGKILL) } }
        try writeConfig("""
            [profile.remote]
            server = "\(server.url)"
            vault = "\(vault)"
            """)
        expectSuccess(try sandbox.coffer(["zone", "create", "Served", "--profile", "remote"], env: withPassphrase))
        #expect(try zones(["--profile", "remote"]) == ["Served"])
        #expect(try zones(["--store", sandbox.path("work.sqlite"), "--profile", "remote"]) == ["AtWork"])
        await server.stop()

        // Strict: an unknown key, a misspelled table, both a store and a server, a parse error.
        for (text, mentioning) in [("[profile.x]\nstroe = \"a\"\n", "unknown key 'stroe'"), ("[profiles.x]\nstore = \"a\"\n", "unknown key 'profiles'"),
                                   ("[profile.x]\nstore = \"a\"\nserver = \"http://127.0.0.1:1\"\n", "both a store and a server"),
                                   ("[profile.x]\nstore = 3\n", "non-empty string"), ("[profile.x\n", "config.toml:1:")] {
            try writeConfig(text)
            expectFailure(try sandbox.coffer(["zone", "list", "--profile", "x"], env: withPassphrase), 65, mentioning: mentioning)
        }
    }

    @Test("record list into a pipe its reader closed (| head -1), locally and through a server: the command ends by SIGPIPE (141), with nothing on stderr, no crash")
    func outputIntoAClosedPipe() async throws {
        let sandbox = try Sandbox()
        let server = try await ServerProcess.start(store: sandbox.path("server.sqlite"), in: sandbox)
        defer { _ = Task { await server.stop(SIGKILL) } }
        // Enough records that the list outgrows a pipe's buffer (64 KiB) long after head is gone.
        let lines = (0..<3_000).map { #"{"name":"n\#($0)","type":"Note","values":{"title":"a title long enough to fill the line"},"encryptedValues":{}}"# }
        let file = try sandbox.write("notes.jsonl", lines.joined(separator: "\n") + "\n")
        for url in [nil, server.url] {
            let label = url == nil ? "local" : "server"
            let team = try Team([.alice], server: url)
            try team.ok(.alice, ["zone", "create", "Notes"])
            try team.ok(.alice, ["record", "import", "Notes", file])
            let coffer = try CofferProcess.executableURL().path
            let place = url.map { ["--server", $0] } ?? ["--store", team.store]
            let command = ([coffer, "record", "list", "Notes", "--vault", team.vault(.alice)] + place).map { "'\($0)'" }.joined(separator: " ")
            let errors = team.sandbox.path("err.txt")
            let script = "\(command) 2>'\(errors)' | head -1 >/dev/null; echo \"${PIPESTATUS[0]}\""
            let result = try CofferProcess.run(["-c", script], environment: team.sandbox.baseEnvironment.merging(withPassphrase) { _, new in new },
                                               stdin: .null, directory: team.sandbox.root, executable: URL(fileURLWithPath: "/bin/bash"))
            #expect(String(decoding: result.stdout, as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines) == "141", "\(label): \(result)")
            let stderr = String(decoding: try team.sandbox.read(errors), as: UTF8.self)
            #expect(stderr.isEmpty, "\(label): \(stderr)")
        }
    }

    @Test("help lists only the flags a command uses; vault commands still accept --store and --server")
    func helpShowsWhatApplies() throws {
        let sandbox = try Sandbox()
        let vault = try sandbox.initVault()
        let vaultHelp = try sandbox.coffer(["vault", "show", "--help"])
        #expect(vaultHelp.status == 0 && vaultHelp.out.contains("--vault") && vaultHelp.out.contains("--profile"))
        #expect(!vaultHelp.out.contains("--store") && !vaultHelp.out.contains("--server"), "\(vaultHelp)")
        let getHelp = try sandbox.coffer(["record", "get", "--help"])
        #expect(getHelp.out.contains("--store") && getHelp.out.contains("--server") && getHelp.out.contains("--field"))
        let shown = try sandbox.coffer(["vault", "show", "--vault", vault, "--store", sandbox.path("x.sqlite")], env: withPassphrase)
        expectSuccess(shown)
        #expect(!FileManager.default.fileExists(atPath: sandbox.path("x.sqlite")))
    }

    @Test("serve --json prints its address as one JSON line, and a bad --listen with --json is a JSON error")
    func serveJSON() async throws {
        let sandbox = try Sandbox()
        let process = try ChildProcess.Running(try CofferProcess.executableURL().path,
                                               ["serve", "--listen", "127.0.0.1:0", "--store", sandbox.path("s.sqlite"), "--json"],
                                               environment: sandbox.baseEnvironment, directory: sandbox.root.path, timeout: 1800)
        let line = await process.waitForOutput(seconds: 120) { out -> String? in out.hasSuffix("\n") ? out : nil }
        let stopped = await process.stop()
        let text = try #require(line, "no line from coffer serve --json")
        let object = try #require(try JSONSerialization.jsonObject(with: Data(text.utf8)) as? [String: Any])
        #expect((object["url"] as? String)?.hasPrefix("http://127.0.0.1:") == true && object["listening"] as? Bool == true, "\(object)")
        #expect(stopped.status == 0)
        let bad = try sandbox.coffer(["serve", "--listen", "nowhere", "--json"])
        #expect(bad.status == 64 && (try? JSONSerialization.jsonObject(with: bad.stderr)) is [String: Any], "\(bad)")
    }
}

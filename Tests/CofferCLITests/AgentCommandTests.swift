import CofferCrypto
import CofferTestSupport
import CofferVault
import Foundation
import Testing
#if canImport(Glibc)
import Glibc
#endif

/// `coffer unlock` and `coffer lock`: an agent process holds the vault key so that later
/// commands need no passphrase; it goes on expiry, on lock and on a signal, leaves nothing but
/// its socket, and answers only its own user.
@Suite("coffer unlock and lock: the agent")
struct AgentCommandTests {
    let agent: AgentSandbox

    init() throws { agent = try AgentSandbox() }

    var sandbox: Sandbox { agent.sandbox }

    /// `vault show --json` with no passphrase, expecting the agent to open it.
    func showWithoutPassphrase(env: [String: String] = [:], sourceLocation: SourceLocation = #_sourceLocation) throws {
        let r = try agent.run(["vault", "show", "--json"], env: env, sourceLocation: sourceLocation)
        expectSuccess(r, sourceLocation: sourceLocation)
        #expect((try? jsonObject(r))?["name"] as? String == "Alice", "\(r)", sourceLocation: sourceLocation)
    }

    /// No agent: a command with no passphrase fails with 64.
    func expectLocked(sourceLocation: SourceLocation = #_sourceLocation) throws {
        expectFailure(try agent.run(["vault", "show"], sourceLocation: sourceLocation), 64, mentioning: "passphrase", sourceLocation: sourceLocation)
    }

    @Test("unlock, then commands run with no passphrase at all; status; lock forgets, and a second lock says so")
    func unlockServesCommands() throws {
        try expectLocked()
        let unlocked = try agent.unlock()
        let pid = try agent.pid(unlocked)
        #expect(unlocked["vault"] as? String == agent.vault)
        #expect(unlocked["replaced"] as? Bool == false)
        #expect(unlocked["seconds"] as? Int == 900, "the default is 15 minutes")
        let socket = try #require(unlocked["socket"] as? String)
        #expect(socket.hasPrefix(agent.agentFolder + "/") && socket.hasSuffix(".sock"))
        #expect(agent.isAlive(pid))
        // The folder is this user's alone, the socket 0600, and nothing else is in it.
        #expect(try posixMode(agent.agentFolder) == 0o700)
        #expect(try posixMode(socket) == 0o600)
        #expect(agent.agentFiles() == [(socket as NSString).lastPathComponent])

        try showWithoutPassphrase()
        expectSuccess(try agent.run(["vault", "item", "add", "--service", "api", "--account", "me"], stdin: .text("tok3n\n")))
        let got = try agent.run(["vault", "item", "get", "--service", "api", "--account", "me"])
        expectSuccess(got)
        #expect(got.out == "tok3n")

        let status = try agent.run(["unlock", "--status", "--json"])
        expectSuccess(status)
        let report = try jsonObject(status)
        #expect(report["unlocked"] as? Bool == true && report["pid"] as? Int == Int(pid) && report["vault"] as? String == agent.vault, "\(report)")
        let text = try agent.run(["unlock", "--status"])
        #expect(text.status == 0 && text.out.hasPrefix("Unlocked: an agent (pid \(pid))"), "\(text)")

        let lock = try agent.run(["lock", "--json"])
        expectSuccess(lock)
        #expect(try jsonObject(lock)["locked"] as? Bool == true)
        #expect(agent.waitGone(pid), "the agent still runs after lock")
        #expect(agent.agentFiles().isEmpty, "the socket is left: \(agent.agentFiles())")
        try expectLocked()

        let again = try agent.run(["lock"])
        expectSuccess(again)
        #expect(again.out.contains("nothing to lock"), "\(again)")
        #expect(try jsonObject(try agent.run(["lock", "--json"]))["locked"] as? Bool == false)
        let none = try agent.run(["unlock", "--status", "--json"])
        expectSuccess(none)
        #expect(try jsonObject(none)["unlocked"] as? Bool == false)
    }

    @Test("precedence: the agent beats COFFER_PASSPHRASE, COFFER_PASSPHRASE_FILE and COFFER_KEY_FILE; --passphrase-file and --key-file beat the agent")
    func precedence() throws {
        let key = sandbox.path("k.key")
        expectSuccess(try agent.run(["vault", "keyfile", "--output", key], env: withPassphrase))
        try agent.unlock()
        let wrong = try sandbox.write("wrong.txt", CofferProcess.wrongPassphrase + "\n")
        let otherKey = try sandbox.writePrivate("other.key", randomBytes(32))
        try showWithoutPassphrase(env: ["COFFER_PASSPHRASE": CofferProcess.wrongPassphrase])
        try showWithoutPassphrase(env: ["COFFER_PASSPHRASE_FILE": wrong])
        try showWithoutPassphrase(env: ["COFFER_KEY_FILE": otherKey])
        // The flags are explicit: they are used, and a wrong one fails.
        expectFailure(try agent.run(["vault", "show", "--passphrase-file", wrong]), 77)
        expectFailure(try agent.run(["vault", "show", "--key-file", otherKey]), 77)
        expectSuccess(try agent.run(["vault", "show", "--key-file", key]))
        // unlock itself never takes the key from the agent: it asks again.
        expectFailure(try agent.run(["unlock"], env: ["COFFER_PASSPHRASE": CofferProcess.wrongPassphrase]), 77)
        expectFailure(try agent.run(["unlock"]), 64)
    }

    @Test("--for 2s: after it, commands need a passphrase again (64), the agent is gone and its socket removed")
    func expiry() throws {
        let unlocked = try agent.unlock(["--for", "2s"])
        let pid = try agent.pid(unlocked)
        #expect(unlocked["seconds"] as? Int == 2)
        try showWithoutPassphrase()
        #expect(agent.waitGone(pid, seconds: 8), "the agent outlived its 2 s")
        #expect(agent.agentFiles().isEmpty, "\(agent.agentFiles())")
        try expectLocked()
    }

    @Test("a signal stops the agent: it forgets the key and removes its socket", arguments: [SIGTERM, SIGINT, SIGHUP])
    func signals(_ signal: Int32) throws {
        let pid = try agent.pid(try agent.unlock())
        try showWithoutPassphrase()
        kill(pid, signal)
        #expect(agent.waitGone(pid), "the agent ignored signal \(signal)")
        #expect(agent.agentFiles().isEmpty, "\(agent.agentFiles())")
        try expectLocked()
    }

    @Test("an agent killed with -9 leaves only its socket, no key bytes anywhere; commands fall back and a new unlock replaces the socket")
    func killedAgent() throws {
        let key = try agent.vaultKey()
        let pid = try agent.pid(try agent.unlock())
        // Neither its command line nor its environment holds the key or the passphrase.
        for file in ["cmdline", "environ"] {
            let bytes = try #require(FileManager.default.contents(atPath: "/proc/\(pid)/\(file)"))
            for (form, needle) in keyEncodings(key) { #expect(bytes.range(of: needle) == nil, "/proc/\(pid)/\(file) holds the key (\(form))") }
            #expect(!contains(bytes, CofferProcess.passphrase), "/proc/\(pid)/\(file) holds the passphrase")
        }
        let environment = try #require(FileManager.default.contents(atPath: "/proc/\(pid)/environ"))
        #expect(environment.split(separator: 0).map { String(decoding: $0, as: UTF8.self) } == ["XDG_RUNTIME_DIR=\(agent.runtime)"])

        kill(pid, SIGKILL)
        #expect(agent.waitGone(pid))
        let files = agent.agentFiles()
        #expect(files.count == 1 && files.first?.hasSuffix(".sock") == true, "the runtime folder holds more than the stale socket: \(files)")
        #expect(try folderContents(URL(fileURLWithPath: agent.runtime)) == ["coffer"])
        #expect(filesHolding(key, under: sandbox.root.path).isEmpty, "key bytes on disk: \(filesHolding(key, under: sandbox.root.path))")

        // A stale socket: commands fall back to the usual route, at once.
        let fallback = try agent.run(["vault", "show"])
        expectFailure(fallback, 64)
        #expect(fallback.seconds < 5)
        expectSuccess(try agent.run(["vault", "show"], env: withPassphrase))
        let status = try agent.run(["unlock", "--status", "--json"])
        expectSuccess(status)
        #expect(try jsonObject(status)["unlocked"] as? Bool == false)

        // A new unlock takes the stale socket's place.
        let again = try agent.unlock()
        #expect(again["replaced"] as? Bool == false)
        try showWithoutPassphrase()
        #expect(agent.agentFiles().count == 1)
    }

    @Test("unlock while an agent runs replaces it")
    func unlockReplaces() throws {
        let first = try agent.pid(try agent.unlock(["--for", "1h"]))
        let second = try agent.unlock(["--for", "30m"])
        #expect(second["replaced"] as? Bool == true)
        #expect(second["seconds"] as? Int == 1800)
        #expect(agent.waitGone(first), "the replaced agent still runs")
        #expect(try agent.pid(second) != first)
        try showWithoutPassphrase()
        #expect(agent.agentPIDs() == [try agent.pid(second)])
        let text = try agent.run(["unlock", "--for", "1h30m"], env: withPassphrase)
        expectSuccess(text)
        #expect(text.out.contains("(1h30m)") && text.out.contains("The agent that held it before was stopped."), "\(text)")
    }

    @Test("durations: bad values are 64, before any passphrase is asked for", arguments: ["0s", "25h", "10", "5x", "-1m", "", "m", "1.5h", "999999999s", "1h 30m"])
    func badDurations(_ value: String) throws {
        expectFailure(try agent.run(["unlock", "--for", value], env: withPassphrase), 64)
        #expect(agent.agentPIDs().isEmpty)
    }

    @Test("--status with --for is 64; unlock of a missing vault is 66")
    func unlockUsage() throws {
        expectFailure(try agent.run(["unlock", "--status", "--for", "1m"]), 64)
        expectFailure(try agent.run(["unlock"], vault: sandbox.path("none.coffer"), env: withPassphrase), 66)
        expectFailure(try agent.run(["lock"], vault: sandbox.path("none.coffer")), 66)
    }

    @Test("a runtime folder that is open to others, a symbolic link, or another user's is refused (77), before the passphrase")
    func unsafeFolders() throws {
        let folder = agent.agentFolder
        try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: false, attributes: [.posixPermissions: 0o755])
        // No passphrase is given: the folder is refused first.
        expectFailure(try agent.run(["unlock"]), 77, mentioning: "0755")
        try sandbox.chmod(folder, 0o700)
        #expect(chown(folder, 65534, 65534) == 0)
        expectFailure(try agent.run(["unlock"], env: withPassphrase), 77, mentioning: "belongs to user id 65534")
        try FileManager.default.removeItem(atPath: folder)
        let elsewhere = sandbox.path("elsewhere")
        try FileManager.default.createDirectory(atPath: elsewhere, withIntermediateDirectories: false, attributes: [.posixPermissions: 0o700])
        try FileManager.default.createSymbolicLink(atPath: folder, withDestinationPath: elsewhere)
        expectFailure(try agent.run(["unlock"], env: withPassphrase), 77, mentioning: "symbolic link")
        #expect(agent.agentPIDs().isEmpty)
        #expect(try folderContents(URL(fileURLWithPath: elsewhere)).isEmpty)
    }

    @Test("without XDG_RUNTIME_DIR the socket is in /tmp/coffer-UID, mode 0700")
    func defaultFolder() throws {
        let r = try sandbox.coffer(["unlock", "--json", "--for", "1m", "--vault", agent.vault], env: withPassphrase)
        expectSuccess(r)
        let socket = try #require(try jsonObject(r)["socket"] as? String)
        #expect(socket.hasPrefix("/tmp/coffer-\(getuid())/"), "\(socket)")
        #expect(try posixMode("/tmp/coffer-\(getuid())") == 0o700)
        expectSuccess(try sandbox.coffer(["vault", "show", "--vault", agent.vault]))
        expectSuccess(try sandbox.coffer(["lock", "--vault", agent.vault]))
        #expect(!FileManager.default.fileExists(atPath: socket))
    }

    @Test("/tmp/coffer-UID made first by another user: unlock puts the socket under the home, says so once on stderr, and later commands find the agent there",
          .enabled(if: runuser != nil, "needs root, runuser and the user nobody, to run coffer as a user whose /tmp folder root can take first"))
    func squattedTmpFolder() throws {
        let runuser = try #require(Self.runuser)
        let binary = try copyOfCofferForAll()
        // nobody's home (short: a socket path has at most 107 bytes), vault and passphrase file.
        let home = "/tmp/cfh-" + UUID().uuidString.prefix(8).lowercased()
        try FileManager.default.createDirectory(atPath: home, withIntermediateDirectories: false, attributes: [.posixPermissions: 0o700])
        defer { try? FileManager.default.removeItem(atPath: home) }
        let vault = home + "/vault.coffer"
        try FileManager.default.copyItem(atPath: agent.vault, toPath: vault)
        let passphrase = home + "/pass.txt"
        try Data((CofferProcess.passphrase + "\n").utf8).write(to: URL(fileURLWithPath: passphrase))
        for path in [home, vault, passphrase] { #expect(chown(path, 65534, 65534) == 0) }
        // root takes nobody's folder in /tmp first (a leftover of this test is root's too).
        let squatted = "/tmp/coffer-65534"
        var st = stat()
        if lstat(squatted, &st) == 0 {
            try #require(st.st_uid == 0, "\(squatted) exists and is not a leftover of this test")
            try FileManager.default.removeItem(atPath: squatted)
        }
        try FileManager.default.createDirectory(atPath: squatted, withIntermediateDirectories: false, attributes: [.posixPermissions: 0o700])
        defer { try? FileManager.default.removeItem(atPath: squatted) }
        func asNobody(_ arguments: [String]) throws -> CofferResult {
            try CofferProcess.run(["-u", "nobody", "--", "/usr/bin/env", "-i", "HOME=\(home)", binary] + arguments + ["--vault", vault],
                                  environment: sandbox.baseEnvironment, stdin: .null, directory: URL(fileURLWithPath: "/"),
                                  executable: URL(fileURLWithPath: runuser))
        }
        let folder = home + "/.cache/coffer/agent"
        let unlocked = try asNobody(["unlock", "--json", "--passphrase-file", passphrase])
        #expect(unlocked.status == 0, "\(unlocked)")
        #expect(unlocked.err == "note: \(squatted) belongs to another user (user id 0); the agent's socket is in \(folder)\n", "\(unlocked)")
        let pid = try agent.pid(try jsonObject(unlocked))
        defer { kill(pid, SIGKILL) }
        let socket = try #require(try jsonObject(unlocked)["socket"] as? String)
        #expect(socket.hasPrefix(folder + "/"), "\(socket)")
        #expect(try posixMode(folder) == 0o700)
        #expect(try folderContents(URL(fileURLWithPath: squatted)).isEmpty)
        // Later commands find the agent there: no passphrase, no note.
        let shown = try asNobody(["vault", "show", "--json"])
        expectSuccess(shown)
        #expect((try? jsonObject(shown))?["name"] as? String == "Alice", "\(shown)")
        let status = try asNobody(["unlock", "--status"])
        expectSuccess(status)
        #expect(status.out.hasPrefix("Unlocked"), "\(status)")
        expectSuccess(try asNobody(["lock"]))
        #expect(agent.waitGone(pid))
        #expect(!FileManager.default.fileExists(atPath: socket))
    }

    @Test("vault passwd --rekey stops the agent, whose key no longer opens the file")
    func rekeyStopsAgent() throws {
        let pid = try agent.pid(try agent.unlock())
        let r = try agent.run(["vault", "passwd", "--rekey"], env: ["COFFER_NEW_PASSPHRASE": CofferProcess.newPassphrase])
        expectSuccess(r)
        #expect(agent.waitGone(pid))
        try expectLocked()
        expectSuccess(try agent.run(["vault", "show"], env: ["COFFER_PASSPHRASE": CofferProcess.newPassphrase]))
    }

    @Test("hostile clients of the same user: malformed frames, another vault, a silent peer; each is refused and the agent keeps serving")
    func hostileClients() throws {
        let unlocked = try agent.unlock()
        let socket = try #require(unlocked["socket"] as? String)
        let vault = try #require(unlocked["vault"] as? String)
        func exchange(_ bytes: [UInt8]) throws -> AgentResponse {
            let fd = try AgentSocket.connect(to: socket)
            defer { close(fd) }
            _ = bytes.withUnsafeBytes { write(fd, $0.baseAddress!, $0.count) }
            return try AgentResponse.decode(try AgentSocket.receive(fd))
        }
        func frame(_ body: [UInt8]) -> [UInt8] { BigEndian.bytes(UInt32(body.count)) + body }
        let good = AgentRequest.key(vault: vault).encoded()
        let cases: [(String, [UInt8])] = [
            ("an empty frame", frame([])),
            ("a frame over the limit", BigEndian.bytes(UInt32(1 << 20)) + [1, 1]),
            ("another version", frame([2] + good.dropFirst())),
            ("an unknown kind", frame([1, 9] + good.dropFirst(2))),
            ("a byte after the end", frame(good + [0])),
            ("a text length past the end", frame([1, 1, 0, 0, 0, 99, 0x2f])),
            ("another vault", frame(AgentRequest.key(vault: sandbox.path("other.coffer")).encoded())),
        ]
        for (what, bytes) in cases {
            switch try exchange(bytes) {
            case .refused: break
            default: Issue.record("\(what) was not refused")
            }
        }
        // One that ends in the middle, and one that says nothing: the agent drops them.
        let partial = try AgentSocket.connect(to: socket)
        _ = [UInt8](frame(good).prefix(5)).withUnsafeBytes { write(partial, $0.baseAddress!, $0.count) }
        close(partial)
        let silent = try AgentSocket.connect(to: socket)
        defer { close(silent) }
        // Queued behind the silent one, a command still gets the key.
        try showWithoutPassphrase()
        guard case .key(let key) = try exchange(frame(good)) else { Issue.record("a good request got no key"); return }
        #expect(key.bytes.unsafeCopiedBytes() == (try agent.vaultKey()))
    }

    /// A copy of coffer that any user (nobody too) may run, in a folder of the sandbox's.
    func copyOfCofferForAll() throws -> String {
        let binFolder = sandbox.path("bin")
        try FileManager.default.createDirectory(atPath: binFolder, withIntermediateDirectories: false, attributes: [.posixPermissions: 0o755])
        let binary = binFolder + "/coffer"
        try FileManager.default.copyItem(atPath: try CofferProcess.executableURL().path, toPath: binary)
        try sandbox.chmod(binary, 0o755)
        return binary
    }

    /// `runuser`, when it is here, the user nobody exists and the tests run as root.
    static let runuser: String? = {
        guard getuid() == 0, getpwnam("nobody") != nil else { return nil }
        return ["/usr/sbin/runuser", "/sbin/runuser", "/usr/bin/runuser"].first { FileManager.default.isExecutableFile(atPath: $0) }
    }()

    @Test("another user cannot use the agent: with the socket open to all, the peer check refuses them, and the log holds no secret",
          .enabled(if: runuser != nil, "needs root, runuser and the user nobody, to run coffer as another user"))
    func otherUserRefused() throws {
        let runuser = try #require(Self.runuser)
        let binary = try copyOfCofferForAll()

        let log = sandbox.path("agent.log")
        let unlocked = try agent.unlock(env: ["COFFER_AGENT_LOG": log])
        let pid = try agent.pid(unlocked)
        let socket = try #require(unlocked["socket"] as? String)
        // Open everything to everyone, so that only the agent's own check stands in the way.
        for path in [agent.runtime, agent.agentFolder] { try sandbox.chmod(path, 0o777) }
        #expect(Glibc.chmod(socket, 0o777) == 0)
        try sandbox.chmod(agent.vault, 0o644)

        func asNobody(_ arguments: [String]) throws -> CofferResult {
            try CofferProcess.run(["-u", "nobody", "--", "/usr/bin/env", "-i", "HOME=/tmp", "XDG_RUNTIME_DIR=\(agent.runtime)",
                                   binary] + arguments + ["--vault", agent.vault],
                                  environment: sandbox.baseEnvironment, stdin: .null, directory: URL(fileURLWithPath: "/"),
                                  executable: URL(fileURLWithPath: runuser))
        }
        // nobody reads the vault file but gets no key: the command wants a passphrase.
        expectFailure(try asNobody(["vault", "show"]), 64, mentioning: "passphrase")
        expectFailure(try asNobody(["unlock", "--status"]), 77, mentioning: "user id 65534")
        expectFailure(try asNobody(["lock"]), 77)
        // The agent still runs and serves its user.
        #expect(agent.isAlive(pid))
        try showWithoutPassphrase()

        let logged = try sandbox.read(log)
        let text = String(decoding: logged, as: UTF8.self)
        #expect(text.components(separatedBy: "refused a process of another user").count - 1 == 3, "\(text)")
        #expect(text.contains("uid=65534"), "\(text)")
        for (form, needle) in keyEncodings(try agent.vaultKey()) { #expect(logged.range(of: needle) == nil, "the log holds the key (\(form))") }
        #expect(!contains(logged, CofferProcess.passphrase))
        #expect(try posixMode(log) == 0o600)
    }

    @Test("the agent is not dumpable: run as nobody, its /proc entries belong to root, not to nobody, so nobody's other processes cannot read its memory",
          .enabled(if: runuser != nil, "needs root, runuser and the user nobody, to run the agent as another user than root"))
    func notDumpable() throws {
        let runuser = try #require(Self.runuser)
        let binary = try copyOfCofferForAll()
        // nobody's own vault, passphrase file and runtime folder.
        let home = sandbox.path("n") // short: a socket path has at most 107 bytes
        try FileManager.default.createDirectory(atPath: home + "/r", withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
        let vault = home + "/vault.coffer"
        try FileManager.default.copyItem(atPath: agent.vault, toPath: vault)
        let passphrase = try sandbox.write("n/pass.txt", CofferProcess.passphrase + "\n")
        for path in [home, home + "/r", vault, passphrase] { #expect(chown(path, 65534, 65534) == 0) }
        func asNobody(_ arguments: [String]) throws -> CofferResult {
            try CofferProcess.run(["-u", "nobody", "--", "/usr/bin/env", "-i", "HOME=\(home)", "XDG_RUNTIME_DIR=\(home)/r", binary]
                                  + arguments + ["--vault", vault],
                                  environment: sandbox.baseEnvironment, stdin: .null, directory: URL(fileURLWithPath: "/"),
                                  executable: URL(fileURLWithPath: runuser))
        }
        let unlocked = try asNobody(["unlock", "--json", "--passphrase-file", passphrase])
        expectSuccess(unlocked)
        let pid = try agent.pid(try jsonObject(unlocked))
        defer { kill(pid, SIGKILL) }
        let status = String(decoding: try #require(FileManager.default.contents(atPath: "/proc/\(pid)/status")), as: UTF8.self)
        #expect(status.contains("\nUid:\t65534\t65534\t65534\t65534\n"), "the agent does not run as nobody:\n\(status)")
        var st = stat()
        #expect(lstat("/proc/\(pid)/mem", &st) == 0 && st.st_uid == 0, "/proc/\(pid)/mem belongs to uid \(st.st_uid): the agent is dumpable")
        expectSuccess(try asNobody(["vault", "show"]))
        expectSuccess(try asNobody(["lock"]))
        #expect(agent.waitGone(pid))
    }

    @Test("through a server, commands take the key from the agent too")
    func throughServer() async throws {
        try await ServerCommandTests.withServer([.alice]) { team, server in
            let env = ["XDG_RUNTIME_DIR": agent.runtime]
            func alice(_ arguments: [String], env extra: [String: String] = [:]) throws -> CofferResult {
                try team.sandbox.coffer(arguments + ["--vault", team.vault(.alice), "--server", server.url], env: env.merging(extra) { _, new in new })
            }
            let unlocked = try alice(["unlock", "--json"], env: withPassphrase)
            expectSuccess(unlocked)
            let pid = try agent.pid(try jsonObject(unlocked))
            defer { kill(pid, SIGKILL) } // the team's sandbox is not the one whose agents are cleaned up
            expectSuccess(try alice(["zone", "create", "Notes"]))
            expectSuccess(try alice(["record", "put", "Notes", "n1", "--type", "Note", "--secret", "pin=1234"]))
            let got = try alice(["record", "get", "Notes", "n1", "--json"])
            expectSuccess(got)
            #expect(((try jsonObject(got))["encryptedValues"] as? [String: Any])?["pin"] as? String == "1234")
            expectSuccess(try alice(["lock"]))
            #expect(agent.waitGone(pid))
            expectFailure(try alice(["zone", "list"]), 64)
        }
    }
}

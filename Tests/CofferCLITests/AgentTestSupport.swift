import CofferCrypto
import CofferTestSupport
import CofferVault
import Foundation
import Testing
#if canImport(Glibc)
import Glibc
#endif

/// A sandbox for the unlock agent's tests: a runtime folder of its own (`XDG_RUNTIME_DIR`, mode
/// 0700), a vault, and, when it goes, every agent process started for a vault of the sandbox
/// killed, so that no test leaves one running.
final class AgentSandbox: Sendable {
    let sandbox: Sandbox
    let vault: String

    init() throws {
        sandbox = try Sandbox()
        try FileManager.default.createDirectory(atPath: sandbox.path("run"), withIntermediateDirectories: false,
                                                attributes: [.posixPermissions: 0o700])
        vault = try sandbox.initVault()
    }

    deinit {
        for pid in agentPIDs() { kill(pid, SIGKILL) }
    }

    /// `XDG_RUNTIME_DIR`.
    var runtime: String { sandbox.path("run") }
    /// Where the agents' sockets are.
    var agentFolder: String { runtime + "/coffer" }

    /// Runs `coffer ARGS --vault VAULT` with the sandbox's runtime folder and no passphrase
    /// unless `env` gives one.
    @discardableResult
    func run(_ arguments: [String], vault: String? = nil, env: [String: String] = [:], stdin: Stdin = .null,
             sourceLocation: SourceLocation = #_sourceLocation) throws -> CofferResult {
        try sandbox.coffer(arguments + ["--vault", vault ?? self.vault], env: ["XDG_RUNTIME_DIR": runtime].merging(env) { _, new in new },
                           stdin: stdin, sourceLocation: sourceLocation)
    }

    /// `unlock ARGS --json` with the passphrase, expecting success; its JSON.
    @discardableResult
    func unlock(_ arguments: [String] = [], vault: String? = nil, env: [String: String] = [:],
                sourceLocation: SourceLocation = #_sourceLocation) throws -> [String: Any] {
        let r = try run(["unlock", "--json"] + arguments, vault: vault, env: withPassphrase.merging(env) { _, new in new },
                        sourceLocation: sourceLocation)
        expectSuccess(r, sourceLocation: sourceLocation)
        try #require(r.status == 0, "coffer unlock failed\n\(r)", sourceLocation: sourceLocation)
        return try jsonObject(r, sourceLocation: sourceLocation)
    }

    /// The pid `unlock --json` printed.
    func pid(_ unlocked: [String: Any], sourceLocation: SourceLocation = #_sourceLocation) throws -> pid_t {
        try #require((unlocked["pid"] as? Int).map { pid_t($0) }, "no pid in \(unlocked)", sourceLocation: sourceLocation)
    }

    /// The agent processes (not zombies) whose command line names a file of this sandbox.
    func agentPIDs() -> [pid_t] {
        let root = sandbox.root.path
        return ((try? FileManager.default.contentsOfDirectory(atPath: "/proc")) ?? []).compactMap { name in
            guard let pid = pid_t(name), isAlive(pid),
                  let cmdline = FileManager.default.contents(atPath: "/proc/\(name)/cmdline") else { return nil }
            let words = cmdline.split(separator: 0).map { String(decoding: $0, as: UTF8.self) }
            return words.contains("agent-run") && words.contains(where: { $0.hasPrefix(root) }) ? pid : nil
        }
    }

    /// Whether `pid` runs (a zombie, which no parent reaped, does not).
    func isAlive(_ pid: pid_t) -> Bool {
        guard let stat = FileManager.default.contents(atPath: "/proc/\(pid)/stat"),
              let close = stat.lastIndex(of: UInt8(ascii: ")")), close + 2 < stat.count else { return false }
        return stat[close + 2] != UInt8(ascii: "Z") && stat[close + 2] != UInt8(ascii: "X")
    }

    /// Waits up to `seconds` for `pid` to end; whether it did.
    func waitGone(_ pid: pid_t, seconds: Double = 5) -> Bool {
        let end = Date().addingTimeInterval(seconds)
        while Date() < end {
            if !isAlive(pid) { return true }
            usleep(20_000)
        }
        return !isAlive(pid)
    }

    /// The names in the agents' folder.
    func agentFiles() -> [String] { (try? folderContents(URL(fileURLWithPath: agentFolder))) ?? [] }

    /// The vault key, read with the library (the test's own way in, not the agent's).
    func vaultKey(_ vault: String? = nil) throws -> [UInt8] {
        let opened = try Vault.open(at: URL(fileURLWithPath: vault ?? self.vault),
                                    passphrase: SecureBytes(copying: Array(CofferProcess.passphrase.utf8)))
        return opened.vaultKey.bytes.unsafeCopiedBytes()
    }
}

/// The forms in which key bytes could be written down: raw, hex, base64 (at each alignment).
func keyEncodings(_ key: [UInt8]) -> [(String, Data)] {
    let raw = Data(key)
    let hex = key.map { String(format: "%02x", $0) }.joined()
    var forms: [(String, Data)] = [("raw", raw), ("hex", Data(hex.utf8)), ("HEX", Data(hex.uppercased().utf8))]
    for shift in 0..<3 {
        let encoded = (Data(repeating: 0, count: shift) + raw).base64EncodedString()
        let inner = String(encoded.dropFirst((shift * 8 + 5) / 6).prefix(36))
        forms.append(("base64 (offset \(shift))", Data(inner.utf8)))
    }
    return forms
}

/// Every regular file under `folder` (recursively) that holds `key` in any of ``keyEncodings(_:)``.
func filesHolding(_ key: [UInt8], under folder: String) -> [String] {
    var found = [String]()
    let enumerator = FileManager.default.enumerator(atPath: folder)
    while let name = enumerator?.nextObject() as? String {
        let path = folder + "/" + name
        var st = stat()
        guard lstat(path, &st) == 0, st.st_mode & S_IFMT == S_IFREG, let bytes = FileManager.default.contents(atPath: path) else { continue }
        for (form, needle) in keyEncodings(key) where bytes.range(of: needle) != nil { found.append("\(name) (\(form))") }
    }
    return found
}

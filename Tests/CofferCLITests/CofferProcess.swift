import CofferTestSupport
import Foundation
import Testing

// Runs the built `coffer` executable as a separate process, the way a user or a script does.

/// What the child process reads on stdin. Never inherited, so no prompt can ever wait for a person.
enum Stdin: Sendable {
    case null
    case data(Data)

    static func text(_ text: String) -> Stdin { .data(Data(text.utf8)) }
}

/// One finished run of `coffer`.
struct CofferResult: Sendable, CustomStringConvertible {
    let arguments: [String]
    /// The exit status; 128 + signal number when the process died from a signal.
    let status: Int32
    let stdout: Data
    let stderr: Data
    let seconds: Double
    let timedOut: Bool

    var out: String { String(decoding: stdout, as: UTF8.self) }
    var err: String { String(decoding: stderr, as: UTF8.self) }

    /// stdout split into lines (without the final empty piece after the last newline).
    var outLines: [String] {
        var lines = out.components(separatedBy: "\n")
        if lines.last == "" { lines.removeLast() }
        return lines
    }

    var description: String {
        "coffer \(arguments.joined(separator: " ")) → status \(status)\(timedOut ? " (timed out)" : "")\n--- stdout:\n\(out)\n--- stderr:\n\(err)"
    }
}

struct CofferProcessError: Error, CustomStringConvertible {
    let description: String
}

enum CofferProcess {
    /// A run that takes longer is killed and fails its test.
    static let timeout: TimeInterval = 30

    /// Distinctive passphrases. No output of any run may ever contain one of them.
    static let passphrase = "Quokka-LANTERN-4471-vellum-passphrase"
    static let newPassphrase = "Narwhal-SPINDLE-9082-gossamer-passphrase"
    static let wrongPassphrase = "Badger-COMPASS-3316-wrong-passphrase"
    static let forbiddenInOutput = [passphrase, newPassphrase, wrongPassphrase]

    /// The one line `vault init --kdf min` prints on stderr.
    static let minKDFWarning = "warning: the min Argon2id preset is for tests only; use it for throwaway vaults"

    /// `coffer`, next to the test bundle: the folder of `/proc/self/exe`.
    static func executableURL() throws -> URL {
        let exe: String
        do {
            exe = try FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/exe")
        } catch {
            throw CofferProcessError(description: "cannot resolve /proc/self/exe to find the coffer binary: \(error)")
        }
        let url = URL(fileURLWithPath: exe).deletingLastPathComponent().appendingPathComponent("coffer")
        guard FileManager.default.isExecutableFile(atPath: url.path) else {
            throw CofferProcessError(description: """
                the coffer executable is missing at \(url.path) (next to the test bundle \(exe)); \
                build it first: swift build --build-tests
                """)
        }
        return url
    }

    /// Runs `coffer` (or `executable`) with `arguments`, exactly `environment`, `stdin`, in `directory`.
    /// Kills it and records a failure after `timeout` seconds. (Started with `posix_spawn`, not
    /// Foundation's `Process`: see `ChildProcess`.)
    static func run(_ arguments: [String], environment: [String: String], stdin: Stdin, directory: URL, executable: URL? = nil,
                    sourceLocation: SourceLocation = #_sourceLocation) throws -> CofferResult {
        let path = try (executable ?? executableURL()).path
        let input: Data? = switch stdin {
        case .null: nil
        case .data(let data): data
        }
        let run: ChildResult
        do {
            run = try ChildProcess.run(path, arguments, environment: environment, stdin: input, directory: directory.path, timeout: timeout)
        } catch {
            throw CofferProcessError(description: "cannot start \(path): \(error)")
        }
        let result = CofferResult(arguments: arguments, status: run.status, stdout: run.stdout, stderr: run.stderr,
                                  seconds: run.seconds, timedOut: run.timedOut)
        if run.timedOut {
            Issue.record("'coffer \(arguments.joined(separator: " "))' did not finish within \(Int(timeout)) s and was killed\n\(result)",
                         sourceLocation: sourceLocation)
        }
        for secret in forbiddenInOutput where result.out.contains(secret) || result.err.contains(secret) {
            Issue.record("a passphrase appears in the output of 'coffer \(arguments.joined(separator: " "))'\n\(result)",
                         sourceLocation: sourceLocation)
        }
        return result
    }
}

/// A temporary folder for one test: HOME, XDG_DATA_HOME and every file the test makes live in it.
final class Sandbox: Sendable {
    let root: URL

    init() throws {
        let base = FileManager.default.temporaryDirectory.appendingPathComponent("coffer-cli-tests", isDirectory: true)
        root = base.appendingPathComponent(UUID().uuidString, isDirectory: true).resolvingSymlinksInPath()
        try FileManager.default.createDirectory(at: root, withIntermediateDirectories: true)
        try FileManager.default.createDirectory(at: dataHome, withIntermediateDirectories: true)
    }

    deinit { try? FileManager.default.removeItem(at: root) }

    var home: URL { root }
    var dataHome: URL { root.appendingPathComponent("xdg-data", isDirectory: true) }

    /// An absolute path inside the sandbox.
    func path(_ name: String) -> String { root.appendingPathComponent(name).path }

    /// The environment every run starts from.
    var baseEnvironment: [String: String] {
        [
            "PATH": ProcessInfo.processInfo.environment["PATH"] ?? "/usr/bin:/bin",
            "HOME": home.path,
            "XDG_DATA_HOME": dataHome.path,
        ]
    }

    /// Runs `coffer` in the sandbox with the base environment plus `env`.
    @discardableResult
    func coffer(_ arguments: [String], env: [String: String] = [:], stdin: Stdin = .null,
                sourceLocation: SourceLocation = #_sourceLocation) throws -> CofferResult {
        try CofferProcess.run(arguments, environment: baseEnvironment.merging(env) { _, new in new },
                              stdin: stdin, directory: root, sourceLocation: sourceLocation)
    }

    /// Runs `/bin/sh -c script` with `arguments` as `$0`, `$1`, …: for what a `String` argument
    /// cannot carry (bytes that are not UTF-8).
    func shell(_ script: String, _ arguments: [String], env: [String: String] = [:],
               sourceLocation: SourceLocation = #_sourceLocation) throws -> CofferResult {
        try CofferProcess.run(["-c", script] + arguments, environment: baseEnvironment.merging(env) { _, new in new }, stdin: .null,
                              directory: root, executable: URL(fileURLWithPath: "/bin/sh"), sourceLocation: sourceLocation)
    }

    /// `vault init --kdf min` at `vault` (a sandbox-relative name), expecting success. Returns the absolute path.
    @discardableResult
    func initVault(_ vault: String = "vault.coffer", name: String = "Alice", email: String? = "alice@example.com",
                   passphrase: String = CofferProcess.passphrase,
                   sourceLocation: SourceLocation = #_sourceLocation) throws -> String {
        let path = self.path(vault)
        var args = ["vault", "init", "--name", name, "--kdf", "min", "--vault", path]
        if let email { args += ["--email", email] }
        let r = try coffer(args, env: ["COFFER_PASSPHRASE": passphrase], sourceLocation: sourceLocation)
        expectSuccess(r, kdfWarning: true, sourceLocation: sourceLocation)
        try #require(r.status == 0, "vault init failed\n\(r)", sourceLocation: sourceLocation)
        return path
    }

    /// `vault show --json` with the passphrase, expecting success.
    func showJSON(_ vault: String, env: [String: String] = ["COFFER_PASSPHRASE": CofferProcess.passphrase],
                  sourceLocation: SourceLocation = #_sourceLocation) throws -> [String: Any] {
        let r = try coffer(["vault", "show", "--json", "--vault", vault], env: env, sourceLocation: sourceLocation)
        expectSuccess(r, sourceLocation: sourceLocation)
        return try jsonObject(r, sourceLocation: sourceLocation)
    }

    func write(_ name: String, _ data: Data) throws -> String {
        let p = path(name)
        try data.write(to: URL(fileURLWithPath: p))
        return p
    }

    func write(_ name: String, _ text: String) throws -> String { try write(name, Data(text.utf8)) }

    /// Writes a file only its owner may read or write (mode 0600), as a key file must be.
    func writePrivate(_ name: String, _ data: Data) throws -> String {
        let p = try write(name, data)
        try chmod(p, 0o600)
        return p
    }

    func chmod(_ path: String, _ mode: Int) throws {
        try FileManager.default.setAttributes([.posixPermissions: mode], ofItemAtPath: path)
    }

    func read(_ path: String) throws -> Data { try Data(contentsOf: URL(fileURLWithPath: path)) }

    func exists(_ path: String) -> Bool { FileManager.default.fileExists(atPath: path) }
}

/// The unlock environment with the standard passphrase.
let withPassphrase = ["COFFER_PASSPHRASE": CofferProcess.passphrase]

// MARK: - Expectations

/// Exit 0, and nothing on stderr (but the `--kdf min` warning when `kdfWarning`) besides the
/// notes of a write that adds record types or fields to a zone's schema (`note: new …`, see
/// ``schemaNotes(_:)``), which the schema tests check where they mean to.
func expectSuccess(_ r: CofferResult, kdfWarning: Bool = false, sourceLocation: SourceLocation = #_sourceLocation) {
    #expect(r.status == 0, "expected success\n\(r)", sourceLocation: sourceLocation)
    let expected = kdfWarning ? CofferProcess.minKDFWarning + "\n" : ""
    let rest = r.err.split(separator: "\n", omittingEmptySubsequences: false).filter { !$0.hasPrefix("note: new ") }.joined(separator: "\n")
    #expect(rest == expected, "unexpected stderr\n\(r)", sourceLocation: sourceLocation)
}

/// The `note: new …` lines of stderr: what a write added to a zone's schema.
func schemaNotes(_ r: CofferResult) -> [String] {
    r.err.split(separator: "\n").filter { $0.hasPrefix("note: new ") }.map(String.init)
}

/// The error contract: the exit `status`, nothing on stdout, exactly one line on stderr that
/// starts with `error: ` and says something, containing `mentioning` when given.
func expectError(_ r: CofferResult, _ status: Int32, mentioning: String? = nil,
                 sourceLocation: SourceLocation = #_sourceLocation) {
    #expect(r.status == status, "expected exit \(status)\n\(r)", sourceLocation: sourceLocation)
    #expect(r.stdout.isEmpty, "expected nothing on stdout\n\(r)", sourceLocation: sourceLocation)
    let json = r.arguments.contains("--json")
    #expect(isOneErrorLine(r.err, json: json ? r.status : nil),
            "expected exactly one \(json ? "{\"error\", \"code\"} JSON" : "'error: …'") line on stderr\n\(r)", sourceLocation: sourceLocation)
    if let mentioning {
        #expect(r.err.contains(mentioning), "expected stderr to mention '\(mentioning)'\n\(r)", sourceLocation: sourceLocation)
    }
}

/// `error: <something>\n`, one line.
/// With `json`, the line is the `--json` form instead: one object, `{"error": "…", "code": json}`.
func isOneErrorLine(_ text: String, json: Int32? = nil) -> Bool {
    guard text.hasSuffix("\n") else { return false }
    let lines = text.dropLast().components(separatedBy: "\n")
    if let json {
        guard lines.count == 1, let object = try? JSONSerialization.jsonObject(with: Data(lines[0].utf8)) as? [String: Any],
              Set(object.keys) == ["error", "code"], object["code"] as? Int == Int(json),
              let message = object["error"] as? String else { return false }
        return !message.trimmingCharacters(in: .whitespaces).isEmpty
    }
    guard lines.count == 1, let line = lines.first, line.hasPrefix("error: ") else { return false }
    return !line.dropFirst("error: ".count).trimmingCharacters(in: .whitespaces).isEmpty
}

/// stdout parsed as one JSON object.
func jsonObject(_ r: CofferResult, sourceLocation: SourceLocation = #_sourceLocation) throws -> [String: Any] {
    let object = try? JSONSerialization.jsonObject(with: r.stdout)
    return try #require(object as? [String: Any], "stdout is not one JSON object\n\(r)", sourceLocation: sourceLocation)
}

func jsonObject(_ data: Data, sourceLocation: SourceLocation = #_sourceLocation) throws -> [String: Any] {
    let object = try? JSONSerialization.jsonObject(with: data)
    return try #require(object as? [String: Any], "not a JSON object: \(String(decoding: data, as: UTF8.self))",
                        sourceLocation: sourceLocation)
}

/// Eight groups of five digits separated by single spaces.
func isFingerprint(_ value: String) -> Bool {
    let groups = value.split(separator: " ", omittingEmptySubsequences: false)
    return groups.count == 8 && groups.allSatisfy { $0.count == 5 && $0.allSatisfy { ("0"..."9").contains($0) } }
}

/// A user id: 32 lowercase hex digits.
func isUserID(_ value: String) -> Bool {
    value.count == 32 && value.allSatisfy { ("0"..."9").contains($0) || ("a"..."f").contains($0) }
}

/// `Label: value` lines (as `vault show` prints them) as a dictionary.
func fields(_ text: String) -> [String: String] {
    var result = [String: String]()
    for line in text.components(separatedBy: "\n") {
        guard let colon = line.firstIndex(of: ":") else { continue }
        let label = String(line[..<colon])
        let value = line[line.index(after: colon)...].trimmingCharacters(in: .whitespaces)
        if result[label] == nil { result[label] = value }
    }
    return result
}

/// The cells of a table row printed with columns separated by two or more spaces.
func cells(_ line: String) -> [String] {
    line.components(separatedBy: "  ").map { $0.trimmingCharacters(in: .whitespaces) }.filter { !$0.isEmpty }
}

func posixMode(_ path: String) throws -> Int {
    let attributes = try FileManager.default.attributesOfItem(atPath: path)
    return try #require(attributes[.posixPermissions] as? Int) & 0o777
}

func randomBytes(_ count: Int) -> Data {
    var generator = SystemRandomNumberGenerator()
    return Data((0..<count).map { _ in UInt8.random(in: 0...255, using: &generator) })
}

func contains(_ haystack: Data, _ needle: String) -> Bool {
    haystack.range(of: Data(needle.utf8)) != nil
}

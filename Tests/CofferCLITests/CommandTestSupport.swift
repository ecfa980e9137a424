import CofferTestSupport
import Foundation
import Testing

// Helpers for the zone, record, share, changes and audit command tests: several users (vaults)
// acting on one store, JSON values compared exactly, the sqlite3 shell.

/// The users of a `Team`: each has a vault (a.coffer, b.coffer, c.coffer) in the sandbox.
enum Who: String, CaseIterable, Sendable, CustomTestStringConvertible {
    case alice, bob, carol

    var vaultFile: String {
        switch self {
        case .alice: return "a.coffer"
        case .bob: return "b.coffer"
        case .carol: return "c.coffer"
        }
    }

    var name: String { rawValue.prefix(1).uppercased() + rawValue.dropFirst() }
    var email: String { "\(rawValue)@example.com" }
    var testDescription: String { name }
}

/// Several users acting on one store in one sandbox. Every run passes `--vault` and `--store`
/// (or `COFFER_STORE`) and the passphrase in `COFFER_PASSPHRASE`.
final class Team: Sendable {
    let sandbox: Sandbox
    let store: String
    /// The URL of the `coffer serve` every run works through (`--server`), if any: then no
    /// store file is shared, and each user keeps only their vault and marks.
    let server: String?
    private let vaults: [Who: String]
    private let ids: [Who: String]

    /// Makes a vault for each user with `vault init --kdf min` and, when `register`, creates the
    /// store (the first user adds their own card with `contact add`: only commands that write may
    /// create a store) and opens it once as each of them (`zone list`), which registers their
    /// contact card in it so that the others find them by name, email or user id.
    init(_ users: [Who] = Who.allCases, register: Bool = true, sandbox given: Sandbox? = nil, server: String? = nil,
         sourceLocation: SourceLocation = #_sourceLocation) throws {
        sandbox = try given ?? Sandbox()
        store = sandbox.path("store.sqlite")
        self.server = server
        var vaults = [Who: String](), ids = [Who: String]()
        for who in users {
            let path = try sandbox.initVault(who.vaultFile, name: who.name, email: who.email, sourceLocation: sourceLocation)
            vaults[who] = path
            ids[who] = try #require(try sandbox.showJSON(path, sourceLocation: sourceLocation)["userID"] as? String,
                                    sourceLocation: sourceLocation)
        }
        self.vaults = vaults
        self.ids = ids
        if register, let first = users.first {
            let card = sandbox.path("\(first.rawValue)-own-card.json")
            try ok(first, ["vault", "export-contact", "--output", card], sourceLocation: sourceLocation)
            try ok(first, ["contact", "add", card], sourceLocation: sourceLocation)
            for who in users {
                let r = try run(who, ["zone", "list"], sourceLocation: sourceLocation)
                expectSuccess(r, sourceLocation: sourceLocation)
            }
        }
    }

    func vault(_ who: Who) -> String { vaults[who]! }

    /// The user id `vault show` printed for `who`.
    func id(_ who: Who) -> String { ids[who]! }

    /// Runs `coffer ARGS --vault V --store S` as `who` (with `storeFlag: false`, the store comes from COFFER_STORE).
    @discardableResult
    func run(_ who: Who, _ arguments: [String], env: [String: String] = [:], stdin: Stdin = .null, storeFlag: Bool = true,
             sourceLocation: SourceLocation = #_sourceLocation) throws -> CofferResult {
        var environment = withPassphrase.merging(env) { _, new in new }
        var args = arguments + ["--vault", vault(who)]
        if let server {
            if storeFlag { args += ["--server", server] } else { environment["COFFER_SERVER"] = server }
        } else if storeFlag { args += ["--store", store] } else { environment["COFFER_STORE"] = store }
        return try sandbox.coffer(args, env: environment, stdin: stdin, sourceLocation: sourceLocation)
    }

    /// Runs and expects exit 0 with nothing on stderr.
    @discardableResult
    func ok(_ who: Who, _ arguments: [String], stdin: Stdin = .null,
            sourceLocation: SourceLocation = #_sourceLocation) throws -> CofferResult {
        let r = try run(who, arguments, stdin: stdin, sourceLocation: sourceLocation)
        expectSuccess(r, sourceLocation: sourceLocation)
        try #require(r.status == 0, "coffer \(arguments.joined(separator: " ")) failed\n\(r)", sourceLocation: sourceLocation)
        return r
    }

    /// Runs with `--json`, expects success and one JSON object on stdout.
    func json(_ who: Who, _ arguments: [String], sourceLocation: SourceLocation = #_sourceLocation) throws -> [String: Any] {
        let r = try ok(who, arguments + ["--json"], sourceLocation: sourceLocation)
        return try jsonObject(r, sourceLocation: sourceLocation)
    }

    /// Runs and expects the error contract: `status`, nothing on stdout, one clean `error:` line.
    @discardableResult
    func fails(_ who: Who, _ arguments: [String], _ status: Int32, mentioning: String? = nil, stdin: Stdin = .null,
               sourceLocation: SourceLocation = #_sourceLocation) throws -> CofferResult {
        let r = try run(who, arguments, stdin: stdin, sourceLocation: sourceLocation)
        expectFailure(r, status, mentioning: mentioning, sourceLocation: sourceLocation)
        return r
    }

    // MARK: - Shortcuts

    func createZone(_ who: Who, _ name: String, sourceLocation: SourceLocation = #_sourceLocation) throws {
        try ok(who, ["zone", "create", name], sourceLocation: sourceLocation)
    }

    /// `record put ZONE NAME --type TYPE --set …  --secret … EXTRA --json`, expecting success; the printed record.
    @discardableResult
    func put(_ who: Who, _ zone: String, _ name: String, type: String, set: [String] = [], secret: [String] = [],
             extra: [String] = [], sourceLocation: SourceLocation = #_sourceLocation) throws -> [String: Any] {
        try json(who, putArguments(zone, name, type: type, set: set, secret: secret, extra: extra), sourceLocation: sourceLocation)
    }

    func putArguments(_ zone: String, _ name: String, type: String, set: [String] = [], secret: [String] = [],
                      extra: [String] = []) -> [String] {
        ["record", "put", zone, name, "--type", type] + set.flatMap { ["--set", $0] } + secret.flatMap { ["--secret", $0] } + extra
    }

    /// `record get ZONE NAME --json`, expecting success.
    func get(_ who: Who, _ zone: String, _ name: String, sourceLocation: SourceLocation = #_sourceLocation) throws -> [String: Any] {
        try json(who, ["record", "get", zone, name], sourceLocation: sourceLocation)
    }

    /// Each user adds every other user's card (`vault export-contact`, `contact add`), as users
    /// do before sharing: names and emails resolve only to cards the user added.
    func exchangeCards(_ users: [Who], sourceLocation: SourceLocation = #_sourceLocation) throws {
        for who in users {
            for other in users where other != who { try pin(other, who, sourceLocation: sourceLocation) }
        }
    }

    /// `who` adds `other`'s card (`vault export-contact` once, then `contact add`), as a user does
    /// before sharing with them or naming their zones.
    func pin(_ who: Who, _ other: Who, sourceLocation: SourceLocation = #_sourceLocation) throws {
        let card = sandbox.path("\(other.rawValue)-card.json")
        if !FileManager.default.fileExists(atPath: card) {
            try ok(other, ["vault", "export-contact", "--output", card], sourceLocation: sourceLocation)
        }
        try ok(who, ["contact", "add", card], sourceLocation: sourceLocation)
    }

    /// Shares `zone` of `owner` (if not shared yet), invites each participant with a permission,
    /// and, when `accept`, has them accept the URL. Returns the URL.
    @discardableResult
    func share(_ owner: Who, _ zone: String, with participants: [(Who, String)], accept: Bool = true,
               sourceLocation: SourceLocation = #_sourceLocation) throws -> String {
        let created = try json(owner, ["share", "create", zone], sourceLocation: sourceLocation)
        let url = try #require(created["url"] as? String, "no url in share create --json", sourceLocation: sourceLocation)
        for (who, permission) in participants {
            // Each adds the other's card first, as users do: names and emails resolve only to those.
            try pin(owner, who, sourceLocation: sourceLocation)
            try pin(who, owner, sourceLocation: sourceLocation)
            try ok(owner, ["share", "add", zone, "--participant", who.email, "--permission", permission], sourceLocation: sourceLocation)
            if accept { try ok(who, ["share", "accept", url], sourceLocation: sourceLocation) }
        }
        return url
    }

    /// The store's files as they are on disk now: the database, and its WAL and shared memory if present.
    var storeFiles: [String] {
        [store, store + "-wal", store + "-shm"].filter { FileManager.default.fileExists(atPath: $0) }
    }
}

// MARK: - Expectations

/// `expectError`, and the line says something to a person, not a Swift value dump.
func expectFailure(_ r: CofferResult, _ status: Int32, mentioning: String? = nil,
                   sourceLocation: SourceLocation = #_sourceLocation) {
    expectError(r, status, mentioning: mentioning, sourceLocation: sourceLocation)
    for internalName in ["CLIError", "StoreError", "VaultError", "status:", "Optional("] {
        #expect(!r.err.contains(internalName), "the error line shows an internal value ('\(internalName)')\n\(r)",
                sourceLocation: sourceLocation)
    }
}

/// Exit 0; stderr may hold notes (such as a query cursor), but no `error:` line.
func expectSuccessWithNotes(_ r: CofferResult, sourceLocation: SourceLocation = #_sourceLocation) {
    #expect(r.status == 0, "expected success\n\(r)", sourceLocation: sourceLocation)
    #expect(!r.err.contains("error:"), "unexpected error on stderr\n\(r)", sourceLocation: sourceLocation)
}

/// The keys `record get --json` must have (the contract), plus `parent` (documented in CLI.md).
let recordKeys: Set<String> = ["zone", "name", "type", "changeTag", "values", "encryptedValues", "creator", "modifier", "created", "modified"]

/// Checks that `object` has the `record get` shape.
func expectRecordShape(_ object: [String: Any], sourceLocation: SourceLocation = #_sourceLocation) {
    let missing = recordKeys.subtracting(object.keys)
    #expect(missing.isEmpty, "record JSON lacks \(missing.sorted()): \(object)", sourceLocation: sourceLocation)
    #expect(object["values"] is [String: Any], "values is not an object: \(object)", sourceLocation: sourceLocation)
    #expect(object["encryptedValues"] is [String: Any], "encryptedValues is not an object: \(object)", sourceLocation: sourceLocation)
    #expect(!((object["changeTag"] as? String) ?? "").isEmpty, "no change tag: \(object)", sourceLocation: sourceLocation)
    for key in ["created", "modified"] {
        #expect(isoDate(object[key]) != nil, "\(key) is not an ISO 8601 date: \(object[key] ?? "nil")", sourceLocation: sourceLocation)
    }
}

/// `record put --json` (`put`) is the `record get --json` of the same record (`got`), but with
/// `encryptedFields`, the sorted names of its encrypted fields, in place of `encryptedValues`, and
/// `newFields` and `newType`, what the save added to the zone's schema.
func expectSavedShape(_ put: [String: Any], of got: [String: Any], sourceLocation: SourceLocation = #_sourceLocation) {
    #expect(put["encryptedValues"] == nil, "record put printed encryptedValues: \(put)", sourceLocation: sourceLocation)
    let names = ((got["encryptedValues"] as? [String: Any]) ?? [:]).keys.sorted()
    #expect(put["encryptedFields"] as? [String] == names, "encryptedFields is not \(names): \(put)", sourceLocation: sourceLocation)
    var rest = put, gotRest = got
    rest["encryptedFields"] = nil
    // What the save added to the schema: only a write says it.
    #expect(put["newFields"] is [String] && put["newType"] is Bool, "record put lacks newFields or newType: \(put)", sourceLocation: sourceLocation)
    rest["newFields"] = nil
    rest["newType"] = nil
    gotRest["encryptedValues"] = nil
    #expect(JSON(rest) == JSON(gotRest), "record put --json and record get --json differ\nput: \(JSON(put))\nget: \(JSON(got))",
            sourceLocation: sourceLocation)
}

/// An ISO 8601 date string (with or without fractional seconds, or a plain day) as a Date.
func isoDate(_ value: Any?) -> Date? {
    guard let text = value as? String else { return nil }
    if let d = try? Date(text, strategy: .iso8601) { return d }
    if let d = try? Date(text, strategy: Date.ISO8601FormatStyle(includingFractionalSeconds: true)) { return d }
    return try? Date(text, strategy: Date.ISO8601FormatStyle().year().month().day())
}

/// A date from components in UTC.
func utcDate(_ year: Int, _ month: Int, _ day: Int, _ hour: Int = 0, _ minute: Int = 0, _ second: Int = 0,
             milliseconds: Int = 0) -> Date {
    var calendar = Calendar(identifier: .gregorian)
    calendar.timeZone = TimeZone(identifier: "UTC")!
    let components = DateComponents(year: year, month: month, day: day, hour: hour, minute: minute, second: second)
    return calendar.date(from: components)!.addingTimeInterval(Double(milliseconds) / 1000)
}

// MARK: - JSON values, compared exactly

/// A JSON value with its kind kept: `true` is not `1`, `"1"` is not `1`.
/// An integer and a double compare equal when they are the same number (`-2` and `-2.0`).
indirect enum JSON: Equatable, CustomStringConvertible {
    case null
    case bool(Bool)
    case int(Int64)
    case double(Double)
    case string(String)
    case array([JSON])
    case object([String: JSON])

    init(_ value: Any?) {
        switch value {
        case nil, is NSNull: self = .null
        case let s as String: self = .string(s)
        case let n as NSNumber:
            let kind = String(cString: n.objCType)
            if kind == "c" {
                self = .bool(n.boolValue)
            } else if let decimal = n as? NSDecimalNumber {
                if let i = Int64(decimal.stringValue) { self = .int(i) } else { self = .double(decimal.doubleValue) }
            } else if kind == "d" || kind == "f" {
                self = .double(n.doubleValue)
            } else {
                self = .int(n.int64Value)
            }
        case let a as [Any]: self = .array(a.map { JSON($0) })
        case let o as [String: Any]: self = .object(o.mapValues { JSON($0) })
        default: self = .string("<not JSON: \(String(describing: value))>")
        }
    }

    static func == (lhs: JSON, rhs: JSON) -> Bool {
        switch (lhs, rhs) {
        case (.null, .null): return true
        case let (.bool(a), .bool(b)): return a == b
        case let (.int(a), .int(b)): return a == b
        case let (.double(a), .double(b)): return a == b
        case let (.int(a), .double(b)), let (.double(b), .int(a)): return Double(a) == b && b.rounded() == b
        case let (.string(a), .string(b)): return a == b
        case let (.array(a), .array(b)): return a == b
        case let (.object(a), .object(b)): return a == b
        default: return false
        }
    }

    var description: String {
        switch self {
        case .null: return "null"
        case .bool(let b): return String(b)
        case .int(let i): return String(i)
        case .double(let d): return "\(d) (double)"
        case .string(let s): return "\"\(s)\""
        case .array(let a): return "[" + a.map(\.description).joined(separator: ", ") + "]"
        case .object(let o): return "{" + o.keys.sorted().map { "\($0): \(o[$0]!)" }.joined(separator: ", ") + "}"
        }
    }
}

extension JSON: Hashable {
    func hash(into hasher: inout Hasher) {
        switch self {
        case .int(let i): hasher.combine(Double(i))
        case .double(let d): hasher.combine(d)
        default: hasher.combine(description)
        }
    }
}

/// `object[key]` as an exact JSON value.
func json(_ object: [String: Any], _ key: String) -> JSON { JSON(object[key]) }

/// stdout as JSON lines (one object per non-empty line).
func jsonLines(_ r: CofferResult, sourceLocation: SourceLocation = #_sourceLocation) throws -> [[String: Any]] {
    try r.outLines.filter { !$0.trimmingCharacters(in: .whitespaces).isEmpty }.map {
        try jsonObject(Data($0.utf8), sourceLocation: sourceLocation)
    }
}

/// The `name` of each record object.
func recordNames(_ records: [[String: Any]]) -> [String] { records.map { $0["name"] as? String ?? "?" } }

/// `object[key]` as an array of objects (empty if absent).
func objects(_ object: [String: Any], _ key: String) -> [[String: Any]] { object[key] as? [[String: Any]] ?? [] }

// MARK: - The sqlite3 shell

enum SQLiteShell {
    /// Runs `sqlite3 DATABASE SQL` and returns its stdout; records a failure if it fails.
    @discardableResult
    static func run(_ database: String, _ sql: String, sourceLocation: SourceLocation = #_sourceLocation) throws -> String {
        let candidates = ["/usr/bin/sqlite3", "/usr/local/bin/sqlite3", "/bin/sqlite3"]
        let executable = try #require(candidates.first { FileManager.default.isExecutableFile(atPath: $0) },
                                      "the sqlite3 shell is not installed", sourceLocation: sourceLocation)
        let run = try ChildProcess.run(executable, ["-batch", database, sql], environment: ProcessInfo.processInfo.environment, timeout: 60)
        #expect(run.status == 0 && !run.timedOut,
                "sqlite3 \(sql) failed: \(String(decoding: run.stderr, as: UTF8.self))", sourceLocation: sourceLocation)
        let output = run.stdout
        return String(decoding: output, as: UTF8.self)
    }
}

// MARK: - Scanning bytes at rest

/// The encodings of `text` to look for at rest: UTF-8, UTF-16 (both orders), hex (both cases), and
/// base64 at each of the three alignments (the part of the encoding that does not depend on the
/// bytes around it).
func restEncodings(of text: String) -> [(String, Data)] {
    let utf8 = Data(text.utf8)
    var result: [(String, Data)] = [("UTF-8", utf8)]
    result.append(("UTF-16LE", text.data(using: .utf16LittleEndian)!))
    result.append(("UTF-16BE", text.data(using: .utf16BigEndian)!))
    let hex = utf8.map { String(format: "%02x", $0) }.joined()
    result.append(("hex", Data(hex.utf8)))
    result.append(("HEX", Data(hex.uppercased().utf8)))
    for shift in 0..<3 {
        let padded = Data(repeating: 0, count: shift) + utf8
        let encoded = padded.base64EncodedString()
        // Drop the characters that mix in the padding before and the unknown bytes after.
        let leading = shift == 0 ? 0 : (shift * 8 + 5) / 6
        let usableBytes = (padded.count / 3) * 3
        let trailing = usableBytes * 4 / 3
        guard trailing > leading + 8 else { continue }
        let inner = String(encoded.prefix(trailing).dropFirst(leading))
        result.append(("base64 (offset \(shift))", Data(inner.utf8)))
        let url = inner.replacingOccurrences(of: "+", with: "-").replacingOccurrences(of: "/", with: "_")
        if url != inner { result.append(("base64url (offset \(shift))", Data(url.utf8))) }
    }
    return result
}

/// Where (file and encoding) `text` appears in `files`.
func occurrences(of text: String, in files: [String]) throws -> [String] {
    var found = [String]()
    for file in files {
        let bytes = try Data(contentsOf: URL(fileURLWithPath: file))
        for (encoding, needle) in restEncodings(of: text) where bytes.range(of: needle) != nil {
            found.append("\((file as NSString).lastPathComponent): \(encoding)")
        }
    }
    return found
}

import Foundation
import Testing
#if canImport(Glibc)
import Glibc
#endif

/// Secrets off the command line: `record put --secret-file`, `share accept -` and
/// `audit --plaintext-file`, where the argv forms let other local users and shell history see them.
@Suite("secrets off the command line")
struct SecretInputCommandTests {
    let team: Team
    /// A value no output may hold.
    let secret = "File-Canary-\(UUID().uuidString)"

    init() throws {
        team = try Team([.alice, .bob])
        try team.createZone(.alice, "Notes")
        // Bob names Alice's zones by her email: he adds her card first, as a user does.
        try team.pin(.bob, .alice)
    }

    func secrets(_ record: [String: Any]) -> [String: Any] { record["encryptedValues"] as? [String: Any] ?? [:] }

    /// `record put Notes NAME --type Note ARGS`, run as Alice with `stdin`.
    func put(_ name: String, _ args: [String], stdin: Stdin = .null, sourceLocation: SourceLocation = #_sourceLocation) throws -> CofferResult {
        try team.run(.alice, ["record", "put", "Notes", name, "--type", "Note"] + args, stdin: stdin, sourceLocation: sourceLocation)
    }

    /// The error contract, the secret nowhere in the output, and no record `name` saved.
    func expectRefused(_ r: CofferResult, _ status: Int32, mentioning: String? = nil, name: String = "n1",
                       sourceLocation: SourceLocation = #_sourceLocation) throws {
        expectFailure(r, status, mentioning: mentioning, sourceLocation: sourceLocation)
        #expect(!r.err.contains(secret), "the error shows the secret\n\(r)", sourceLocation: sourceLocation)
        try team.fails(.alice, ["record", "get", "Notes", name], 66, sourceLocation: sourceLocation)
    }

    // MARK: - record put --secret-file

    @Test("--secret-file: a string without one trailing newline, bytes exactly, typed values parsed; the secret never printed")
    func secretFileTypes() throws {
        let raw = randomBytes(64) + Data([0x0a])
        let files = [
            "pin": try team.sandbox.write("pin.txt", secret + "\n"),
            "crlf": try team.sandbox.write("crlf.txt", "windows\r\n"),
            "two": try team.sandbox.write("two.txt", "kept\n\n"),
            "bare": try team.sandbox.write("bare.txt", "no newline"),
            "raw": try team.sandbox.write("raw.bin", Data(raw)),
            "code": try team.sandbox.write("code.txt", "42\n"),
            "words": try team.sandbox.write("words.txt", "a,b\\,c\n"),
            "due": try team.sandbox.write("due.txt", "2030-05-06T07:08:09Z\n"),
            "empty": try team.sandbox.write("empty.txt", ""),
        ]
        let r = try put("n1", ["--set", "title=Visible", "--secret", "plain=typed",
                               "--secret-file", "pin=\(files["pin"]!)", "--secret-file", "crlf=\(files["crlf"]!)",
                               "--secret-file", "two=\(files["two"]!)", "--secret-file", "bare=\(files["bare"]!)",
                               "--secret-file", "raw:bytes=\(files["raw"]!)", "--secret-file", "code:int=\(files["code"]!)",
                               "--secret-file", "words:[string]=\(files["words"]!)", "--secret-file", "due:date=\(files["due"]!)",
                               "--secret-file", "empty=\(files["empty"]!)", "--json"])
        expectSuccess(r)
        #expect(!r.out.contains(secret), "record put printed the secret\n\(r)")
        #expect(try jsonObject(r)["encryptedFields"] as? [String] == ["bare", "code", "crlf", "due", "empty", "pin", "plain", "raw", "two", "words"])

        let got = try team.get(.alice, "Notes", "n1")
        let s = secrets(got)
        #expect(json(s, "pin") == .string(secret))
        #expect(json(s, "crlf") == .string("windows"))
        #expect(json(s, "two") == .string("kept\n"))
        #expect(json(s, "bare") == .string("no newline"))
        #expect(json(s, "raw") == .string(Data(raw).base64EncodedString()), "bytes keep the file's last newline")
        #expect(json(s, "code") == .int(42))
        #expect(json(s, "words") == .array([.string("a"), .string("b,c")]))
        #expect(isoDate(s["due"]) == utcDate(2030, 5, 6, 7, 8, 9))
        #expect(json(s, "empty") == .string(""))
        #expect(json(s, "plain") == .string("typed"))
        #expect(json(got["values"] as? [String: Any] ?? [:], "title") == .string("Visible"))
        #expect((got["types"] as? [String: String])?["raw"] == "bytes")
        // Saved encrypted, nowhere at rest in the clear.
        #expect(try occurrences(of: secret, in: team.storeFiles).isEmpty)
    }

    @Test("--secret-file NAME=- reads standard input, for one field only")
    func secretFileStdin() throws {
        let r = try put("n1", ["--secret-file", "pin=-", "--secret-file", "blob:bytes=\(try team.sandbox.write("b.bin", Data([1, 2, 3])))"],
                        stdin: .text(secret + "\n"))
        expectSuccess(r)
        #expect(!r.out.contains(secret))
        #expect(json(secrets(try team.get(.alice, "Notes", "n1")), "pin") == .string(secret))

        try expectRefused(try put("n2", ["--secret-file", "a=-", "--secret-file", "b=-"], stdin: .text("x\n")), 64,
                          mentioning: "standard input", name: "n2")
        // Empty standard input is an empty value, as an empty file is.
        expectSuccess(try put("n3", ["--secret-file", "pin=-"]))
        #expect(json(secrets(try team.get(.alice, "Notes", "n3")), "pin") == .string(""))
    }

    @Test("'-' on a terminal asks with echo off: --secret-file's value and share accept's URL are not shown as typed")
    func hiddenOnTerminal() throws {
        try team.put(.alice, "Notes", "n0", type: "Note", secret: ["pin=4321"])
        let url = try #require(try team.json(.alice, ["share", "create", "Notes", "--public", "read-only"])["url"] as? String)
        let linkSecret = String(url.split(separator: "#").last ?? "")
        let executable = try CofferProcess.executableURL().path
        // `script` runs coffer on a new pseudo-terminal; the line is typed a moment later, once the prompt has turned echo off.
        func onTerminal(_ who: Who, _ args: [String], typing line: String) throws -> CofferResult {
            let command = ([executable] + args + ["--vault", team.vault(who), "--store", team.store]).joined(separator: " ")
            return try team.sandbox.shell("(sleep 1; printf '%s\\n' \"$1\") | script -qec \"$0\" /dev/null", [command, line], env: withPassphrase)
        }
        let put = try onTerminal(.alice, ["record", "put", "Notes", "n1", "--type", "Note", "--secret-file", "pin=-"], typing: secret)
        #expect(put.status == 0, "\(put)")
        #expect(put.out.contains("Value of the encrypted field 'pin': "), "\(put)")
        #expect(!put.out.contains(secret) && !put.err.contains(secret), "the value typed was shown\n\(put)")
        #expect(json(secrets(try team.get(.alice, "Notes", "n1")), "pin") == .string(secret))

        let accept = try onTerminal(.bob, ["share", "accept", "-"], typing: url)
        #expect(accept.status == 0, "\(accept)")
        #expect(accept.out.contains("Share URL: "), "\(accept)")
        #expect(!accept.out.contains(linkSecret), "the URL typed was shown\n\(accept)")
        #expect(json(secrets(try team.get(.bob, "Notes@\(Who.alice.email)", "n0")), "pin") == .string("4321"))
    }

    @Test("a field given twice across --set, --secret and --secret-file is refused (65)")
    func secretFileTwice() throws {
        let file = try team.sandbox.write("pin.txt", secret)
        try expectRefused(try put("n1", ["--secret-file", "pin=\(file)", "--secret-file", "pin=\(file)"]), 65, mentioning: "twice")
        try expectRefused(try put("n1", ["--secret", "pin=1", "--secret-file", "pin=\(file)"]), 65, mentioning: "--secret and --secret-file")
        try expectRefused(try put("n1", ["--set", "pin=1", "--secret-file", "pin=\(file)"]), 65, mentioning: "--set and --secret-file")
    }

    @Test("a missing file is 66 naming it; a folder 66; a path through a file 1; nothing is saved")
    func secretFileNotReadable() throws {
        let missing = team.sandbox.path("nowhere.txt")
        try expectRefused(try put("n1", ["--secret-file", "pin=\(missing)"]), 66, mentioning: missing)
        try expectRefused(try put("n1", ["--secret-file", "pin=\(team.sandbox.root.path)"]), 66, mentioning: "folder")
        let file = try team.sandbox.write("file.txt", "x")
        try expectRefused(try put("n1", ["--secret-file", "pin=\(file)/inside"]), 1, mentioning: "\(file)/inside")
    }

    @Test("an unreadable file fails (1) naming it", .enabled(if: getuid() != 0, "root reads any file"))
    func secretFileNoPermission() throws {
        let file = try team.sandbox.write("locked.txt", secret)
        chmod(file, 0)
        try expectRefused(try put("n1", ["--secret-file", "pin=\(file)"]), 1, mentioning: file)
    }

    @Test("bad --secret-file content or syntax is 65 and never quotes the content")
    func secretFileBadContent() throws {
        let notInt = try team.sandbox.write("n.txt", secret)
        try expectRefused(try put("n1", ["--secret-file", "code:int=\(notInt)"]), 65, mentioning: "code")
        let binary = try team.sandbox.write("bin.txt", Data([0xff, 0xfe, 0x00, 0x41]))
        try expectRefused(try put("n1", ["--secret-file", "pin=\(binary)"]), 65, mentioning: "pin:bytes=")
        try expectRefused(try put("n1", ["--secret-file", "pin:nonsense=\(notInt)"]), 65, mentioning: "nonsense")
        try expectRefused(try put("n1", ["--secret-file", "pin"]), 65, mentioning: "key=PATH")
        try expectRefused(try put("n1", ["--secret-file", "pin="]), 65, mentioning: "names no file")
        try expectRefused(try put("n1", ["--secret-file", "=\(notInt)"]), 65, mentioning: "no field key")
    }

    @Test("a file larger than a record (/dev/zero, say) is refused (65) at once, not read forever")
    func secretFileTooLarge() throws {
        let r = try put("n1", ["--secret-file", "blob:bytes=/dev/zero"])
        try expectRefused(r, 65, mentioning: "/dev/zero")
        #expect(r.seconds < 10, "\(r)")
    }

    @Test("the secret from a file reaches no log line, even at trace level")
    func secretFileNotLogged() throws {
        let file = try team.sandbox.write("pin.txt", secret)
        let r = try team.run(.alice, ["record", "put", "Notes", "n1", "--type", "Note", "--secret-file", "pin=\(file)"],
                             env: ["COFFER_LOG_LEVEL": "trace"])
        #expect(r.status == 0, "\(r)")
        #expect(!r.out.contains(secret) && !r.err.contains(secret), "\(r)")
    }

    // MARK: - share accept -

    @Test("share accept - reads the URL from standard input; empty, two lines or malformed input is 65 without the link secret")
    func shareAcceptStdin() throws {
        try team.put(.alice, "Notes", "n1", type: "Note", secret: ["pin=4321"])
        let url = try #require(try team.json(.alice, ["share", "create", "Notes", "--public", "read-only"])["url"] as? String)
        let linkSecret = String(url.split(separator: "#").last ?? "")
        try #require(linkSecret.count == 43)

        for bad in ["", "\n", "\(url)\n\(url)\n"] {
            let r = try team.run(.bob, ["share", "accept", "-"], stdin: .text(bad))
            expectFailure(r, 65, mentioning: "standard input")
        }
        let malformed = try team.run(.bob, ["share", "accept", "-"], stdin: .text(url.replacingOccurrences(of: "/v1/", with: "/v9/") + "\n"))
        expectFailure(malformed, 65)
        #expect(!malformed.err.contains(linkSecret), "the error shows the link secret\n\(malformed)")
        try team.fails(.bob, ["record", "get", "Notes@\(Who.alice.email)", "n1"], 66)

        let r = try team.run(.bob, ["share", "accept", "-"], stdin: .text("  \(url)\r\n"))
        expectSuccess(r)
        #expect(!r.out.contains(linkSecret), "\(r)")
        #expect(json(secrets(try team.get(.bob, "Notes@\(Who.alice.email)", "n1")), "pin") == .string("4321"))
    }

    // MARK: - audit --plaintext-file

    @Test("audit --plaintext-file: one text a line (\\n or \\r\\n, empty lines skipped); found 1, not found 0; never printed")
    func auditPlaintextFile() throws {
        let plain = "Plain-Canary-\(UUID().uuidString)"
        try team.put(.alice, "Notes", "c1", type: "Canary", set: ["visible=\(plain)"], secret: ["hidden=\(secret)"])
        let hidden = try team.sandbox.write("hidden.txt", "\n\(secret)\r\n\r\n")
        let both = try team.sandbox.write("both.txt", "\(secret)\r\n\(plain)\r\n")

        let clean = try team.run(.alice, ["audit", "--plaintext-file", hidden, "--json"])
        expectSuccess(clean)
        #expect(json(try jsonObject(clean)["checked"] as? [String: Any] ?? [:], "plaintexts") == .int(1), "\(clean)")

        let found = try team.run(.alice, ["audit", "--plaintext-file", both, "--json"])
        #expect(found.status == 1, "\(found)")
        let report = try jsonObject(found)
        #expect(json(report["checked"] as? [String: Any] ?? [:], "plaintexts") == .int(2), "\(report)")
        #expect(objects(report, "findings").contains { $0["kind"] as? String == "plaintext" }, "\(report)")
        for r in [clean, found] {
            #expect(!r.out.contains(secret) && !r.out.contains(plain) && !r.err.contains(secret), "\(r)")
        }

        // From standard input, and alongside --plaintext.
        let stdin = try team.run(.alice, ["audit", "--plaintext-file", "-", "--plaintext", "not-there-\(UUID().uuidString)", "--json"],
                                 stdin: .text(plain + "\n"))
        #expect(stdin.status == 1, "\(stdin)")
        #expect(json(try jsonObject(stdin)["checked"] as? [String: Any] ?? [:], "plaintexts") == .int(2), "\(stdin)")
    }

    @Test("audit --plaintext-file: no text in it is 64; missing 66; not UTF-8 65; '-' twice 64")
    func auditPlaintextFileErrors() throws {
        try team.fails(.alice, ["audit", "--plaintext-file", try team.sandbox.write("blank.txt", "\n\r\n\n")], 64, mentioning: "no text")
        try team.fails(.alice, ["audit", "--plaintext-file", try team.sandbox.write("none.txt", "")], 64, mentioning: "no text")
        let missing = team.sandbox.path("missing.txt")
        try team.fails(.alice, ["audit", "--plaintext-file", missing], 66, mentioning: missing)
        try team.fails(.alice, ["audit", "--plaintext-file", try team.sandbox.write("bin.txt", Data([0xff, 0x0a]))], 65, mentioning: "UTF-8")
        try team.fails(.alice, ["audit", "--plaintext-file", "-", "--plaintext-file", "-"], 64, mentioning: "standard input")
    }

    // MARK: - help

    @Test("the argv forms' help says who else sees the value and names the safer form")
    func helpNamesSaferForm() throws {
        for (command, option, safer) in [(["record", "put"], "--secret <field>", "--secret-file"),
                                         (["share", "accept"], "<url>", "'-'"),
                                         (["audit"], "--plaintext <text>", "--plaintext-file")] {
            let r = try team.sandbox.coffer(command + ["--help"])
            expectSuccess(r)
            let help = r.out.replacingOccurrences(of: "\n", with: " ").split(separator: " ").joined(separator: " ")
            // The option's own entry: the last mention of it, not another option's value of that name (`--server <url>`).
            let mentions = help.ranges(of: option).filter { !help[..<$0.lowerBound].hasSuffix("--server ") }
            let entry = try #require(mentions.last.map { String(help[$0.lowerBound...].prefix(260)) }, "\(r)")
            #expect(entry.contains("other local users") && entry.contains("shell history") && entry.contains(safer),
                    "\(command) --help: \(entry)")
        }
    }
}

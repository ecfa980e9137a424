import Foundation
import Testing

/// The error contract: damaged vaults, bad command lines, one `error:` line, no secret in any output.
@Suite("error contract")
struct ErrorContractTests {
    let sandbox: Sandbox

    init() throws { sandbox = try Sandbox() }

    /// Ways a vault file gets damaged.
    enum Damage: String, CaseIterable, Sendable, CustomTestStringConvertible {
        case flipBodyByte, flipLastByte, flipHeaderByte, truncatedHalf, truncatedByOne, empty, randomBytes, magicThenRandom, appendedByte

        var testDescription: String { rawValue }

        /// Damage found before any key slot is tried.
        var breaksHeader: Bool {
            switch self {
            case .flipHeaderByte, .truncatedHalf, .empty, .randomBytes, .magicThenRandom: return true
            case .flipBodyByte, .flipLastByte, .truncatedByOne, .appendedByte: return false
            }
        }

        func apply(to file: Data) -> Data {
            var bytes = file
            switch self {
            case .flipBodyByte: bytes[bytes.count - 100] ^= 0x01
            case .flipLastByte: bytes[bytes.count - 1] ^= 0x80
            case .flipHeaderByte: bytes[20] ^= 0x01 // inside the vault id
            case .truncatedHalf: bytes = bytes.prefix(bytes.count / 2)
            case .truncatedByOne: bytes = bytes.dropLast()
            case .empty: bytes = Data()
            case .randomBytes: bytes = CofferCLITests.randomBytes(file.count)
            case .magicThenRandom: bytes = Data("COFFERVT".utf8) + CofferCLITests.randomBytes(file.count - 8)
            case .appendedByte: bytes.append(0x00)
            }
            return bytes
        }
    }

    @Test("a damaged vault fails with 65 and one error line", arguments: Damage.allCases)
    func damagedVault(damage: Damage) throws {
        let vault = try sandbox.initVault()
        let original = try sandbox.read(vault)
        let damaged = damage.apply(to: original)
        try #require(damaged != original)
        try damaged.write(to: URL(fileURLWithPath: vault))

        expectError(try sandbox.coffer(["vault", "show", "--vault", vault], env: withPassphrase), 65)
        expectError(try sandbox.coffer(["vault", "show", "--json", "--vault", vault], env: withPassphrase), 65)
        expectError(try sandbox.coffer(["vault", "item", "list", "--vault", vault], env: withPassphrase), 65)
        // A damaged header is damaged whatever the passphrase: never "wrong passphrase".
        if damage.breaksHeader { expectError(try sandbox.coffer(["vault", "show", "--vault", vault], env: ["COFFER_PASSPHRASE": CofferProcess.wrongPassphrase]), 65) }
        // Nothing rewrote the file.
        #expect(try sandbox.read(vault) == damaged)
    }

    @Test("a damaged store file fails with 65, saying to restore it from a backup, with none of the file's bytes in the message",
          arguments: ["header", "schema", "pages"])
    func damagedStore(where part: String) throws {
        let team = try Team([.alice], sandbox: sandbox)
        try team.createZone(.alice, "Notes")
        for i in 0..<40 { try team.put(.alice, "Notes", "n\(i)", type: "Note", set: ["title=\(String(repeating: "x", count: 200))"]) }
        var bytes = try sandbox.read(team.store)
        try #require(bytes.count > 16_384)
        // Bytes that print as nothing sensible: control characters and invalid UTF-8.
        let garbage: [UInt8] = [0x00, 0x1b, 0x5b, 0x32, 0x4a, 0xff, 0xfe, 0x07, 0x9b, 0x0d]
        let range: Range<Int> = switch part {
        case "header": 0..<100
        case "schema": 100..<4096
        default: 8_192..<bytes.count
        }
        for i in range { bytes[i] = garbage[i % garbage.count] }
        try bytes.write(to: URL(fileURLWithPath: team.store))
        for arguments in [["zone", "list"], ["record", "list", "Notes"], ["record", "list", "Notes", "--json"]] {
            let r = try team.run(.alice, arguments)
            expectError(r, 65)
            #expect(r.err.contains("is damaged; restore it from a backup"), "\(r)")
            #expect(r.err.unicodeScalars.allSatisfy { $0 == "\n" || ($0.value >= 0x20 && $0.value != 0x7f && $0.value != 0xfffd) },
                    "the message holds bytes of the file: \(r.err.debugDescription)")
        }
    }

    @Test("a tampered body is refused even when unlocking with a key file")
    func tamperedBodyWithKeyFile() throws {
        let vault = try sandbox.initVault()
        let key = sandbox.path("svc.key")
        expectSuccess(try sandbox.coffer(["vault", "keyfile", "--output", key, "--vault", vault], env: withPassphrase))
        var bytes = try sandbox.read(vault)
        bytes[bytes.count - 40] ^= 0x20
        try bytes.write(to: URL(fileURLWithPath: vault))
        expectError(try sandbox.coffer(["vault", "show", "--vault", vault, "--key-file", key]), 65)
    }

    @Test("a vault path that is a folder fails with one error line")
    func vaultIsAFolder() throws {
        let folder = sandbox.path("folder.coffer")
        try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
        let r = try sandbox.coffer(["vault", "show", "--vault", folder], env: withPassphrase)
        #expect(r.status != 0)
        #expect(isOneErrorLine(r.err), "\(r)")
        #expect(r.stdout.isEmpty)
    }

    @Test("a file system error is exit 1 with its plain words, not a usage error (64)")
    func fileSystemError() throws {
        let file = sandbox.path("afile")
        FileManager.default.createFile(atPath: file, contents: Data("x".utf8))
        let r = try sandbox.coffer(["demo", "--dir", file], env: withPassphrase)
        expectError(r, 1)
        #expect(!r.err.contains("NSCocoaErrorDomain") && !r.err.contains("coffer help"), "\(r)")
    }

    // MARK: - command lines

    static let badCommandLines: [[String]] = [
        ["frobnicate"],
        ["vault", "frobnicate"],
        ["vault", "item", "frobnicate"],
        ["contact", "frobnicate"],
        ["vault", "init"],                                       // --name is required
        ["vault", "init", "--name"],                             // the option lacks its value
        ["vault", "init", "--name", "A", "--kdf", "extreme"],    // not a preset
        ["vault", "item", "add", "--service", "S"],              // --account is required
        ["vault", "item", "get", "--account", "A"],              // --service is required
        ["vault", "item", "delete"],
        ["vault", "keyfile"],                                    // --output is required
        ["contact", "add"],                                      // the file is required
        ["contact", "add", "a.json", "b.json"],                  // one file only
        ["vault", "show", "--bogus-flag"],
        ["vault", "show", "--vault"],
        ["vault", "show", "extra-argument"],
    ]

    @Test("a bad command line fails with 64 and one error line", arguments: badCommandLines)
    func badCommandLine(arguments: [String]) throws {
        let r = try sandbox.coffer(arguments, env: withPassphrase)
        expectError(r, 64)
        #expect(r.seconds < 10)
        #expect(!r.err.contains("Usage") && !r.err.contains("USAGE"), "a usage block instead of one line\n\(r)")
        // Nothing was created by a refused command line.
        #expect(!sandbox.exists(sandbox.dataHome.appendingPathComponent("coffer").path))
    }

    @Test("--help prints usage on stdout and succeeds", arguments: [["--help"], ["vault", "--help"], ["vault", "item", "add", "--help"], ["help", "contact"]])
    func help(arguments: [String]) throws {
        let r = try sandbox.coffer(arguments)
        #expect(r.status == 0, "\(r)")
        #expect(r.out.contains("USAGE:"), "\(r)")
        #expect(r.err.isEmpty)
    }

    @Test("the --kdf min warning is the only stderr output of a successful init")
    func minWarningOnly() throws {
        let r = try sandbox.coffer(["vault", "init", "--name", "W", "--kdf", "min", "--vault", sandbox.path("w.coffer")], env: withPassphrase)
        expectSuccess(r, kdfWarning: true)
    }

    // MARK: - secrets never in output

    @Test("no output and no vault file ever holds a passphrase")
    func passphrasesNeverInOutput() throws {
        // Every run through CofferProcess already fails its test if a passphrase appears in stdout
        // or stderr; this test drives the paths most likely to echo one.
        let vault = try sandbox.initVault()
        var runs: [CofferResult] = []
        runs.append(try sandbox.coffer(["vault", "show", "--vault", vault], env: ["COFFER_PASSPHRASE": CofferProcess.wrongPassphrase]))
        let wrongFile = try sandbox.write("wrong.txt", CofferProcess.wrongPassphrase + "\n")
        runs.append(try sandbox.coffer(["vault", "show", "--vault", vault, "--passphrase-file", wrongFile]))
        let longFile = try sandbox.write("long.txt", CofferProcess.wrongPassphrase + String(repeating: "x", count: 5000) + "\n")
        runs.append(try sandbox.coffer(["vault", "show", "--vault", vault, "--passphrase-file", longFile]))
        runs.append(try sandbox.coffer(["vault", "passwd", "--vault", vault],
                                       env: ["COFFER_PASSPHRASE": CofferProcess.wrongPassphrase, "COFFER_NEW_PASSPHRASE": CofferProcess.newPassphrase]))
        runs.append(try sandbox.coffer(["vault", "show", "--vault", vault, "--json"], env: withPassphrase))
        runs.append(try sandbox.coffer(["vault", "export-contact", "--vault", vault], env: withPassphrase))
        runs.append(try sandbox.coffer(["vault", "passwd", "--vault", vault],
                                       env: ["COFFER_PASSPHRASE": CofferProcess.passphrase, "COFFER_NEW_PASSPHRASE": CofferProcess.newPassphrase]))
        runs.append(try sandbox.coffer(["vault", "show", "--vault", vault], env: ["COFFER_PASSPHRASE": CofferProcess.newPassphrase]))

        #expect(runs.map(\.status) == [77, 77, 64, 77, 0, 0, 0, 0], "\(runs.map(\.description).joined(separator: "\n"))")
        for r in runs where r.status != 0 {
            #expect(isOneErrorLine(r.err), "\(r)")
        }
        for r in runs {
            for secret in [CofferProcess.passphrase, CofferProcess.newPassphrase] {
                #expect(!r.out.contains(secret) && !r.err.contains(secret), "\(r)")
            }
        }
        let bytes = try sandbox.read(vault)
        for secret in CofferProcess.forbiddenInOutput {
            #expect(!contains(bytes, secret))
        }
    }
}

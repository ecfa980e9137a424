import Foundation
import Testing

/// `coffer vault init|show|passwd|keyfile`, the passphrase sources, the environment variables
/// and the placement of global flags.
@Suite("coffer vault")
struct VaultCommandTests {
    let sandbox: Sandbox

    init() throws { sandbox = try Sandbox() }

    // MARK: - init

    @Test("vault init creates the file (mode 0600) and prints the new identity")
    func initCreatesVault() throws {
        let vault = sandbox.path("alice.coffer")
        let r = try sandbox.coffer(["vault", "init", "--name", "Alice", "--email", "alice@example.com", "--kdf", "min", "--vault", vault],
                                   env: withPassphrase)
        expectSuccess(r, kdfWarning: true)
        #expect(r.outLines.first == "Created vault \(vault)")
        let shown = fields(r.out)
        #expect(shown["Name"] == "Alice")
        #expect(shown["Email"] == "alice@example.com")
        #expect(isUserID(shown["User ID"] ?? ""), "\(r)")
        #expect(isFingerprint(shown["Fingerprint"] ?? ""), "\(r)")
        #expect(sandbox.exists(vault))
        #expect(try posixMode(vault) == 0o600)
        let bytes = try sandbox.read(vault)
        #expect(bytes.count > 200)
        #expect(!contains(bytes, CofferProcess.passphrase), "the passphrase is in the vault file")
        #expect(!contains(bytes, "Alice"), "the vault body is not encrypted")
    }

    @Test("vault init --json prints userID, name, email, fingerprint")
    func initJSON() throws {
        let vault = sandbox.path("v.coffer")
        let r = try sandbox.coffer(["vault", "init", "--name", "Alice", "--kdf", "min", "--json", "--vault", vault], env: withPassphrase)
        expectSuccess(r, kdfWarning: true)
        let json = try jsonObject(r)
        #expect(json["name"] as? String == "Alice")
        #expect(json["email"] is NSNull, "email without --email must be present and null: \(r)")
        #expect(isUserID(json["userID"] as? String ?? ""))
        #expect(isFingerprint(json["fingerprint"] as? String ?? ""))
        // The identity printed at creation is the one the file holds.
        let shown = try sandbox.showJSON(vault)
        #expect(shown["userID"] as? String == json["userID"] as? String)
        #expect(shown["fingerprint"] as? String == json["fingerprint"] as? String)
    }

    @Test("--kdf min is for tests: help does not list it, yet vault init --kdf min works and warns")
    func minPresetIsHidden() throws {
        for args in [["vault", "init", "--help"], ["help", "vault", "init"], ["vault", "passwd", "--help"]] {
            let help = try sandbox.coffer(args)
            #expect(help.status == 0, "\(help)")
            let kdfLines = help.out.components(separatedBy: "\n").filter { $0.contains("--kdf") || $0.contains("values:") }
            #expect(help.out.contains("interactive") && help.out.contains("sensitive"), "\(help)")
            #expect(!kdfLines.isEmpty, "\(help)")
            #expect(!help.out.contains("min"), "help lists the test-only preset\n\(help)")
        }
        let vault = sandbox.path("throwaway.coffer")
        let r = try sandbox.coffer(["vault", "init", "--name", "Test", "--kdf", "min", "--vault", vault], env: withPassphrase)
        expectSuccess(r, kdfWarning: true)
        let shown = try sandbox.coffer(["vault", "show", "--vault", vault], env: withPassphrase)
        expectSuccess(shown)
        #expect(fields(shown.out)["Unlocks with"]?.hasPrefix("passphrase (Argon2id min: 1 passes, 8 KiB)") == true, "\(shown)")
        // passwd takes it too, with the same warning.
        let passwd = try sandbox.coffer(["vault", "passwd", "--kdf", "min", "--vault", vault],
                                        env: ["COFFER_PASSPHRASE": CofferProcess.passphrase, "COFFER_NEW_PASSPHRASE": CofferProcess.newPassphrase])
        expectSuccess(passwd, kdfWarning: true)
    }

    @Test("vault init on an existing vault fails with 73 and changes nothing")
    func initOnExistingVault() throws {
        let vault = try sandbox.initVault()
        let before = try sandbox.read(vault)
        let r = try sandbox.coffer(["vault", "init", "--name", "Mallory", "--kdf", "min", "--vault", vault],
                                   env: ["COFFER_PASSPHRASE": CofferProcess.newPassphrase])
        expectError(r, 73, mentioning: vault)
        #expect(try sandbox.read(vault) == before)
        #expect(try sandbox.showJSON(vault)["name"] as? String == "Alice")
    }

    @Test("vault init on any existing file fails with 73 and leaves it alone")
    func initOnExistingOtherFile() throws {
        let path = try sandbox.write("notes.txt", "my notes\n")
        let r = try sandbox.coffer(["vault", "init", "--name", "Alice", "--kdf", "min", "--vault", path], env: withPassphrase)
        expectError(r, 73)
        #expect(try sandbox.read(path) == Data("my notes\n".utf8))
    }

    @Test("without --vault, the vault lives in $XDG_DATA_HOME/coffer/ and HOME is not touched")
    func defaultVaultLocation() throws {
        let r = try sandbox.coffer(["vault", "init", "--name", "Dora", "--kdf", "min"], env: withPassphrase)
        expectSuccess(r, kdfWarning: true)
        let expected = sandbox.dataHome.appendingPathComponent("coffer/vault.coffer").path
        #expect(sandbox.exists(expected), "no vault at \(expected)\n\(r)")
        #expect(!sandbox.exists(sandbox.path(".local")), "the vault went under HOME/.local despite XDG_DATA_HOME")
        let show = try sandbox.coffer(["vault", "show", "--json"], env: withPassphrase)
        expectSuccess(show)
        #expect(try jsonObject(show)["name"] as? String == "Dora")
    }

    @Test("relative --vault paths are relative to the working directory")
    func relativeVaultPath() throws {
        let r = try sandbox.coffer(["vault", "init", "--name", "Rel", "--kdf", "min", "--vault", "rel.coffer"], env: withPassphrase)
        expectSuccess(r, kdfWarning: true)
        #expect(sandbox.exists(sandbox.path("rel.coffer")))
        #expect(try sandbox.showJSON("rel.coffer")["name"] as? String == "Rel")
    }

    // MARK: - show

    @Test("vault show prints user id, name, email and fingerprint as text")
    func showText() throws {
        let vault = try sandbox.initVault(name: "Alice Liddell", email: "alice@example.com")
        let r = try sandbox.coffer(["vault", "show", "--vault", vault], env: withPassphrase)
        expectSuccess(r)
        let shown = fields(r.out)
        #expect(shown["Name"] == "Alice Liddell")
        #expect(shown["Email"] == "alice@example.com")
        let json = try sandbox.showJSON(vault)
        #expect(shown["User ID"] == json["userID"] as? String)
        #expect(shown["Fingerprint"] == json["fingerprint"] as? String)
        #expect(isFingerprint(shown["Fingerprint"] ?? ""))
    }

    @Test("vault show --json has userID, name, email and a fingerprint of 8 groups of 5 digits")
    func showJSON() throws {
        let vault = try sandbox.initVault(name: "Alice", email: "alice@example.com")
        let r = try sandbox.coffer(["vault", "show", "--json", "--vault", vault], env: withPassphrase)
        expectSuccess(r)
        let json = try jsonObject(r)
        for key in ["userID", "name", "email", "fingerprint"] {
            #expect(json[key] != nil, "missing key \(key)\n\(r)")
        }
        #expect(json["name"] as? String == "Alice")
        #expect(json["email"] as? String == "alice@example.com")
        let userID = try #require(json["userID"] as? String)
        #expect(isUserID(userID), "user id \(userID)")
        let fingerprint = try #require(json["fingerprint"] as? String)
        #expect(isFingerprint(fingerprint), "fingerprint \(fingerprint)")
        // Two vaults: two identities.
        let other = try sandbox.initVault("other.coffer", name: "Bob", email: nil)
        let otherJSON = try sandbox.showJSON(other)
        #expect(otherJSON["userID"] as? String != userID)
        #expect(otherJSON["fingerprint"] as? String != fingerprint)
        #expect(otherJSON["email"] is NSNull)
    }

    @Test("a wrong passphrase fails with 77")
    func wrongPassphrase() throws {
        let vault = try sandbox.initVault()
        let r = try sandbox.coffer(["vault", "show", "--vault", vault], env: ["COFFER_PASSPHRASE": CofferProcess.wrongPassphrase])
        expectError(r, 77)
        let json = try sandbox.coffer(["vault", "show", "--json", "--vault", vault], env: ["COFFER_PASSPHRASE": CofferProcess.wrongPassphrase])
        expectError(json, 77)
    }

    @Test("a missing vault fails with 66 and names the path")
    func missingVault() throws {
        let vault = sandbox.path("nowhere.coffer")
        let r = try sandbox.coffer(["vault", "show", "--vault", vault], env: withPassphrase)
        expectError(r, 66, mentioning: vault)
        let defaultPlace = try sandbox.coffer(["vault", "show"], env: withPassphrase)
        expectError(defaultPlace, 66)
    }

    @Test("no passphrase and no terminal: 64 at once, never a hanging prompt")
    func noPassphraseNoTerminal() throws {
        let vault = try sandbox.initVault()
        let show = try sandbox.coffer(["vault", "show", "--vault", vault], stdin: .null)
        expectError(show, 64)
        #expect(show.seconds < 10, "took \(show.seconds) s")
        #expect(!show.timedOut)

        let fresh = sandbox.path("fresh.coffer")
        let create = try sandbox.coffer(["vault", "init", "--name", "Nobody", "--kdf", "min", "--vault", fresh], stdin: .null)
        #expect(create.status == 64, "\(create)")
        #expect(create.seconds < 10)
        #expect(!sandbox.exists(fresh), "vault init without a passphrase left a file")
        // Only the error line, perhaps after the min-preset warning.
        let lines = create.err.components(separatedBy: "\n").filter { !$0.isEmpty && $0 != CofferProcess.minKDFWarning }
        #expect(lines.count == 1 && lines[0].hasPrefix("error: "), "\(create)")

        // With data on stdin (a pipe, not a terminal) it must not read the passphrase from there either.
        let piped = try sandbox.coffer(["vault", "show", "--vault", vault], stdin: .text(CofferProcess.passphrase + "\n"))
        expectError(piped, 64)
    }

    @Test("an empty COFFER_PASSPHRASE is not a passphrase: 64")
    func emptyPassphraseVariable() throws {
        let vault = try sandbox.initVault()
        let r = try sandbox.coffer(["vault", "show", "--vault", vault], env: ["COFFER_PASSPHRASE": ""])
        expectError(r, 64)
    }

    // MARK: - passphrase files

    @Test("--passphrase-file reads the first line only")
    func passphraseFileFirstLine() throws {
        let vault = try sandbox.initVault()
        let good = try sandbox.write("pass.txt", CofferProcess.passphrase + "\nsecond line is ignored\n")
        let r = try sandbox.coffer(["vault", "show", "--json", "--vault", vault, "--passphrase-file", good])
        expectSuccess(r)
        #expect(try jsonObject(r)["name"] as? String == "Alice")

        let noNewline = try sandbox.write("pass-nonl.txt", CofferProcess.passphrase)
        expectSuccess(try sandbox.coffer(["vault", "show", "--vault", vault, "--passphrase-file", noNewline]))

        // The right passphrase on the second line does not count.
        let second = try sandbox.write("pass2.txt", CofferProcess.wrongPassphrase + "\n" + CofferProcess.passphrase + "\n")
        expectError(try sandbox.coffer(["vault", "show", "--vault", vault, "--passphrase-file", second]), 77)
    }

    @Test("--passphrase-file drops a CRLF line ending, both when creating and when opening")
    func passphraseFileCRLF() throws {
        let crlf = try sandbox.write("pass-crlf.txt", CofferProcess.passphrase + "\r\nignored\r\n")
        let vault = sandbox.path("crlf.coffer")
        let create = try sandbox.coffer(["vault", "init", "--name", "Win", "--kdf", "min", "--vault", vault, "--passphrase-file", crlf])
        expectSuccess(create, kdfWarning: true)
        // The passphrase is the line without "\r".
        #expect(try sandbox.showJSON(vault)["name"] as? String == "Win")
        expectSuccess(try sandbox.coffer(["vault", "show", "--vault", vault, "--passphrase-file", crlf]))
        expectError(try sandbox.coffer(["vault", "show", "--vault", vault], env: ["COFFER_PASSPHRASE": CofferProcess.passphrase + "\r"]), 77)
    }

    @Test("COFFER_PASSPHRASE_FILE works like --passphrase-file")
    func passphraseFileEnvironment() throws {
        let vault = try sandbox.initVault()
        let file = try sandbox.write("pass.txt", CofferProcess.passphrase + "\n")
        let r = try sandbox.coffer(["vault", "show", "--json", "--vault", vault], env: ["COFFER_PASSPHRASE_FILE": file])
        expectSuccess(r)
        #expect(try jsonObject(r)["name"] as? String == "Alice")
        let wrong = try sandbox.write("wrong.txt", CofferProcess.wrongPassphrase + "\n")
        expectError(try sandbox.coffer(["vault", "show", "--vault", vault], env: ["COFFER_PASSPHRASE_FILE": wrong]), 77)
    }

    @Test("a missing passphrase file fails with one error line")
    func missingPassphraseFile() throws {
        let vault = try sandbox.initVault()
        let r = try sandbox.coffer(["vault", "show", "--vault", vault, "--passphrase-file", sandbox.path("no-such-file")])
        expectError(r, 66)
    }

    @Test("a passphrase file with an empty first line: 64")
    func emptyPassphraseFile() throws {
        let vault = try sandbox.initVault()
        let file = try sandbox.write("empty.txt", "\n" + CofferProcess.passphrase + "\n")
        expectError(try sandbox.coffer(["vault", "show", "--vault", vault, "--passphrase-file", file]), 64)
    }

    // MARK: - environment and flag placement

    @Test("COFFER_VAULT replaces --vault")
    func vaultEnvironmentVariable() throws {
        let vault = sandbox.path("env.coffer")
        let create = try sandbox.coffer(["vault", "init", "--name", "Envy", "--kdf", "min"],
                                        env: ["COFFER_VAULT": vault, "COFFER_PASSPHRASE": CofferProcess.passphrase])
        expectSuccess(create, kdfWarning: true)
        #expect(sandbox.exists(vault))
        #expect(!sandbox.exists(sandbox.dataHome.appendingPathComponent("coffer/vault.coffer").path))
        let show = try sandbox.coffer(["vault", "show", "--json"], env: ["COFFER_VAULT": vault, "COFFER_PASSPHRASE": CofferProcess.passphrase])
        expectSuccess(show)
        #expect(try jsonObject(show)["name"] as? String == "Envy")
        // The flag wins over the variable.
        let other = try sandbox.initVault("other.coffer", name: "Flag")
        let both = try sandbox.coffer(["vault", "show", "--json", "--vault", other],
                                      env: ["COFFER_VAULT": vault, "COFFER_PASSPHRASE": CofferProcess.passphrase])
        expectSuccess(both)
        #expect(try jsonObject(both)["name"] as? String == "Flag")
    }

    @Test("global flags are accepted after the command words, in any order")
    func globalFlagsAfterCommandWords() throws {
        let vault = try sandbox.initVault()
        let passFile = try sandbox.write("p.txt", CofferProcess.passphrase + "\n")
        let orders: [[String]] = [
            ["vault", "show", "--json", "--vault", vault],
            ["vault", "show", "--vault", vault, "--json"],
            ["vault", "show", "--passphrase-file", passFile, "--json", "--vault", vault],
            ["vault", "show", "--vault=\(vault)", "--json", "--passphrase-file=\(passFile)"],
        ]
        for args in orders {
            let env = args.contains { $0.hasPrefix("--passphrase-file") } ? [:] : withPassphrase
            let r = try sandbox.coffer(args, env: env)
            expectSuccess(r)
            #expect(try jsonObject(r)["name"] as? String == "Alice", "\(r)")
        }
    }

    @Test("vault passwd --json and vault keyfile --json give typed values; keyfile refuses --output -")
    func passwdAndKeyfileJSON() throws {
        let vault = try sandbox.initVault()
        let key = sandbox.path("svc.key")
        let written = try jsonObject(try sandbox.coffer(["vault", "keyfile", "--output", key, "--json", "--vault", vault], env: withPassphrase))
        #expect(written["keyFiles"] as? Int == 1)
        expectError(try sandbox.coffer(["vault", "keyfile", "--output", "-", "--vault", vault], env: withPassphrase), 64)
        #expect(!sandbox.exists(sandbox.path("-")))
        let changed = try jsonObject(try sandbox.coffer(["vault", "passwd", "--json", "--vault", vault],
                                                        env: ["COFFER_PASSPHRASE": CofferProcess.passphrase, "COFFER_NEW_PASSPHRASE": CofferProcess.newPassphrase]))
        #expect(changed["rekeyed"] as? Bool == false)
    }

    @Test("a passphrase file or vault path that is a folder says so")
    func foldersSaySo() throws {
        let vault = try sandbox.initVault()
        let folder = sandbox.path("a-folder")
        try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
        let r = try sandbox.coffer(["vault", "show", "--vault", vault, "--passphrase-file", folder])
        expectError(r, 66)
        #expect(r.err.contains("is a folder"), "\(r)")
        let i = try sandbox.coffer(["vault", "init", "--name", "A", "--kdf", "min", "--vault", folder], env: withPassphrase)
        expectError(i, 73)
        #expect(i.err.contains("is a folder"), "\(i)")
    }

    // MARK: - passwd

    @Test("vault passwd: the old passphrase then fails with 77, the new one works, the identity stays")
    func passwdChangesPassphrase() throws {
        let vault = try sandbox.initVault()
        let before = try sandbox.showJSON(vault)
        let r = try sandbox.coffer(["vault", "passwd", "--vault", vault],
                                   env: ["COFFER_PASSPHRASE": CofferProcess.passphrase, "COFFER_NEW_PASSPHRASE": CofferProcess.newPassphrase])
        expectSuccess(r)
        #expect(r.out.contains("Passphrase changed"), "\(r)")
        // It says what stays true, and no longer offers --rekey as a cure for old copies.
        #expect(r.out.contains("An old copy of the vault file still opens with the old passphrase and yields your identity"), "\(r)")
        #expect(r.out.contains("--rekey does not change that"), "\(r)")
        #expect(!r.out.contains("to prevent that"), "\(r)")
        expectError(try sandbox.coffer(["vault", "show", "--vault", vault], env: withPassphrase), 77)
        let after = try sandbox.showJSON(vault, env: ["COFFER_PASSPHRASE": CofferProcess.newPassphrase])
        #expect(after["userID"] as? String == before["userID"] as? String)
        #expect(after["fingerprint"] as? String == before["fingerprint"] as? String)
        #expect(after["name"] as? String == "Alice")
        let bytes = try sandbox.read(vault)
        #expect(!contains(bytes, CofferProcess.newPassphrase))
    }

    @Test("vault passwd with a wrong old passphrase: 77 and nothing changes")
    func passwdWrongOldPassphrase() throws {
        let vault = try sandbox.initVault()
        let before = try sandbox.read(vault)
        let r = try sandbox.coffer(["vault", "passwd", "--vault", vault],
                                   env: ["COFFER_PASSPHRASE": CofferProcess.wrongPassphrase, "COFFER_NEW_PASSPHRASE": CofferProcess.newPassphrase])
        expectError(r, 77)
        #expect(try sandbox.read(vault) == before)
        expectSuccess(try sandbox.coffer(["vault", "show", "--vault", vault], env: withPassphrase))
    }

    @Test("vault passwd with no new passphrase and no terminal: 64, the old passphrase still works")
    func passwdWithoutNewPassphrase() throws {
        let vault = try sandbox.initVault()
        let r = try sandbox.coffer(["vault", "passwd", "--vault", vault], env: withPassphrase, stdin: .null)
        expectError(r, 64)
        // It names where the new passphrase comes from (--passphrase-file gives the current one).
        #expect(r.err.contains("COFFER_NEW_PASSPHRASE_FILE") && !r.err.contains("--passphrase-file"), "\(r)")
        #expect(r.seconds < 10)
        expectSuccess(try sandbox.coffer(["vault", "show", "--vault", vault], env: withPassphrase))
    }

    @Test("vault passwd --rekey: a key file stops working (77), the new passphrase works")
    func passwdRekeyInvalidatesKeyFile() throws {
        let vault = try sandbox.initVault()
        let userID = try sandbox.showJSON(vault)["userID"] as? String
        let key = sandbox.path("svc.key")
        expectSuccess(try sandbox.coffer(["vault", "keyfile", "--output", key, "--vault", vault], env: withPassphrase))
        expectSuccess(try sandbox.coffer(["vault", "show", "--vault", vault, "--key-file", key]))

        let oldCopy = try sandbox.write("old-copy.coffer", try sandbox.read(vault))

        let r = try sandbox.coffer(["vault", "passwd", "--rekey", "--vault", vault],
                                   env: ["COFFER_PASSPHRASE": CofferProcess.passphrase, "COFFER_NEW_PASSPHRASE": CofferProcess.newPassphrase])
        expectSuccess(r)
        expectError(try sandbox.coffer(["vault", "show", "--vault", vault, "--key-file", key]), 77)
        expectError(try sandbox.coffer(["vault", "show", "--vault", vault], env: withPassphrase), 77)
        let after = try sandbox.showJSON(vault, env: ["COFFER_PASSPHRASE": CofferProcess.newPassphrase])
        #expect(after["userID"] as? String == userID)

        // What it says is what happens: the old copy still opens with the old passphrase and the
        // old key file, and yields the same identity.
        #expect(r.out.contains("key files and the old passphrase no longer open this file"), "\(r)")
        #expect(r.out.contains("an old copy of the vault file still opens with the old passphrase or an old key file and yields your identity"), "\(r)")
        #expect(try sandbox.showJSON(oldCopy)["userID"] as? String == userID)
        let viaKey = try sandbox.coffer(["vault", "show", "--json", "--vault", oldCopy, "--key-file", key])
        expectSuccess(viaKey)
        #expect(try jsonObject(viaKey)["userID"] as? String == userID)
        let help = try sandbox.coffer(["vault", "passwd", "--help"])
        let helpText = help.out.split(whereSeparator: \.isWhitespace).joined(separator: " ") // help wraps lines
        #expect(helpText.contains("an old copy of the vault file still opens with the old passphrase"), "\(help)")
        #expect(helpText.contains("only a new identity makes old copies worthless"), "\(help)")
    }

    @Test("vault passwd without --rekey keeps key files working")
    func passwdKeepsKeyFiles() throws {
        let vault = try sandbox.initVault()
        let key = sandbox.path("svc.key")
        expectSuccess(try sandbox.coffer(["vault", "keyfile", "--output", key, "--vault", vault], env: withPassphrase))
        expectSuccess(try sandbox.coffer(["vault", "passwd", "--vault", vault],
                                         env: ["COFFER_PASSPHRASE": CofferProcess.passphrase, "COFFER_NEW_PASSPHRASE": CofferProcess.newPassphrase]))
        let r = try sandbox.coffer(["vault", "show", "--json", "--vault", vault, "--key-file", key])
        expectSuccess(r)
        #expect(try jsonObject(r)["name"] as? String == "Alice")
    }

    // MARK: - keyfile

    @Test("vault keyfile --output writes 32 bytes with mode 0600, and --key-file unlocks without a passphrase")
    func keyfileUnlocks() throws {
        let vault = try sandbox.initVault()
        let userID = try sandbox.showJSON(vault)["userID"] as? String
        let key = sandbox.path("service.key")
        let r = try sandbox.coffer(["vault", "keyfile", "--output", key, "--vault", vault], env: withPassphrase)
        expectSuccess(r)
        #expect(r.out.contains(key), "\(r)")
        let bytes = try sandbox.read(key)
        #expect(bytes.count == 32)
        #expect(Set(bytes).count > 8, "the key file does not look random")
        #expect(try posixMode(key) == 0o600)

        let show = try sandbox.coffer(["vault", "show", "--json", "--key-file", key, "--vault", vault])
        expectSuccess(show)
        #expect(try jsonObject(show)["userID"] as? String == userID)
        // The passphrase still works too.
        expectSuccess(try sandbox.coffer(["vault", "show", "--vault", vault], env: withPassphrase))
        let text = try sandbox.coffer(["vault", "show", "--vault", vault, "--key-file", key])
        expectSuccess(text)
        #expect(fields(text.out)["Unlocks with"]?.contains("1 key file") == true, "\(text)")
    }

    @Test("COFFER_KEY_FILE unlocks like --key-file")
    func keyfileEnvironment() throws {
        let vault = try sandbox.initVault()
        let key = sandbox.path("service.key")
        expectSuccess(try sandbox.coffer(["vault", "keyfile", "--output", key, "--vault", vault], env: withPassphrase))
        let r = try sandbox.coffer(["vault", "show", "--json", "--vault", vault], env: ["COFFER_KEY_FILE": key])
        expectSuccess(r)
        #expect(try jsonObject(r)["name"] as? String == "Alice")
    }

    @Test("a wrong key file (32 random bytes) fails with 77")
    func wrongKeyFile() throws {
        let vault = try sandbox.initVault()
        expectSuccess(try sandbox.coffer(["vault", "keyfile", "--output", sandbox.path("real.key"), "--vault", vault], env: withPassphrase))
        let fake = try sandbox.writePrivate("fake.key", randomBytes(32))
        expectError(try sandbox.coffer(["vault", "show", "--vault", vault, "--key-file", fake]), 77)
        expectError(try sandbox.coffer(["vault", "show", "--vault", vault], env: ["COFFER_KEY_FILE": fake]), 77)
        // A vault with no key file at all refuses a key file too.
        let plain = try sandbox.initVault("plain.coffer")
        expectError(try sandbox.coffer(["vault", "show", "--vault", plain, "--key-file", fake]), 77)
    }

    @Test("a key file that is not 32 bytes fails with 65")
    func malformedKeyFile() throws {
        let vault = try sandbox.initVault()
        let short = try sandbox.writePrivate("short.key", randomBytes(10))
        expectError(try sandbox.coffer(["vault", "show", "--vault", vault, "--key-file", short]), 65)
        let long = try sandbox.writePrivate("long.key", randomBytes(33))
        expectError(try sandbox.coffer(["vault", "show", "--vault", vault, "--key-file", long]), 65)
    }

    @Test("a key file that group or others may read is refused with 77, naming it and chmod 600; once private it unlocks")
    func keyFileOpenToOthers() throws {
        let vault = try sandbox.initVault()
        let key = sandbox.path("svc.key")
        expectSuccess(try sandbox.coffer(["vault", "keyfile", "--output", key, "--vault", vault], env: withPassphrase))
        for mode in [0o644, 0o640, 0o604, 0o660] {
            try sandbox.chmod(key, mode)
            for r in [try sandbox.coffer(["vault", "show", "--vault", vault, "--key-file", key]),
                      try sandbox.coffer(["vault", "item", "list", "--vault", vault], env: ["COFFER_KEY_FILE": key])] {
                expectError(r, 77, mentioning: key)
                #expect(r.err.contains("chmod 600"), "\(r)")
            }
        }
        try sandbox.chmod(key, 0o600)
        expectSuccess(try sandbox.coffer(["vault", "show", "--vault", vault, "--key-file", key]))
    }

    @Test("a missing key file fails with 66")
    func missingKeyFile() throws {
        let vault = try sandbox.initVault()
        expectError(try sandbox.coffer(["vault", "show", "--vault", vault, "--key-file", sandbox.path("absent.key")]), 66)
    }

    @Test("vault keyfile onto an existing path fails with 73 and leaves both files alone")
    func keyfileOntoExistingPath() throws {
        let vault = try sandbox.initVault()
        let existing = try sandbox.write("taken.key", "keep me\n")
        let before = try sandbox.read(vault)
        let r = try sandbox.coffer(["vault", "keyfile", "--output", existing, "--vault", vault], env: withPassphrase)
        expectError(r, 73)
        #expect(try sandbox.read(existing) == Data("keep me\n".utf8))
        #expect(try sandbox.read(vault) == before)
    }
}

import CofferCrypto
import CofferTestSupport
import Foundation
import Testing
@testable import CofferVault

/// Vault files of format v1 committed in `Keys/` (throwaway passphrases, see `Keys/README.md`).
/// Each is opened from a temporary copy and must show the identity and item recorded when
/// it was made: a change that breaks old vaults fails here.
@Suite("Vault fixtures in Keys/")
struct VaultFixtureTests {
    struct ItemSpec: Sendable {
        var service: String
        var account: String
        var label: String
        var itemClass: VaultItem.ItemClass
        var attributes: [String: String]
        var secret: String
    }

    /// What a fixture is made from (chosen), and what it turned out to be (recorded).
    struct Fixture: Sendable, CustomTestStringConvertible {
        var file: String
        var keyFile: String?
        var presetName: String
        var preset: Argon2id.Parameters
        var passphrase: String
        var name: String
        var email: String?
        var item: ItemSpec
        // Recorded when the fixture was written (random at creation):
        var userID: String
        var fingerprint: String
        var createdMillis: Int64

        var testDescription: String { file }
    }

    static let fixtures: [Fixture] = [
        Fixture(file: "vault-v1-min.coffer", keyFile: "vault-v1-min.key", presetName: "min", preset: .min,
                passphrase: "throwaway fixture passphrase v1-min",
                name: "Fixture Alice", email: "alice@fixtures.example",
                item: ItemSpec(service: "db.fixtures.example", account: "alice", label: "Fixture database",
                               itemClass: .generic, attributes: ["env": "fixture", "purpose": "format-v1"],
                               secret: "fixture-secret-v1-min"),
                userID: "a0c6f2d5642152e45ed513e1c32e448b",
                fingerprint: "69036 55406 01821 55855 61612 02303 17146 06886",
                createdMillis: 1_795_315_686_675),
        Fixture(file: "vault-v1-interactive.coffer", keyFile: nil, presetName: "interactive", preset: .interactive,
                passphrase: "throwaway fixture passphrase v1-interactive",
                name: "Fixture Bob", email: nil,
                item: ItemSpec(service: "notes", account: "bob", label: "Fixture note",
                               itemClass: .note, attributes: [:],
                               secret: "fixture-secret-v1-interactive"),
                userID: "f590a7ac0a6faa86397330194f1b0313",
                fingerprint: "94847 62910 46820 14160 47890 52678 76283 41701",
                createdMillis: 1_795_315_686_789),
    ]

    /// `Keys/` at the top of the package, found from this file's path.
    static let keysFolder = URL(fileURLWithPath: #filePath)
        .deletingLastPathComponent() // CofferVaultTests
        .deletingLastPathComponent() // Tests
        .deletingLastPathComponent() // package root
        .appendingPathComponent("Keys", isDirectory: true)

    // MARK: - Reading the fixtures

    @Test(arguments: fixtures)
    func fixtureOpensWithTheRecordedIdentityAndItem(_ fixture: Fixture) throws {
        let source = Self.keysFolder.appendingPathComponent(fixture.file)
        let original = try readBytes(source)
        try withTemporaryFolder { folder in
            // Never open or change Keys/ itself: work on a copy.
            let url = folder.appendingPathComponent(fixture.file)
            try writeBytes(original, to: url)

            // Format v1 on disk.
            #expect(Array(original[0..<8]) == Array("COFFERVT".utf8))
            #expect(Array(original[8..<10]) == [0x00, 0x01], "format version 1")

            let vault = try Vault.open(at: url, passphrase: secure(fixture.passphrase))
            #expect(vault.identity.name == fixture.name)
            #expect(vault.identity.email == fixture.email)
            #expect(vault.identity.userID == fixture.userID)
            #expect(vault.identity.fingerprint == fixture.fingerprint)
            #expect(vault.identity.userID == UserIdentity.userID(for: vault.identity.signingKey))
            #expect(vault.created == Date(timeIntervalSince1970: Double(fixture.createdMillis) / 1000))
            #expect(vault.passphraseParameters == fixture.preset)
            #expect(vault.keyFileCount == (fixture.keyFile == nil ? 0 : 1))

            let items = vault.items()
            #expect(items.count == 1)
            let item = try vault.item(service: fixture.item.service, account: fixture.item.account, itemClass: fixture.item.itemClass)
            #expect(item.label == fixture.item.label)
            #expect(item.attributes == fixture.item.attributes)
            #expect(item.secret == secure(fixture.item.secret))
            #expect(item.created >= fixture.createdMillis)

            // The identity's private keys are whole: they sign, and the signature checks.
            let message = Array("fixture \(fixture.file)".utf8)
            #expect(vault.identity.signingKey.isValidSignature(vault.signingKey.signature(for: message), for: message))
            #expect(vault.boxKey.publicKey == vault.identity.boxKey)

            expectVaultError(.wrongPassphrase) { try Vault.open(at: url, passphrase: secure(fixture.passphrase + "x")) }

            // An old vault can be written by this build, and reads back.
            try vault.addItem(service: "added", account: "by-this-build", secret: secure("new"))
            let again = try Vault.open(at: url, passphrase: secure(fixture.passphrase))
            #expect(again.items().count == 2)
            #expect(again.identity == vault.identity)
        }
        #expect(try readBytes(source) == original, "Keys/\(fixture.file) was not modified")
    }

    @Test(arguments: fixtures.filter { $0.keyFile != nil })
    func fixtureOpensWithItsKeyFile(_ fixture: Fixture) throws {
        let keyName = try #require(fixture.keyFile)
        let vaultSource = Self.keysFolder.appendingPathComponent(fixture.file)
        let keySource = Self.keysFolder.appendingPathComponent(keyName)
        #expect(try readBytes(keySource).count == 32)
        try withTemporaryFolder { folder in
            let url = folder.appendingPathComponent(fixture.file)
            let keyURL = folder.appendingPathComponent(keyName)
            try copyFile(vaultSource, to: url)
            // Git checks the fixture out as 0644, which a key file may not be: a private copy.
            try writePrivateBytes(try readBytes(keySource), to: keyURL)
            let vault = try Vault.open(at: url, unlock: .keyFile(at: keyURL))
            #expect(vault.identity.userID == fixture.userID)
            #expect(vault.identity.fingerprint == fixture.fingerprint)
            #expect(try vault.item(service: fixture.item.service, account: fixture.item.account,
                                   itemClass: fixture.item.itemClass).secret == secure(fixture.item.secret))
        }
    }

    /// The README records what the tests assert, and says what these files are.
    @Test func readmeRecordsEveryFixture() throws {
        let readme = try String(contentsOf: Self.keysFolder.appendingPathComponent("README.md"), encoding: .utf8)
        #expect(readme.localizedCaseInsensitiveContains("throwaway"))
        #expect(readme.contains("never go into git"))
        for fixture in Self.fixtures {
            for text in [fixture.file, fixture.presetName, fixture.passphrase, fixture.name, fixture.userID, fixture.fingerprint,
                         fixture.item.service, fixture.item.account, fixture.item.secret] {
                #expect(readme.contains(text), "Keys/README.md does not mention '\(text)' (\(fixture.file))")
            }
            if let email = fixture.email { #expect(readme.contains(email)) }
            if let keyFile = fixture.keyFile { #expect(readme.contains(keyFile)) }
        }
    }

    /// Only the listed fixtures and the README live in Keys/: a real vault or key file
    /// dropped there by mistake fails this test before it reaches a commit.
    /// Store fixtures, checked by the store's tests (`StoreFixtureTests`).
    static let storeFixtures = ["store-v5.sqlite", "store-v6.sqlite", "store-v7.sqlite", "backup-v1.backup", "backup-v2.backup",
                                      "log-entries.json"]
    /// Marks file fixtures, checked by `MarkBookTests`.
    static let marksFixtures = [MarkBookTests.fixtureFile]

    @Test func keysHoldsOnlyTheFixtures() throws {
        let expected = Set(Self.fixtures.flatMap { [$0.file] + ($0.keyFile.map { [$0] } ?? []) } + ["README.md"]
                           + Self.storeFixtures + Self.marksFixtures)
        let present = Set(try folderContents(Self.keysFolder)).subtracting([".DS_Store"])
        #expect(present == expected)
    }

    // MARK: - Writing the fixtures

    /// Writes the fixtures and Keys/README.md. Run once, on purpose:
    /// `COFFER_WRITE_FIXTURES=1 swift test --filter writeFixtures`, then copy the recorded
    /// user ids, fingerprints and creation times into ``fixtures``. Refuses to replace
    /// existing fixtures: old ones stay, so that old vaults keep being tested.
    @Test(.enabled(if: ProcessInfo.processInfo.environment["COFFER_WRITE_FIXTURES"] == "1",
                   "writes the vault fixtures in Keys/ only when COFFER_WRITE_FIXTURES=1"))
    func writeFixtures() throws {
        let keys = Self.keysFolder
        try FileManager.default.createDirectory(at: keys, withIntermediateDirectories: true)
        for fixture in Self.fixtures {
            for name in [fixture.file] + (fixture.keyFile.map { [$0] } ?? []) {
                guard !FileManager.default.fileExists(atPath: keys.appendingPathComponent(name).path) else {
                    Issue.record("Keys/\(name) exists; fixtures are never replaced (delete it by hand to re-make it)")
                    return
                }
            }
        }
        var recorded = [Fixture]()
        try withTemporaryFolder { folder in
            for var fixture in Self.fixtures {
                // Made in a temporary folder, so that no lock sidecar lands in Keys/.
                let url = folder.appendingPathComponent(fixture.file)
                let vault = try Vault.create(at: url, name: fixture.name, email: fixture.email,
                                             passphrase: secure(fixture.passphrase), kdf: fixture.preset)
                try vault.addItem(service: fixture.item.service, account: fixture.item.account, label: fixture.item.label,
                                  itemClass: fixture.item.itemClass, attributes: fixture.item.attributes,
                                  secret: secure(fixture.item.secret))
                if let keyFile = fixture.keyFile {
                    let keyURL = folder.appendingPathComponent(keyFile)
                    try vault.addKeyFile(at: keyURL)
                    try copyFile(keyURL, to: keys.appendingPathComponent(keyFile))
                }
                try copyFile(url, to: keys.appendingPathComponent(fixture.file))
                fixture.userID = vault.identity.userID
                fixture.fingerprint = vault.identity.fingerprint
                fixture.createdMillis = Int64((vault.created.timeIntervalSince1970 * 1000).rounded())
                recorded.append(fixture)
                print("""
                    fixture \(fixture.file): userID: "\(fixture.userID)", fingerprint: "\(fixture.fingerprint)", \
                    createdMillis: \(fixture.createdMillis)
                    """)
            }
        }
        try Data(Self.readme(recorded).utf8).write(to: keys.appendingPathComponent("README.md"))
    }

    static func readme(_ fixtures: [Fixture]) -> String {
        var out = """
            # Keys/: vault fixtures — throwaway, for tests only

            **These are throwaway test fixtures, not anybody's keys.** Their passphrases are written
            below on purpose: the files protect nothing and hold only made-up identities and secrets.

            **Real vaults and key files never go into git.** `.gitignore` ignores `*.coffer` and
            `*.cofferkey` everywhere and lets through only `Keys/*.coffer` (the fixture key file is
            named `*.key` so that git keeps it); the test
            `VaultFixtureTests.keysHoldsOnlyTheFixtures` fails if anything but the files listed here
            appears in this folder. Keep your own vault outside the repository.

            ## Why they are here

            `Tests/CofferVaultTests/VaultFixtureTests.swift` opens a temporary copy of each file (never
            the file itself) and checks the identity and the item recorded below. A change to the vault
            format or to the key derivation that would lock users out of their existing vaults fails that
            test. Do not re-make these files to make a test pass: old fixtures stay, and a new format
            version adds new fixtures next to them.

            The files were written by `VaultFixtureTests.writeFixtures`, which runs only with
            `COFFER_WRITE_FIXTURES=1` and refuses to replace existing fixtures:

            ```
            COFFER_WRITE_FIXTURES=1 swift test --filter VaultFixtureTests/writeFixtures
            ```

            ## Fixtures (format v1)

            """
        for f in fixtures {
            let passes = f.preset.opsLimit == 1 ? "1 pass" : "\(f.preset.opsLimit) passes"
            let preset = "`\(f.presetName)` (Argon2id: \(passes), \(f.preset.memoryKiB) KiB)"
            out += """

                ### `\(f.file)`

                | | |
                | --- | --- |
                | preset | \(preset) |
                | passphrase | `\(f.passphrase)` |
                | key file | \(f.keyFile.map { "`\($0)` (32 bytes; also opens this vault)" } ?? "none") |
                | name | `\(f.name)` |
                | email | \(f.email.map { "`\($0)`" } ?? "none") |
                | userID | `\(f.userID)` |
                | fingerprint | `\(f.fingerprint)` |
                | created | \(f.createdMillis) ms since 1970 |
                | item class | `\(f.item.itemClass)` |
                | item service | `\(f.item.service)` |
                | item account | `\(f.item.account)` |
                | item label | `\(f.item.label)` |
                | item attributes | \(f.item.attributes.isEmpty ? "none" : f.item.attributes.sorted { $0.key < $1.key }.map { "`\($0.key)=\($0.value)`" }.joined(separator: ", ")) |
                | item secret | `\(f.item.secret)` |

                """
        }
        return out
    }
}

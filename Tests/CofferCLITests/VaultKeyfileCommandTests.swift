import CofferCrypto
import CofferTestSupport
@testable import CofferVault
import Foundation
import Testing

/// `coffer vault keyfile --list` and `--revoke ID`, and the id `--output` prints; the weak
/// passphrase warning of `vault init` and `vault passwd`.
@Suite("coffer vault keyfile --list and --revoke; weak passphrase warnings")
struct VaultKeyfileCommandTests {
    let sandbox: Sandbox
    let vault: String

    init() throws {
        sandbox = try Sandbox()
        vault = try sandbox.initVault()
    }

    func coffer(_ args: [String], env: [String: String] = withPassphrase, sourceLocation: SourceLocation = #_sourceLocation) throws -> CofferResult {
        try sandbox.coffer(args + ["--vault", vault], env: env, sourceLocation: sourceLocation)
    }

    /// `vault keyfile --output FILE --json`, expecting success; the new id.
    func newKeyFile(_ name: String, sourceLocation: SourceLocation = #_sourceLocation) throws -> (path: String, id: String) {
        let path = sandbox.path(name)
        let r = try coffer(["vault", "keyfile", "--output", path, "--json"], sourceLocation: sourceLocation)
        expectSuccess(r, sourceLocation: sourceLocation)
        let id = try #require(try jsonObject(r)["id"] as? String, sourceLocation: sourceLocation)
        return (path, id)
    }

    func listedIDs(sourceLocation: SourceLocation = #_sourceLocation) throws -> [String] {
        let r = try coffer(["vault", "keyfile", "--list", "--json"], sourceLocation: sourceLocation)
        expectSuccess(r, sourceLocation: sourceLocation)
        let object = try jsonObject(r)
        #expect(object["passphrase"] as? Bool == true, sourceLocation: sourceLocation)
        return try #require(object["keyFiles"] as? [[String: Any]], sourceLocation: sourceLocation).compactMap { $0["id"] as? String }
    }

    @Test("--output prints the new id; --list shows every id and no secret; --revoke removes one, the others and the passphrase still open")
    func listAndRevoke() throws {
        #expect(try listedIDs().isEmpty)
        let text = try coffer(["vault", "keyfile", "--list"])
        expectSuccess(text)
        #expect(text.out == "No key files.\n")

        let firstPath = sandbox.path("one.key")
        let written = try coffer(["vault", "keyfile", "--output", firstPath])
        expectSuccess(written)
        #expect(written.out.hasPrefix("Wrote key file \(firstPath) (mode 0600). Anyone holding it can open the vault: guard it.\n"), "\(written)")
        let firstID = try #require(written.outLines.last?.split(separator: " ").dropFirst(3).first.map { String($0) })
        #expect(firstID.count == 16 && firstID.allSatisfy(\.isHexDigit), "\(written)")
        let second = try newKeyFile("two.key")
        #expect(try listedIDs() == [firstID, second.id])
        let listed = try coffer(["vault", "keyfile", "--list"])
        expectSuccess(listed)
        #expect(listed.outLines == ["ID", firstID, second.id], "\(listed)")
        // The ids say nothing of the key files.
        for path in [firstPath, second.path] {
            let key = try sandbox.read(path)
            for (form, needle) in keyEncodings(Array(key)) { #expect(listed.stdout.range(of: needle) == nil, "the list shows a key (\(form))") }
        }
        // A passphrase change keeps the ids.
        expectSuccess(try coffer(["vault", "passwd"], env: withPassphrase.merging(["COFFER_NEW_PASSPHRASE": CofferProcess.newPassphrase]) { _, n in n }))
        let newPassphrase = ["COFFER_PASSPHRASE": CofferProcess.newPassphrase]
        #expect(try coffer(["vault", "keyfile", "--list", "--json"], env: newPassphrase).status == 0)

        let revoked = try coffer(["vault", "keyfile", "--revoke", firstID, "--json"], env: newPassphrase)
        expectSuccess(revoked)
        #expect(try jsonObject(revoked)["revoked"] as? String == firstID && jsonObject(revoked)["keyFiles"] as? Int == 1)
        expectFailure(try coffer(["vault", "show", "--key-file", firstPath], env: [:]), 77)
        expectSuccess(try coffer(["vault", "show", "--key-file", second.path], env: [:]))
        expectSuccess(try coffer(["vault", "show"], env: newPassphrase))
        #expect(try coffer(["vault", "keyfile", "--list", "--json"], env: newPassphrase).out.contains(second.id))

        // Unknown or already revoked: 66, nothing changes.
        expectFailure(try coffer(["vault", "keyfile", "--revoke", firstID], env: newPassphrase), 66, mentioning: firstID)
        expectFailure(try coffer(["vault", "keyfile", "--revoke", "0011223344556677"], env: newPassphrase), 66)
        expectSuccess(try coffer(["vault", "show", "--key-file", second.path], env: [:]))
        let text2 = try coffer(["vault", "keyfile", "--revoke", second.id], env: newPassphrase)
        expectSuccess(text2)
        #expect(text2.out.hasPrefix("Revoked key file \(second.id)"), "\(text2)")
        expectFailure(try coffer(["vault", "show", "--key-file", second.path], env: [:]), 77)
    }

    @Test("the last slot that opens the vault cannot be revoked (77); the vault is unchanged")
    func lastSlot() throws {
        let key = try newKeyFile("only.key")
        // A vault that only this key file opens: its passphrase slot removed through the library.
        let opened = try Vault.open(at: URL(fileURLWithPath: vault), passphrase: SecureBytes(copying: Array(CofferProcess.passphrase.utf8)))
        try opened.mutate { $0.header.slots.removeAll { $0.type == .passphrase } }
        let before = try sandbox.read(vault)
        let r = try coffer(["vault", "keyfile", "--revoke", key.id, "--key-file", key.path], env: [:])
        expectFailure(r, 77, mentioning: "only way left")
        #expect(try sandbox.read(vault) == before)
        let listed = try coffer(["vault", "keyfile", "--list", "--json", "--key-file", key.path], env: [:])
        expectSuccess(listed)
        #expect(try jsonObject(listed)["passphrase"] as? Bool == false)
    }

    @Test("keyfile takes exactly one of --output, --list, --revoke (64)")
    func keyfileUsage() throws {
        expectFailure(try coffer(["vault", "keyfile"]), 64)
        expectFailure(try coffer(["vault", "keyfile", "--list", "--output", sandbox.path("x.key")]), 64)
        expectFailure(try coffer(["vault", "keyfile", "--list", "--revoke", "0011223344556677"]), 64)
        #expect(!sandbox.exists(sandbox.path("x.key")))
    }

    @Test("a weak new passphrase gets a warning with an estimate, never the passphrase; the vault is made all the same",
          arguments: [("letmein", "one of the most common passwords"), ("Password123!", "common password with digits or symbols added"),
                      ("aaaaaaaaaaaaaaaaaaaa", "repeats characters"), ("Tr7#q", "only 5 characters")])
    func weakPassphrase(_ passphrase: String, _ reason: String) throws {
        let path = sandbox.path("weak.coffer")
        let r = try sandbox.coffer(["vault", "init", "--name", "W", "--kdf", "min", "--vault", path], env: ["COFFER_PASSPHRASE": passphrase])
        #expect(r.status == 0, "\(r)")
        let lines = r.err.split(separator: "\n").map(String.init)
        #expect(lines.count == 2 && lines.contains(CofferProcess.minKDFWarning), "\(r)")
        let warning = try #require(lines.first { $0.hasPrefix("warning: this passphrase is weak (about ") }, "\(r)")
        #expect(warning.contains(" bits") && warning.contains(reason), "\(warning)")
        #expect(!r.err.contains(passphrase) && !r.out.contains(passphrase), "the passphrase was printed\n\(r)")
        expectSuccess(try sandbox.coffer(["vault", "show", "--vault", path], env: ["COFFER_PASSPHRASE": passphrase]))

        let changed = try sandbox.coffer(["vault", "passwd", "--vault", path], env: ["COFFER_PASSPHRASE": passphrase, "COFFER_NEW_PASSPHRASE": passphrase])
        #expect(changed.status == 0 && changed.err.hasPrefix("warning: this passphrase is weak") && !changed.err.contains(passphrase), "\(changed)")
        let strong = try sandbox.coffer(["vault", "passwd", "--vault", path], env: ["COFFER_PASSPHRASE": passphrase, "COFFER_NEW_PASSPHRASE": CofferProcess.newPassphrase])
        expectSuccess(strong)
    }
}

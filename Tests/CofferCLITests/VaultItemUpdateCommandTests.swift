import CofferTestSupport
import Foundation
import Testing

/// `coffer vault item update`, and the prompts that ask twice: a secret for `item add` and
/// `item update`, a new passphrase for `vault init` and `vault passwd`, typed on a terminal.
@Suite("coffer vault item update, and prompts asked twice")
struct VaultItemUpdateCommandTests {
    let sandbox: Sandbox
    let vault: String
    static let secret = "tok_LIVE-5e1c0d44b2-basalt"
    static let newSecret = "tok_LIVE-77aa90f1c3-granite"

    init() throws {
        sandbox = try Sandbox()
        vault = try sandbox.initVault()
    }

    func item(_ args: [String], stdin: Stdin = .null, sourceLocation: SourceLocation = #_sourceLocation) throws -> CofferResult {
        try sandbox.coffer(["vault", "item"] + args + ["--vault", vault], env: withPassphrase, stdin: stdin, sourceLocation: sourceLocation)
    }

    func listed(sourceLocation: SourceLocation = #_sourceLocation) throws -> [String: Any] {
        let r = try item(["list", "--json"], sourceLocation: sourceLocation)
        expectSuccess(r, sourceLocation: sourceLocation)
        let items = try #require(try jsonObject(r)["items"] as? [[String: Any]], sourceLocation: sourceLocation)
        return try #require(items.first, "no item\n\(r)", sourceLocation: sourceLocation)
    }

    func secretNow(sourceLocation: SourceLocation = #_sourceLocation) throws -> String {
        let r = try item(["get", "--service", "api", "--account", "me"], sourceLocation: sourceLocation)
        expectSuccess(r, sourceLocation: sourceLocation)
        return r.out
    }

    /// Runs `coffer ARGS` on a new pseudo-terminal (`script`), typing `lines` one a second, once
    /// each prompt has turned echo off.
    func onTerminal(_ args: [String], typing lines: [String], env: [String: String] = withPassphrase) throws -> CofferResult {
        let command = ([try CofferProcess.executableURL().path] + args).joined(separator: " ")
        let typing = lines.indices.map { "sleep 1; printf '%s\\n' \"$\($0 + 1)\"" }.joined(separator: "; ")
        return try sandbox.shell("(\(typing); sleep 1) | script -qec \"$0\" /dev/null", [command] + lines, env: env)
    }

    @Test("update replaces the secret from stdin and keeps the created date; --label too; --keep-secret changes only the label")
    func updateSecretAndLabel() throws {
        expectSuccess(try item(["add", "--service", "api", "--account", "me", "--label", "Old"], stdin: .text(Self.secret)))
        let before = try listed()
        usleep(20_000)
        let r = try item(["update", "--service", "api", "--account", "me", "--json"], stdin: .text(Self.newSecret + "\n"))
        expectSuccess(r)
        #expect(!r.out.contains(Self.newSecret) && !r.out.contains(Self.secret), "update printed a secret\n\(r)")
        let printed = try jsonObject(r)
        #expect(printed["label"] as? String == "Old" && printed["service"] as? String == "api", "\(printed)")
        #expect(try secretNow() == Self.newSecret)
        let after = try listed()
        #expect(after["created"] as? String == before["created"] as? String, "the created date changed")
        let modifiedBefore = try #require(isoDate(before["modified"])), modifiedAfter = try #require(isoDate(after["modified"]))
        #expect(modifiedAfter >= modifiedBefore)

        let both = try item(["update", "--service", "api", "--account", "me", "--label", "Both"], stdin: .text(Self.secret))
        expectSuccess(both)
        #expect(both.out == "Updated the secret and label of the item for api (me).\n", "\(both)")
        #expect(try secretNow() == Self.secret)
        #expect(try listed()["label"] as? String == "Both")

        let labelOnly = try item(["update", "--service", "api", "--account", "me", "--label", "New", "--keep-secret"], stdin: .text("ignored"))
        expectSuccess(labelOnly)
        #expect(labelOnly.out == "Updated the label of the item for api (me).\n", "\(labelOnly)")
        #expect(try secretNow() == Self.secret)
        #expect(try listed()["label"] as? String == "New")
        #expect(try listed()["created"] as? String == before["created"] as? String)
    }

    @Test("update: a missing item is 66 and reads nothing; empty stdin 64; --keep-secret alone 64; a label with a control character 65")
    func updateErrors() throws {
        expectFailure(try item(["update", "--service", "api", "--account", "nobody"], stdin: .text(Self.secret)), 66)
        expectSuccess(try item(["add", "--service", "api", "--account", "me"], stdin: .text(Self.secret)))
        expectFailure(try item(["update", "--service", "api", "--account", "me"]), 64)
        expectFailure(try item(["update", "--service", "api", "--account", "me", "--keep-secret"]), 64, mentioning: "--label")
        expectFailure(try item(["update", "--service", "api", "--account", "me", "--label", "a\u{1b}[2Jb"], stdin: .text(Self.newSecret)), 65)
        #expect(try secretNow() == Self.secret, "a failed update changed the secret")
        #expect(try listed()["label"] as? String == "api (me)")
    }

    @Test("item add and update on a terminal ask for the secret twice; a mismatch is 64 and saves nothing; nothing typed is shown")
    func secretPromptTwice() throws {
        let added = try onTerminal(["vault", "item", "add", "--service", "api", "--account", "me", "--vault", vault], typing: [Self.secret, Self.secret])
        #expect(added.status == 0, "\(added)")
        #expect(added.out.contains("Secret for api (me): ") && added.out.contains("Repeat the secret: "), "\(added)")
        #expect(!added.out.contains(Self.secret), "the secret was echoed\n\(added)")
        #expect(try secretNow() == Self.secret)

        let mismatch = try onTerminal(["vault", "item", "add", "--service", "api", "--account", "other", "--vault", vault],
                                      typing: [Self.secret, Self.newSecret])
        #expect(mismatch.status == 64, "\(mismatch)")
        #expect(mismatch.out.contains("error: the secrets do not match"), "\(mismatch)")
        #expect(!mismatch.out.contains(Self.secret) && !mismatch.out.contains(Self.newSecret))
        expectFailure(try item(["get", "--service", "api", "--account", "other"]), 66)

        let badUpdate = try onTerminal(["vault", "item", "update", "--service", "api", "--account", "me", "--vault", vault],
                                       typing: [Self.newSecret, Self.secret])
        #expect(badUpdate.status == 64, "\(badUpdate)")
        #expect(try secretNow() == Self.secret)
        let updated = try onTerminal(["vault", "item", "update", "--service", "api", "--account", "me", "--vault", vault],
                                     typing: [Self.newSecret, Self.newSecret])
        #expect(updated.status == 0, "\(updated)")
        #expect(updated.out.contains("New secret for api (me): "), "\(updated)")
        #expect(try secretNow() == Self.newSecret)
    }

    @Test("vault init and vault passwd on a terminal ask for the new passphrase twice; a mismatch is 64 and changes nothing")
    func passphrasePromptTwice() throws {
        let fresh = sandbox.path("fresh.coffer")
        let mismatch = try onTerminal(["vault", "init", "--name", "T", "--kdf", "min", "--vault", fresh],
                                      typing: [CofferProcess.passphrase, CofferProcess.newPassphrase], env: [:])
        #expect(mismatch.status == 64 && mismatch.out.contains("Repeat the passphrase: ") && mismatch.out.contains("do not match"), "\(mismatch)")
        #expect(!sandbox.exists(fresh), "a vault was created after a mismatch")
        let created = try onTerminal(["vault", "init", "--name", "T", "--kdf", "min", "--vault", fresh],
                                     typing: [CofferProcess.passphrase, CofferProcess.passphrase], env: [:])
        #expect(created.status == 0, "\(created)")
        #expect(try sandbox.showJSON(fresh)["name"] as? String == "T")

        let badChange = try onTerminal(["vault", "passwd", "--vault", fresh], typing: [CofferProcess.newPassphrase, CofferProcess.wrongPassphrase])
        #expect(badChange.status == 64 && badChange.out.contains("do not match"), "\(badChange)")
        expectSuccess(try sandbox.coffer(["vault", "show", "--vault", fresh], env: withPassphrase))
        let changed = try onTerminal(["vault", "passwd", "--vault", fresh], typing: [CofferProcess.newPassphrase, CofferProcess.newPassphrase])
        #expect(changed.status == 0, "\(changed)")
        expectSuccess(try sandbox.coffer(["vault", "show", "--vault", fresh], env: ["COFFER_PASSPHRASE": CofferProcess.newPassphrase]))
        for r in [mismatch, created, badChange, changed] {
            for secret in CofferProcess.forbiddenInOutput { #expect(!r.out.contains(secret), "a passphrase was echoed\n\(r)") }
        }
    }
}

import CofferCrypto
import CofferTestSupport
import Foundation
import Testing
@testable import CofferVault

@Suite("Vault: create, open, passphrases, key files, re-key")
struct VaultTests {
    // MARK: - Create and open

    @Test func createThenOpenGivesTheSameIdentity() throws {
        try withTemporaryFolder { folder in
            let url = folder.appendingPathComponent("alice.coffer")
            let created = try Vault.create(at: url, name: "Alice Liddell", email: "alice@example.com",
                                           passphrase: secure(testPassphrase), kdf: .min)
            let opened = try Vault.open(at: url, passphrase: secure(testPassphrase))

            #expect(opened.url == url)
            #expect(opened.identity.userID == created.identity.userID)
            #expect(opened.identity.name == "Alice Liddell")
            #expect(opened.identity.email == "alice@example.com")
            #expect(opened.identity.signingKey == created.identity.signingKey)
            #expect(opened.identity.boxKey == created.identity.boxKey)
            #expect(opened.identity == created.identity)
            #expect(opened.identity.fingerprint == created.identity.fingerprint)
            #expect(opened.created == created.created)
            #expect(abs(created.created.timeIntervalSinceNow) < 300)
            #expect(opened.passphraseParameters == .min)
            #expect(opened.keyFileCount == 0)
            #expect(opened.items().isEmpty)

            // The private keys came back too, and belong to the public ones.
            #expect(opened.signingKey.seed == created.signingKey.seed)
            #expect(opened.signingKey.publicKey == opened.identity.signingKey)
            #expect(opened.boxKey.rawRepresentation == created.boxKey.rawRepresentation)
            #expect(opened.boxKey.publicKey == opened.identity.boxKey)
            let message = Array("signed by alice".utf8)
            #expect(opened.identity.signingKey.isValidSignature(created.signingKey.signature(for: message), for: message))
        }
    }

    @Test func userIDIsDerivedFromTheSigningKey() throws {
        try withTemporaryFolder { folder in
            let vault = try makeVault(in: folder)
            let userID = vault.identity.userID
            #expect(userID == UserIdentity.userID(for: vault.identity.signingKey))
            #expect(userID.count == 32)
            #expect(userID.allSatisfy { "0123456789abcdef".contains($0) })
        }
    }

    @Test func vaultWithoutEmail() throws {
        try withTemporaryFolder { folder in
            let url = folder.appendingPathComponent("bob.coffer")
            _ = try Vault.create(at: url, name: "Bob", passphrase: secure(testPassphrase), kdf: .min)
            let opened = try Vault.open(at: url, passphrase: secure(testPassphrase))
            #expect(opened.identity.name == "Bob")
            #expect(opened.identity.email == nil)
        }
    }

    @Test func twoVaultsHaveDifferentKeys() throws {
        try withTemporaryFolder { folder in
            let a = try makeVault(in: folder, file: "a.coffer", name: "Same Name", email: "same@example.com")
            let b = try makeVault(in: folder, file: "b.coffer", name: "Same Name", email: "same@example.com")
            #expect(a.identity.userID != b.identity.userID)
            #expect(a.identity.signingKey != b.identity.signingKey)
            #expect(a.identity.boxKey != b.identity.boxKey)
            #expect(a.identity.fingerprint != b.identity.fingerprint)
        }
    }

    @Test func fingerprintIsEightGroupsOfFiveDigits() throws {
        try withTemporaryFolder { folder in
            let vault = try makeVault(in: folder)
            let fingerprint = vault.identity.fingerprint
            let groups = fingerprint.split(separator: " ", omittingEmptySubsequences: false)
            #expect(groups.count == 8, "\(fingerprint)")
            for group in groups {
                #expect(group.count == 5 && group.allSatisfy { $0.isASCII && $0.isNumber }, "\(fingerprint)")
            }
            #expect(fingerprint.count == 8 * 5 + 7)

            // It depends on the keys only, not on the name or email.
            let renamed = UserIdentity(name: "Someone Else", email: nil,
                                       signingKey: vault.identity.signingKey, boxKey: vault.identity.boxKey)
            #expect(renamed.fingerprint == fingerprint)
            #expect(renamed.userID == vault.identity.userID)
            // And on both keys.
            let otherBox = UserIdentity(name: "Alice Liddell", email: "alice@example.com",
                                        signingKey: vault.identity.signingKey, boxKey: X25519.PrivateKey().publicKey)
            #expect(otherBox.fingerprint != fingerprint)
            #expect(otherBox.userID == vault.identity.userID)
        }
    }

    @Test func vaultFileAndLockHaveMode0600() throws {
        try withTemporaryFolder { folder in
            let vault = try makeVault(in: folder)
            #expect(try permissions(vault.url) == 0o600)
            #expect(try permissions(folder.appendingPathComponent("alice.coffer.lock")) == 0o600)
            // Still 0600 after a rewrite.
            try vault.addItem(service: "svc", account: "acct", secret: secure("x"))
            #expect(try permissions(vault.url) == 0o600)
        }
    }

    @Test func createOverAnExistingFileIsRefused() throws {
        try withTemporaryFolder { folder in
            let vault = try makeVault(in: folder)
            let before = try readBytes(vault.url)
            expectVaultError(.alreadyExists) { try makeVault(in: folder) }
            #expect(try readBytes(vault.url) == before)

            // Any file, not only a vault.
            let other = folder.appendingPathComponent("notes.txt")
            try writeBytes(Array("hello".utf8), to: other)
            expectVaultError(.alreadyExists) { try makeVault(in: folder, file: "notes.txt") }
            #expect(try readBytes(other) == Array("hello".utf8))
        }
    }

    @Test func createInAMissingFolderIsNotFound() throws {
        try withTemporaryFolder { folder in
            expectVaultError(.notFound) {
                try makeVault(in: folder.appendingPathComponent("missing", isDirectory: true))
            }
        }
    }

    @Test(arguments: ["", " Alice", "Alice ", "\tAlice", "Al\nice", "Al\u{0}ice", "Al\u{7}ice",
                      String(repeating: "a", count: 256), String(repeating: "é", count: 128)])
    func invalidNameIsRefused(name: String) throws {
        try withTemporaryFolder { folder in
            expectVaultError(.invalidArguments) { try makeVault(in: folder, name: name) }
            let contents = try folderContents(folder)
            #expect(contents.isEmpty, "nothing is written for invalid arguments")
        }
    }

    @Test(arguments: ["", "alice", "alice@", "@example.com", "alice@example", "al ice@example.com",
                      "alice@exa mple.com", "a@b@example.com", "alice@example.com\n",
                      String(repeating: "a", count: 250) + "@example.com"])
    func invalidEmailIsRefused(email: String) throws {
        try withTemporaryFolder { folder in
            expectVaultError(.invalidArguments) { try makeVault(in: folder, email: email) }
            let contents = try folderContents(folder)
            #expect(contents.isEmpty)
        }
    }

    @Test func boundaryNamesAndEmailsAreAccepted() throws {
        try withTemporaryFolder { folder in
            let longName = String(repeating: "a", count: 255)
            let a = try makeVault(in: folder, file: "a.coffer", name: longName)
            #expect(try Vault.open(at: a.url, passphrase: secure(testPassphrase)).identity.name == longName)
            let b = try makeVault(in: folder, file: "b.coffer", name: "Zoë Ünal 🦊", email: "zoe+tag@mail.example.org")
            let reopened = try Vault.open(at: b.url, passphrase: secure(testPassphrase))
            #expect(reopened.identity.name == "Zoë Ünal 🦊")
            #expect(reopened.identity.email == "zoe+tag@mail.example.org")
        }
    }

    @Test func emptyOrOverlongPassphraseIsRefused() throws {
        try withTemporaryFolder { folder in
            expectVaultError(.invalidArguments) {
                try Vault.create(at: folder.appendingPathComponent("a.coffer"), name: "Alice",
                                 passphrase: SecureBytes(copying: [UInt8]()), kdf: .min)
            }
            expectVaultError(.invalidArguments) {
                try Vault.create(at: folder.appendingPathComponent("a.coffer"), name: "Alice",
                                 passphrase: secure(String(repeating: "p", count: 4097)), kdf: .min)
            }
            #expect(try folderContents(folder).isEmpty)
            // 4096 bytes is the longest accepted.
            let long = String(repeating: "p", count: 4096)
            let vault = try makeVault(in: folder, passphrase: long)
            #expect(try Vault.open(at: vault.url, passphrase: secure(long)).identity == vault.identity)
        }
    }

    @Test func nonASCIIPassphraseRoundTrips() throws {
        try withTemporaryFolder { folder in
            let passphrase = "mot de passe très sûr — 🔑 ключ"
            let vault = try makeVault(in: folder, passphrase: passphrase)
            #expect(try Vault.open(at: vault.url, passphrase: secure(passphrase)).identity == vault.identity)
            // The bytes count: the same text in another normalization form is another passphrase.
            let decomposed = passphrase.decomposedStringWithCanonicalMapping
            #expect(Array(decomposed.utf8) != Array(passphrase.utf8))
            expectVaultError(.wrongPassphrase) { try Vault.open(at: vault.url, passphrase: secure(decomposed)) }
        }
    }

    // MARK: - Open failures

    @Test func wrongPassphraseIsAClearError() throws {
        try withTemporaryFolder { folder in
            let vault = try makeVault(in: folder)
            let error = expectVaultError(.wrongPassphrase) { try Vault.open(at: vault.url, passphrase: secure(otherPassphrase)) }
            #expect(error?.message.contains(otherPassphrase) == false)
            #expect(error?.message.contains(testPassphrase) == false)
            // Close misses too.
            expectVaultError(.wrongPassphrase) { try Vault.open(at: vault.url, passphrase: secure(testPassphrase + " ")) }
            expectVaultError(.wrongPassphrase) { try Vault.open(at: vault.url, passphrase: secure(String(testPassphrase.dropLast()))) }
            expectVaultError(.wrongPassphrase) { try Vault.open(at: vault.url, passphrase: secure(testPassphrase.uppercased())) }
            // An empty passphrase is simply wrong, never a crash.
            expectVaultError(oneOf: [.wrongPassphrase, .invalidArguments]) {
                try Vault.open(at: vault.url, passphrase: SecureBytes(copying: [UInt8]()))
            }
        }
    }

    @Test func missingFileIsNotFound() throws {
        try withTemporaryFolder { folder in
            expectVaultError(.notFound) {
                try Vault.open(at: folder.appendingPathComponent("nope.coffer"), passphrase: secure(testPassphrase))
            }
            expectVaultError(.notFound) {
                try Vault.open(at: folder.appendingPathComponent("missing/nope.coffer"), passphrase: secure(testPassphrase))
            }
            expectVaultError(.notFound) { try VaultUnlock.keyFile(at: folder.appendingPathComponent("nope.key")) }
        }
    }

    // MARK: - Secrets stay out of text

    @Test func errorMessagesNeverContainThePassphrase() throws {
        try withTemporaryFolder { folder in
            let vault = try makeVault(in: folder)
            var errors = [VaultError]()
            func collect(_ body: () throws -> Void) {
                do { try body(); Issue.record("expected an error") } catch let e as VaultError { errors.append(e) } catch {
                    Issue.record("not a VaultError: \(error)")
                }
            }
            collect { _ = try Vault.open(at: vault.url, passphrase: secure(otherPassphrase)) }
            collect { _ = try Vault.open(at: folder.appendingPathComponent("x.coffer"), passphrase: secure(testPassphrase)) }
            collect { _ = try makeVault(in: folder) }                                   // already exists
            collect { _ = try makeVault(in: folder, file: "b.coffer", name: " bad") }   // invalid name
            collect { _ = try makeVault(in: folder, file: "b.coffer", email: "bad") }   // invalid email
            collect { try vault.changePassphrase(to: secure(String(repeating: testPassphrase, count: 200))) } // too long
            collect { try vault.changePassphrase(to: SecureBytes(copying: [UInt8]())) }
            collect { try vault.rekey(passphrase: SecureBytes(copying: [UInt8]())) }
            let garbage = folder.appendingPathComponent("garbage.coffer")
            try writeBytes(Array("COFFERVT but not really".utf8), to: garbage)
            collect { _ = try Vault.open(at: garbage, passphrase: secure(testPassphrase)) }
            // A tampered body (the passphrase opens the slot, the body fails).
            var tampered = try readBytes(vault.url)
            tampered[tampered.count - 1] ^= 0x01
            let tamperedURL = folder.appendingPathComponent("tampered.coffer")
            try writeBytes(tampered, to: tamperedURL)
            collect { _ = try Vault.open(at: tamperedURL, passphrase: secure(testPassphrase)) }

            #expect(errors.count == 10)
            for error in errors {
                for text in [error.message, error.description, "\(error)", String(reflecting: error)] {
                    #expect(!text.contains(testPassphrase), "\(text)")
                    #expect(!text.contains(otherPassphrase), "\(text)")
                    #expect(!text.contains("Q7x9"), "\(text)")
                }
            }
            // The unlock value itself prints redacted.
            let unlock = VaultUnlock.passphrase(secure(testPassphrase))
            #expect(!"\(unlock)".contains(testPassphrase))
            #expect(!String(reflecting: unlock).contains(testPassphrase))
        }
    }

    @Test func descriptionsNeverContainSecrets() throws {
        try withTemporaryFolder { folder in
            let vault = try makeVault(in: folder)
            let secretText = "item-secret-value-8Fh2"
            let item = try vault.addItem(service: "svc", account: "acct", secret: secure(secretText))
            let seedHex = Hex.encode(vault.signingKey.seed.unsafeCopiedBytes())
            let boxHex = Hex.encode(vault.boxKey.rawRepresentation.unsafeCopiedBytes())

            for text in ["\(vault)", String(reflecting: vault), vault.description] {
                #expect(text.contains(vault.identity.userID))
                #expect(!text.contains(testPassphrase))
                #expect(!text.contains(seedHex))
                #expect(!text.contains(boxHex))
                #expect(!text.contains(secretText))
            }
            var dumped = ""
            dump(item, to: &dumped)
            for text in ["\(item)", String(reflecting: item), item.description, dumped,
                         "\(vault.items())", "\(item.secret)", "\(vault.signingKey)", "\(vault.boxKey)"] {
                #expect(!text.contains(secretText), "\(text)")
                #expect(!text.contains(Hex.encode(Array(secretText.utf8))), "\(text)")
                #expect(!text.contains(seedHex))
                #expect(!text.contains(boxHex))
            }
            #expect(item.description.contains("svc"))
            #expect(item.description.contains("redacted"))
        }
    }

    // MARK: - Change passphrase

    @Test func changePassphrase() throws {
        try withTemporaryFolder { folder in
            let vault = try makeVault(in: folder)
            try vault.addItem(service: "svc", account: "acct", secret: secure("s1"))
            try vault.changePassphrase(to: secure(otherPassphrase))

            expectVaultError(.wrongPassphrase) { try Vault.open(at: vault.url, passphrase: secure(testPassphrase)) }
            let reopened = try Vault.open(at: vault.url, passphrase: secure(otherPassphrase))
            #expect(reopened.identity == vault.identity)
            #expect(reopened.identity.userID == vault.identity.userID)
            #expect(reopened.passphraseParameters == .min, "the cost is kept unless given")
            #expect(try reopened.item(service: "svc", account: "acct").secret == secure("s1"))
            // The object that changed it keeps working.
            try vault.addItem(service: "svc2", account: "acct", secret: secure("s2"))
            #expect(try Vault.open(at: vault.url, passphrase: secure(otherPassphrase)).items().count == 2)
        }
    }

    @Test func changePassphraseWithNewCost() throws {
        try withTemporaryFolder { folder in
            let vault = try makeVault(in: folder)
            let cost = try Argon2id.Parameters(opsLimit: 2, memoryKiB: 16)
            try vault.changePassphrase(to: secure(otherPassphrase), kdf: cost)
            #expect(vault.passphraseParameters == cost)
            #expect(try Vault.open(at: vault.url, passphrase: secure(otherPassphrase)).passphraseParameters == cost)
        }
    }

    @Test func changePassphraseToAnEmptyOneIsRefused() throws {
        try withTemporaryFolder { folder in
            let vault = try makeVault(in: folder)
            let before = try readBytes(vault.url)
            expectVaultError(.invalidArguments) { try vault.changePassphrase(to: SecureBytes(copying: [UInt8]())) }
            #expect(try readBytes(vault.url) == before)
            _ = try Vault.open(at: vault.url, passphrase: secure(testPassphrase))
        }
    }

    @Test func changePassphraseKeepsKeyFiles() throws {
        try withTemporaryFolder { folder in
            let vault = try makeVault(in: folder)
            let keyURL = folder.appendingPathComponent("alice.key")
            try vault.addKeyFile(at: keyURL)
            try vault.changePassphrase(to: secure(otherPassphrase))
            #expect(vault.keyFileCount == 1)
            let viaKey = try Vault.open(at: vault.url, unlock: .keyFile(at: keyURL))
            #expect(viaKey.identity == vault.identity)
            #expect(viaKey.keyFileCount == 1)
        }
    }

    /// Documented LUKS-like behaviour: changing the passphrase re-wraps one slot and
    /// leaves the vault key as it was, so an old copy of the file still opens with the
    /// old passphrase. `rekey` is the remedy.
    @Test func oldCopyStillOpensWithOldPassphraseAfterChange() throws {
        try withTemporaryFolder { folder in
            let vault = try makeVault(in: folder)
            try vault.addItem(service: "svc", account: "acct", secret: secure("before"))
            let oldCopy = folder.appendingPathComponent("old-copy.coffer")
            try copyFile(vault.url, to: oldCopy)
            let oldFile = try readBytes(oldCopy)

            try vault.changePassphrase(to: secure(otherPassphrase))
            try vault.updateItems(matching: .all, secret: secure("after"))

            let old = try Vault.open(at: oldCopy, passphrase: secure(testPassphrase))
            #expect(old.identity == vault.identity)
            #expect(try old.item(service: "svc", account: "acct").secret == secure("before"))
            expectVaultError(.wrongPassphrase) { try Vault.open(at: oldCopy, passphrase: secure(otherPassphrase)) }

            // The vault key did not change: what the old copy yields decrypts the new body.
            let newFile = try readBytes(vault.url)
            let body = try openBody(of: newFile, withKeyFrom: oldFile, unlock: .passphrase(secure(testPassphrase)))
            #expect(body.items.first?.secret == secure("after"))

            // A file made of the old header and the new body is refused all the same: the
            // body is authenticated together with its own header.
            let spliced = Array(oldFile[0..<(try bodyOffset(of: oldFile))]) + Array(newFile[(try bodyOffset(of: newFile))...])
            let splicedURL = folder.appendingPathComponent("spliced.coffer")
            try writeBytes(spliced, to: splicedURL)
            expectVaultError(.integrityFailure) { try Vault.open(at: splicedURL, passphrase: secure(testPassphrase)) }
        }
    }

    // MARK: - Re-key

    @Test func rekeyDropsKeyFileSlotsAndOldPassphrase() throws {
        try withTemporaryFolder { folder in
            let vault = try makeVault(in: folder)
            try vault.addItem(service: "svc", account: "acct", secret: secure("kept"))
            let keyURL = folder.appendingPathComponent("alice.key")
            try vault.addKeyFile(at: keyURL)
            #expect(vault.keyFileCount == 1)
            let oldCopy = folder.appendingPathComponent("old-copy.coffer")
            try copyFile(vault.url, to: oldCopy)
            let oldFile = try readBytes(oldCopy)

            try vault.rekey(passphrase: secure(otherPassphrase))
            #expect(vault.keyFileCount == 0)

            // The new file: the key file and the old passphrase no longer open it.
            expectVaultError(.wrongKeyFile) { try Vault.open(at: vault.url, unlock: .keyFile(at: keyURL)) }
            expectVaultError(.wrongPassphrase) { try Vault.open(at: vault.url, passphrase: secure(testPassphrase)) }
            let reopened = try Vault.open(at: vault.url, passphrase: secure(otherPassphrase))
            #expect(reopened.identity == vault.identity, "re-keying keeps the identity")
            #expect(reopened.keyFileCount == 0)
            #expect(reopened.passphraseParameters == .min)
            #expect(try reopened.item(service: "svc", account: "acct").secret == secure("kept"))

            // The old copy still opens with what opened it before (documented)...
            #expect(try Vault.open(at: oldCopy, passphrase: secure(testPassphrase)).identity == vault.identity)
            #expect(try Vault.open(at: oldCopy, unlock: .keyFile(at: keyURL)).identity == vault.identity)
            // ...but its key file does not open the new file, and the vault key it yields
            // does not open the new body.
            expectVaultError(.wrongKeyFile) { try Vault.open(at: vault.url, unlock: .keyFile(at: keyURL)) }
            let newFile = try readBytes(vault.url)
            #expect(throws: CryptoError.authenticationFailure) {
                try openBody(of: newFile, withKeyFrom: oldFile, unlock: .passphrase(secure(testPassphrase)))
            }
            #expect(throws: CryptoError.authenticationFailure) {
                try openBody(of: newFile, withKeyFrom: oldFile, unlock: .keyFile(at: keyURL))
            }
            #expect(Array(newFile[V1.vaultIDOffset..<V1.vaultIDOffset + 16]) != Array(oldFile[V1.vaultIDOffset..<V1.vaultIDOffset + 16]),
                    "re-keying draws a new vault id")
            let spliced = Array(oldFile[0..<(try bodyOffset(of: oldFile))]) + Array(newFile[(try bodyOffset(of: newFile))...])
            let splicedURL = folder.appendingPathComponent("spliced.coffer")
            try writeBytes(spliced, to: splicedURL)
            expectVaultError(.integrityFailure) { try Vault.open(at: splicedURL, passphrase: secure(testPassphrase)) }
            expectVaultError(.integrityFailure) { try Vault.open(at: splicedURL, unlock: .keyFile(at: keyURL)) }
        }
    }

    @Test func rekeyWithTheSamePassphraseAndNewCost() throws {
        try withTemporaryFolder { folder in
            let vault = try makeVault(in: folder)
            let cost = try Argon2id.Parameters(opsLimit: 2, memoryKiB: 32)
            try vault.rekey(passphrase: secure(testPassphrase), kdf: cost)
            let reopened = try Vault.open(at: vault.url, passphrase: secure(testPassphrase))
            #expect(reopened.passphraseParameters == cost)
            #expect(reopened.identity == vault.identity)
            expectVaultError(.invalidArguments) { try vault.rekey(passphrase: SecureBytes(copying: [UInt8]())) }
        }
    }

    // MARK: - Key files

    @Test func addKeyFileWrites32BytesMode0600AndOpens() throws {
        try withTemporaryFolder { folder in
            let vault = try makeVault(in: folder)
            let keyURL = folder.appendingPathComponent("alice.key")
            try vault.addKeyFile(at: keyURL)
            #expect(vault.keyFileCount == 1)
            let keyBytes = try readBytes(keyURL)
            #expect(keyBytes.count == 32)
            #expect(keyBytes != [UInt8](repeating: 0, count: 32))
            #expect(try permissions(keyURL) == 0o600)
            // The key file's bytes are nowhere in the vault file.
            #expect(!containsSubsequence(try readBytes(vault.url), keyBytes))

            let viaKey = try Vault.open(at: vault.url, unlock: .keyFile(at: keyURL))
            #expect(viaKey.identity == vault.identity)
            #expect(viaKey.keyFileCount == 1)
            #expect(viaKey.signingKey.seed == vault.signingKey.seed)
            // The passphrase still opens it too.
            #expect(try Vault.open(at: vault.url, passphrase: secure(testPassphrase)).keyFileCount == 1)
            // The key file given as bytes works the same way.
            let key = try SymmetricKey(bytes: SecureBytes(copying: keyBytes))
            #expect(try Vault.open(at: vault.url, unlock: .keyFile(key)).identity == vault.identity)
            // A vault opened with its key file can be changed.
            try viaKey.addItem(service: "svc", account: "acct", secret: secure("x"))
            #expect(try Vault.open(at: vault.url, passphrase: secure(testPassphrase)).items().count == 1)
        }
    }

    @Test func twoKeyFilesBothOpen() throws {
        try withTemporaryFolder { folder in
            let vault = try makeVault(in: folder)
            let k1 = folder.appendingPathComponent("k1.key"), k2 = folder.appendingPathComponent("k2.key")
            try vault.addKeyFile(at: k1)
            try vault.addKeyFile(at: k2)
            #expect(vault.keyFileCount == 2)
            #expect(try readBytes(k1) != readBytes(k2))
            #expect(try Vault.open(at: vault.url, unlock: .keyFile(at: k1)).identity == vault.identity)
            #expect(try Vault.open(at: vault.url, unlock: .keyFile(at: k2)).identity == vault.identity)
        }
    }

    @Test func wrongKeyFiles() throws {
        try withTemporaryFolder { folder in
            let vault = try makeVault(in: folder)
            // No key-file slot at all.
            expectVaultError(.wrongKeyFile) { try Vault.open(at: vault.url, unlock: .keyFile(SymmetricKey())) }
            try vault.addKeyFile(at: folder.appendingPathComponent("alice.key"))

            let random = folder.appendingPathComponent("random.key")
            try writePrivateBytes(SecureRandom.bytes(count: 32), to: random)
            expectVaultError(.wrongKeyFile) { try Vault.open(at: vault.url, unlock: .keyFile(at: random)) }

            // Another vault's key file.
            let bob = try makeVault(in: folder, file: "bob.coffer", name: "Bob")
            let bobKey = folder.appendingPathComponent("bob.key")
            try bob.addKeyFile(at: bobKey)
            expectVaultError(.wrongKeyFile) { try Vault.open(at: vault.url, unlock: .keyFile(at: bobKey)) }

            // The key file is not a passphrase.
            let keyText = String(decoding: try readBytes(folder.appendingPathComponent("alice.key")), as: UTF8.self)
            expectVaultError(.wrongPassphrase) { try Vault.open(at: vault.url, passphrase: secure(keyText)) }
        }
    }

    @Test(arguments: [0, 1, 31, 33, 64, 4096])
    func keyFileOfWrongLengthIsMalformed(length: Int) throws {
        try withTemporaryFolder { folder in
            let url = folder.appendingPathComponent("bad.key")
            try writePrivateBytes(SecureRandom.bytes(count: length), to: url)
            expectVaultError(.malformed) { try VaultUnlock.keyFile(at: url) }
        }
    }

    /// As ssh refuses a private key that others may read: any permission for group or others
    /// refuses the key file unread, naming it and the fix. Owner-only modes are fine.
    @Test(arguments: [0o644, 0o640, 0o604, 0o660, 0o606, 0o610, 0o601, 0o620, 0o602, 0o777, 0o444, 0o440, 0o404])
    func keyFileOpenToOthersIsRefused(mode: Int) throws {
        try withTemporaryFolder { folder in
            let vault = try makeVault(in: folder)
            let key = folder.appendingPathComponent("alice.key")
            try vault.addKeyFile(at: key)
            #expect(try permissions(key) & 0o777 == 0o600)
            #expect(try Vault.open(at: vault.url, unlock: .keyFile(at: key)).identity == vault.identity)

            try setPermissions(mode, of: key)
            let error = expectVaultError(.unprotectedKeyFile) { try VaultUnlock.keyFile(at: key) }
            #expect(error?.message.contains(key.path) == true, "\(error?.message ?? "")")
            #expect(error?.message.contains("chmod 600") == true, "\(error?.message ?? "")")
            #expect(error?.message.contains("0\(String(mode, radix: 8))") == true, "names the mode: \(error?.message ?? "")")
            // Even a file of the wrong length is refused for its mode first: it is not read.
            let short = folder.appendingPathComponent("short.key")
            try writeBytes([1, 2, 3], to: short)
            try setPermissions(mode, of: short)
            expectVaultError(.unprotectedKeyFile) { try VaultUnlock.keyFile(at: short) }

            try setPermissions(0o600, of: key)
            #expect(try Vault.open(at: vault.url, unlock: .keyFile(at: key)).identity == vault.identity)
        }
    }

    @Test(arguments: [0o600, 0o400, 0o700, 0o500])
    func ownerOnlyKeyFilesOpen(mode: Int) throws {
        try withTemporaryFolder { folder in
            let vault = try makeVault(in: folder)
            let key = folder.appendingPathComponent("alice.key")
            try vault.addKeyFile(at: key)
            try setPermissions(mode, of: key)
            #expect(try Vault.open(at: vault.url, unlock: .keyFile(at: key)).identity == vault.identity)
        }
    }

    @Test func keyFileThatIsAFolderIsRefused() throws {
        try withTemporaryFolder { folder in
            expectVaultError(oneOf: [.malformed, .io]) { try VaultUnlock.keyFile(at: folder) }
        }
    }

    @Test func addKeyFileOntoAnExistingPathIsRefused() throws {
        try withTemporaryFolder { folder in
            let vault = try makeVault(in: folder)
            let keyURL = folder.appendingPathComponent("existing.key")
            try writeBytes(Array("precious".utf8), to: keyURL)
            let before = try readBytes(vault.url)
            expectVaultError(.alreadyExists) { try vault.addKeyFile(at: keyURL) }
            #expect(try readBytes(keyURL) == Array("precious".utf8))
            #expect(try readBytes(vault.url) == before)
            #expect(vault.keyFileCount == 0)

            // Also onto the vault itself.
            expectVaultError(.alreadyExists) { try vault.addKeyFile(at: vault.url) }
            #expect(try readBytes(vault.url) == before)
        }
    }

    @Test func addKeyFileIntoAMissingFolderChangesNothing() throws {
        try withTemporaryFolder { folder in
            let vault = try makeVault(in: folder)
            let before = try readBytes(vault.url)
            expectVaultError(.notFound) { try vault.addKeyFile(at: folder.appendingPathComponent("missing/k.key")) }
            #expect(vault.keyFileCount == 0)
            #expect(try readBytes(vault.url) == before)
            // The object is still in step with its file.
            try vault.addItem(service: "svc", account: "acct", secret: secure("x"))
        }
    }

    @Test func atMostEightSlots() throws {
        try withTemporaryFolder { folder in
            let vault = try makeVault(in: folder)
            for i in 1...7 { try vault.addKeyFile(at: folder.appendingPathComponent("k\(i).key")) }
            #expect(vault.keyFileCount == 7)
            let ninth = folder.appendingPathComponent("k8.key")
            expectVaultError(.invalidArguments) { try vault.addKeyFile(at: ninth) }
            #expect(!FileManager.default.fileExists(atPath: ninth.path), "no key file is written for a refused slot")
            // Every slot still opens; the last one too.
            #expect(try Vault.open(at: vault.url, unlock: .keyFile(at: folder.appendingPathComponent("k7.key"))).keyFileCount == 7)
            // Re-keying frees them.
            try vault.rekey(passphrase: secure(testPassphrase))
            try vault.addKeyFile(at: ninth)
            #expect(vault.keyFileCount == 1)
        }
    }
}

/// Unlocks the vault key from the header of `keyFile` (an old copy, say) and opens the body
/// of `file` with it, authenticating `file`'s own header: what an attacker holding an old
/// copy and its old passphrase could do with the current file.
private func openBody(of file: [UInt8], withKeyFrom keyFile: [UInt8], unlock: VaultUnlock) throws -> VaultFormat.Body {
    let (header, _) = try VaultFormat.parseHeader(keyFile)
    let key = try Vault.unlockKey(header: header, unlock: unlock)
    let offset = try bodyOffset(of: file)
    let box = try XChaCha20Poly1305.SealedBox(combined: Array(file[offset...]))
    let plaintext = try XChaCha20Poly1305.openSecret(box, using: key, authenticating: Array(file[0..<offset]))
    return try VaultFormat.decodeBody(plaintext)
}

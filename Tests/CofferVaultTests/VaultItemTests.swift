import CofferCrypto
import CofferTestSupport
import Foundation
import Testing
@testable import CofferVault

@Suite("Vault items: keychain-like secrets")
struct VaultItemTests {
    @Test func addGetListUpdateDeleteRoundTrip() throws {
        try withTemporaryFolder { folder in
            let vault = try makeVault(in: folder)
            let before = Vault.nowMillis()
            let added = try vault.addItem(service: "db.example.com", account: "app", label: "Database",
                                          attributes: ["env": "prod", "region": "eu"], secret: secure("pa55word"))
            #expect(added.id.count == 16)
            #expect(added.itemClass == .generic)
            #expect(added.service == "db.example.com")
            #expect(added.account == "app")
            #expect(added.label == "Database")
            #expect(added.attributes == ["env": "prod", "region": "eu"])
            #expect(added.created >= before - 1 && added.created <= Vault.nowMillis() + 1)
            #expect(added.modified == added.created)
            #expect(added.secret == secure("pa55word"))

            // get
            let got = try vault.item(service: "db.example.com", account: "app")
            #expect(got.id == added.id)
            #expect(got.secret == secure("pa55word"))
            got.secret.withUnsafeBytes { #expect(Array($0) == Array("pa55word".utf8)) }

            // list
            try vault.addItem(service: "api.example.com", account: "bot", secret: secure("token"))
            #expect(vault.items().map(\.service) == ["api.example.com", "db.example.com"])

            // update
            Thread.sleep(forTimeInterval: 0.005)
            let changed = try vault.updateItems(matching: VaultItemQuery(service: "db.example.com", account: "app"),
                                                secret: secure("n3w"), label: "DB", attributes: ["env": "staging"])
            #expect(changed == 1)
            let updated = try vault.item(service: "db.example.com", account: "app")
            #expect(updated.id == added.id)
            #expect(updated.secret == secure("n3w"))
            #expect(updated.label == "DB")
            #expect(updated.attributes == ["env": "staging"], "given attributes replace the old set")
            #expect(updated.created == added.created)
            #expect(updated.modified > added.modified)
            // The other item did not change.
            #expect(try vault.item(service: "api.example.com", account: "bot").secret == secure("token"))

            // An update of the secret only keeps label and attributes.
            try vault.updateItems(matching: VaultItemQuery(service: "db.example.com"), secret: secure("third"))
            let third = try vault.item(service: "db.example.com", account: "app")
            #expect(third.label == "DB")
            #expect(third.attributes == ["env": "staging"])
            #expect(third.secret == secure("third"))

            // delete
            #expect(try vault.deleteItems(matching: VaultItemQuery(service: "db.example.com", account: "app")) == 1)
            expectVaultError(.itemNotFound) { try vault.item(service: "db.example.com", account: "app") }
            #expect(vault.items().map(\.service) == ["api.example.com"])

            // All of it is on disk.
            let reopened = try Vault.open(at: vault.url, passphrase: secure(testPassphrase))
            #expect(reopened.items().map(\.service) == ["api.example.com"])
            #expect(try reopened.item(service: "api.example.com", account: "bot").secret == secure("token"))
        }
    }

    @Test func defaultLabelAndClass() throws {
        try withTemporaryFolder { folder in
            let vault = try makeVault(in: folder)
            let item = try vault.addItem(service: "svc", account: "acct", secret: secure("x"))
            #expect(item.label == "svc (acct)")
            #expect(item.itemClass == .generic)
            #expect(item.attributes.isEmpty)
        }
    }

    @Test func everyFieldPersistsAcrossReopen() throws {
        try withTemporaryFolder { folder in
            let vault = try makeVault(in: folder)
            let binary = SecureBytes(copying: [0x00, 0xff, 0x80, 0x00, 0x01, 0x0a, 0x00])
            let items = [
                try vault.addItem(service: "svc", account: "a", label: "Label ✓", itemClass: .generic,
                                  attributes: ["k1": "v1", "k2": "", "ключ": "значение"], secret: secure("generic secret")),
                try vault.addItem(service: "svc", account: "a", itemClass: .key, secret: binary),
                try vault.addItem(service: "notes", account: "me", label: "", itemClass: .note,
                                  secret: secure(String(repeating: "long note ", count: 500))),
                try vault.addItem(service: "empty", account: "secret", secret: SecureBytes(copying: [UInt8]())),
            ]
            let reopened = try Vault.open(at: vault.url, passphrase: secure(testPassphrase))
            #expect(reopened.items().count == items.count)
            for item in items {
                let again = try reopened.item(service: item.service, account: item.account, itemClass: item.itemClass)
                #expect(again.id == item.id)
                #expect(again.itemClass == item.itemClass)
                #expect(again.service == item.service)
                #expect(again.account == item.account)
                #expect(again.label == item.label)
                #expect(again.attributes == item.attributes)
                #expect(again.created == item.created)
                #expect(again.modified == item.modified)
                #expect(again.createdDate == item.createdDate)
                #expect(again.secret == item.secret)
                #expect(again.secret.count == item.secret.count)
            }
            #expect(try reopened.item(service: "svc", account: "a", itemClass: .key).secret == binary)
            #expect(try reopened.item(service: "empty", account: "secret").secret.count == 0)
        }
    }

    @Test func theLargestSecretRoundTrips() throws {
        try withTemporaryFolder { folder in
            let vault = try makeVault(in: folder)
            let big = SecureBytes.random(count: VaultItem.maxSecretBytes)
            try vault.addItem(service: "big", account: "blob", secret: big)
            #expect(try Vault.open(at: vault.url, passphrase: secure(testPassphrase)).item(service: "big", account: "blob").secret == big)
        }
    }

    @Test func duplicateItemIsAlreadyExists() throws {
        try withTemporaryFolder { folder in
            let vault = try makeVault(in: folder)
            try vault.addItem(service: "svc", account: "acct", secret: secure("one"))
            let before = try readBytes(vault.url)
            expectVaultError(.alreadyExists) { try vault.addItem(service: "svc", account: "acct", secret: secure("two")) }
            expectVaultError(.alreadyExists) {
                try vault.addItem(service: "svc", account: "acct", label: "other label", attributes: ["a": "b"], secret: secure("two"))
            }
            #expect(try readBytes(vault.url) == before, "a refused add does not write")
            #expect(try vault.item(service: "svc", account: "acct").secret == secure("one"))
            #expect(vault.items().count == 1)

            // Unique by class, service and account: another class, or another account, is fine.
            try vault.addItem(service: "svc", account: "acct", itemClass: .note, secret: secure("note"))
            try vault.addItem(service: "svc", account: "acct2", secret: secure("other"))
            try vault.addItem(service: "svc2", account: "acct", secret: secure("other"))
            #expect(vault.items().count == 4)
            expectVaultError(.alreadyExists) { try vault.addItem(service: "svc", account: "acct", itemClass: .note, secret: secure("n2")) }
            // Service and account are compared exactly.
            try vault.addItem(service: "SVC", account: "acct", secret: secure("upper"))
            #expect(vault.items().count == 5)
        }
    }

    @Test func missingItemIsItemNotFound() throws {
        try withTemporaryFolder { folder in
            let vault = try makeVault(in: folder)
            expectVaultError(.itemNotFound) { try vault.item(service: "nope", account: "nope") }
            try vault.addItem(service: "svc", account: "acct", secret: secure("x"))
            let before = try readBytes(vault.url)
            expectVaultError(.itemNotFound) { try vault.item(service: "svc", account: "other") }
            expectVaultError(.itemNotFound) { try vault.item(service: "svc", account: "acct", itemClass: .key) }
            expectVaultError(.itemNotFound) { try vault.updateItems(matching: VaultItemQuery(service: "nope"), secret: secure("y")) }
            expectVaultError(.itemNotFound) { try vault.deleteItems(matching: VaultItemQuery(service: "nope")) }
            expectVaultError(.itemNotFound) { try vault.deleteItems(matching: VaultItemQuery(itemClass: .note)) }
            #expect(try readBytes(vault.url) == before, "a refused update or delete does not write")
            #expect(try vault.item(service: "svc", account: "acct").secret == secure("x"))
        }
    }

    @Test func queries() throws {
        try withTemporaryFolder { folder in
            let vault = try makeVault(in: folder)
            try vault.addItem(service: "mail", account: "alice", label: "Work mail", attributes: ["env": "prod", "team": "a"], secret: secure("1"))
            try vault.addItem(service: "mail", account: "bob", label: "Bob's mail", attributes: ["env": "dev"], secret: secure("2"))
            try vault.addItem(service: "db", account: "alice", label: "Work DB", itemClass: .key, attributes: ["env": "prod"], secret: secure("3"))
            try vault.addItem(service: "diary", account: "alice", label: "Diary", itemClass: .note, secret: secure("4"))

            func names(_ query: VaultItemQuery) -> [String] { vault.items(matching: query).map { "\($0.service)/\($0.account)" } }

            #expect(names(.all) == ["db/alice", "diary/alice", "mail/alice", "mail/bob"], "sorted by service, then account")
            #expect(names(VaultItemQuery(service: "mail")) == ["mail/alice", "mail/bob"])
            #expect(names(VaultItemQuery(account: "alice")) == ["db/alice", "diary/alice", "mail/alice"])
            #expect(names(VaultItemQuery(service: "mail", account: "bob")) == ["mail/bob"])
            #expect(names(VaultItemQuery(itemClass: .key)) == ["db/alice"])
            #expect(names(VaultItemQuery(itemClass: .note)) == ["diary/alice"])
            #expect(names(VaultItemQuery(itemClass: .generic)) == ["mail/alice", "mail/bob"])
            #expect(names(VaultItemQuery(label: "Work DB")) == ["db/alice"])
            #expect(names(VaultItemQuery(label: "work db")).isEmpty, "labels match exactly")
            #expect(names(VaultItemQuery(attributes: ["env": "prod"])) == ["db/alice", "mail/alice"])
            #expect(names(VaultItemQuery(attributes: ["env": "prod", "team": "a"])) == ["mail/alice"], "every attribute must match")
            #expect(names(VaultItemQuery(attributes: ["env": "prod", "team": "b"])).isEmpty)
            #expect(names(VaultItemQuery(attributes: ["missing": ""])).isEmpty)
            #expect(names(VaultItemQuery(itemClass: .generic, attributes: ["env": "prod"])) == ["mail/alice"])
            #expect(names(VaultItemQuery(service: "nothing")).isEmpty)

            // Update and delete by query, several at once.
            #expect(try vault.updateItems(matching: VaultItemQuery(account: "alice"), label: "Alice's") == 3)
            #expect(names(VaultItemQuery(label: "Alice's")) == ["db/alice", "diary/alice", "mail/alice"])
            #expect(try vault.deleteItems(matching: VaultItemQuery(attributes: ["env": "prod"])) == 2)
            #expect(names(.all) == ["diary/alice", "mail/bob"])
            let reopened = try Vault.open(at: vault.url, passphrase: secure(testPassphrase))
            #expect(reopened.items().map(\.label) == ["Alice's", "Bob's mail"])
        }
    }

    /// Everything of an item lives in the encrypted body: neither the secret nor the
    /// service, account, label or attributes appear in the file's bytes.
    @Test func nothingOfAnItemAppearsInTheFile() throws {
        try withTemporaryFolder { folder in
            let vault = try makeVault(in: folder, name: "Visible Name Marker", email: "marker.email@example.com")
            let secret = "SECRET-bytes-9d8f7a6e5c4b3a21"
            let texts = [secret, "service.marker.example.com", "account-marker-42", "Label Marker", "attrkeymarker", "attrvaluemarker",
                         "Visible Name Marker", "marker.email@example.com"]
            try vault.addItem(service: texts[1], account: texts[2], label: texts[3], attributes: [texts[4]: texts[5]], secret: secure(secret))
            // Binary secrets too: look for a 16-byte random secret.
            let randomSecret = SecureRandom.bytes(count: 16)
            try vault.addItem(service: "random", account: "bytes", itemClass: .key, secret: SecureBytes(copying: randomSecret))

            func check(_ file: [UInt8], _ context: Comment) {
                for text in texts {
                    #expect(!containsSubsequence(file, Array(text.utf8)), "'\(text)' in plain in the file (\(context))")
                    #expect(!containsSubsequence(file, Array(text.utf8.prefix(8))), "a prefix of '\(text)' in plain (\(context))")
                }
                #expect(!containsSubsequence(file, randomSecret), "\(context)")
                #expect(!containsSubsequence(file, Array(testPassphrase.utf8)), "\(context)")
            }
            check(try readBytes(vault.url), "after add")
            try vault.updateItems(matching: VaultItemQuery(service: texts[1]), secret: secure("another " + secret))
            check(try readBytes(vault.url), "after update")
            try vault.changePassphrase(to: secure(otherPassphrase))
            check(try readBytes(vault.url), "after a passphrase change")
            try vault.deleteItems(matching: .all)
            check(try readBytes(vault.url), "after delete")
        }
    }

    @Test func invalidItemsAreRefusedAndChangeNothing() throws {
        try withTemporaryFolder { folder in
            let vault = try makeVault(in: folder)
            try vault.addItem(service: "svc", account: "acct", secret: secure("x"))
            let before = try readBytes(vault.url)
            let long = String(repeating: "s", count: 1025)
            let tooManyAttributes = Dictionary(uniqueKeysWithValues: (0..<65).map { ("k\($0)", "v") })

            expectVaultError(.invalidArguments) { try vault.addItem(service: "", account: "a", secret: secure("x")) }
            expectVaultError(.invalidArguments) { try vault.addItem(service: "s", account: "", secret: secure("x")) }
            expectVaultError(.invalidArguments) { try vault.addItem(service: long, account: "a", secret: secure("x")) }
            expectVaultError(.invalidArguments) { try vault.addItem(service: "s", account: long, secret: secure("x")) }
            expectVaultError(.invalidArguments) { try vault.addItem(service: "s", account: "a", label: long, secret: secure("x")) }
            expectVaultError(.invalidArguments) {
                try vault.addItem(service: "s", account: "a", attributes: tooManyAttributes, secret: secure("x"))
            }
            expectVaultError(.invalidArguments) {
                try vault.addItem(service: "s", account: "a", secret: SecureBytes(count: VaultItem.maxSecretBytes + 1) { $0.initializeMemory(as: UInt8.self, repeating: 1) })
            }
            expectVaultError(.invalidArguments) {
                try vault.updateItems(matching: .all, secret: SecureBytes(count: VaultItem.maxSecretBytes + 1) { $0.initializeMemory(as: UInt8.self, repeating: 1) })
            }
            #expect(try readBytes(vault.url) == before)
            #expect(vault.items().count == 1)

            // The limits themselves are accepted.
            let limit = String(repeating: "s", count: 1024)
            let fullAttributes = Dictionary(uniqueKeysWithValues: (0..<64).map { ("k\($0)", "v\($0)") })
            try vault.addItem(service: limit, account: limit, label: limit, attributes: fullAttributes, secret: secure("x"))
            let reopened = try Vault.open(at: vault.url, passphrase: secure(testPassphrase))
            #expect(try reopened.item(service: limit, account: limit).attributes == fullAttributes)
        }
    }

    @Test func itemClassNames() {
        #expect(VaultItem.ItemClass.allCases.map(\.description) == ["generic", "key", "note"])
        #expect(VaultItem.ItemClass.allCases.map(\.rawValue) == [1, 2, 3], "the on-disk class bytes")
        for itemClass in VaultItem.ItemClass.allCases { #expect(VaultItem.ItemClass(name: itemClass.description) == itemClass) }
        #expect(VaultItem.ItemClass(name: "password") == nil)
        #expect(VaultItem.ItemClass(name: "Generic") == nil)
    }

    @Test func itemDescriptionNeverShowsTheSecret() throws {
        try withTemporaryFolder { folder in
            let vault = try makeVault(in: folder)
            let secret = "the-secret-itself-0x5eed"
            let item = try vault.addItem(service: "svc", account: "acct", label: "My label", attributes: ["k": "v"], secret: secure(secret))
            var dumped = ""
            dump(item, to: &dumped)
            var dumpedList = ""
            dump(vault.items(), to: &dumpedList)
            for text in [item.description, "\(item)", String(reflecting: item), dumped, dumpedList, "\([item])",
                         "\(item.secret)", String(reflecting: item.secret)] {
                #expect(!text.contains(secret), "\(text)")
                #expect(!text.contains(Hex.encode(Array(secret.utf8))), "\(text)")
                #expect(!text.contains(Data(secret.utf8).base64EncodedString()), "\(text)")
            }
            #expect(item.description.contains("svc") && item.description.contains("acct") && item.description.contains("My label"))
        }
    }

    // MARK: - Writes that must not leave an unreadable vault

    /// Whatever a write accepts, the next open must read back. `updateItems` validates
    /// neither the attributes (count, length) nor the label, while the reader refuses more
    /// than 64 attributes and text fields over 64 KiB (`.integrityFailure`): such an update
    /// is written, and the vault no longer opens. It must be refused like `addItem` refuses it.
    @Test(arguments: ["65 attributes", "a label of 70000 bytes", "an attribute value of 70000 bytes"])
    func updateItemsNeverMakesAnUnreadableVault(change: String) throws {
        try withTemporaryFolder { folder in
            let vault = try makeVault(in: folder)
            try vault.addItem(service: "svc", account: "acct", secret: secure("x"))
            let before = try readBytes(vault.url)
            let long = String(repeating: "x", count: 70_000)
            expectVaultError(.invalidArguments, "update with \(change)") {
                switch change {
                case "65 attributes":
                    try vault.updateItems(matching: .all, attributes: Dictionary(uniqueKeysWithValues: (0..<65).map { ("k\($0)", "v") }))
                case "a label of 70000 bytes":
                    try vault.updateItems(matching: .all, label: long)
                default:
                    try vault.updateItems(matching: .all, attributes: ["k": long])
                }
            }
            #expect(try readBytes(vault.url) == before, "a refused update does not write")
            #expect(throws: Never.self, "the vault still opens") { try Vault.open(at: vault.url, passphrase: secure(testPassphrase)) }
        }
    }

    /// `addItem` checks the number of attributes but not their length; the reader refuses
    /// text fields over 64 KiB with `.integrityFailure`. The add must be refused, or read back.
    @Test(arguments: ["long value", "long key"])
    func longAttributesNeverMakeAnUnreadableVault(which: String) throws {
        try withTemporaryFolder { folder in
            let vault = try makeVault(in: folder)
            let long = String(repeating: "x", count: 70_000)
            let attribute = which == "long key" ? (key: long, value: "v") : (key: "k", value: long)
            do {
                try vault.addItem(service: "svc", account: "acct", attributes: [attribute.key: attribute.value], secret: secure("x"))
            } catch let error as VaultError {
                #expect(error.code == .invalidArguments, "\(error.message)")
            }
            #expect(throws: Never.self, "the vault still opens") { try Vault.open(at: vault.url, passphrase: secure(testPassphrase)) }
        }
    }

    /// Writes have no size limit, but the reader refuses files over 64 MiB: each item may
    /// hold 1 MiB, so 65 of them (here one update of 65 small items) write a vault that
    /// `open` then refuses as "too large". The write must be refused, or read back.
    @Test(.timeLimit(.minutes(2)))
    func aVaultIsNeverWrittenLargerThanItCanBeRead() throws {
        try withTemporaryFolder { folder in
            let vault = try makeVault(in: folder)
            for i in 0..<65 { try vault.addItem(service: "svc", account: "item-\(i)", secret: secure("small")) }
            let big = SecureBytes(count: VaultItem.maxSecretBytes) { $0.initializeMemory(as: UInt8.self, repeating: 0x42) }
            do {
                try vault.updateItems(matching: .all, secret: big)
            } catch let error as VaultError {
                #expect(error.code == .invalidArguments, "\(error.message)")
            }
            let size = try FileManager.default.attributesOfItem(atPath: vault.url.path)[.size] as? Int ?? 0
            #expect(size <= VaultFormat.maxFileSize, "the file is \(size) bytes")
            #expect(throws: Never.self, "the vault still opens") { try Vault.open(at: vault.url, passphrase: secure(testPassphrase)) }
        }
    }
}

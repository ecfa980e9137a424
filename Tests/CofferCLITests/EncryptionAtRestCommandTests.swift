import Foundation
import Testing

/// Values saved with `--secret` never reach the store's files in the clear: not in store.sqlite,
/// its WAL or its shared memory, not as UTF-8, UTF-16, hex or base64. Plain values do (the control).
@Suite("encryption at rest (coffer CLI)")
struct EncryptionAtRestCommandTests {
    let team: Team

    init() throws {
        team = try Team([.alice, .bob])
        try team.createZone(.alice, "Vault")
    }

    static func canary(_ label: String) -> String { "\(label)-Canary-\(UUID().uuidString)" }

    func expectAbsent(_ text: String, sourceLocation: SourceLocation = #_sourceLocation) throws {
        let files = team.storeFiles
        #expect(files.contains(team.store), "no store file at \(team.store)", sourceLocation: sourceLocation)
        let found = try occurrences(of: text, in: files)
        #expect(found.isEmpty, "the secret '\(text)' is at rest: \(found)", sourceLocation: sourceLocation)
    }

    func expectPresent(_ text: String, sourceLocation: SourceLocation = #_sourceLocation) throws {
        let found = try occurrences(of: text, in: team.storeFiles)
        #expect(found.contains { $0.hasSuffix(": UTF-8") }, "the plain control '\(text)' is not found in the store: the scan is blind",
                sourceLocation: sourceLocation)
    }

    @Test("secret strings, lists, bytes and typed values are not at rest; a plain canary is")
    func secretsAreSealed() throws {
        let string = Self.canary("String"), listItem = Self.canary("List"), bytes = Self.canary("Bytes")
        let long = Self.canary("Long") + String(repeating: "-padding", count: 200)
        let plain = Self.canary("Plain")
        let bytesFile = try team.sandbox.write("canary.bin", Data(bytes.utf8))
        try team.put(.alice, "Vault", "login", type: "Login", set: ["site=\(plain)"], secret: [
            "password=\(string)",
            "history:[string]=old,\(listItem)",
            "key:bytes=@\(bytesFile)",
            "inline:bytes=\(Data(long.utf8).base64EncodedString())",
            "note=\(long)",
        ])
        // The values round-trip, so they were stored (somewhere, sealed).
        let record = try team.get(.alice, "Vault", "login")
        let secrets = record["encryptedValues"] as? [String: Any] ?? [:]
        #expect(json(secrets, "password") == .string(string))
        #expect(Data(base64Encoded: secrets["key"] as? String ?? "") == Data(bytes.utf8))

        for text in [string, listItem, bytes, long] { try expectAbsent(text) }
        try expectPresent(plain)
        // audit --plaintext agrees with the scan.
        expectSuccess(try team.run(.alice, ["audit", "--plaintext", string, "--plaintext", listItem, "--plaintext", bytes]))
        #expect(try team.run(.alice, ["audit", "--plaintext", plain]).status == 1)
    }

    @Test("a secret replaced by another value, and a deleted secret record, leave no trace at rest")
    func overwrittenAndDeleted() throws {
        let first = Self.canary("First"), second = Self.canary("Second"), deleted = Self.canary("Deleted")
        try team.put(.alice, "Vault", "r1", type: "Login", secret: ["password=\(first)"])
        try team.put(.alice, "Vault", "r1", type: "Login", secret: ["password=\(second)"])
        try team.put(.alice, "Vault", "r2", type: "Login", secret: ["password=\(deleted)"])
        try team.ok(.alice, ["record", "delete", "Vault", "r2"])
        for text in [first, second, deleted] { try expectAbsent(text) }
    }

    @Test("a deleted record's plain values, and a replaced plain value, are in no file of the store once the command ends, its write-ahead log included")
    func deletedPlainValuesLeaveEveryFile() throws {
        let deleted = Self.canary("DeletedPlain"), replaced = Self.canary("ReplacedPlain")
        try team.put(.alice, "Vault", "gone", type: "Note", set: ["title=\(deleted)"])
        try team.put(.alice, "Vault", "kept", type: "Note", set: ["title=\(replaced)"])
        try expectPresent(deleted)
        try team.ok(.alice, ["record", "delete", "Vault", "gone"])
        try team.put(.alice, "Vault", "kept", type: "Note", set: ["title=newer"])
        for text in [deleted, replaced] { try expectAbsent(text) }
    }

    @Test("secrets imported from JSON lines are not at rest")
    func imported() throws {
        let secret = Self.canary("Imported"), plain = Self.canary("ImportedPlain")
        let line = try JSONSerialization.data(withJSONObject: [
            "name": "i1", "type": "Login", "values": ["site": plain], "encryptedValues": ["password": secret, "tags": ["x", secret]],
        ] as [String: Any])
        let file = try team.sandbox.write("import.jsonl", line + Data("\n".utf8))
        try team.ok(.alice, ["record", "import", "Vault", file])
        try expectAbsent(secret)
        try expectPresent(plain)
    }

    @Test("secrets written by a participant, through a share, re-keyed: not at rest")
    func sharedAndRekeyed() throws {
        let byOwner = Self.canary("Owner"), byBob = Self.canary("Bob")
        try team.put(.alice, "Vault", "o1", type: "Login", secret: ["password=\(byOwner)"])
        try team.share(.alice, "Vault", with: [(.bob, "read-write")])
        try team.put(.bob, "Vault@\(Who.alice.email)", "b1", type: "Login", secret: ["password=\(byBob)"])
        #expect(json(try team.get(.alice, "Vault", "b1")["encryptedValues"] as? [String: Any] ?? [:], "password") == .string(byBob))
        try expectAbsent(byOwner)
        try expectAbsent(byBob)
        try team.ok(.alice, ["share", "remove", "Vault", "--participant", "Bob"])
        try team.ok(.alice, ["zone", "rekey", "Vault"])
        try expectAbsent(byOwner)
        try expectAbsent(byBob)
    }

    @Test("the scanner finds each encoding it looks for (self-check)")
    func scannerSelfCheck() throws {
        let text = Self.canary("Self")
        let utf8 = Data(text.utf8)
        for prefix in 0..<3 {
            let padded = Data(repeating: 0x41, count: prefix) + utf8 + Data([0x42, 0x43])
            let file = try team.sandbox.write("scan-\(prefix).bin", Data("xx".utf8) + Data(padded.base64EncodedString().utf8) + Data("yy".utf8))
            #expect(!(try occurrences(of: text, in: [file])).isEmpty, "base64 at offset \(prefix) is not found")
        }
        let hex = utf8.map { String(format: "%02x", $0) }.joined()
        let hexFile = try team.sandbox.write("scan-hex.bin", "..\(hex)..")
        #expect(!(try occurrences(of: text, in: [hexFile])).isEmpty)
        let utf16File = try team.sandbox.write("scan-utf16.bin", text.data(using: .utf16LittleEndian)!)
        #expect(!(try occurrences(of: text, in: [utf16File])).isEmpty)
        let cleanFile = try team.sandbox.write("scan-clean.bin", randomBytes(4096))
        #expect(try occurrences(of: text, in: [cleanFile]).isEmpty)
    }
}

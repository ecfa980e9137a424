import CofferCrypto
import CofferTestSupport
import Foundation
import Testing
@testable import CofferVault

@Suite("Contact cards: signed public identity")
struct ContactCardTests {
    static let signedFields = ["name", "email", "created", "userID", "signingKey", "boxKey", "signature"]
    static let requiredFields = ["format", "version", "userID", "name", "signingKey", "boxKey", "created", "signature"]
    static let base64Fields: Set<String> = ["signingKey", "boxKey", "signature"]
    static let base64Alphabet = Array("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/")
    /// 2027-01-15T08:00:00Z plus three quarters of a second.
    static let fixedDate = Date(timeIntervalSince1970: 1_800_000_000.75)

    // MARK: - Helpers

    func object(_ data: Data) throws -> [String: Any] {
        try #require(try JSONSerialization.jsonObject(with: data) as? [String: Any])
    }

    /// The fields of `vault`'s card, after checking that the untouched card verifies (so a
    /// refusal of a changed card is about the change).
    func validFields(_ vault: Vault, created: Date = Date()) throws -> [String: Any] {
        let data = ContactCard(vault: vault, created: created).jsonData()
        _ = try ContactCard.verify(data) // the untouched card verifies
        return try object(data)
    }

    func json(_ object: [String: Any]) throws -> Data {
        try JSONSerialization.data(withJSONObject: object, options: [.prettyPrinted, .sortedKeys, .withoutEscapingSlashes])
    }

    /// A card whose fields are `fields`, signed by `signer` over exactly those fields:
    /// what the key's holder could make, so only the field checks can refuse it.
    func signedCard(_ fields: [String: Any], by signer: Vault) throws -> Data {
        var fields = fields
        let identity = UserIdentity(name: fields["name"] as? String ?? "", email: fields["email"] as? String,
                                    signingKey: try Ed25519.PublicKey(rawRepresentation: Array(try #require(Data(base64Encoded: fields["signingKey"] as? String ?? "")))),
                                    boxKey: try X25519.PublicKey(rawRepresentation: Array(try #require(Data(base64Encoded: fields["boxKey"] as? String ?? "")))))
        let signature = signer.signingKey.signature(for: ContactCard.signedBytes(identity: identity, created: fields["created"] as? String ?? ""))
        fields["signature"] = Data(signature).base64EncodedString()
        return try json(fields)
    }

    // MARK: - Round trip

    @Test("a card with a field twice is refused, even when the last of each is the signed one")
    func duplicateField() throws {
        try withTemporaryFolder { folder in
            let vault = try makeVault(in: folder)
            let text = String(decoding: ContactCard(vault: vault, created: Self.fixedDate).jsonData(), as: UTF8.self)
            #expect(try ContactCard.verify(Data(text.utf8)).identity == vault.identity)
            // An earlier copy of a field: JSONSerialization keeps the last, another parser the first.
            let doubled = "{\"email\":\"mallory@evil.example\"," + text.dropFirst()
            do { _ = try ContactCard.verify(Data(doubled.utf8)); Issue.record("a card with 'email' twice was accepted") } catch let e as VaultError {
                #expect(e.code == .malformed && e.message.contains("email"))
            }
        }
    }

    @Test("JSONDuplicateKeys finds a key repeated in one object, and nothing else", arguments: [
        (#"{"a":1,"b":2}"#, nil), (#"{"a":1,"a":2}"#, "a"), (#"{"a":{"a":1},"b":[{"a":1},{"a":2}]}"#, nil),
        (#"{"a":{"x":1,"x":2}}"#, "x"), (#"[{"k":1},{"k":1,"k":2}]"#, "k"), (#"{"a":1,"\u0061":2}"#, "a"),
        (#"{"s":"{\"s\":1,\"s\":2}","t":"a\"b"}"#, nil), (#"{"q\"":1,"q\"":2}"#, "q\""), (#"{ "a" : 1 , "a" : 2 }"#, "a"),
        (#"{"a":[1,{"a":2}],"c":{}}"#, nil),
    ] as [(String, String?)])
    func duplicateKeys(json: String, expected: String?) throws {
        #expect(try JSONSerialization.jsonObject(with: Data(json.utf8), options: .fragmentsAllowed) is Any)
        #expect(JSONDuplicateKeys.first(in: Data(json.utf8)) == expected)
    }

    @Test func roundTrip() throws {
        try withTemporaryFolder { folder in
            let vault = try makeVault(in: folder)
            let card = ContactCard(vault: vault, created: Self.fixedDate)
            #expect(card.identity == vault.identity)
            #expect(card.created == "2027-01-15T08:00:00Z", "to the second, UTC")
            #expect(card.signature.count == 64)

            let data = card.jsonData()
            let verified = try ContactCard.verify(data)
            #expect(verified == card)
            #expect(verified.identity == vault.identity)
            #expect(verified.identity.userID == vault.identity.userID)
            #expect(verified.identity.fingerprint == vault.identity.fingerprint)
            #expect(verified.created == card.created)
            #expect(verified.signature == card.signature)
            // Again from its own JSON: the encoding is stable.
            #expect(verified.jsonData() == data)
        }
    }

    @Test func roundTripWithoutEmail() throws {
        try withTemporaryFolder { folder in
            let vault = try makeVault(in: folder, name: "Bob", email: nil)
            let data = ContactCard(vault: vault).jsonData()
            #expect(try object(data)["email"] == nil, "no email key at all")
            let verified = try ContactCard.verify(data)
            #expect(verified.identity.email == nil)
            #expect(verified.identity == vault.identity)
        }
    }

    @Test func jsonShape() throws {
        try withTemporaryFolder { folder in
            let vault = try makeVault(in: folder)
            let data = ContactCard(vault: vault, created: Self.fixedDate).jsonData()
            #expect(data.last == 0x0a, "ends in a newline")
            let text = String(decoding: data, as: UTF8.self)
            let fields = try object(data)
            #expect(Set(fields.keys) == Set(Self.requiredFields + ["email"]))
            #expect(fields["format"] as? String == "coffer-contact")
            #expect((fields["version"] as? NSNumber)?.intValue == 1)
            #expect(fields["userID"] as? String == vault.identity.userID)
            #expect(fields["name"] as? String == "Alice Liddell")
            #expect(fields["email"] as? String == "alice@example.com")
            #expect(fields["created"] as? String == "2027-01-15T08:00:00Z")
            #expect(fields["signingKey"] as? String == Data(vault.identity.signingKey.rawRepresentation).base64EncodedString())
            #expect(fields["boxKey"] as? String == Data(vault.identity.boxKey.rawRepresentation).base64EncodedString())
            #expect((fields["signature"] as? String).flatMap { Data(base64Encoded: $0) }?.count == 64)
            // Sorted keys, pretty-printed.
            let order = ["boxKey", "created", "email", "format", "name", "signature", "signingKey", "userID", "version"]
            let positions = order.compactMap { text.range(of: "\"\($0)\"")?.lowerBound }
            #expect(positions.count == order.count && positions == positions.sorted(), "\(text)")
            #expect(text.contains("\n"))
            // Nothing secret in it.
            #expect(!text.contains(Data(vault.signingKey.seed.unsafeCopiedBytes()).base64EncodedString()))
            #expect(!text.contains(Data(vault.boxKey.rawRepresentation.unsafeCopiedBytes()).base64EncodedString()))
        }
    }

    // MARK: - Tampering

    /// Every single-character change of every signed field's value is refused. (Changes
    /// that decode to the very same base64 bytes are the subject of the next test.)
    @Test func anyChangedCharacterOfASignedFieldIsRefused() throws {
        try withTemporaryFolder { folder in
            let vault = try makeVault(in: folder)
            let original = ContactCard(vault: vault, created: Self.fixedDate).jsonData()
            _ = try ContactCard.verify(original) // the untouched card verifies
            let fields = try object(original)
            var tried = 0
            for field in Self.signedFields {
                let value = Array(try #require(fields[field] as? String, "\(field)"))
                for index in value.indices {
                    for replacement in replacements(for: value[index], in: field) {
                        var changed = value
                        changed[index] = replacement
                        if Self.base64Fields.contains(field), let a = Data(base64Encoded: String(value)),
                           let b = Data(base64Encoded: String(changed)), a == b { continue }
                        var tampered = fields
                        tampered[field] = String(changed)
                        let data = try json(tampered)
                        tried += 1
                        expectVaultError(oneOf: [.integrityFailure, .malformed], "\(field)[\(index)] '\(value[index])' → '\(replacement)'") {
                            try ContactCard.verify(data)
                        }
                    }
                }
            }
            #expect(tried > 500)
        }
    }

    private func replacements(for character: Character, in field: String) -> [Character] {
        if Self.base64Fields.contains(field) {
            return Self.base64Alphabet.filter { $0 != character }
        }
        var out: [Character] = []
        if let digit = character.wholeNumberValue { out.append(Character(String((digit + 1) % 10))) }
        if character.isLowercase { out.append(character == "a" ? "b" : "a") }
        if character.isUppercase { out.append(character == "A" ? "B" : "A") }
        if character.isLetter { out.append(Character(character.isUppercase ? character.lowercased() : character.uppercased())) }
        out.append(character == "x" ? "y" : "x")
        out.append(character == " " ? "_" : " ")
        return out
    }

    /// Base64 text is one-to-one with the bytes only if the unused low bits of the last
    /// character are zero; Foundation's decoder ignores them. A card with such a changed
    /// character decodes to the same keys and signature and would verify: the card's text
    /// is malleable although its signed bytes are not. Refuse non-canonical base64.
    @Test func nonCanonicalBase64IsRefused() throws {
        try withTemporaryFolder { folder in
            let vault = try makeVault(in: folder)
            let original = ContactCard(vault: vault, created: Self.fixedDate).jsonData()
            _ = try ContactCard.verify(original) // the untouched card verifies
            let fields = try object(original)
            for field in Self.base64Fields.sorted() {
                let value = Array(try #require(fields[field] as? String))
                let decoded = try #require(Data(base64Encoded: String(value)))
                let last = try #require(value.lastIndex { $0 != "=" })
                let variants = Self.base64Alphabet.filter { $0 != value[last] }.filter { c in
                    var v = value
                    v[last] = c
                    return Data(base64Encoded: String(v)) == decoded
                }
                #expect(!variants.isEmpty, "\(field): the alphabet has same-bytes variants of the last character")
                var accepted = [String]()
                for c in variants {
                    var tampered = fields
                    var v = value
                    v[last] = c
                    tampered[field] = String(v)
                    do {
                        _ = try ContactCard.verify(try json(tampered))
                        accepted.append(String(v))
                    } catch let error as VaultError {
                        #expect(error.code == .malformed, "\(field) '\(String(v))': \(error.message)")
                    }
                }
                #expect(accepted.isEmpty, "\(field) '\(String(value))' was accepted as \(accepted)")
            }
        }
    }

    @Test func removingTheOptionalEmailBreaksTheSignature() throws {
        try withTemporaryFolder { folder in
            let vault = try makeVault(in: folder)
            var fields = try validFields(vault)
            fields["email"] = nil
            let data = try json(fields)
            expectVaultError(.integrityFailure) { try ContactCard.verify(data) }
            // Adding one to a card without email breaks it too.
            let bob = try makeVault(in: folder, file: "bob.coffer", name: "Bob", email: nil)
            var bobFields = try validFields(bob)
            bobFields["email"] = "bob@example.com"
            let bobData = try json(bobFields)
            expectVaultError(.integrityFailure) { try ContactCard.verify(bobData) }
        }
    }

    @Test(arguments: ["extra", "Name", "emails", "signature2", "", "format "])
    func unknownExtraKeyIsMalformed(key: String) throws {
        try withTemporaryFolder { folder in
            let vault = try makeVault(in: folder)
            var fields = try validFields(vault)
            fields[key] = "value"
            let data = try json(fields)
            let error = expectVaultError(.malformed) { try ContactCard.verify(data) }
            #expect(error?.message.contains("'\(key)'") == true, "\(error?.message ?? "")")
        }
    }

    @Test(arguments: requiredFields)
    func missingKeyIsMalformed(key: String) throws {
        try withTemporaryFolder { folder in
            let vault = try makeVault(in: folder)
            var fields = try validFields(vault)
            fields[key] = nil
            let data = try json(fields)
            let error = expectVaultError(.malformed) { try ContactCard.verify(data) }
            #expect(error?.message.contains(key) == true, "\(error?.message ?? "")")
        }
    }

    @Test func otherVersionsAreMalformed() throws {
        try withTemporaryFolder { folder in
            let vault = try makeVault(in: folder)
            let fields = try validFields(vault)
            let versions: [Any] = [2, 0, -1, 1.5, "1", true, NSNull(), [1], ["v": 1]]
            for version in versions {
                var tampered = fields
                tampered["version"] = version
                let data = try json(tampered)
                expectVaultError(.malformed, "version \(version)") { try ContactCard.verify(data) }
            }
            for format in ["coffer-contact-v2", "Coffer-Contact", "", "coffer-vault"] {
                var tampered = fields
                tampered["format"] = format
                let data = try json(tampered)
                expectVaultError(.malformed, "format \(format)") { try ContactCard.verify(data) }
            }
        }
    }

    @Test func version2IsMalformedEvenWhenOtherwisePerfect() throws {
        try withTemporaryFolder { folder in
            let vault = try makeVault(in: folder)
            let original = ContactCard(vault: vault).jsonData()
            _ = try ContactCard.verify(original) // the untouched card verifies
            let text = String(decoding: original, as: UTF8.self)
            #expect(text.contains("\"version\" : 1"))
            let v2 = Data(text.replacingOccurrences(of: "\"version\" : 1", with: "\"version\" : 2").utf8)
            let error = expectVaultError(.malformed) { try ContactCard.verify(v2) }
            #expect(error?.message.contains("version") == true)
        }
    }

    @Test(arguments: ["", "not json", "{", "[]", "null", "42", "\"card\"", "{}{}", "[{\"format\":\"coffer-contact\"}]"])
    func notAJSONObjectIsMalformed(text: String) throws {
        expectVaultError(.malformed) { try ContactCard.verify(Data(text.utf8)) }
    }

    @Test func binaryGarbageIsMalformed() throws {
        for count in [1, 16, 1000, 16 * 1024] {
            expectVaultError(.malformed) { try ContactCard.verify(Data(SecureRandom.bytes(count: count))) }
        }
    }

    @Test func wrongTypesAreMalformed() throws {
        try withTemporaryFolder { folder in
            let vault = try makeVault(in: folder)
            let fields = try validFields(vault)
            for key in ["userID", "name", "email", "created", "signingKey", "boxKey", "signature", "format"] {
                for value: Any in [42, NSNull(), ["a"], ["k": "v"], true] {
                    var tampered = fields
                    tampered[key] = value
                    let data = try json(tampered)
                    expectVaultError(.malformed, "\(key) = \(value)") { try ContactCard.verify(data) }
                }
            }
        }
    }

    @Test func keysAndSignatureOfTheWrongLengthAreMalformed() throws {
        try withTemporaryFolder { folder in
            let vault = try makeVault(in: folder)
            let fields = try validFields(vault)
            for (key, count) in [("signingKey", 31), ("signingKey", 33), ("boxKey", 31), ("boxKey", 64),
                                 ("signature", 63), ("signature", 65), ("signature", 0)] {
                var tampered = fields
                tampered[key] = Data(SecureRandom.bytes(count: count)).base64EncodedString()
                let data = try json(tampered)
                expectVaultError(.malformed, "\(key) of \(count) bytes") { try ContactCard.verify(data) }
            }
            for bad in ["not base64!", "====", "QUJD\n", " " + (fields["boxKey"] as? String ?? "")] {
                var tampered = fields
                tampered["boxKey"] = bad
                let data = try json(tampered)
                expectVaultError(.malformed, "boxKey '\(bad)'") { try ContactCard.verify(data) }
            }
        }
    }

    // MARK: - Whose card is it

    /// The user id must belong to the signing key: nobody can claim another user's id.
    @Test func userIDThatDoesNotMatchTheSigningKeyIsAnIntegrityFailure() throws {
        try withTemporaryFolder { folder in
            let alice = try makeVault(in: folder, file: "alice.coffer")
            let bob = try makeVault(in: folder, file: "bob.coffer", name: "Bob", email: "bob@example.com")
            let aliceFields = try validFields(alice)
            let bobFields = try validFields(bob)

            // Alice's card claiming Bob's user id.
            var claim = aliceFields
            claim["userID"] = bobFields["userID"]
            let claimData = try json(claim)
            let error = expectVaultError(.integrityFailure) { try ContactCard.verify(claimData) }
            #expect(error?.message.contains("user id") == true)

            // Alice's user id with Bob's keys, properly signed by Bob: still refused.
            var forged = bobFields
            forged["userID"] = aliceFields["userID"]
            forged["name"] = aliceFields["name"]
            forged["email"] = aliceFields["email"]
            let forgedData = try signedCard(forged, by: bob)
            expectVaultError(.integrityFailure) { try ContactCard.verify(forgedData) }

            // A user id that is nobody's.
            var nobody = aliceFields
            nobody["userID"] = String(repeating: "0", count: 32)
            let nobodyData = try json(nobody)
            expectVaultError(.integrityFailure) { try ContactCard.verify(nobodyData) }
        }
    }

    /// Alice's identity and keys, signed by Bob's key: the signature does not verify.
    @Test func aCardSignedByAnotherKeyIsAnIntegrityFailure() throws {
        try withTemporaryFolder { folder in
            let alice = try makeVault(in: folder, file: "alice.coffer")
            let bob = try makeVault(in: folder, file: "bob.coffer", name: "Bob")
            var fields = try validFields(alice)
            fields["name"] = "Alice (new phone)"
            let data = try signedCard(fields, by: bob)
            expectVaultError(.integrityFailure) { try ContactCard.verify(data) }

            // Another card's signature moved over.
            var swapped = try validFields(alice)
            swapped["signature"] = try validFields(bob)["signature"]
            let swappedData = try json(swapped)
            expectVaultError(.integrityFailure) { try ContactCard.verify(swappedData) }

            // Alice's own signature over the same fields at another time.
            var older = try validFields(alice, created: Self.fixedDate)
            older["signature"] = try validFields(alice, created: Self.fixedDate.addingTimeInterval(1))["signature"]
            let olderData = try json(older)
            expectVaultError(.integrityFailure) { try ContactCard.verify(olderData) }
        }
    }

    /// The key's holder can sign anything; the identity rules still apply to what is signed.
    @Test func aProperlySignedCardIsStillChecked() throws {
        try withTemporaryFolder { folder in
            let alice = try makeVault(in: folder)
            let fields = try validFields(alice, created: Self.fixedDate)

            // A change the holder signs is accepted: the card is the holder's word.
            var renamed = fields
            renamed["name"] = "Alice L."
            let renamedCard = try ContactCard.verify(try signedCard(renamed, by: alice))
            #expect(renamedCard.identity.name == "Alice L.")
            #expect(renamedCard.identity.userID == alice.identity.userID)

            let invalid: [(String, Any)] = [("name", " Alice"), ("name", ""), ("name", "Al\nice"), ("name", String(repeating: "a", count: 256)),
                                            ("email", "not-an-email"), ("email", ""), ("created", "yesterday"),
                                            ("created", "2027-01-15 08:00:00"), ("created", "")]
            for (key, value) in invalid {
                var tampered = fields
                tampered[key] = value
                let data = try signedCard(tampered, by: alice)
                expectVaultError(.malformed, "\(key) = '\(value)'") { try ContactCard.verify(data) }
            }
        }
    }

    // MARK: - Size

    @Test func oversizedCardIsMalformed() throws {
        try withTemporaryFolder { folder in
            let vault = try makeVault(in: folder)
            let card = ContactCard(vault: vault).jsonData()
            // Padded with JSON whitespace, so only the size is wrong.
            var atLimit = card
            atLimit.append(Data(repeating: 0x20, count: ContactCard.maxEncodedBytes - card.count))
            #expect(atLimit.count == 16 * 1024)
            #expect(try ContactCard.verify(atLimit).identity == vault.identity, "16 KiB exactly is accepted")

            var over = atLimit
            over.append(0x20)
            let error = expectVaultError(.malformed) { try ContactCard.verify(over) }
            #expect(error?.message.contains("larger") == true)

            // A long name that makes the card large: refused by the size, before parsing.
            var fields = try object(card)
            fields["name"] = String(repeating: "n", count: 20_000)
            let big = try json(fields)
            expectVaultError(.malformed) { try ContactCard.verify(big) }
            expectVaultError(.malformed) { try ContactCard.verify(Data(repeating: 0x7b, count: 1 << 20)) }
        }
    }
}

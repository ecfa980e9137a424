import CofferCrypto
import Foundation

/// A user's public contact card: identity and both public keys, signed by the identity's
/// own Ed25519 key. Anyone can check that the card was made by the holder of the keys and
/// has not changed since; whether it is the right person is checked by comparing the
/// ``UserIdentity/fingerprint`` aloud.
///
/// JSON form (`coffer vault export-contact`); every key is required except `email`, and
/// a decoder refuses unknown keys, other versions, and any changed byte of the signed fields:
/// ```json
/// {"format":"coffer-contact","version":1,"userID":"…","name":"Alice","email":"alice@example.com",
///  "signingKey":"<base64 32 bytes>","boxKey":"<base64 32 bytes>","created":"2026-11-22T02:30:00Z",
///  "signature":"<base64 64 bytes>"}
/// ```
public struct ContactCard: Sendable, Equatable {
    public static let format = "coffer-contact"
    public static let version = 1
    /// Cards larger than this are refused before parsing.
    public static let maxEncodedBytes = 16 * 1024

    public let identity: UserIdentity
    /// When the card was made, to the second, in ISO 8601 (UTC).
    public let created: String
    public let signature: [UInt8]

    /// Makes and signs a card for the vault's identity.
    public init(vault: Vault, created: Date = Date()) {
        self.identity = vault.identity
        self.created = Self.isoFormatter.string(from: created)
        self.signature = vault.signingKey.signature(for: Self.signedBytes(identity: identity, created: self.created))
    }

    private init(identity: UserIdentity, created: String, signature: [UInt8]) {
        self.identity = identity
        self.created = created
        self.signature = signature
    }

    /// The bytes the signature covers: a domain string, then each field length-prefixed
    /// (4-byte big-endian length), keys raw.
    static func signedBytes(identity: UserIdentity, created: String) -> [UInt8] {
        var out = Array("coffer.contact-card.v1".utf8) + [0]
        for field in [identity.userID, identity.name, identity.email ?? "", created] {
            let utf8 = Array(field.utf8)
            out += BigEndian.bytes(UInt32(utf8.count)) + utf8
        }
        return out + identity.signingKey.rawRepresentation + identity.boxKey.rawRepresentation
    }

    /// The card as pretty-printed JSON with sorted keys, ending in a newline.
    public func jsonData() -> Data {
        var object: [String: Any] = [
            "format": Self.format, "version": Self.version, "userID": identity.userID, "name": identity.name,
            "signingKey": Data(identity.signingKey.rawRepresentation).base64EncodedString(),
            "boxKey": Data(identity.boxKey.rawRepresentation).base64EncodedString(),
            "created": created, "signature": Data(signature).base64EncodedString(),
        ]
        if let email = identity.email { object["email"] = email }
        var data = try! JSONSerialization.data(withJSONObject: object, options: [.prettyPrinted, .sortedKeys, .withoutEscapingSlashes])
        data.append(0x0a)
        return data
    }

    /// Parses and verifies a card.
    ///
    /// - Throws: ``VaultError`` `.malformed` for anything that is not exactly a v1 card, and
    ///   `.integrityFailure` when the signature or the user id does not match the keys.
    public static func verify(_ data: Data) throws -> ContactCard {
        guard data.count <= maxEncodedBytes else { throw VaultError(.malformed, "the contact card is larger than \(maxEncodedBytes) bytes") }
        guard let object = (try? JSONSerialization.jsonObject(with: data)) as? [String: Any] else {
            throw VaultError(.malformed, "the contact card is not a JSON object")
        }
        if let twice = JSONDuplicateKeys.first(in: data) {
            throw VaultError(.malformed, "the contact card has the field '\(twice)' twice")
        }
        let required: Set<String> = ["format", "version", "userID", "name", "signingKey", "boxKey", "created", "signature"]
        let keys = Set(object.keys)
        if let unknown = keys.subtracting(required.union(["email"])).sorted().first {
            throw VaultError(.malformed, "the contact card has an unknown field '\(unknown)'")
        }
        if let missing = required.subtracting(keys).sorted().first {
            throw VaultError(.malformed, "the contact card lacks the field '\(missing)'")
        }
        func string(_ key: String) throws -> String {
            guard let s = object[key] as? String else { throw VaultError(.malformed, "the contact card's '\(key)' is not a string") }
            return s
        }
        func base64(_ key: String, count: Int) throws -> [UInt8] {
            // Canonical base64 only: re-encoding must give the same text, so a card has one form.
            let text = try string(key)
            guard let d = Data(base64Encoded: text), d.count == count, d.base64EncodedString() == text else {
                throw VaultError(.malformed, "the contact card's '\(key)' is not \(count) bytes of base64")
            }
            return Array(d)
        }
        guard try string("format") == format else { throw VaultError(.malformed, "not a Coffer contact card") }
        // JSON booleans bridge to NSNumber too; only a number written as an integer is a version.
        guard let number = object["version"] as? NSNumber, String(cString: number.objCType) != "c",
              number.int64Value == Int64(version), number.doubleValue == Double(version) else {
            throw VaultError(.malformed, "unsupported contact card version (this build reads version \(version))")
        }
        let email = try object["email"].map { _ in try string("email") }
        let name = try string("name")
        do { try IdentityRules.validate(name: name, email: email) } catch let e as VaultError {
            throw VaultError(.malformed, "the contact card's identity is invalid: \(e.message)")
        }
        let created = try string("created")
        guard isoFormatter.date(from: created) != nil else { throw VaultError(.malformed, "the contact card's 'created' is not an ISO 8601 date") }
        let identity = UserIdentity(name: name, email: email,
                                    signingKey: try Ed25519.PublicKey(rawRepresentation: base64("signingKey", count: 32)),
                                    boxKey: try X25519.PublicKey(rawRepresentation: base64("boxKey", count: 32)))
        guard try string("userID") == identity.userID else {
            throw VaultError(.integrityFailure, "the contact card's user id does not belong to its signing key")
        }
        let signature = try base64("signature", count: Ed25519.signatureByteCount)
        guard identity.signingKey.isValidSignature(signature, for: signedBytes(identity: identity, created: created)) else {
            throw VaultError(.integrityFailure, "the contact card's signature does not verify: it was changed after signing")
        }
        return ContactCard(identity: identity, created: created, signature: signature)
    }

    nonisolated(unsafe) static let isoFormatter: ISO8601DateFormatter = {
        let f = ISO8601DateFormatter()
        f.formatOptions = [.withInternetDateTime]
        return f
    }()
}

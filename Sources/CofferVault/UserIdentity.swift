import CofferCrypto
import Foundation

/// A user's public identity: what others need to share with them and to check their writes.
///
/// The user id is derived from the signing key (`BLAKE2b-128("coffer.user-id.v1" ‖ key)`,
/// lowercase hex), so nobody can claim another user's id with a key of their own.
public struct UserIdentity: Sendable, Hashable {
    public let userID: String
    public let name: String
    public let email: String?
    public let signingKey: Ed25519.PublicKey
    public let boxKey: X25519.PublicKey

    public init(name: String, email: String?, signingKey: Ed25519.PublicKey, boxKey: X25519.PublicKey) {
        self.userID = Self.userID(for: signingKey)
        self.name = name
        self.email = email
        self.signingKey = signingKey
        self.boxKey = boxKey
    }

    /// The user id that belongs to a signing key.
    public static func userID(for signingKey: Ed25519.PublicKey) -> String {
        Hex.encode(BLAKE2b.hash(Array("coffer.user-id.v1".utf8) + signingKey.rawRepresentation, outputByteCount: 16))
    }

    /// Whether `userID` has the form of a user id: 32 lowercase hexadecimal digits (16 bytes).
    static func isWellFormed(userID: String) -> Bool {
        userID.utf8.count == 32 && userID.utf8.allSatisfy { (0x30...0x39).contains($0) || (0x61...0x66).contains($0) }
    }

    /// A fingerprint of both public keys that two people can compare aloud: eight groups
    /// of five digits, each group from 5 bytes of `BLAKE2b-320("coffer.fingerprint.v1" ‖ signing ‖ box)`
    /// taken modulo 100000 (as Signal's safety numbers do).
    public var fingerprint: String {
        let digest = BLAKE2b.hash(Array("coffer.fingerprint.v1".utf8) + signingKey.rawRepresentation + boxKey.rawRepresentation,
                                  outputByteCount: 40)
        return stride(from: 0, to: 40, by: 5).map { start -> String in
            let value = digest[start..<start + 5].reduce(UInt64(0)) { $0 << 8 | UInt64($1) } % 100_000
            let digits = String(value)
            return String(repeating: "0", count: 5 - digits.count) + digits
        }.joined(separator: " ")
    }
}

/// Rules for the names and emails that go into an identity.
enum IdentityRules {
    static func validate(name: String, email: String?) throws {
        let trimmed = name.trimmingCharacters(in: .whitespaces)
        guard !trimmed.isEmpty, trimmed == name else {
            throw VaultError(.invalidArguments, "a name must be non-empty, without leading or trailing spaces")
        }
        guard name.utf8.count <= 255, !name.containsControlCharacters else {
            throw VaultError(.invalidArguments, "a name is at most 255 bytes, with no control characters")
        }
        if let email {
            let parts = email.split(separator: "@", omittingEmptySubsequences: false)
            guard email.utf8.count <= 254, parts.count == 2, !parts[0].isEmpty, parts[1].contains("."),
                  !email.contains(where: { $0.isWhitespace }) else {
                throw VaultError(.invalidArguments, "'\(email)' is not an email address (name@domain.tld)")
            }
        }
    }
}

extension String {
    /// Whether it holds a control character (C0, DEL or C1: Unicode's `Cc`): names, labels and
    /// services that hold one would break a listing or reach a terminal.
    package var containsControlCharacters: Bool { unicodeScalars.contains { $0.properties.generalCategory == .control } }
}

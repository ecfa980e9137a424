import CofferCrypto
import CofferVault
import Foundation

/// The signature a client puts on each request to a Coffer server, with its Ed25519 identity
/// key, and its check on the server's side.
///
/// It covers, framed (each part after its four-byte length) under the domain
/// `coffer.request.v1`: the method, the request target (path and query exactly as sent), the
/// date, a 16-byte random nonce, the BLAKE2b-256 hash of the body and the user id. It travels in
/// four headers (``Header``). The server refuses a date more than ``window`` from its clock, a
/// signature that does not verify under the user's signing key, and (keeping the nonces it saw
/// for the window, which this type leaves to it) a nonce used before.
///
/// ```swift
/// let signed = RequestSignature.sign(method: "POST", target: "/records/modify", body: body, vault: vault)
/// for (name, value) in signed.headers { request.headers.add(name: name, value: value) }
/// // On the server:
/// let received = try RequestSignature(header: { request.headers.first(name: $0) })
/// try received.verify(method: "POST", target: "/records/modify", body: body, signingKey: key)
/// ```
public struct RequestSignature: Sendable, Hashable {
    /// The headers that carry it.
    public enum Header {
        public static let user = "Coffer-User"
        public static let date = "Coffer-Date"
        public static let nonce = "Coffer-Nonce"
        public static let signature = "Coffer-Signature"
    }

    /// How far a request's date may be from the server's clock, either way.
    public static let window: TimeInterval = 300
    static let nonceByteCount = 16

    public let userID: String
    /// ISO 8601, UTC, to the second (`2026-11-26T05:00:00Z`).
    public let date: String
    public let nonce: [UInt8]
    let signature: [UInt8]

    /// The bytes the signature covers.
    static func signedBytes(method: String, target: String, date: String, nonce: [UInt8], bodyHash: [UInt8], userID: String) -> [UInt8] {
        var out = Array("coffer.request.v1".utf8)
        for part in [Array(method.utf8), Array(target.utf8), Array(date.utf8), nonce, bodyHash, Array(userID.utf8)] {
            let n = UInt32(part.count)
            out += [UInt8(n >> 24), UInt8(n >> 16 & 0xff), UInt8(n >> 8 & 0xff), UInt8(n & 0xff)]
            out += part
        }
        return out
    }

    static func bodyHash(_ body: some ContiguousBytes) -> [UInt8] { BLAKE2b.hash(body, outputByteCount: 32) }

    static func dateFormatter() -> ISO8601DateFormatter {
        let formatter = ISO8601DateFormatter()
        formatter.formatOptions = [.withInternetDateTime]
        return formatter
    }

    /// Signs a request as the vault's user, dated `now`, with a fresh nonce from libsodium.
    public static func sign(method: String, target: String, body: some ContiguousBytes, vault: Vault, now: Date = Date()) -> RequestSignature {
        let date = dateFormatter().string(from: now)
        let nonce = SecureRandom.bytes(count: nonceByteCount)
        let userID = vault.identity.userID
        let bytes = signedBytes(method: method, target: target, date: date, nonce: nonce, bodyHash: bodyHash(body), userID: userID)
        return RequestSignature(userID: userID, date: date, nonce: nonce, signature: vault.signingKey.signature(for: bytes))
    }

    private init(userID: String, date: String, nonce: [UInt8], signature: [UInt8]) {
        self.userID = userID
        self.date = date
        self.nonce = nonce
        self.signature = signature
    }

    /// The four headers, by name.
    public var headers: [(name: String, value: String)] {
        [(Header.user, userID), (Header.date, date), (Header.nonce, Base64URL.encode(nonce)),
         (Header.signature, Base64URL.encode(signature))]
    }

    /// Reads the four headers strictly (`header` gives a header's value by name, nil when absent).
    /// - Throws: `.invalidArguments` naming the header that is missing or malformed.
    public init(header: (String) -> String?) throws {
        func value(_ name: String) throws -> String {
            guard let value = header(name) else { throw StoreError(.invalidArguments, "the request has no \(name) header; requests are signed") }
            guard value.utf8.count <= 200 else { throw StoreError(.invalidArguments, "the \(name) header is too long") }
            return value
        }
        func bytes(_ name: String, count: Int) throws -> [UInt8] {
            let text = try value(name)
            guard let decoded = Base64URL.decode(text), decoded.count == count, Base64URL.encode(decoded) == text else {
                throw StoreError(.invalidArguments, "the \(name) header must be \(count) bytes in unpadded base64url")
            }
            return decoded
        }
        let userID = try value(Header.user)
        guard UserIDs.isValid(userID) else { throw StoreError(.invalidArguments, "the \(Header.user) header must be a user id (32 lowercase hexadecimal digits)") }
        let date = try value(Header.date)
        guard let parsed = Self.dateFormatter().date(from: date), Self.dateFormatter().string(from: parsed) == date else {
            throw StoreError(.invalidArguments, "the \(Header.date) header must be an ISO 8601 time in UTC to the second (2026-01-02T03:04:05Z)")
        }
        self.init(userID: userID, date: date, nonce: try bytes(Header.nonce, count: Self.nonceByteCount),
                  signature: try bytes(Header.signature, count: 64))
    }

    /// Checks the request as the server received it: its date within ``window`` of `now`, and
    /// the signature by `signingKey`, which must be the key of ``userID``.
    /// - Throws: `.permissionFailure` saying which check failed.
    public func verify(method: String, target: String, body: some ContiguousBytes, signingKey: Ed25519.PublicKey, now: Date = Date()) throws {
        guard UserIdentity.userID(for: signingKey) == userID else {
            throw StoreError(.permissionFailure, "the key given for user \(userID) is another user's")
        }
        let dated = Self.dateFormatter().date(from: date)!
        guard abs(dated.timeIntervalSince(now)) <= Self.window else {
            throw StoreError(.permissionFailure, "the request is dated \(date), more than \(Int(Self.window / 60)) minutes from the server's clock (\(Self.dateFormatter().string(from: now))); check the clock")
        }
        let bytes = Self.signedBytes(method: method, target: target, date: date, nonce: nonce, bodyHash: Self.bodyHash(body), userID: userID)
        guard signingKey.isValidSignature(signature, for: bytes) else {
            throw StoreError(.permissionFailure, "the request's signature does not verify (its method, target, date, nonce, body or user differ from what was signed)")
        }
    }
}

import CofferCrypto
import CofferVault
import Foundation

/// The signature a client puts on each request to a Coffer server, with its Ed25519 identity
/// key, and its check on the server's side.
///
/// It covers, framed (each part after its four-byte length) under the domain
/// `coffer.request.v2`: the method, the request target (path and query exactly as sent), the
/// date, a 16-byte random nonce, the BLAKE2b-256 hash of the body, the user id, the origin the
/// client dialled (``ServerOrigin``) and the 16-byte store id the client pinned for that origin.
/// It travels in five headers (``Header``); the store id is not sent, the server signs with its
/// own. The server refuses an origin it does not serve (`coffer serve --public-url`), a date
/// more than ``window`` from its clock, a signature that does not verify under the user's
/// signing key or for its own store id, and (keeping the nonces it saw for the window, which
/// this type leaves to it) a nonce used before. So a request one server's operator captured is
/// worthless at any other server: its origin and store id differ.
///
/// ```swift
/// let signed = RequestSignature.sign(method: "POST", target: "/v1/records/modify", body: body, vault: vault,
///                                    origin: origin, storeID: pinnedStoreID)
/// for (name, value) in signed.headers { request.headers.add(name: name, value: value) }
/// // On the server:
/// let received = try RequestSignature(header: { request.headers.first(name: $0) })
/// try received.verify(method: "POST", target: "/v1/records/modify", body: body, signingKey: key,
///                     storeID: storeID, origins: publicOrigins)
/// ```
public struct RequestSignature: Sendable, Hashable {
    /// The headers that carry it.
    public enum Header {
        public static let user = "Coffer-User"
        public static let date = "Coffer-Date"
        public static let nonce = "Coffer-Nonce"
        public static let signature = "Coffer-Signature"
        public static let origin = "Coffer-Origin"
    }

    /// How far a request's date may be from the server's clock, either way.
    public static let window: TimeInterval = 300
    static let nonceByteCount = 16

    public let userID: String
    /// ISO 8601, UTC, to the second (`2026-11-26T05:00:00Z`).
    public let date: String
    public let nonce: [UInt8]
    /// The origin the client dialled, in ``ServerOrigin``'s normal form.
    public let origin: String
    let signature: [UInt8]

    /// The bytes the signature covers.
    static func signedBytes(method: String, target: String, date: String, nonce: [UInt8], bodyHash: [UInt8], userID: String,
                            origin: String, storeID: [UInt8]) -> [UInt8] {
        var out = Array("coffer.request.v2".utf8)
        for part in [Array(method.utf8), Array(target.utf8), Array(date.utf8), nonce, bodyHash, Array(userID.utf8),
                     Array(origin.utf8), storeID] {
            let n = UInt32(part.count)
            out += [UInt8(n >> 24), UInt8(n >> 16 & 0xff), UInt8(n >> 8 & 0xff), UInt8(n & 0xff)]
            out += part
        }
        return out
    }

    static func bodyHash(_ body: some ContiguousBytes) -> [UInt8] { BLAKE2b.hash(body, outputByteCount: 32) }

    /// Signs a request as the vault's user, dated `now`, with a fresh nonce from libsodium, for
    /// the server at `origin` whose store id the client pinned as `storeID`.
    public static func sign(method: String, target: String, body: some ContiguousBytes, vault: Vault,
                            origin: ServerOrigin, storeID: [UInt8], now: Date = Date()) -> RequestSignature {
        precondition(storeID.count == 16, "a store id is 16 bytes")
        let date = ISODate.formatSeconds(now)
        let nonce = SecureRandom.bytes(count: nonceByteCount)
        let userID = vault.identity.userID
        let bytes = signedBytes(method: method, target: target, date: date, nonce: nonce, bodyHash: bodyHash(body), userID: userID,
                                origin: origin.text, storeID: storeID)
        return RequestSignature(userID: userID, date: date, nonce: nonce, origin: origin.text, signature: vault.signingKey.signature(for: bytes))
    }

    private init(userID: String, date: String, nonce: [UInt8], origin: String, signature: [UInt8]) {
        self.userID = userID
        self.date = date
        self.nonce = nonce
        self.origin = origin
        self.signature = signature
    }

    /// The five headers, by name.
    public var headers: [(name: String, value: String)] {
        [(Header.user, userID), (Header.date, date), (Header.nonce, Base64URL.encode(nonce)),
         (Header.signature, Base64URL.encode(signature)), (Header.origin, origin)]
    }

    /// Reads the five headers strictly (`header` gives a header's value by name, nil when absent).
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
        guard Self.parseDate(date) != nil else {
            throw StoreError(.invalidArguments, "the \(Header.date) header must be an ISO 8601 time in UTC to the second (2026-01-02T03:04:05Z)")
        }
        let origin = try value(Header.origin)
        guard (try? ServerOrigin(origin))?.text == origin else {
            throw StoreError(.invalidArguments, "the \(Header.origin) header must be the server's origin in normal form (http://host:port[/path])")
        }
        self.init(userID: userID, date: date, nonce: try bytes(Header.nonce, count: Self.nonceByteCount), origin: origin,
                  signature: try bytes(Header.signature, count: 64))
    }

    /// The time a date header names, when it is exactly in the form signing writes
    /// (`2026-01-02T03:04:05Z`); nil otherwise.
    static func parseDate(_ text: String) -> Date? {
        guard text.utf8.count == 20, text.hasSuffix("Z"), let parsed = ISODate.parse(text), ISODate.formatSeconds(parsed) == text else { return nil }
        return parsed
    }

    /// Checks the request as the server received it: its origin one of `origins` (the server's
    /// public URLs, in normal form), its date within ``window`` of `now`, and the signature by
    /// `signingKey` (which must be the key of ``userID``) over this server's `storeID`.
    /// - Throws: `.permissionFailure` saying which check failed.
    public func verify(method: String, target: String, body: some ContiguousBytes, signingKey: Ed25519.PublicKey,
                       storeID: [UInt8], origins: Set<String>, now: Date = Date()) throws {
        guard origins.contains(origin) else {
            throw StoreError(.permissionFailure, "the request is addressed to \(origin), which this server is not (it serves \(origins.sorted().joined(separator: ", ")); its --public-url)")
        }
        guard UserIdentity.userID(for: signingKey) == userID else {
            throw StoreError(.permissionFailure, "the key given for user \(userID) is another user's")
        }
        guard let dated = Self.parseDate(date) else { throw StoreError(.invalidArguments, "the \(Header.date) header is malformed") }
        guard abs(dated.timeIntervalSince(now)) <= Self.window else {
            let offset = Int(dated.timeIntervalSince(now).rounded())
            throw StoreError(.permissionFailure, "the request is dated \(date), more than \(Int(Self.window / 60)) minutes from the server's clock (\(ISODate.formatSeconds(now))): your clock is \(abs(offset)) s \(offset > 0 ? "ahead" : "behind"); check it")
        }
        let bytes = Self.signedBytes(method: method, target: target, date: date, nonce: nonce, bodyHash: Self.bodyHash(body), userID: userID,
                                     origin: origin, storeID: storeID)
        guard signingKey.isValidSignature(signature, for: bytes) else {
            throw StoreError(.permissionFailure, "the request's signature does not verify (its method, target, date, nonce, body, user, origin or store id differ from what was signed: a request is served only by the store it was signed for)")
        }
    }
}

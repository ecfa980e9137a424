import CofferCrypto
import CofferTestSupport
import CofferStoreTestSupport
import Foundation
import Testing
@testable import CofferStore

/// Signed requests to a Coffer server: what the signature covers, the date window, and the
/// strict reading of its headers.
@Suite("Request signatures")
struct RequestSignatureTests {
    static let body = Array(#"{"operations":[]}"#.utf8)
    static let now = Date(timeIntervalSince1970: 1_790_000_000)
    static let origin = try! ServerOrigin("https://coffer.example.com")
    static let storeID = [UInt8](repeating: 7, count: 16)
    static let origins: Set<String> = [origin.text]

    /// The headers of `signature` as a server reads them, with `change` applied.
    static func received(_ signature: RequestSignature, change: (inout [String: String]) -> Void = { _ in }) throws -> RequestSignature {
        var headers = Dictionary(uniqueKeysWithValues: signature.headers.map { ($0.name, $0.value) })
        change(&headers)
        return try RequestSignature(header: { headers[$0] })
    }

    @Test("a signed request verifies as sent; a changed method, target, body, date, nonce or user, or another key, does not")
    func coverage() throws {
        try withTemporaryFolder { folder in
            let alice = try makeVault(in: folder)
            let mallory = try makeVault(in: folder, file: "mallory.coffer", name: "Mallory", email: "mallory@example.com")
            let key = alice.identity.signingKey
            let signed = RequestSignature.sign(method: "POST", target: "/records/modify?zone=a", body: Self.body, vault: alice, origin: Self.origin, storeID: Self.storeID, now: Self.now)
            #expect(signed.userID == alice.identity.userID && signed.nonce.count == 16)
            let got = try Self.received(signed)
            #expect(got == signed)
            try got.verify(method: "POST", target: "/records/modify?zone=a", body: Self.body, signingKey: key, storeID: Self.storeID, origins: Self.origins, now: Self.now)

            func refused(_ what: String, _ body: () throws -> Void) {
                do {
                    try body()
                    Issue.record("\(what): accepted")
                } catch let e as StoreError {
                    #expect(e.code == .permissionFailure, "\(what): \(e.code) \(e.message)")
                } catch {
                    Issue.record("\(what): \(error)")
                }
            }
            refused("method") { try got.verify(method: "GET", target: "/records/modify?zone=a", body: Self.body, signingKey: key, storeID: Self.storeID, origins: Self.origins, now: Self.now) }
            refused("target") { try got.verify(method: "POST", target: "/records/modify?zone=b", body: Self.body, signingKey: key, storeID: Self.storeID, origins: Self.origins, now: Self.now) }
            refused("body") { try got.verify(method: "POST", target: "/records/modify?zone=a", body: Self.body + [0x20], signingKey: key, storeID: Self.storeID, origins: Self.origins, now: Self.now) }
            let otherDate = try Self.received(signed) { $0[RequestSignature.Header.date] = "2026-09-21T13:53:21Z" }
            refused("date") { try otherDate.verify(method: "POST", target: "/records/modify?zone=a", body: Self.body, signingKey: key, storeID: Self.storeID, origins: Self.origins, now: Self.now) }
            let otherNonce = try Self.received(signed) { $0[RequestSignature.Header.nonce] = Base64URL.encode(SecureRandom.bytes(count: 16)) }
            refused("nonce") { try otherNonce.verify(method: "POST", target: "/records/modify?zone=a", body: Self.body, signingKey: key, storeID: Self.storeID, origins: Self.origins, now: Self.now) }
            let otherUser = try Self.received(signed) { $0[RequestSignature.Header.user] = mallory.identity.userID }
            refused("user") { try otherUser.verify(method: "POST", target: "/records/modify?zone=a", body: Self.body, signingKey: key, storeID: Self.storeID, origins: Self.origins, now: Self.now) }
            refused("user, with their key") {
                try otherUser.verify(method: "POST", target: "/records/modify?zone=a", body: Self.body, signingKey: mallory.identity.signingKey, storeID: Self.storeID, origins: Self.origins, now: Self.now)
            }
            // Mallory signs as herself and claims Alice's id: refused, the key is not Alice's.
            let claimed = RequestSignature.sign(method: "POST", target: "/records/modify?zone=a", body: Self.body, vault: mallory, origin: Self.origin, storeID: Self.storeID, now: Self.now)
            let asAlice = try Self.received(claimed) { $0[RequestSignature.Header.user] = alice.identity.userID }
            refused("claimed user") { try asAlice.verify(method: "POST", target: "/records/modify?zone=a", body: Self.body, signingKey: key, storeID: Self.storeID, origins: Self.origins, now: Self.now) }
            // Another server: its store id, or its origin, is not the one signed for.
            refused("store id") {
                try got.verify(method: "POST", target: "/records/modify?zone=a", body: Self.body, signingKey: key, storeID: [UInt8](repeating: 8, count: 16),
                               origins: Self.origins, now: Self.now)
            }
            refused("origin not served") {
                try got.verify(method: "POST", target: "/records/modify?zone=a", body: Self.body, signingKey: key, storeID: Self.storeID,
                               origins: ["https://other.example.com:443"], now: Self.now)
            }
            let otherOrigin = try Self.received(signed) { $0[RequestSignature.Header.origin] = "https://other.example.com:443" }
            refused("origin") {
                try otherOrigin.verify(method: "POST", target: "/records/modify?zone=a", body: Self.body, signingKey: key, storeID: Self.storeID,
                                       origins: Self.origins.union(["https://other.example.com:443"]), now: Self.now)
            }
        }
    }

    @Test("a date more than five minutes from the server's clock is refused, either way", arguments: [-301.0, -299.0, 299.0, 301.0])
    func window(offset: TimeInterval) throws {
        try withTemporaryFolder { folder in
            let alice = try makeVault(in: folder)
            let signed = RequestSignature.sign(method: "GET", target: "/zones", body: [UInt8](), vault: alice, origin: Self.origin, storeID: Self.storeID, now: Self.now.addingTimeInterval(offset))
            let check = { try Self.received(signed).verify(method: "GET", target: "/zones", body: [UInt8](), signingKey: alice.identity.signingKey, storeID: Self.storeID, origins: Self.origins, now: Self.now) }
            if abs(offset) <= RequestSignature.window {
                try check()
            } else {
                #expect(throws: StoreError.self) { try check() }
            }
        }
    }

    @Test("headers missing or malformed are refused, naming the header", arguments: [
        (RequestSignature.Header.user, nil), (RequestSignature.Header.user, "ALICE"), (RequestSignature.Header.date, "yesterday"),
        (RequestSignature.Header.date, "2026-11-26T05:00:00.5Z"), (RequestSignature.Header.date, "2026-11-26T07:00:00+02:00"),
        (RequestSignature.Header.nonce, "AAAA"), (RequestSignature.Header.nonce, "AAAAAAAAAAAAAAAAAAAAAA=="), (RequestSignature.Header.nonce, nil),
        (RequestSignature.Header.signature, "not base64!"), (RequestSignature.Header.signature, String(repeating: "A", count: 300)),
        (RequestSignature.Header.origin, nil), (RequestSignature.Header.origin, "https://coffer.example.com"),
        (RequestSignature.Header.origin, "HTTPS://coffer.example.com:443"), (RequestSignature.Header.origin, "ftp://coffer.example.com:21"),
    ] as [(String, String?)])
    func malformed(header: String, value: String?) throws {
        try withTemporaryFolder { folder in
            let signed = RequestSignature.sign(method: "GET", target: "/zones", body: [UInt8](), vault: try makeVault(in: folder), origin: Self.origin, storeID: Self.storeID, now: Self.now)
            do {
                _ = try Self.received(signed) { $0[header] = value }
                Issue.record("accepted \(header): \(value ?? "none")")
            } catch let e as StoreError {
                #expect(e.code == .invalidArguments && e.message.contains(header), "\(e.message)")
            }
        }
    }
}

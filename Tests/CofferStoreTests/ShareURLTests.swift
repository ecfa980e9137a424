import CofferCrypto
import CofferStoreTestSupport
import Foundation
import Testing
@testable import CofferStore

/// The share URL, version 1: `coffer://share/v1/<store id>/<share uid>[#<link secret>]`.
@Suite("Share URLs")
struct ShareURLTests {
    static let store = "00112233445566778899aabbccddeeff"
    static let share = "0123456789abcdef0123456789abcdef"
    static let base = "coffer://share/v1/\(store)/\(share)"
    /// 32 bytes 0, 1, ..., 31 in unpadded base64url.
    static let secret = "AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8"

    @Test func aURLWithoutFragmentRoundTrips() throws {
        let url = try ShareURL(string: Self.base)
        #expect(url.string == Self.base)
        #expect(url.storeID == Hex.decode(Self.store))
        #expect(url.shareUID == Hex.decode(Self.share))
        #expect(url.linkSecret == nil)
        #expect(url.description == Self.base)
    }

    @Test func aURLWithALinkSecretRoundTripsAndHidesItInItsDescription() throws {
        #expect(Base64URL.encode(Array(0..<32)) == Self.secret)
        let text = Self.base + "#" + Self.secret
        let url = try ShareURL(string: text)
        #expect(url.string == text)
        let secret = try #require(url.linkSecret)
        #expect(secret.unsafeCopiedBytes() == Array(0..<32))
        #expect(url.description == Self.base + "#<link secret>")
        #expect(!"\(url)".contains(Self.secret))
        #expect(try ShareURL(string: url.string) == url)
    }

    @Test(arguments: TestBackend.all) func theURLsOfRealSharesRoundTrip(_ backend: TestBackend) async throws {
        try await withStore(backend) { f in
            let zone = try await f.makeZone("Family")
            let closed = try await f.alice.share(zone: zone, title: "t")
            let parsed = try ShareURL(string: closed.url)
            #expect(parsed.string == closed.url)
            #expect(parsed.storeID == f.store.storeID)
            #expect(parsed.shareUID == (try await f.shareUID(zone)))
            #expect(parsed.linkSecret == nil)

            let open = try await f.alice.setPublicPermission(.readWrite, in: zone)
            let parsedOpen = try ShareURL(string: open.url)
            #expect(parsedOpen.string == open.url)
            #expect(parsedOpen.shareUID == parsed.shareUID)
            #expect(parsedOpen.linkSecret?.count == 32)
            let fragment = try #require(open.url.split(separator: "#").last)
            #expect(fragment.count == 43)
            #expect(open.url.count == closed.url.count + 44)
        }
    }

    static let rejected: [(String, String)] = [
        ("https://share/v1/\(store)/\(share)", "another scheme"),
        ("http://share/v1/\(store)/\(share)", "another scheme"),
        ("coffer://shares/v1/\(store)/\(share)", "another host"),
        ("COFFER://share/v1/\(store)/\(share)", "an upper-case scheme"),
        ("coffer://share/v2/\(store)/\(share)", "version 2"),
        ("coffer://share/v0/\(store)/\(share)", "version 0"),
        ("coffer://share/\(store)/\(share)", "no version"),
        ("coffer://share/v1/\(store)", "no share uid"),
        ("coffer://share/v1/\(store)/\(share)/extra", "an extra part"),
        ("coffer://share/v1/\(store)/\(share)/", "a trailing slash"),
        ("coffer://share/v1/\(store.uppercased())/\(share)", "upper-case store id"),
        ("coffer://share/v1/\(store)/\(share.uppercased())", "upper-case share uid"),
        ("coffer://share/v1/\(store)/0123456789ABCDEF0123456789abcdef", "partly upper-case share uid"),
        ("coffer://share/v1/zz112233445566778899aabbccddeeff/\(share)", "bad hex"),
        ("coffer://share/v1/\(store)/0123456789abcdef0123456789abcdeg", "bad hex at the end"),
        ("coffer://share/v1/\(store.dropLast(2))/\(share)", "a 15-byte store id"),
        ("coffer://share/v1/\(store)aa/\(share)", "a 17-byte store id"),
        ("coffer://share/v1/\(store)/\(share.dropLast())", "an odd number of hex digits"),
        ("coffer://share/v1/\(store)/\(share)aa", "a 17-byte share uid"),
        ("coffer://share/v1/\(store)/\(share)#\(secret)=", "a padded secret"),
        ("coffer://share/v1/\(store)/\(share)#\(secret)==", "a doubly padded secret"),
        ("coffer://share/v1/\(store)/\(share)#\(secret.dropLast())", "a 42-character secret"),
        ("coffer://share/v1/\(store)/\(share)#\(secret)A", "a 44-character secret"),
        ("coffer://share/v1/\(store)/\(share)#\(secret)AAAA", "a 35-byte secret"),
        ("coffer://share/v1/\(store)/\(share)#\(secret.dropLast())9", "a non-canonical last character"),
        ("coffer://share/v1/\(store)/\(share)#\(secret.dropLast())+", "standard base64 '+'"),
        ("coffer://share/v1/\(store)/\(share)#\(secret.dropLast())/", "standard base64 '/'"),
        ("coffer://share/v1/\(store)/\(share)#", "an empty fragment"),
        ("coffer://share/v1/\(store)/\(share)#\(secret) ", "a trailing space"),
        (" coffer://share/v1/\(store)/\(share)", "a leading space"),
        ("coffer://share/v1/\(store)/\(share)#\(secret)#\(secret)", "two fragments"),
        ("coffer://share/v1/\(store)/\(share)#" + String(repeating: "A", count: 200), "longer than 200 characters"),
        ("", "empty"),
    ]

    @Test(arguments: rejected)
    func theParserRefuses(_ text: String, _ why: String) {
        let error = expectStoreErrorSync(.invalidArguments, Comment(rawValue: why)) { try ShareURL(string: text) }
        #expect(error?.message.hasPrefix("not a Coffer share URL") == true, "\(why): \(error?.message ?? "")")
    }

    @Test func version2IsNamedInTheError() {
        let error = expectStoreErrorSync(.invalidArguments) { try ShareURL(string: "coffer://share/v2/\(Self.store)/\(Self.share)") }
        #expect(error?.message.contains("unsupported version 'v2'") == true)
    }

    @Test func theErrorNeverEchoesTheSecret() {
        let text = Self.base + "#" + Self.secret + "="
        let error = expectStoreErrorSync(.invalidArguments) { try ShareURL(string: text) }
        #expect(error?.message.contains(Self.secret) == false)
    }

    @Test(arguments: TestBackend.all) func acceptingAMalformedURLIsInvalidArguments(_ backend: TestBackend) async throws {
        try await withStore(backend) { f in
            let zone = try await f.makeZone("Family")
            let share = try await f.alice.share(zone: zone, title: "t")
            let bob = try await f.user("Bob", "bob@example.com")
            await expectStoreError(.invalidArguments) { try await bob.acceptShare(url: share.url.replacingOccurrences(of: "/v1/", with: "/v2/")) }
            await expectStoreError(.invalidArguments) { try await bob.acceptShare(url: share.url.uppercased()) }
        }
    }
}

import CofferCrypto
import CofferStore
import CofferTestSupport
import CofferVault
import Foundation
import HTTPTypes
import Hummingbird
import HummingbirdTesting
import Logging
import NIOCore
import Testing
@testable import CofferServer

/// The server's routes, middleware and error answers, in process: the router of `coffer serve`
/// over an SQLite store, driven through HummingbirdTesting.
@Suite struct RouterTests {
    static let origin = "http://coffer.test:8080"

    /// A server's router over a new store in a temporary folder, with a user's vault (made but
    /// not yet known to the server), for `body`.
    func withRouter(_ body: @escaping @Sendable (any TestClientProtocol, StorageHost, Vault) async throws -> Void) async throws {
        try await withTemporaryFolder { folder in
            let logger = Logger(label: "coffer.server.tests")
            let host = try await StorageHost.open(folder.appendingPathComponent("server.sqlite").path, logger: logger)
            let vault = try Vault.create(at: folder.appendingPathComponent("alice.coffer"), name: "Alice", email: "alice@example.com",
                                         passphrase: secure("router-tests-passphrase"), kdf: .min)
            do {
                let app = Application(router: CofferServer.router(host, origins: Locked([Self.origin]), logger: logger))
                try await app.test(.router) { client in try await body(client, host, vault) }
            } catch {
                await host.close()
                throw error
            }
            await host.close()
        }
    }

    /// The five signature headers of a request `vault`'s user signs for `origin`.
    func signed(_ vault: Vault, _ method: HTTPRequest.Method, _ target: String, body: Data = Data(), host: StorageHost,
                origin: String = Self.origin) throws -> HTTPFields {
        let signature = RequestSignature.sign(method: method.rawValue, target: target, body: body, vault: vault,
                                              origin: try ServerOrigin(origin), storeID: host.storeID)
        var fields = HTTPFields()
        for (name, value) in signature.headers { fields[HTTPField.Name(name)!] = value }
        return fields
    }

    func publish(_ vault: Vault, as signer: Vault? = nil, _ client: any TestClientProtocol, _ host: StorageHost) async throws -> TestResponse {
        let body = try RemoteAPI.encoder.encode(RemoteAPI.Publish(card: ContactCard(vault: vault).jsonData()))
        return try await client.execute(uri: RemoteAPI.Path.publish, method: .post,
                                        headers: try signed(signer ?? vault, .post, RemoteAPI.Path.publish, body: body, host: host),
                                        body: ByteBuffer(bytes: body))
    }

    func failure(_ response: TestResponse) throws -> RemoteAPI.Failure {
        #expect(response.headers[.contentType] == "application/json")
        return try JSONDecoder().decode(RemoteAPI.Failure.self, from: Data(response.body.readableBytesView))
    }

    @Test func unsignedRoutesAnswer() async throws {
        try await withRouter { client, host, _ in
            let health = try await client.execute(uri: RemoteAPI.Path.health, method: .get)
            #expect(health.status == .ok)
            #expect(String(buffer: health.body) == #"{"ok":true}"#)
            let info = try await client.execute(uri: RemoteAPI.Path.info, method: .get)
            #expect(info.status == .ok)
            let decoded = try JSONDecoder().decode(RemoteAPI.Info.self, from: Data(info.body.readableBytesView))
            #expect(Array(decoded.storeID) == host.storeID)
            #expect(decoded.api == RemoteAPI.version)
        }
    }

    @Test func aUserBecomesKnownByPublishingTheirOwnCard() async throws {
        try await withRouter { client, host, alice in
            let wait = RemoteAPI.Path.wait + "?after=0&timeout=0"
            let before = try await client.execute(uri: wait, method: .get, headers: try signed(alice, .get, wait, host: host))
            #expect(before.status == .unauthorized)
            #expect(try failure(before).message.contains("not known to this server"))
            #expect(try await publish(alice, client, host).status == .ok)
            let after = try await client.execute(uri: wait, method: .get, headers: try signed(alice, .get, wait, host: host))
            #expect(after.status == .ok)
            _ = try JSONDecoder().decode(RemoteAPI.WaitResponse.self, from: Data(after.body.readableBytesView))
            #expect(try await host.signingKey(of: alice.identity.userID) == alice.identity.signingKey)
        }
    }

    @Test func aCardSignedByAnotherUserIsRefused() async throws {
        try await withRouter { client, host, alice in
            let mallory = try Vault.create(at: URL(fileURLWithPath: NSTemporaryDirectory()).appendingPathComponent("m-\(UUID().uuidString).coffer"),
                                           name: "Mallory", passphrase: secure("router-tests-passphrase"), kdf: .min)
            defer { try? FileManager.default.removeItem(at: mallory.url) }
            let response = try await publish(alice, as: mallory, client, host)
            #expect(response.status == .unauthorized)
            #expect(try failure(response).message == "a user publishes only their own card")
            #expect(try await host.signingKey(of: alice.identity.userID) == nil, "the card was not stored")
        }
    }

    @Test func aReplayedOrAlteredRequestReachesNoHandler() async throws {
        try await withRouter { client, host, alice in
            #expect(try await publish(alice, client, host).status == .ok)
            let ask = Data("{}".utf8)
            let headers = try signed(alice, .post, RemoteAPI.Path.stage, body: ask, host: host)
            let first = try await client.execute(uri: RemoteAPI.Path.stage, method: .post, headers: headers, body: ByteBuffer(bytes: ask))
            #expect(first.status == .ok)
            let stage = try JSONDecoder().decode(RemoteAPI.StageResponse.self, from: Data(first.body.readableBytesView))
            #expect(stage.parts.isEmpty && !stage.applied)
            let again = try await client.execute(uri: RemoteAPI.Path.stage, method: .post, headers: headers, body: ByteBuffer(bytes: ask))
            #expect(again.status == .unauthorized)
            #expect(try failure(again).message.contains("nonce was used before"))
            // A body the signature does not cover (a part put in the stage on Alice's behalf).
            let other = Data(#"{"part":0,"writes":[]}"#.utf8)
            let altered = try await client.execute(uri: RemoteAPI.Path.stage, method: .post,
                                                   headers: try signed(alice, .post, RemoteAPI.Path.stage, body: ask, host: host),
                                                   body: ByteBuffer(bytes: other))
            #expect(altered.status == .unauthorized)
            // Signed for another server's origin.
            let elsewhere = try await client.execute(uri: RemoteAPI.Path.stage, method: .post,
                                                     headers: try signed(alice, .post, RemoteAPI.Path.stage, body: ask, host: host,
                                                                         origin: "http://other.test:8080"),
                                                     body: ByteBuffer(bytes: ask))
            #expect(elsewhere.status == .unauthorized)
            // No signature at all.
            let bare = try await client.execute(uri: RemoteAPI.Path.stage, method: .post, body: ByteBuffer(bytes: ask))
            #expect(bare.status == .unauthorized)
            #expect(try failure(bare).code == "invalidArguments")
        }
    }

    @Test func errorsAreJSONWithTheirStatus() async throws {
        try await withRouter { client, host, alice in
            #expect(try await publish(alice, client, host).status == .ok)
            // A method the path does not take: 405 naming the one it does.
            let method = try await client.execute(uri: RemoteAPI.Path.read, method: .get)
            #expect(method.status == .methodNotAllowed)
            #expect(method.headers[.allow] == "POST")
            #expect(try failure(method).code == "methodNotAllowed")
            // A path the server does not have.
            let missing = try await client.execute(uri: "/v1/nothing", method: .get)
            #expect(missing.status == .notFound)
            #expect(try failure(missing).code == "notFound")
            // A malformed request, signed: 400, and the stage holds nothing.
            let bad = Data(#"{"part":0}"#.utf8)
            let malformed = try await client.execute(uri: RemoteAPI.Path.stage, method: .post,
                                                     headers: try signed(alice, .post, RemoteAPI.Path.stage, body: bad, host: host),
                                                     body: ByteBuffer(bytes: bad))
            #expect(malformed.status == .badRequest)
            #expect(try failure(malformed).code == "invalidArguments")
            // A wait without its query.
            let wait = RemoteAPI.Path.wait + "?after=0"
            let unbounded = try await client.execute(uri: wait, method: .get, headers: try signed(alice, .get, wait, host: host))
            #expect(unbounded.status == .badRequest)
            #expect(try failure(unbounded).message.contains("timeout=MS"))
            // A body over the limit never reaches the signature check.
            let huge = Data(repeating: 0x20, count: RemoteAPI.maxBody + 1)
            let over = try await client.execute(uri: RemoteAPI.Path.stage, method: .post,
                                                headers: try signed(alice, .post, RemoteAPI.Path.stage, body: huge, host: host),
                                                body: ByteBuffer(bytes: huge))
            #expect(over.status == .badRequest)
            #expect(try failure(over).code == "limitExceeded")
        }
    }
}

import CofferCrypto
import CofferStore
import CofferVault
import Foundation
import HTTPTypes
import Hummingbird
import NIOCore

/// The middleware in front of every signed route: it reads the request's body within its
/// limits (at most ``RemoteAPI/maxBody``, arrived within ``CofferServer/bodyTimeout``), checks
/// the signature (``RequestSignature``) against the origins the server serves and its store's
/// id, notes the nonce (a replay is refused), and puts the user and the body in the context.
/// A request that fails any of these is answered 401 and reaches no handler.
struct SignatureAuthenticator: RouterMiddleware {
    typealias Context = ServerRequestContext

    /// Where the signer's key comes from.
    enum Keys: Sendable {
        /// The card the store holds of the user (every route but publishing a card).
        case stored
        /// The card the body publishes, which must be the signer's own.
        case published
    }

    let host: StorageHost
    let origins: Locked<Set<String>>
    let keys: Keys

    func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws -> Response {
        var context = context
        context.body = try await Self.collectBody(request)
        (context.userID, context.publishedCard) = try await authenticate(request, body: context.body)
        return try await next(request, context)
    }

    /// The body, at most ``RemoteAPI/maxBody``, arrived within ``CofferServer/bodyTimeout``.
    static func collectBody(_ request: Request) async throws -> Data {
        let collected = try await withThrowingTaskGroup(of: ByteBuffer?.self) { group in
            group.addTask {
                var request = request
                do { return try await request.collectBody(upTo: RemoteAPI.maxBody) } catch is CancellationError {
                    return nil
                } catch {
                    throw StoreError(.limitExceeded, "the request body is over \(RemoteAPI.maxBody / (1024 * 1024)) MiB")
                }
            }
            group.addTask {
                try await Task.sleep(for: CofferServer.bodyTimeout)
                return nil
            }
            defer { group.cancelAll() }
            guard let first = try await group.next(), let buffer = first else {
                throw StoreError(.invalidArguments, "the request body did not arrive within \(CofferServer.bodyTimeout.components.seconds) s")
            }
            return buffer
        }
        return Data(collected.readableBytesView)
    }

    /// The request's user, once its origin, signature, date and nonce pass, and with
    /// ``Keys/published`` the card it publishes (verified once, here).
    /// - Throws: a 401 ``ServerError`` naming what failed.
    func authenticate(_ request: Request, body: Data) async throws -> (userID: String, card: ContactCard?) {
        do {
            let signature = try RequestSignature { name in HTTPField.Name(name).flatMap { request.headers[$0] } }
            let key: Ed25519.PublicKey
            var card: ContactCard?
            switch keys {
            case .published:
                let published = try StorageHost.publishedCard(body)
                guard published.identity.userID == signature.userID else {
                    throw StoreError(.permissionFailure, "a user publishes only their own card")
                }
                key = published.identity.signingKey
                card = published
            case .stored:
                guard let known = try await host.signingKey(of: signature.userID) else {
                    throw StoreError(.permissionFailure, "user \(signature.userID) is not known to this server: a user becomes known by publishing their card")
                }
                key = known
            }
            try signature.verify(method: request.method.rawValue, target: request.uri.string, body: body, signingKey: key,
                                 storeID: host.storeID, origins: origins.withLock { $0 })
            guard try await host.noteNonce(signature.nonce, userID: signature.userID) else {
                throw StoreError(.permissionFailure, "the request's nonce was used before: a request is served once")
            }
            return (signature.userID, card)
        } catch let error as StoreError where error.code == .permissionFailure || error.code == .invalidArguments {
            throw ServerError.unauthenticated(error)
        }
    }
}

import CofferCrypto
import CofferStore
import Foundation
import HTTPTypes
import Hummingbird
import Logging
import NIOCore

/// `coffer serve`: a Coffer sync server over a local store (an SQLite file or PostgreSQL), on
/// Hummingbird, run under swift-service-lifecycle (SIGTERM and SIGINT stop it gracefully: the
/// requests in flight finish, and each batch is one transaction of the store, applied whole or
/// not at all).
///
/// It holds no vault and no zone key. Every request but `GET /v1/health` is signed by its
/// user's identity key (``RequestSignature``); the server refuses a request dated more than
/// five minutes off, a nonce it saw before (kept in the store, so every instance on one
/// PostgreSQL database sees it), a user whose card it does not have, and a body over 4 MiB.
/// What each request may read and write is ``StorageHost``'s to check. The API is described in
/// `Docs/openapi.yaml`.
package enum CofferServer {
    /// Serves `store` on `host:port` until SIGTERM or SIGINT. `ready` is called with the port
    /// once the server listens (the one the system chose, for port 0).
    package static func run(host: String, port: Int, store location: String, logger: Logger,
                            ready: @escaping @Sendable (Int) async -> Void) async throws {
        let storage = try await StorageHost.open(location, logger: logger)
        let router = Router()
        routes(router, storage, logger: logger)
        let app = Application(
            router: router,
            configuration: .init(address: .hostname(host, port: port), serverName: "coffer"),
            onServerRunning: { channel in await ready(channel.localAddress?.port ?? port) },
            logger: logger)
        do {
            try await app.runService()
        } catch {
            await storage.close()
            throw error
        }
        await storage.close()
        logger.info("server stopped")
    }

    static func routes(_ router: Router<BasicRequestContext>, _ host: StorageHost, logger: Logger) {
        router.get(RouterPath(RemoteAPI.Path.health)) { _, _ in
            json(Data(#"{"ok":true}"#.utf8))
        }
        router.get(RouterPath(RemoteAPI.Path.info)) { request, _ in
            await serve(request, host, logger) { _, _ in
                try RemoteAPI.encoder.encode(RemoteAPI.Info(storeID: Data(host.storeID), api: RemoteAPI.version))
            }
        }
        router.post(RouterPath(RemoteAPI.Path.publish)) { request, _ in
            await serve(request, host, logger, publishing: true) { body, user in
                try await host.publish(body, signedBy: user)
                return Data("{}".utf8)
            }
        }
        router.post(RouterPath(RemoteAPI.Path.read)) { request, _ in
            await serve(request, host, logger) { body, user in try await host.read(body, userID: user) }
        }
        router.post(RouterPath(RemoteAPI.Path.modify)) { request, _ in
            await serve(request, host, logger) { body, user in try await host.modify(body, userID: user) }
        }
        router.get(RouterPath(RemoteAPI.Path.wait)) { request, _ in
            await serve(request, host, logger) { _, _ in
                let query = request.uri.queryParameters
                guard let after = query["after"].flatMap({ Int64($0) }), let millis = query["timeout"].flatMap({ Int($0) }),
                      (0...60_000).contains(millis) else {
                    throw StoreError(.invalidArguments, "changes/wait takes after=N and timeout=MS (at most 60000)")
                }
                return try await host.wait(after: after, timeout: .milliseconds(millis))
            }
        }
        // A method a known path does not take: a JSON 405 naming the one it does (the router
        // alone would answer 404, as for a path it does not have).
        let declared: [(String, HTTPRequest.Method)] = [
            (RemoteAPI.Path.health, .get), (RemoteAPI.Path.info, .get), (RemoteAPI.Path.publish, .post),
            (RemoteAPI.Path.read, .post), (RemoteAPI.Path.modify, .post), (RemoteAPI.Path.wait, .get),
        ]
        for (path, method) in declared {
            for other in [HTTPRequest.Method.get, .post, .put, .delete, .patch, .options] where other != method {
                router.on(RouterPath(path), method: other) { _, _ in
                    var response = json(encode(RemoteAPI.Failure(code: "methodNotAllowed", message: "\(path) takes \(method.rawValue) only")),
                                        status: .methodNotAllowed)
                    response.headers[.allow] = method.rawValue
                    return response
                }
            }
        }
    }

    /// A request that fails authentication (answered 401).
    struct Unauthenticated: Error {
        let error: StoreError
    }

    /// Reads a request's body (at most ``RemoteAPI/maxBody``), checks its signature and nonce,
    /// runs `work` as its user and answers with what it returns, or with the error as JSON.
    static func serve(_ request: Request, _ host: StorageHost, _ logger: Logger, publishing: Bool = false,
                      _ work: (Data, String) async throws -> Data) async -> Response {
        var request = request
        let target = request.uri.string
        do {
            let buffer: ByteBuffer
            do { buffer = try await request.collectBody(upTo: RemoteAPI.maxBody) } catch {
                throw StoreError(.limitExceeded, "the request body is over \(RemoteAPI.maxBody / (1024 * 1024)) MiB")
            }
            let body = Data(buffer.readableBytesView)
            let user = try await authenticate(request, target: target, body: body, host, publishing: publishing)
            let answer = try await work(body, user)
            logger.debug("served", metadata: ["method": "\(request.method)", "path": "\(request.uri.path)", "user": "\(user)"])
            return json(answer)
        } catch let failure as Unauthenticated {
            logger.info("refused", metadata: ["path": "\(request.uri.path)", "why": "\(failure.error.message)"])
            return json(failure.error, status: .unauthorized)
        } catch is StorageHost.Conflict {
            return json(encode(RemoteAPI.Failure(code: "conflict", message: "another writer changed the zone first; read again")), status: .conflict)
        } catch let error as StoreError {
            logger.debug("failed", metadata: ["path": "\(request.uri.path)", "code": "\(RemoteAPI.name(error.code))"])
            return json(error, status: HTTPResponse.Status(code: RemoteAPI.status(error.code)))
        } catch {
            logger.error("request failed", metadata: ["path": "\(request.uri.path)", "error": "\(type(of: error))"])
            return json(StoreError(.internalError, "the server failed"), status: .internalServerError)
        }
    }

    /// The request's user, once its signature, date and nonce pass.
    static func authenticate(_ request: Request, target: String, body: Data, _ host: StorageHost, publishing: Bool) async throws -> String {
        do {
            let signature = try RequestSignature { name in HTTPField.Name(name).flatMap { request.headers[$0] } }
            let key: Ed25519.PublicKey
            if publishing {
                let published = try StorageHost.publishedKey(body)
                guard published.userID == signature.userID else {
                    throw StoreError(.permissionFailure, "a user publishes only their own card")
                }
                key = published.key
            } else {
                guard let known = try await host.signingKey(of: signature.userID) else {
                    throw StoreError(.permissionFailure, "user \(signature.userID) is not known to this server: a user becomes known by publishing their card")
                }
                key = known
            }
            try signature.verify(method: request.method.rawValue, target: target, body: body, signingKey: key)
            guard try await host.noteNonce(signature.nonce, userID: signature.userID) else {
                throw StoreError(.permissionFailure, "the request's nonce was used before: a request is served once")
            }
            return signature.userID
        } catch let error as StoreError where error.code == .permissionFailure || error.code == .invalidArguments {
            throw Unauthenticated(error: error)
        }
    }

    static func json(_ data: Data, status: HTTPResponse.Status = .ok) -> Response {
        Response(status: status, headers: [.contentType: "application/json"], body: ResponseBody(byteBuffer: ByteBuffer(bytes: data)))
    }

    static func json(_ error: StoreError, status: HTTPResponse.Status) -> Response {
        json(encode(RemoteAPI.Failure(code: RemoteAPI.name(error.code), message: error.message)), status: status)
    }

    static func encode(_ failure: RemoteAPI.Failure) -> Data {
        (try? RemoteAPI.encoder.encode(failure)) ?? Data(#"{"code":"internalError","message":"the server failed"}"#.utf8)
    }
}

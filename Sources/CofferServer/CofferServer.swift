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
/// It holds no vault and no zone key. Every request but `GET /v1/health` and `GET /v1/store` is
/// signed by its user's identity key (``RequestSignature``) for one of the server's public
/// origins and its store id; the server refuses a request addressed to another origin or
/// signed for another store, dated more than five minutes off, a nonce it saw before (kept in
/// the store, so every instance on one PostgreSQL database sees it), a user whose card it does
/// not have, and a body over 4 MiB. Idle connections close after ``idleTimeout``, and a request
/// whose body does not arrive within ``bodyTimeout`` is refused.
/// What each request may read and write is ``StorageHost``'s to check. The API is described in
/// `Docs/openapi.yaml`.
package enum CofferServer {
    /// How long a connection may stay open with no request in it.
    package static let idleTimeout: TimeAmount = .seconds(30)
    /// How long a request's body may take to arrive.
    package static let bodyTimeout: Duration = .seconds(30)

    /// Serves `store` on `host:port` until SIGTERM or SIGINT. `publicURLs` are the origins
    /// clients dial (every request's signature names one), besides `http://HOST:PORT` of the
    /// address it listens on. `ready` is called with the port once the server listens (the one
    /// the system chose, for port 0) and the origins it serves.
    package static func run(host: String, port: Int, store location: String, publicURLs: [ServerOrigin] = [], logger: Logger,
                            ready: @escaping @Sendable (Int, [ServerOrigin]) async -> Void) async throws {
        raiseOpenFileLimit(logger: logger)
        let storage = try await StorageHost.open(location, logger: logger)
        let router = Router()
        let origins = Locked<Set<String>>(Set(publicURLs.map(\.text)))
        routes(router, storage, origins: origins, logger: logger)
        let app = Application(
            router: router,
            server: .http1(configuration: .init(idleTimeout: idleTimeout)),
            configuration: .init(address: .hostname(host, port: port), serverName: "coffer"),
            onServerRunning: { channel in
                let bound = channel.localAddress?.port ?? port
                // The address it listens on is always one of its own.
                var served = publicURLs
                if let own = try? ServerOrigin("http://\(host.contains(":") ? "[\(host)]" : host):\(bound)"), !served.contains(own) {
                    served.append(own)
                }
                origins.withLock { $0 = Set(served.map(\.text)) }
                await ready(bound, served)
            },
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

    /// Raises the soft limit on open files to the hard limit, so that many idle connections do
    /// not keep new ones (health checks included) from being accepted.
    static func raiseOpenFileLimit(logger: Logger) {
        var limit = rlimit()
        guard getrlimit(Int32(RLIMIT_NOFILE.rawValue), &limit) == 0, limit.rlim_cur < limit.rlim_max else { return }
        let before = limit.rlim_cur
        limit.rlim_cur = limit.rlim_max
        if setrlimit(Int32(RLIMIT_NOFILE.rawValue), &limit) == 0 {
            logger.debug("open-file limit raised", metadata: ["from": "\(before)", "to": "\(limit.rlim_max)"])
        }
    }

    static func routes(_ router: Router<BasicRequestContext>, _ host: StorageHost, origins: Locked<Set<String>>, logger: Logger) {
        let guardian = Gate(host: host, origins: origins, logger: logger)
        router.get(RouterPath(RemoteAPI.Path.health)) { _, _ in
            json(Data(#"{"ok":true}"#.utf8))
        }
        // Unsigned: a client learns the store id here at first contact, pins it to the origin it
        // dialled, and signs every later request for it.
        router.get(RouterPath(RemoteAPI.Path.info)) { _, _ in
            let info = RemoteAPI.Info(storeID: Data(host.storeID), api: RemoteAPI.version)
            return json((try? RemoteAPI.encoder.encode(info)) ?? Data())
        }
        router.post(RouterPath(RemoteAPI.Path.publish)) { request, _ in
            await guardian.serve(request, publishing: true) { body, user in
                try await host.publish(body, signedBy: user)
                return Data("{}".utf8)
            }
        }
        router.post(RouterPath(RemoteAPI.Path.read)) { request, _ in
            await guardian.serve(request) { body, user in try await host.read(body, userID: user) }
        }
        router.post(RouterPath(RemoteAPI.Path.modify)) { request, _ in
            await guardian.serve(request) { body, user in try await host.modify(body, userID: user) }
        }
        router.post(RouterPath(RemoteAPI.Path.stage)) { request, _ in
            await guardian.serve(request) { body, user in try await host.stage(body, userID: user) }
        }
        router.get(RouterPath(RemoteAPI.Path.wait)) { request, _ in
            await guardian.serve(request) { _, _ in
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
            (RemoteAPI.Path.read, .post), (RemoteAPI.Path.modify, .post), (RemoteAPI.Path.stage, .post), (RemoteAPI.Path.wait, .get),
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

    /// What every signed route goes through: the body read within its limits, the signature
    /// checked against the origins served and the store's id, the nonce noted, errors answered
    /// as JSON.
    struct Gate: Sendable {
        let host: StorageHost
        let origins: Locked<Set<String>>
        let logger: Logger

        /// Reads a request's body (at most ``RemoteAPI/maxBody``, within ``bodyTimeout``),
        /// checks its signature and nonce, runs `work` as its user and answers with what it
        /// returns, or with the error as JSON.
        func serve(_ request: Request, publishing: Bool = false, _ work: (Data, String) async throws -> Data) async -> Response {
            let target = request.uri.string
            do {
                let body = try await Self.collectBody(request)
                let user = try await authenticate(request, target: target, body: body, publishing: publishing)
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

        /// The body, at most ``RemoteAPI/maxBody``, arrived within ``bodyTimeout``.
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
                    try await Task.sleep(for: bodyTimeout)
                    return nil
                }
                defer { group.cancelAll() }
                guard let first = try await group.next(), let buffer = first else {
                    throw StoreError(.invalidArguments, "the request body did not arrive within \(bodyTimeout.components.seconds) s")
                }
                return buffer
            }
            return Data(collected.readableBytesView)
        }

        /// The request's user, once its origin, signature, date and nonce pass.
        func authenticate(_ request: Request, target: String, body: Data, publishing: Bool) async throws -> String {
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
                try signature.verify(method: request.method.rawValue, target: target, body: body, signingKey: key,
                                     storeID: host.storeID, origins: origins.withLock { $0 })
                guard try await host.noteNonce(signature.nonce, userID: signature.userID) else {
                    throw StoreError(.permissionFailure, "the request's nonce was used before: a request is served once")
                }
                return signature.userID
            } catch let error as StoreError where error.code == .permissionFailure || error.code == .invalidArguments {
                throw Unauthenticated(error: error)
            }
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

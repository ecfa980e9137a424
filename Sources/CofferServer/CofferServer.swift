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
        let origins = Locked<Set<String>>(Set(publicURLs.map(\.text)))
        let router = router(storage, origins: origins, logger: logger)
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

    /// The server's routes, grouped by resource, behind ``ErrorAnswers``; every route but
    /// `health` and `store` behind ``SignatureAuthenticator``.
    static func router(_ host: StorageHost, origins: Locked<Set<String>>, logger: Logger) -> Router<ServerRequestContext> {
        let router = Router(context: ServerRequestContext.self)
        router.add(middleware: ErrorAnswers(logger: logger))
        router.get(RouterPath(RemoteAPI.Path.health)) { _, _ in
            json(Data(#"{"ok":true}"#.utf8))
        }
        // Unsigned: a client learns the store id here at first contact, pins it to the origin it
        // dialled, and signs every later request for it.
        router.get(RouterPath(RemoteAPI.Path.info)) { _, _ in
            json(try RemoteAPI.encoder.encode(RemoteAPI.Info(storeID: Data(host.storeID), api: RemoteAPI.version)))
        }
        let signed = SignatureAuthenticator(host: host, origins: origins, keys: .stored)
        // Contacts: a user's own card, signed by the key it holds (how a user becomes known).
        router.group(RouterPath(RemoteAPI.Path.contacts))
            .add(middleware: SignatureAuthenticator(host: host, origins: origins, keys: .published))
            .post("publish") { _, context in
                guard let card = context.publishedCard else { throw ServerError(status: .internalServerError, code: "internalError", message: "the server failed") }
                try await host.publish(card, signedBy: try context.user())
                return served(Data("{}".utf8), context, logger: logger)
            }
        // Storage: reads of what the user may see.
        router.group(RouterPath(RemoteAPI.Path.storage)).add(middleware: signed)
            .post("read") { _, context in
                served(try await host.read(context.body, userID: try context.user()), context, logger: logger)
            }
        // Records: batches, whole or staged.
        router.group(RouterPath(RemoteAPI.Path.records)).add(middleware: signed)
            .post("modify") { _, context in
                served(try await host.modify(context.body, userID: try context.user()), context, logger: logger)
            }
            .post("stage") { _, context in
                served(try await host.stage(context.body, userID: try context.user()), context, logger: logger)
            }
        // Changes: a wait for the store's change counter to pass a value.
        router.group(RouterPath(RemoteAPI.Path.changes)).add(middleware: signed)
            .get("wait") { request, context in
                let query = request.uri.queryParameters
                guard let after = query["after"].flatMap({ Int64($0) }), let millis = query["timeout"].flatMap({ Int($0) }),
                      (0...60_000).contains(millis) else {
                    throw StoreError(.invalidArguments, "changes/wait takes after=N and timeout=MS (at most 60000)")
                }
                return served(try await host.wait(after: after, timeout: .milliseconds(millis)), context, logger: logger)
            }
        // A method a known path does not take: a JSON 405 naming the one it does (the router
        // alone would answer 404, as for a path it does not have).
        let declared: [(String, HTTPRequest.Method)] = [
            (RemoteAPI.Path.health, .get), (RemoteAPI.Path.info, .get), (RemoteAPI.Path.publish, .post),
            (RemoteAPI.Path.read, .post), (RemoteAPI.Path.modify, .post), (RemoteAPI.Path.stage, .post), (RemoteAPI.Path.wait, .get),
        ]
        for (path, method) in declared {
            for other in [HTTPRequest.Method.get, .post, .put, .delete, .patch, .options] where other != method {
                router.on(RouterPath(path), method: other) { _, _ -> Response in
                    throw ServerError(status: .methodNotAllowed, code: "methodNotAllowed", message: "\(path) takes \(method.rawValue) only",
                                      headers: [.allow: method.rawValue])
                }
            }
        }
        return router
    }

    /// A signed route's answer, logged with its user.
    static func served(_ answer: Data, _ context: ServerRequestContext, logger: Logger) -> Response {
        logger.debug("served", metadata: ["user": "\(context.userID ?? "")"])
        return json(answer)
    }

    /// An answer: JSON, or in the binary encoding (``WireBinary``) when its first bytes say so.
    static func json(_ data: Data, status: HTTPResponse.Status = .ok) -> Response {
        Response(status: status, headers: [.contentType: WireBinary.isBinary(data) ? RemoteAPI.binaryType : "application/json"],
                 body: ResponseBody(byteBuffer: ByteBuffer(bytes: data)))
    }
}

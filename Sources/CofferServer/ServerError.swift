import CofferStore
import Foundation
import HTTPTypes
import Hummingbird
import Logging
import NIOCore

/// Every error a Coffer server answers, as JSON (``RemoteAPI/Failure``): a code (a
/// ``StoreError/Code`` name, `conflict`, `methodNotAllowed`) and a one-line message, under the
/// HTTP status the code maps to (``RemoteAPI/status(_:)``). ``ErrorAnswers`` turns what a
/// handler or a middleware throws into one.
struct ServerError: HTTPResponseError {
    let status: HTTPResponse.Status
    let code: String
    let message: String
    /// Headers the answer carries besides its content type (`Allow` for a 405).
    var headers: HTTPFields = [:]

    init(status: HTTPResponse.Status, code: String, message: String, headers: HTTPFields = [:]) {
        self.status = status
        self.code = code
        self.message = message
        self.headers = headers
    }

    /// A store error, under the status its code maps to.
    init(_ error: StoreError) {
        self.init(status: HTTPResponse.Status(code: RemoteAPI.status(error.code)), code: RemoteAPI.name(error.code), message: error.message)
    }

    /// A request that fails authentication: 401, with the reason.
    static func unauthenticated(_ error: StoreError) -> ServerError {
        ServerError(status: .unauthorized, code: RemoteAPI.name(error.code), message: error.message)
    }

    /// A batch that lost a race for a zone's head or a row it read.
    static let conflict = ServerError(status: .conflict, code: "conflict", message: "another writer changed the zone first; read again")

    /// What the server answers for a failure it did not foresee (its details go to the log only).
    static let failed = ServerError(status: .internalServerError, code: "internalError", message: "the server failed")

    func response(from request: Request, context: some RequestContext) throws -> Response {
        var headers = headers
        headers[.contentType] = "application/json"
        let body = (try? RemoteAPI.encoder.encode(RemoteAPI.Failure(code: code, message: message)))
            ?? Data(#"{"code":"internalError","message":"the server failed"}"#.utf8)
        return Response(status: status, headers: headers, body: ResponseBody(byteBuffer: ByteBuffer(bytes: body)))
    }
}

/// The one place a server's errors become answers: what a route or a middleware after it throws
/// is logged and answered as a ``ServerError``.
struct ErrorAnswers<Context: RequestContext>: RouterMiddleware {
    let logger: Logger

    func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws -> Response {
        do {
            return try await next(request, context)
        } catch let error as ServerError {
            if error.status == .unauthorized {
                logger.info("refused", metadata: ["path": "\(request.uri.path)", "why": "\(error.message)"])
            }
            throw error
        } catch is StorageHost.Conflict {
            throw ServerError.conflict
        } catch let error as StoreError {
            logger.debug("failed", metadata: ["path": "\(request.uri.path)", "code": "\(RemoteAPI.name(error.code))"])
            throw ServerError(error)
        } catch let error as HTTPError {
            guard error.status == .notFound else { throw error }
            throw ServerError(status: .notFound, code: "notFound", message: "\(request.uri.path) is not a path of this server")
        } catch {
            logger.error("request failed", metadata: ["path": "\(request.uri.path)", "error": "\(type(of: error))"])
            throw ServerError.failed
        }
    }
}

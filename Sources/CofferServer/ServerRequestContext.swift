import CofferVault
import Foundation
import Hummingbird

/// The context of a request to a Coffer server: Hummingbird's, with what authentication found.
/// ``SignatureAuthenticator`` fills it in before a signed route's handler runs.
struct ServerRequestContext: RequestContext {
    var coreContext: CoreRequestContextStorage
    /// The user who signed the request (nil until authenticated).
    var userID: String?
    /// The request's body, read whole within its limits, as its signature covers it.
    var body = Data()
    /// The verified card a publish request carries (nil on other routes).
    var publishedCard: ContactCard?

    init(source: Source) {
        coreContext = .init(source: source)
    }

    /// The signer, for a handler behind ``SignatureAuthenticator``.
    func user() throws -> String {
        guard let userID else { throw ServerError(status: .internalServerError, code: "internalError", message: "the server failed") }
        return userID
    }
}

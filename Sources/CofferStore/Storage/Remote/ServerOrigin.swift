import Foundation

/// The origin a client dials to reach a Coffer server: scheme, host, port and path prefix, in
/// one normal form (`http://127.0.0.1:8080`, `https://coffer.example.com:443/api`).
///
/// Every signed request names it (``RequestSignature``), and the server serves only the origins
/// it was started with (`coffer serve --public-url`), so a request captured by one server's
/// operator is refused by any other. A client pins the store id a server answers with at first
/// contact to its origin (`MarkBook`), as ssh pins a host key.
///
/// ```swift
/// let origin = try ServerOrigin("HTTPS://Coffer.Example.com/api/")
/// origin.text   // "https://coffer.example.com:443/api"
/// ```
public struct ServerOrigin: Sendable, Hashable, CustomStringConvertible {
    /// The normal form: lowercase scheme and host, an explicit port, the path without a
    /// trailing `/` (empty for the root).
    public let text: String

    /// The origin of `url`: `http` or `https`, a host, an optional port (80 or 443 when absent)
    /// and an optional path prefix; no user, query or fragment.
    /// - Throws: `.invalidArguments` naming what is wrong.
    public init(_ url: URL) throws {
        guard let scheme = url.scheme?.lowercased(), ["http", "https"].contains(scheme) else {
            throw StoreError(.invalidArguments, "a server is an http:// or https:// URL (got \(Names.printable(url.absoluteString)))")
        }
        guard let host = url.host?.lowercased(), !host.isEmpty else {
            throw StoreError(.invalidArguments, "the server URL \(Names.printable(url.absoluteString)) has no host")
        }
        guard url.user == nil, url.password == nil, url.query == nil, url.fragment == nil else {
            throw StoreError(.invalidArguments, "a server URL has no user, query or fragment (got \(Names.printable(url.absoluteString)))")
        }
        let port = url.port ?? (scheme == "https" ? 443 : 80)
        guard (1...65_535).contains(port) else { throw StoreError(.invalidArguments, "the server URL's port \(port) is out of range") }
        var path = url.path
        while path.hasSuffix("/") { path.removeLast() }
        let shownHost = host.contains(":") && !host.hasPrefix("[") ? "[\(host)]" : host
        text = "\(scheme)://\(shownHost):\(port)\(path)"
    }

    /// The origin of a URL given as text.
    public init(_ text: String) throws {
        guard let url = URL(string: text) else { throw StoreError(.invalidArguments, "\(Names.printable(text)) is not a URL") }
        try self.init(url)
    }

    public var description: String { text }
}

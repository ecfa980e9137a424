import ArgumentParser
import CofferServer
import CofferStore
import Foundation
import Logging

/// `coffer serve`: the sync server, over a local store. It holds no vault and no zone key.
struct Serve: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Run a Coffer sync server: users on other machines work on its store with --server.",
        discussion: """
            The server keeps sealed rows, signed zone logs, wrapped keys and contact cards in a local \
            store (an SQLite file, or PostgreSQL for several instances), and never holds a vault or a \
            zone key. Every request is signed by its user's identity key; clients verify everything \
            the server returns. It stops on SIGTERM or SIGINT once the requests in flight are answered. \
            It speaks plain HTTP: put it behind a reverse proxy for TLS (see Docs/Server.md). Set \
            COFFER_LOG_LEVEL (info, debug) for its log on standard error.
            """)

    @Option(name: .customLong("listen"), help: ArgumentHelp("Where to listen: HOST:PORT (port 0: any free port, printed once listening).", valueName: "host:port"))
    var listen: String

    @Option(name: .customLong("store"), help: ArgumentHelp("The store to serve: an SQLite file (made if missing) or postgres://USER@HOST[:PORT]/DB. Default: COFFER_STORE, or the default store.", valueName: "path|url"))
    var store: String?

    @Option(name: .customLong("public-url"), help: ArgumentHelp("A URL clients dial to reach this server (scheme, host, port, path prefix), such as https://coffer.example.com behind a TLS proxy; give it once per URL. Every request's signature names the URL its client dialled, and the server serves only these and http://HOST:PORT of --listen.", valueName: "url"))
    var publicURLs: [String] = []

    @Flag(help: "Print the listening line as one JSON object: {\"url\", \"store\", \"listening\", \"publicURLs\"}.")
    var json = false

    func validate() throws {
        _ = try Self.address(listen)
        for url in publicURLs {
            do { _ = try ServerOrigin(url) } catch let error as StoreError { throw CLIError.usage("--public-url: \(error.message)") }
        }
        if store?.isEmpty == true { throw CLIError.usage("--store was given an empty path") }
        if let store, PostgresURL.isPostgresURL(store.lowercased()) {
            do { _ = try PostgresURL(store) } catch let error as StoreError { throw CLIError.usage("--store: \(error.message)") }
        }
    }

    /// HOST:PORT (`[::1]:PORT` for an IPv6 address).
    static func address(_ text: String) throws -> (host: String, port: Int) {
        guard let colon = text.lastIndex(of: ":") else { throw CLIError.usage("--listen takes HOST:PORT, such as 127.0.0.1:8080") }
        var host = String(text[..<colon])
        if host.hasPrefix("["), host.hasSuffix("]") { host = String(host.dropFirst().dropLast()) }
        guard !host.isEmpty, let port = Int(text[text.index(after: colon)...]), (0...65535).contains(port) else {
            throw CLIError.usage("--listen takes HOST:PORT with a port from 0 to 65535, such as 127.0.0.1:8080")
        }
        return (host, port)
    }

    /// Set by a program that starts a server of its own (`coffer demo`, `coffer-bench server`) to
    /// its process id: the server then ends (SIGTERM) when that process does, however it ends.
    static let parentVariable = "COFFER_SERVE_PARENT"

    /// Linux's `prctl(PR_SET_PDEATHSIG, SIGTERM)`: SIGTERM when the parent process ends.
    /// (Swift's Glibc module does not declare `prctl`.)
    /// Refuses an address this process cannot listen on (in use, not this machine's, not
    /// allowed), naming it, with exit 69: a bind of a socket of its own, closed at once, with the
    /// address reuse the server's own socket has.
    static func checkCanListen(host: String, port: Int) throws {
        var hints = addrinfo()
        hints.ai_flags = AI_PASSIVE | AI_NUMERICSERV
        hints.ai_socktype = Int32(SOCK_STREAM.rawValue)
        var found: UnsafeMutablePointer<addrinfo>?
        guard getaddrinfo(host, String(port), &hints, &found) == 0, let first = found else {
            throw CLIError(ExitStatus.unavailable, "cannot listen on \(host):\(port): no address of this machine has that name")
        }
        defer { freeaddrinfo(found) }
        let fd = socket(first.pointee.ai_family, first.pointee.ai_socktype, first.pointee.ai_protocol)
        guard fd >= 0 else { return } // the server's own attempt says why
        defer { close(fd) }
        var on: Int32 = 1
        _ = setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &on, socklen_t(MemoryLayout<Int32>.size))
        guard bind(fd, first.pointee.ai_addr, first.pointee.ai_addrlen) != 0 else { return }
        let why: String
        switch errno {
        case EADDRINUSE: why = "the address is in use (another coffer serve, or another program, listens there); give --listen another port"
        case EADDRNOTAVAIL: why = "no network interface of this machine has that address"
        case EACCES: why = "this user may not listen on that port (ports below 1024 need privileges)"
        default: why = String(cString: strerror(errno))
        }
        throw CLIError(ExitStatus.unavailable, "cannot listen on \(host):\(port): \(why)")
    }

    static func endWithParent() {
        typealias Prctl = @convention(c) (Int32, UInt, UInt, UInt, UInt) -> Int32
        guard let symbol = dlsym(dlopen(nil, RTLD_NOW), "prctl") else { return }
        let setParentDeathSignal: Int32 = 1
        _ = unsafeBitCast(symbol, to: Prctl.self)(setParentDeathSignal, UInt(SIGTERM), 0, 0, 0)
    }

    func run() async throws {
        let (host, port) = try Self.address(listen)
        // Before the store is opened (or made): a server that cannot listen leaves nothing behind.
        try Self.checkCanListen(host: host, port: port)
        let environment = ProcessInfo.processInfo.environment
        if let parent = environment[Self.parentVariable].flatMap({ Int32($0) }) {
            Self.endWithParent()
            // The parent may have gone before the line above.
            guard getppid() == parent else { return }
        }
        let location: String
        if let store { location = store } else if let env = environment["COFFER_STORE"], !env.isEmpty { location = env } else {
            let folder = GlobalOptions.defaultFolder(environment)
            try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
            location = folder.appendingPathComponent("store.sqlite").path
        }
        var logger = Logger(label: "coffer.serve")
        logger.logLevel = environment["COFFER_LOG_LEVEL"].flatMap { Logger.Level(rawValue: $0.lowercased()) } ?? .info
        let shown = PostgresURL.isPostgresURL(location.lowercased()) ? ((try? PostgresURL(location))?.description ?? "PostgreSQL") : location
        let origins = try publicURLs.map { try ServerOrigin($0) }
        if origins.isEmpty, ["0.0.0.0", "::", "*"].contains(host) {
            Output.note("warning: no --public-url: clients must dial http://\(listen) exactly, which other machines cannot; give --public-url with the URL they dial")
        }
        try await CofferServer.run(host: host, port: port, store: location, publicURLs: origins, logger: logger) { port, served in
            let where_ = host.contains(":") ? "[\(host)]:\(port)" : "\(host):\(port)"
            if json {
                // One JSON line, so that a script can read the address (port 0 picks a free one) and go on reading.
                let line = ["url": "http://\(where_)", "store": shown, "listening": true, "publicURLs": served.map(\.text)] as [String: Any]
                if let data = try? RecordOutput.data(line, pretty: false) {
                    Output.out(data + Data("\n".utf8))
                }
            } else {
                let dialled = origins.isEmpty ? "" : "; clients dial \(served.map(\.text).joined(separator: ", "))"
                Output.line("Listening on http://\(where_) (store: \(shown)\(dialled)); stop with Ctrl-C or SIGTERM.")
            }
        }
    }
}

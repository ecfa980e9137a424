/// Where a PostgreSQL store lives: a user, a database, and a server reached over TCP or a Unix
/// socket.
///
/// ```
/// postgres://USER@HOST[:PORT]/DB                   TCP (postgresql:// too)
/// postgres://USER@[::1]:5433/DB                    TCP to an IPv6 address
/// postgres://USER@[:PORT]/DB?host=/run/postgresql  the socket /run/postgresql/.s.PGSQL.PORT
/// ```
///
/// The user and the database name may be percent-encoded (`%20` for a space). The parser is
/// strict: it refuses a password in the URL (a URL stands in argv and in shell history; the
/// password comes from `PGPASSWORD` or the password file, see ``PostgresPassword``), a missing
/// user or database, a query parameter other than `host`, a port outside 1–65535, a relative
/// socket folder, a socket path of 108 bytes or more (the limit of a Unix socket address), and
/// anything else it does not understand, with `.invalidArguments`. Its errors name the part that
/// is wrong and never quote the URL.
public struct PostgresURL: Sendable, Hashable, CustomStringConvertible {
    /// How the server is reached.
    public enum Endpoint: Sendable, Hashable {
        /// A host name or an IP address (IPv6 without brackets), and a TCP port.
        case tcp(host: String, port: Int)
        /// A folder that holds the server's socket file, and the port that names that file.
        case unixSocket(directory: String, port: Int)
    }

    /// PostgreSQL's port when the URL names none.
    public static let defaultPort = 5432
    /// The longest socket path a Unix socket address holds, in bytes (108 with its NUL).
    public static let maximumSocketPathLength = 107
    /// The longest user or database name PostgreSQL keeps, in bytes (it cuts longer ones).
    public static let maximumNameLength = 63

    public let user: String
    public let database: String
    public let endpoint: Endpoint

    /// The TCP port, or the port that names the socket file.
    public var port: Int {
        switch endpoint {
        case .tcp(_, let port), .unixSocket(_, let port): return port
        }
    }

    /// The socket file, `<folder>/.s.PGSQL.<port>`, for a Unix socket endpoint; nil for TCP.
    public var socketPath: String? {
        guard case .unixSocket(let directory, let port) = endpoint else { return nil }
        return Self.socketPath(directory: directory, port: port)
    }

    /// The host name that password file lines match: the host, or `localhost` for a Unix
    /// socket (as libpq does).
    public var passwordFileHost: String {
        switch endpoint {
        case .tcp(let host, _): return host
        case .unixSocket: return "localhost"
        }
    }

    /// Where the server is, for messages: `host:port` or the socket file.
    public var serverDescription: String {
        switch endpoint {
        case .tcp(let host, let port): return "\(host.contains(":") ? "[\(host)]" : host):\(port)"
        case .unixSocket: return "socket \(socketPath ?? "")"
        }
    }

    /// The URL written again in its plain form (`postgres://`, the port only when it is not
    /// 5432). It holds no password, since a ``PostgresURL`` never has one.
    public var description: String {
        let user = Self.percentEncoded(user), database = Self.percentEncoded(database)
        let portSuffix = port == Self.defaultPort ? "" : ":\(port)"
        switch endpoint {
        case .tcp(let host, _):
            return "postgres://\(user)@\(host.contains(":") ? "[\(host)]" : host)\(portSuffix)/\(database)"
        case .unixSocket(let directory, _):
            return "postgres://\(user)@\(portSuffix)/\(database)?host=\(Self.percentEncoded(directory, keeping: "/"))"
        }
    }

    /// True when `string` starts with `postgres://` or `postgresql://`: a store named so is a
    /// PostgreSQL store, not a file path.
    public static func isPostgresURL(_ string: String) -> Bool {
        schemes.contains { string.hasPrefix($0) }
    }

    /// Parses a PostgreSQL URL.
    ///
    /// ```swift
    /// let url = try PostgresURL("postgres://coffer@/coffer?host=/run/postgresql")
    /// url.socketPath  // "/run/postgresql/.s.PGSQL.5432"
    /// ```
    ///
    /// - Parameter string: the URL, in one of the forms above.
    /// - Throws: ``StoreError`` `.invalidArguments`, with a one-line reason, for anything else.
    public init(_ string: String) throws {
        guard string.utf8.count <= 2048 else { throw Self.invalid("it is longer than 2048 bytes") }
        guard let scheme = Self.schemes.first(where: { string.hasPrefix($0) }) else {
            throw Self.invalid("it must start with postgres:// or postgresql://")
        }
        var rest = Substring(string.dropFirst(scheme.count))
        guard !rest.contains("#") else { throw Self.invalid("it has a fragment ('#'); write '%23' for a '#' in a name") }

        var query: Substring?
        if let mark = rest.firstIndex(of: "?") {
            query = rest[rest.index(after: mark)...]
            rest = rest[..<mark]
        }
        guard let slash = rest.firstIndex(of: "/") else { throw Self.invalid("it names no database (postgres://USER@HOST/DB)") }
        let authority = rest[..<slash], path = rest[rest.index(after: slash)...]

        guard let at = authority.firstIndex(of: "@") else {
            throw Self.invalid("it names no user (postgres://USER@HOST/DB)")
        }
        let userInfo = authority[..<at], hostAndPort = authority[authority.index(after: at)...]
        guard !userInfo.contains(":") else {
            throw StoreError(.invalidArguments, "a PostgreSQL URL must not hold a password (a URL stands in argv and shell history): "
                + "remove it and set PGPASSWORD or put it in ~/.pgpass (or the file PGPASSFILE names)")
        }
        guard !hostAndPort.contains("@") else { throw Self.invalid("it has more than one '@' (write '%40' for an '@' in a user name)") }
        let user = try Self.name(userInfo, what: "user", allowed: Self.unreserved + Self.subDelimiters)
        guard !path.contains("/") else { throw Self.invalid("the database name has a '/' (write '%2F' for one in a name)") }
        let database = try Self.name(path, what: "database", allowed: Self.unreserved + Self.subDelimiters + ":@")

        let (host, port) = try Self.hostAndPort(hostAndPort)
        let socketDirectory = try query.map(Self.socketDirectory(query:))
        switch (host, socketDirectory) {
        case (let host?, nil):
            endpoint = .tcp(host: host, port: port)
        case (nil, let directory?):
            let socket = Self.socketPath(directory: directory, port: port)
            guard socket.utf8.count <= Self.maximumSocketPathLength else {
                throw Self.invalid("its socket path \(Names.printable(socket)) is \(socket.utf8.count) bytes; "
                    + "a Unix socket path must be shorter than \(Self.maximumSocketPathLength + 1) bytes: use a shorter folder")
            }
            endpoint = .unixSocket(directory: directory, port: port)
        case (nil, nil):
            throw Self.invalid("it names no host: give one (postgres://USER@HOST/DB) or a socket folder (?host=/socket/dir)")
        case (_?, _?):
            throw Self.invalid("it names both a host and a socket folder (?host=); give one of them")
        }
        self.user = user
        self.database = database
    }
}

extension PostgresURL {
    static let schemes = ["postgres://", "postgresql://"]
    static let unreserved = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-._~"
    static let subDelimiters = "!$&'()*+,;="

    static func invalid(_ why: String) -> StoreError {
        StoreError(.invalidArguments, "not a PostgreSQL URL: \(why)")
    }

    static func socketPath(directory: String, port: Int) -> String {
        (directory == "/" ? "" : directory) + "/.s.PGSQL.\(port)"
    }

    /// A user or database name: present, percent-decoded, UTF-8, without NUL, at most 63 bytes.
    static func name(_ text: Substring, what: String, allowed: String) throws -> String {
        guard !text.isEmpty else { throw invalid("it names no \(what) (postgres://USER@HOST/DB)") }
        let bytes = try percentDecoded(text, what: what, allowed: allowed)
        guard let name = String(validating: bytes, as: UTF8.self) else { throw invalid("the \(what) name is not UTF-8") }
        guard !bytes.contains(0) else { throw invalid("the \(what) name holds a NUL byte") }
        guard bytes.count <= maximumNameLength else {
            throw invalid("the \(what) name is \(bytes.count) bytes; PostgreSQL keeps at most \(maximumNameLength)")
        }
        return name
    }

    /// The bytes of `text` with each `%XX` decoded; any character outside `allowed` and `%` is refused.
    static func percentDecoded(_ text: Substring, what: String, allowed: String) throws -> [UInt8] {
        let allowed = Set(allowed.utf8)
        var bytes: [UInt8] = []
        var input = Array(text.utf8)[...]
        while let byte = input.popFirst() {
            if byte == UInt8(ascii: "%") {
                guard input.count >= 2, let high = hexValue(input.removeFirst()), let low = hexValue(input.removeFirst()) else {
                    throw invalid("the \(what) has a '%' that is not followed by two hex digits")
                }
                bytes.append(high << 4 | low)
            } else if allowed.contains(byte) {
                bytes.append(byte)
            } else {
                let shown = byte < 0x80 ? "'\(Names.printable(String(UnicodeScalar(byte))))'" : "a non-ASCII character"
                throw invalid("the \(what) has \(shown), which must be percent-encoded")
            }
        }
        return bytes
    }

    static func hexValue(_ byte: UInt8) -> UInt8? {
        switch byte {
        case UInt8(ascii: "0")...UInt8(ascii: "9"): return byte - UInt8(ascii: "0")
        case UInt8(ascii: "a")...UInt8(ascii: "f"): return byte - UInt8(ascii: "a") + 10
        case UInt8(ascii: "A")...UInt8(ascii: "F"): return byte - UInt8(ascii: "A") + 10
        default: return nil
        }
    }

    static func percentEncoded(_ text: String, keeping extra: String = "") -> String {
        let kept = Set((unreserved + extra).utf8)
        let hex = Array("0123456789ABCDEF".utf8)
        var out: [UInt8] = []
        for byte in text.utf8 {
            if kept.contains(byte) {
                out.append(byte)
            } else {
                out += [UInt8(ascii: "%"), hex[Int(byte >> 4)], hex[Int(byte & 0xF)]]
            }
        }
        return String(decoding: out, as: UTF8.self)
    }

    /// `HOST[:PORT]`, `[IPV6][:PORT]` or `[:PORT]` (no host: a socket folder must follow).
    static func hostAndPort(_ text: Substring) throws -> (host: String?, port: Int) {
        var host: Substring, portText: Substring?
        if text.hasPrefix("[") {
            guard let close = text.firstIndex(of: "]") else { throw invalid("its IPv6 address has no closing ']'") }
            host = text[text.index(after: text.startIndex)..<close]
            let after = text[text.index(after: close)...]
            guard !host.isEmpty, host.contains(":"), host.allSatisfy({ $0.isHexDigit || $0 == ":" || $0 == "." }) else {
                throw invalid("the host between '[' and ']' is not an IPv6 address")
            }
            if !after.isEmpty {
                guard after.hasPrefix(":") else { throw invalid("the IPv6 address is followed by something other than ':PORT'") }
                portText = after.dropFirst()
            }
        } else {
            let parts = text.split(separator: ":", omittingEmptySubsequences: false)
            guard parts.count <= 2 else { throw invalid("the host has more than one ':' (write an IPv6 address in brackets)") }
            host = parts[0]
            portText = parts.count == 2 ? parts[1] : nil
            let hostCharacters = Set("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-._")
            if let bad = host.first(where: { !hostCharacters.contains($0) }) {
                throw invalid("the host has '\(Names.printable(String(bad)))'; a host is a name or an IP address")
            }
        }
        var port = defaultPort
        if let portText {
            guard !portText.isEmpty, portText.count <= 5, portText.allSatisfy({ $0.isASCII && $0.isNumber }),
                  let value = Int(portText), (1...65535).contains(value) else {
                throw invalid("the port must be a number from 1 to 65535")
            }
            port = value
        }
        return (host.isEmpty ? nil : String(host), port)
    }

    /// The query: only `host=/absolute/socket/folder`, once.
    static func socketDirectory(query: Substring) throws -> String {
        guard !query.isEmpty else { throw invalid("it has an empty query ('?' with nothing after it)") }
        var directory = ""
        for parameter in query.split(separator: "&", omittingEmptySubsequences: false) {
            let pair = parameter.split(separator: "=", maxSplits: 1, omittingEmptySubsequences: false)
            let name = pair[0]
            guard name == "host" else {
                throw invalid(name.isEmpty ? "it has an empty query parameter"
                    : "unknown query parameter '\(Names.printable(String(name)))' (only host=/socket/dir is understood)")
            }
            guard directory.isEmpty else { throw invalid("it gives host= more than once") }
            guard pair.count == 2 else { throw invalid("host= has no value") }
            let bytes = try percentDecoded(pair[1], what: "socket folder", allowed: unreserved + subDelimiters + ":@/")
            guard let value = String(validating: bytes, as: UTF8.self), !bytes.contains(0) else {
                throw invalid("the socket folder is not UTF-8 text")
            }
            guard value.hasPrefix("/") else {
                throw invalid("the socket folder (host=) must be an absolute path; a host name goes before the '/DB'")
            }
            var trimmed = Substring(value)
            while trimmed.count > 1, trimmed.hasSuffix("/") { trimmed = trimmed.dropLast() }
            directory = String(trimmed)
        }
        return directory
    }
}

extension PostgresURL {
    /// A URL from parts already checked (the parser's and the tests' way to name another
    /// database on the same server).
    package init(user: String, database: String, endpoint: Endpoint) {
        self.user = user
        self.database = database
        self.endpoint = endpoint
    }
}

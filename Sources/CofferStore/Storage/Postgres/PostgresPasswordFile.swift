/// The lines of a PostgreSQL password file (`~/.pgpass`), read as libpq reads them.
///
/// ```
/// # hostname:port:database:username:password
/// db.example.com:5432:coffer:coffer:s3cret
/// *:*:*:admin:pa\:ss
/// ```
///
/// A line starting with `#` is a comment. A field that is exactly `*` matches anything; `\:` is
/// a colon and `\\` a backslash inside a field (a backslash before any character stands for that
/// character). A line with fewer than five fields never matches. The first line whose four
/// fields match wins; its password ends at the next unescaped colon.
public struct PostgresPasswordFile: Sendable {
    let lines: [Substring]

    /// The lines of a password file's text (its permissions are checked by whoever read it).
    public init(contents: String) {
        lines = contents.split(omittingEmptySubsequences: true, whereSeparator: { $0 == "\n" || $0 == "\r\n" || $0 == "\r" })
    }

    /// The password of the first line matching the four fields, or nil.
    ///
    /// - Parameters:
    ///   - host: the host name; `localhost` for a Unix socket.
    ///   - port: the port, as a decimal number.
    ///   - database: the database name.
    ///   - user: the user name.
    public func password(host: String, port: Int, database: String, user: String) -> String? {
        let wanted = [host, String(port), database, user]
        for line in lines where !line.hasPrefix("#") {
            var rest = line[...]
            var matched = true
            for value in wanted {
                guard let after = Self.match(rest, value) else { matched = false; break }
                rest = after
            }
            if matched { return Self.unescapedField(rest) }
        }
        return nil
    }

    /// The rest of `line` after its first field, when that field is `*` or equals `value`.
    static func match(_ line: Substring, _ value: String) -> Substring? {
        if line.hasPrefix("*:") { return line.dropFirst(2) }
        var field = Substring(), rest = line
        while let c = rest.popFirst() {
            switch c {
            case ":": return field == value ? rest : nil
            case "\\": if let escaped = rest.popFirst() { field.append(escaped) } else { field.append(c) }
            default: field.append(c)
            }
        }
        return nil // a line that ends inside the first four fields
    }

    /// The password field: up to the next unescaped colon, escapes removed.
    static func unescapedField(_ text: Substring) -> String {
        var out = "", rest = text
        while let c = rest.popFirst(), c != ":" {
            if c == "\\", let escaped = rest.popFirst() { out.append(escaped) } else { out.append(c) }
        }
        return out
    }
}

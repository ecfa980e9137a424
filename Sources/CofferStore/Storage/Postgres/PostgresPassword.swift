import Foundation
import Logging
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// Where the password for a PostgreSQL store comes from, as libpq finds it: never the URL.
///
/// 1. `PGPASSWORD`, when set and not empty;
/// 2. else the first matching line of the password file (``PostgresPasswordFile``): the file
///    `PGPASSFILE` names, or `~/.pgpass`. For a Unix socket the host that lines match is
///    `localhost`. A missing file means no password. A file that group or others may access
///    in any way, or that is not a regular file, is not read: a warning is logged, and there is
///    no password from it (`chmod 600` it).
///
/// The password is never logged nor put in an error.
public enum PostgresPassword {
    /// The password for `url`, or nil when there is none (the server may not ask for one).
    ///
    /// ```swift
    /// let url = try PostgresURL("postgres://coffer@db.example.com/coffer")
    /// let password = PostgresPassword.lookup(for: url)
    /// ```
    ///
    /// - Parameters:
    ///   - url: the database: its host (`localhost` for a Unix socket), port, database and user
    ///     are what a password file's line must match.
    ///   - environment: the variables to read: `PGPASSWORD`, `PGPASSFILE`, `HOME`.
    ///   - logger: where the warning about an unprotected password file goes.
    public static func lookup(for url: PostgresURL,
                              environment: [String: String] = ProcessInfo.processInfo.environment,
                              logger: Logger = Logger(label: "coffer.postgres", factory: { _ in SwiftLogNoOpLogHandler() })) -> String? {
        if let password = environment["PGPASSWORD"], !password.isEmpty { return password }
        let path: String
        if let file = environment["PGPASSFILE"], !file.isEmpty {
            path = file
        } else if let home = environment["HOME"], !home.isEmpty {
            path = (home.hasSuffix("/") ? home : home + "/") + ".pgpass"
        } else {
            return nil
        }
        guard let contents = readProtectedFile(path, logger: logger) else { return nil }
        return PostgresPasswordFile(contents: contents)
            .password(host: url.passwordFileHost, port: url.port, database: url.database, user: url.user)
    }

    /// The text of the file at `path` if it is a regular file that only its owner may access;
    /// otherwise nil, with a warning when the file is there but refused.
    static func readProtectedFile(_ path: String, logger: Logger) -> String? {
        let fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK)
        guard fd >= 0 else {
            if errno != ENOENT {
                logger.warning("password file \(path) cannot be read: \(String(cString: strerror(errno)))")
            }
            return nil
        }
        let handle = FileHandle(fileDescriptor: fd, closeOnDealloc: true)
        var st = stat()
        guard fstat(fd, &st) == 0, (st.st_mode & S_IFMT) == S_IFREG else {
            logger.warning("password file \(path) is not a plain file; it is not read")
            return nil
        }
        guard st.st_mode & 0o077 == 0 else {
            logger.warning("password file \(path) has group or world access; it is not read: permissions should be u=rw (0600) or less")
            return nil
        }
        guard let data = try? handle.readToEnd() else { return nil } // nil for an empty file too
        return String(decoding: data, as: UTF8.self)
    }
}

import CofferTestSupport
import CofferStoreTestSupport
import Foundation
import Logging
import Synchronization
import Testing
@testable import CofferStore

@Suite("PostgreSQL passwords")
struct PostgresPasswordTests {
    @Test("password file: first match wins, * matches any field, # lines are comments")
    func matching() {
        let file = PostgresPasswordFile(contents: """
            # hostname:port:database:username:password
            db.example.com:5432:notes:coffer:first
            db.example.com:5432:notes:coffer:second
            #db.example.com:6000:notes:coffer:commented
            *:6000:*:coffer:any-db-on-6000
            localhost:5432:*:*:socket
            short:5432:notes:coffer
            """)
        #expect(file.password(host: "db.example.com", port: 5432, database: "notes", user: "coffer") == "first")
        #expect(file.password(host: "db.example.com", port: 6000, database: "notes", user: "coffer") == "any-db-on-6000")
        #expect(file.password(host: "other", port: 6000, database: "x", user: "coffer") == "any-db-on-6000")
        #expect(file.password(host: "other", port: 6000, database: "x", user: "admin") == nil)
        #expect(file.password(host: "localhost", port: 5432, database: "anything", user: "anyone") == "socket")
        #expect(file.password(host: "short", port: 5432, database: "notes", user: "coffer") == nil)
        #expect(file.password(host: "db.example.com", port: 5432, database: "note", user: "coffer") == nil)
    }

    @Test("password file escapes: \\: is a colon, \\\\ a backslash, in fields and in the password")
    func escapes() {
        let file = PostgresPasswordFile(contents: #"""
            h\:x:5432:d\\b:u:pa\:ss\\word:ignored
            *:*:*:*:star\*
            """#)
        #expect(file.password(host: "h:x", port: 5432, database: #"d\b"#, user: "u") == #"pa:ss\word"#)
        #expect(file.password(host: "h", port: 5432, database: "d", user: "u") == "star*")
        // A field that is `\*` is a literal star, not a wildcard.
        let literal = PostgresPasswordFile(contents: #"\*:5432:d:u:literal"#)
        #expect(literal.password(host: "h", port: 5432, database: "d", user: "u") == nil)
        #expect(literal.password(host: "*", port: 5432, database: "d", user: "u") == "literal")
    }

    @Test("PGPASSWORD wins over the file; an empty one does not count")
    func precedence() async throws {
        try await withPasswordFile("*:*:*:*:from-file\n", mode: 0o600) { file in
            #expect(PostgresPassword.lookup(for: url, environment: ["PGPASSWORD": "from-env", "PGPASSFILE": file]) == "from-env")
            #expect(PostgresPassword.lookup(for: url, environment: ["PGPASSWORD": "", "PGPASSFILE": file]) == "from-file")
            #expect(PostgresPassword.lookup(for: url, environment: ["PGPASSFILE": file]) == "from-file")
            #expect(PostgresPassword.lookup(for: url, environment: [:]) == nil)
        }
    }

    @Test("without PGPASSFILE, ~/.pgpass under HOME; a socket matches localhost; a missing file is no password")
    func homeFile() async throws {
        try await withTemporaryFolder { home in
            let socket = try PostgresURL("postgres://coffer@/notes?host=/run/pg")
            let tcp = try PostgresURL("postgres://coffer@db/notes")
            #expect(PostgresPassword.lookup(for: socket, environment: ["HOME": home.path]) == nil)
            try write("db:5432:notes:coffer:tcp\nlocalhost:5432:notes:coffer:socket\n",
                      to: home.appendingPathComponent(".pgpass").path, mode: 0o600)
            #expect(PostgresPassword.lookup(for: socket, environment: ["HOME": home.path]) == "socket")
            #expect(PostgresPassword.lookup(for: tcp, environment: ["HOME": home.path]) == "tcp")
            // PGPASSFILE replaces ~/.pgpass.
            #expect(PostgresPassword.lookup(for: tcp, environment: ["HOME": home.path, "PGPASSFILE": home.path + "/none"]) == nil)
        }
    }

    @Test("a password file that group or others may read is ignored with a warning that holds no password")
    func permissions() async throws {
        try await withPasswordFile("*:*:*:*:hunter2\n", mode: 0o644) { file in
            let log = RecordedLog()
            #expect(PostgresPassword.lookup(for: url, environment: ["PGPASSFILE": file], logger: log.logger) == nil)
            let messages = log.messages
            #expect(messages.count == 1)
            #expect(messages.first?.contains("group or world access") == true)
            #expect(messages.first?.contains(file) == true)
            #expect(messages.allSatisfy { !$0.contains("hunter2") })

            for mode in [0o640, 0o604, 0o610] as [mode_t] {
                chmod(file, mode)
                #expect(PostgresPassword.lookup(for: url, environment: ["PGPASSFILE": file]) == nil, "mode \(String(mode, radix: 8))")
            }
            chmod(file, 0o600)
            #expect(PostgresPassword.lookup(for: url, environment: ["PGPASSFILE": file], logger: log.logger) == "hunter2")
            #expect(log.messages.count == 1)
        }
    }

    @Test("a password file that is a folder is ignored with a warning")
    func notAFile() async throws {
        try await withTemporaryFolder { folder in
            let log = RecordedLog()
            #expect(PostgresPassword.lookup(for: url, environment: ["PGPASSFILE": folder.path], logger: log.logger) == nil)
            #expect(log.messages.first?.contains("not a plain file") == true)
        }
    }

    let url = try! PostgresURL("postgres://coffer@db/notes")

    /// Runs `body` with the path of a password file holding `text`, with permissions `mode`.
    func withPasswordFile(_ text: String, mode: mode_t, _ body: (String) async throws -> Void) async throws {
        try await withTemporaryFolder { folder in
            let file = folder.appendingPathComponent("pgpass").path
            try write(text, to: file, mode: mode)
            try await body(file)
        }
    }

    func write(_ text: String, to path: String, mode: mode_t) throws {
        try Data(text.utf8).write(to: URL(fileURLWithPath: path))
        #expect(chmod(path, mode) == 0)
    }
}

/// A logger whose messages a test can read.
final class RecordedLog: Sendable {
    private let lines = Mutex<[String]>([])

    var messages: [String] { lines.withLock { $0 } }

    var logger: Logger {
        Logger(label: "test") { _ in Handler(log: self) }
    }

    struct Handler: LogHandler {
        let log: RecordedLog
        var metadata: Logger.Metadata = [:]
        var logLevel: Logger.Level = .trace

        subscript(metadataKey key: String) -> Logger.Metadata.Value? {
            get { metadata[key] }
            set { metadata[key] = newValue }
        }

        func log(event: LogEvent) {
            log.lines.withLock { $0.append("\(event.level): \(event.message)") }
        }
    }
}

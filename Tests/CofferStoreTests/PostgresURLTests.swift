import CofferStoreTestSupport
import Testing
@testable import CofferStore

@Suite("PostgresURL")
struct PostgresURLTests {
    @Test("TCP forms: host, port, IPv6, both schemes")
    func tcp() throws {
        let plain = try PostgresURL("postgres://coffer@db.example.com/notes")
        #expect(plain.user == "coffer")
        #expect(plain.database == "notes")
        #expect(plain.endpoint == .tcp(host: "db.example.com", port: 5432))
        #expect(plain.socketPath == nil)
        #expect(plain.passwordFileHost == "db.example.com")

        let withPort = try PostgresURL("postgresql://app@127.0.0.1:6543/db")
        #expect(withPort.endpoint == .tcp(host: "127.0.0.1", port: 6543))
        #expect(withPort.description == "postgres://app@127.0.0.1:6543/db")

        let v6 = try PostgresURL("postgres://app@[::1]:5433/db")
        #expect(v6.endpoint == .tcp(host: "::1", port: 5433))
        #expect(v6.description == "postgres://app@[::1]:5433/db")
        #expect(v6.serverDescription == "[::1]:5433")
    }

    @Test("a Unix socket folder: the socket file, localhost for the password file")
    func socket() throws {
        let url = try PostgresURL("postgres://coffer@/notes?host=/run/postgresql")
        #expect(url.endpoint == .unixSocket(directory: "/run/postgresql", port: 5432))
        #expect(url.socketPath == "/run/postgresql/.s.PGSQL.5432")
        #expect(url.passwordFileHost == "localhost")
        #expect(url.description == "postgres://coffer@/notes?host=/run/postgresql")

        let port = try PostgresURL("postgres://coffer@:5999/notes?host=%2Ftmp%2Fpg%2F")
        #expect(port.socketPath == "/tmp/pg/.s.PGSQL.5999")
        #expect(port.description == "postgres://coffer@:5999/notes?host=/tmp/pg")
        #expect(try PostgresURL(port.description) == port)
    }

    @Test("user and database names are percent-decoded, and encoded again in the description")
    func percentDecoding() throws {
        let url = try PostgresURL("postgres://team%20lead%40acme@db/%C3%A9t%C3%A9%2Fnotes")
        #expect(url.user == "team lead@acme")
        #expect(url.database == "été/notes")
        #expect(url.description == "postgres://team%20lead%40acme@db/%C3%A9t%C3%A9%2Fnotes")
        #expect(try PostgresURL(url.description) == url)
    }

    @Test("a password in the URL is refused, pointing to PGPASSWORD and ~/.pgpass, without echoing it")
    func password() throws {
        for text in ["postgres://coffer:hunter2@db/notes", "postgres://coffer:@db/notes", "postgres://coffer:hunter2@/n?host=/run"] {
            let error = try #require(throws: StoreError.self) { try PostgresURL(text) }
            #expect(error.code == .invalidArguments)
            #expect(error.message.contains("PGPASSWORD"))
            #expect(error.message.contains("~/.pgpass"))
            #expect(!error.message.contains("hunter2"))
            #expect(!error.message.contains("\n"))
        }
    }

    @Test("refusals name what is wrong", arguments: [
        ("mysql://coffer@db/notes", "postgres://"),
        ("POSTGRES://coffer@db/notes", "postgres://"),
        ("postgres://db/notes", "no user"),
        ("postgres://@db/notes", "no user"),
        ("postgres://coffer@db", "no database"),
        ("postgres://coffer@db/", "no database"),
        ("postgres://coffer@db/notes/more", "'/'"),
        ("postgres://coffer@db/notes?sslmode=require", "unknown query parameter 'sslmode'"),
        ("postgres://coffer@/notes?host=/run&port=5", "unknown query parameter 'port'"),
        ("postgres://coffer@db/notes?", "empty query"),
        ("postgres://coffer@db:0/notes", "port"),
        ("postgres://coffer@db:65536/notes", "port"),
        ("postgres://coffer@db:54x/notes", "port"),
        ("postgres://coffer@db:/notes", "port"),
        ("postgres://coffer@/notes?host=run/pg", "absolute"),
        ("postgres://coffer@/notes", "no host"),
        ("postgres://coffer@db/notes?host=/run", "both"),
        ("postgres://coffer@/notes?host=/a&host=/b", "more than once"),
        ("postgres://coffer@/notes?host", "no value"),
        ("postgres://coffer@db/notes#frag", "fragment"),
        ("postgres://a@b@db/notes", "more than one '@'"),
        ("postgres://co ffer@db/notes", "percent-encoded"),
        ("postgres://coffer@db/no%2", "hex"),
        ("postgres://coffer@db/no%zz", "hex"),
        ("postgres://coffer@db/%00", "NUL"),
        ("postgres://coffer@db/%FF", "UTF-8"),
        ("postgres://coffer@d%62/notes", "host"),
        ("postgres://coffer@::1/notes", "IPv6"),
        ("postgres://coffer@[db]/notes", "IPv6"),
        ("postgres://coffer@[::1/notes", "']'"),
        ("postgres://coffer@db/" + String(repeating: "n", count: 64), "63"),
    ])
    func refusals(text: String, reason: String) throws {
        let error = try #require(throws: StoreError.self) { try PostgresURL(text) }
        #expect(error.code == .invalidArguments)
        #expect(error.message.contains(reason), "\(error.message)")
        #expect(!error.message.contains("\n"))
    }

    @Test("a socket path of 108 bytes or more is refused; 107 is taken")
    func socketPathLength() throws {
        // "/.s.PGSQL.5432" is 14 bytes: a folder of 93 bytes makes a path of 107.
        let folder93 = "/" + String(repeating: "d", count: 92)
        let longest = try PostgresURL("postgres://u@/db?host=\(folder93)")
        #expect(longest.socketPath?.utf8.count == 107)

        let error = try #require(throws: StoreError.self) { try PostgresURL("postgres://u@/db?host=\(folder93)d") }
        #expect(error.code == .invalidArguments)
        #expect(error.message.contains("108 bytes"))
        #expect(error.message.contains("shorter"))
    }

    @Test("isPostgresURL tells a URL from a file path")
    func recognizes() {
        #expect(PostgresURL.isPostgresURL("postgres://u@h/d"))
        #expect(PostgresURL.isPostgresURL("postgresql://u@h/d"))
        #expect(!PostgresURL.isPostgresURL("team.sqlite"))
        #expect(!PostgresURL.isPostgresURL("./postgres:/x"))
    }
}

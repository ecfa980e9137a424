import CofferTestSupport
import CofferStoreTestSupport
import Foundation
import PostgresNIO
import Testing
@testable import CofferStore

@Suite("PostgresConnector")
struct PostgresConnectorTests {
    struct Refused: Error {}

    @Test("SELECT 1, and a bound value comes back as it went", .postgres)
    func select() async throws {
        try await PostgresTestServer.withDatabase { db in
            let one = try await db.query("SELECT 1")
            #expect(one.count == 1)
            #expect(try one[0].decode(Int.self) == 1)

            let text = "it's \"quoted\"; DROP TABLE x; -- é"
            let rows = try await db.query("SELECT \(text)::text, \(Int64(42))::bigint")
            let (back, number) = try rows[0].decode((String, Int64).self)
            #expect(back == text)
            #expect(number == 42)
        }
    }

    @Test("a transaction commits when its body returns and rolls back when it throws", .postgres)
    func transactions() async throws {
        try await PostgresTestServer.withDatabase { db in
            try await db.query("CREATE TABLE t (x integer NOT NULL)")
            let inserted = try await db.transaction { tx in
                try await tx.query("INSERT INTO t (x) VALUES (\(1))")
                return try await tx.query("SELECT count(*) FROM t")[0].decode(Int.self)
            }
            #expect(inserted == 1)

            await #expect(throws: Refused.self) {
                try await db.transaction { tx in
                    try await tx.query("INSERT INTO t (x) VALUES (\(2))")
                    // Inside the transaction the row is there...
                    #expect(try await tx.query("SELECT count(*) FROM t WHERE x = 2")[0].decode(Int.self) == 1)
                    throw Refused()
                }
            }
            // ...and after the rollback it is not.
            let values = try await db.query("SELECT x FROM t ORDER BY x").map { try $0.decode(Int.self) }
            #expect(values == [1])
        }
    }

    @Test("a server error is .internalError with its SQLSTATE, and the pool goes on", .postgres)
    func serverError() async throws {
        try await PostgresTestServer.withDatabase { db in
            let error = try await #require(throws: StoreError.self) { try await db.query("SELECT * FROM no_such_table") }
            #expect(error.code == .internalError)
            #expect(error.message.contains("42P01"))
            #expect(error.message.contains("no_such_table"))
            #expect(try await db.query("SELECT 1")[0].decode(Int.self) == 1)
        }
    }

    @Test("a statement over the query timeout is canceled by the server: .serviceUnavailable, and the pool goes on", .postgres)
    func queryTimeout() async throws {
        // The server's cancel must come back before the connector's own limit, 10 s later, even
        // on a busy machine.
        // (3 s, not less: the statement after it, on a busy machine, gets the same limit.)
        try await PostgresTestServer.withDatabase(timeouts: .init(connect: .seconds(10), query: .seconds(3), unanswered: .seconds(10))) { db in
            let error = try await endsLike(.seconds(3)) {
                try await #require(throws: StoreError.self) { try await db.query("SELECT pg_sleep(30)") }
            }
            #expect(error.code == .serviceUnavailable)
            #expect(error.message.contains("longer than 3 s"), "\(error.message)")
            #expect(try await db.query("SELECT 1")[0].decode(Int.self) == 1)
        }
    }

    @Test("a server that does not answer a statement: the connection is closed, .serviceUnavailable, the pool goes on",
          .postgres)
    func unanswered() async throws {
        // (A query timeout of 3 s: the statement after it, on a busy machine, gets the same limit.)
        try await PostgresTestServer.withDatabase(timeouts: .init(connect: .seconds(10), query: .seconds(3), unanswered: .seconds(5))) { db in
            let error = try await endsLike(.seconds(8)) {
                try await #require(throws: StoreError.self) {
                    try await db.transaction { tx in
                        // Only the server's own timeout is turned off here: the connector's still holds.
                        try await tx.query("SET LOCAL statement_timeout = 0")
                        try await tx.query("SELECT pg_sleep(30)")
                    }
                }
            }
            #expect(error.code == .serviceUnavailable)
            #expect(error.message.contains("did not answer"), "\(error.message)")
            #expect(try await db.query("SELECT 1")[0].decode(Int.self) == 1)
        }
    }

    @Test("COLLATE \"C\" orders text as its UTF-8 bytes", .postgres)
    func collateC() async throws {
        try await PostgresTestServer.withDatabase { db in
            let words = ["é", "a", "B", "b", "Z", "ab", "A"]
            try await db.query("CREATE TABLE w (x text NOT NULL)")
            for word in words {
                try await db.query("INSERT INTO w (x) VALUES (\(word))")
            }
            let ordered = try await db.query(#"SELECT x FROM w ORDER BY x COLLATE "C""#).map { try $0.decode(String.self) }
            let bytewise = words.sorted { Array($0.utf8).lexicographicallyPrecedes(Array($1.utf8)) }
            #expect(ordered == bytewise)
            #expect(ordered == ["A", "B", "Z", "a", "ab", "b", "é"])

            // A linguistic collation, where the server has one, orders otherwise: COLLATE "C" is what makes the order.
            let icu = try await db.query("SELECT count(*) FROM pg_collation WHERE collname = 'und-x-icu'")[0].decode(Int.self)
            if icu == 1 {
                let linguistic = try await db.query(#"SELECT x FROM w ORDER BY x COLLATE "und-x-icu""#)
                    .map { try $0.decode(String.self) }
                #expect(linguistic != bytewise)
            }
        }
    }

    @Test("no server behind a socket folder: .serviceUnavailable naming the socket, within seconds")
    func noServerOnSocket() async throws {
        try await withTemporaryFolder { folder in
            let socketFolder = folder.path
            let url = try PostgresURL("postgres://coffer@/notes?host=\(socketFolder)")
            try await expectUnavailable(url, naming: "socket \(socketFolder)/.s.PGSQL.5432")
        }
    }

    @Test("nothing listening on a TCP port: .serviceUnavailable naming host and port, within seconds")
    func noServerOnPort() async throws {
        let port = try unusedLoopbackPort()
        let url = try PostgresURL("postgres://coffer@127.0.0.1:\(port)/notes")
        try await expectUnavailable(url, naming: "127.0.0.1:\(port)")
    }

    @Test("a closed connector gives .serviceUnavailable", .postgres)
    func closed() async throws {
        let url = try PostgresTestServer.url()
        let db = PostgresConnector(url: url, password: PostgresPassword.lookup(for: url))
        #expect(try await db.query("SELECT 1")[0].decode(Int.self) == 1)
        await db.close()
        let error = try await #require(throws: StoreError.self) { try await db.query("SELECT 1") }
        #expect(error.code == .serviceUnavailable)
    }

    func expectUnavailable(_ url: PostgresURL, naming server: String) async throws {
        let db = PostgresConnector(url: url, password: nil, timeouts: .init(connect: .seconds(2), query: .seconds(2)))
        let error = try await endsLike(.seconds(2)) {
            try await #require(throws: StoreError.self) { try await db.query("SELECT 1") }
        }
        #expect(error.code == .serviceUnavailable)
        #expect(error.message.contains(server), "\(error.message)")
        #expect(error.message.contains("check that the server is running"))
        await db.close()
    }

    /// The result of `operation`, which should end after about `expected` (a timeout), checking
    /// that it took at most 5 s more than a plain `Task.sleep(for: expected)` started beside it,
    /// plus half again as much as that sleep was late. The whole suite keeps the few threads of a
    /// small machine busy (the CLI tests wait for their child processes on them: a plain sleep
    /// of 2 s was seen to end after 158 s), and then both wait for threads, the operation once for
    /// each of its steps; a hang would not end at all.
    func endsLike<T>(_ expected: Duration, _ operation: () async throws -> T) async throws -> T {
        let clock = ContinuousClock()
        let start = clock.now
        async let control: Duration = {
            try? await Task.sleep(for: expected)
            return clock.now - start
        }()
        let result = try await operation()
        let elapsed = clock.now - start
        let plainSleep = await control
        let late = max(plainSleep - expected, .zero)
        #expect(elapsed < max(plainSleep, expected) + .seconds(5) + late / 2, "a plain sleep of \(expected) took \(plainSleep)")
        return result
    }

    /// A loopback port that nothing listens on: one the kernel just gave out, then closed.
    func unusedLoopbackPort() throws -> Int {
        let socket = try #require(loopbackSocket(listening: false))
        close(socket.fd)
        return socket.port
    }
}

import Logging
import PostgresNIO
import Synchronization

/// A PostgreSQL server reached through postgres-nio's connection pool (`PostgresClient`), with
/// timeouts of its own, so that a server that cannot be reached or stops answering gives
/// ``StoreError/Code-swift.enum/serviceUnavailable`` instead of a hang.
///
/// ```swift
/// let url = try PostgresURL("postgres://coffer@/coffer?host=/run/postgresql")
/// let connector = PostgresConnector(url: url, password: PostgresPassword.lookup(for: url), logger: logger)
/// defer { Task { await connector.close() } }   // or `await connector.close()` when done
/// let rows = try await connector.query("SELECT name FROM zones WHERE owner = \(owner)")
/// try await connector.transaction { tx in
///     try await tx.query("INSERT INTO zones (name, owner) VALUES (\(name), \(owner))")
/// }
/// ```
///
/// The pool's background work (`PostgresClient.run()`) runs in a task that the connector starts
/// and holds; the library starts no thread of its own (postgres-nio's event loops serve the
/// sockets). An embedder shuts it down with ``close()``, which cancels that task and waits for
/// the pool to close its connections; queries after that fail with `.serviceUnavailable`.
///
/// Timeouts: connecting (leasing a connection from the pool, which opens one when none is idle)
/// gives up after ``Timeouts/connect``. A statement gets ``Timeouts/query``: the server cancels it
/// then (`statement_timeout`, set for every connection), and should the server not answer at all,
/// the connector closes the connection ``Timeouts/unanswered`` later (2 s by default); the pool
/// opens a new one for the next query.
package final class PostgresConnector: Sendable {
    package struct Timeouts: Sendable {
        /// How long to wait for a connection.
        package var connect: Duration
        /// How long one statement may run.
        package var query: Duration
        /// How long after `query` a statement the server has not answered at all is given up.
        package var unanswered: Duration

        package init(connect: Duration = .seconds(10), query: Duration = .seconds(30), unanswered: Duration = .seconds(2)) {
            self.connect = connect
            self.query = query
            self.unanswered = unanswered
        }
    }

    package let url: PostgresURL
    package let timeouts: Timeouts
    package let client: PostgresClient
    let logger: Logger
    private let running: Task<Void, Never>
    private let closed = Flag()

    /// Starts a pool for `url`; it connects on the first query.
    ///
    /// - Parameters:
    ///   - password: from ``PostgresPassword/lookup(for:environment:logger:)``; nil for none.
    ///   - logger: the pool's background messages and the connector's own; never a password.
    package init(url: PostgresURL, password: String?, timeouts: Timeouts = Timeouts(),
                 logger: Logger = Logger(label: "coffer.postgres", factory: { _ in SwiftLogNoOpLogHandler() })) {
        var configuration: PostgresClient.Configuration
        switch url.endpoint {
        case .tcp(let host, let port):
            configuration = .init(host: host, port: port, username: url.user, password: password,
                                  database: url.database, tls: .prefer(.makeClientConfiguration()))
        case .unixSocket:
            configuration = .init(unixSocketPath: url.socketPath ?? "", username: url.user, password: password,
                                  database: url.database)
        }
        configuration.options.connectTimeout = timeouts.connect
        configuration.options.additionalStartupParameters = [
            ("application_name", "coffer"),
            ("statement_timeout", String(Self.milliseconds(timeouts.query))),
        ]
        let client = PostgresClient(configuration: configuration, backgroundLogger: logger)
        self.url = url
        self.timeouts = timeouts
        self.client = client
        self.logger = logger
        self.running = Task { await client.run() }
    }

    deinit {
        running.cancel()
    }

    /// Closes the pool: cancels its background task and waits until it has ended.
    package func close() async {
        closed.set()
        running.cancel()
        await running.value
    }

    /// Runs one statement on a connection of the pool and returns all its rows.
    ///
    /// ```swift
    /// let rows = try await connector.query("SELECT seq FROM log WHERE zone = \(zone) ORDER BY seq")
    /// for row in rows { let seq = try row.decode(Int64.self) }
    /// ```
    ///
    /// - Parameter query: SQL with its binds (`\(value)` in the literal becomes `$1`, `$2`, …).
    /// - Throws: ``StoreError``: `.serviceUnavailable` when the server cannot be reached or does
    ///   not answer in time; `.internalError` for an error the server reports.
    @discardableResult
    package func query(_ query: PostgresQuery) async throws -> [PostgresRow] {
        try await withConnection { connection in
            try await self.run(query, on: connection)
        }
    }

    /// Runs `body` in a transaction on one connection: `BEGIN`, then `COMMIT` when `body`
    /// returns, `ROLLBACK` when it throws (the error is rethrown).
    ///
    /// ```swift
    /// let next = try await connector.transaction { tx in
    ///     let rows = try await tx.query("SELECT next_seq FROM zones WHERE id = \(zone) FOR UPDATE")
    ///     ...
    /// }
    /// ```
    ///
    /// - Parameter body: its ``PostgresTransaction`` must not be used after `body` returns.
    /// - Throws: what `body` throws, or ``StoreError`` as for ``query(_:)``.
    package func transaction<Result: Sendable>(
        _ body: @escaping @Sendable (PostgresTransaction) async throws -> Result
    ) async throws -> Result {
        // A connection the server closed while it sat in the pool fails at `BEGIN`, before
        // anything of the transaction was sent: run it on another (the pool drops closed ones).
        // A server that ended every connection at once (a restart, an administrator) leaves as
        // many dead ones as the pool held, each failing at once: try past them all.
        for _ in 0..<Self.maxNotBegun {
            do { return try await transactionOnce(body) } catch is NotBegun { continue }
        }
        do { return try await transactionOnce(body) } catch let notBegun as NotBegun { throw notBegun.error }
    }

    private func transactionOnce<Result: Sendable>(
        _ body: @escaping @Sendable (PostgresTransaction) async throws -> Result
    ) async throws -> Result {
        try await withConnection { connection in
            let transaction = PostgresTransaction(connection: connection, connector: self)
            do { try await transaction.query("BEGIN") } catch { throw NotBegun(error: error) }
            let result: Result
            do {
                result = try await body(transaction)
            } catch {
                do {
                    try await transaction.query("ROLLBACK")
                } catch {
                    // A connection left inside a transaction must not go back to the pool.
                    try? await connection.close()
                }
                throw error
            }
            try await transaction.query("COMMIT")
            return result
        }
    }

    /// Leases a connection for `body`, giving up on the lease after the connect timeout.
    func withConnection<Result: Sendable>(
        _ body: @escaping @Sendable (PostgresConnection) async throws -> Result
    ) async throws -> Result {
        guard !closed.isSet else {
            throw StoreError(.serviceUnavailable, "the connections to PostgreSQL at \(url.serverDescription) are closed")
        }
        let leased = Flag()
        do {
            return try await withThrowingTaskGroup(of: Result?.self) { group in
                group.addTask { [client] in
                    try await client.withConnection { connection in
                        leased.set()
                        return try await body(connection)
                    }
                }
                group.addTask { [timeouts] in
                    try await Task.sleep(for: timeouts.connect)
                    if leased.isSet { return nil }
                    throw ConnectTimeout()
                }
                while let next = try await group.next() {
                    if let result = next {
                        group.cancelAll()
                        return result
                    }
                }
                preconditionFailure("the lease ended without a result")
            }
        } catch is ConnectTimeout {
            throw StoreError(.serviceUnavailable, "PostgreSQL at \(url.serverDescription) cannot be reached: no connection within "
                + "\(Self.seconds(timeouts.connect)); check that the server is running and listening there, and that user "
                + "'\(Names.printable(url.user))' may log in to database '\(Names.printable(url.database))'")
        } catch {
            throw storeError(error)
        }
    }

    struct ConnectTimeout: Error {}

    /// A transaction whose `BEGIN` failed (a pooled connection the server had closed, say):
    /// nothing of it reached the database, so it may be run again on another connection.
    /// How many transactions whose `BEGIN` failed are run again on another connection: more
    /// than the pool holds.
    static let maxNotBegun = 40

    package struct NotBegun: Error {
        let error: any Error
    }

    /// Set once a connection is leased: the connect timeout no longer applies.
    final class Flag: Sendable {
        private let value = Mutex(false)
        var isSet: Bool { value.withLock { $0 } }
        func set() { value.withLock { $0 = true } }
    }

    static func milliseconds(_ duration: Duration) -> Int64 {
        let (seconds, attoseconds) = duration.components
        return max(1, seconds * 1000 + attoseconds / 1_000_000_000_000_000)
    }

    static func seconds(_ duration: Duration) -> String {
        let milliseconds = milliseconds(duration)
        return milliseconds % 1000 == 0 ? "\(milliseconds / 1000) s" : "\(milliseconds) ms"
    }
}

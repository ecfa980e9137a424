import PostgresNIO

/// The connection a ``PostgresConnector/transaction(_:)`` body runs its statements on, between
/// its `BEGIN` and its `COMMIT` or `ROLLBACK`. It must not be kept after the body returns.
package struct PostgresTransaction: Sendable {
    let connection: PostgresConnection
    let connector: PostgresConnector

    /// Runs one statement in the transaction and returns all its rows, with the connector's
    /// query timeout (see ``PostgresConnector/query(_:)``).
    @discardableResult
    package func query(_ query: PostgresQuery) async throws -> [PostgresRow] {
        try await connector.run(query, on: connection)
    }
}

extension PostgresConnector {
    /// Runs `query` on `connection`. When the server has not answered by the query timeout plus
    /// ``Timeouts/unanswered``, the connection is closed (which ends the wait; the pool replaces it).
    func run(_ query: PostgresQuery, on connection: PostgresConnection) async throws -> [PostgresRow] {
        struct Unanswered: Error {}
        let limit = timeouts.query + timeouts.unanswered
        // A statement written to a closed connection would wait for an answer that never comes.
        guard !connection.isClosed else {
            throw StoreError(.serviceUnavailable, "the connection to PostgreSQL at \(url.serverDescription) is closed; "
                + "check that the server is running")
        }
        do {
            return try await withThrowingTaskGroup(of: [PostgresRow]?.self) { group in
                group.addTask { [logger] in
                    try await Self.abandonedOnCancel { try await connection.query(query, logger: logger).collect() }
                }
                group.addTask {
                    try await Task.sleep(for: limit)
                    return nil
                }
                guard let first = try await group.next(), let rows = first else {
                    try? await connection.close()
                    throw Unanswered()
                }
                group.cancelAll()
                return rows
            }
        } catch is Unanswered {
            throw StoreError(.serviceUnavailable, "PostgreSQL at \(url.serverDescription) did not answer a statement within "
                + "\(Self.seconds(limit)): check that the server is running and the network to it")
        } catch {
            throw storeError(error)
        }
    }

    /// The result of `operation`, run in a task of its own; when the waiting task is cancelled,
    /// the wait ends at once and `operation` is cancelled and left to end. (A statement written
    /// to a connection as it closes may never be answered; a task group would wait for it.)
    static func abandonedOnCancel<T: Sendable>(_ operation: @escaping @Sendable () async throws -> T) async throws -> T {
        let (results, continuation) = AsyncThrowingStream<T, any Error>.makeStream()
        let work = Task {
            do {
                continuation.yield(try await operation())
                continuation.finish()
            } catch {
                continuation.finish(throwing: error)
            }
        }
        continuation.onTermination = { _ in work.cancel() }
        for try await result in results {
            return result
        }
        throw CancellationError()
    }

    /// A postgres-nio error as a ``StoreError`` naming the server; other errors (a
    /// ``StoreError`` already, a cancellation, a transaction body's own) unchanged.
    func storeError(_ error: any Error) -> any Error {
        guard let error = error as? PSQLError else { return error }
        let server = url.serverDescription
        switch error.code {
        case .server:
            let state = error.serverInfo?[.sqlState] ?? "?"
            let message = Names.printable(error.serverInfo?[.message] ?? "no message")
            if state == "57014" {
                return StoreError(.serviceUnavailable, "a statement on PostgreSQL at \(server) ran longer than "
                    + "\(Self.seconds(timeouts.query)) and was canceled (\(message))", underlying: error)
            }
            if state.hasPrefix("08") || state.hasPrefix("57P") {
                return StoreError(.serviceUnavailable, "PostgreSQL at \(server) stopped serving the connection: \(message) "
                    + "(SQLSTATE \(state)); check that the server is running", underlying: error)
            }
            return StoreError(.internalError, "PostgreSQL at \(server) refused a statement: \(message) (SQLSTATE \(state))",
                              underlying: error)
        case .connectionError, .serverClosedConnection, .clientClosedConnection, .uncleanShutdown, .poolClosed:
            return StoreError(.serviceUnavailable, "the connection to PostgreSQL at \(server) was lost or is closed "
                + "(\(error.code)); check that the server is running", underlying: error)
        default:
            return StoreError(.internalError, "PostgreSQL at \(server) failed: \(error.code)", underlying: error)
        }
    }
}

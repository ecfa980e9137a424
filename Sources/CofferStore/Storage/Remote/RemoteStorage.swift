import AsyncHTTPClient
import CofferCrypto
import CofferVault
import Foundation
import Logging
import NIOCore
import NIOHTTP1

/// The client of a Coffer server: a ``SnapshotDriver`` whose fetches and batches are HTTP
/// requests (`storage/read`, `records/modify`), each signed by the user's identity key
/// (``RequestSignature``). The engine verifies everything the server returns as it would a
/// local store's rows: the server is trusted for availability only.
///
/// A batch is sent with an operation id of its own; a request whose answer is lost is sent
/// again with the same id, and the server applies it once. A batch that lost a race for a
/// zone's head (another writer's commit landed first) runs again on fresh reads, which signs
/// its entry again on the new head.
final class RemoteStorage: SnapshotDriver {
    let server: URL
    let vault: Vault
    let logger: Logger
    let timeout: Duration
    /// The server's change counter as last seen (for ``waitForChange(upTo:)``).
    private let counter = Locked<Int64?>(nil)
    /// How many answers to `records/modify` to drop after they arrived, as a network that
    /// loses them would (tests of a batch sent again).
    let answersToLose = Locked(0)
    /// Whether to keep the answers to `storage/read` (tests of a replayed answer).
    let keepsReadAnswers = Locked(false)
    /// The answers kept, oldest first.
    let readAnswers = Locked<[Data]>([])
    /// Answers to give for the next reads, in order, instead of asking the server, as a network
    /// or server that replays old answers would (tests).
    let replayedReadAnswers = Locked<[Data]>([])
    /// How often a batch whose answer was lost is sent again.
    static let resends = 2

    /// The process's HTTP client (on NIO's shared event loops, as PostgreSQL's connections are).
    /// A connection that cannot be made fails the request at once (a refused one) or after 10 s,
    /// rather than being tried again until the request's deadline: a server that cannot be
    /// reached is reported, never waited for.
    static let client: HTTPClient = {
        var configuration = HTTPClient.Configuration()
        configuration.connectionPool.retryConnectionEstablishment = false
        configuration.timeout.connect = .seconds(10)
        return HTTPClient(eventLoopGroup: HTTPClient.defaultEventLoopGroup, configuration: configuration)
    }()

    private init(server: URL, vault: Vault, timeout: Duration, logger: Logger) {
        self.server = server
        self.vault = vault
        self.timeout = timeout
        self.logger = logger
    }

    /// Connects: reads the store's id and publishes the user's own card (how the server comes
    /// to know them).
    static func open(server: URL, vault: Vault, timeout: Duration, logger: Logger) async throws -> (RemoteStorage, storeID: [UInt8]) {
        guard let scheme = server.scheme?.lowercased(), ["http", "https"].contains(scheme), server.host != nil else {
            throw StoreError(.invalidArguments, "a server is an http:// or https:// URL (got \(Names.printable(server.absoluteString)))")
        }
        let remote = RemoteStorage(server: server, vault: vault, timeout: timeout, logger: logger)
        let card = try ContactCard(vault: vault).jsonData()
        _ = try await remote.send("POST", RemoteAPI.Path.publish, body: try RemoteAPI.encoder.encode(RemoteAPI.Publish(card: card)))
        let info = try RemoteAPI.decode(RemoteAPI.Info.self, try await remote.send("GET", RemoteAPI.Path.info), what: "server's answer")
        guard info.storeID.count == 16 else { throw StoreError(.integrityFailure, "the server at \(remote.serverDescription) sent a store id that is not 16 bytes") }
        return (remote, Array(info.storeID))
    }

    var serverDescription: String {
        var text = "\(server.scheme ?? "http")://\(server.host ?? "?")"
        if let port = server.port { text += ":\(port)" }
        return text
    }

    var storeDescription: String { "a store on the server at \(serverDescription)" }

    func close() async {}

    // MARK: - SnapshotDriver

    func fetch(_ needs: [StorageSnapshot.Need], into snapshot: StorageSnapshot) async throws {
        let request = RemoteAPI.ReadRequest(needs: needs.map(WireNeed.init), basis: RemoteAPI.Basis(snapshot.basis))
        let data: Data
        if let replayed = replayedReadAnswers.withLock({ $0.isEmpty ? nil : $0.removeFirst() }) {
            data = replayed
        } else {
            data = try await send("POST", RemoteAPI.Path.read, body: try RemoteAPI.encoder.encode(request))
            if keepsReadAnswers.withLock({ $0 }) { readAnswers.withLock { $0.append(data) } }
        }
        let response: RemoteAPI.ReadResponse
        do { response = try RemoteAPI.decode(RemoteAPI.ReadResponse.self, data, what: "read") } catch let error as StoreError {
            throw StoreError(.integrityFailure, "the server at \(serverDescription) sent a read that is not valid: \(error.message)")
        }
        snapshot.absorb(try response.tables.tables(), moved: response.moved) { $0 }
    }

    func apply(_ writes: [StorageSnapshot.Write], operation: SnapshotOperation?) async throws {
        let request = RemoteAPI.ModifyRequest(operation: Data(SecureRandom.bytes(count: 16)), writes: writes.map(WireWrite.init))
        let body = try RemoteAPI.encoder.encode(request)
        var attempt = 0
        while true {
            do {
                _ = try await send("POST", RemoteAPI.Path.modify, body: body)
                let lose = answersToLose.withLock { count -> Bool in
                    guard count > 0 else { return false }
                    count -= 1
                    return true
                }
                if lose { throw StoreError(.serviceUnavailable, "the answer was lost", underlying: LostAnswer()) }
                return
            } catch let error as StoreError where error.underlying is LostAnswer && attempt < Self.resends {
                // The batch may have landed: the same operation id again is applied at most once.
                attempt += 1
                logger.debug("batch sent again", metadata: ["attempt": "\(attempt)"])
            }
        }
    }

    func waitForChange(upTo interval: Duration) async throws {
        let millis = max(0, Int(interval.components.seconds * 1000 + interval.components.attoseconds / 1_000_000_000_000_000))
        let after = counter.withLock { $0 } ?? -1
        let data = try await send("GET", RemoteAPI.Path.wait, query: "after=\(after)&timeout=\(after < 0 ? 0 : millis)",
                                  timeout: interval + .seconds(10))
        let response = try RemoteAPI.decode(RemoteAPI.WaitResponse.self, data, what: "server's answer")
        counter.withLock { $0 = response.counter }
        if after < 0 {
            // The first wait only learns where the counter is; wait from there.
            try await waitForChange(upTo: interval)
        }
    }

    // MARK: - HTTP

    /// A request that may have reached the server, whose answer did not arrive.
    struct LostAnswer: Error {}

    /// Sends a signed request and returns the body of a 200 answer.
    /// - Throws: the server's error as a ``StoreError`` (its code mapped), ``SnapshotConflict``
    ///   for a batch that lost a race, `.serviceUnavailable` when the server cannot be reached
    ///   or does not answer within the timeout.
    func send(_ method: String, _ path: String, query: String? = nil, body: Data = Data(), timeout: Duration? = nil) async throws -> Data {
        let target = path + (query.map { "?" + $0 } ?? "")
        var request = HTTPClientRequest(url: server.absoluteString.trimmingSuffix("/") + target)
        request.method = HTTPMethod(rawValue: method)
        for header in RequestSignature.sign(method: method, target: target, body: body, vault: vault).headers {
            request.headers.add(name: header.name, value: header.value)
        }
        if !body.isEmpty {
            request.headers.add(name: "Content-Type", value: "application/json")
            request.body = .bytes(ByteBuffer(bytes: body))
        }
        let limit = timeout ?? self.timeout
        let response: HTTPClientResponse
        var received: ByteBuffer
        do {
            response = try await Self.client.execute(request, timeout: .nanoseconds(Int64(limit.components.seconds) * 1_000_000_000
                                                                                        + limit.components.attoseconds / 1_000_000_000))
            received = try await response.body.collect(upTo: 1 << 30)
        } catch let error as HTTPClientError where [.connectTimeout, .remoteConnectionClosed, .readTimeout, .deadlineExceeded].contains(error) && method == "POST" {
            throw StoreError(.serviceUnavailable, "the server at \(serverDescription) did not answer within \(Self.seconds(limit)); try again",
                             underlying: LostAnswer())
        } catch {
            throw StoreError(.serviceUnavailable, "the server at \(serverDescription) cannot be reached (\(Self.describe(error))); check that it is running and the address",
                             underlying: error is CancellationError ? nil : LostAnswer())
        }
        let data = Data(received.readableBytesView)
        guard response.status == .ok else {
            let failure = try? JSONDecoder().decode(RemoteAPI.Failure.self, from: data)
            if response.status == .conflict, failure?.code == "conflict" { throw SnapshotConflict() }
            guard let failure, let code = RemoteAPI.codes[failure.code] else {
                throw StoreError(.serviceUnavailable, "the server at \(serverDescription) answered \(response.status.code) without a Coffer error")
            }
            throw StoreError(code, "the server at \(serverDescription) refused the request: \(Names.printable(failure.message))")
        }
        return data
    }

    static func seconds(_ d: Duration) -> String { "\(d.components.seconds) s" }

    /// An error of the HTTP client in a few words.
    static func describe(_ error: any Error) -> String {
        if let error = error as? HTTPClientError { return "\(error)" }
        if error is CancellationError { return "cancelled" }
        return String(describing: type(of: error))
    }
}

private extension String {
    func trimmingSuffix(_ suffix: String) -> String { hasSuffix(suffix) ? String(dropLast(suffix.count)) : self }
}

extension Store {
    /// A store on a Coffer server (`coffer serve`), acting as the vault's user: every request is
    /// signed by the vault's identity key, and everything the server returns is verified as a
    /// local store's rows are. Sessions of this store are of that user only.
    ///
    /// ```swift
    /// let store = try await Store(server: URL(string: "https://coffer.example.com")!, vault: alice)
    /// let session = try await store.openSession(vault: alice)
    /// ```
    /// - Parameters:
    ///   - server: the server's base URL (`http://` or `https://`).
    ///   - vault: the user the store acts as.
    ///   - timeout: how long one request may take before the server counts as unreachable.
    /// - Throws: `.serviceUnavailable` when the server cannot be reached; `.invalidArguments`
    ///   for a URL that is not http or https.
    public convenience init(server: URL, vault: Vault, timeout: Duration = .seconds(30), logger: Logger = Vault.disabledLogger) async throws {
        let (remote, storeID) = try await RemoteStorage.open(server: server, vault: vault, timeout: timeout, logger: logger)
        self.init(url: server, storeID: storeID, backend: .snapshot(remote), logger: logger)
        logger.debug("store opened", metadata: ["server": "\(remote.serverDescription)"])
    }
}

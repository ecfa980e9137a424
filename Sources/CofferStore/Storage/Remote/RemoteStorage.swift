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
    /// The origin dialled, named in every request's signature.
    let origin: ServerOrigin
    /// The store id pinned for ``origin``, named in every request's signature.
    let storeID: [UInt8]
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
    /// The handles this client's engine knows the server's zones by.
    let zones = ZoneHandles()
    /// How often a batch whose answer was lost is sent again.
    static let resends = 2
    /// The largest answer a client reads; a larger one is refused unread past this many bytes.
    static let maxAnswer = 128 << 20

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

    private init(server: URL, origin: ServerOrigin, storeID: [UInt8], vault: Vault, timeout: Duration, logger: Logger) {
        self.server = server
        self.origin = origin
        self.storeID = storeID
        self.vault = vault
        self.timeout = timeout
        self.logger = logger
    }

    /// Connects: reads the store's id (unsigned), checks it against the id the user pinned for
    /// this origin at first contact (pinning it now at a first contact), then publishes the
    /// user's own card (how the server comes to know them).
    /// - Throws: `.integrityFailure` when the origin is pinned to another store id, or the
    ///   store id to another origin.
    ///
    /// Requests go to `server`; they name `origin` (by default `server`'s), as a client reaching
    /// a server's public URL through a tunnel or straight at one instance would.
    /// With `connectTimeout`, the first request (the store's id) must be answered within it
    /// (a replica's client, which works offline rather than wait).
    static func open(server: URL, origin: ServerOrigin? = nil, vault: Vault, timeout: Duration, connectTimeout: Duration? = nil,
                     logger: Logger) async throws -> (RemoteStorage, storeID: [UInt8]) {
        _ = try ServerOrigin(server)
        let origin = try origin ?? ServerOrigin(server)
        let unsigned = RemoteStorage(server: server, origin: origin, storeID: [], vault: vault, timeout: timeout, logger: logger)
        let info = try RemoteAPI.decode(RemoteAPI.Info.self, try await unsigned.send("GET", RemoteAPI.Path.info, timeout: connectTimeout, signed: false), what: "server's answer")
        guard info.storeID.count == 16 else { throw StoreError(.integrityFailure, "the server at \(origin) sent a store id that is not 16 bytes") }
        let storeID = Array(info.storeID)
        let check: ServerPin.Check
        do { check = try vault.marks.checkPin(origin: origin.text, storeID: storeID) } catch let error as VaultError {
            throw StoreError(error.code == .busy ? .busy : .integrityFailure, "your marks file cannot be read or written: \(error.message)", underlying: error)
        }
        switch check {
        case .known, .pinned: break
        case .otherStore(let pinned):
            throw StoreError(.integrityFailure, "the server at \(origin) answers as store \(Hex.encode(storeID)), but you first met it as store \(Hex.encode(pinned)): it is another server, or its store was replaced; if it was moved or restored on purpose, run 'coffer server forget \(origin)' and connect again")
        case .pinnedElsewhere(let other):
            throw StoreError(.integrityFailure, "the server at \(origin) answers with the store id of the server you met at \(other): a server posing as another, or a store moved here; if it was moved on purpose, run 'coffer server forget \(other)' and connect again")
        }
        let remote = RemoteStorage(server: server, origin: origin, storeID: storeID, vault: vault, timeout: timeout, logger: logger)
        let card = ContactCard(vault: vault).jsonData()
        _ = try await remote.send("POST", RemoteAPI.Path.publish, body: try RemoteAPI.encoder.encode(RemoteAPI.Publish(card: card)))
        return (remote, storeID)
    }

    var serverDescription: String { origin.text }

    var storeDescription: String { "a store on the server at \(serverDescription)" }

    func close() async {}

    // MARK: - SnapshotDriver

    /// The names of one request's zones: the uid of each handle, and for a zone the engine is
    /// about to create (its handle reserved, its uid not sent yet) a random uid of the request's
    /// own, under which the server finds nothing.
    func requestNames() -> ZoneNames {
        let pending = Locked<(byHandle: [Int64: [UInt8]], byUID: [[UInt8]: Int64])>(([:], [:]))
        return ZoneNames(uid: { [zones] handle in
            if let uid = zones.uid(handle) { return uid }
            return pending.withLock { p in
                if let uid = p.byHandle[handle] { return uid }
                let uid = SecureRandom.bytes(count: ZoneNames.uidCount)
                p.byHandle[handle] = uid
                p.byUID[uid] = handle
                return uid
            }
        }, rowID: { [zones] uid in pending.withLock { $0.byUID[uid] } ?? zones.handle(uid) })
    }

    func fetch(_ needs: [StorageSnapshot.Need], into snapshot: StorageSnapshot) async throws {
        try await fetch(needs, into: snapshot, pin: nil)
    }

    /// A pin the server holds (see ``RemoteReadPin``), opened by its first fetch.
    func pinReads() async throws -> (any ReadPin)? { RemoteReadPin(remote: self) }

    /// Fetches `needs`; with `pin`, on the state the server pinned for it (asking for a pin at
    /// its first fetch), and notes the pin the server answered on.
    func fetch(_ needs: [StorageSnapshot.Need], into snapshot: StorageSnapshot, pin: RemoteReadPin?) async throws {
        // A server takes at most `RemoteAPI.maxNeeds` reads a request (an audit of a zone of
        // 100,000 commits misses each one's lists): more go in several requests, each on the
        // state those before it read (its basis says what they read), or on the pin. One that
        // finds the state moved ends the fetch: the operation starts over.
        if needs.count > RemoteAPI.maxNeeds {
            for start in stride(from: 0, to: needs.count, by: RemoteAPI.maxNeeds) {
                try await fetch(Array(needs[start..<min(start + RemoteAPI.maxNeeds, needs.count)]), into: snapshot, pin: pin)
                if snapshot.lastFetchMoved { return }
            }
            return
        }
        // A zone about to be created gets its handle here: no server is asked for a row id.
        var reserved = [ZoneID: Int64]()
        for case .newZoneID(let id) in needs { reserved[id] = zones.reserve() }
        let asked = needs.filter { if case .newZoneID = $0 { false } else { true } }
        guard !asked.isEmpty else {
            var tables = StorageSnapshot.Tables<StoredRow>()
            tables.newZoneIDs = reserved
            snapshot.absorb(tables, moved: false) { $0 }
            return
        }
        let names = requestNames()
        let request = RemoteAPI.ReadRequest(needs: try asked.map { try WireNeed($0, names) }, basis: try RemoteAPI.Basis(snapshot.basis, names),
                                            pin: pin.map { $0.id.withLock { $0 } ?? RemoteAPI.newPin })
        let data: Data
        if let replayed = replayedReadAnswers.withLock({ $0.isEmpty ? nil : $0.removeFirst() }) {
            data = replayed
        } else {
            data = try await send("POST", RemoteAPI.Path.read, body: try RemoteAPI.wire(request))
            if keepsReadAnswers.withLock({ $0 }) { readAnswers.withLock { $0.append(data) } }
        }
        let response: RemoteAPI.ReadResponse
        do { response = try RemoteAPI.decode(RemoteAPI.ReadResponse.self, data, what: "read") } catch let error as StoreError {
            throw StoreError(.integrityFailure, "the server at \(serverDescription) sent a read that is not valid: \(error.message)")
        }
        var tables: StorageSnapshot.Tables<StoredRow>
        do { tables = try response.tables.tables(names) } catch let error as StoreError {
            throw StoreError(.integrityFailure, "the server at \(serverDescription) sent a read that is not valid: \(error.message)")
        }
        tables.newZoneIDs = reserved
        if let pin {
            // A pin the server dropped (expired, or one too many) is opened again there: the
            // answer then says whether the state moved on since.
            pin.id.withLock { $0 = response.pin }
        }
        snapshot.absorb(tables, moved: response.moved) { $0 }
    }

    /// Asks the server to release a pin.
    func unpin(_ id: String) async throws {
        let request = RemoteAPI.ReadRequest(needs: [], basis: RemoteAPI.Basis(), unpin: id)
        _ = try await send("POST", RemoteAPI.Path.read, body: try RemoteAPI.wire(request))
    }

    /// Given, each batch the server applied (its answer received) is added to it: how a push
    /// learns the rows its commits wrote, to keep them in the replica without fetching them back.
    @TaskLocal static var appliedBatches: Locked<[[StorageSnapshot.Write]]>?

    func apply(_ writes: [StorageSnapshot.Write], operation: SnapshotOperation?) async throws {
        // A zone the batch creates is named from now on by the uid it is created with.
        for case .insertZone(let handle, let uid, _, _) in writes { zones.bind(handle, to: uid) }
        let names = requestNames()
        let request = RemoteAPI.ModifyRequest(operation: Data(SecureRandom.bytes(count: 16)), writes: try writes.map { try WireWrite($0, names) })
        let body = try RemoteAPI.wire(request)
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
                Self.appliedBatches?.withLock { $0.append(writes) }
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
    func send(_ method: String, _ path: String, query: String? = nil, body: Data = Data(), timeout: Duration? = nil,
              signed: Bool = true) async throws -> Data {
        let target = path + (query.map { "?" + $0 } ?? "")
        var request = HTTPClientRequest(url: server.absoluteString.trimmingSuffix("/") + target)
        request.method = HTTPMethod(rawValue: method)
        if signed {
            let signature = RequestSignature.sign(method: method, target: target, body: body, vault: vault, origin: origin, storeID: storeID)
            for header in signature.headers { request.headers.add(name: header.name, value: header.value) }
        }
        if !body.isEmpty {
            request.headers.add(name: "Content-Type", value: WireBinary.isBinary(body) ? RemoteAPI.binaryType : "application/json")
            request.body = .bytes(ByteBuffer(bytes: body))
        }
        let limit = timeout ?? self.timeout
        let response: HTTPClientResponse
        var received: ByteBuffer
        do {
            response = try await Self.client.execute(request, timeout: .nanoseconds(Int64(limit.components.seconds) * 1_000_000_000
                                                                                        + limit.components.attoseconds / 1_000_000_000))
            do { received = try await response.body.collect(upTo: Self.maxAnswer) } catch is NIOTooManyBytesError {
                throw StoreError(.limitExceeded, "the server at \(serverDescription) sent an answer over \(Self.maxAnswer >> 20) MiB; it was refused unread")
            }
        } catch let error as StoreError {
            throw error
        } catch let error as HTTPClientError where [.connectTimeout, .remoteConnectionClosed, .readTimeout, .deadlineExceeded].contains(error) && method == "POST" {
            throw StoreError(.serviceUnavailable, "the server at \(serverDescription) did not answer within \(Self.seconds(limit)); try again",
                             underlying: LostAnswer())
        } catch {
            // A task cancelled mid-request is not a server away: whoever cancelled it ends
            // quietly (a change stream finishes) rather than report the server unreachable.
            if error is CancellationError || Task.isCancelled { throw CancellationError() }
            throw StoreError(.serviceUnavailable, "the server at \(serverDescription) cannot be reached (\(Self.describe(error))); check that it is running and the address",
                             underlying: LostAnswer())
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

/// A pin of a server's store (see ``ReadPin``): the server holds one read of its store open for
/// this client, named by an id it hands out at the first fetch, until the client releases it or
/// it expires there (a fetch on an expired pin is answered on a new one, and says whether the
/// store moved on).
final class RemoteReadPin: ReadPin {
    let remote: RemoteStorage
    /// The server's name for the pin; nil until the first fetch opens one (or when the server
    /// answered without one: it holds as many as it will).
    let id = Locked<String?>(nil)

    init(remote: RemoteStorage) { self.remote = remote }

    func fetch(_ needs: [StorageSnapshot.Need], into snapshot: StorageSnapshot) async throws {
        try await remote.fetch(needs, into: snapshot, pin: self)
    }

    /// Tells the server the pin is still in use (a read of nothing on it), so that it does not
    /// expire while the client works between two reads.
    func keepAlive() async {
        guard let held = id.withLock({ $0 }) else { return }
        let request = RemoteAPI.ReadRequest(needs: [], basis: RemoteAPI.Basis(), pin: held)
        do { _ = try await remote.send("POST", RemoteAPI.Path.read, body: try RemoteAPI.wire(request)) } catch {
            remote.logger.debug("a read pin was not kept alive", metadata: ["error": "\(error)"])
        }
    }

    /// Releases the server's pin; a server that cannot be reached lets it expire.
    func close() async {
        guard let held = id.withLock({ $0 }) else { return }
        id.withLock { $0 = nil }
        do { try await remote.unpin(held) } catch {
            remote.logger.debug("a read pin was left to expire", metadata: ["error": "\(error)"])
        }
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
    ///   - logger: where the store and its requests log (nothing by default).
    /// - Throws: `.serviceUnavailable` when the server cannot be reached; `.invalidArguments`
    ///   for a URL that is not http or https.
    public convenience init(server: URL, vault: Vault, timeout: Duration = .seconds(30), logger: Logger = Vault.disabledLogger) async throws {
        try await self.init(server: server, naming: nil, vault: vault, timeout: timeout, logger: logger)
    }

    /// A store on the server reached at `server` whose requests name the origin `origin`
    /// (another instance, or a tunnel, to a server whose public URL is `origin`).
    convenience init(server: URL, naming origin: URL?, vault: Vault, connectTimeout: Duration? = nil, timeout: Duration = .seconds(30),
                     logger: Logger = Vault.disabledLogger) async throws {
        let (remote, storeID) = try await RemoteStorage.open(server: server, origin: try origin.map { try ServerOrigin($0) }, vault: vault,
                                                             timeout: timeout, connectTimeout: connectTimeout, logger: logger)
        self.init(url: server, storeID: storeID, backend: .snapshot(remote), logger: logger)
        logger.debug("store opened", metadata: ["server": "\(remote.serverDescription)"])
    }
}

import Foundation

/// The bodies of a Coffer server's API (see `Docs/Server.md` and `Docs/openapi.yaml`), shared by
/// the server and its client. Every body is JSON; bytes are base64.
package enum RemoteAPI {
    /// The API's version, in every path (`/v1/…`).
    package static let version = "v1"
    /// The largest request body: the largest legal batch (400 records, 2 MB of fields) once
    /// sealed, hashed and encoded, with room for its log entry and keys.
    package static let maxBody = 4 * 1024 * 1024
    /// The most writes one `records/modify` request may carry (a batch's records, their
    /// tombstones and schema, a share's keys).
    package static let maxWrites = 4_000
    /// The most reads one `storage/read` request may carry.
    package static let maxNeeds = 1_000
    /// The most bytes of parts a user's stage holds (see ``StageRequest``): a server holds a
    /// stage's writes in memory while it checks and applies them.
    package static let maxStageBytes = 512 << 20
    /// The most parts a stage holds.
    package static let maxStageParts = 4_096

    package enum Path {
        package static let info = "/v1/store"
        package static let health = "/v1/health"
        // The signed routes, by resource.
        package static let contacts = "/v1/contacts"
        package static let storage = "/v1/storage"
        package static let records = "/v1/records"
        package static let changes = "/v1/changes"
        package static let publish = contacts + "/publish"
        package static let read = storage + "/read"
        package static let modify = records + "/modify"
        package static let stage = records + "/stage"
        package static let wait = changes + "/wait"
    }

    /// `GET /v1/store`.
    package struct Info: Codable, Sendable {
        package var storeID: Data
        package var api: String
        package init(storeID: Data, api: String) {
            self.storeID = storeID
            self.api = api
        }
    }

    /// `POST /v1/contacts/publish`: the caller's own self-signed card, signed by the key it holds.
    package struct Publish: Codable, Sendable {
        package var card: Data

        package init(card: Data) { self.card = card }
    }

    /// The client's ``StorageSnapshot/FetchBasis``, its zones named by their uids.
    package struct Basis: Codable, Sendable {
        package struct Head: Codable, Sendable { var zone: Data; var seq: Int64? }
        package var heads: [Head]
        package var zones: [Data]
        package var contacts: [String]

        package init(_ basis: StorageSnapshot.FetchBasis, _ names: ZoneNames) throws {
            heads = try basis.heads.sorted { $0.key < $1.key }.map { Head(zone: try names.uid($0.key), seq: $0.value) }
            zones = try basis.zones.sorted().map { try names.uid($0) }
            contacts = basis.contacts.sorted()
        }

        /// An empty basis (a request that reads nothing).
        package init() {
            heads = []
            zones = []
            contacts = []
        }

        /// Every zone the basis names, by uid.
        package var uids: [Data] { heads.map(\.zone) + zones }

        package func basis(_ names: ZoneNames) throws -> StorageSnapshot.FetchBasis {
            StorageSnapshot.FetchBasis(heads: Dictionary(try heads.map { (try names.rowID(wire: $0.zone, "a read's basis"), $0.seq) }, uniquingKeysWith: { a, _ in a }),
                                       zones: Set(try zones.map { try names.rowID(wire: $0, "a read's basis") }), contacts: Set(contacts))
        }
    }

    /// `POST /v1/storage/read`: reads of one state of the store.
    package struct ReadRequest: Codable, Sendable {
        package var needs: [WireNeed]
        package var basis: Basis
        /// Read on a pin: ``newPin`` to have one opened, or the id of one the server handed out.
        package var pin: String?
        /// The id of a pin to release once the reads are answered.
        package var unpin: String?

        init(needs: [WireNeed], basis: Basis, pin: String? = nil, unpin: String? = nil) {
            self.needs = needs
            self.basis = basis
            self.pin = pin
            self.unpin = unpin
        }
    }

    /// A read request's `pin` asking for a new pin.
    package static let newPin = "new"

    package struct ReadResponse: Codable, Sendable {
        package var tables: WireTables
        /// A zone the client read before moved on since: it drops what it read before.
        package var moved: Bool
        /// The pin the reads were made on (nil: none, the server holds as many as it will).
        package var pin: String?

        package init(tables: WireTables, moved: Bool, pin: String?) {
            self.tables = tables
            self.moved = moved
            self.pin = pin
        }
    }

    /// `POST /v1/records/modify`: one atomic batch of writes. `operation`: 16 random bytes the
    /// client picks per batch and sends again when it retries the same request; a batch whose
    /// operation was applied already is not applied again.
    package struct ModifyRequest: Codable, Sendable {
        package var operation: Data
        package var writes: [WireWrite]
    }

    package struct ModifyResponse: Codable, Sendable {
        /// True when the operation had been applied before (a retried request).
        package var replayed: Bool

        package init(replayed: Bool) { self.replayed = replayed }
    }

    /// `POST /v1/records/stage`: writes too many for one request, applied as one batch. A user
    /// has one stage on a server: parts (each a batch's writes, numbered from 0) put there one
    /// request at a time, kept until the stage is committed, replaced, or 7 days old; then a
    /// commit applies parts 0 to n - 1 as one atomic batch, checked as `records/modify` checks a
    /// batch. What a restore or a zone copy writes through a server, so that a run cut short
    /// leaves nothing, and a run again sends only the parts the server lacks.
    ///
    /// One of three requests:
    /// - `part` and `writes`: puts part `part` (replacing one of that number);
    /// - `commit` and `digest`: applies parts 0 to `commit` - 1 and empties the stage, when
    ///   `digest` is the BLAKE2b (16 bytes) of their hashes in order (see
    ///   ``StageResponse/parts``); `digest` is the batch's operation id, so a commit sent again
    ///   is applied once;
    /// - neither: asks what the stage holds.
    ///
    /// A commit may name its batch's operation id (`operation`, 16 bytes; `digest` otherwise),
    /// and a request that asks may name one too, to learn whether it was applied.
    package struct StageRequest: Codable, Sendable {
        package var part: Int?
        package var writes: [WireWrite]?
        package var commit: Int?
        package var digest: Data?
        package var operation: Data?
    }

    package struct StageResponse: Codable, Sendable {
        /// The BLAKE2b (16 bytes) of each part's request body the stage holds, from part 0 up to
        /// the first it lacks.
        package var parts: [Data]
        /// After a commit: the batch is applied (now, or by a commit sent before). Asked with an
        /// operation id: whether the batch of that id was applied.
        package var applied: Bool

        package init(parts: [Data], applied: Bool) {
            self.parts = parts
            self.applied = applied
        }
    }

    /// `GET /v1/changes/wait?after=N&timeout=MS`: answers once the server's change counter
    /// passes `after`, or after the timeout.
    package struct WaitResponse: Codable, Sendable {
        package var counter: Int64

        package init(counter: Int64) { self.counter = counter }
    }

    /// Every error: a code (a ``StoreError/Code`` name, or `conflict` for a batch that lost a
    /// race for a zone's head or a row it read: run it again on fresh reads) and a message.
    package struct Failure: Codable, Sendable {
        package var code: String
        package var message: String
        package init(code: String, message: String) {
            self.code = code
            self.message = message
        }
    }

    package static func name(_ code: StoreError.Code) -> String {
        switch code {
        case .serverRecordChanged: "serverRecordChanged"
        case .zoneNotFound: "zoneNotFound"
        case .unknownItem: "unknownItem"
        case .permissionFailure: "permissionFailure"
        case .changeTokenExpired: "changeTokenExpired"
        case .limitExceeded: "limitExceeded"
        case .partialFailure: "partialFailure"
        case .invalidArguments: "invalidArguments"
        case .integrityFailure: "integrityFailure"
        case .wrongPassphrase: "wrongPassphrase"
        case .referenceViolation: "referenceViolation"
        case .alreadyExists: "alreadyExists"
        case .busy: "busy"
        case .internalError: "internalError"
        case .serviceUnavailable: "serviceUnavailable"
        case .notSupported: "notSupported"
        }
    }

    package static let codes: [String: StoreError.Code] = Dictionary(uniqueKeysWithValues: [
        StoreError.Code.serverRecordChanged, .zoneNotFound, .unknownItem, .permissionFailure, .changeTokenExpired, .limitExceeded,
        .partialFailure, .invalidArguments, .integrityFailure, .wrongPassphrase, .referenceViolation, .alreadyExists, .busy,
        .internalError, .serviceUnavailable, .notSupported,
    ].map { (name($0), $0) })

    /// The HTTP status of an error.
    package static func status(_ code: StoreError.Code) -> Int {
        switch code {
        case .invalidArguments, .limitExceeded, .referenceViolation: 400
        case .permissionFailure, .wrongPassphrase: 403
        case .zoneNotFound, .unknownItem: 404
        case .serverRecordChanged, .alreadyExists: 409
        case .changeTokenExpired: 410
        case .busy, .serviceUnavailable: 503
        case .notSupported: 501
        case .integrityFailure, .partialFailure, .internalError: 500
        }
    }

    package static let encoder: JSONEncoder = {
        let e = JSONEncoder()
        e.outputFormatting = [.sortedKeys]
        return e
    }()

    /// The content type of a body in the binary encoding.
    package static let binaryType = "application/x-coffer-wire"

    /// A bulk message (a read's request or answer, a batch, a stage's part) in the binary
    /// encoding (``WireBinary``), which the server answers in kind.
    package static func wire<T: Encodable>(_ value: T) throws -> Data {
        try WireBinary.encode(value)
    }

    /// The answer to a request whose body was `request`: in the binary encoding for a binary
    /// request, JSON otherwise.
    package static func answer<T: Encodable>(_ value: T, to request: Data) throws -> Data {
        WireBinary.isBinary(request) ? try WireBinary.encode(value) : try encoder.encode(value)
    }

    /// Decodes a body, JSON or in the binary encoding (``WireBinary``, told by its first bytes),
    /// as `.invalidArguments` when it is not the `T` it should be, or holds a key `T` does not
    /// know (anywhere in it).
    package static func decode<T: Codable>(_ type: T.Type, _ data: Data, what: String) throws -> T {
        if WireBinary.isBinary(data) {
            do { return try WireBinary.decode(type, from: data) } catch {
                throw StoreError(.invalidArguments, "the \(what) is not valid: \(Self.describe(error, binary: true))")
            }
        }
        let value: T
        do { value = try JSONDecoder().decode(type, from: data) } catch {
            throw StoreError(.invalidArguments, "the \(what) is not valid: \(Self.describe(error))")
        }
        if let path = try unknownKey(in: data, decoded: value) {
            throw StoreError(.invalidArguments, "the \(what) is not valid: " + (path.isEmpty ? "malformed JSON" : "an unknown field at \(path)"))
        }
        return value
    }

    /// The path of a key of `data` that `value`, encoded again, does not have (a key whose value
    /// is null counts as absent); nil when there is none. Paths name arrays' elements as `[]`:
    /// each array holds one type, whose every key present is encoded again. Both are scanned as
    /// bytes, holding only their sets of paths (a read's answer of 100,000 log entries, read
    /// into two trees of objects to compare, took over 400 MB).
    package static func unknownKey<T: Encodable>(in data: Data, decoded value: T) throws -> String? {
        guard let original = keyPaths(data) else { return "" }
        guard let known = keyPaths(try encoder.encode(value)) else { return "" }
        return original.subtracting(known).map { String(decoding: $0, as: UTF8.self) }.min()
    }

    /// The paths of every key in the JSON text `data` whose value is not null (`.a.b[].c`), or
    /// nil when it is not JSON this scan reads (which a decoder took: so never, in practice).
    package static func keyPaths(_ data: Data) -> Set<[UInt8]>? {
        // Kept as one function: one scan of the JSON bytes, a state machine whose states share the cursor and
        // the path being built.
        data.withUnsafeBytes { raw -> Set<[UInt8]>? in
            let p = raw.bindMemory(to: UInt8.self)
            var i = 0, paths = Set<[UInt8]>(), path = [UInt8]()
            func isSpace(_ b: UInt8) -> Bool { b == 0x20 || b == 0x09 || b == 0x0a || b == 0x0d }
            func space() { while i < p.count, isSpace(p[i]) { i += 1 } }
            /// Skips a string at `i` (its opening quote); false when it does not end.
            func string() -> Bool {
                i += 1
                while i < p.count {
                    var nonASCII = false
                    i = JSONScan.plainWords(p, from: i, nonASCII: &nonASCII)
                    guard i < p.count else { return false }
                    switch p[i] {
                    case 0x22: i += 1; return true
                    case 0x5c: i += 2
                    default: i += 1
                    }
                }
                return false
            }
            func value(depth: Int) -> Bool {
                guard depth < 512 else { return false }
                space()
                guard i < p.count else { return false }
                switch p[i] {
                case 0x7b: // {
                    i += 1
                    space()
                    if i < p.count, p[i] == 0x7d { i += 1; return true }
                    while true {
                        space()
                        guard i < p.count, p[i] == 0x22 else { return false }
                        let start = i + 1
                        guard string() else { return false }
                        let key = p[start..<(i - 1)]
                        space()
                        guard i < p.count, p[i] == 0x3a else { return false }
                        i += 1
                        space()
                        let mark = path.count
                        path.append(0x2e)
                        path.append(contentsOf: key)
                        let isNull = i + 4 <= p.count && p[i] == 0x6e && p[i + 1] == 0x75 && p[i + 2] == 0x6c && p[i + 3] == 0x6c
                        if !isNull, !paths.contains(path) { paths.insert(path) }
                        guard value(depth: depth + 1) else { return false }
                        path.removeSubrange(mark...)
                        space()
                        guard i < p.count else { return false }
                        if p[i] == 0x2c { i += 1; continue }
                        if p[i] == 0x7d { i += 1; return true }
                        return false
                    }
                case 0x5b: // [
                    i += 1
                    space()
                    if i < p.count, p[i] == 0x5d { i += 1; return true }
                    path.append(contentsOf: [0x5b, 0x5d])
                    defer { path.removeLast(2) }
                    while true {
                        guard value(depth: depth + 1) else { return false }
                        space()
                        guard i < p.count else { return false }
                        if p[i] == 0x2c { i += 1; continue }
                        if p[i] == 0x5d { i += 1; return true }
                        return false
                    }
                case 0x22:
                    return string()
                default:
                    // A number, true, false or null: up to the next delimiter.
                    let start = i
                    while i < p.count, p[i] != 0x2c, p[i] != 0x7d, p[i] != 0x5d, !isSpace(p[i]) { i += 1 }
                    return i > start
                }
            }
            guard value(depth: 0) else { return nil }
            space()
            return i == p.count ? paths : nil
        }
    }

    /// A decoding error in a line, naming the field, never the value.
    package static func describe(_ error: any Error, binary: Bool = false) -> String {
        guard let error = error as? DecodingError else { return "malformed" }
        func path(_ context: DecodingError.Context) -> String {
            let p = context.codingPath.map { $0.intValue.map { "[\($0)]" } ?? ".\($0.stringValue)" }.joined()
            return p.isEmpty ? "" : " at \(p)"
        }
        switch error {
        case .typeMismatch(_, let c): return "a value of the wrong type\(path(c))"
        case .valueNotFound(_, let c): return "a missing value\(path(c))"
        case .keyNotFound(let key, let c): return "no '\(key.stringValue)'\(path(c))"
        case .dataCorrupted(let c): return binary ? "malformed (\(c.debugDescription))\(path(c))" : "malformed JSON\(path(c))"
        @unknown default: return "malformed"
        }
    }
}

import CofferCrypto
import CofferStore
import CofferVault
import Foundation
import Logging

/// What a Coffer server does with a local store, without an HTTP layer: it answers a client's
/// reads (``StorageSnapshot`` needs) and applies its batches of writes, after checking what can
/// be checked without any key:
/// - who may read a zone (its owner, the users its share lists, anyone while it has a public
///   link) and whose lists a user may read (their own);
/// - that each log entry extends the zone's head, is signed by the requester (or, for a zone
///   a batch creates, by whoever its verified log says), and is allowed by the zone's state as
///   its owner-signed log says (a read-only participant's or a removed member's commit fails);
/// - that every record row written or kept belongs to a commit of the same batch, whose signed
///   list of version hashes holds it (a kept row's hash with its stored creator and creation
///   time), and that every row deleted and every deleted mark removed is named by that commit's
///   signed list of names (a deletion as deleted, and marked for the change feeds at it);
/// - that a record entry's lists are the ones its body signs;
/// - that a zone's deletion notices come from its owner with an entry of theirs in the batch
///   (naming only users who took part), or from a participant about themselves with their
///   signed leaving (a notice names the zone by uid: its name and owner are the store's);
/// - that every record version's plain values follow the zone's schema;
/// - that only a zone's owner writes its keys and links, or deletes it (only with their signed
///   deletion entry, which the store keeps with the zone's genesis), and that its member lookup
///   (a cache) lists exactly whom its verified log names;
/// - that a contact card is self-signed.
/// Clients check everything again: a server is trusted for availability only.
package final class StorageHost: Sendable {
    package let store: Store
    let driver: any SnapshotDriver
    /// The nonces, operation ids, stages and zone lookups the server keeps in the store.
    let ledger: any ServerLedger
    let logger: Logger
    /// Wakes `changes/wait` requests when a batch of this process lands (other instances' batches
    /// wake them through PostgreSQL, or within the wait's poll).
    let signal = ChangeSignal()
    /// Each zone's state as its log verified, by row id: a cache, checked against the zone's
    /// uid and extended from its head on each use.
    private let states = Locked<[Int64: ZoneState]>([:])
    /// What users whose part in a zone ended (or who never had one) may read of it, by row id,
    /// as of the zone's head: a replay of the log from its genesis, kept until the head moves.
    private let endings = Locked<[Int64: (uid: [UInt8], head: Digest32, readings: [String: ZoneReading])]>([:])
    /// Verified signing keys by user id (a user id is the hash of its signing key: a card of
    /// that id never names another key).
    private let keys = Locked<[String: Ed25519.PublicKey]>([:])
    /// The (record type, fields) a query of this process made indexes for.
    private let indexed = Locked<Set<String>>([])
    /// Read pins held for clients, by the id handed out (see ``readPin(_:userID:)``).
    private let pins = Locked<[String: HostPin]>([:])
    /// When the nonce ledger was last pruned (seconds since 1970).
    private let pruned = Locked<Double>(0)

    private init(store: Store, driver: any SnapshotDriver, logger: Logger) throws {
        self.store = store
        self.driver = driver
        ledger = try store.localStorage(for: "serving")
        self.logger = logger
    }

    /// Opens the store a server keeps: an SQLite file (made if missing) or a `postgres://` URL.
    package static func open(_ location: String, logger: Logger) async throws -> StorageHost {
        let (store, driver) = try await Store.openServed(location, logger: logger)
        return try StorageHost(store: store, driver: driver, logger: logger)
    }

    package func close() async {
        let held = pins.withLock { pins in
            defer { pins = [:] }
            return pins.values.map(\.pin)
        }
        for pin in held { await pin.close() }
        await store.close()
    }

    package var storeID: [UInt8] { store.storeID }

    // MARK: - Users

    /// The verified signing key of a user whose card the store holds; nil for an unknown user.
    package func signingKey(of userID: String) async throws -> Ed25519.PublicKey? {
        if let key = keys.withLock({ $0[userID] }) { return key }
        guard UserIDs.isValid(userID) else { return nil }
        guard let key = try await store.verifiedSigningKey(of: userID) else { return nil }
        keys.withLock { $0[userID] = key }
        return key
    }

    /// Stores a user's own self-signed card (how a user becomes known), verified by
    /// ``publishedCard(_:)``; the request must be signed by the key it holds (the caller checked
    /// that signature against `card`'s key, which is why it passes `signedBy`).
    package func publish(_ card: ContactCard, signedBy userID: String) async throws {
        guard card.identity.userID == userID else { throw StoreError(.permissionFailure, "a user publishes only their own card") }
        _ = try await store.addContact(card)
        signal.signal()
    }

    /// The verified card a request publishes, whose key checks the request's signature before
    /// the card is stored (``publish(_:signedBy:)``).
    package static func publishedCard(_ body: Data) throws -> ContactCard {
        let request = try RemoteAPI.decode(RemoteAPI.Publish.self, body, what: "card")
        do {
            return try ContactCard.verify(request.card)
        } catch {
            throw StoreError(.invalidArguments, "the card does not verify: \(error)")
        }
    }

    /// Notes a signed request's nonce; false when the user sent it before (a replay). Nonces
    /// are kept twice the signature window, past which a request's date is refused anyway.
    package func noteNonce(_ nonce: [UInt8], userID: String, now: Date = Date()) async throws -> Bool {
        let seen = now.timeIntervalSince1970, horizon = seen - 2 * RequestSignature.window
        let prune = pruned.withLock { last in
            guard seen - last > 60 else { return false }
            last = seen
            return true
        }
        return try await ledger.noteNonce(nonce, userID: userID, seenAt: seen, forgetBefore: prune ? horizon : nil)
    }

    // MARK: - Reads

    /// Answers `storage/read` for `userID`.
    package func read(_ body: Data, userID: String) async throws -> Data {
        let request = try RemoteAPI.decode(RemoteAPI.ReadRequest.self, body, what: "read request")
        guard request.needs.count <= RemoteAPI.maxNeeds else {
            throw StoreError(.limitExceeded, "a read request carries at most \(RemoteAPI.maxNeeds) reads")
        }
        let names = try await zoneNames(Set(request.needs.compactMap(\.zone) + request.basis.uids))
        let needs = try request.needs.map { try $0.need(names.names) }
        for case .zoneUID(let uid) in needs where uid.count != 16 { throw StoreError(.invalidArguments, "operation zones/exists: 'uid' is 16 bytes") }
        for case .deletedZone(let uid) in needs where uid.count != 16 { throw StoreError(.invalidArguments, "operation zones/deleted: 'uid' is 16 bytes") }
        for case .shareZones(let uid) in needs where uid.count != 16 { throw StoreError(.invalidArguments, "operation shares/zones: 'uid' is 16 bytes") }
        let plan = try await authorize(needs, basis: try request.basis.basis(names.names), userID: userID)
        try await ensureIndexes(for: plan.needs)
        let snapshot = StorageSnapshot(writable: false)
        snapshot.presetBasis = plan.basis
        let pin = try await readPin(request.pin, userID: userID)
        if !plan.needs.isEmpty {
            if let pin {
                do { try await pin.pin.fetch(plan.needs, into: snapshot) } catch {
                    await release(pin.id, userID: userID)
                    throw error
                }
            } else {
                try await driver.fetch(plan.needs, into: snapshot)
            }
        }
        try await limit(&snapshot.fetched, to: plan, userID: userID)
        let response = RemoteAPI.ReadResponse(tables: try await names.wire(snapshot.fetched, host: self), moved: snapshot.lastFetchMoved,
                                              pin: pin?.id)
        if let unpin = request.unpin { await release(unpin, userID: userID) }
        return try RemoteAPI.answer(response, to: body)
    }

    // MARK: - Read pins

    /// A read of the store held open for one client across its requests (see ``ReadPin``).
    private struct HostPin: Sendable {
        let userID: String
        let opened: ContinuousClock.Instant
        let used: Locked<ContinuousClock.Instant>
        let pin: any ReadPin

        /// When the pin goes: ``pinIdle`` after its last use, and ``pinLifetime`` after it opened at the latest.
        var expiry: ContinuousClock.Instant { min(used.withLock { $0 } + StorageHost.pinIdle, opened + StorageHost.pinLifetime) }
    }

    /// How many pins one user may hold, and the server in all (past either, reads are answered
    /// without one), how long one lasts unused, and at most. Each holds a connection of the
    /// store's (and, on SQLite, keeps a checkpoint from recycling the write-ahead log past its
    /// state), so they are few and short: on PostgreSQL, at most half the pool's connections.
    var pinsPerUser: Int { store.isPostgres ? 4 : 8 }
    var maxPins: Int { store.isPostgres ? 8 : 32 }
    static let pinIdle: Duration = .seconds(30)
    static let pinLifetime: Duration = .seconds(600)

    /// The pin a read asks for: the caller's pin of that id, or a new one (for ``RemoteAPI/newPin``,
    /// or an id the server no longer holds); nil when the request asks for none, or the
    /// server holds as many as it will.
    private func readPin(_ requested: String?, userID: String) async throws -> (id: String, pin: any ReadPin)? {
        guard let requested else { return nil }
        let now = ContinuousClock.now
        if requested != RemoteAPI.newPin, let held = pins.withLock({ $0[requested] }), held.userID == userID, held.expiry > now {
            held.used.withLock { $0 = now }
            return (requested, held.pin)
        }
        let expired = pins.withLock { pins in
            pins.filter { $0.value.expiry <= now }.map(\.key).compactMap { pins.removeValue(forKey: $0)?.pin }
        }
        for pin in expired { await pin.close() }
        // A pin held is never taken away for another: past the limits, a read goes unpinned.
        let room = pins.withLock { pins in pins.count < maxPins && pins.values.count { $0.userID == userID } < pinsPerUser }
        guard room, let pin = try await driver.pinReads() else { return nil }
        let id = Base64URL.encode(SecureRandom.bytes(count: 16))
        pins.withLock { $0[id] = HostPin(userID: userID, opened: now, used: Locked(now), pin: pin) }
        // Released when it expires, whether or not the client releases it first.
        Task { [weak self] in
            while let expiry = self?.pins.withLock({ $0[id]?.expiry }) {
                if ContinuousClock.now >= expiry {
                    await self?.release(id, userID: nil)
                    return
                }
                try? await Task.sleep(until: expiry, clock: .continuous)
            }
        }
        return (id, pin)
    }

    /// Releases a pin of `userID`'s (nil: whoever holds it).
    private func release(_ id: String, userID: String?) async {
        let pin = pins.withLock { pins -> (any ReadPin)? in
            guard let held = pins[id], userID == nil || held.userID == userID else { return nil }
            return pins.removeValue(forKey: id)?.pin
        }
        await pin?.close()
    }

    /// The read pins held (tests).
    var pinCount: Int { pins.withLock { $0.count } }

    /// The zones a request names by uid, as this store has them (see ``HostZoneNames``).
    private func zoneNames(_ uids: Set<Data>) async throws -> HostZoneNames {
        for uid in uids where uid.count != ZoneNames.uidCount {
            throw StoreError(.invalidArguments, "a zone uid is \(ZoneNames.uidCount) bytes")
        }
        return HostZoneNames(try await zoneAccess(rowIDs: [], named: [], uids: Set(uids.map(Array.init))).values)
    }

    /// Makes the query indexes the store lacks for the fields a query filters or sorts on, as a
    /// store's own clients do (see `SchemaRegistry.ensureIndexes`): only for fields the zone's schema
    /// has as plain (SQLite), or that some zone's schema has as plain and queryable (PostgreSQL),
    /// so that a request cannot make the server index anything else.
    private func ensureIndexes(for needs: [StorageSnapshot.Need]) async throws {
        for case .query(let zone, let plan) in needs where !plan.predicates.isEmpty || !plan.sorts.isEmpty {
            let names = plan.fields.map(\.field)
            let key = plan.recordType + "\u{0}" + names.joined(separator: ",")
            guard !indexed.withLock({ $0.contains(key) }) else { continue }
            try await ledger.ensureQueryIndexes(zoneRowID: zone, recordType: plan.recordType, fields: names)
            indexed.withLock { _ = $0.insert(key) }
        }
    }

    /// What a read request may fetch for its user, and what is held back of what it fetches.
    struct ReadPlan {
        /// The needs to fetch: those asked for, less lookups of zones the user may not read.
        var needs: [StorageSnapshot.Need]
        /// Zones looked up by name that exist but are not the user's to read: answered as
        /// missing, as a zone the store does not have is.
        var hidden = [ZoneID]()
        /// Zones whose user's part ended: their log through the entry that ended it, no keys.
        var history = [Int64: (seq: Int64, hash: Digest32)]()
        /// What the client read before, as the fetch compares it with the store: a zone whose
        /// user's part ended does not move on for them (its head they read is its last one
        /// theirs), and one that gives them nothing is not compared.
        var basis: StorageSnapshot.FetchBasis
    }

    /// Refuses a read of what `userID` may not read (`.permissionFailure`), and says what to
    /// hold back of the rest. A zone's readers are those its verified log names (see
    /// ``ZoneReading``), never the member lookup its owner writes.
    private func authorize(_ needs: [StorageSnapshot.Need], basis: StorageSnapshot.FetchBasis, userID: String) async throws -> ReadPlan {
        var rowIDs = Set(basis.heads.keys).union(basis.zones), named = Set<ZoneID>()
        func own(_ id: String) throws {
            guard id == userID else { throw StoreError(.permissionFailure, "a user reads only their own zone lists and changes") }
        }
        for need in needs {
            switch need {
            case .ownedZones(let owner), .changedZones(let owner, _): try own(owner)
            case .newZoneID(let id): try own(id.ownerID)
            case .listingZones(let user), .sharedZones(let user), .changedSharedZones(let user, _), .zoneTombstones(let user, _, _): try own(user)
            case .zone(let id): named.insert(id)
            // A deleted zone's genesis and deletion, to anyone who names its uid: they hold no
            // rows and no keys, and a uid is not guessed.
            default: if let zone = need.zoneRowID { rowIDs.insert(zone) }
            }
        }
        var plan = ReadPlan(needs: needs, basis: basis)
        guard !rowIDs.isEmpty || !named.isEmpty else { return plan }
        let zones = try await zoneAccess(rowIDs: rowIDs, named: named)
        var readings = [Int64: ZoneReading]()
        for zone in zones.values { readings[zone.rowID] = try await reading(zone, by: userID) }
        for (zone, reading) in readings {
            switch reading {
            case .all, .share: break
            case .history: if plan.basis.heads.removeValue(forKey: zone) != nil { plan.basis.zones.insert(zone) }
            case .nothing: plan.basis.heads[zone] = nil; plan.basis.zones.remove(zone)
            }
        }
        let byName = Dictionary(zones.values.map { ($0.id, $0.rowID) }, uniquingKeysWith: { a, _ in a })
        for need in needs {
            switch need {
            case .zone(let id):
                guard let rowID = byName[id], let reading = readings[rowID] else { continue } // missing: answered as such
                switch reading {
                case .all, .share: break
                case .history(let seq, let hash, _): plan.history[rowID] = (seq, hash)
                case .nothing: plan.hidden.append(id)
                }
            case .log(let zone, _), .logHashes(let zone), .logEntry(let zone, _):
                guard let reading = readings[zone], let found = zones[zone] else { continue }
                switch reading {
                case .all, .share: break
                case .nothing: throw Self.notShared(found)
                case .history(let seq, let hash, let why):
                    if case .logEntry(_, let asked) = need, asked > seq { throw StoreError(.permissionFailure, why) }
                    plan.history[zone] = (seq, hash)
                }
            default:
                guard let zone = need.zoneRowID, let reading = readings[zone], let found = zones[zone] else { continue }
                switch reading {
                case .all: break
                case .share: throw StoreError(.permissionFailure, "zone '\(found.id.name)' of \(found.id.ownerID): its records are read by participants who accepted its share")
                case .history(_, _, let why): throw StoreError(.permissionFailure, why)
                case .nothing: throw Self.notShared(found)
                }
            }
        }
        // A zone whose lookup is held back is not fetched at all.
        let hidden = Set(plan.hidden)
        plan.needs = needs.filter { if case .zone(let id) = $0 { !hidden.contains(id) } else { true } }
        return plan
    }

    private static func notShared(_ zone: ZoneAccess) -> StoreError {
        StoreError(.permissionFailure, "zone '\(zone.id.name)' of \(zone.id.ownerID) is not shared with you")
    }

    /// Holds back of what a fetch read what the plan says `userID` may not see: zones looked up
    /// that are not theirs (answered as missing), the keys and later entries of zones whose
    /// part ended, and the zones the store's member lookup lists that the zones' logs do not
    /// give them.
    private func limit(_ f: inout StorageSnapshot.Tables<StoredRow>, to plan: ReadPlan, userID: String) async throws {
        // Listings come from the member lookup (a cache the owner writes): each zone listed is
        // checked against its log.
        var listed = [Int64: ZoneRow]()
        for rows in f.listingZones.values { for row in rows { listed[row.rowID] = row } }
        for list in f.sharedZones.values { for item in list { listed[item.zone.rowID] = item.zone } }
        for bySince in f.changedSharedZones.values { for rows in bySince.values { for row in rows { listed[row.rowID] = row } } }
        var refused = Set<Int64>()
        for (rowID, row) in listed where row.id.ownerID != userID {
            let zone = ZoneAccess(rowID: rowID, uid: row.uid, id: row.id)
            let given = try? await self.reading(zone, by: userID)
            if given == nil || given == .nothing { refused.insert(rowID) }
        }
        if !refused.isEmpty {
            f.listingZones = f.listingZones.mapValues { $0.filter { !refused.contains($0.rowID) } }
            f.sharedZones = f.sharedZones.mapValues { $0.filter { !refused.contains($0.zone.rowID) } }
            f.changedSharedZones = f.changedSharedZones.mapValues { $0.mapValues { $0.filter { !refused.contains($0.rowID) } } }
            for (id, row) in f.zones { if let row, refused.contains(row.rowID) { f.zones[id] = nil } }
        }
        for id in plan.hidden { f.zones[id] = .some(nil) }
        for (id, row) in f.zones {
            guard let row, let end = plan.history[row.rowID], row.sequence > end.seq else { continue }
            f.zones[id] = .some(ZoneRow(rowID: row.rowID, uid: row.uid, id: row.id, sequence: end.seq, created: row.created, logFormat: row.logFormat))
        }
        for (zone, end) in plan.history {
            if f.heads[zone] != nil { f.heads[zone] = .some((end.seq, end.hash)) }
            if let log = f.logs[zone] { f.logs[zone] = (log.after, log.entries.filter { $0.seq <= end.seq }) }
            if let entries = f.entries[zone] { f.entries[zone] = entries.filter { $0.key <= end.seq } }
            if let hashes = f.logHashes[zone] { f.logHashes[zone] = hashes.filter { $0.key <= end.seq } }
            if f.wrappedKeys[zone] != nil { f.wrappedKeys[zone] = [:] }
            if f.chainedKeys[zone] != nil { f.chainedKeys[zone] = [:] }
            if f.shareLinks[zone] != nil { f.shareLinks[zone] = .some(nil) }
            if f.zoneMembers[zone] != nil { f.zoneMembers[zone] = [] }
        }
    }

    // MARK: - Writes

    /// A batch that lost a race for a zone's head or a row it read: the client runs its
    /// operation again on fresh reads.
    package struct Conflict: Error {}

    /// Applies `records/modify` for `userID`.
    package func modify(_ body: Data, userID: String) async throws -> Data {
        let request = try RemoteAPI.decode(RemoteAPI.ModifyRequest.self, body, what: "batch")
        guard request.operation.count == 16 else { throw StoreError(.invalidArguments, "a batch's operation id is 16 bytes") }
        guard !request.writes.isEmpty else { throw StoreError(.invalidArguments, "a batch has no writes") }
        guard request.writes.count <= RemoteAPI.maxWrites else {
            throw StoreError(.limitExceeded, "a batch carries at most \(RemoteAPI.maxWrites) writes")
        }
        let replayed = try await apply(request.writes, operation: SnapshotOperation(id: Array(request.operation), userID: userID))
        return try RemoteAPI.answer(RemoteAPI.ModifyResponse(replayed: replayed), to: body)
    }

    /// Checks a batch of writes a user sent and applies it, whole or not at all (see
    /// ``check(_:userID:)``); returns true when `operation` had been applied before (nothing is
    /// applied again).
    /// - Throws: ``Conflict`` for a batch that lost a race for a zone's head or a row it read.
    func apply(_ wire: [WireWrite], operation: SnapshotOperation) async throws -> Bool {
        let userID = operation.userID
        // The zones the batch names, and a row id reserved for each one it creates.
        let names = try await zoneNames(Set(wire.compactMap(\.zone)))
        // In the order the batch creates them: a store takes new zone ids in increasing order.
        var creating = [(id: ZoneID, uid: [UInt8])]()
        for write in wire where write.op == "zones/create" {
            guard let uid = write.zone.map(Array.init), let name = write.name, let owner = write.owner else { continue } // refused below
            guard names.zones[uid] == nil else { throw StoreError(.alreadyExists, "the store has a zone of the uid a batch creates") }
            let id = ZoneID(name: name, ownerID: owner)
            guard !creating.contains(where: { $0.id == id }) else { throw StoreError(.invalidArguments, "a batch creates one zone of a name") }
            creating.append((id, uid))
        }
        if !creating.isEmpty {
            let reserved = StorageSnapshot(writable: false)
            try await driver.fetch(creating.map { .newZoneID($0.id) }, into: reserved)
            for (id, uid) in creating {
                guard let rowID = reserved.fetched.newZoneIDs[id] else { throw StoreError(.internalError, "the store reserved no zone id") }
                names.reserve(rowID, for: uid)
            }
        }
        let writes = try wire.map { try $0.write(names.names, row: names.notice) }
        if try await wasApplied(operation) { return true }
        let states: [Int64: ZoneState]
        do {
            states = try await check(writes, userID: userID)
            try await driver.apply(writes, operation: operation)
        } catch is SnapshotConflict {
            // A batch sent again while its first copy was still being applied finds its own
            // commit ahead of it: it was applied.
            if try await wasApplied(operation) { return true }
            throw Conflict()
        } catch is OperationApplied {
            return true
        }
        // The states the batch's entries lead to, once they are the store's.
        for (rowID, state) in states { remember(state, rowID: rowID) }
        signal.signal()
        return false
    }

    /// Whether the store recorded this user's operation as applied.
    func wasApplied(_ operation: SnapshotOperation) async throws -> Bool {
        try await ledger.wasApplied(operation)
    }

    /// Checks a batch against what the store's signed data says `userID` may do; returns the
    /// state of each zone the batch appends to, as its entries leave it.
    private func check(_ writes: [StorageSnapshot.Write], userID: String) async throws -> [Int64: ZoneState] {
        // Kept as one function: every rule a batch must pass, in the order they build on each other (the zones
        // and entries it names, their verified states, the limits, then each write against them), sharing those
        // indexes; one list to read when asking what a server lets through.
        // Zones the batch creates, the entries it appends per zone, the zones it touches.
        var created = [Int64: ZoneID](), createdUIDs = [Int64: [UInt8]]()
        var appends = [Int64: [(head: Int64, entry: LogEntry, stored: StoredLogEntry)]](), touched = Set<Int64>()
        var published = [String: Ed25519.PublicKey]()
        for write in writes {
            switch write {
            case .insertZone(let rowID, let uid, let id, _):
                guard id.ownerID == userID else { throw StoreError(.permissionFailure, "a user creates only zones of their own") }
                try Names.validateZone(id.name)
                created[rowID] = id
                createdUIDs[rowID] = uid
            case .appendLog(let zone, let head, let entry, let body, let signature, _, let entries, let names):
                appends[zone, default: []].append((head, entry, StoredLogEntry(seq: entry.seq, body: body, signature: signature, entries: entries, names: names)))
                touched.insert(zone)
            case .contact(let user, let name, let email, let signingKey, let boxKey, let card, let cardCreated, _):
                let verified: ContactCard
                do { verified = try ContactCard.verify(Data(card)) } catch { throw StoreError(.invalidArguments, "a contact card does not verify") }
                let identity = verified.identity
                guard identity.userID == user, identity.name == name, identity.email == email, verified.created == cardCreated,
                      Array(identity.signingKey.rawRepresentation) == signingKey, Array(identity.boxKey.rawRepresentation) == boxKey else {
                    throw StoreError(.invalidArguments, "a contact's columns are not those of its card")
                }
                published[user] = identity.signingKey
            default:
                if let zone = write.zoneRowID { touched.insert(zone) }
            }
        }
        let existing = touched.subtracting(created.keys)
        let zones = try await zoneAccess(rowIDs: existing, named: [])
        for zone in existing where zones[zone] == nil {
            throw StoreError(.zoneNotFound, "the batch writes to a zone the store does not have")
        }
        // The entries each zone's log gains, checked in order against its verified state; for
        // each zone already stored, its state before the batch; what each record entry signs.
        var states = [Int64: ZoneState](), prior = [Int64: ZoneState](), listings = [Int64: [Int64: SignedRecords]]()
        for (rowID, list) in appends {
            var state: ZoneState?
            let uid: [UInt8], id: ZoneID
            if let new = created[rowID] {
                guard let u = createdUIDs[rowID] else { preconditionFailure("a created zone has its insert") }
                uid = u
                id = new
            } else {
                guard let zone = zones[rowID] else { throw StoreError(.zoneNotFound, "the batch writes to a zone the store does not have") }
                uid = zone.uid
                id = zone.id
                state = try await verifiedState(zone)
                prior[rowID] = state
            }
            for (head, entry, stored) in list {
                guard entry.seq == (state?.headSeq ?? 0) + 1, head == state?.headSeq ?? 0 else { throw Conflict() }
                // In a zone that moves here whole (its owner sends its log), every member's
                // entries; elsewhere, the requester's own.
                guard created[rowID] != nil || entry.authorID == userID || id.ownerID == userID else {
                    throw StoreError(.permissionFailure, "a user signs only their own log entries")
                }
                var key = published[entry.authorID]
                if key == nil { key = try await signingKey(of: entry.authorID) }
                do { try ZoneLogVerifier(uid: uid, zone: id, key: { [key] _ in key }).next(stored, to: &state) } catch let refusal as ZoneState.Refusal {
                    // The reason first: a client shows the first 80 characters of a server's message.
                    throw StoreError(.permissionFailure, "\(refusal.reason) (zone '\(id.name)', entry \(refusal.seq))")
                }
                if SignedRecords.writesRecords(entry.kind) {
                    guard let signed = SignedRecords(entry, stored) else {
                        throw StoreError(.permissionFailure, "an entry's record lists are not the ones it signs: zone '\(id.name)', entry \(entry.seq)")
                    }
                    listings[rowID, default: [:]][entry.seq] = signed
                }
            }
            states[rowID] = state
        }
        for id in created.keys where appends[id]?.first?.entry.kind != .genesis {
            throw StoreError(.invalidArguments, "a new zone's first entry is its genesis")
        }
        // A deletion entry ends the zone: it comes with the zone's deletion, in the same batch.
        let deleted = Set(writes.compactMap { write -> Int64? in if case .deleteZone(let z) = write { z } else { nil } })
        for (rowID, list) in appends where list.contains(where: { $0.entry.kind == .deletion }) && !deleted.contains(rowID) {
            throw StoreError(.permissionFailure, "a deletion entry comes only with the zone's deletion in the same batch")
        }
        // The local limits, per signed commit: 400 records, 2 MiB of fields (counted here as
        // their encoded and sealed bytes, which may be up to twice that).
        let commits = max(1, appends.values.joined().filter { [.commit, .rewrite, .genesis].contains($0.entry.kind) }.count)
        var recordWrites = 0, recordBytes = 0
        for write in writes {
            switch write {
            case .insertRecord(_, let version), .replaceRecord(_, let version, _, _):
                recordWrites += 1
                recordBytes += version.plain.count + (version.sealed?.count ?? 0)
            case .deleteRecord: recordWrites += 1
            default: break
            }
        }
        guard recordWrites <= Limits.maxBatchRecords * commits, recordBytes <= 2 * Limits.maxBatchBytes * commits else {
            throw StoreError(.limitExceeded, "a batch writes at most \(Limits.maxBatchRecords) records and \(Limits.maxBatchBytes / (1 << 20)) MiB of fields per commit")
        }
        // The rows a batch replaces keeping their creator and creation time: the version hash
        // their commit signs is made with the stored ones, read here.
        var keptNames = [Int64: [String]]()
        for case .replaceRecord(let rowID, let version, _, true) in writes { keptNames[rowID, default: []].append(version.stamp.name) }
        var kept = [Int64: [String: (seq: Int64, creatorID: String, created: Double)]]()
        for (rowID, names) in keptNames where created[rowID] == nil {
            kept[rowID] = try await store.storedStamps(zoneRowID: rowID, names: names)
        }
        // The deleted names the batch marks for the change feeds, by zone.
        var marked = [Int64: Set<TombstoneMark>]()
        for case .addTombstone(let rowID, let name, let seq, _, _, _) in writes { marked[rowID, default: []].insert(TombstoneMark(name: name, seq: seq)) }
        // Record entries already stored (a zone its owner moves here sends its rows after its log).
        var storedListings = [Int64: [Int64: SignedRecords?]]()
        func storedListing(_ rowID: Int64, _ seq: Int64) async throws -> SignedRecords? {
            if let known = storedListings[rowID]?[seq] { return known }
            let listing = try await self.storedListing(zoneRowID: rowID, seq: seq)
            storedListings[rowID, default: [:]][seq] = listing
            return listing
        }
        // A zone's state before the batch, and after it.
        func stateBefore(_ rowID: Int64) async throws -> ZoneState {
            if let known = prior[rowID] { return known }
            guard let zone = zones[rowID] else { throw StoreError(.zoneNotFound, "the batch writes to a zone the store does not have") }
            let state = try await verifiedState(zone)
            prior[rowID] = state
            return state
        }
        func stateAfter(_ rowID: Int64) async throws -> ZoneState {
            if let known = states[rowID] { return known }
            return try await stateBefore(rowID)
        }
        // Every other write, against the zone's owner and the batch's own entries.
        for write in writes {
            guard let rowID = write.zoneRowID else { continue }
            let owner = created[rowID]?.ownerID ?? zones[rowID]?.id.ownerID
            let isOwner = owner == userID
            let entries = appends[rowID] ?? []
            let signed = listings[rowID] ?? [:]
            func refuse(_ what: String) -> StoreError {
                StoreError(.permissionFailure, "only a zone's owner \(what)")
            }
            switch write {
            case .insertZone, .appendLog, .contact: break
            case .deleteZone:
                guard isOwner else { throw refuse("deletes it") }
                // With its signed deletion as the batch's last entry of the zone (verified above
                // as any entry): the store keeps it, with the genesis, for the zone's readers.
                guard entries.last?.entry.kind == .deletion else {
                    throw StoreError(.permissionFailure, "a zone is deleted only with its owner's signed deletion entry in the same batch: zone '\(zones[rowID]?.id.name ?? "")'")
                }
            case .wrappedKey(_, _, let member, _), .storeWrappedKey(_, _, let member, _), .deleteWrappedKeys(_, let member?):
                // A participant keeps their own key slot (a link joiner wraps the zone key to
                // themselves): it can only hold what opens for them, and every key is checked
                // against the owner's commitment before use.
                guard isOwner || member == userID else { throw refuse("changes others' keys") }
            case .deleteWrappedKeys, .storeChainedKey, .deleteOlderKeys, .storeShareLink, .deleteShareLink:
                guard isOwner else { throw refuse("changes its keys, link and members") }
            case .setZoneMembers(_, let members, let shareUID):
                // The lookup of whom a zone names is a cache of its log: exactly whom the
                // zone's verified state after the batch names, and its share's uid.
                guard isOwner else { throw refuse("changes its keys, link and members") }
                let after = try await stateAfter(rowID)
                guard members == after.lookupMembers, shareUID == after.share?.shareUID else {
                    throw StoreError(.permissionFailure, "a zone's member lookup lists only whom its signed log names: zone '\(Names.printable(zones[rowID]?.id.name ?? created[rowID]?.name ?? "?"))'")
                }
            case .addZoneMember(_, let user):
                // A participant lists themselves once the zone's signed state says they take
                // part; its owner lists only whom that state names.
                guard isOwner || user == userID else { throw refuse("lists its members") }
                let after = try await stateAfter(rowID)
                guard isOwner ? after.lookupMembers.contains(user) : after.takesPart(userID) else { throw refuse("lists its members") }
            case .touchZone:
                // Outside a write of theirs, only whom the zone's verified state lets read it.
                if !isOwner, entries.isEmpty {
                    guard Self.standing(try await stateAfter(rowID), userID, linkOpen: true) != .nothing else { throw refuse("touches it") }
                }
            case .compactTombstones:
                guard isOwner || !entries.isEmpty else { throw refuse("compacts its history outside a write") }
            case .zoneGone(_, let users, _):
                // A notice in users' change feeds that the zone went: of the zone as the store
                // has it, from its owner (with an entry of theirs in the batch when it names
                // anyone else, who must have taken part), or from a participant about
                // themselves, with their signed leaving.
                guard let access = zones[rowID] else { throw refuse("removes it from others' lists") }
                guard isOwner || users == [userID] else { throw refuse("removes it from others' lists") }
                if isOwner {
                    guard users.contains(where: { $0 != userID }) else { break }
                    guard entries.contains(where: { $0.entry.authorID == userID }) else {
                        throw StoreError(.permissionFailure, "a notice for others needs a signed entry of the owner's in the batch: zone '\(access.id.name)'")
                    }
                    let before = try await stateBefore(rowID)
                    for user in users.sorted() where user != userID && !before.readers.contains(user) && !before.takesPart(user) {
                        throw StoreError(.permissionFailure, "a notice names a user who did not take part: zone '\(access.id.name)'")
                    }
                } else {
                    guard entries.contains(where: { $0.entry.kind == .acceptance && $0.entry.authorID == userID }),
                          !(try await stateAfter(rowID).readers.contains(userID)) else {
                        throw StoreError(.permissionFailure, "a participant's notice needs their signed leaving in the batch: zone '\(access.id.name)'")
                    }
                }
            case .zoneBack(_, let user):
                // Takes a notice back: a user for themselves while the zone's signed state says
                // they take part; its owner for a participant only with an entry of theirs in
                // the batch after which that participant takes part.
                guard let access = zones[rowID] else { throw refuse("puts it back in others' lists") }
                guard isOwner || user == userID else { throw refuse("puts it back in others' lists") }
                guard user != owner else { break }
                if user != userID {
                    guard entries.contains(where: { $0.entry.authorID == userID }) else {
                        throw StoreError(.permissionFailure, "a notice taken back for others needs a signed entry of the owner's: zone '\(access.id.name)'")
                    }
                }
                let after = try await stateAfter(rowID)
                guard after.takesPart(user) || after.readers.contains(user) else {
                    throw StoreError(.permissionFailure, "a notice taken back for a user who does not take part: zone '\(access.id.name)'")
                }
            case .fieldSchema:
                // Its owner moving a zone here sends its schema after its log.
                guard isOwner || !signed.isEmpty else {
                    throw StoreError(.permissionFailure, "record rows change only with a signed commit in the same batch")
                }
            case .addTombstone(_, let name, let seq, _, _, _):
                // A deleted name for the change feeds: the entry at its sequence must delete it
                // (its owner moving a zone here sends them after its log, and its older ones).
                if let listing = signed[seq] {
                    guard listing.deleted.contains(name) else {
                        throw StoreError(.permissionFailure, "a deleted mark at an entry that does not delete it: record '\(Names.printable(name))'")
                    }
                } else if !isOwner {
                    throw StoreError(.permissionFailure, "a deleted mark without a signed commit that deletes it: record '\(Names.printable(name))'")
                }
            case .dropFieldSchema:
                // Only the owner changes a field's type: a drop lets the name be fixed again. Its
                // log entry in the same batch orders it among the zone's commits, so a commit
                // read before it conflicts and is made again on the schema after it.
                guard isOwner, entries.contains(where: { $0.entry.authorID == userID }) else {
                    throw refuse("drops fields of its schema, with a log entry of theirs in the same batch")
                }
            case .deleteRecord(_, let name, _):
                // Deleted only by a signed entry of the batch that names the deletion, and marked
                // at that entry for the change feeds.
                let deleting = signed.filter { $0.value.deleted.contains(name) }.keys
                guard !deleting.isEmpty else {
                    throw StoreError(.permissionFailure, "no signed commit of the batch names the deletion of record '\(Names.printable(name))'")
                }
                guard deleting.contains(where: { marked[rowID]?.contains(TombstoneMark(name: name, seq: $0)) == true }) else {
                    throw StoreError(.permissionFailure, "a deletion not marked for the change feeds: record '\(Names.printable(name))'")
                }
            case .removeTombstone(_, let name):
                guard signed.values.contains(where: { $0.saved.contains(name) || $0.deleted.contains(name) }) else {
                    throw StoreError(.permissionFailure, "a deleted mark removed that no signed commit names: record '\(Names.printable(name))'")
                }
            case .insertRecord(_, let version), .replaceRecord(_, let version, _, _):
                var isInsert = false
                if case .insertRecord = write { isInsert = true }
                let listing: SignedRecords
                if let entry = signed[version.stamp.seq] {
                    listing = entry
                } else if isOwner, isInsert, let stored = try await storedListing(rowID, version.stamp.seq) {
                    // A zone moving here whole: its owner sends its rows after its log.
                    listing = stored
                } else {
                    throw StoreError(.permissionFailure, "record '\(Names.printable(version.stamp.name))' is not written by a signed commit of the same batch")
                }
                var creatorID = version.stamp.creatorID, createdAt = version.stamp.created
                if case .replaceRecord(_, _, let storedSeq, true) = write {
                    // The row keeps its stored creator and creation time, which its hash signs.
                    guard let row = kept[rowID]?[version.stamp.name], row.seq == storedSeq else { throw Conflict() }
                    (creatorID, createdAt) = (row.creatorID, row.created)
                }
                let uid = zones[rowID]?.uid ?? createdUIDs[rowID] ?? []
                guard listing.lists(version.digest(zoneUID: uid, creatorID: creatorID, created: createdAt)) else {
                    throw StoreError(.permissionFailure, "record '\(Names.printable(version.stamp.name))' is not the version its commit signs")
                }
            }
        }
        try await checkSchema(writes, zones: zones.mapValues(\.id))
        return states.filter { created[$0.key] == nil }
    }

    /// Refuses a record version whose plain values do not follow its zone's schema (the stored
    /// one, with the fields the batch fixes): a field the schema does not have, one it fixes as
    /// encrypted, a value of another type, or type codes other than the values'. (Encrypted
    /// fields are sealed: their types are the readers' to check.)
    private func checkSchema(_ writes: [StorageSnapshot.Write], zones: [Int64: ZoneID]) async throws {
        var versions = [Int64: [SealedVersion]](), added = [Int64: [String: [String: FieldSchema]]]()
        for write in writes {
            switch write {
            case .insertRecord(let zone, let version), .replaceRecord(let zone, let version, _, _): versions[zone, default: []].append(version)
            case .fieldSchema(let zone, let recordType, let field, let schema): added[zone, default: [:]][recordType, default: [:]][field] = schema
            default: break
            }
        }
        for (zone, list) in versions {
            let types = Set(list.map(\.stamp.type))
            // A zone the batch creates has only the batch's schema.
            var stored = [String: [(field: String, valueType: String, encrypted: Bool)]]()
            if let id = zones[zone] {
                stored = try await store.fieldSchemaRows(zone: id, zoneRowID: zone, recordTypes: types)
            }
            var schema = [String: [String: FieldSchema]]()
            for (recordType, rows) in stored {
                for row in rows {
                    guard let type = FieldType(name: row.valueType) else { continue }
                    schema[recordType, default: [:]][row.field] = FieldSchema(type: type, encrypted: row.encrypted)
                }
            }
            for (recordType, fields) in added[zone] ?? [:] { schema[recordType, default: [:]].merge(fields) { old, _ in old } }
            for version in list {
                let fields = schema[version.stamp.type] ?? [:]
                let codes: [UInt8]
                do {
                    let values = try version.plain.withUnsafeBytes { raw in
                        try PlainValuesCodec.decode(raw, typeOf: { key in fields[key].flatMap { $0.encrypted ? nil : $0.type } })
                    }
                    codes = PlainValuesCodec.typeCodes(values)
                } catch {
                    throw StoreError(.invalidArguments, "record '\(Names.printable(version.stamp.name))' does not follow the schema of type \(Names.printable(version.stamp.type)): \((error as? StoreError)?.message ?? "malformed")")
                }
                guard codes == version.plainTypes else {
                    throw StoreError(.invalidArguments, "record '\(Names.printable(version.stamp.name))' names other types for its plain values than they have")
                }
            }
        }
    }

    /// What the stored entry `seq` of a zone signs of its records, when it is one that lists
    /// them (a commit, a rewrite, a genesis of a zone that had records) and its lists are the
    /// ones it signs.
    private func storedListing(zoneRowID: Int64, seq: Int64) async throws -> SignedRecords? {
        let stored = try await store.storedLogEntry(zoneRowID: zoneRowID, seq: seq)
        guard let stored, let entry = LogEntry.decode(stored.body), entry.seq == seq else { return nil }
        return SignedRecords(entry, stored)
    }

    /// A deleted name a batch marks for the change feeds, at the entry that deletes it.
    struct TombstoneMark: Hashable {
        let name: String
        let seq: Int64
    }

    // MARK: - Zone state

    /// The zone's state as its stored log verifies (signatures by the stored cards, each entry
    /// allowed by the state before it), read from the cached state's head on.
    private func verifiedState(_ zone: ZoneAccess) async throws -> ZoneState {
        let known = states.withLock { $0[zone.rowID] }.flatMap { $0.zoneUID == zone.uid ? $0 : nil }
        let state = try await store.verifiedZoneState(rowID: zone.rowID, uid: zone.uid, zone: zone.id, from: known)
        remember(state, rowID: zone.rowID)
        return state
    }

    private func remember(_ state: ZoneState, rowID: Int64) {
        states.withLock { states in
            if let known = states[rowID], known.zoneUID == state.zoneUID, known.headSeq > state.headSeq { return }
            states[rowID] = state
        }
    }

    // MARK: - Access

    /// What a user may read of a zone, as its verified log says.
    enum ZoneReading: Equatable {
        /// Everything: its owner, a named participant who accepted, a joiner of the link while
        /// it stands.
        case all
        /// Its row, keys and log but no record rows: a named participant who has not accepted
        /// (or left, and may accept again), and anyone while a public link stands (to join).
        case share
        /// Its row and its log through the entry that ended the user's part (`seq`, its hash):
        /// no keys, no record rows. `why`: the refusal of anything else.
        case history(seq: Int64, hash: Digest32, why: String)
        /// Nothing: a lookup by name answers as for a zone the store does not have.
        case nothing

        static func == (a: ZoneReading, b: ZoneReading) -> Bool {
            switch (a, b) {
            case (.all, .all), (.share, .share), (.nothing, .nothing): true
            case (.history(let s, let h, _), .history(let t, let k, _)): s == t && h == k
            default: false
            }
        }
    }

    /// What `userID` may read of `zone`: its owner everything; anyone else what the zone's
    /// verified log gives them now, or, if it gave them a part that ended, its log up to the
    /// entry that ended it.
    func reading(_ zone: ZoneAccess, by userID: String) async throws -> ZoneReading {
        if zone.id.ownerID == userID { return .all }
        let state = try await verifiedState(zone)
        let now = Self.standing(state, userID, linkOpen: true)
        guard now == .nothing else { return now }
        if let known = endings.withLock({ $0[zone.rowID] }), known.uid == zone.uid, known.head == state.headHash, let reading = known.readings[userID] {
            return reading
        }
        let reading = try await ended(zone, state: state, by: userID)
        endings.withLock { endings in
            if let known = endings[zone.rowID], known.uid == zone.uid, known.head == state.headHash, known.readings.count < 1_000 {
                endings[zone.rowID]?.readings[userID] = reading
            } else {
                endings[zone.rowID] = (zone.uid, state.headHash, [userID: reading])
            }
        }
        return reading
    }

    /// What a user the zone's `state` gives nothing may read of it: if they had a part that
    /// ended, the log through the last entry that ended it (replayed from the genesis on the
    /// entries whose chain reaches the verified head), else nothing.
    private func ended(_ zone: ZoneAccess, state: ZoneState, by userID: String) async throws -> ZoneReading {
        let stored = try await store.storedLogEntries(zoneRowID: zone.rowID, after: 0)
        var replay: ZoneState?, had = false, ended: (seq: Int64, hash: Digest32, why: String)?
        // Signatures were checked when the entries were stored; the chain and rules are replayed.
        let verifier = ZoneLogVerifier(uid: zone.uid, zone: zone.id, key: nil)
        for entry in stored {
            let before = replay
            guard (try? verifier.next(entry, to: &replay)) != nil, let next = replay else { return .nothing }
            let takes = Self.standing(next, userID, linkOpen: false) != .nothing
            if had, !takes { ended = (entry.seq, entry.hash, Self.whyEnded(before, next, userID, zone: zone.id)) }
            had = takes
        }
        guard !had, let ended, replay?.headHash == state.headHash else { return .nothing }
        return .history(seq: ended.seq, hash: ended.hash, why: ended.why)
    }

    /// What `state` gives `userID` now (not its owner's part, checked before, nor a part that
    /// ended). `linkOpen`: whether a public link that stands lets anyone read the share.
    static func standing(_ state: ZoneState, _ userID: String, linkOpen: Bool) -> ZoneReading {
        if userID == state.ownerID { return .all }
        guard let share = state.share else { return .nothing }
        let participant = share.participants[userID]
        if participant?.status == .removed { return .nothing }
        if participant?.role == .privateUser { return state.acceptances[userID] == .accepted ? .all : .share }
        guard share.publicPermission != .none, share.linkPublicKey != nil else { return .nothing }
        if state.linkJoiners[userID] == .accepted { return .all }
        return linkOpen ? .share : .nothing
    }

    /// Why the entry that took `before` to `after` ended `userID`'s part, as a refusal's message.
    static func whyEnded(_ before: ZoneState?, _ after: ZoneState, _ userID: String, zone: ZoneID) -> String {
        let what = "zone '\(zone.name)' of \(zone.ownerID)"
        guard let share = after.share else { return "the owner stopped sharing \(what)" }
        if after.acceptances[userID] == .left || after.linkJoiners[userID] == .left { return "you left \(what)" }
        if before?.linkJoiners[userID] == .accepted, share.publicPermission == .none || share.linkPublicKey != before?.share?.linkPublicKey {
            return "the public link you joined \(what) with was turned off"
        }
        if share.participants[userID]?.status == .removed { return "you were removed from \(what)" }
        return "\(what) is not shared with you any more"
    }

    /// A zone as the store's row has it: its uid, name and owner, which its verified log binds.
    /// Who reads it is ``reading(_:by:)``'s to say, from that log.
    struct ZoneAccess: Sendable {
        let rowID: Int64
        let uid: [UInt8]
        let id: ZoneID
    }

    /// The zones of these row ids, names and uids that exist, by row id.
    func zoneAccess(rowIDs: Set<Int64>, named: Set<ZoneID>, uids: Set<[UInt8]> = []) async throws -> [Int64: ZoneAccess] {
        guard !rowIDs.isEmpty || !named.isEmpty || !uids.isEmpty else { return [:] }
        var zones = [Int64: ZoneAccess]()
        let found = try await ledger.zoneIdentities(rowIDs: rowIDs, named: named, uids: uids)
        for zone in found { zones[zone.rowID] = ZoneAccess(rowID: zone.rowID, uid: zone.uid, id: zone.id) }
        return zones
    }

    // MARK: - Change waits

    /// Answers `changes/wait`: the store's change counter once it passes `after`, or when
    /// `timeout` has passed.
    package func wait(after: Int64, timeout: Duration) async throws -> Data {
        let clock = ContinuousClock(), deadline = clock.now + timeout
        while true {
            let generation = signal.generation
            let counter = try await store.changeCounter()
            let left = deadline - clock.now
            if counter > after || left <= .zero {
                return try RemoteAPI.encoder.encode(RemoteAPI.WaitResponse(counter: counter))
            }
            // A commit of this process signals at once; PostgreSQL's wake-ups cross instances.
            let slice = min(left, .seconds(1))
            async let local: Void = signal.wait(after: generation, upTo: slice)
            async let remote: Void = ledger.waitForOtherInstances(upTo: slice)
            _ = try await (local, remote)
        }
    }
}

/// The zones a request to a server names by uid, as the server's store has them: each uid's row
/// id in the store, and for a uid the store does not have a row id no zone has (negative), so a
/// read of it finds nothing and a write to it is refused as to a missing zone. A zone a batch
/// creates has the row id reserved for it.
final class HostZoneNames: @unchecked Sendable {
    /// The zones found, by uid.
    private(set) var zones = [[UInt8]: StorageHost.ZoneAccess]()
    private var byUID = [[UInt8]: Int64]()
    private var byRowID = [Int64: [UInt8]]()
    /// Row ids the encoding of an answer met that no uid named (looked up, then encoded again).
    private var missed = Set<Int64>()

    init(_ found: some Sequence<StorageHost.ZoneAccess>) {
        for zone in found { note(zone) }
    }

    private func note(_ zone: StorageHost.ZoneAccess) {
        zones[zone.uid] = zone
        byUID[zone.uid] = zone.rowID
        byRowID[zone.rowID] = zone.uid
    }

    func reserve(_ rowID: Int64, for uid: [UInt8]) {
        byUID[uid] = rowID
        byRowID[rowID] = uid
    }

    var names: ZoneNames {
        ZoneNames(uid: { [self] rowID in
            if let uid = byRowID[rowID] { return uid }
            missed.insert(rowID)
            return [UInt8](repeating: 0, count: ZoneNames.uidCount)
        }, rowID: { [self] uid in
            if let rowID = byUID[uid] { return rowID }
            let placeholder = -Int64(byUID.count + 1)
            byUID[uid] = placeholder
            byRowID[placeholder] = uid
            return placeholder
        })
    }

    /// The zone row a deletion notice names by uid: its uid, name and owner as the store has
    /// them (which its verified log binds), never as a request says.
    func notice(_ uid: [UInt8]) throws -> ZoneRow {
        guard let zone = zones[uid] else { throw StoreError(.zoneNotFound, "a notice names a zone the store does not have") }
        return ZoneRow(rowID: zone.rowID, uid: zone.uid, id: zone.id, sequence: 0, created: Date(timeIntervalSince1970: 0), logFormat: 1)
    }

    /// `tables` on the wire, each zone by its uid: those a read found by name or list are
    /// looked up by row id.
    func wire(_ tables: StorageSnapshot.Tables<StoredRow>, host: StorageHost) async throws -> WireTables {
        missed = []
        let first = try WireTables(tables, names)
        guard !missed.isEmpty else { return first }
        for zone in try await host.zoneAccess(rowIDs: missed, named: []).values { note(zone) }
        missed = []
        let second = try WireTables(tables, names)
        // The read saw the zone in its snapshot and the lookup after it does not: the zone was
        // deleted in between (on PostgreSQL the two are separate transactions). Answered as the
        // deletion it is, which the client checks against the zone's signed log.
        guard missed.isEmpty else { throw StoreError(.zoneNotFound, "the zone was deleted during the read") }
        return second
    }
}

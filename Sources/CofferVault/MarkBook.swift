import CofferCrypto
import Foundation
import Logging

/// A user's high-water marks, one per zone they read or wrote: the newest entry of the zone's
/// signed log they verified. Kept beside the vault in `<vault file>.marks`, sealed under a key
/// only the vault holds (see `Docs/VaultFormat.md`, "Marks file"); reachable as ``Vault/marks``.
///
/// ```swift
/// if let known = try vault.marks.mark(forZone: uid), latest.seq < known.seq {
///     // the store's log ends before what this user has already seen: it was rolled back
/// }
/// vault.marks.advance(to: latest)   // in memory
/// try vault.marks.save()            // merged into the file, under its own lock
/// ```
///
/// The book reads its file when first asked (never before), then answers from memory.
/// ``advance(to:in:)`` only raises marks, in memory; ``save()`` merges them into the file as it is
/// then, so books of other processes lose nothing and no mark goes down. Only
/// ``reset(zone:to:)`` lowers one. Reading never writes or locks the file, nor the vault.
public final class MarkBook: Sendable {
    private struct State {
        /// The file's marks as last read or written; nil until first used.
        var saved: [[UInt8]: ZoneMark]?
        /// The file's server pins as last read or written.
        var pins: [String: [UInt8]] = [:]
        /// Marks advanced in memory and not saved yet, each higher than what was known then.
        var pending: [[UInt8]: ZoneMark] = [:]
        /// The stores each zone was verified in, as the file had them.
        var stores: [[UInt8]: [[UInt8]]] = [:]
        /// Stores zones were verified in, noted in memory and not saved yet.
        var pendingStores: [[UInt8]: [[UInt8]]] = [:]

        /// Whether the zone is noted as verified in the store, saved or not.
        func noted(_ uid: [UInt8], in storeID: [UInt8]) -> Bool {
            stores[uid]?.contains(storeID) == true || pendingStores[uid]?.contains(storeID) == true
        }

        /// The newer of the saved and the pending mark (the saved one on equal seq).
        func mark(_ uid: [UInt8]) -> ZoneMark? {
            MarkBook.newer(saved?[uid], pending[uid])
        }

        /// Drops the pending marks that are no higher than the saved ones.
        mutating func prunePending() {
            guard let saved else { return }
            pending = pending.filter { uid, mark in saved[uid].map { mark.seq > $0.seq } ?? true }
        }
    }

    /// The marks file, `<vault file>.marks`.
    public let url: URL
    private let lockPath: String
    private let userID: String
    private let key: SymmetricKey
    private let logger: Logger
    private let state = Locked(State())

    init(vaultURL: URL, userID: String, signingSeed: SecureBytes, logger: Logger) throws {
        url = URL(fileURLWithPath: vaultURL.path + ".marks")
        lockPath = url.path + ".lock"
        self.userID = userID
        key = try MarksFormat.key(signingSeed: signingSeed)
        self.logger = logger
    }

    /// Another book of `vault`'s marks, as another process holding the same vault has.
    convenience init(vault: Vault) throws {
        try self.init(vaultURL: vault.url, userID: vault.identity.userID,
                      signingSeed: vault.read { $0.body.signingSeed }, logger: Vault.disabledLogger)
    }

    // MARK: - Reading

    /// The mark of the zone `uid` (16 bytes), or nil when there is none. Reads the file the
    /// first time the book is used; afterwards answers from memory (marks advanced, or saved by
    /// this book, included).
    ///
    /// - Throws: ``VaultError`` `.malformed` or `.integrityFailure` for a damaged marks file (or
    ///   one of another vault), `.invalidArguments` for a uid that is not 16 bytes, `.io`.
    public func mark(forZone uid: [UInt8]) throws -> ZoneMark? {
        try Self.checkZoneUID(uid)
        try load()
        return state.withLock { $0.mark(uid) }
    }

    /// The ids of the stores (16 bytes each) in which the zone `uid` was verified, as
    /// ``advance(to:in:)`` noted them: empty for a zone noted before this was kept (a marks file
    /// of an earlier build), which then counts as of any store. At most the 8 newest are kept.
    public func stores(ofZone uid: [UInt8]) throws -> [[UInt8]] {
        try Self.checkZoneUID(uid)
        try load()
        return state.withLock { state in
            var ids = state.stores[uid] ?? []
            for id in state.pendingStores[uid] ?? [] where !ids.contains(id) { ids.append(id) }
            return Array(ids.suffix(MarksFormat.maxStoresPerZone))
        }
    }

    /// Every mark, sorted by zone uid. Reads the file the first time the book is used.
    public func all() throws -> [ZoneMark] {
        try load()
        return state.withLock { state in
            Set((state.saved ?? [:]).keys).union(state.pending.keys).compactMap { state.mark($0) }
        }.sorted { $0.zoneUID.lexicographicallyPrecedes($1.zoneUID) }
    }

    // MARK: - Server pins

    /// Every server pin, sorted by origin. Reads the file the first time the book is used.
    public func pins() throws -> [ServerPin] {
        try load()
        return state.withLock { $0.pins }.sorted { $0.key < $1.key }.map { ServerPin(origin: $0.key, storeID: $0.value) }
    }

    /// Checks the store id a server at `origin` (in normal form) answered with against the
    /// pins, under the marks lock, and pins it when neither the origin nor the store id is
    /// pinned yet (first contact, saved at once).
    ///
    /// - Throws: ``VaultError`` `.invalidArguments` for an origin that is not in normal form or
    ///   a store id that is not 16 bytes; as ``save()``.
    public func checkPin(origin: String, storeID: [UInt8]) throws -> ServerPin.Check {
        try Self.checkPin(origin, storeID)
        try load()
        if state.withLock({ $0.pins[origin] }) == storeID { return .known }
        var check = ServerPin.Check.pinned
        let advanced = state.withLock { $0.pending }
        try rewrite(advanced) { contents in
            if let pinned = contents.pins[origin] {
                check = pinned == storeID ? .known : .otherStore(pinned: pinned)
            } else if let elsewhere = contents.pins.first(where: { $0.value == storeID })?.key {
                check = .pinnedElsewhere(origin: elsewhere)
            } else {
                contents.pins[origin] = storeID
            }
        }
        if check == .pinned { logger.info("server pinned", metadata: ["origin": "\(origin)"]) }
        return check
    }

    /// Drops the pin of `origin` (after a deliberate move of the server), so that the next
    /// contact pins anew; returns the pin dropped, nil when there was none. Saved at once.
    ///
    /// - Throws: as ``save()``.
    public func forgetPin(origin: String) throws -> ServerPin? {
        try load()
        var dropped: ServerPin?
        let advanced = state.withLock { $0.pending }
        try rewrite(advanced) { contents in
            if let storeID = contents.pins.removeValue(forKey: origin) { dropped = ServerPin(origin: origin, storeID: storeID) }
        }
        return dropped
    }

    private static func checkPin(_ origin: String, _ storeID: [UInt8]) throws {
        guard ServerPin.isNormalOrigin(origin) else { throw VaultError(.invalidArguments, "a server pin's origin is an http:// or https:// URL of printable ASCII") }
        guard storeID.count == ServerPin.storeIDByteCount else {
            throw VaultError(.invalidArguments, "a store id has \(ServerPin.storeIDByteCount) bytes, not \(storeID.count)")
        }
    }

    /// Whether ``advance(to:in:)`` raised a mark, or noted a store, that ``save()`` has not
    /// written yet.
    public var hasUnsavedChanges: Bool {
        state.withLock { !$0.pending.isEmpty || !$0.pendingStores.isEmpty }
    }

    // MARK: - Changing

    /// Raises the zone's mark to `mark`, in memory, when its seq is higher than the one known
    /// (or none is known); and notes that the zone was verified in the store `storeID` (16
    /// bytes; nil: not noted), so that an audit of another store does not look for it there.
    /// No I/O, never throws: ``save()`` writes it.
    public func advance(to mark: ZoneMark, in storeID: [UInt8]? = nil) {
        state.withLock { state in
            if let storeID, storeID.count == ServerPin.storeIDByteCount, !state.noted(mark.zoneUID, in: storeID) {
                state.pendingStores[mark.zoneUID, default: []].append(storeID)
            }
            if let known = state.mark(mark.zoneUID), mark.seq <= known.seq { return }
            state.pending[mark.zoneUID] = mark
        }
    }

    /// Writes the marks advanced since the last save, if any: under the marks lock, reads the
    /// file again and merges (per zone the higher seq wins; on equal seq the file's mark stays),
    /// writes the result atomically (mode 0600), and keeps it in memory. Without unsaved marks,
    /// or when the file already holds them, nothing is written.
    ///
    /// - Throws: ``VaultError`` `.busy` when another process holds the lock for 10 s, a damaged
    ///   file's error (nothing is written over it), `.invalidArguments` over the zones a file
    ///   holds, `.io`.
    public func save() throws {
        let (advanced, stores) = state.withLock { ($0.pending, $0.pendingStores) }
        guard !advanced.isEmpty || !stores.isEmpty else { return }
        try rewrite(advanced) { _ in }
        logger.debug("zone marks saved", metadata: ["path": "\(url.path)", "zones": "\(advanced.count)"])
    }

    /// Sets the zone's mark to exactly `mark` (lower than now, or removed when nil), for a
    /// restore from backup, and saves at once, under the marks lock (with the marks advanced
    /// in memory for other zones).
    ///
    /// - Throws: as ``save()``; `.invalidArguments` when `mark` is of another zone.
    public func reset(zone uid: [UInt8], to mark: ZoneMark?) throws {
        try Self.checkZoneUID(uid)
        if let mark, mark.zoneUID != uid { throw VaultError(.invalidArguments, "the mark given is of another zone") }
        let advanced = state.withLock { $0.pending }
        try rewrite(advanced) { contents in
            contents.marks[uid] = mark
            if mark == nil { contents.stores[uid] = nil }
        }
        logger.info("zone mark reset", metadata: ["path": "\(url.path)", "seq": "\(mark.map { String($0.seq) } ?? "none")"])
    }

    // MARK: - Pending changes

    /// The pending-change queue of the replica of the store `storeID`, as the file holds it now
    /// (read again: another process may have changed it). An empty queue when there is none.
    ///
    /// - Throws: as ``mark(forZone:)``; `.invalidArguments` for a store id that is not 16 bytes.
    public func intents(ofStore storeID: [UInt8]) throws -> IntentMarks {
        try Self.checkStoreID(storeID)
        return try readFile().intents[storeID] ?? IntentMarks()
    }

    /// Changes the pending-change queue of the replica of `storeID` under the marks lock, as
    /// the file holds it then, and saves at once (with the marks advanced in memory). `change`
    /// may issue numbers, finish them and set the queue's hashes; what it returns is returned.
    /// Nothing is written when it throws.
    ///
    /// - Throws: what `change` throws; as ``save()``.
    public func updateIntents<T>(ofStore storeID: [UInt8], _ change: (inout IntentMarks) throws -> T) throws -> T {
        try Self.checkStoreID(storeID)
        try load()
        var result: T?
        let advanced = state.withLock { $0.pending }
        try rewrite(advanced) { contents in
            var queue = contents.intents[storeID] ?? IntentMarks()
            result = try change(&queue)
            contents.intents[storeID] = queue
        }
        return result!
    }

    // MARK: - Internals

    /// Under the marks lock: the file merged with `advanced`, then `adjust`ed, written when it
    /// differs from the file; then memory takes the result and forgets what was written.
    private func rewrite(_ advanced: [[UInt8]: ZoneMark], adjust: (inout MarksFormat.Contents) throws -> Void) throws {
        let noted = state.withLock { $0.pendingStores }
        let written = try VaultFile.withExclusiveLock(lockPath, guarding: "the marks file \(url.path)") {
            let onDisk = try readFile()
            var contents = onDisk
            for (uid, mark) in advanced { contents.marks[uid] = Self.newer(onDisk.marks[uid], mark) }
            for (uid, ids) in noted where contents.marks[uid] != nil {
                var list = contents.stores[uid] ?? []
                for id in ids where !list.contains(id) { list.append(id) }
                contents.stores[uid] = Array(list.suffix(MarksFormat.maxStoresPerZone))
            }
            try adjust(&contents)
            if contents != onDisk {
                try VaultFile.replace(url, with: try MarksFormat.encode(contents, key: key, userID: userID))
            }
            return contents
        }
        state.withLock { state in
            state.saved = written.marks
            state.pins = written.pins
            state.stores = written.stores
            for (uid, mark) in advanced where state.pending[uid] == mark { state.pending[uid] = nil }
            for (uid, ids) in noted {
                let left = (state.pendingStores[uid] ?? []).filter { !ids.contains($0) }
                state.pendingStores[uid] = left.isEmpty ? nil : left
            }
            state.prunePending()
        }
    }

    /// Reads the file into memory the first time; afterwards does nothing.
    private func load() throws {
        guard state.withLock({ $0.saved == nil }) else { return }
        let onDisk = try readFile()
        state.withLock { state in
            guard state.saved == nil else { return }
            state.saved = onDisk.marks
            state.pins = onDisk.pins
            state.stores = onDisk.stores
            state.prunePending()
        }
    }

    /// The marks and pins in the file now (none when there is no file). Takes no lock.
    private func readFile() throws -> MarksFormat.Contents {
        let file: [UInt8]
        do {
            file = try VaultFile.read(url, what: "marks file", limit: MarksFormat.maxFileSize)
        } catch let error as VaultError where error.code == .notFound {
            return MarksFormat.Contents()
        } catch let error as VaultError where error.code == .malformed {
            throw VaultError(.malformed, "\(error.message); \(MarksFormat.deletionNote)")
        }
        return try MarksFormat.decode(file, key: key, userID: userID, path: url.path)
    }

    /// The mark with the higher seq; `first` on equal seq.
    static func newer(_ first: ZoneMark?, _ second: ZoneMark?) -> ZoneMark? {
        guard let first else { return second }
        guard let second, second.seq > first.seq else { return first }
        return second
    }

    private static func checkStoreID(_ storeID: [UInt8]) throws {
        guard storeID.count == ServerPin.storeIDByteCount else {
            throw VaultError(.invalidArguments, "a store id has \(ServerPin.storeIDByteCount) bytes, not \(storeID.count)")
        }
    }

    private static func checkZoneUID(_ uid: [UInt8]) throws {
        guard uid.count == ZoneMark.zoneUIDByteCount else {
            throw VaultError(.invalidArguments, "a zone uid has \(ZoneMark.zoneUIDByteCount) bytes, not \(uid.count)")
        }
    }
}

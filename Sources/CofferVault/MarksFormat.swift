import CofferCrypto

/// Marks file format v4 (and v1 to v3, which it reads). `Docs/VaultFormat.md` ("Marks file")
/// specifies it byte by byte; this file is the only code that reads or writes it.
///
/// `magic ‖ version ‖ XChaCha20-Poly1305 box (nonce ‖ ciphertext ‖ tag)`, the box sealed under a
/// key derived from the identity's Ed25519 seed, with `magic ‖ version ‖ user id` as associated
/// data. Plaintext: `u32 count`, then per mark, sorted by zone uid: `zone uid (16) ‖ owner id
/// length (u8) ‖ owner id (ASCII) ‖ seq (u64, at most Int64.max) ‖ hash (32)`. Version 2 then
/// holds the server pins: `u32 count`, then per pin, sorted by origin: `origin length (u8) ‖
/// origin (ASCII, ``ServerPin``'s normal form) ‖ store id (16)`. Version 3 then holds where each
/// zone was verified: `u32 count`, then per zone that has a mark, sorted by uid: `zone uid (16) ‖
/// count (u8, 1 or more) ‖ store id (16) × count`, the store ids sorted. Version 4 then holds
/// the replicas' pending-change queues (``IntentMarks``): `u32 count`, then per queue, sorted by
/// store id: `store id (16) ‖ issued (u64) ‖ finished through (u64) ‖ u32 n ‖ n finished numbers
/// above it (u64, ascending) ‖ queue hash (32) ‖ previous queue hash (32)`.
enum MarksFormat {
    static let magic: [UInt8] = Array("COFFERMK".utf8)
    /// The version this build writes.
    static let version: UInt16 = 4
    /// The first version, without pins; still read.
    static let version1: UInt16 = 1
    /// The second version, with pins and without the stores zones were verified in; still read.
    static let version2: UInt16 = 2
    /// The third version, without the replicas' queues; still read.
    static let version3: UInt16 = 3
    /// The most replica queues a file holds.
    static let maxQueues = 64
    /// The largest queue record.
    static let maxQueueByteCount = ServerPin.storeIDByteCount + 8 + 8 + 4 + IntentMarks.maxFinishedAbove * 8 + 2 * IntentMarks.hashByteCount
    static let headerByteCount = 10 // magic, version
    /// `crypto_kdf` context and subkey id of the marks key.
    static let keyContext = "cofmarks"
    static let keyID: UInt64 = 1
    /// The most marks a file holds.
    static let maxMarks = 100_000
    /// Every mark's size: its owner id is a user id, 32 characters.
    static let markByteCount = ZoneMark.zoneUIDByteCount + 1 + 32 + 8 + ZoneMark.hashByteCount // 89
    /// The most server pins a file holds.
    static let maxPins = 1_000
    /// The largest pin: an origin of at most 255 bytes and a store id.
    static let maxPinByteCount = 1 + ServerPin.maxOriginByteCount + ServerPin.storeIDByteCount
    /// The most stores a zone is noted as verified in (the newest are kept).
    static let maxStoresPerZone = 8
    /// The largest file a reader accepts (`maxMarks` marks, `maxPins` pins, each zone in
    /// `maxStoresPerZone` stores); a larger one is refused unread.
    static let maxFileSize = headerByteCount + XChaCha20Poly1305.overhead + 4 + maxMarks * markByteCount + 4 + maxPins * maxPinByteCount
        + 4 + maxMarks * (ZoneMark.zoneUIDByteCount + 1 + maxStoresPerZone * ServerPin.storeIDByteCount)
        + 4 + maxQueues * maxQueueByteCount

    /// Said by every error about a damaged file.
    static let deletionNote = "deleting it loses this user's rollback protection for every zone"

    /// The marks key: `crypto_kdf` subkey 1, context `cofmarks`, of the identity's Ed25519 seed.
    /// Only the vault holds the seed, it survives passphrase changes and re-keys, and every copy
    /// of the vault derives the same key.
    static func key(signingSeed: SecureBytes) throws -> SymmetricKey {
        KDF.deriveKey(from: try SymmetricKey(bytes: signingSeed), id: keyID, context: keyContext)
    }

    static func associatedData(userID: String, version: UInt16) -> [UInt8] {
        magic + BigEndian.bytes(version) + Array(userID.utf8)
    }

    /// What a file holds: marks by zone uid, store ids pinned by origin, and the ids of the
    /// stores each zone was verified in, by zone uid.
    struct Contents: Equatable {
        var marks: [[UInt8]: ZoneMark] = [:]
        var pins: [String: [UInt8]] = [:]
        var stores: [[UInt8]: [[UInt8]]] = [:]
        var intents: [[UInt8]: IntentMarks] = [:]
    }

    /// The file for `contents` (written sorted by zone uid and by origin).
    static func encode(_ contents: Contents, key: SymmetricKey, userID: String) throws -> [UInt8] {
        let marks = contents.marks.values
        guard marks.count <= maxMarks else {
            throw VaultError(.invalidArguments, "a marks file holds at most \(maxMarks) zones, not \(marks.count); nothing was saved")
        }
        guard contents.pins.count <= maxPins else {
            throw VaultError(.invalidArguments, "a marks file holds at most \(maxPins) server pins, not \(contents.pins.count); nothing was saved")
        }
        var plaintext = BigEndian.bytes(UInt32(marks.count))
        plaintext.reserveCapacity(4 + marks.count * markByteCount)
        for mark in marks.sorted(by: { $0.zoneUID.lexicographicallyPrecedes($1.zoneUID) }) {
            plaintext += mark.zoneUID
            plaintext.append(UInt8(mark.ownerID.utf8.count))
            plaintext += Array(mark.ownerID.utf8)
            plaintext += BigEndian.bytes(mark.seq)
            plaintext += mark.hash
        }
        plaintext += BigEndian.bytes(UInt32(contents.pins.count))
        for (origin, storeID) in contents.pins.sorted(by: { $0.key < $1.key }) {
            precondition(origin.utf8.count <= ServerPin.maxOriginByteCount && storeID.count == ServerPin.storeIDByteCount, "a pin checked by ServerPin")
            plaintext.append(UInt8(origin.utf8.count))
            plaintext += Array(origin.utf8)
            plaintext += storeID
        }
        let noted = contents.stores.filter { contents.marks[$0.key] != nil && !$0.value.isEmpty }
        plaintext += BigEndian.bytes(UInt32(noted.count))
        for (uid, stores) in noted.sorted(by: { $0.key.lexicographicallyPrecedes($1.key) }) {
            let kept = stores.suffix(maxStoresPerZone)
            precondition(kept.allSatisfy { $0.count == ServerPin.storeIDByteCount }, "store ids checked by MarkBook")
            plaintext += uid
            plaintext.append(UInt8(kept.count))
            for id in kept.sorted(by: { $0.lexicographicallyPrecedes($1) }) { plaintext += id }
        }
        guard contents.intents.count <= maxQueues else {
            throw VaultError(.invalidArguments, "a marks file holds at most \(maxQueues) replicas' pending changes, not \(contents.intents.count); nothing was saved")
        }
        plaintext += BigEndian.bytes(UInt32(contents.intents.count))
        for (storeID, queue) in contents.intents.sorted(by: { $0.key.lexicographicallyPrecedes($1.key) }) {
            precondition(storeID.count == ServerPin.storeIDByteCount, "store ids checked by MarkBook")
            plaintext += storeID
            plaintext += BigEndian.bytes(queue.issued)
            plaintext += BigEndian.bytes(queue.finishedThrough)
            plaintext += BigEndian.bytes(UInt32(queue.finishedAbove.count))
            for n in queue.finishedAbove { plaintext += BigEndian.bytes(n) }
            plaintext += queue.queueHash
            plaintext += queue.previousQueueHash
        }
        return try seal(plaintext, key: key, userID: userID, version: version)
    }

    /// The file around `plaintext`, sealed with a fresh nonce, as format `version` (version 1
    /// only for tests of files an older build wrote).
    static func seal(_ plaintext: [UInt8], key: SymmetricKey, userID: String, version: UInt16 = version1) throws -> [UInt8] {
        let ad = associatedData(userID: userID, version: version)
        return magic + BigEndian.bytes(version) + (try XChaCha20Poly1305.seal(plaintext, using: key, authenticating: ad)).combined
    }

    /// The marks and pins in `file`. Refuses (`.malformed` before authentication,
    /// `.integrityFailure` from it on) anything versions 1 and 2 do not write.
    static func decode(_ file: [UInt8], key: SymmetricKey, userID: String, path: String) throws -> Contents {
        func damaged(_ code: VaultError.Code, _ detail: String) -> VaultError {
            VaultError(code, "the marks file \(path) \(detail); \(deletionNote)")
        }
        guard file.count <= maxFileSize else { throw damaged(.malformed, "is too large (\(file.count) bytes)") }
        guard file.count >= magic.count, Array(file[0..<magic.count]) == magic else {
            throw damaged(.malformed, "is not a Coffer marks file (bad magic)")
        }
        guard file.count >= headerByteCount + XChaCha20Poly1305.overhead else { throw damaged(.malformed, "is truncated") }
        let v = UInt16(file[8]) << 8 | UInt16(file[9])
        guard (version1...version).contains(v) else {
            throw damaged(.malformed, "has format version \(v), which this build does not read (it reads versions \(version1) to \(version))")
        }
        let plaintext: [UInt8]
        do {
            let box = try XChaCha20Poly1305.SealedBox(combined: Array(file[headerByteCount...]))
            plaintext = try XChaCha20Poly1305.open(box, using: key, authenticating: associatedData(userID: userID, version: v))
        } catch {
            throw damaged(.integrityFailure, "fails authentication: it was changed or damaged, or belongs to another vault")
        }
        do {
            return try parse(plaintext, version: v)
        } catch let error as VaultError {
            throw damaged(.integrityFailure, "is damaged (\(error.message))")
        }
    }

    /// The authenticated plaintext's marks (pins from version 2 on, the stores zones were
    /// verified in from version 3 on); every error names what is wrong.
    private static func parse(_ plaintext: [UInt8], version v: UInt16) throws -> Contents {
        let withPins = v >= version2
        return try plaintext.withUnsafeBytes { raw in
            var r = ByteReader(raw, what: "a mark", errorCode: .integrityFailure)
            let count = Int(try r.u32())
            guard count <= maxMarks else { throw VaultError(.integrityFailure, "it lists \(count) zones, over \(maxMarks)") }
            let marksBytes = count * markByteCount
            guard withPins ? r.remaining >= marksBytes + 4 : r.remaining == marksBytes else {
                throw VaultError(.integrityFailure, "it lists \(count) zones in \(r.remaining) bytes (each takes \(markByteCount))")
            }
            var marks = [[UInt8]: ZoneMark]()
            marks.reserveCapacity(count)
            var previous: [UInt8]?
            for _ in 0..<count {
                let uid = try r.bytes(ZoneMark.zoneUIDByteCount)
                if let previous {
                    guard previous != uid else { throw VaultError(.integrityFailure, "a zone appears twice") }
                    guard previous.lexicographicallyPrecedes(uid) else { throw VaultError(.integrityFailure, "its zones are not in order") }
                }
                previous = uid
                let ownerLength = Int(try r.u8())
                guard let owner = String(validating: try r.take(ownerLength), as: UTF8.self),
                      UserIdentity.isWellFormed(userID: owner) else {
                    throw VaultError(.integrityFailure, "a zone's owner is not a user id")
                }
                let seq = try r.i64()
                guard seq >= 0 else { throw VaultError(.integrityFailure, "a zone's position is over the largest a log has") }
                let hash = try r.bytes(ZoneMark.hashByteCount)
                marks[uid] = try ZoneMark(zoneUID: uid, ownerID: owner, seq: seq, hash: hash)
            }
            var pins = [String: [UInt8]]()
            if withPins {
                let pinCount = Int(try r.u32())
                guard pinCount <= maxPins else { throw VaultError(.integrityFailure, "it lists \(pinCount) server pins, over \(maxPins)") }
                var previousOrigin: String?
                for _ in 0..<pinCount {
                    let length = Int(try r.u8())
                    guard let origin = String(validating: try r.take(length), as: UTF8.self), ServerPin.isNormalOrigin(origin) else {
                        throw VaultError(.integrityFailure, "a server pin's origin is not in normal form")
                    }
                    if let previousOrigin { guard previousOrigin < origin else { throw VaultError(.integrityFailure, "its server pins are not in order") } }
                    previousOrigin = origin
                    pins[origin] = try r.bytes(ServerPin.storeIDByteCount)
                }
            }
            var stores = [[UInt8]: [[UInt8]]]()
            if v >= 3 {
                let zoneCount = Int(try r.u32())
                guard zoneCount <= marks.count else { throw VaultError(.integrityFailure, "it notes stores for \(zoneCount) zones, over its \(marks.count) marks") }
                var previousZone: [UInt8]?
                for _ in 0..<zoneCount {
                    let uid = try r.bytes(ZoneMark.zoneUIDByteCount)
                    guard marks[uid] != nil else { throw VaultError(.integrityFailure, "it notes stores for a zone it has no mark of") }
                    if let previousZone { guard previousZone.lexicographicallyPrecedes(uid) else { throw VaultError(.integrityFailure, "its zones' stores are not in order") } }
                    previousZone = uid
                    let count = Int(try r.u8())
                    guard (1...maxStoresPerZone).contains(count) else { throw VaultError(.integrityFailure, "a zone is noted in \(count) stores (1 to \(maxStoresPerZone))") }
                    var ids = [[UInt8]]()
                    for _ in 0..<count {
                        let id = try r.bytes(ServerPin.storeIDByteCount)
                        if let last = ids.last { guard last.lexicographicallyPrecedes(id) else { throw VaultError(.integrityFailure, "a zone's stores are not in order") } }
                        ids.append(id)
                    }
                    stores[uid] = ids
                }
            }
            var intents = [[UInt8]: IntentMarks]()
            if v >= 4 {
                let queueCount = Int(try r.u32())
                guard queueCount <= maxQueues else { throw VaultError(.integrityFailure, "it lists \(queueCount) replicas' pending changes, over \(maxQueues)") }
                var previousStore: [UInt8]?
                for _ in 0..<queueCount {
                    let storeID = try r.bytes(ServerPin.storeIDByteCount)
                    if let previousStore { guard previousStore.lexicographicallyPrecedes(storeID) else { throw VaultError(.integrityFailure, "its pending-change queues are not in order") } }
                    previousStore = storeID
                    let issued = try r.u64(), through = try r.u64()
                    let count = Int(try r.u32())
                    guard issued <= UInt64(Int64.max), through <= issued, count <= IntentMarks.maxFinishedAbove else {
                        throw VaultError(.integrityFailure, "a pending-change queue's counters are out of range")
                    }
                    var above = [UInt64]()
                    for _ in 0..<count {
                        let n = try r.u64()
                        guard n > (above.last ?? (through + 1)), n <= issued else {
                            throw VaultError(.integrityFailure, "a pending-change queue's finished numbers are out of order")
                        }
                        above.append(n)
                    }
                    let hash = try r.bytes(IntentMarks.hashByteCount), previous = try r.bytes(IntentMarks.hashByteCount)
                    intents[storeID] = IntentMarks(issued: issued, finishedThrough: through, finishedAbove: above, queueHash: hash,
                                                   previousQueueHash: previous)
                }
            }
            guard r.remaining == 0 else { throw VaultError(.integrityFailure, "it has trailing bytes") }
            return Contents(marks: marks, pins: pins, stores: stores, intents: intents)
        }
    }
}

import CofferCrypto
import CofferVault
import Foundation

/// The heads of the zone logs one user verified, signed by that user: what two users exchange
/// to find a fork, a store (or, later, a server) that shows each of them another history of the
/// same zone. Each alone sees a log that verifies; only comparing the heads they saw shows that
/// the logs part.
///
/// ```swift
/// let mine = try await alice.verifiedHeads()
/// try mine.encoded().write(to: URL(fileURLWithPath: "alice.heads"))
/// let findings = try await bob.compareHeads(Data(contentsOf: URL(fileURLWithPath: "alice.heads")))
/// ```
///
/// The file is JSON: `format` (`"coffer-heads"`), `version` (1), `user` and `signingKey` (its
/// user id is the BLAKE2b-128 of that key, so the file names its signer without a directory),
/// `created` (ISO 8601), `heads` (each `zone` uid and `owner`, `seq`, `hash`) and `signature`
/// (Ed25519 over the fields, framed, under the domain `coffer.heads.v1`).
public struct ZoneHeads: Sendable, Hashable {
    /// One zone's verified head.
    public struct Head: Sendable, Hashable {
        /// The zone's uid (16 bytes).
        public let zoneUID: [UInt8]
        public let ownerID: String
        /// The position of the newest verified entry.
        public let seq: Int64
        /// That entry's hash (32 bytes).
        public let hash: [UInt8]
    }

    public let userID: String
    public let signingKey: Ed25519.PublicKey
    public let created: String
    /// By zone uid, each zone once.
    public let heads: [Head]
    let signature: [UInt8]

    static let format = "coffer-heads"
    static let version: Int64 = 1
    /// The most heads a file may hold (a user's zones; far above any real count).
    static let maxHeads = 100_000

    /// The bytes the signature covers.
    static func signedBytes(userID: String, signingKey: Ed25519.PublicKey, created: String, heads: [Head]) -> [UInt8] {
        var out = Array("coffer.heads.v1".utf8)
        func framed(_ bytes: [UInt8]) {
            let n = UInt32(bytes.count)
            out += [UInt8(n >> 24), UInt8(n >> 16 & 0xff), UInt8(n >> 8 & 0xff), UInt8(n & 0xff)]
            out += bytes
        }
        framed(Array(userID.utf8))
        framed(signingKey.rawRepresentation)
        framed(Array(created.utf8))
        framed([])
        for head in heads {
            framed(head.zoneUID)
            framed(Array(head.ownerID.utf8))
            framed((0..<8).map { UInt8(truncatingIfNeeded: UInt64(bitPattern: head.seq) >> (56 - 8 * $0)) })
            framed(head.hash)
        }
        return out
    }

    /// Signs `heads` as the vault's user, now.
    init(signing heads: [Head], with vault: Vault, now: Date = Date()) {
        let created = ISO8601DateFormatter().string(from: now)
        let identity = vault.identity
        let sorted = heads.sorted { $0.zoneUID.lexicographicallyPrecedes($1.zoneUID) }
        self.init(userID: identity.userID, signingKey: identity.signingKey, created: created, heads: sorted,
                  signature: vault.signingKey.signature(for: Self.signedBytes(userID: identity.userID, signingKey: identity.signingKey,
                                                                               created: created, heads: sorted)))
    }

    private init(userID: String, signingKey: Ed25519.PublicKey, created: String, heads: [Head], signature: [UInt8]) {
        self.userID = userID
        self.signingKey = signingKey
        self.created = created
        self.heads = heads
        self.signature = signature
    }

    /// The file's JSON (one object, keys sorted, a final newline).
    public func encoded() -> Data {
        var w = JSONWriter(pretty: true, capacity: 256 + heads.count * 200)
        w.beginObject()
        w.key("created"); w.string(created)
        w.key("format"); w.string(Self.format)
        w.key("heads")
        w.beginArray()
        for head in heads {
            w.beginObject()
            w.key("hash"); w.string(Hex.encode(head.hash))
            w.key("owner"); w.string(head.ownerID)
            w.key("seq"); w.int(head.seq)
            w.key("zone"); w.string(Hex.encode(head.zoneUID))
            w.endObject()
        }
        w.endArray()
        w.key("signature"); w.string(Data(signature).base64EncodedString())
        w.key("signingKey"); w.string(Data(signingKey.rawRepresentation).base64EncodedString())
        w.key("user"); w.string(userID)
        w.key("version"); w.int(Self.version)
        w.endObject()
        w.bytes.append(0x0a)
        return Data(w.bytes)
    }

    /// Reads a heads file strictly: every key known and present, each value well formed, each
    /// zone once, the user id that of the signing key, the signature valid.
    /// - Throws: `.invalidArguments` naming what is wrong.
    public init(decoding data: Data) throws {
        func bad(_ why: String) -> StoreError { StoreError(.invalidArguments, "not a heads file of coffer audit --heads: \(why)") }
        guard data.count <= 64 << 20 else { throw bad("larger than 64 MiB") }
        let parsed: JSONValue
        do {
            parsed = try data.withUnsafeBytes { raw in try JSONReader.parse(raw.bindMemory(to: UInt8.self)) }
        } catch {
            throw bad("not valid JSON (or a key twice in one object)")
        }
        guard case .object(let top) = parsed else { throw bad("not a JSON object") }
        let keys = ["created", "format", "heads", "signature", "signingKey", "user", "version"]
        if let unknown = top.keys.sorted().first(where: { !keys.contains($0) }) { throw bad("unknown key '\(unknown)'") }
        func string(_ key: String, in object: JSONObject) throws -> String {
            guard case .string(let s)? = object[key] else { throw bad("'\(key)' must be a string") }
            return s
        }
        func bytes(_ key: String, in object: JSONObject, count: Int, hex: Bool) throws -> [UInt8] {
            let text = try string(key, in: object)
            let decoded = hex ? Hex.decode(text) : RecordValue.canonicalBase64(text).map(Array.init)
            guard let decoded, decoded.count == count, !hex || Hex.encode(decoded) == text else {
                throw bad("'\(key)' must be \(count) bytes in \(hex ? "lowercase hexadecimal" : "base64")")
            }
            return decoded
        }
        guard try string("format", in: top) == Self.format else { throw bad("'format' is not \(Self.format)") }
        guard case .integer(Self.version)? = top["version"] else { throw bad("'version' must be \(Self.version)") }
        let userID = try string("user", in: top)
        let key: Ed25519.PublicKey
        do { key = try Ed25519.PublicKey(rawRepresentation: try bytes("signingKey", in: top, count: 32, hex: false)) } catch let e as StoreError {
            throw e
        } catch {
            throw bad("'signingKey' is not an Ed25519 public key")
        }
        guard UserIdentity.userID(for: key) == userID else { throw bad("'user' is not the user id of 'signingKey'") }
        let created = try string("created", in: top)
        guard created.utf8.count <= 40, ISO8601DateFormatter().date(from: created) != nil else { throw bad("'created' must be an ISO 8601 time") }
        let signature = try bytes("signature", in: top, count: 64, hex: false)
        guard case .array(let items)? = top["heads"] else { throw bad("'heads' must be a list") }
        guard items.count <= Self.maxHeads else { throw bad("more than \(Self.maxHeads) heads") }
        var heads = [Head]()
        var seen = Set<[UInt8]>()
        for item in items {
            guard case .object(let object) = item else { throw bad("each head must be an object") }
            if let unknown = object.keys.sorted().first(where: { !["hash", "owner", "seq", "zone"].contains($0) }) {
                throw bad("unknown key '\(unknown)' in a head")
            }
            let zone = try bytes("zone", in: object, count: 16, hex: true)
            let owner = try string("owner", in: object)
            guard UserIDs.isValid(owner) else { throw bad("a head's 'owner' must be a user id") }
            guard case .integer(let seq)? = object["seq"], seq >= 1 else { throw bad("a head's 'seq' must be a whole number from 1") }
            let hash = try bytes("hash", in: object, count: 32, hex: true)
            guard seen.insert(zone).inserted else { throw bad("zone \(Hex.encode(zone)) appears twice") }
            heads.append(Head(zoneUID: zone, ownerID: owner, seq: seq, hash: hash))
        }
        guard key.isValidSignature(signature, for: Self.signedBytes(userID: userID, signingKey: key, created: created, heads: heads)) else {
            throw StoreError(.integrityFailure, "the heads file's signature does not verify: it was changed after \(userID) wrote it")
        }
        self.init(userID: userID, signingKey: key, created: created, heads: heads, signature: signature)
    }
}

/// What ``Session/compareHeads(_:)`` found.
public struct HeadsComparison: Sendable {
    /// The other user's heads, verified.
    public let other: ZoneHeads
    /// Zones both of you verified, compared entry by entry.
    public let compared: Int
    /// Zones in the other file that this user cannot open in this store: those whose log here
    /// says they are not shared with this user (nothing to compare), and those the store does not
    /// show (each also a finding).
    public let notHere: Int
    /// This user's marks (those not closed by a deletion) checked against the store: a marked
    /// zone it does not show is a finding.
    public let marks: Int
    /// Forks (a zone whose log the two of you saw part), zones of the other's file this store does
    /// not show you, and marked zones it does not show you. Each names the zone and the entry.
    public let findings: [AuditFinding]
}

extension Session {
    /// The head of every zone this user can open, each log verified now (so the marks in the
    /// vault advance to it), signed with this user's key.
    public func verifiedHeads() async throws -> ZoneHeads {
        let zones = try await zoneDirectory.ownedZones().map(\.id) + zoneDirectory.sharedZones().map(\.id)
        var heads = [ZoneHeads.Head]()
        for zoneID in zones {
            let head: ZoneHeads.Head = try await read { db in
                let zone = try self.accessControl.zoneRow(db, zoneID)
                try self.accessControl.checkCanRead(db, zone: zone)
                let state = try self.verifiedLogs.zoneLog(db, zone: zone).state
                return ZoneHeads.Head(zoneUID: zone.uid, ownerID: state.ownerID, seq: state.headSeq, hash: state.headHash.bytes)
            }
            heads.append(head)
        }
        try saveMarks()
        return ZoneHeads(signing: heads, with: vault)
    }

    /// Compares another user's heads file (``ZoneHeads``) with the logs this user verifies in
    /// this store: for each zone both can open, the entry at the other's head must have the
    /// other's hash in this user's verified log, and the log must reach it. A zone where it does
    /// not is a fork (or entries hidden from this user), reported as a `.log` finding. A zone of
    /// the file that this store does not show this user is a finding too, unless its log here,
    /// verified, says it is not shared with them; and so is each zone of this user's marks (not
    /// closed by a deletion) that the store does not show them (see ``audit(plaintexts:progress:)``).
    /// - Throws: `.invalidArguments` for a file that is not a heads file, `.integrityFailure`
    ///   when its signature does not verify.
    public func compareHeads(_ data: Data) async throws -> HeadsComparison {
        let other = try ZoneHeads(decoding: data)
        let readable = try await zoneDirectory.ownedZones().map(\.id) + zoneDirectory.sharedZones().map(\.id)
        var findings = [AuditFinding]()
        var compared = 0, notHere = 0
        var reported = Set<[UInt8]>()
        let who = other.userID
        for head in other.heads {
            let here: HeadOutcome? = try await read { db in
                guard let zone = try readable.lazy.compactMap({ try db.zoneRow($0) }).first(where: { $0.uid == head.zoneUID }) else {
                    return nil
                }
                let log = try self.verifiedLogs.zoneLog(db, zone: zone)
                func fork(_ message: String) -> HeadOutcome {
                    .compared(AuditFinding(kind: .log, zone: zone.id, subject: "entry \(head.seq)", message: message))
                }
                guard log.state.ownerID == head.ownerID else {
                    return fork("\(who) saw this zone owned by \(head.ownerID); its log here is owned by \(log.state.ownerID)")
                }
                guard head.seq <= log.state.headSeq else {
                    return fork("\(who) verified the log up to this entry; here it reaches only entry \(log.state.headSeq): entries are hidden from you, or the log forked")
                }
                guard let mine = log.hash(at: head.seq) else {
                    return .compared(nil) // before this zone's first entry here (a migrated zone): nothing to compare
                }
                guard mine.bytes == head.hash else {
                    return fork("this entry is not the one \(who) verified: the log forked (you and \(who) were shown different histories)")
                }
                return .compared(nil)
            }
            let outcome: HeadOutcome
            if let here {
                outcome = here
            } else {
                do { outcome = try await read { db in try self.unshown(db, head, who: who) } } catch let error as StoreError {
                    // A store (a server) that refuses to show it.
                    outcome = .unshown(AuditFinding(kind: .log, zone: nil, subject: "zone \(Hex.encode(head.zoneUID))",
                                                    message: "\(who) verified \(verifiedLogs.describeZone(uid: head.zoneUID, ownerID: head.ownerID)) up to entry \(head.seq), but this store does not let you read it: \(error.message)",
                                                    zoneOwnerID: head.ownerID))
                }
            }
            switch outcome {
            case .notShared: notHere += 1
            case .unshown(let found):
                notHere += 1
                reported.insert(head.zoneUID)
                findings.append(found)
            case .compared(let found):
                compared += 1
                if let found { findings.append(found) }
            }
        }
        // Every zone this user verified before, whatever the store lists now.
        let marked = try await zoneDirectory.unlistedMarkedZones(listed: readable, skipping: reported)
        findings += marked.findings
        try saveMarks()
        return HeadsComparison(other: other, compared: compared, notHere: notHere, marks: marked.checked, findings: findings)
    }

    /// A zone of the other's heads that this store does not show this user.
    private enum HeadOutcome: Sendable {
        /// Compared with the log here: a fork, or nil.
        case compared(AuditFinding?)
        /// Its log here, verified, says this user may not read it (not shared with them), or
        /// the store kept its owner's signed deletion, past the other's head.
        case notShared
        /// Not shown, and nothing here says why: a finding.
        case unshown(AuditFinding)
    }

    /// ``HeadOutcome/notShared`` when the store holds the zone and its log, verified from its
    /// genesis (without moving this user's marks), agrees with the head's owner and says this
    /// user may not read it; else a finding: the store's lists are not signed, and one that
    /// leaves out a zone another user verified proves nothing.
    private func unshown(_ db: any StorageTransaction, _ head: ZoneHeads.Head, who: String) throws -> HeadOutcome {
        let uid = Hex.encode(head.zoneUID)
        func finding(_ why: String) -> HeadOutcome {
            .unshown(AuditFinding(kind: .log, zone: nil, subject: "zone \(uid)", message: "\(who) verified \(verifiedLogs.describeZone(uid: head.zoneUID, ownerID: head.ownerID)) up to entry \(head.seq), but \(why)",
                                  zoneOwnerID: head.ownerID))
        }
        if let kept = try db.deletedZone(uid: head.zoneUID),
           let seen = try? ZoneMark(zoneUID: head.zoneUID, ownerID: head.ownerID, seq: head.seq, hash: head.hash),
           (try? verifiedLogs.verifiedDeletion(db, kept, mark: seen)) != nil {
            return .notShared // its owner deleted it after the other's head
        }
        let found: ZoneRow?
        do { found = try zoneDirectory.zoneRow(db, uid: head.zoneUID, ownerID: head.ownerID) } catch let error as StoreError {
            return finding("this store does not let you read it: \(error.message)")
        }
        guard let zone = found, zone.id.ownerID == head.ownerID else {
            return finding("this store does not show it to you: it was hidden from you or lost here (a rollback, an interrupted restore), or it is not shared with you")
        }
        do {
            let log = try verifiedLogs.walkLog(db, zone: zone, signaturesAfter: 0)
            if let tail = log.refusedTail { return finding("its log here is refused: \(tail.error.message)") }
            if let mark = try verifiedLogs.storedMark(zone) { _ = try verifiedLogs.extendsMark(db, log, zone: zone, mark: mark) }
            guard !AccessControl.mayRead(log.state, userID) else {
                return finding("this store does not list it among your zones, yet its log says you may read it: it was hidden from you")
            }
            return .notShared
        } catch let error as StoreError {
            return finding("its log here is refused: \(error.message)")
        }
    }
}

import CofferCrypto
import Foundation

/// One entry of a zone's signed, hash-chained log (see `Docs/Security.md`, "The zone log").
///
/// Every entry is signed by its author with Ed25519 over its canonical bytes (``body``). Entries
/// are written in format 2; format 1 entries, which stores made before format 2 hold, keep
/// verifying. Format 2 (``Format/v2``):
///
/// | bytes | field |
/// | --- | --- |
/// | 11 | `"coffer.log\0"` |
/// | 1 | format (`2`) |
/// | 16 | zone uid |
/// | 8 | sequence (big-endian; the first entry's is 1, or one past a migrated zone's last commit) |
/// | 32 | hash of the previous entry (zeros for the first) |
/// | 1 | kind (``Kind``) |
/// | 1 + n | author's user id (length, ASCII) |
/// | 1 + n | signing device's id (length 0: signed by the author's identity key; or 16) |
/// | 8 | the author's user-log position the device signs under (0 with no device) |
/// | 8 | time (IEEE 754 bits of seconds since 1970) |
/// | 2 + 16n | ids of the pending changes a commit confirms (count, then 16 bytes each; 0 for other kinds) |
/// | 4 + n | payload (length, kind-specific bytes: see each payload type) |
///
/// Format 1 (``Format/v1``) is `"coffer.log.v1\0"` (14 bytes) and then the same fields without the
/// device, the user-log position and the confirmed ids.
///
/// The device, its user-log position and the confirmed ids are room for devices and offline
/// changes: this version signs with no device and confirms no ids, and ``ZoneState`` refuses an
/// entry that names a device. The entry's hash, which the next entry names, is BLAKE2b-256 of the
/// body and the signature. A decoder refuses any other layout, an unknown format or kind, and
/// trailing bytes.
package struct LogEntry: Sendable {
    package enum Kind: UInt8, Sendable, CustomStringConvertible {
        /// The zone's first entry, by its owner: the zone's uid, name and owner, its first state.
        case genesis = 1
        /// A new state of members, permissions and key epoch, by the owner.
        case membership = 2
        /// Record versions and deletions, by a writer.
        case commit = 3
        /// A participant accepts or leaves the share.
        case acceptance = 4
        /// Records re-sealed by the owner (re-key), keeping each one's modifier and times.
        case rewrite = 5
        /// The zone deleted by its owner: the log's last entry (its payload is empty). The store
        /// keeps it, with the genesis, after the zone's rows, keys and other entries are gone.
        case deletion = 6

        package var description: String {
            switch self {
            case .genesis: return "genesis"
            case .membership: return "membership"
            case .commit: return "commit"
            case .acceptance: return "acceptance"
            case .rewrite: return "rewrite"
            case .deletion: return "deletion"
            }
        }
    }

    /// An entry's byte layout. A zone's log never goes back to an earlier format (``ZoneState``).
    package enum Format: UInt8, Sendable, Comparable {
        /// Stores made before format 2.
        case v1 = 1
        /// Every entry written now.
        case v2 = 2

        package static func < (a: Format, b: Format) -> Bool { a.rawValue < b.rawValue }
    }

    /// Format 1's 14 leading bytes.
    package static let domainV1 = Array("coffer.log.v1".utf8) + [0]
    /// Format 2's 11 leading bytes, before the format byte.
    package static let domain = Array("coffer.log".utf8) + [0]
    /// A device id's length.
    package static let deviceIDLength = 16
    /// A confirmed change's id's length.
    package static let changeIDLength = 16
    /// The most ids one commit confirms: one per record it may write.
    package static let maxConfirmed = Limits.maxBatchRecords

    package let zoneUID: [UInt8]
    package let seq: Int64
    package let prev: Digest32
    package let kind: Kind
    package let authorID: String
    package let time: Double
    package let payload: [UInt8]
    package var format: Format = .v2
    /// The signing device's id; empty when the author's identity key signs (format 1 always).
    package var deviceID: [UInt8] = []
    /// The author's user-log position the device signs under; 0 with no device.
    package var userLogSeq: Int64 = 0
    /// Ids (16 bytes each) of the pending changes a commit confirms, one after another; empty
    /// for other kinds. Kept flat: a commit carries hundreds, read each time its entry is.
    package var confirmedBytes: [UInt8] = []

    /// ``confirmedBytes`` as one id each.
    package var confirmed: [[UInt8]] {
        get { stride(from: 0, to: confirmedBytes.count, by: Self.changeIDLength).map { Array(confirmedBytes[$0..<($0 + Self.changeIDLength)]) } }
        set { confirmedBytes = newValue.flatMap { $0 } }
    }

    /// The confirmed changes' ids as keys, to look ids up among many without an array each.
    package var confirmedKeys: some Sequence<ChangeKey> {
        stride(from: 0, to: confirmedBytes.count, by: Self.changeIDLength).lazy.map { ChangeKey(confirmedBytes[$0..<($0 + Self.changeIDLength)]) }
    }

    /// A change's 16-byte id as a value that needs no allocation.
    package struct ChangeKey: Hashable, Sendable {
        let high: UInt64, low: UInt64

        /// The key of `id` (`changeIDLength` bytes).
        package init(_ id: some Collection<UInt8>) {
            precondition(id.count == LogEntry.changeIDLength)
            var (high, low) = (UInt64(0), UInt64(0))
            for (i, byte) in id.enumerated() {
                if i < 8 { high = high << 8 | UInt64(byte) } else { low = low << 8 | UInt64(byte) }
            }
            (self.high, self.low) = (high, low)
        }
    }

    /// The canonical bytes the author signs.
    package var body: [UInt8] {
        var w = ByteWriter()
        switch format {
        case .v1:
            w.append(Self.domainV1)
        case .v2:
            w.append(Self.domain)
            w.u8(Format.v2.rawValue)
        }
        w.append(zoneUID)
        w.u64(UInt64(bitPattern: seq))
        w.append(prev.bytes)
        w.u8(kind.rawValue)
        w.short(authorID)
        if format == .v2 {
            w.u8(UInt8(deviceID.count))
            w.append(deviceID)
            w.i64(userLogSeq)
        }
        w.u64(time.bitPattern)
        if format == .v2 {
            w.u16(confirmedBytes.count / Self.changeIDLength)
            w.append(confirmedBytes)
        }
        w.u32(payload.count)
        w.append(payload)
        return w.bytes
    }

    /// Parses a body of either format; nil for anything that is not exactly one well-formed entry.
    package static func decode(_ body: [UInt8]) -> LogEntry? {
        body.withUnsafeBytes { raw in
            var r = RawReader(raw, what: "log entry")
            do {
                let format: Format
                if body.starts(with: domainV1) {
                    _ = try r.take(domainV1.count)
                    format = .v1
                } else {
                    guard Array(try r.take(domain.count)) == domain, try r.u8() == Format.v2.rawValue else { return nil }
                    format = .v2
                }
                let uid = Array(try r.take(16))
                let seq = Int64(bitPattern: try r.u64())
                let prev = Digest32(try r.take(32))
                guard seq >= 1, seq <= Limits.maxLogSequence, let kind = Kind(rawValue: try r.u8()) else { return nil }
                let author = try r.short()
                guard UserIDs.isValid(author) else { return nil }
                var deviceID = [UInt8](), userLogSeq: Int64 = 0
                if format == .v2 {
                    let length = Int(try r.u8())
                    guard length == 0 || length == deviceIDLength else { return nil }
                    deviceID = Array(try r.take(length))
                    userLogSeq = Int64(bitPattern: try r.u64())
                    guard deviceID.isEmpty ? userLogSeq == 0 : (1...Limits.maxLogSequence).contains(userLogSeq) else { return nil }
                }
                let time = Double(bitPattern: try r.u64())
                guard time.isFinite else { return nil }
                var confirmed = [UInt8]()
                if format == .v2 {
                    let count = Int(try r.u16())
                    guard count <= maxConfirmed, count == 0 || kind == .commit else { return nil }
                    confirmed = Array(try r.take(count * changeIDLength))
                    var seen = Set<ChangeKey>(minimumCapacity: count)
                    for start in stride(from: 0, to: confirmed.count, by: changeIDLength) {
                        guard seen.insert(ChangeKey(confirmed[start..<(start + changeIDLength)])).inserted else { return nil }
                    }
                }
                let count = Int(try r.u32())
                let payload = Array(try r.take(count))
                guard r.remaining == 0 else { return nil }
                return LogEntry(zoneUID: uid, seq: seq, prev: prev, kind: kind, authorID: author, time: time, payload: payload,
                                format: format, deviceID: deviceID, userLogSeq: userLogSeq, confirmedBytes: confirmed)
            } catch {
                return nil
            }
        }
    }

    /// BLAKE2b-256 of a body and its signature: what the next entry names.
    package static func hash(body: [UInt8], signature: [UInt8]) -> Digest32 {
        body.withUnsafeBytes { b in
            signature.withUnsafeBytes { s in
                var digest = Digest32.zero
                withUnsafeMutableBytes(of: &digest) { BLAKE2b.hash(b, s, nil, into: $0) }
                return digest
            }
        }
    }
}

/// A log entry as stored: its body and signature, and for record entries the lists the body
/// names by hash.
package struct StoredLogEntry: Sendable {
    package let seq: Int64
    package let body: [UInt8]
    package let signature: [UInt8]
    /// The 32-byte version hashes of a commit, rewrite or migrated genesis.
    package let entries: [UInt8]?
    /// Per entry: `0` saved or `1` deleted, the name's length in one byte, the name.
    package let names: [UInt8]?

    package var hash: Digest32 { LogEntry.hash(body: body, signature: signature) }

    package init(seq: Int64, body: [UInt8], signature: [UInt8], entries: [UInt8]?, names: [UInt8]?) {
        self.seq = seq
        self.body = body
        self.signature = signature
        self.entries = entries
        self.names = names
    }
}

/// The one check of a log entry's signature, made by clients verifying a zone's log and by a
/// server checking a batch and its stored logs: Ed25519 by the author's key over the body.
package enum LogEntrySignature {
    package static func verify(stored: StoredLogEntry, key: Ed25519.PublicKey) -> Bool {
        key.isValidSignature(stored.signature, for: stored.body)
    }
}

extension StoredLogEntry {
    /// The entry, read as every verifier of a zone's log reads it (a client walking the log, a
    /// server checking a batch or replaying its store): its body decodes, at the position it is
    /// stored at, and, when `key` is given, is signed by its author (`key` gives the author's
    /// key, nil for an author without a card). What the entry may change is ``ZoneState``'s to
    /// say, applied next.
    /// - Parameter describe: how a refusal names the author.
    /// - Throws: ``ZoneState/Refusal`` naming the position and why; an error of `key`.
    package func checked(key: ((String) throws -> Ed25519.PublicKey?)?, describe: (String) -> String = { $0 }) throws -> LogEntry {
        guard let entry = LogEntry.decode(body), entry.seq == seq else {
            throw ZoneState.Refusal(seq: seq, reason: seq == 1 ? "the first entry is malformed" : "the entry is malformed")
        }
        guard let key else { return entry }
        guard let authorKey = try key(entry.authorID) else {
            throw ZoneState.Refusal(seq: seq, reason: "it is signed by \(entry.authorID), who is not a contact of this store")
        }
        guard LogEntrySignature.verify(stored: self, key: authorKey) else {
            throw ZoneState.Refusal(seq: seq, reason: "its signature by \(describe(entry.authorID)) does not verify")
        }
        return entry
    }
}

/// User ids: 32 lowercase hexadecimal characters (BLAKE2b-128 of a signing key).
package enum UserIDs {
    package static func isValid(_ id: String) -> Bool {
        id.utf8.count == 32 && id.utf8.allSatisfy { ($0 >= 0x30 && $0 <= 0x39) || ($0 >= 0x61 && $0 <= 0x66) }
    }
}

/// Big-endian, length-prefixed writes for canonical encodings.
package struct ByteWriter {
    package var bytes = [UInt8]()

    package mutating func append(_ b: [UInt8]) { bytes += b }
    package mutating func u8(_ v: UInt8) { bytes.append(v) }
    package mutating func u16(_ v: Int) { bytes += BigEndian.bytes(UInt16(truncatingIfNeeded: v)) }
    package mutating func u32(_ v: Int) { bytes += BigEndian.bytes(UInt32(truncatingIfNeeded: v)) }
    package mutating func u64(_ v: UInt64) { bytes += BigEndian.bytes(v) }
    package mutating func i64(_ v: Int64) { u64(UInt64(bitPattern: v)) }
    /// Text of at most 255 bytes, after its length in one byte.
    package mutating func short(_ s: String) {
        precondition(s.utf8.count <= 255, "short texts are at most 255 bytes")
        u8(UInt8(s.utf8.count))
        bytes += Array(s.utf8)
    }
    /// Text after its length in four bytes.
    package mutating func long(_ s: String) {
        u32(s.utf8.count)
        bytes += Array(s.utf8)
    }
    package mutating func optionalBytes(_ b: [UInt8]?) {
        if let b { u8(1); append(b) } else { u8(0) }
    }
}

extension RawReader {
    /// Text after its length in one byte.
    package mutating func short() throws -> String { try utf8(count: Int(try u8())) }
    /// Text after its length in four bytes.
    package mutating func long(max: Int) throws -> String {
        let n = Int(try u32())
        guard n <= max else { throw fail("text too long") }
        return try utf8(count: n)
    }
    package mutating func bytes(_ n: Int) throws -> [UInt8] { Array(try take(n)) }
    /// `0`, or `1` and `n` bytes.
    package mutating func optionalBytes(_ n: Int) throws -> [UInt8]? {
        switch try u8() {
        case 0: return nil
        case 1: return try bytes(n)
        default: throw fail("bad flag")
        }
    }
    package mutating func i64() throws -> Int64 { Int64(bitPattern: try u64()) }
}

import CofferCrypto
import CofferStoreTestSupport
import Foundation
import Testing
@testable import CofferStore

/// The zone log's decoders: each takes exactly what the encoder makes and refuses everything
/// else (a truncation, a trailing byte, an unknown kind, a sequence or epoch out of range, a
/// label or title with control characters), never crashing.
@Suite("Zone log codecs")
struct LogCodecTests {
    static let uid = [UInt8](repeating: 9, count: 16)
    static let author = String(repeating: "ab", count: 16)
    static let summary = RecordsSummary(entries: [UInt8](repeating: 1, count: 64), names: [0, 2, 0x6e, 0x31, 0, 2, 0x6e, 0x32])

    static func entry(seq: Int64 = 5, kind: LogEntry.Kind = .commit, time: Double = 1.7e9, payload: [UInt8] = [1, 2, 3],
                      format: LogEntry.Format = .v2) -> LogEntry {
        var entry = LogEntry(zoneUID: uid, seq: seq, prev: Digest32([UInt8](repeating: 4, count: 32)), kind: kind, authorID: author, time: time,
                             payload: payload)
        entry.format = format
        return entry
    }

    @Test("a log entry round-trips in either format; every truncation and a trailing byte are refused", arguments: [LogEntry.Format.v1, .v2])
    func entryRoundTrip(_ format: LogEntry.Format) throws {
        let body = Self.entry(format: format).body
        let decoded = try #require(LogEntry.decode(body))
        #expect(decoded.body == body && decoded.seq == 5 && decoded.kind == .commit && decoded.authorID == Self.author && decoded.format == format)
        #expect(body.starts(with: format == .v1 ? LogEntry.domainV1 : LogEntry.domain + [2]))
        for n in 0..<body.count { #expect(LogEntry.decode(Array(body.prefix(n))) == nil, "truncated to \(n)") }
        #expect(LogEntry.decode(body + [0]) == nil)
    }

    @Test("a log entry's sequence is 1 to 2^53, its kind known, its time finite", arguments: [
        ("seq 0", 0), ("seq 2^53 + 1", 1), ("seq Int64.max", 2), ("kind 9", 3), ("time NaN", 4), ("time infinite", 5),
    ], [LogEntry.Format.v1, .v2])
    func entryFields(_ field: (name: String, variant: Int), _ format: LogEntry.Format) {
        let (name, variant) = field
        var body = Self.entry(format: format).body
        let seqAt = (format == .v1 ? LogEntry.domainV1.count : LogEntry.domain.count + 1) + 16, kindAt = seqAt + 8 + 32
        let timeAt = kindAt + 1 + 1 + Self.author.utf8.count + (format == .v1 ? 0 : 1 + 8)
        func put(_ value: UInt64, at offset: Int) { body.replaceSubrange(offset..<offset + 8, with: BigEndian.bytes(value)) }
        switch variant {
        case 0: put(0, at: seqAt)
        case 1: put(UInt64(Limits.maxLogSequence) + 1, at: seqAt)
        case 2: put(UInt64(Int64.max), at: seqAt)
        case 3: body[kindAt] = 9
        case 4: put(Double.nan.bitPattern, at: timeAt)
        default: put(Double.infinity.bitPattern, at: timeAt)
        }
        #expect(LogEntry.decode(body) == nil, "\(name)")
        #expect(LogEntry.decode(Self.entry(seq: Limits.maxLogSequence, format: format).body)?.seq == Limits.maxLogSequence)
    }

    @Test("format 2's signing device, user-log position and confirmed ids: a device id of 16 bytes with a position of 1 to 2^53, or neither; ids only on a commit, 16 bytes each, distinct, at most one per record of a batch; no other format byte")
    func entryV2Fields() throws {
        func body(kind: LogEntry.Kind = .commit, device: [UInt8] = [], position: Int64 = 0, confirmed: [[UInt8]] = []) -> [UInt8] {
            var entry = Self.entry(kind: kind)
            entry.deviceID = device
            entry.userLogSeq = position
            entry.confirmed = confirmed
            return entry.body
        }
        let device = [UInt8](repeating: 0xd1, count: 16), ids = (0..<3).map { [UInt8](repeating: UInt8($0), count: 16) }
        let decoded = try #require(LogEntry.decode(body(device: device, position: 9, confirmed: ids)))
        #expect(decoded.deviceID == device && decoded.userLogSeq == 9 && decoded.confirmed == ids)
        #expect(decoded.body == body(device: device, position: 9, confirmed: ids))
        let most = (0..<LogEntry.maxConfirmed).map { i in [UInt8](repeating: 0, count: 14) + BigEndian.bytes(UInt16(i)) }
        #expect(LogEntry.decode(body(confirmed: most))?.confirmed.count == Limits.maxBatchRecords)
        for (name, bad) in [
            ("a device id of 15 bytes", body(device: Array(device.prefix(15)), position: 1)),
            ("a device with position 0", body(device: device, position: 0)),
            ("a device with position 2^53 + 1", body(device: device, position: Limits.maxLogSequence + 1)),
            ("a position with no device", body(position: 3)),
            ("ids on a membership entry", body(kind: .membership, confirmed: ids)),
            ("ids on a rewrite", body(kind: .rewrite, confirmed: ids)),
            ("an id twice", body(confirmed: [ids[0], ids[1], ids[0]])),
            ("one id too many", body(confirmed: most + [[UInt8](repeating: 0xff, count: 16)])),
        ] {
            #expect(LogEntry.decode(bad) == nil, "\(name)")
        }
        var unknown = body()
        unknown[LogEntry.domain.count] = 3
        #expect(LogEntry.decode(unknown) == nil, "format 3")
        unknown[LogEntry.domain.count] = 1
        #expect(LogEntry.decode(unknown) == nil, "format byte 1 after format 2's prefix")
    }

    @Test("a commit's payload: epoch and owner's entry 1 to 2^53, a label of at most 255 bytes without control characters")
    func recordsPayload() {
        func payload(epoch: Int64 = 2, ownerSeq: Int64 = 3, label: String? = "importer") -> [UInt8] {
            RecordsPayload(epoch: epoch, ownerSeq: ownerSeq, label: label, records: Self.summary).encoded
        }
        let good = RecordsPayload.decode(payload())
        #expect(good?.epoch == 2 && good?.ownerSeq == 3 && good?.label == "importer" && good?.records == Self.summary)
        #expect(RecordsPayload.decode(payload(label: nil))?.label == nil)
        #expect(RecordsPayload.decode(payload(epoch: Limits.maxLogSequence))?.epoch == Limits.maxLogSequence)
        for bad in [payload(epoch: 0), payload(epoch: Limits.maxLogSequence + 1), payload(ownerSeq: 0), payload(ownerSeq: Int64.max),
                    payload(label: "a\u{1b}[2J"), payload(label: "tab\there"), payload(label: "c1\u{9b}31m"), payload(label: "del\u{7f}"),
                    payload(label: String(repeating: "x", count: 256)), payload() + [0]] {
            #expect(RecordsPayload.decode(bad) == nil)
        }
        let bytes = payload()
        for n in 0..<bytes.count { #expect(RecordsPayload.decode(Array(bytes.prefix(n))) == nil) }
    }

    @Test("an acceptance's version is 1 to 2^53")
    func acceptancePayload() {
        func payload(version: Int64) -> [UInt8] {
            AcceptancePayload(shareUID: Self.uid, ownerID: Self.author, version: version, role: .privateUser, state: .accepted, linkProof: nil).encoded
        }
        #expect(AcceptancePayload.decode(payload(version: 7))?.version == 7)
        for v in [0, -1, Limits.maxLogSequence + 1, Int64.max] { #expect(AcceptancePayload.decode(payload(version: v)) == nil, "version \(v)") }
        #expect(AcceptancePayload.decode(payload(version: 7) + [0]) == nil)
    }

    @Test("a genesis round-trips; its epoch is 1 to 2^53, its share title has no control characters")
    func genesisPayload() {
        func genesis(epoch: Int64 = 1, title: String = "Family") -> [UInt8] {
            let share = ShareState(shareUID: Self.uid, title: title, publicPermission: .none, linkPublicKey: nil,
                                   participants: [Self.author: .init(role: .privateUser, permission: .readOnly, status: .pending)])
            return GenesisPayload(zoneName: "Notes", state: StatePayload(epoch: epoch, newCommitments: [epoch: [UInt8](repeating: 5, count: 32)], share: share),
                                  records: Self.summary).encoded
        }
        let decoded = GenesisPayload.decode(genesis())
        #expect(decoded?.zoneName == "Notes" && decoded?.state.epoch == 1 && decoded?.state.share?.title == "Family" && decoded?.records == Self.summary)
        for bad in [genesis(epoch: Limits.maxLogSequence + 1), genesis(title: "bell\u{7}"), genesis(title: "esc\u{1b}]0;x\u{7}"), genesis() + [0]] {
            #expect(GenesisPayload.decode(bad) == nil)
        }
        let bytes = genesis()
        for n in 0..<bytes.count { #expect(GenesisPayload.decode(Array(bytes.prefix(n))) == nil) }
    }

    @Test("random bytes never crash the log decoders")
    func randomBytes() {
        var generator = SystemRandomNumberGenerator()
        for _ in 0..<2000 {
            let bytes = (0..<Int.random(in: 0...200, using: &generator)).map { _ in UInt8.random(in: 0...255, using: &generator) }
            _ = LogEntry.decode(LogEntry.domainV1 + bytes)
            _ = LogEntry.decode(LogEntry.domain + [2] + bytes)
            _ = RecordsPayload.decode(bytes)
            _ = AcceptancePayload.decode(bytes)
            _ = GenesisPayload.decode(bytes)
        }
    }
}

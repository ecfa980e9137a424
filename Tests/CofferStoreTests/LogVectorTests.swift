import CofferCrypto
import CofferVault
import CofferStoreTestSupport
import Foundation
import Testing
@testable import CofferStore

/// `Keys/log-entries.json`: log entries in both formats, each with its body, signature and hash,
/// made once by ``writeFixture`` and never re-made. A client in another language can check its
/// encoder and verifier against them; this suite checks that today's code decodes each to the
/// fields listed, encodes those fields to the same bytes, and verifies the signature and hash.
@Suite("Log entry vectors in Keys/")
struct LogVectorTests {
    static let file = "log-entries.json"
    static var url: URL { StoreFixtureTests.keysFolder.appendingPathComponent(file) }

    /// The throwaway signing key of the vectors (its seed is BLAKE2b-256 of a fixed text), and its user id.
    static func signer() throws -> (key: Ed25519.PrivateKey, userID: String) {
        let key = try Ed25519.PrivateKey(seed: SecureBytes(copying: BLAKE2b.hash(Array("coffer log entry vectors".utf8))))
        return (key, UserIdentity.userID(for: key.publicKey))
    }

    /// The entries the vectors hold: a format 1 commit; a format 2 genesis; a format 2 commit that
    /// confirms two changes; a format 2 commit by a device at a user-log position (it decodes,
    /// and this version's verifier refuses it: devices are not known yet).
    static func entries(author: String) -> [(name: String, entry: LogEntry)] {
        let uid = Array(0..<16).map(UInt8.init)
        func entry(_ seq: Int64, _ kind: LogEntry.Kind, _ payload: [UInt8], _ format: LogEntry.Format = .v2,
                   device: [UInt8] = [], position: Int64 = 0, confirmed: [[UInt8]] = []) -> LogEntry {
            var e = LogEntry(zoneUID: uid, seq: seq, prev: seq == 1 ? .zero : Digest32([UInt8](repeating: UInt8(seq), count: 32)), kind: kind,
                             authorID: author, time: 1_800_000_000 + Double(seq), payload: payload)
            e.format = format
            e.deviceID = device
            e.userLogSeq = position
            e.confirmed = confirmed
            return e
        }
        var commit = CommitBuilder(zoneUID: uid, seq: 2)
        commit.addRecord(Digest32([UInt8](repeating: 0xab, count: 32)), name: "n1")
        let records = RecordsPayload(epoch: 1, ownerSeq: 1, label: "vectors", records: commit.summary).encoded
        let genesis = GenesisPayload(zoneName: "Notes", state: StatePayload(epoch: 1, newCommitments: [1: [UInt8](repeating: 0xc0, count: 32)], share: nil),
                                     records: .empty).encoded
        return [
            ("format 1 commit", entry(2, .commit, records, .v1)),
            ("format 2 genesis", entry(1, .genesis, genesis)),
            ("format 2 commit confirming two changes", entry(2, .commit, records, confirmed: [[UInt8](repeating: 0xe1, count: 16),
                                                                                              [UInt8](repeating: 0xe2, count: 16)])),
            ("format 2 commit by a device", entry(3, .commit, records, device: [UInt8](repeating: 0xd0, count: 16), position: 4)),
        ]
    }

    static func hex(_ bytes: [UInt8]) -> String { bytes.map { String(format: "%02x", $0) }.joined() }
    static func unhex(_ text: String) throws -> [UInt8] {
        let chars = Array(text.utf8)
        try #require(chars.count % 2 == 0)
        return try stride(from: 0, to: chars.count, by: 2).map { i in try #require(UInt8(String(decoding: chars[i..<i + 2], as: UTF8.self), radix: 16)) }
    }

    @Test("each vector decodes to its fields, encodes back to its bytes, and its signature and hash verify")
    func vectorsHold() throws {
        let json = try #require(try JSONSerialization.jsonObject(with: Data(contentsOf: Self.url)) as? [String: Any])
        #expect(json["format"] as? String == "coffer-log-entry-vectors")
        let (key, userID) = try Self.signer()
        #expect(json["signingPublicKey"] as? String == Self.hex(key.publicKey.rawRepresentation) && json["author"] as? String == userID)
        let vectors = try #require(json["vectors"] as? [[String: Any]])
        let expected = Self.entries(author: userID)
        #expect(vectors.map { $0["name"] as? String } == expected.map(\.name))
        for (vector, made) in zip(vectors, expected) {
            let name = made.name
            let body = try Self.unhex(try #require(vector["body"] as? String)), signature = try Self.unhex(try #require(vector["signature"] as? String))
            // Today's encoder makes exactly these bytes, and signs them exactly so (Ed25519 is deterministic).
            #expect(made.entry.body == body, "\(name)")
            #expect(key.signature(for: body) == signature, "\(name)")
            #expect(key.publicKey.isValidSignature(signature, for: body), "\(name)")
            #expect(Self.hex(LogEntry.hash(body: body, signature: signature).bytes) == vector["hash"] as? String, "\(name)")
            let entry = try #require(LogEntry.decode(body), "\(name)")
            let fields = try #require(vector["fields"] as? [String: Any])
            #expect(fields["format"] as? Int == Int(entry.format.rawValue) && fields["kind"] as? Int == Int(entry.kind.rawValue), "\(name)")
            #expect(fields["seq"] as? Int == Int(entry.seq) && fields["time"] as? Double == entry.time && fields["author"] as? String == entry.authorID)
            #expect(fields["zoneUID"] as? String == Self.hex(entry.zoneUID) && fields["prev"] as? String == Self.hex(entry.prev.bytes))
            #expect(fields["deviceID"] as? String == Self.hex(entry.deviceID) && fields["userLogSeq"] as? Int == Int(entry.userLogSeq))
            #expect(fields["confirmed"] as? [String] == entry.confirmed.map(Self.hex) && fields["payload"] as? String == Self.hex(entry.payload))
            #expect(entry.body == body, "\(name)")
        }
    }

    /// Writes `Keys/log-entries.json`, once, on purpose:
    /// `COFFER_WRITE_FIXTURES=1 swift test --filter LogVectorTests/writeFixture`. Refuses to
    /// replace the file: a later entry format adds vectors in a file of its own.
    @Test(.enabled(if: ProcessInfo.processInfo.environment["COFFER_WRITE_FIXTURES"] == "1",
                   "writes the log entry vectors in Keys/ only when COFFER_WRITE_FIXTURES=1"))
    func writeFixture() throws {
        guard !FileManager.default.fileExists(atPath: Self.url.path) else {
            Issue.record("\(Self.file) exists; vectors are never re-made")
            return
        }
        let (key, userID) = try Self.signer()
        let vectors: [[String: Any]] = Self.entries(author: userID).map { name, entry in
            let body = entry.body, signature = key.signature(for: body)
            return [
                "name": name, "body": Self.hex(body), "signature": Self.hex(signature),
                "hash": Self.hex(LogEntry.hash(body: body, signature: signature).bytes),
                "fields": [
                    "format": Int(entry.format.rawValue), "zoneUID": Self.hex(entry.zoneUID), "seq": Int(entry.seq), "prev": Self.hex(entry.prev.bytes),
                    "kind": Int(entry.kind.rawValue), "author": entry.authorID, "deviceID": Self.hex(entry.deviceID),
                    "userLogSeq": Int(entry.userLogSeq), "time": entry.time, "confirmed": entry.confirmed.map(Self.hex), "payload": Self.hex(entry.payload),
                ] as [String: Any],
            ]
        }
        let json: [String: Any] = ["format": "coffer-log-entry-vectors", "signingPublicKey": Self.hex(key.publicKey.rawRepresentation),
                                   "author": userID, "vectors": vectors]
        try JSONSerialization.data(withJSONObject: json, options: [.prettyPrinted, .sortedKeys]).write(to: Self.url)
    }
}

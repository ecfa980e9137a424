import CofferCrypto
import CofferTestSupport
import CofferStoreTestSupport
import Foundation
import Testing
@testable import CofferStore

/// Heads files (`coffer audit --heads`) and their comparison: a fork that shows two users two
/// histories of one zone is found by comparing the heads each verified, and a file changed on the
/// way is refused.
@Suite("Zone heads")
struct ZoneHeadsTests {
    @Test("users shown the same log agree; a head with another hash, one past the log, or another owner is a fork; a zone not here is counted apart",
          arguments: TestBackend.all)
    func compare(_ backend: TestBackend) async throws {
        try await withStore(backend) { h in
            let bob = try await h.user("Bob", "bob@example.com")
            let zone = try await h.db.createZone(named: "Family")
            _ = try await h.db.save(makeNote("n1", in: zone))
            try await h.share(zone, with: [(bob, .readWrite)])
            let alone = try await h.db.createZone(named: "Alone")

            let mine = try await h.alice.verifiedHeads()
            #expect(mine.userID == h.alice.userID && mine.heads.count == 2)
            let decoded = try ZoneHeads(decoding: mine.encoded())
            #expect(decoded == mine)
            let agreed = try await bob.compareHeads(mine.encoded())
            if backend.isServer {
                // A server does not let Bob read Alice's unshared zone, and its refusal is not
                // signed: the zone Alice verified and Bob cannot see is reported, not trusted away.
                #expect(agreed.compared == 1 && agreed.notHere == 1, "\(agreed.findings)")
                #expect(agreed.findings.map(\.message).allSatisfy { $0.contains("but this store does not let you read it") } && agreed.findings.count == 1,
                        "\(agreed.findings)")
            } else {
                #expect(agreed.findings.isEmpty && agreed.compared == 1 && agreed.notHere == 1, "\(agreed.findings)")
            }
            #expect(agreed.other.userID == h.alice.userID)
            _ = alone

            // Bob's view, signed by Bob, disagreeing in three ways.
            let uid = try await h.zoneUID(zone)
            let family = try #require(mine.heads.first { $0.zoneUID == uid })
            func claim(_ head: ZoneHeads.Head) async throws -> [AuditFinding] {
                try await h.alice.compareHeads(ZoneHeads(signing: [head], with: bob.vault).encoded()).findings
            }
            let otherHash = try await claim(.init(zoneUID: family.zoneUID, ownerID: family.ownerID, seq: family.seq, hash: SecureRandom.bytes(count: 32)))
            #expect(otherHash.count == 1 && otherHash.first?.kind == .log && otherHash.first?.zone == zone
                    && otherHash.first?.message.contains("forked") == true, "\(otherHash)")
            let past = try await claim(.init(zoneUID: family.zoneUID, ownerID: family.ownerID, seq: family.seq + 3, hash: family.hash))
            #expect(past.first?.message.contains("reaches only entry \(family.seq)") == true, "\(past)")
            let owner = try await claim(.init(zoneUID: family.zoneUID, ownerID: bob.userID, seq: family.seq, hash: family.hash))
            #expect(owner.first?.message.contains("owned by") == true, "\(owner)")
            let earlier = try await claim(.init(zoneUID: family.zoneUID, ownerID: family.ownerID, seq: 1,
                                                hash: try #require(try await h.logHash(zone, at: 1))))
            #expect(earlier.isEmpty, "an older head of the same log is no fork: \(earlier)")
        }
    }

    @Test("a heads file changed, unknown, duplicated, or naming another user than its key is refused")
    func refusals() async throws {
        try await withStore { h in
            let zone = try await h.db.createZone(named: "Family")
            _ = try await h.db.save(makeNote("n1", in: zone))
            let text = String(decoding: try await h.alice.verifiedHeads().encoded(), as: UTF8.self)
            func refused(_ text: String, _ code: StoreError.Code, _ mentioning: String, sourceLocation: SourceLocation = #_sourceLocation) {
                do {
                    _ = try ZoneHeads(decoding: Data(text.utf8))
                    Issue.record("accepted", sourceLocation: sourceLocation)
                } catch let e as StoreError {
                    #expect(e.code == code && e.message.contains(mentioning), "\(e.code): \(e.message)", sourceLocation: sourceLocation)
                } catch {
                    Issue.record("\(error)", sourceLocation: sourceLocation)
                }
            }
            refused(text.replacingOccurrences(of: "\"seq\" : ", with: "\"seq\" : 1"), .integrityFailure, "signature")
            refused(text.replacingOccurrences(of: "\"version\" : 1", with: "\"version\" : 1, \"extra\" : 2"), .invalidArguments, "unknown key 'extra'")
            refused(text.replacingOccurrences(of: "\"version\" : 1", with: "\"version\" : 2"), .invalidArguments, "'version'")
            refused(text.replacingOccurrences(of: "\"user\" : \"\(h.alice.userID)\"", with: "\"user\" : \"\(String(repeating: "0", count: 32))\""),
                    .invalidArguments, "not the user id")
            refused("{", .invalidArguments, "not valid JSON")
            refused("[]", .invalidArguments, "not a JSON object")
            let object = try #require(try JSONSerialization.jsonObject(with: Data(text.utf8)) as? [String: Any])
            var twice = object
            twice["heads"] = (object["heads"] as? [Any] ?? []) + (object["heads"] as? [Any] ?? [])
            refused(String(decoding: try JSONSerialization.data(withJSONObject: twice), as: UTF8.self), .invalidArguments, "appears twice")
        }
    }
}

extension TestStore {
    /// The zone's uid.
    func zoneUID(_ zone: ZoneID) async throws -> [UInt8] {
        try await store.read { db in try #require(try db.zoneRow(zone)).uid }
    }

    /// The hash of the zone's log entry `seq`, as the owner verifies it.
    func logHash(_ zone: ZoneID, at seq: Int64) async throws -> [UInt8]? {
        let owner = self.alice
        return try await store.read { db in
            let row = try owner.accessControl.zoneRow(db, zone)
            return try owner.verifiedLogs.zoneLog(db, zone: row).hash(at: seq)?.bytes
        }
    }
}

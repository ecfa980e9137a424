import CofferCrypto
import Foundation
import Testing
@testable import CofferStore

/// A zone its owner deletes ends with the owner's signed deletion entry, which the store keeps
/// with the zone's genesis: a reader whose mark ends before it finds the mark closed, not a
/// finding. A zone that leaves the store without one, or with a record of its deletion that does
/// not verify, stays a finding.
@Suite("Deleted zones: the owner's signed deletion closes readers' marks")
struct DeletedZoneTests {
    @Test("the store keeps the genesis and the owner's deletion, nothing else; an unshared zone's too", arguments: TestBackend.all)
    func theStoreKeepsTheGenesisAndTheDeletion(_ backend: TestBackend) async throws {
        try await SignedHarness.run(backend) { h in
            let zone = try await h.ownerZone("Alone", notes: ["n1", "n2"])
            let row = try await h.zoneRow(zone)
            let genesis = try #require(try await h.store.read { db in try db.logEntry(zoneRowID: row.rowID, seq: 1) })
            try await h.ownerDB.deleteZone(zone)
            let kept = try #require(try await h.store.read { db in try db.deletedZone(uid: row.uid) })
            #expect(kept.id == zone && kept.uid == row.uid)
            #expect(kept.genesis.body == genesis.body && kept.genesis.signature == genesis.signature)
            let deletion = try #require(LogEntry.decode(kept.deletion.body))
            #expect(deletion.kind == .deletion && deletion.seq == 4 && deletion.authorID == h.owner.userID && deletion.payload.isEmpty)
            let unknown = SecureRandom.bytes(count: 16)
            #expect(try await h.store.read { db in try db.deletedZone(uid: unknown) } == nil)
        }
    }

    @Test("an entry after a deletion, and a deletion by anyone but the owner, fail verification")
    func nothingFollowsADeletion() throws {
        let uid = SecureRandom.bytes(count: 16)
        let alice = String(repeating: "a", count: 32), bob = String(repeating: "b", count: 32)
        let genesis = LogEntry(zoneUID: uid, seq: 1, prev: .zero, kind: .genesis, authorID: alice, time: 1,
                               payload: GenesisPayload(zoneName: "Z", state: StatePayload(epoch: 1, newCommitments: [1: [UInt8](repeating: 7, count: 32)], share: nil),
                                                       records: .empty).encoded)
        let hash = Digest32(SecureRandom.bytes(count: 32))
        let state = try ZoneState(genesis: genesis, hash: hash, uid: uid, name: "Z", ownerID: alice)
        func entry(_ seq: Int64, _ prev: Digest32, _ kind: LogEntry.Kind, by author: String, payload: [UInt8] = []) -> LogEntry {
            LogEntry(zoneUID: uid, seq: seq, prev: prev, kind: kind, authorID: author, time: 2, payload: payload)
        }
        var byBob = state
        do {
            try byBob.apply(entry(2, hash, .deletion, by: bob), hash: .zero)
            Issue.record("a deletion by someone else than the owner was applied")
        } catch let refusal as ZoneState.Refusal {
            #expect(refusal.reason.contains("not the owner"), "\(refusal.reason)")
        }
        var deleted = state
        let deletionHash = Digest32(SecureRandom.bytes(count: 32))
        try deleted.apply(entry(2, hash, .deletion, by: alice), hash: deletionHash)
        #expect(deleted.deletionSeq == 2)
        let commit = RecordsPayload(epoch: 1, ownerSeq: 1, label: nil, records: .empty).encoded
        do {
            try deleted.apply(entry(3, deletionHash, .commit, by: alice, payload: commit), hash: .zero)
            Issue.record("an entry after the deletion was applied")
        } catch let refusal as ZoneState.Refusal {
            #expect(refusal.reason.contains("nothing follows its deletion"), "\(refusal.reason)")
        }
    }
}

import CofferCrypto
import CofferVault
import CofferStoreTestSupport
import Foundation
import GRDB
import Testing
@testable import CofferStore

/// A zone its owner deletes ends with the owner's signed deletion entry, which the store keeps
/// with the zone's genesis: a reader whose mark ends before it finds the mark closed, not a
/// finding. A zone that leaves the store without one, or with a record of its deletion that does
/// not verify, stays a finding.
@Suite("Deleted zones: the owner's signed deletion closes readers' marks")
struct DeletedZoneTests {
    /// Alice's zone "Family" (one note) shared read-only with Bob, who read it and saved his mark.
    static func shared(_ h: TestStore, _ name: String = "Family") async throws -> (zone: ZoneID, bob: Session, mark: ZoneMark) {
        let zone = try await h.makeZone(name, notes: ["n1"])
        let bob = try await h.user("Bob Reader", "bob@example.com")
        try await h.share(zone, with: [(bob, .readOnly)])
        return (zone, bob, try await Self.read(zone, as: bob))
    }

    /// `reader` reads the zone and saves their mark of it: the mark.
    static func read(_ zone: ZoneID, as reader: Session) async throws -> ZoneMark {
        _ = try await reader.sharedDatabase.record(named: "n1", in: zone)
        try reader.saveMarks()
        let uid = try await reader.store.read { db in try #require(try db.zoneRow(zone)).uid }
        return try #require(try reader.vault.marks.mark(forZone: uid))
    }

    @Test("the owner deletes a shared zone: the reader's audit finds nothing, closes the mark, and reads say the owner deleted it",
          arguments: TestBackend.all)
    func ownersDeletionClosesTheMark(_ backend: TestBackend) async throws {
        try await withStore(backend) { h in
            let (zone, bob, mark) = try await Self.shared(h)
            let aliceHeads = try await h.alice.verifiedHeads()
            try await h.db.deleteZone(zone)
            let report = try await h.fresh(bob).audit()
            #expect(report.findings.isEmpty, "\(report.findings)")
            #expect(report.marks == 1)
            let closed = try #require(try bob.vault.marks.mark(forZone: mark.zoneUID))
            #expect(closed.isDeletion && closed.ownerID == h.alice.userID)
            #expect(try await h.fresh(bob).audit().marks == 0, "a closed mark is not looked for again")
            let comparison = try await h.fresh(bob).compareHeads(aliceHeads.encoded())
            #expect(comparison.findings.isEmpty && comparison.notHere == 1, "Alice's head of the zone is before its deletion: \(comparison.findings)")
            let error = await expectStoreError(.zoneNotFound) { try await h.fresh(bob).sharedDatabase.record(named: "n1", in: zone) }
            #expect(error?.message.contains("was deleted by its owner") == true, "\(error?.message ?? "")")
        }
    }

    @Test("the store keeps the genesis and the owner's deletion, nothing else; an unshared zone's too", arguments: TestBackend.all)
    func theStoreKeepsTheGenesisAndTheDeletion(_ backend: TestBackend) async throws {
        try await withStore(backend) { h in
            let zone = try await h.makeZone("Alone", notes: ["n1", "n2"])
            let row = try await h.zoneRow(zone)
            let genesis = try #require(try await h.store.read { db in try db.logEntry(zoneRowID: row.rowID, seq: 1) })
            try await h.db.deleteZone(zone)
            let kept = try #require(try await h.store.read { db in try db.deletedZone(uid: row.uid) })
            #expect(kept.id == zone && kept.uid == row.uid)
            #expect(kept.genesis.body == genesis.body && kept.genesis.signature == genesis.signature)
            let deletion = try #require(LogEntry.decode(kept.deletion.body))
            #expect(deletion.kind == .deletion && deletion.seq == 4 && deletion.authorID == h.alice.userID && deletion.payload.isEmpty)
            let unknown = SecureRandom.bytes(count: 16)
            #expect(try await h.store.read { db in try db.deletedZone(uid: unknown) } == nil)
        }
    }

    @Test("a zone deleted honestly and one hidden without a deletion: only the hidden one is a finding")
    func hiddenZoneStaysAFinding() async throws {
        try await withStore { h in
            let (deleted, bob, _) = try await Self.shared(h)
            let hidden = try await h.makeZone("Hidden", notes: ["n1"])
            let share = try await h.alice.share(zone: hidden)
            _ = try await h.alice.addParticipant(bob.userID, permission: .readOnly, to: hidden)
            _ = try await bob.acceptShare(url: share.url)
            let hiddenMark = try await Self.read(hidden, as: bob)
            try await h.db.deleteZone(deleted)
            // The store drops the other zone behind the library's back: no deletion is kept.
            let row = try await h.zoneRow(hidden)
            try h.sqlite { db in try db.execute(sql: "DELETE FROM zone WHERE id = ?", arguments: [row.rowID]) }
            let report = try await h.fresh(bob).audit()
            #expect(report.findings.map(\.subject) == ["zone \(Hex.encode(row.uid))"], "\(report.findings)")
            #expect(report.findings.first?.message.contains("no record of its owner deleting it") == true, "\(report.findings)")
            #expect(try bob.vault.marks.mark(forZone: hiddenMark.zoneUID) == hiddenMark, "the hidden zone's mark stays open")
        }
    }

    /// How the store forges a record of the deletion of Bob's zone.
    enum Forgery: String, CaseIterable, Sendable, CustomTestStringConvertible {
        /// A deletion entry of Bob's, signed by him.
        case signedByBob
        /// Alice's real deletion of another zone of hers.
        case anotherZonesDeletion
        /// A deletion signed by Alice, at an entry before Bob's mark.
        case beforeTheMark
        /// Alice's real deletion, with another zone's genesis.
        case genesisSwapped
        /// Alice's real deletion, its signature changed.
        case signatureChanged

        var testDescription: String { rawValue }
    }

    @Test("a record of the deletion that does not prove it is a finding, and the mark stays open", arguments: Forgery.allCases)
    func forgedDeletionIsAFinding(_ forgery: Forgery) async throws {
        try await withStore { h in
            let (zone, bob, mark) = try await Self.shared(h)
            let other = try await h.makeZone("Other", notes: ["x1", "x2", "x3", "x4", "x5", "x6"])
            let row = try await h.zoneRow(zone), otherRow = try await h.zoneRow(other)
            let head = try await h.state(zone)
            /// A deletion entry of `author`'s on the zone, signed by `signer`.
            func deletion(seq: Int64, prev: Digest32, author: Session, signer: Session) -> (body: [UInt8], signature: [UInt8]) {
                let body = LogEntry(zoneUID: row.uid, seq: seq, prev: prev, kind: .deletion, authorID: author.userID,
                                    time: Date().timeIntervalSince1970, payload: []).body
                return (body, signer.vault.signingKey.signature(for: body))
            }
            /// Drops the zone and keeps `entry` as its deletion, with its genesis.
            func plant(_ entry: (body: [UInt8], signature: [UInt8])) throws {
                try h.sqlite { db in
                    let genesis = try #require(try Row.fetchOne(db, sql: "SELECT body, signature FROM zone_log WHERE zone_id = ? AND seq = 1", arguments: [row.rowID]))
                    try db.execute(sql: "DELETE FROM zone WHERE id = ?", arguments: [row.rowID])
                    try db.execute(sql: """
                        INSERT INTO deleted_zone (uid, owner_id, name, genesis_body, genesis_signature, deletion_body, deletion_signature) VALUES (?, ?, ?, ?, ?, ?, ?)
                        """, arguments: [Data(row.uid), zone.ownerID, zone.name, genesis["body"] as Data, genesis["signature"] as Data,
                                         Data(entry.body), Data(entry.signature)])
                }
            }
            switch forgery {
            case .signedByBob:
                try plant(deletion(seq: head.headSeq + 1, prev: head.headHash, author: bob, signer: bob))
            case .anotherZonesDeletion:
                try await h.db.deleteZone(other)
                let kept = try #require(try await h.store.read { db in try db.deletedZone(uid: otherRow.uid) })
                #expect(kept.deletion.seq > mark.seq, "the other zone's deletion is past Bob's mark: only its zone differs")
                try plant((kept.deletion.body, kept.deletion.signature))
            case .beforeTheMark:
                try plant(deletion(seq: mark.seq - 1, prev: head.headHash, author: h.alice, signer: h.alice))
            case .genesisSwapped:
                try await h.db.deleteZone(zone)
                try h.sqlite { db in
                    try db.execute(sql: """
                        UPDATE deleted_zone SET (genesis_body, genesis_signature) = (SELECT body, signature FROM zone_log WHERE zone_id = ? AND seq = 1) WHERE uid = ?
                        """, arguments: [otherRow.rowID, Data(row.uid)])
                    #expect(db.changesCount == 1)
                }
            case .signatureChanged:
                try await h.db.deleteZone(zone)
                try h.sqlite { db in
                    try db.execute(sql: "UPDATE deleted_zone SET deletion_signature = zeroblob(64) WHERE uid = ?", arguments: [Data(row.uid)])
                    #expect(db.changesCount == 1)
                }
            }
            let report = try await h.fresh(bob).audit()
            #expect(report.findings.map(\.subject) == ["zone \(Hex.encode(row.uid))"], "\(report.findings)")
            #expect(report.findings.first?.message.contains("does not prove that its owner deleted it") == true, "\(report.findings)")
            #expect(try bob.vault.marks.mark(forZone: mark.zoneUID) == mark, "the mark stays open")
            await expectStoreError(.zoneNotFound) { try await h.fresh(bob).sharedDatabase.record(named: "n1", in: zone) }
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

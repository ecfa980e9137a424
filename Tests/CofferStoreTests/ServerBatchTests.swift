import CofferCrypto
import CofferTestSupport
import CofferVault
import CofferStoreTestSupport
import Foundation
import GRDB
import Testing
@testable import CofferStore

/// A read-write participant, or a zone owner, who bypasses their client and sends the server
/// batches of their own making: every row a batch writes, keeps or deletes, and every deleted
/// mark it removes, must be named by a signed commit of the batch; a zone's deletion notices
/// come only from whom the zone's verified log allows, and name the zone by its uid alone (its
/// name and owner are the server's).
/// What a client sends the same way still lands, and every deletion shows in the change feeds.
@Suite("coffer serve: each batch's rows and notices as its signed entries name them")
struct ServerBatchTests {
    typealias Scene = ServerHostileTests.Scene

    func expectRefused(_ scene: Scene, _ store: Store, _ writes: [StorageSnapshot.Write], _ reason: String,
                       sourceLocation: SourceLocation = #_sourceLocation) async throws {
        try await ServerHostileTests().expectRefused(scene, store, writes, reason, sourceLocation: sourceLocation)
    }

    /// The stored row of `name`, as `store` reads it from the server.
    func storedRow(_ store: Store, _ zone: ZoneRow, _ name: String) async throws -> (seq: Int64, creatorID: String, created: Double) {
        let row = try await store.read { db in try db.recordRow(zoneRowID: zone.rowID, name: name).map { ($0.seq, $0.creatorID, $0.created) } }
        return try #require(row)
    }

    /// A record version of `name` in the zone at `head`, made by `vault`'s user.
    func version(_ name: String, by vault: Vault, on head: (row: ZoneRow, state: ZoneState), creatorID: String? = nil, created: Double = 1) -> SealedVersion {
        let user = vault.identity.userID
        let stamp = VersionStamp(name: name, type: "Note", parent: nil, seq: head.state.headSeq + 1, epoch: head.state.epoch,
                                 membershipSeq: head.state.ownerSeq, creatorID: creatorID ?? user, modifierID: user, created: created, modified: 2)
        return SealedVersion(stamp: stamp, plain: Array("{}".utf8), plainTypes: [], sealed: nil, digest: .zero)
    }

    /// A name list entry: `0` saved or `1` deleted, the length, the name.
    func named(_ name: String, deleted: Bool) -> [UInt8] { [deleted ? 1 : 0, UInt8(name.utf8.count)] + Array(name.utf8) }

    @Test(arguments: [TestBackend.sqlite])
    func rowsAreNamedByTheBatchCommit(_ backend: TestBackend) async throws {
        try await withServer(backend) { fixture in
            let scene = try await Scene.make(fixture)
            let carol = scene.carol
            let head = try await scene.head(carol.session, scene.family)
            let n1 = try await storedRow(carol.store, head.row, "n1")

            // A row kept (its creator and creation time stay) whose version hash the commit does
            // not list; then one whose hash it lists, made with a creator the row does not have.
            let kept = version("n1", by: carol.vault, on: head)
            let unlisted = scene.commit(by: carol.vault, on: head, entries: SecureRandom.bytes(count: 32), names: named("n1", deleted: false))
            try await expectRefused(scene, carol.store, [unlisted.write, .replaceRecord(zoneRowID: head.row.rowID, kept, storedSeq: n1.seq, keep: true)],
                                    "not the version its commit signs")
            let wrongCreator = kept.digest(zoneUID: head.row.uid, creatorID: carol.vault.identity.userID, created: 1)
            let claimed = scene.commit(by: carol.vault, on: head, entries: wrongCreator.bytes, names: named("n1", deleted: false))
            try await expectRefused(scene, carol.store, [claimed.write, .replaceRecord(zoneRowID: head.row.rowID, kept, storedSeq: n1.seq, keep: true)],
                                    "not the version its commit signs")

            // A deletion of the owner's record by a commit that does not name it, or names it
            // only as saved; a named deletion left out of the change feeds.
            let seq = head.state.headSeq + 1
            let deletion = CommitBuilder.deletionHash(zoneUID: head.row.uid, name: "n1", seq: seq)
            let tombstone = StorageSnapshot.Write.addTombstone(zoneRowID: head.row.rowID, name: "n1", seq: seq, authorID: carol.vault.identity.userID,
                                                               label: nil, time: 2)
            let delete = StorageSnapshot.Write.deleteRecord(zoneRowID: head.row.rowID, name: "n1", storedSeq: n1.seq)
            let empty = scene.commit(by: carol.vault, on: head)
            try await expectRefused(scene, carol.store, [empty.write, delete], "names the deletion")
            let other = scene.commit(by: carol.vault, on: head, entries: deletion, names: named("n2", deleted: true))
            try await expectRefused(scene, carol.store, [other.write, delete], "names the deletion")
            let asSaved = scene.commit(by: carol.vault, on: head, entries: deletion, names: named("n1", deleted: false))
            try await expectRefused(scene, carol.store, [asSaved.write, delete, tombstone], "names the deletion")
            let unmarked = scene.commit(by: carol.vault, on: head, entries: deletion, names: named("n1", deleted: true))
            try await expectRefused(scene, carol.store, [unmarked.write, delete], "change feeds")
            // A deleted mark at a commit that does not delete the name.
            try await expectRefused(scene, carol.store, [empty.write, tombstone], "does not delete it")

            // A deleted mark removed by a commit that does not name it.
            try await expectRefused(scene, carol.store, [empty.write, .removeTombstone(zoneRowID: head.row.rowID, name: "gone")], "no signed commit names")

            // A commit whose stored lists are not the ones it signs.
            let signed = scene.commit(by: carol.vault, on: head, entries: deletion, names: named("n1", deleted: true))
            guard case .appendLog(let zone, let at, let entry, let body, let signature, let hash, _, _) = signed.write else {
                Issue.record("a commit is a log entry")
                return
            }
            let swapped = StorageSnapshot.Write.appendLog(zoneRowID: zone, head: at, entry: entry, body: body, signature: signature, hash: hash,
                                                          entries: deletion, names: named("n9", deleted: true))
            try await expectRefused(scene, carol.store, [swapped, delete, tombstone], "not the ones it signs")

            // Nothing landed: n1 is Alice's, and every user's audit is clean.
            #expect(try await storedRow(scene.alice.store, head.row, "n1").seq == n1.seq)
            #expect(try await scene.head(scene.alice.session, scene.family).state.headSeq == head.state.headSeq)
            for session in [scene.alice.session, scene.bob.session, carol.session] { #expect(try await session.audit().findings.isEmpty) }
        }
    }

    /// Carol's own edit and deletion of Alice's records land, each as her client sends it (an
    /// edit keeps the record's creator), and Alice's change feed reports the deletion by Carol.
    @Test(arguments: TestBackend.local)
    func aPermittedDeletionShowsInTheOwnersFeed(_ backend: TestBackend) async throws {
        try await withServer(backend) { fixture in
            let scene = try await Scene.make(fixture)
            let alice = scene.alice, carol = scene.carol
            let before = try await alice.session.privateDatabase.changes(in: scene.family, since: nil)
            var edited = try await carol.session.sharedDatabase.record(named: "n1", in: scene.family)
            edited.encryptedValues["body"] = "milk"
            let saved = try await carol.session.sharedDatabase.save(edited)
            #expect(saved.creatorID == alice.vault.identity.userID)
            var extra = Record(type: "Note", name: "n2", zone: scene.family)
            extra.encryptedValues["body"] = "bread"
            _ = try await alice.session.privateDatabase.save(extra)
            try await carol.session.sharedDatabase.delete(recordNamed: "n2", in: scene.family)
            let after = try await alice.session.privateDatabase.changes(in: scene.family, since: before.token)
            #expect(after.deleted.map(\.name) == ["n2"])
            #expect(after.deleted.first?.authorID == carol.vault.identity.userID)
            #expect(after.refused.isEmpty)
            #expect(try await alice.session.privateDatabase.record(named: "n1", in: scene.family).encryptedValues["body"] == "milk")
            // A name deleted and then saved again: the deleted mark goes with the commit that saves it.
            var again = Record(type: "Note", name: "n2", zone: scene.family)
            again.encryptedValues["body"] = "again"
            _ = try await carol.session.sharedDatabase.save(again)
            let last = try await alice.session.privateDatabase.changes(in: scene.family, since: after.token)
            #expect(last.changed.map(\.name) == ["n2"])
            for session in [alice.session, scene.bob.session, carol.session] { #expect(try await session.audit().findings.isEmpty) }
        }
    }

    /// Deletion notices in others' change feeds: forged ones are refused (another's zone dressed
    /// as one's own, an owner without an entry of theirs, users who never took part, a
    /// participant who did not leave), a name sent with a notice is not taken, and the real ones
    /// still land.
    @Test(arguments: [TestBackend.sqlite])
    func zoneNoticesComeFromTheVerifiedLog(_ backend: TestBackend) async throws {
        try await withServer(backend) { fixture in
            let scene = try await Scene.make(fixture)
            let alice = scene.alice, bob = scene.bob
            let bobID = bob.vault.identity.userID
            let mallory = try await fixture.user("Mallory Mint", "mallory@example.com")
            let notes = try await mallory.session.privateDatabase.createZone(named: "Notes")
            let family = try await scene.head(alice.session, scene.family)
            let own = try await scene.head(mallory.session, notes)
            // Mallory's own zone row, dressed as Alice's "Family": uid, name and owner.
            let dressed = ZoneRow(rowID: own.row.rowID, uid: family.row.uid, id: scene.family, sequence: own.row.sequence,
                                  created: own.row.created, logFormat: own.row.logFormat)
            let bobFeed = try await bob.session.sharedDatabase.databaseChanges(since: nil)

            // From someone who is not the zone's owner, or with her zone's row dressed as Alice's:
            // a notice names its zone by uid alone, so the dressed row names Alice's zone.
            try await expectRefused(scene, mallory.store, [.zoneGone(family.row, users: [bobID], reason: "deleted")], "others' lists")
            try await expectRefused(scene, mallory.store, [.zoneGone(dressed, users: [bobID], reason: "deleted")], "others' lists")
            // Her own zone's notice sent under the name "Family" lands under the name the server
            // has for it.
            let renamed = ZoneRow(rowID: own.row.rowID, uid: own.row.uid, id: scene.family, sequence: own.row.sequence,
                                  created: own.row.created, logFormat: own.row.logFormat)
            let malloryFeed = try await mallory.session.privateDatabase.databaseChanges(since: nil)
            try await scene.driver(mallory.store).apply([.zoneGone(renamed, users: [mallory.vault.identity.userID], reason: "deleted")], operation: nil)
            #expect(try await mallory.session.privateDatabase.databaseChanges(since: malloryFeed.token).deleted == [DeletedZone(zoneID: notes, reason: "deleted")])
            // From the owner, without an entry of hers, or naming a user who never took part.
            try await expectRefused(scene, alice.store, [.zoneGone(family.row, users: [bobID], reason: "deleted")], "signed entry of the owner's")
            let aliceCommit = scene.commit(by: alice.vault, on: family)
            try await expectRefused(scene, alice.store, [aliceCommit.write, .zoneGone(family.row, users: [mallory.vault.identity.userID], reason: "removed")],
                                    "did not take part")
            // From a participant about themselves, without leaving.
            try await expectRefused(scene, bob.store, [.zoneGone(family.row, users: [bobID], reason: "left")], "signed leaving")

            // Taking a notice back: with a zone row not the zone's, by the owner without an entry
            // of hers, or for someone who does not take part.
            try await expectRefused(scene, mallory.store, [.zoneBack(dressed, user: bobID)], "others' lists")
            try await expectRefused(scene, alice.store, [.zoneBack(family.row, user: bobID)], "signed entry of the owner's")
            try await expectRefused(scene, alice.store, [aliceCommit.write, .zoneBack(family.row, user: mallory.vault.identity.userID)], "does not take part")
            try await expectRefused(scene, mallory.store, [.zoneBack(family.row, user: mallory.vault.identity.userID)], "does not take part")

            // Bob's feed has no notice; a real one lands when Alice deletes the zone, and a
            // forged zoneBack does not erase it.
            #expect(try await bob.session.sharedDatabase.databaseChanges(since: bobFeed.token).deleted.isEmpty)
            try await alice.session.privateDatabase.deleteZone(scene.family)
            let gone = try await bob.session.sharedDatabase.databaseChanges(since: bobFeed.token)
            #expect(gone.deleted == [DeletedZone(zoneID: scene.family, reason: "deleted")])
            await #expect { try await scene.driver(mallory.store).apply([.zoneBack(dressed, user: bobID)], operation: nil) } throws: { error in
                (error as? StoreError)?.code == .zoneNotFound // the zone of that uid is gone
            }
            #expect(try await bob.session.sharedDatabase.databaseChanges(since: bobFeed.token).deleted == gone.deleted)
        }
    }

    /// The member lookup (which zones name a user: a cache of each zone's log) is written only as
    /// the zone's verified log says: its owner cannot list someone the log does not name, nor
    /// leave out someone it does, nor give it another share's uid; and a zone is touched outside
    /// a write only by whom its log lets read it, whatever the lookup lists.
    @Test(arguments: [TestBackend.sqlite])
    func memberLookupFollowsTheLog(_ backend: TestBackend) async throws {
        try await withServer(backend) { fixture in
            let scene = try await Scene.make(fixture)
            let alice = scene.alice
            let mallory = try await fixture.user("Mallory Mint", "mallory@example.com")
            let malloryID = mallory.vault.identity.userID, carolID = scene.carol.vault.identity.userID
            let family = try await scene.head(alice.session, scene.family)
            let named = family.state.lookupMembers, shareUID = family.state.share?.shareUID
            #expect(named == [scene.bob.vault.identity.userID, carolID])
            let rowID = family.row.rowID
            try await expectRefused(scene, alice.store, [.setZoneMembers(zoneRowID: rowID, members: named.union([malloryID]), shareUID: shareUID)], "member lookup")
            try await expectRefused(scene, alice.store, [.setZoneMembers(zoneRowID: rowID, members: named.subtracting([carolID]), shareUID: shareUID)], "member lookup")
            try await expectRefused(scene, alice.store, [.setZoneMembers(zoneRowID: rowID, members: named, shareUID: SecureRandom.bytes(count: 16))], "member lookup")
            try await expectRefused(scene, alice.store, [.addZoneMember(zoneRowID: rowID, userID: malloryID)], "lists its members")
            // As the log says, it lands.
            try await scene.driver(alice.store).apply([.setZoneMembers(zoneRowID: rowID, members: named, shareUID: shareUID)], operation: nil)
            // Mallory, listed by the lookup behind the server's back, still may not touch it.
            try await fixture.listInMemberLookup(family.row, malloryID)
            try await expectRefused(scene, mallory.store, [.touchZone(rowID: try scene.rowID(family.row, in: mallory.store))], "touches it")
            // Bob, whom the log names, may.
            try await scene.driver(scene.bob.store).apply([.touchZone(rowID: try scene.rowID(family.row, in: scene.bob.store))], operation: nil)
        }
    }

    /// The client's notices land: a participant removed, one who leaves, a share stopped.
    @Test(arguments: TestBackend.local)
    func realNoticesLand(_ backend: TestBackend) async throws {
        try await withServer(backend) { fixture in
            let scene = try await Scene.make(fixture)
            let alice = scene.alice, bob = scene.bob, carol = scene.carol
            let bobFeed = try await bob.session.sharedDatabase.databaseChanges(since: nil)
            let carolFeed = try await carol.session.sharedDatabase.databaseChanges(since: nil)
            try await carol.session.leaveShare(zone: scene.family)
            #expect(try await carol.session.sharedDatabase.databaseChanges(since: carolFeed.token).deleted == [DeletedZone(zoneID: scene.family, reason: "left")])
            _ = try await alice.session.removeParticipant(bob.vault.identity.userID, from: scene.family)
            #expect(try await bob.session.sharedDatabase.databaseChanges(since: bobFeed.token).deleted == [DeletedZone(zoneID: scene.family, reason: "removed")])
            // Shared again with Bob, who accepts (his notice goes), then stopped.
            let share = try await alice.session.share(zone: scene.privateZone)
            _ = try await alice.session.addParticipant(bob.vault.identity.userID, permission: .readOnly, to: scene.privateZone)
            _ = try await bob.session.acceptShare(url: share.url)
            let accepted = try await bob.session.sharedDatabase.databaseChanges(since: nil)
            try await alice.session.stopSharing(zone: scene.privateZone)
            #expect(try await bob.session.sharedDatabase.databaseChanges(since: accepted.token).deleted.contains(DeletedZone(zoneID: scene.privateZone, reason: "share stopped")))
        }
    }
}

import CofferCrypto
import CofferVault
import CofferStoreTestSupport
import Foundation
import GRDB
import Testing
@testable import CofferStore

/// The bugs of Apple's sharing that Coffer must not have: one test each, named after the bug.
@Suite("Share bugs Coffer must not have")
struct ShareBugsTests {
    @Test(arguments: TestBackend.all) func bugOwnerCannotShowOrChangeTheShareAfterRemovingAParticipant(_ backend: TestBackend) async throws {
        try await withStore(backend) { f in
            let bob = try await f.user("Bob", "bob@example.com")
            let carol = try await f.user("Carol", "carol@example.com")
            let dave = try await f.user("Dave", "dave@example.com")
            let (zone, share) = try await f.sharedWith(bob, .readWrite)
            _ = try await carol.acceptShare(url: try await f.alice.addParticipant(carol.userID, permission: .readOnly, to: zone).url)
            _ = try await f.alice.removeParticipant(bob.userID, from: zone)

            // Show, in this session and in a new one.
            for alice in [f.alice, try await f.fresh(f.alice)] {
                let shown = try await alice.fetchShare(in: zone)
                #expect(shown.title == "Family notes")
                #expect(shown.url == share.url)
                #expect(shown.testParticipant(bob.userID)?.status == .removed)
                #expect(shown.testParticipant(carol.userID)?.status == .accepted)
                #expect(try await alice.fetchShares().map(\.zoneID) == [zone])
                #expect(try await alice.fetchShares(matching: [zone])[zone]?.version == shown.version)
                #expect(try await alice.isShared(zone) == true)
            }
            // Change, in a new session.
            let alice = try await f.fresh(f.alice)
            _ = try await alice.addParticipant(dave.userID, permission: .readOnly, to: zone)
            _ = try await alice.setPermission(.readWrite, for: carol.userID, in: zone)
            _ = try await alice.addParticipant(bob.userID, permission: .readOnly, to: zone)
            let changed = try await alice.fetchShare(in: zone)
            #expect(changed.testParticipant(bob.userID)?.status == .pending)
            #expect(changed.testParticipant(carol.userID)?.permission == .readWrite)
            #expect(changed.testParticipant(dave.userID)?.status == .pending)
            // Bob, invited again, comes back and reads.
            _ = try await bob.acceptShare(url: changed.url)
            #expect(noteBody(try await bob.sharedDatabase.record(named: "n1", in: zone)) == "body of n1")
            _ = try await alice.removeParticipant(dave.userID, from: zone)
            let open = try await alice.setPublicPermission(.readOnly, in: zone)
            #expect(open.publicPermission == .readOnly)
            #expect(try await alice.fetchShare(in: zone).keyEpoch == 3)
        }
    }

    @Test(arguments: TestBackend.all) func bugStaleShareRemainsAfterStoppingAndTheZoneCannotBeSharedAgain(_ backend: TestBackend) async throws {
        try await withStore(backend) { f in
            let bob = try await f.user("Bob", "bob@example.com")
            let (zone, share) = try await f.sharedWith(bob, .readWrite)
            try await f.alice.stopSharing(zone: zone)

            for user in [f.alice, bob, try await f.fresh(f.alice), try await f.fresh(bob)] {
                #expect(try await user.fetchShares().isEmpty)
                #expect(try await user.fetchShares(matching: [zone]).isEmpty)
                #expect(try await user.isShared(zone) == false)
            }
            await expectStoreError(.unknownItem, "the owner: not shared") { try await f.alice.fetchShare(in: zone) }
            await expectStoreError(.zoneNotFound, "Bob: not shared with him") { try await bob.fetchShare(in: zone) }
            #expect(try await bob.sharedDatabase.zones().isEmpty)
            await expectStoreError(.zoneNotFound) { try await bob.sharedDatabase.record(named: "n1", in: zone) }
            #expect(try await f.logCount(.share, zone) == 0)
            #expect(try await f.logCount(.participants, zone) == 0)
            #expect(try await f.logCount(.acceptances, zone) == 0)
            await expectStoreError(.unknownItem, "the old URL") { try await bob.acceptShare(url: share.url) }
            // The records stay, the owner's.
            #expect(try await f.alice.privateDatabase.records(in: zone).map { noteBody($0) } == ["body of n1", "body of n2"])

            // Shared again at once: a new share, a new URL.
            let again = try await f.alice.share(zone: zone, title: "Again")
            #expect(again.url != share.url)
            #expect(again.version > share.version, "the membership version keeps growing across shares of the zone")
            #expect(again.keyEpoch == 2)
            #expect(again.participants.count == 1)
            _ = try await f.alice.addParticipant(bob.userID, permission: .readOnly, to: zone)
            await expectStoreError(.unknownItem, "the first URL still") { try await bob.acceptShare(url: share.url) }
            _ = try await bob.acceptShare(url: again.url)
            #expect(noteBody(try await bob.sharedDatabase.record(named: "n2", in: zone)) == "body of n2")
            #expect(try await bob.fetchShares().map(\.title) == ["Again"])
        }
    }

    @Test(arguments: TestBackend.all) func bugStaleShareRemainsAfterStoppingAndTheRecordsCannotBeSharedAgain(_ backend: TestBackend) async throws {
        try await withStore(backend) { f in
            let inbox = try await f.makeZone("Inbox", notes: ["trip"])
            _ = try await f.alice.privateDatabase.save(makeNote("day1", in: inbox, parent: "trip"))
            let first = try await f.alice.share(records: ["trip"], in: inbox, intoZoneNamed: "Trip", title: "Trip")
            try await f.alice.stopSharing(zone: first.zoneID)
            #expect(try await f.alice.fetchShares().isEmpty)
            #expect(try await f.logCount(.share, first.zoneID) == 0)
            // The same records, shared again: into their own zone again, or back into a new one.
            let again = try await f.alice.share(zone: first.zoneID, title: "Trip again")
            #expect(again.zoneID == first.zoneID)
            try await f.alice.stopSharing(zone: first.zoneID)
            let moved = try await f.alice.share(records: ["trip"], in: first.zoneID, intoZoneNamed: "Trip2", title: "Trip 2")
            #expect(moved.zoneID.name == "Trip2")
            #expect(try await f.alice.privateDatabase.records(in: moved.zoneID).map(\.name) == ["day1", "trip"])
            #expect(try await f.alice.fetchShares().map(\.title) == ["Trip 2"])
        }
    }

    @Test(arguments: ["removed", "left"])
    func bugRemovedOrLeftParticipantStillSeesOrCrashesOnTheZone(_ how: String) async throws {
        try await withStore { f in
            let bob = try await f.user("Bob", "bob@example.com")
            let (zone, _) = try await f.sharedWith(bob, .readWrite)
            // Bob's session has read, so it holds the zone key in its cache.
            let seen = try await bob.sharedDatabase.record(named: "n1", in: zone)
            if how == "removed" {
                _ = try await f.alice.removeParticipant(bob.userID, from: zone)
            } else {
                try await bob.leaveShare(zone: zone)
            }
            for session in [bob, try await f.fresh(bob)] {
                let db = session.sharedDatabase
                #expect(try await db.zones().isEmpty)
                await expectStoreError(.permissionFailure, "record") { try await db.record(named: "n1", in: zone) }
                await expectStoreError(.permissionFailure, "records") { try await db.records(named: ["n1", "n2"], in: zone) }
                await expectStoreError(.permissionFailure, "list") { try await db.records(in: zone) }
                await expectStoreError(.permissionFailure, "query") { try await db.query(Query(recordType: "Note"), in: zone) }
                await expectStoreError(.permissionFailure, "schema") { try await db.schema(of: "Note", in: zone) }
                await expectStoreError(.permissionFailure, "save") { try await db.save(makeNote("n9", in: zone)) }
                await expectStoreError(.permissionFailure, "update") {
                    var changed = seen
                    changed.encryptedValues["body"] = "changed"
                    return try await db.save(changed)
                }
                await expectStoreError(.permissionFailure, "delete") { try await db.delete(recordNamed: "n1", in: zone) }
                #expect(await session.canRead(zone: zone) == false)
                #expect(await session.canModify(zone: zone) == false)
                #expect(await session.canUpdate(seen) == false)
                #expect(await session.canDelete(seen) == false)
            }
            #expect(try await f.alice.privateDatabase.records(in: zone).map { noteBody($0) } == ["body of n1", "body of n2"])
        }
    }

    @Test func bugASecondParticipantAcceptingDisturbsTheZone() async throws {
        try await withStore { f in
            let bob = try await f.user("Bob", "bob@example.com")
            let carol = try await f.user("Carol", "carol@example.com")
            let (zone, _) = try await f.sharedWith(bob, .readWrite)
            _ = try await bob.sharedDatabase.save(makeNote("by-bob", in: zone, body: "Bob was here"))
            let invited = try await f.alice.addParticipant(carol.userID, permission: .readWrite, to: zone)
            let recordsBefore = try await f.alice.privateDatabase.records(in: zone)
            let zoneBefore = try await f.alice.privateDatabase.zones().map { [$0.id.name, "\($0.keyEpoch)", "\($0.recordCount)"] }
            let rawBefore = try f.sqlite { db in try Row.fetchAll(db, sql: "SELECT * FROM record ORDER BY id") }
            let keysBefore = try await f.zoneKeyRows(zone)

            _ = try await carol.acceptShare(url: invited.url)

            #expect(try f.sqlite { db in try Row.fetchAll(db, sql: "SELECT * FROM record ORDER BY id") } == rawBefore)
            #expect(try await f.alice.privateDatabase.records(in: zone) == recordsBefore)
            // (The zone's log grew by Carol's acceptance entry; its key, records and count did not change.)
            #expect(try await f.alice.privateDatabase.zones().map { [$0.id.name, "\($0.keyEpoch)", "\($0.recordCount)"] } == zoneBefore)
            #expect(try await f.zoneKeyRows(zone) == keysBefore)
            let after = try await f.alice.fetchShare(in: zone)
            #expect(after.version == invited.version)
            #expect(after.keyEpoch == 1)
            #expect(after.testParticipant(bob.userID)?.status == .accepted)
            #expect(after.testParticipant(carol.userID)?.status == .accepted)
            // Bob's access is unchanged, in his session and in a new one.
            for session in [bob, try await f.fresh(bob)] {
                #expect(try await session.sharedDatabase.zones().map(\.id) == [zone])
                #expect(try await session.sharedDatabase.records(in: zone).map { noteBody($0) } == ["Bob was here", "body of n1", "body of n2"])
                #expect(await session.canModify(zone: zone) == true)
            }
            _ = try await bob.sharedDatabase.save(makeNote("by-bob-2", in: zone))
            #expect(try await carol.sharedDatabase.records(in: zone).count == 4)
        }
    }

    @Test(arguments: TestBackend.all) func bugAddingRecordsToAnExistingShareFails(_ backend: TestBackend) async throws {
        try await withStore(backend) { f in
            let bob = try await f.user("Bob", "bob@example.com")
            let (zone, share) = try await f.sharedWith(bob, .readWrite)
            // New records saved into the shared zone, by the owner and by a participant.
            _ = try await f.alice.privateDatabase.save(makeNote("n3", in: zone, body: "added by Alice"))
            _ = try await bob.sharedDatabase.save(makeNote("n4", in: zone, body: "added by Bob"))
            _ = try await f.alice.privateDatabase.modify(saving: [makeNote("n5", in: zone), makeNote("n6", in: zone, parent: "n5")], in: zone)
            #expect(try await bob.sharedDatabase.records(in: zone).map(\.name) == ["n1", "n2", "n3", "n4", "n5", "n6"])
            #expect(noteBody(try await bob.sharedDatabase.record(named: "n3", in: zone)) == "added by Alice")
            #expect(noteBody(try await f.alice.privateDatabase.record(named: "n4", in: zone)) == "added by Bob")

            // Records of another zone, with a child, moved into the existing share's zone.
            let inbox = try await f.makeZone("Inbox", notes: ["recipe", "other"])
            _ = try await f.alice.privateDatabase.save(makeNote("recipe-photo", in: inbox, parent: "recipe"))
            let same = try await f.alice.share(records: ["recipe"], in: inbox, intoZoneNamed: "Family")
            #expect(same.zoneID == zone)
            #expect(same.url == share.url)
            #expect(same.version == share.version)
            #expect(try await f.alice.fetchShares().count == 1)
            #expect(noteBody(try await bob.sharedDatabase.record(named: "recipe-photo", in: zone)) == "body of recipe-photo")
            #expect(try await bob.sharedDatabase.record(named: "recipe-photo", in: zone).parent == "recipe")
            #expect(try await f.alice.privateDatabase.records(in: inbox).map(\.name) == ["other"])
            #expect(try await f.fresh(bob).sharedDatabase.records(in: zone).count == 8)
        }
    }

    @Test(arguments: TestBackend.all) func bugParticipantEditsAreSilentlyOverwritten(_ backend: TestBackend) async throws {
        try await withStore(backend) { f in
            let bob = try await f.user("Bob", "bob@example.com")
            let (zone, _) = try await f.sharedWith(bob, .readWrite)
            let alicesCopy = try await f.alice.privateDatabase.record(named: "n1", in: zone)
            var bobsCopy = try await bob.sharedDatabase.record(named: "n1", in: zone)
            #expect(alicesCopy.changeTag == bobsCopy.changeTag)

            bobsCopy.encryptedValues["body"] = "Bob's edit"
            let bobSaved = try await bob.sharedDatabase.save(bobsCopy)
            var stale = alicesCopy
            stale.encryptedValues["body"] = "Alice's stale edit"
            let conflict = await expectStoreError(.serverRecordChanged) { try await f.alice.privateDatabase.save(stale) }
            #expect(conflict.flatMap { $0.serverRecord }.flatMap { noteBody($0) } == "Bob's edit")
            #expect(conflict?.serverRecord?.modifierID == bob.userID)
            await expectStoreError(.serverRecordChanged, "a stale delete") {
                try await f.alice.privateDatabase.delete(recordNamed: "n1", in: zone, ifMatch: try #require(alicesCopy.changeTag))
            }
            #expect(noteBody(try await f.alice.privateDatabase.record(named: "n1", in: zone)) == "Bob's edit")

            // And the other way round.
            var aliceFresh = try await f.alice.privateDatabase.record(named: "n1", in: zone)
            #expect(aliceFresh.changeTag == bobSaved.changeTag)
            aliceFresh.encryptedValues["body"] = "Alice's edit"
            _ = try await f.alice.privateDatabase.save(aliceFresh)
            var bobStale = bobSaved
            bobStale.encryptedValues["body"] = "Bob's stale edit"
            let back = await expectStoreError(.serverRecordChanged) { try await bob.sharedDatabase.save(bobStale) }
            #expect(back.flatMap { $0.serverRecord }.flatMap { noteBody($0) } == "Alice's edit")
            await expectStoreError(.serverRecordChanged) {
                try await bob.sharedDatabase.delete(recordNamed: "n1", in: zone, ifMatch: try #require(bobSaved.changeTag))
            }
            #expect(noteBody(try await bob.sharedDatabase.record(named: "n1", in: zone)) == "Alice's edit")
        }
    }

    /// Removed or left participants see no stale share: `fetchShares()` agrees with
    /// `fetchShare(in:)` and `fetchShares(matching:)` ("shares you own and shares you take
    /// part in or are invited to").
    @Test(arguments: ["removed", "link-off", "link-left"])
    func bugStaleShareRemainsListedForAParticipantWhoNoLongerTakesPart(_ how: String) async throws {
        try await withStore { f in
            let bob = try await f.user("Bob", "bob@example.com")
            let zone = try await f.makeZone("Family")
            switch how {
            case "removed":
                let share = try await f.alice.share(zone: zone, title: "t")
                _ = try await f.alice.addParticipant(bob.userID, permission: .readWrite, to: zone)
                _ = try await bob.acceptShare(url: share.url)
                _ = try await f.alice.removeParticipant(bob.userID, from: zone)
            case "link-off":
                let share = try await f.alice.share(zone: zone, title: "t", publicPermission: .readOnly)
                _ = try await bob.acceptShare(url: share.url)
                _ = try await f.alice.setPublicPermission(.none, in: zone)
            default:
                let share = try await f.alice.share(zone: zone, title: "t", publicPermission: .readOnly)
                _ = try await bob.acceptShare(url: share.url)
                try await bob.leaveShare(zone: zone)
            }
            await expectStoreError(.permissionFailure) { try await bob.fetchShare(in: zone) }
            #expect(try await bob.fetchShares(matching: [zone]).isEmpty)
            #expect(try await bob.fetchShares().isEmpty, "fetchShares() still lists the share Bob no longer takes part in")
            #expect(try await bob.sharedDatabase.zones().isEmpty)
        }
    }

    /// After the owner turns the link off (removing its joiners) and on again, a former joiner
    /// holding the new URL is told they joined, and must then be able to read.
    @Test(arguments: TestBackend.all) func bugFormerLinkJoinerAcceptsTheNewLinkButCannotRead(_ backend: TestBackend) async throws {
        try await withStore(backend) { f in
            let carol = try await f.user("Carol", "carol@example.com")
            let zone = try await f.makeZone("Family")
            let first = try await f.alice.share(zone: zone, title: "t", publicPermission: .readOnly)
            _ = try await carol.acceptShare(url: first.url)
            _ = try await f.alice.setPublicPermission(.none, in: zone)
            let second = try await f.alice.setPublicPermission(.readOnly, in: zone)
            #expect(second.url != first.url)

            let joined = try await carol.acceptShare(url: second.url)
            #expect(joined.testParticipant(carol.userID)?.status == .accepted, "accept returned Carol as \(joined.testParticipant(carol.userID)?.status.description ?? "absent")")
            #expect(await carol.canRead(zone: zone) == true)
            #expect(try await carol.sharedDatabase.zones().map(\.id) == [zone])
            #expect(noteBody(try await carol.sharedDatabase.record(named: "n1", in: zone)) == "body of n1")
        }
    }
}

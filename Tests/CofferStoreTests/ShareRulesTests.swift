import CofferCrypto
import CofferVault
import CofferStoreTestSupport
import Foundation
import GRDB
import Testing
@testable import CofferStore

/// CloudKit's rules of shares, and who may change a share.
@Suite("Share rules")
struct ShareRulesTests {
    @Test(arguments: TestBackend.all) func namedParticipantsAreAddedAndRemovedOnlyWhileThePublicPermissionIsNone(_ backend: TestBackend) async throws {
        try await withStore(backend) { f in
            let bob = try await f.user("Bob", "bob@example.com")
            let carol = try await f.user("Carol", "carol@example.com")
            let (zone, _) = try await f.sharedWith(bob, .readWrite)
            for permission in [SharePermission.readOnly, .readWrite] {
                let open = try await f.alice.setPublicPermission(permission, in: zone)
                #expect(open.publicPermission == permission)
                await expectStoreError(.invalidArguments, "add while \(permission)") {
                    try await f.alice.addParticipant(carol.userID, permission: .readOnly, to: zone)
                }
                await expectStoreError(.invalidArguments, "remove while \(permission)") {
                    try await f.alice.removeParticipant(bob.userID, from: zone)
                }
                let share = try await f.alice.fetchShare(in: zone)
                #expect(share.testParticipant(carol.userID) == nil)
                #expect(share.testParticipant(bob.userID)?.status == .accepted)
                #expect(share.version == open.version)
            }
            _ = try await f.alice.setPublicPermission(.none, in: zone)
            let added = try await f.alice.addParticipant(carol.userID, permission: .readOnly, to: zone)
            #expect(added.testParticipant(carol.userID)?.status == .pending)
            let removed = try await f.alice.removeParticipant(bob.userID, from: zone)
            #expect(removed.testParticipant(bob.userID)?.status == .removed)
        }
    }

    @Test(arguments: TestBackend.all) func goingPublicRemovesPendingNamedParticipantsAndKeepsAcceptedOnes(_ backend: TestBackend) async throws {
        try await withStore(backend) { f in
            let bob = try await f.user("Bob", "bob@example.com")
            let dave = try await f.user("Dave", "dave@example.com")
            let (zone, _) = try await f.sharedWith(bob, .readWrite)
            let invited = try await f.alice.addParticipant(dave.userID, permission: .readWrite, to: zone)
            #expect(invited.keyEpoch == 1)

            let open = try await f.alice.setPublicPermission(.readOnly, in: zone)
            #expect(open.publicPermission == .readOnly)
            #expect(open.testParticipant(bob.userID)?.status == .accepted)
            #expect(open.testParticipant(bob.userID)?.permission == .readWrite)
            #expect(open.testParticipant(dave.userID) == nil, "a pending invitee leaves the share, as CloudKit drops them")
            #expect(open.keyEpoch == 2, "a pending invitee held the key: it rotates")
            #expect(Set(try await f.zoneKeyRows(zone).map(\.member)) == [f.alice.userID, bob.userID])

            // Dave's invitation is gone: its URL (no link secret) gets him nothing.
            await expectStoreError(.permissionFailure) { try await dave.acceptShare(url: invited.url) }
            await expectStoreError(oneOf: [.zoneNotFound, .permissionFailure]) { try await dave.sharedDatabase.record(named: "n1", in: zone) }
            // The public link admits anyone who holds it, Dave too, with the public permission.
            let joined = try await dave.acceptShare(url: open.url)
            #expect(joined.testParticipant(dave.userID)?.role == .publicUser)
            #expect(joined.testParticipant(dave.userID)?.status == .accepted)
            #expect(try await dave.sharedDatabase.record(named: "n1", in: zone).name == "n1")
            await expectStoreError(.permissionFailure) { try await dave.sharedDatabase.save(makeNote("by-dave", in: zone)) }
            // Bob keeps his read-write access.
            let saved = try await bob.sharedDatabase.save(makeNote("by-bob", in: zone))
            #expect(saved.keyEpoch == 2)
        }
    }

    @Test(arguments: TestBackend.all) func aParticipantRemovedBeforeALinkWasMadeMayJoinWithIt(_ backend: TestBackend) async throws {
        try await withStore(backend) { f in
            let bob = try await f.user("Bob", "bob@example.com")
            let (zone, _) = try await f.sharedWith(bob, .readWrite)
            let removed = try await f.alice.removeParticipant(bob.userID, from: zone)
            #expect(removed.testParticipant(bob.userID)?.status == .removed)
            await expectStoreError(.permissionFailure) { try await bob.acceptShare(url: removed.url) }
            let open = try await f.alice.setPublicPermission(.readOnly, in: zone)
            let joined = try await bob.acceptShare(url: open.url)
            #expect(joined.testParticipant(bob.userID)?.role == .publicUser)
            #expect(try await bob.sharedDatabase.record(named: "n1", in: zone).name == "n1")
            // Turning the link off removes him again, with everyone who joined by it.
            let closed = try await f.alice.setPublicPermission(.none, in: zone)
            #expect(closed.testParticipant(bob.userID)?.status == .removed)
            await expectStoreError(.permissionFailure) { try await bob.sharedDatabase.record(named: "n1", in: zone) }
        }
    }

    @Test(arguments: TestBackend.all) func goingPublicWithoutPendingInviteesKeepsTheKey(_ backend: TestBackend) async throws {
        try await withStore(backend) { f in
            let bob = try await f.user("Bob", "bob@example.com")
            let (zone, share) = try await f.sharedWith(bob, .readOnly)
            let open = try await f.alice.setPublicPermission(.readWrite, in: zone)
            #expect(open.keyEpoch == 1)
            #expect(open.version > share.version)
            #expect(try await f.chainEpochs(zone) == [])
            // Changing between public permissions keeps the link.
            let other = try await f.alice.setPublicPermission(.readOnly, in: zone)
            #expect(other.url == open.url)
            #expect(other.keyEpoch == 1)
            // Setting the same permission again changes nothing.
            let same = try await f.alice.setPublicPermission(.readOnly, in: zone)
            #expect(same.version == other.version)
        }
    }

    @Test(arguments: TestBackend.all) func goingBackToNoneRemovesLinkJoinersAndRotatesTheKey(_ backend: TestBackend) async throws {
        try await withStore(backend) { f in
            let bob = try await f.user("Bob", "bob@example.com")
            let carol = try await f.user("Carol", "carol@example.com")
            let erin = try await f.user("Erin", "erin@example.com")
            let (zone, _) = try await f.sharedWith(bob, .readOnly)
            let open = try await f.alice.setPublicPermission(.readWrite, in: zone)
            _ = try await carol.acceptShare(url: open.url)
            _ = try await erin.acceptShare(url: open.url)
            _ = try await carol.sharedDatabase.save(makeNote("by-carol", in: zone, body: "link write"))
            #expect(Set(try await f.zoneKeyRows(zone).map(\.member)) == [f.alice.userID, bob.userID, carol.userID, erin.userID])

            let closed = try await f.alice.setPublicPermission(.none, in: zone)
            #expect(closed.publicPermission == .none)
            #expect(!closed.url.contains("#"))
            #expect(closed.keyEpoch == 2)
            for joiner in [carol, erin] {
                let p = try #require(closed.testParticipant(joiner.userID))
                #expect(p.role == .publicUser)
                #expect(p.status == .removed)
            }
            #expect(closed.testParticipant(bob.userID)?.status == .accepted)
            #expect(try await f.zoneKeyRows(zone) == [KeyRow(epoch: 2, member: f.alice.userID), KeyRow(epoch: 2, member: bob.userID)].sorted { $0.member < $1.member })
            #expect(try await f.logCount(.acceptances, zone) == 1, "only Bob's")

            for joiner in [carol, erin] {
                #expect(try await joiner.sharedDatabase.zones().isEmpty)
                await expectStoreError(.permissionFailure) { try await joiner.sharedDatabase.record(named: "n1", in: zone) }
                await expectStoreError(.permissionFailure) { try await f.fresh(joiner).sharedDatabase.record(named: "by-carol", in: zone) }
                await expectStoreError(.permissionFailure, "the old link") { try await joiner.acceptShare(url: open.url) }
            }
            // The owner's data is untouched; Bob still reads, history included.
            #expect(noteBody(try await f.fresh(bob).sharedDatabase.record(named: "by-carol", in: zone)) == "link write")
            #expect(try await f.alice.privateDatabase.records(in: zone).map(\.name) == ["by-carol", "n1", "n2"])
        }
    }

    @Test(arguments: TestBackend.all) func theOwnerChangesAParticipantsPermission(_ backend: TestBackend) async throws {
        try await withStore(backend) { f in
            let bob = try await f.user("Bob", "bob@example.com")
            let (zone, _) = try await f.sharedWith(bob, .readOnly)
            await expectStoreError(.permissionFailure) { try await bob.sharedDatabase.save(makeNote("x", in: zone)) }
            #expect(await bob.canModify(zone: zone) == false)
            let up = try await f.alice.setPermission(.readWrite, for: "bob@example.com", in: zone)
            #expect(up.testParticipant(bob.userID)?.permission == .readWrite)
            #expect(up.testParticipant(bob.userID)?.status == .accepted)
            #expect(await bob.canModify(zone: zone) == true)
            _ = try await bob.sharedDatabase.save(makeNote("x", in: zone))
            _ = try await f.alice.setPermission(.readOnly, for: bob.userID, in: zone)
            await expectStoreError(.permissionFailure) { try await bob.sharedDatabase.save(makeNote("y", in: zone)) }
            await expectStoreError(.permissionFailure) { try await bob.sharedDatabase.delete(recordNamed: "x", in: zone) }
            await expectStoreError(.invalidArguments) { try await f.alice.setPermission(.none, for: bob.userID, in: zone) }
            let mallory = try await f.user("Mallory", "mallory@example.com")
            await expectStoreError(.unknownItem) { try await f.alice.setPermission(.readWrite, for: mallory.userID, in: zone) }
            await expectStoreError(.unknownItem) { try await f.alice.removeParticipant(mallory.userID, from: zone) }
            await expectStoreError(.unknownItem) { try await f.alice.addParticipant("nobody@example.com", permission: .readOnly, to: zone) }
            await expectStoreError(.invalidArguments) { try await f.alice.addParticipant(mallory.userID, permission: .none, to: zone) }
            await expectStoreError(.invalidArguments) { try await f.alice.addParticipant(f.alice.userID, permission: .readOnly, to: zone) }
            await expectStoreError(.alreadyExists) { try await f.alice.addParticipant(bob.userID, permission: .readWrite, to: zone) }
        }
    }

    /// Someone who can write the store's directory of cards (any user of a shared local file)
    /// plants a card of their own under Bob's name and email. Alice's library calls resolve
    /// "bob@example.com" and "Bob" only to a card she pinned: before she pins Bob's, they find
    /// nobody, and after, the real Bob, whom the invitation wraps the zone key to.
    @Test(arguments: TestBackend.all) func namesResolveOnlyToPinnedCards(_ backend: TestBackend) async throws {
        try await withStore(backend) { f in
            let zone = try await f.makeZone("Family")
            _ = try await f.alice.share(zone: zone)
            let mallory = try makeVault(in: f.folder, name: "Bob", email: "bob@example.com")
            _ = try await f.store.addContact(try ContactCard(vault: mallory))
            for who in ["bob@example.com", "Bob"] {
                await expectStoreError(.unknownItem) { try await f.alice.addParticipant(who, permission: .readOnly, to: zone) }
                await expectStoreError(.unknownItem) { try await f.alice.contact(matching: who) }
            }
            let bob = try await f.user("Bob", "bob@example.com") // Alice pins the real Bob's card
            #expect(try await f.alice.contact(matching: "bob@example.com").userID == bob.userID)
            let share = try await f.alice.addParticipant("bob@example.com", permission: .readOnly, to: zone)
            #expect(share.participants.map(\.userID).contains(bob.userID))
            #expect(!share.participants.map(\.userID).contains(mallory.identity.userID))
            _ = try await bob.acceptShare(url: share.url)
            #expect(try await bob.sharedDatabase.record(named: "n1", in: zone).name == "n1")
            // Mallory's own user id still names her: an id is the hash of its key.
            #expect(try await f.alice.contact(matching: mallory.identity.userID).userID == mallory.identity.userID)
        }
    }

    @Test(arguments: [SharePermission.readWrite, .readOnly])
    func onlyTheOwnerChangesTheShare(_ permission: SharePermission) async throws {
        try await withStore { f in
            let bob = try await f.user("Bob", "bob@example.com")
            let carol = try await f.user("Carol", "carol@example.com")
            let (zone, _) = try await f.sharedWith(bob, permission)
            _ = try await f.alice.addParticipant(carol.userID, permission: .readOnly, to: zone)
            let before = try await f.alice.fetchShare(in: zone)

            await expectStoreError(.permissionFailure, "add") { try await bob.addParticipant(f.alice.userID, permission: .readWrite, to: zone) }
            await expectStoreError(.permissionFailure, "set permission") { try await bob.setPermission(.readWrite, for: carol.userID, in: zone) }
            await expectStoreError(.permissionFailure, "public") { try await bob.setPublicPermission(.readWrite, in: zone) }
            await expectStoreError(.permissionFailure, "remove") { try await bob.removeParticipant(carol.userID, from: zone) }
            await expectStoreError(.permissionFailure, "remove self") { try await bob.removeParticipant(bob.userID, from: zone) }
            await expectStoreError(.permissionFailure, "stop") { try await bob.stopSharing(zone: zone) }
            await expectStoreError(.permissionFailure, "rekey") { try await bob.rekey(zone: zone) }
            await expectStoreError(.permissionFailure, "delete zone") { try await bob.sharedDatabase.deleteZone(zone) }
            await expectStoreError(.permissionFailure, "create zone in shared db") { try await bob.sharedDatabase.createZone(named: "Mine") }

            let after = try await f.alice.fetchShare(in: zone)
            #expect(after.version == before.version)
            #expect(after.participants == before.participants)
            #expect(after.publicPermission == .none)
            #expect(after.keyEpoch == before.keyEpoch)
            #expect(try await f.alice.isShared(zone) == true)
        }
    }

    @Test(arguments: TestBackend.all) func thePublicPermissionOfLinkJoinersFollowsTheShare(_ backend: TestBackend) async throws {
        try await withStore(backend) { f in
            let carol = try await f.user("Carol", "carol@example.com")
            let zone = try await f.makeZone("Family")
            let share = try await f.alice.share(zone: zone, title: "t", publicPermission: .readOnly)
            _ = try await carol.acceptShare(url: share.url)
            #expect(await carol.canModify(zone: zone) == false)
            _ = try await f.alice.setPublicPermission(.readWrite, in: zone)
            #expect(await carol.canModify(zone: zone) == true)
            _ = try await carol.sharedDatabase.save(makeNote("by-carol", in: zone))
            _ = try await f.alice.setPublicPermission(.readOnly, in: zone)
            await expectStoreError(.permissionFailure) { try await carol.sharedDatabase.save(makeNote("by-carol-2", in: zone)) }
            #expect(try await carol.sharedDatabase.records(in: zone).map(\.name) == ["by-carol", "n1", "n2"])
        }
    }
}

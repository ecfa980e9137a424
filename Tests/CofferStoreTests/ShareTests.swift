import CofferCrypto
import CofferVault
import CofferStoreTestSupport
import Foundation
import GRDB
import Testing
@testable import CofferStore

/// A share covers one zone; its model (title, owner, permissions, participants, URL); accepting
/// and leaving.
@Suite("Shares")
struct ShareTests {
    // MARK: - What a share covers

    @Test(arguments: TestBackend.all) func sharingAZoneSharesAllOfItAndNothingElse(_ backend: TestBackend) async throws {
        try await withStore(backend) { f in
            let zone = try await f.makeZone("Family", notes: ["n1", "n2", "n3"])
            let other = try await f.makeZone("Private", notes: ["secret"])
            let share = try await f.alice.share(zone: zone, title: "Family notes")
            #expect(share.zoneID == zone)
            #expect(try await f.alice.isShared(zone) == true)
            #expect(try await f.alice.isShared(other) == false)

            let bob = try await f.user("Bob", "bob@example.com")
            _ = try await f.alice.addParticipant("bob@example.com", permission: .readOnly, to: zone)
            let accepted = try await bob.acceptShare(url: share.url)
            #expect(accepted.zoneID == zone)
            let records = try await bob.sharedDatabase.records(in: zone)
            #expect(records.map(\.name) == ["n1", "n2", "n3"])
            #expect(records.map { noteBody($0) } == ["body of n1", "body of n2", "body of n3"])
            await expectStoreError(.zoneNotFound, "a zone not shared") { try await bob.sharedDatabase.records(in: other) }
            await expectStoreError(.zoneNotFound) { try await bob.sharedDatabase.record(named: "secret", in: other) }
            #expect(try await bob.sharedDatabase.zones().map(\.id) == [zone])
        }
    }

    @Test(arguments: TestBackend.all) func sharingRecordsMovesThemAndTheirChildrenIntoAZoneOfTheirOwn(_ backend: TestBackend) async throws {
        try await withStore(backend) { f in
            let inbox = try await f.alice.privateDatabase.createZone(named: "Inbox")
            let db = f.alice.privateDatabase
            _ = try await db.save(makeNote("trip", in: inbox, body: "Lisbon in May"))
            _ = try await db.save(makeNote("day1", in: inbox, body: "Alfama", parent: "trip"))
            _ = try await db.save(makeNote("day1-photo", in: inbox, body: "tram 28", parent: "day1"))
            _ = try await db.save(makeNote("day2", in: inbox, body: "Belem", parent: "trip"))
            _ = try await db.save(makeNote("unrelated", in: inbox, body: "taxes"))

            let share = try await f.alice.share(records: ["trip"], in: inbox, intoZoneNamed: "Trip", title: "Trip")
            let trip = ZoneID(name: "Trip", ownerID: f.alice.userID)
            #expect(share.zoneID == trip)
            #expect(share.title == "Trip")
            let moved = try await db.records(in: trip)
            #expect(moved.map(\.name) == ["day1", "day1-photo", "day2", "trip"])
            #expect(moved.map { noteBody($0) } == ["Alfama", "tram 28", "Belem", "Lisbon in May"])
            #expect(moved.map(\.parent) == ["trip", "day1", "trip", nil])
            #expect(try await db.records(in: inbox).map(\.name) == ["unrelated"])
            #expect(try await db.zones().map(\.id.name) == ["Inbox", "Trip"])
            #expect(try await f.alice.isShared(trip) == true)
            #expect(try await f.alice.isShared(inbox) == false)

            // A participant sees the moved records, and nothing of the source zone.
            let bob = try await f.user("Bob", "bob@example.com")
            _ = try await f.alice.addParticipant(bob.userID, permission: .readOnly, to: trip)
            _ = try await bob.acceptShare(url: share.url)
            #expect(try await bob.sharedDatabase.records(in: trip).map(\.name) == ["day1", "day1-photo", "day2", "trip"])
            await expectStoreError(.zoneNotFound) { try await bob.sharedDatabase.record(named: "unrelated", in: inbox) }
        }
    }

    @Test(arguments: TestBackend.all) func sharingRecordsIntoAnExistingSharesZoneAddsThemToThatShare(_ backend: TestBackend) async throws {
        try await withStore(backend) { f in
            let inbox = try await f.makeZone("Inbox", notes: ["a", "b"])
            _ = try await f.alice.privateDatabase.save(makeNote("b-child", in: inbox, parent: "b"))
            let first = try await f.alice.share(records: ["a"], in: inbox, intoZoneNamed: "Shared", title: "First")
            let bob = try await f.user("Bob", "bob@example.com")
            _ = try await f.alice.addParticipant(bob.userID, permission: .readWrite, to: first.zoneID)
            _ = try await bob.acceptShare(url: first.url)
            let before = try await f.alice.fetchShare(in: first.zoneID)

            let again = try await f.alice.share(records: ["b"], in: inbox, intoZoneNamed: "Shared", title: "ignored")
            #expect(again.zoneID == first.zoneID)
            #expect(again.url == first.url)
            #expect(again.title == "First")
            #expect(again.version == before.version)
            #expect(try await f.alice.fetchShares().count == 1)
            #expect(try await bob.sharedDatabase.records(in: first.zoneID).map(\.name) == ["a", "b", "b-child"])
            #expect(try await f.alice.privateDatabase.records(in: inbox).map(\.name) == [])
        }
    }

    /// Moving a record into a share's zone that already has a record of that name is a clean
    /// refusal (not a raw database error), and moves nothing.
    @Test(arguments: TestBackend.all) func sharingRecordsOntoATakenNameMovesNothingAndFailsCleanly(_ backend: TestBackend) async throws {
        try await withStore(backend) { f in
            let family = try await f.makeZone("Family", notes: ["n1"])
            _ = try await f.alice.share(zone: family, title: "Family notes")
            let inbox = try await f.alice.privateDatabase.createZone(named: "Inbox")
            _ = try await f.alice.privateDatabase.save(makeNote("n1", in: inbox, body: "the inbox's n1"))
            _ = try await f.alice.privateDatabase.save(makeNote("n1-child", in: inbox, parent: "n1"))
            let outcome = await attempt { try await f.alice.share(records: ["n1"], in: inbox, intoZoneNamed: "Family") }
            #expect(outcome != .allowed)
            #expect(outcome != .refused(.internalError), "a name clash surfaces as a raw SQLite UNIQUE error")
            #expect(try await f.alice.privateDatabase.records(in: inbox).map(\.name) == ["n1", "n1-child"])
            #expect(noteBody(try await f.alice.privateDatabase.record(named: "n1", in: family)) == "body of n1")
            #expect(try await f.alice.privateDatabase.records(in: family).map(\.name) == ["n1"])
            await expectStoreError(.unknownItem) { try await f.alice.share(records: ["nope"], in: inbox, intoZoneNamed: "New") }
            #expect(try await f.alice.privateDatabase.zones().map(\.id.name) == ["Family", "Inbox"], "no empty zone left behind")
        }
    }

    @Test(arguments: TestBackend.all) func aZoneHasAtMostOneShare(_ backend: TestBackend) async throws {
        try await withStore(backend) { f in
            let zone = try await f.makeZone("Family")
            let share = try await f.alice.share(zone: zone, title: "One")
            await expectStoreError(.alreadyExists) { try await f.alice.share(zone: zone, title: "Two") }
            await expectStoreError(.alreadyExists) { try await f.alice.share(zone: zone, title: "Three", publicPermission: .readOnly) }
            let shares = try await f.alice.fetchShares()
            #expect(shares.count == 1)
            #expect(shares.first?.title == "One")
            #expect(shares.first?.url == share.url)
            #expect(try await f.logCount(.share, zone) == 1)
        }
    }

    @Test(arguments: TestBackend.all) func onlyTheOwnerSharesAZone(_ backend: TestBackend) async throws {
        try await withStore(backend) { f in
            let bob = try await f.user("Bob", "bob@example.com")
            let (zone, _) = try await f.sharedWith(bob, .readWrite)
            await expectStoreError(.permissionFailure) { try await bob.share(zone: zone, title: "mine now") }
            await expectStoreError(.permissionFailure) { try await bob.rekey(zone: zone) }
            #expect(try await f.alice.fetchShare(in: zone).title == "Family notes")
        }
    }

    // MARK: - The model

    @Test(arguments: TestBackend.all) func aShareHasTitleOwnerPublicPermissionParticipantsAndURL(_ backend: TestBackend) async throws {
        try await withStore(backend) { f in
            let zone = try await f.makeZone("Family")
            let before = Date()
            let created = try await f.alice.share(zone: zone, title: "Family notes")
            #expect(created.title == "Family notes")
            #expect(created.publicPermission == .none)
            #expect(created.version == 4) // the log: genesis, n1, n2, then the share
            #expect(created.keyEpoch == 1)
            #expect(created.created.timeIntervalSince1970 >= before.timeIntervalSince1970 - 1)
            #expect(created.participants.count == 1)
            let owner = created.owner
            #expect(owner.userID == f.alice.userID)
            #expect(owner.name == "Alice")
            #expect(owner.email == "alice@example.com")
            #expect(owner.role == .owner)
            #expect(owner.permission == .readWrite)
            #expect(owner.status == .accepted)
            #expect(owner.left == false)
            let prefix = "coffer://share/v1/\(Hex.encode(f.store.storeID))/"
            #expect(created.url.hasPrefix(prefix))
            #expect(created.url.count == prefix.count + 32)
            #expect(!created.url.contains("#"))

            let bob = try await f.user("Bob", "bob@example.com")
            let carol = try await f.user("Carol", "carol@example.com")
            _ = try await f.alice.addParticipant("bob@example.com", permission: .readWrite, to: zone)
            let two = try await f.alice.addParticipant("Carol", permission: .readOnly, to: zone)
            #expect(two.version == 6)
            _ = try await bob.acceptShare(url: created.url)

            let share = try await f.alice.fetchShare(in: zone)
            #expect(share.version == 6, "accepting is the participant's entry, not a change of the share")
            #expect(share.url == created.url)
            #expect(share.participants.count == 3)
            #expect(share.participants.first?.role == .owner)
            #expect(Array(share.participants.dropFirst()).map(\.userID) == [bob.userID, carol.userID].sorted())
            let b = try #require(share.testParticipant(bob.userID))
            #expect(b.name == "Bob")
            #expect(b.email == "bob@example.com")
            #expect(b.role == .privateUser)
            #expect(b.permission == .readWrite)
            #expect(b.status == .accepted)
            #expect(b.left == false)
            let c = try #require(share.testParticipant(carol.userID))
            #expect(c.role == .privateUser)
            #expect(c.permission == .readOnly)
            #expect(c.status == .pending)

            // Every member sees the same share.
            let bobView = try await bob.fetchShare(in: zone)
            #expect(bobView.participants == share.participants)
            #expect(bobView.title == "Family notes")
            let carolView = try await carol.fetchShare(in: zone)
            #expect(carolView.testParticipant(carol.userID)?.status == .pending)
        }
    }

    @Test(arguments: TestBackend.all) func aShareTitleIsShortAndPrintable(_ backend: TestBackend) async throws {
        try await withStore(backend) { f in
            let zone = try await f.makeZone("Family")
            await expectStoreError(.invalidArguments) { try await f.alice.share(zone: zone, title: "two\nlines") }
            await expectStoreError(.invalidArguments) { try await f.alice.share(zone: zone, title: String(repeating: "x", count: 1025)) }
            #expect(try await f.alice.isShared(zone) == false)
            let share = try await f.alice.share(zone: zone, title: String(repeating: "é", count: 512))
            #expect(share.title.utf8.count == 1024)
        }
    }

    @Test(arguments: TestBackend.all) func aShareHasAtMostOneHundredParticipants(_ backend: TestBackend) async throws {
        try await withStore(backend) { f in
            let zone = try await f.makeZone("Family", notes: [])
            _ = try await f.alice.share(zone: zone, title: "Crowd")
            var ids = [String]()
            for i in 0..<101 {
                let vault = try makeVault(in: f.folder, name: "Guest \(i)", email: "guest\(i)@example.com")
                try await f.store.addContact(ContactCard(vault: vault))
                ids.append(vault.identity.userID)
            }
            var share: Share?
            for id in ids.prefix(100) { share = try await f.alice.addParticipant(id, permission: .readOnly, to: zone) }
            #expect(share?.participants.count == 101)
            #expect(Limits.maxParticipants == 100)
            await expectStoreError(.limitExceeded, "the 101st participant") {
                try await f.alice.addParticipant(ids[100], permission: .readOnly, to: zone)
            }
            #expect(try await f.alice.fetchShare(in: zone).participants.count == 101)
            #expect(try await f.logCount(.participants, zone) == 100)
            // Removed participants do not count.
            _ = try await f.alice.removeParticipant(ids[0], from: zone)
            let after = try await f.alice.addParticipant(ids[100], permission: .readOnly, to: zone)
            #expect(after.participants.filter { $0.status == .pending }.count == 100)
            #expect(after.testParticipant(ids[0])?.status == .removed)
        }
    }

    // MARK: - Accepting

    @Test(arguments: TestBackend.all) func anInvitedParticipantAcceptsTheURLAndReadsWithTheirOwnVault(_ backend: TestBackend) async throws {
        try await withStore(backend) { f in
            let bob = try await f.user("Bob", "bob@example.com")
            let zone = try await f.makeZone("Family")
            let share = try await f.alice.share(zone: zone, title: "Family notes")
            _ = try await f.alice.addParticipant("bob@example.com", permission: .readOnly, to: zone)
            #expect(try await bob.sharedDatabase.zones().isEmpty, "not before accepting")
            await expectStoreError(.permissionFailure, "a pending invitee reads nothing") {
                try await bob.sharedDatabase.record(named: "n1", in: zone)
            }

            let accepted = try await bob.acceptShare(url: share.url)
            #expect(accepted.zoneID == zone)
            #expect(accepted.testParticipant(bob.userID)?.status == .accepted)
            let zones = try await bob.sharedDatabase.zones()
            #expect(zones.map(\.id) == [zone])
            #expect(zones.first?.recordCount == 2)
            #expect(try await bob.privateDatabase.zones().isEmpty)
            #expect(try await f.alice.sharedDatabase.zones().isEmpty)

            // A new session of Bob's, from his vault alone, reads it.
            let bobAgain = try await bob.store.openSession(vault: try Vault.open(at: bob.vault.url,
                                                                     passphrase: SecureBytes(copying: Array(testPassphrase.utf8))))
            let note = try await bobAgain.sharedDatabase.record(named: "n1", in: zone)
            #expect(noteBody(note) == "body of n1")
            #expect(note.values["title"] == .string("n1"))
            #expect(try await bobAgain.sharedDatabase.zones().map(\.id) == [zone])
            #expect(try await f.alice.fetchShare(in: zone).testParticipant(bob.userID)?.status == .accepted)

            // Accepting again changes nothing.
            _ = try await bob.acceptShare(url: share.url)
            #expect(try await bob.sharedDatabase.zones().map(\.id) == [zone])
        }
    }

    @Test(arguments: TestBackend.all) func aStrangerCannotAcceptAURLWithoutALinkSecret(_ backend: TestBackend) async throws {
        try await withStore(backend) { f in
            let bob = try await f.user("Bob", "bob@example.com")
            let mallory = try await f.user("Mallory", "mallory@example.com")
            let (zone, share) = try await f.sharedWith(bob, .readOnly)
            #expect(!share.url.contains("#"))
            await expectStoreError(.permissionFailure) { try await mallory.acceptShare(url: share.url) }
            #expect(try await mallory.sharedDatabase.zones().isEmpty)
            await expectStoreError(.zoneNotFound) { try await mallory.sharedDatabase.record(named: "n1", in: zone) }
            #expect(try await mallory.fetchShares().isEmpty)
            #expect(try await f.logCount(.acceptances, zone) == 1, "only Bob's acceptance")
            #expect(try await f.wrappedKey(zone, member: mallory.userID, epoch: 1) == nil)
        }
    }

    @Test(arguments: TestBackend.all) func anyoneMayJoinAPublicShareWithItsPermission(_ backend: TestBackend) async throws {
        try await withStore(backend) { f in
            let carol = try await f.user("Carol", "carol@example.com")
            let dave = try await f.user("Dave", "dave@example.com")
            let zone = try await f.makeZone("Family")
            let share = try await f.alice.share(zone: zone, title: "Open", publicPermission: .readOnly)
            #expect(share.publicPermission == .readOnly)
            #expect(share.url.contains("#"))

            let joined = try await carol.acceptShare(url: share.url)
            #expect(joined.zoneID == zone)
            #expect(try await carol.sharedDatabase.zones().map(\.id) == [zone])
            #expect(noteBody(try await carol.sharedDatabase.record(named: "n2", in: zone)) == "body of n2")
            await expectStoreError(.permissionFailure, "read-only link") {
                try await carol.sharedDatabase.save(makeNote("n3", in: zone))
            }
            let c = try #require(try await f.alice.fetchShare(in: zone).testParticipant(carol.userID))
            #expect(c.role == .publicUser)
            #expect(c.permission == .readOnly)
            #expect(c.status == .accepted)
            #expect(try await f.wrappedKey(zone, member: carol.userID, epoch: 1) != nil, "a link joiner wraps the key to themselves")

            // The same link without its fragment admits no one.
            let bare = String(share.url.split(separator: "#")[0])
            await expectStoreError(.permissionFailure) { try await dave.acceptShare(url: bare) }
            // A wrong secret of the right shape neither.
            let wrong = bare + "#" + Base64URL.encode([UInt8](repeating: 7, count: 32))
            await expectStoreError(.permissionFailure) { try await dave.acceptShare(url: wrong) }
            #expect(try await dave.sharedDatabase.zones().isEmpty)

            // A read-write link lets joiners write.
            _ = try await f.alice.setPublicPermission(.readWrite, in: zone)
            let rw = try await f.alice.fetchShare(in: zone)
            _ = try await dave.acceptShare(url: rw.url)
            _ = try await dave.sharedDatabase.save(makeNote("from-dave", in: zone, body: "hi"))
            #expect(noteBody(try await f.alice.privateDatabase.record(named: "from-dave", in: zone)) == "hi")
            #expect(try await f.alice.fetchShare(in: zone).testParticipant(carol.userID)?.permission == .readWrite)
        }
    }

    @Test func acceptingRefusesTheOwnerOtherStoresAndStoppedShares() async throws {
        try await withStore { f in
            let zone = try await f.makeZone("Family")
            let share = try await f.alice.share(zone: zone, title: "x")
            await expectStoreError(.invalidArguments, "the owner") { try await f.alice.acceptShare(url: share.url) }
            await expectStoreError(.invalidArguments, "not a URL") { try await f.alice.acceptShare(url: "https://example.com/") }

            let otherStore = try Store(path: f.folder.appendingPathComponent("other.sqlite").path)
            let bobThere = try otherStore.session(vault: try makeVault(in: f.folder, name: "Bob", email: "bob@example.com"))
            let error = await expectStoreError(.unknownItem) { try await bobThere.acceptShare(url: share.url) }
            #expect(error?.message.contains(Hex.encode(f.store.storeID)) == true)

            let bob = try await f.user("Bob", "bob@example.com")
            _ = try await f.alice.addParticipant(bob.userID, permission: .readOnly, to: zone)
            try await f.alice.stopSharing(zone: zone)
            await expectStoreError(.unknownItem, "a stopped share") { try await bob.acceptShare(url: share.url) }
        }
    }

    // MARK: - Leaving

    @Test(arguments: TestBackend.all) func leavingRemovesTheZoneFromTheParticipantsViewAndTouchesNothingElse(_ backend: TestBackend) async throws {
        try await withStore(backend) { f in
            let bob = try await f.user("Bob", "bob@example.com")
            let (zone, share) = try await f.sharedWith(bob, .readWrite)
            _ = try await bob.sharedDatabase.save(makeNote("by-bob", in: zone, body: "Bob's"))
            let before = try await f.alice.privateDatabase.records(in: zone)

            try await bob.leaveShare(zone: zone)
            #expect(try await bob.sharedDatabase.zones().isEmpty)
            await expectStoreError(.permissionFailure) { try await bob.sharedDatabase.record(named: "n1", in: zone) }
            await expectStoreError(.permissionFailure) { try await bob.sharedDatabase.save(makeNote("n9", in: zone)) }
            #expect(await bob.canRead(zone: zone) == false)

            let after = try await f.alice.privateDatabase.records(in: zone)
            #expect(after == before)
            #expect(after.map(\.changeTag) == before.map(\.changeTag))
            #expect(after.map { noteBody($0) } == ["Bob's", "body of n1", "body of n2"])
            let b = try #require(try await f.alice.fetchShare(in: zone).testParticipant(bob.userID))
            #expect(b.status == .removed)
            #expect(b.left == true)
            #expect(try await f.alice.fetchShare(in: zone).keyEpoch == 1, "leaving does not rotate")

            // They may come back with the same URL.
            _ = try await bob.acceptShare(url: share.url)
            #expect(try await bob.sharedDatabase.zones().map(\.id) == [zone])
            #expect(noteBody(try await bob.sharedDatabase.record(named: "by-bob", in: zone)) == "Bob's")
            #expect(try await f.alice.fetchShare(in: zone).testParticipant(bob.userID)?.status == .accepted)
        }
    }

    @Test(arguments: TestBackend.all) func aLinkJoinerWhoLeavesLosesTheirKeyAndMayJoinAgain(_ backend: TestBackend) async throws {
        try await withStore(backend) { f in
            let carol = try await f.user("Carol", "carol@example.com")
            let zone = try await f.makeZone("Family")
            let share = try await f.alice.share(zone: zone, title: "Open", publicPermission: .readOnly)
            _ = try await carol.acceptShare(url: share.url)
            #expect(try await f.wrappedKey(zone, member: carol.userID, epoch: 1) != nil)
            try await carol.leaveShare(zone: zone)
            #expect(try await f.wrappedKey(zone, member: carol.userID, epoch: 1) == nil)
            #expect(try await carol.sharedDatabase.zones().isEmpty)
            await expectStoreError(.permissionFailure) { try await f.fresh(carol).sharedDatabase.record(named: "n1", in: zone) }
            _ = try await carol.acceptShare(url: share.url)
            #expect(noteBody(try await f.fresh(carol).sharedDatabase.record(named: "n1", in: zone)) == "body of n1")
        }
    }

    @Test(arguments: TestBackend.all) func theOwnerAndPendingInviteesCannotLeave(_ backend: TestBackend) async throws {
        try await withStore(backend) { f in
            let bob = try await f.user("Bob", "bob@example.com")
            let (zone, _) = try await f.sharedWith(bob, .readOnly, accept: false)
            await expectStoreError(.invalidArguments) { try await f.alice.leaveShare(zone: zone) }
            await expectStoreError(.permissionFailure) { try await bob.leaveShare(zone: zone) }
            #expect(try await f.alice.fetchShare(in: zone).testParticipant(bob.userID)?.status == .pending)
        }
    }

    @Test func deletingASharedZoneDeletesItsShare() async throws {
        try await withStore { f in
            let bob = try await f.user("Bob", "bob@example.com")
            let (zone, _) = try await f.sharedWith(bob, .readWrite)
            await expectStoreError(.permissionFailure) { try await bob.sharedDatabase.deleteZone(zone) }
            try await f.alice.privateDatabase.deleteZone(zone)
            #expect(try await f.alice.fetchShares().isEmpty)
            #expect(try await bob.fetchShares().isEmpty)
            #expect(try await bob.sharedDatabase.zones().isEmpty)
            await expectStoreError(.zoneNotFound) { try await bob.sharedDatabase.record(named: "n1", in: zone) }
            let counts = try f.sqlite { db in
                try ["zone_log", "share_link", "zone_member", "zone_key", "zone_key_chain"].map {
                    try Int.fetchOne(db, sql: "SELECT count(*) FROM \($0)") ?? -1
                }
            }
            #expect(counts == [0, 0, 0, 0, 0])
        }
    }
}

@Suite("Shares by database")
struct SharesByDatabaseTests {
    @Test("fetchShares(in:) splits owned shares (private) from shares taken part in (shared)", arguments: TestBackend.all)
    func sharesByDatabase(_ backend: TestBackend) async throws {
        try await withStore(backend) { f in
            let bob = try await f.user("Bob", "bob@example.com")
            let aliceZone = try await f.alice.privateDatabase.createZone(named: "AliceZone")
            let bobZone = try await bob.privateDatabase.createZone(named: "BobZone")
            let aliceShare = try await f.alice.share(zone: aliceZone, title: "from Alice")
            _ = try await f.alice.addParticipant("bob@example.com", permission: .readOnly, to: aliceZone)
            _ = try await bob.acceptShare(url: aliceShare.url)
            _ = try await bob.share(zone: bobZone, title: "from Bob")
            #expect(try await bob.fetchShares(in: .private).map(\.zoneID) == [bobZone])
            #expect(try await bob.fetchShares(in: .shared).map(\.zoneID) == [aliceZone])
            #expect(try await f.alice.fetchShares(in: .private).map(\.zoneID) == [aliceZone])
            #expect(try await f.alice.fetchShares(in: .shared).isEmpty)
        }
    }
}

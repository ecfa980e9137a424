import CofferCrypto
import CofferVault
import CofferStoreTestSupport
import Foundation
import GRDB
import Testing
@testable import CofferStore

// Zone and database change feeds (Sources/CofferStore/CofferStore.docc/Changes.md).

@Suite("Change feeds")
struct ChangesTests {
    // MARK: - Zone changes

    @Test("incremental feeds after saves, updates and deletes", arguments: TestBackend.all)
    func incrementalFeeds(_ backend: TestBackend) async throws {
        try await withStore(backend) { h in
            let db = h.db
            let zone = try await db.createZone(named: "Notes")
            let empty = try await db.changes(in: zone, since: nil)
            #expect(empty.changed.isEmpty && empty.deleted.isEmpty && empty.refused.isEmpty && !empty.moreComing)

            for name in ["a", "b", "c"] { _ = try await db.save(makeNote(name, in: zone)) }
            let p1 = try await db.changes(in: zone, since: nil)
            #expect(p1.changed.map(\.name) == ["a", "b", "c"])
            #expect(p1.changed.map(\.changeTag) == ["2", "3", "4"])
            #expect(p1.changed.allSatisfy { $0.modifierID == h.alice.userID && $0.transactionAuthor == nil })
            #expect(p1.changed[1].values["title"] == .string("b"))
            #expect(p1.changed[1].encryptedValues["body"] == .string("body of b"))
            #expect(p1.deleted.isEmpty && p1.refused.isEmpty)
            #expect(p1.moreComing == false)
            #expect(p1.token.seq == 4 && p1.token.name == nil)
            // From the empty feed's token: the same three.
            #expect(try await db.changes(in: zone, since: empty.token).changed.map(\.name) == ["a", "b", "c"])

            for name in ["d", "e"] { _ = try await db.save(makeNote(name, in: zone)) }
            let p2 = try await db.changes(in: zone, since: p1.token)
            #expect(p2.changed.map(\.name) == ["d", "e"])
            #expect(p2.deleted.isEmpty && !p2.moreComing)
            // A token can be used again: same answer.
            #expect(try await db.changes(in: zone, since: p1.token).changed.map(\.name) == ["d", "e"])

            // Two updates of a: it shows once, at its latest version.
            var a = try await db.record(named: "a", in: zone)
            a.values["title"] = "a v2"
            a = try await db.save(a)
            a.values["title"] = "a v3"
            a.encryptedValues["body"] = "a body v3"
            a = try await db.save(a)
            #expect(a.changeTag == "8")
            let p3 = try await db.changes(in: zone, since: p2.token)
            #expect(p3.changed.map(\.name) == ["a"])
            #expect(p3.changed.first?.values["title"] == .string("a v3"))
            #expect(p3.changed.first?.encryptedValues["body"] == .string("a body v3"))
            #expect(p3.changed.first?.changeTag == "8")
            #expect(p3.deleted.isEmpty)

            // A delete shows in `deleted`, with its author.
            let before = Date()
            try await db.delete(recordNamed: "b", in: zone)
            let after = Date()
            let p4 = try await db.changes(in: zone, since: p3.token)
            #expect(p4.changed.isEmpty)
            #expect(p4.deleted.map(\.name) == ["b"])
            let deletion = try #require(p4.deleted.first)
            #expect(deletion.authorID == h.alice.userID)
            #expect(deletion.transactionAuthor == nil)
            #expect(deletion.deleted.timeIntervalSince1970 >= before.timeIntervalSince1970 - 0.001)
            #expect(deletion.deleted.timeIntervalSince1970 <= after.timeIntervalSince1970 + 0.001)
            #expect(p4.token.seq == 9)

            // Caught up: nothing, and the same position.
            let p5 = try await db.changes(in: zone, since: p4.token)
            #expect(p5.changed.isEmpty && p5.deleted.isEmpty && !p5.moreComing)
            #expect(p5.token == p4.token)

            // Everything from the beginning: each name once, latest version, in commit order.
            let all = try await db.changes(in: zone, since: nil)
            #expect(all.changed.map(\.name) == ["c", "d", "e", "a"])
            #expect(all.changed.map(\.changeTag) == ["4", "5", "6", "8"])
            #expect(all.deleted.map(\.name) == ["b"])
            #expect(all.token == p4.token)
        }
    }

    @Test("a record saved again after being deleted appears only as changed")
    func savedAgainAfterDelete() async throws {
        try await withStore { h in
            let db = h.db
            let zone = try await db.createZone(named: "Notes")
            _ = try await db.save(makeNote("a", in: zone))
            _ = try await db.save(makeNote("b", in: zone))
            let t = try await db.changes(in: zone, since: nil).token
            try await db.delete(recordNamed: "a", in: zone)
            let deleted = try await db.changes(in: zone, since: t)
            #expect(deleted.deleted.map(\.name) == ["a"] && deleted.changed.isEmpty)

            _ = try await db.save(makeNote("a", in: zone, title: "a again"))
            let again = try await db.changes(in: zone, since: t)
            #expect(again.changed.map(\.name) == ["a"])
            #expect(again.changed.first?.values["title"] == .string("a again"))
            #expect(again.deleted.isEmpty)
            let fromDeletion = try await db.changes(in: zone, since: deleted.token)
            #expect(fromDeletion.changed.map(\.name) == ["a"] && fromDeletion.deleted.isEmpty)
            let all = try await db.changes(in: zone, since: nil)
            #expect(all.changed.map(\.name) == ["b", "a"])
            #expect(all.deleted.isEmpty)
            let rowID = try h.zoneRowID(zone)
            #expect(try h.sqlite { db in try Int.fetchOne(db, sql: "SELECT count(*) FROM record_tombstone WHERE zone_id = ?", arguments: [rowID]) } == 0)

            // Deleted again: only as deleted.
            try await db.delete(recordNamed: "a", in: zone)
            let gone = try await db.changes(in: zone, since: t)
            #expect(gone.changed.isEmpty && gone.deleted.map(\.name) == ["a"])
        }
    }

    // MARK: - Paging

    /// 25 single saves r01…r25 (seq 1…25), then r05 updated (26), r10 deleted (27), r15 deleted (28):
    /// 25 items. Returns the expected feed and the deletion sequences.
    static func makeTwentyFiveChanges(_ h: TestStore, _ zone: ZoneID) async throws -> ([FeedItem], [String: Int64]) {
        let db = h.db
        for i in 1...25 { _ = try await db.save(makeNote(String(format: "r%02d", i), in: zone)) }
        var r05 = try await db.record(named: "r05", in: zone)
        r05.values["title"] = "updated"
        _ = try await db.save(r05)
        try await db.delete(recordNamed: "r10", in: zone)
        try await db.delete(recordNamed: "r15", in: zone)
        var expected = [FeedItem]()
        for i in 1...25 where ![5, 10, 15].contains(i) { expected.append(.changed(String(format: "r%02d", i))) }
        expected += [.changed("r05"), .deleted("r10"), .deleted("r15")]
        return (expected, ["r10": 27, "r15": 28])
    }

    /// Follows the feed from `start` with `limit`, passing each token through its string form.
    static func follow(_ db: RecordDatabase, _ zone: ZoneID, from start: ChangeToken? = nil, limit: Int,
                       deletedSeqs: [String: Int64]) async throws -> (items: [FeedItem], pages: [ZoneChanges]) {
        var token = start
        var items = [FeedItem]()
        var pages = [ZoneChanges]()
        repeat {
            let page = try await db.changes(in: zone, since: token, limit: limit)
            pages.append(page)
            items += try pageItems(page, deletedSeqs: deletedSeqs)
            token = try ChangeToken(string: page.token.string)
            guard pages.count < 1000 else { Issue.record("the feed never ends"); break }
        } while pages.last!.moreComing
        return (items, pages)
    }

    @Test("25 changes with limit 4: following the tokens yields each change once, in (seq, name) order", arguments: TestBackend.all)
    func pagingLimitFour(_ backend: TestBackend) async throws {
        try await withStore(backend) { h in
            let zone = try await h.db.createZone(named: "Notes")
            let (expected, deletedSeqs) = try await Self.makeTwentyFiveChanges(h, zone)
            #expect(expected.count == 25)
            let (items, pages) = try await Self.follow(h.db, zone, limit: 4, deletedSeqs: deletedSeqs)
            #expect(items == expected, "\(items)")
            #expect(pages.map { $0.changed.count + $0.deleted.count } == [4, 4, 4, 4, 4, 4, 1])
            #expect(pages.map(\.moreComing) == [true, true, true, true, true, true, false])
            #expect(pages.last?.deleted.map(\.name) == ["r15"])
            #expect(pages.flatMap(\.changed).first { $0.name == "r05" }?.values["title"] == .string("updated"))
            #expect(pages.last?.token.seq == 29 && pages.last?.token.name == nil)
            // Within a page, changed records are in (seq, name) order too.
            for page in pages {
                let keys = try page.changed.map { (try ChangeTag.parse($0.changeTag!), $0.name) }
                #expect(zip(keys, keys.dropFirst()).allSatisfy { $0 < $1 })
            }
        }
    }

    @Test("the same 25 changes with every page size from 1 to 26 give the same feed", arguments: TestBackend.all)
    func pagingEveryLimit(_ backend: TestBackend) async throws {
        try await withStore(backend) { h in
            let zone = try await h.db.createZone(named: "Notes")
            let (expected, deletedSeqs) = try await Self.makeTwentyFiveChanges(h, zone)
            for limit in 1...26 {
                let (items, pages) = try await Self.follow(h.db, zone, limit: limit, deletedSeqs: deletedSeqs)
                #expect(items == expected, "limit \(limit)")
                #expect(pages.count == (25 + limit - 1) / limit, "limit \(limit)")
            }
        }
    }

    @Test("a page boundary inside one batch: a batch of 10 saves with limit 3", arguments: TestBackend.all)
    func pageBoundaryInsideBatch(_ backend: TestBackend) async throws {
        try await withStore(backend) { h in
            let db = h.db
            let zone = try await db.createZone(named: "Notes")
            _ = try await db.save(makeNote("a0", in: zone))
            let names = (0..<10).map { String(format: "b%02d", $0) }
            _ = try await db.modify(saving: names.reversed().map { makeNote($0, in: zone) }, in: zone)
            let (items, pages) = try await Self.follow(db, zone, limit: 3, deletedSeqs: [:])
            #expect(items == (["a0"] + names).map { .changed($0) })
            #expect(pages.map { $0.changed.map(\.name) } == [["a0", "b00", "b01"], ["b02", "b03", "b04"], ["b05", "b06", "b07"], ["b08", "b09"]])
            #expect(pages.map(\.moreComing) == [true, true, true, false])
            // Mid-commit tokens name the last record delivered; the last token is "all of commit 2".
            #expect(pages.map(\.token.seq) == [3, 3, 3, 3])
            #expect(pages.map(\.token.name) == ["b01", "b04", "b07", nil])

            // A second batch saves five and deletes two of the first: ordered by name within the commit.
            _ = try await db.modify(saving: (10..<15).map { makeNote(String(format: "b%02d", $0), in: zone) },
                                    deleting: [RecordDeletion(name: "b07"), RecordDeletion(name: "b03")], in: zone)
            let next = try await Self.follow(db, zone, from: pages.last!.token, limit: 2, deletedSeqs: ["b03": 3, "b07": 3])
            #expect(next.items == [.deleted("b03"), .deleted("b07"), .changed("b10"), .changed("b11"), .changed("b12"), .changed("b13"), .changed("b14")])
            #expect(next.pages.map { $0.deleted.map(\.name) } == [["b03", "b07"], [], [], []])
            #expect(next.pages.map { $0.changed.map(\.name) } == [[], ["b10", "b11"], ["b12", "b13"], ["b14"]])
            #expect(next.pages.map(\.token.name) == ["b07", "b11", "b13", nil])
        }
    }

    @Test("changes made between pages: each name still comes once, at its latest position", arguments: TestBackend.all)
    func changesBetweenPages(_ backend: TestBackend) async throws {
        try await withStore(backend) { h in
            let db = h.db
            let zone = try await db.createZone(named: "Notes")
            for i in 1...6 { _ = try await db.save(makeNote("r\(i)", in: zone)) }
            let first = try await db.changes(in: zone, since: nil, limit: 3)
            #expect(first.changed.map(\.name) == ["r1", "r2", "r3"] && first.moreComing)
            var r2 = try await db.record(named: "r2", in: zone)
            r2.values["title"] = "r2 v2"
            _ = try await db.save(r2)                                   // 7: already delivered, comes again
            var r5 = try await db.record(named: "r5", in: zone)
            r5.values["title"] = "r5 v2"
            _ = try await db.save(r5)                                   // 8: not yet delivered, moves
            try await db.delete(recordNamed: "r4", in: zone)            // 9: not yet delivered, gone
            let rest = try await Self.follow(db, zone, from: first.token, limit: 3, deletedSeqs: ["r4": 9])
            #expect(rest.items == [.changed("r6"), .changed("r2"), .changed("r5"), .deleted("r4")])
            #expect(rest.pages.flatMap(\.changed).first { $0.name == "r5" }?.values["title"] == .string("r5 v2"))
        }
    }

    @Test("a page limit outside 1…10000 is .invalidArguments", arguments: TestBackend.all, [0, -1, 10_001])
    func badLimit(_ backend: TestBackend, _ limit: Int) async throws {
        try await withStore(backend) { h in
            let zone = try await h.db.createZone(named: "Notes")
            await expectStoreError(.invalidArguments) { try await h.db.changes(in: zone, since: nil, limit: limit) }
        }
    }

    @Test("a zone change feed needs read access: a stranger gets an error, not records", arguments: TestBackend.all)
    func strangerCannotReadChanges(_ backend: TestBackend) async throws {
        try await withStore(backend) { h in
            let zone = try await h.makeZone(notes: ["n1"])
            let mallory = try await h.user("Mallory", "mallory@example.com")
            await expectStoreError(.zoneNotFound) { try await mallory.sharedDatabase.changes(in: zone, since: nil) }
            let bob = try await h.user("Bob", "bob@example.com")
            _ = try await h.alice.share(zone: zone)
            _ = try await h.alice.addParticipant(bob.userID, permission: .readOnly, to: zone)
            await expectStoreError(.permissionFailure) { try await bob.sharedDatabase.changes(in: zone, since: nil) } // not accepted
        }
    }

    // MARK: - Authors

    @Test("authors from two users: modifierID and transactionAuthor of each change; a reader skips its own", arguments: TestBackend.all)
    func authorsFromTwoUsers(_ backend: TestBackend) async throws {
        try await withStore(backend) { h in
            let zone = try await h.db.createZone(named: "Notes")
            let bob = try await h.user("Bob Writer", "bob@example.com")
            try await h.share(zone, with: [(bob, .readWrite)])
            var aliceDB = h.db
            aliceDB.transactionAuthor = "alice-app"
            var bobDB = bob.sharedDatabase
            bobDB.transactionAuthor = "bob-sync"

            let a1 = try await aliceDB.save(makeNote("a1", in: zone))                     // 1
            #expect(a1.transactionAuthor == "alice-app" && a1.modifierID == h.alice.userID)
            let b1 = try await bobDB.save(makeNote("b1", in: zone))                       // 2
            #expect(b1.transactionAuthor == "bob-sync" && b1.modifierID == bob.userID)
            _ = try await h.db.save(makeNote("n1", in: zone))                        // 3: no transaction author

            let first = try await h.db.changes(in: zone, since: nil)
            #expect(first.changed.map(\.name) == ["a1", "b1", "n1"])
            #expect(first.changed.map(\.modifierID) == [h.alice.userID, bob.userID, h.alice.userID])
            #expect(first.changed.map(\.transactionAuthor) == ["alice-app", "bob-sync", nil])
            #expect(first.changed.map(\.creatorID) == [h.alice.userID, bob.userID, h.alice.userID])

            var a1Again = try await bobDB.record(named: "a1", in: zone)
            a1Again.values["title"] = "edited by bob"
            _ = try await bobDB.save(a1Again)                                               // 4
            try await aliceDB.delete(recordNamed: "b1", in: zone)                           // 5
            try await bobDB.delete(recordNamed: "n1", in: zone)                             // 6
            _ = try await aliceDB.save(makeNote("a2", in: zone))                          // 7

            for reader in [try await h.fresh(h.alice).privateDatabase, try await h.fresh(bob).sharedDatabase] {
                let page = try await reader.changes(in: zone, since: first.token)
                #expect(page.changed.map(\.name) == ["a1", "a2"])
                #expect(page.changed.map(\.modifierID) == [bob.userID, h.alice.userID])
                #expect(page.changed.map(\.creatorID) == [h.alice.userID, h.alice.userID])
                #expect(page.changed.map(\.transactionAuthor) == ["bob-sync", "alice-app"])
                #expect(page.deleted.map(\.name) == ["b1", "n1"])
                #expect(page.deleted.map(\.authorID) == [h.alice.userID, bob.userID])
                #expect(page.deleted.map(\.transactionAuthor) == ["alice-app", "bob-sync"])
            }

            // Alice's importer skips its own changes.
            let page = try await aliceDB.changes(in: zone, since: nil)
            #expect(page.changed.filter { $0.transactionAuthor != aliceDB.transactionAuthor }.map(\.name) == ["a1"])
            #expect(page.deleted.filter { $0.transactionAuthor != aliceDB.transactionAuthor }.map(\.name) == ["n1"])
            // Bob's sync skips his.
            let bobPage = try await bobDB.changes(in: zone, since: nil)
            #expect(bobPage.changed.filter { $0.transactionAuthor != "bob-sync" }.map(\.name) == ["a2"])
            #expect(bobPage.deleted.filter { $0.transactionAuthor != "bob-sync" }.map(\.name) == ["b1"])
        }
    }

    @Test("a transaction author is at most 255 bytes with no control characters", arguments: TestBackend.all)
    func transactionAuthorLimits(_ backend: TestBackend) async throws {
        try await withStore(backend) { h in
            let zone = try await h.db.createZone(named: "Notes")
            var db = h.db
            db.transactionAuthor = "bad\nlabel"
            await expectStoreError(.invalidArguments) { try await db.save(makeNote("x", in: zone)) }
            db.transactionAuthor = String(repeating: "é", count: 128) // 256 bytes
            await expectStoreError(.invalidArguments) { try await db.delete(recordNamed: "x", in: zone) }
            await expectStoreError(.invalidArguments) { try await db.modify(saving: [makeNote("x", in: zone)], in: zone) }
            #expect(try await h.commitCount(zone) == 0)
            let longest = String(repeating: "é", count: 127) + "z" // 255 bytes
            db.transactionAuthor = longest
            _ = try await db.save(makeNote("x", in: zone))
            #expect(try await h.db.changes(in: zone, since: nil).changed.first?.transactionAuthor == longest)
            db.transactionAuthor = ""
            _ = try await db.save(makeNote("y", in: zone))
            #expect(try await h.fresh(h.alice).privateDatabase.record(named: "y", in: zone).transactionAuthor == "")
        }
    }

    // MARK: - Database changes

    @Test("private database: created and changed zones, deleted zones", arguments: TestBackend.all)
    func privateDatabaseChanges(_ backend: TestBackend) async throws {
        try await withStore(backend) { h in
            let db = h.db
            let start = try await db.databaseChanges(since: nil)
            #expect(start.changed.isEmpty && start.deleted.isEmpty && !start.moreComing)

            let a = try await db.createZone(named: "A")
            let b = try await db.createZone(named: "B")
            let p1 = try await db.databaseChanges(since: start.token)
            #expect(p1.changed == [a, b])
            #expect(p1.deleted.isEmpty)
            let quiet = try await db.databaseChanges(since: p1.token)
            #expect(quiet.changed.isEmpty && quiet.deleted.isEmpty)
            #expect(quiet.token == p1.token)

            _ = try await db.save(makeNote("n", in: a))
            #expect(try await db.databaseChanges(since: p1.token).changed == [a])

            let c = try await db.createZone(named: "C")
            _ = try await db.save(makeNote("n", in: b))
            let p2 = try await db.databaseChanges(since: p1.token)
            #expect(p2.changed == [a, c, b])

            try await db.deleteZone(c)
            let p3 = try await db.databaseChanges(since: p2.token)
            #expect(p3.changed.isEmpty)
            #expect(p3.deleted == [DeletedZone(zoneID: c, reason: "deleted")])

            // Another user's zones and feeds are separate.
            let bob = try await h.user("Bob", "bob@example.com")
            let bobZone = try await bob.privateDatabase.createZone(named: "BobsZone")
            #expect(try await db.databaseChanges(since: p3.token).changed.isEmpty)
            let bobFeed = try await bob.privateDatabase.databaseChanges(since: nil)
            #expect(bobFeed.changed == [bobZone] && bobFeed.deleted.isEmpty)
            #expect(try await bob.sharedDatabase.databaseChanges(since: nil).changed.isEmpty)

            // From the beginning: the zones that exist, and the one deleted.
            let all = try await db.databaseChanges(since: nil)
            #expect(all.changed == [a, b])
            #expect(all.deleted == [DeletedZone(zoneID: c, reason: "deleted")])
        }
    }

    @Test("shared database: listed after accepting; deleted as removed, left, share stopped; back after accepting again", arguments: TestBackend.all)
    func sharedDatabaseChanges(_ backend: TestBackend) async throws {
        try await withStore(backend) { h in
            let zone = try await h.makeZone("Family", notes: ["n1"])
            let bob = try await h.user("Bob", "bob@example.com")
            let carol = try await h.user("Carol", "carol@example.com")
            let dave = try await h.user("Dave", "dave@example.com")
            _ = try await h.alice.share(zone: zone, title: "Family")
            var urls = [String: String]()
            for user in [bob, carol, dave] {
                urls[user.userID] = try await h.alice.addParticipant(user.userID, permission: .readWrite, to: zone).url
            }
            // Invited, not accepted: not in the shared database yet.
            var tokens = [String: ChangeToken]()
            for user in [bob, carol, dave] {
                let page = try await user.sharedDatabase.databaseChanges(since: nil)
                #expect(page.changed.isEmpty && page.deleted.isEmpty)
                tokens[user.userID] = page.token
            }
            for user in [bob, carol, dave] {
                _ = try await user.acceptShare(url: urls[user.userID]!)
                let page = try await user.sharedDatabase.databaseChanges(since: tokens[user.userID])
                #expect(page.changed == [zone])
                #expect(page.deleted.isEmpty)
                tokens[user.userID] = page.token
                // The owner's private feed is not the participant's.
                #expect(try await user.privateDatabase.databaseChanges(since: nil).changed.isEmpty)
            }
            // A commit by the owner shows as a change to each participant.
            _ = try await h.db.save(makeNote("n2", in: zone))
            for user in [bob, carol, dave] {
                let page = try await user.sharedDatabase.databaseChanges(since: tokens[user.userID])
                #expect(page.changed == [zone])
                tokens[user.userID] = page.token
            }

            // Bob is removed.
            _ = try await h.alice.removeParticipant(bob.userID, from: zone)
            let removed = try await bob.sharedDatabase.databaseChanges(since: tokens[bob.userID])
            #expect(removed.changed.isEmpty)
            #expect(removed.deleted == [DeletedZone(zoneID: zone, reason: "removed")])

            // Carol leaves, then accepts again.
            try await carol.leaveShare(zone: zone)
            let left = try await carol.sharedDatabase.databaseChanges(since: tokens[carol.userID])
            #expect(left.changed.isEmpty)
            #expect(left.deleted == [DeletedZone(zoneID: zone, reason: "left")])
            _ = try await carol.acceptShare(url: urls[carol.userID]!)
            let back = try await carol.sharedDatabase.databaseChanges(since: left.token)
            #expect(back.changed == [zone])
            #expect(back.deleted.isEmpty)
            let carolAll = try await carol.sharedDatabase.databaseChanges(since: nil)
            #expect(carolAll.changed == [zone] && carolAll.deleted.isEmpty)
            tokens[carol.userID] = back.token

            // The owner stops sharing: the remaining participants see it gone.
            try await h.alice.stopSharing(zone: zone)
            for user in [carol, dave] {
                let stopped = try await user.sharedDatabase.databaseChanges(since: tokens[user.userID])
                #expect(stopped.changed.isEmpty)
                #expect(stopped.deleted == [DeletedZone(zoneID: zone, reason: "share stopped")])
            }
            // The owner's private feed lists the zone as changed, never as deleted.
            let ownerFeed = try await h.db.databaseChanges(since: nil)
            #expect(ownerFeed.changed == [zone] && ownerFeed.deleted.isEmpty)
            // Bob's feed still says removed.
            #expect(try await bob.sharedDatabase.databaseChanges(since: nil).deleted == [DeletedZone(zoneID: zone, reason: "removed")])
        }
    }

    @Test("shared database: a zone its owner deletes is deleted for its participants", arguments: TestBackend.all)
    func sharedZoneDeletedByOwner(_ backend: TestBackend) async throws {
        try await withStore(backend) { h in
            let zone = try await h.makeZone("Family", notes: ["n1"])
            let bob = try await h.user("Bob", "bob@example.com")
            try await h.share(zone, with: [(bob, .readOnly)])
            let token = try await bob.sharedDatabase.databaseChanges(since: nil).token
            try await h.db.deleteZone(zone)
            let page = try await bob.sharedDatabase.databaseChanges(since: token)
            #expect(page.changed.isEmpty)
            #expect(page.deleted == [DeletedZone(zoneID: zone, reason: "deleted")])
            #expect(try await h.db.databaseChanges(since: nil).deleted == [DeletedZone(zoneID: zone, reason: "deleted")])
        }
    }

    // MARK: - Moves and re-keys are commits too

    @Test("moving records into a shared zone: deletions in the source feed, saves in the target feed, both signed", arguments: TestBackend.all)
    func moveShowsInBothFeeds(_ backend: TestBackend) async throws {
        try await withStore(backend) { h in
            let db = h.db
            let source = try await db.createZone(named: "Notes")
            _ = try await db.save(makeNote("a", in: source))
            var child = makeNote("b", in: source)
            child.parent = "a"
            _ = try await db.save(child)
            _ = try await db.save(makeNote("c", in: source))
            let sourceToken = try await db.changes(in: source, since: nil).token
            let share = try await h.alice.share(records: ["a"], in: source, intoZoneNamed: "Shared", title: "moved")
            let target = share.zoneID

            let gone = try await db.changes(in: source, since: sourceToken)
            #expect(gone.changed.isEmpty)
            #expect(gone.deleted.map(\.name) == ["a", "b"])
            #expect(gone.deleted.allSatisfy { $0.authorID == h.alice.userID && $0.transactionAuthor == "coffer.move" })
            #expect(gone.token.seq == 5)

            let arrived = try await db.changes(in: target, since: nil)
            #expect(arrived.changed.map(\.name) == ["a", "b"])
            #expect(arrived.changed.allSatisfy { $0.transactionAuthor == "coffer.move" && $0.modifierID == h.alice.userID })
            #expect(arrived.changed.first { $0.name == "b" }?.parent == "a")
            #expect(arrived.changed.first { $0.name == "a" }?.encryptedValues["body"] == .string("body of a"))
            #expect(arrived.deleted.isEmpty && arrived.refused.isEmpty)
            let (targetCommits, sourceCommits) = (try await h.commitCount(target), try await h.commitCount(source))
            #expect(targetCommits == 1 && sourceCommits == 4)
            #expect(try await h.fresh(h.alice).audit().findings.isEmpty)
            let databaseFeed = try await db.databaseChanges(since: nil)
            #expect(Set(databaseFeed.changed) == [source, target])
        }
    }

    @Test("a re-key is a signed commit: every re-sealed record shows once in the feed, at the new epoch", arguments: TestBackend.all)
    func rekeyShowsInFeed(_ backend: TestBackend) async throws {
        try await withStore(backend) { h in
            let db = h.db
            let zone = try await db.createZone(named: "Notes")
            let names = (0..<450).map { String(format: "r%03d", $0) }
            _ = try await db.modify(saving: names.prefix(400).map { makeNote($0, in: zone) }, in: zone)
            _ = try await db.modify(saving: names.dropFirst(400).map { makeNote($0, in: zone) }, in: zone)
            var plainOnly = CofferStore.Record(type: "Note", name: "plain-only", zone: zone)
            plainOnly.values["title"] = "no secrets"
            _ = try await db.save(plainOnly)
            let bob = try await h.user("Bob", "bob@example.com")
            try await h.share(zone, with: [(bob, .readOnly)])
            _ = try await h.alice.removeParticipant(bob.userID, from: zone) // rotates to epoch 2
            var token = try await db.changes(in: zone, since: nil).token
            while true { // catch up (451 records: more than one page)
                let page = try await db.changes(in: zone, since: token)
                token = page.token
                if !page.moreComing { break }
            }
            // The log: genesis (1), three commits (2-4), the share, Bob's invitation, his
            // acceptance and his removal (5-8).
            #expect(token.seq == 8 && token.name == nil)

            let count = try await h.alice.rekey(zone: zone)
            #expect(count == 450)
            #expect(try await h.commitCount(zone) == 5) // three commits and two rewrites of re-sealed records
            var seen = [CofferStore.Record]()
            var next: ChangeToken? = token
            repeat {
                let page = try await db.changes(in: zone, since: next, limit: 100)
                #expect(page.deleted.isEmpty && page.refused.isEmpty)
                seen += page.changed
                next = page.moreComing ? page.token : nil
            } while next != nil
            #expect(seen.count == 450)
            #expect(seen.map(\.name).sorted() == names)
            #expect(seen.allSatisfy { $0.keyEpoch == 2 && $0.transactionAuthor == "coffer.rekey" && $0.modifierID == h.alice.userID })
            #expect(Set(seen.compactMap(\.changeTag)) == ["9", "a"]) // two rewrites (400 + 50)
            #expect(seen.first { $0.name == "r123" }?.encryptedValues["body"] == .string("body of r123"))
            let report = try await h.fresh(h.alice).audit()
            #expect(report.findings.isEmpty, "\(report.findings)")
            #expect(report.records == 451)
            #expect(report.commits == 5)
        }
    }

    // MARK: - Database feeds: who is told what

    @Test("the owner's private feed lists a zone whose participant left (a share change), as it does when one accepts", arguments: TestBackend.all)
    func ownerFeedSeesParticipantLeave(_ backend: TestBackend) async throws {
        try await withStore(backend) { h in
            let zone = try await h.makeZone("Family", notes: ["n1"])
            let bob = try await h.user("Bob", "bob@example.com")
            _ = try await h.alice.share(zone: zone)
            let url = try await h.alice.addParticipant(bob.userID, permission: .readOnly, to: zone).url
            let beforeAccept = try await h.db.databaseChanges(since: nil).token
            _ = try await bob.acceptShare(url: url)
            let accepted = try await h.db.databaseChanges(since: beforeAccept)
            #expect(accepted.changed == [zone])
            try await bob.leaveShare(zone: zone)
            #expect(try await h.alice.fetchShare(in: zone).participants.first { $0.userID == bob.userID }?.left == true)
            let left = try await h.db.databaseChanges(since: accepted.token)
            #expect(left.changed == [zone], "the share changed (Bob left) but the owner's feed does not say so")
        }
    }

    @Test("an invitee who never accepted is not told that a zone they never saw went away", arguments: TestBackend.all, ["stop", "remove", "delete"])
    func pendingInviteeGetsNoDeletion(_ backend: TestBackend, _ action: String) async throws {
        try await withStore(backend) { h in
            let zone = try await h.makeZone("Family", notes: ["n1"])
            let bob = try await h.user("Bob", "bob@example.com")
            _ = try await h.alice.share(zone: zone)
            _ = try await h.alice.addParticipant(bob.userID, permission: .readOnly, to: zone)
            let start = try await bob.sharedDatabase.databaseChanges(since: nil)
            #expect(start.changed.isEmpty && start.deleted.isEmpty)
            switch action {
            case "stop": try await h.alice.stopSharing(zone: zone)
            case "remove": _ = try await h.alice.removeParticipant(bob.userID, from: zone)
            default: try await h.db.deleteZone(zone)
            }
            let after = try await bob.sharedDatabase.databaseChanges(since: start.token)
            #expect(after.changed.isEmpty)
            #expect(after.deleted.isEmpty, "Bob never accepted, yet his shared feed says: \(after.deleted)")
        }
    }

    @Test("a participant who left is not told a second time that the zone went away", arguments: TestBackend.all, ["stop", "delete"])
    func leftParticipantNotToldAgain(_ backend: TestBackend, _ action: String) async throws {
        try await withStore(backend) { h in
            let zone = try await h.makeZone("Family", notes: ["n1"])
            let carol = try await h.user("Carol", "carol@example.com")
            try await h.share(zone, with: [(carol, .readOnly)])
            try await carol.leaveShare(zone: zone)
            let left = try await carol.sharedDatabase.databaseChanges(since: nil)
            #expect(left.deleted == [DeletedZone(zoneID: zone, reason: "left")])
            if action == "stop" { try await h.alice.stopSharing(zone: zone) } else { try await h.db.deleteZone(zone) }
            let after = try await carol.sharedDatabase.databaseChanges(since: left.token)
            #expect(after.changed.isEmpty)
            #expect(after.deleted.isEmpty, "Carol had left already, yet her shared feed now says: \(after.deleted)")
        }
    }
}

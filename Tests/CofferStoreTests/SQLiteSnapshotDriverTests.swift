import CofferCrypto
import CofferTestSupport
import CofferVault
import CofferStoreTestSupport
import Foundation
import GRDB
import Testing
@testable import CofferStore

/// How a test's operations reach the SQLite file: the store opened on it, or a
/// ``SQLiteSnapshotDriver`` over that store's connections (what a Coffer server serving the file runs).
enum DriverAccess: String, Sendable, CustomTestStringConvertible {
    case file
    case driver

    var testDescription: String { rawValue }
}

/// How the driver tests reach the file besides their operations.
extension TestStore {
    /// A session of the same user on the file itself (a store object of its own), with nothing cached.
    func onFile(_ session: Session) async throws -> Session { try await Store(path: path).openSession(vault: session.vault) }

    /// Another store object on the file (its own connections) reached through a driver of its
    /// own: another server process on the same file.
    func otherDriverStore() throws -> Store { try Store(snapshotOver: try Store(path: path).dbPool) }

    /// The row ids of the file's zones, by name.
    func zoneRowIDs() throws -> [String: Int64] {
        try sqlite { db in
            var ids = [String: Int64]()
            for row in try Row.fetchAll(db, sql: "SELECT name, id FROM zone") {
                let name: String = row[0], id: Int64 = row[1]
                ids[name] = id
            }
            return ids
        }
    }
}

/// Runs `body` with a fresh SQLite store (``withStore(_:_:)``), Alice acting on it as `access`
/// says: on the file, or through a driver over the file's connections.
func withDriverStore<R>(_ access: DriverAccess, _ body: (TestStore) async throws -> R) async throws -> R {
    try await withStore(.sqlite) { f in
        try await body(access == .file ? f : try await f.reached(through: try Store(snapshotOver: f.store.dbPool)))
    }
}

/// The engine on an SQLite file through ``SQLiteSnapshotDriver``: each scenario runs once on the
/// file and once through the driver, and must see the same; afterwards the file, read directly
/// by a fresh session, must audit clean (the driver kept the rows and the SQLite-only caches as
/// the engine's SQLite path keeps them).
@Suite("SQLite snapshot driver")
struct SQLiteSnapshotDriverTests {
    // MARK: - Helpers

    static func note(_ zone: ZoneID, _ name: String, title: String, body: String, parent: String? = nil) -> CofferStore.Record {
        var record = CofferStore.Record(type: "Note", name: name, zone: zone, parent: parent)
        record.values["title"] = .string(title)
        record.encryptedValues["body"] = .string(body)
        return record
    }

    /// What `body` came to: "ok", or the code of the store error it threw.
    static func outcome<T>(_ body: () async throws -> T) async -> String {
        do {
            _ = try await body()
            return "ok"
        } catch let error as StoreError {
            return "\(error.code)"
        } catch {
            return "\(type(of: error))"
        }
    }

    /// What `body` came to, as a value.
    static func result<T>(_ body: () async throws -> T) async -> Result<T, any Error> {
        do { return .success(try await body()) } catch { return .failure(error) }
    }

    static func describe(_ record: CofferStore.Record) -> String {
        "\(record.name)[\(record.parent ?? "-")] title=\(record.values["title"]?.stringValue ?? "-") body=\(noteBody(record) ?? "-")"
    }

    /// Runs `scenario` on the file and through the driver; both must tell the same, and the
    /// file must audit clean after the driver's run, through the driver and read directly.
    static func sameOnFileAndDriver(_ scenario: (TestStore) async throws -> [String],
                                    sourceLocation: SourceLocation = #_sourceLocation) async throws {
        let onFile = try await withDriverStore(.file, scenario)
        let throughDriver = try await withDriverStore(.driver) { f in
            let told = try await scenario(f)
            let viaDriver = try await f.fresh(f.alice).audit()
            #expect(viaDriver.findings.isEmpty, "audit through the driver: \(viaDriver.findings)", sourceLocation: sourceLocation)
            let direct = try await f.onFile(f.alice).audit()
            #expect(direct.findings.isEmpty, "audit of the file: \(direct.findings)", sourceLocation: sourceLocation)
            #expect(direct.zones == viaDriver.zones && direct.records == viaDriver.records && direct.commits == viaDriver.commits,
                    sourceLocation: sourceLocation)
            return told
        }
        #expect(!onFile.isEmpty)
        #expect(throughDriver == onFile, sourceLocation: sourceLocation)
        for (a, b) in zip(onFile, throughDriver) where a != b {
            Issue.record("first difference: file '\(a)', driver '\(b)'", sourceLocation: sourceLocation)
            break
        }
    }

    // MARK: - The same results

    static func records(_ f: TestStore) async throws -> [String] {
        var t = [String]()
        let db = f.alice.privateDatabase
        let notes = try await db.createZone(named: "Notes")
        let tree = try await db.createZone(named: "Tree")
        let first = try await db.save(note(notes, "n1", title: "v1", body: "one"))
        #expect(first.changeTag != nil && first.creatorID == f.alice.userID)
        var edit = first
        edit.values["title"] = .string("v2")
        let second = try await db.save(edit)
        #expect(second.changeTag != first.changeTag && second.created == first.created)
        var stale = first
        stale.values["title"] = .string("lost")
        let conflict = await expectStoreError(.serverRecordChanged) { try await db.save(stale) }
        #expect(conflict?.serverRecord?.values["title"] == .string("v2"))
        t.append("stale save: \(conflict.map { "\($0.code) \($0.serverRecord?.values["title"]?.stringValue ?? "-")" } ?? "none")")

        // Parents: a missing one, a chain in one batch, a cycle, a parent with children.
        t.append("orphan: " + (await outcome { try await db.save(note(tree, "orphan", title: "o", body: "o", parent: "nobody")) }))
        _ = try await db.modify(saving: [note(tree, "root", title: "r", body: "r"), note(tree, "child", title: "c", body: "c", parent: "root"),
                                         note(tree, "grandchild", title: "g", body: "g", parent: "child")], in: tree)
        var root = try await db.record(named: "root", in: tree)
        root.parent = "grandchild"
        t.append("cycle: " + (await outcome { try await db.save(root) }))
        t.append("delete a parent: " + (await outcome { try await db.delete(recordNamed: "child", in: tree) }))
        var moved = try await db.record(named: "grandchild", in: tree)
        moved.parent = "root"
        _ = try await db.save(moved)
        t.append("move: \(try await db.records(in: tree).map(describe))")

        // Batches: atomic, with deletions.
        let batch = (0..<12).map { note(notes, "b\($0)", title: "t\($0)", body: "b\($0)") } + [note(notes, "n1", title: "again", body: "x")]
        let partial = await expectStoreError(.partialFailure) { try await db.modify(saving: batch, in: notes) }
        t.append("partial: \(partial?.partialErrors.keys.sorted() ?? [])")
        let done = try await db.modify(saving: Array(batch.dropLast()), deleting: [RecordDeletion(name: "n1", ifMatch: second.changeTag)], in: notes)
        t.append("modify: saved \(done.saved.map(\.name)) deleted \(done.deleted)")
        t.append("deleted read: " + (await outcome { try await db.record(named: "n1", in: notes) }))
        let found = try await db.records(named: ["b3", "n1", "zz"], in: notes)
        t.append("named: \(found.keys.sorted().map { name in "\(name)=\((try? found[name]!.get()).map(describe) ?? "missing")" })")
        await expectStoreError(.serverRecordChanged) { try await db.delete(recordNamed: "b3", in: notes, ifMatch: first.changeTag) }
        try await db.delete(recordNamed: "b3", in: notes)

        // Pages in byte order of names.
        var seen = [String](), after: String?
        while let page = Optional(try await db.records(in: notes, after: after, limit: 5)), let last = page.last {
            seen += page.map(\.name)
            after = last.name
        }
        t.append("pages: \(seen)")
        t.append("zones: \(try await db.zones().map { "\($0.id.name) records=\($0.recordCount) epoch=\($0.keyEpoch) seq=\($0.sequence)" })")

        // A deleted zone is gone, its name free again.
        try await db.deleteZone(notes)
        t.append("gone zone: " + (await outcome { try await db.record(named: "b1", in: notes) }))
        let again = try await db.createZone(named: "Notes")
        _ = try await db.save(note(again, "fresh", title: "f", body: "f"))
        t.append("again: \(try await db.records(in: again).map(describe))")
        t.append("twice: " + (await outcome { try await db.createZone(named: "Notes") }))

        // Another session reads and verifies it all again.
        let fresh = try await f.fresh(f.alice).privateDatabase
        t.append("fresh zones: \(try await fresh.zones().map { "\($0.id.name) records=\($0.recordCount) seq=\($0.sequence)" })")
        t.append("fresh tree: \(try await fresh.records(in: tree).map(describe))")
        return t
    }

    @Test("records: saves, change tags, parents, batches, pages and zones give what they give on the file")
    func sameRecords() async throws { try await Self.sameOnFileAndDriver(Self.records) }

    static func queries(_ f: TestStore) async throws -> [String] {
        var t = [String]()
        let db = f.alice.privateDatabase
        let zone = try await db.createZone(named: "Items")
        let items = (0..<30).map { i in
            makeRecord("Item", String(format: "i%02d", i), in: zone,
                       plain: ["v": .int(Int64(i % 7)), "tag": .string(["apple", "apricot", "banana", "cherry"][i % 4])],
                       encrypted: ["secret": .string("s\(i)")])
        }
        _ = try await db.modify(saving: items, in: zone)
        _ = try await db.save(makeRecord("Other", "o1", in: zone, plain: ["v": .int(3)]))
        func names(_ query: Query) async throws -> [String] { recordNames(try await db.query(query, in: zone).records) }
        t.append("v=3: \(try await names(Query(recordType: "Item", predicates: [.init("v", .equal, 3)])))")
        t.append("v>=5 by v desc: \(try await names(Query(recordType: "Item", predicates: [.init("v", .greaterThanOrEqual, 5)], sort: [.init("v", ascending: false)])))")
        t.append("ap*: \(try await names(Query(recordType: "Item", predicates: [.init("tag", .beginsWith, "ap")], sort: [.init("tag", ascending: true)])))")
        t.append("two keys: \(try await names(Query(recordType: "Item", predicates: [.init("v", .lessThan, 3), .init("tag", .notEqual, "banana")], sort: [.init("tag", ascending: false), .init("v", ascending: true)])))")
        t.append("encrypted: " + (await outcome { try await db.query(Query(recordType: "Item", predicates: [.init("secret", .equal, "s1")]), in: zone) }))
        t.append("unknown field: " + (await outcome { try await db.query(Query(recordType: "Item", predicates: [.init("nope", .equal, 1)]), in: zone) }))
        // Pages through cursors: every match once, in order.
        for limit in [1, 4, 7, 30] {
            let query = Query(recordType: "Item", predicates: [.init("v", .greaterThan, 1)], sort: [.init("tag", ascending: true), .init("v", ascending: false)], limit: limit)
            var cursor: QueryCursor?, pages = [[String]]()
            repeat {
                let page = try await db.query(query, in: zone, cursor: cursor)
                #expect(page.refused.isEmpty)
                pages.append(recordNames(page.records))
                cursor = try page.cursor.map { try QueryCursor(token: $0.token) }
            } while cursor != nil && pages.count < 40
            let all = pages.flatMap { $0 }
            #expect(all.count == Set(all).count && all.count == 20) // v is i % 7: ten of the thirty are 0 or 1
            t.append("limit \(limit): \(pages)")
        }
        t.append("decoy type: \(try await names(Query(recordType: "Other", predicates: [.init("v", .equal, 3)])))")
        return t
    }

    @Test("queries: filters, sorts and cursor pages give what they give on the file")
    func sameQueries() async throws { try await Self.sameOnFileAndDriver(Self.queries) }

    static func changeFeeds(_ f: TestStore) async throws -> [String] {
        var t = [String]()
        let db = f.alice.privateDatabase
        let start = try await db.databaseChanges(since: nil)
        let a = try await db.createZone(named: "A")
        let b = try await db.createZone(named: "B")
        _ = try await db.modify(saving: (0..<6).map { note(a, "r\($0)", title: "t", body: "b") }, in: a)
        let mark = try await db.changes(in: a, since: nil)
        t.append("from nil: \(mark.changed.map(\.name)) deleted \(mark.deleted.map(\.name)) more=\(mark.moreComing)")
        try await db.delete(recordNamed: "r1", in: a)
        var r3 = try await db.record(named: "r3", in: a)
        r3.values["title"] = "edited"
        _ = try await db.save(r3)
        _ = try await db.modify(saving: [note(a, "r9", title: "new", body: "b"), note(a, "r1", title: "back", body: "b")],
                                deleting: [RecordDeletion(name: "r4"), RecordDeletion(name: "r5")], in: a)
        var token = mark.token, pages = [String]()
        while true {
            let page = try await db.changes(in: a, since: token, limit: 2)
            #expect(page.refused.isEmpty)
            pages.append("\(page.changed.map { "\($0.name):\($0.values["title"]?.stringValue ?? "-")" }) -\(page.deleted.map(\.name))")
            token = page.token
            if !page.moreComing { break }
        }
        t.append("pages: \(pages)")
        #expect(try await db.changes(in: a, since: token).changed.isEmpty)
        let all = try await f.fresh(f.alice).privateDatabase.changes(in: a, since: nil)
        t.append("fresh from nil: \(all.changed.map(\.name).sorted()) deleted \(all.deleted.map(\.name).sorted())")
        t.append("compacted: \(try await db.compactHistory(of: a, through: token.seq))")
        t.append("expired: " + (await outcome { try await db.changes(in: a, since: mark.token) }))

        // The database feed: zones created, changed, deleted.
        let p1 = try await db.databaseChanges(since: start.token)
        t.append("db p1: \(p1.changed.map(\.name)) deleted \(p1.deleted.map(\.zoneID.name))")
        _ = try await db.save(note(b, "n", title: "t", body: "b"))
        let c = try await db.createZone(named: "C")
        try await db.deleteZone(a)
        let p2 = try await db.databaseChanges(since: p1.token)
        t.append("db p2: \(p2.changed.map(\.name)) deleted \(p2.deleted.map { "\($0.zoneID.name):\($0.reason)" })")
        #expect(p2.changed == [b, c])
        let quiet = try await db.databaseChanges(since: p2.token)
        t.append("db quiet: \(quiet.changed.count) \(quiet.deleted.count) same token=\(quiet.token == p2.token)")
        let fromNil = try await db.databaseChanges(since: nil)
        t.append("db from nil: \(fromNil.changed.map(\.name)) deleted \(fromNil.deleted.map(\.zoneID.name))")
        return t
    }

    @Test("change feeds: a zone's changes and deletions in pages, compaction, the database feed, as on the file")
    func sameChangeFeeds() async throws { try await Self.sameOnFileAndDriver(Self.changeFeeds) }

    static func shares(_ f: TestStore) async throws -> [String] {
        var t = [String]()
        let alice = f.alice
        let bob = try await f.user("Bob", "bob@example.com")
        let carol = try await f.user("Carol", "carol@example.com")
        var who = [alice.userID: "alice", bob.userID: "bob", carol.userID: "carol"]
        func people(_ share: Share) -> [String] {
            // By name: the share lists participants by user id, which differ from run to run.
            share.participants.map { "\(who[$0.userID] ?? "?"):\($0.role):\($0.permission):\($0.status)\($0.left ? ":left" : "")" }.sorted()
        }
        let zone = try await alice.privateDatabase.createZone(named: "Family")
        for name in ["n1", "n2"] { _ = try await alice.privateDatabase.save(makeNote(name, in: zone)) }
        let share = try await alice.share(zone: zone, title: "Family notes")
        _ = try await alice.addParticipant("bob@example.com", permission: .readWrite, to: zone)
        let invited = try await alice.addParticipant(carol.userID, permission: .readOnly, to: zone)
        t.append("invited: \(people(invited)) epoch \(invited.keyEpoch)")
        let carolStart = try await carol.sharedDatabase.databaseChanges(since: nil)
        let bobAccepted = try await bob.acceptShare(url: share.url)
        _ = try await carol.acceptShare(url: share.url)
        t.append("bob accepted: \(bobAccepted.title) \(bobAccepted.zoneID == zone)")
        let carolFeed = try await carol.sharedDatabase.databaseChanges(since: carolStart.token)
        t.append("carol's feed: \(carolFeed.changed.map(\.name))")
        t.append("bob reads: \(try await bob.sharedDatabase.records(in: zone).map(describe))")
        let bobs = try await bob.sharedDatabase.save(makeNote("n3", in: zone, body: "from bob"))
        #expect(bobs.creatorID == bob.userID)
        let n3 = try await alice.privateDatabase.record(named: "n3", in: zone)
        t.append("alice reads bob's: \(describe(n3)) by \(who[n3.creatorID ?? ""] ?? "?")")
        t.append("carol writes: " + (await outcome { try await carol.sharedDatabase.save(makeNote("n4", in: zone)) }))
        t.append("shared zones: \(try await bob.sharedDatabase.zones().map { "\($0.id.name) records=\($0.recordCount)" })")
        let carolToken = try await carol.sharedDatabase.databaseChanges(since: nil).token

        // Removing Carol rotates the key: she reads nothing more; Bob reads on.
        let removed = try await alice.removeParticipant(carol.userID, from: zone)
        t.append("removed: \(people(removed)) epoch \(removed.keyEpoch)")
        t.append("carol reads: " + (await outcome { try await carol.sharedDatabase.records(in: zone) }))
        let gone = try await carol.sharedDatabase.databaseChanges(since: carolToken)
        t.append("carol's feed: \(gone.changed.map(\.name)) deleted \(gone.deleted.map { "\($0.zoneID.name):\($0.reason)" })")
        _ = try await bob.sharedDatabase.save(makeNote("n5", in: zone, body: "after the rotation"))
        t.append("bob reads: \(try await bob.sharedDatabase.records(in: zone).map { "\($0.name)@\($0.keyEpoch ?? 0)" })")

        // A re-key seals every record under a new key; a fresh session of Bob's still reads all.
        let resealed = try await alice.rekey(zone: zone)
        t.append("rekey: \(resealed) records, epoch \(try await alice.fetchShare(in: zone).keyEpoch)")
        let freshBob = try await f.fresh(bob)
        t.append("fresh bob reads: \(try await freshBob.sharedDatabase.records(in: zone).map { "\(describe($0))@\($0.keyEpoch ?? 0)" })")
        t.append("chain and keys: \(try f.sqlite { db in try Int.fetchOne(db, sql: "SELECT count(*) FROM zone_key_chain") ?? -1 })")

        // The public link, leaving, and stopping.
        let open = try await alice.setPublicPermission(.readOnly, in: zone)
        let dave = try await f.user("Dave", "dave@example.com")
        who[dave.userID] = "dave"
        let joined = try await dave.acceptShare(url: open.url)
        t.append("dave joined: \(joined.zoneID == zone) reads \(try await dave.sharedDatabase.records(in: zone).count)")
        try await bob.leaveShare(zone: zone)
        t.append("after bob left: \(people(try await alice.fetchShare(in: zone)))")
        try await alice.stopSharing(zone: zone)
        t.append("stopped: shared=\(try await alice.isShared(zone)) dave reads " + (await outcome { try await dave.sharedDatabase.records(in: zone) }))
        t.append("alice reads: \(try await f.fresh(alice).privateDatabase.records(in: zone).map(describe))")
        return t
    }

    @Test("shares: invite, accept from a second user's session, write as a participant, remove with key rotation, re-key, link, leave, stop")
    func sameShares() async throws { try await Self.sameOnFileAndDriver(Self.shares) }

    static func contacts(_ f: TestStore) async throws -> [String] {
        var t = [String]()
        let bobVault = try makeVault(in: f.folder, name: "Bob Builder", email: "Bob@Example.com")
        let card = ContactCard(vault: bobVault)
        t.append("add: \(try await f.store.addContact(card))")
        t.append("again: \(try await f.store.addContact(card))")
        let newer = ContactCard(vault: bobVault, created: Date().addingTimeInterval(60))
        t.append("newer: \(try await f.store.addContact(newer))")
        t.append("older: \(try await f.store.addContact(card))")
        t.append("all: \(try await f.store.contacts().map(\.name).sorted())")
        let bob = try await f.store.contact(matching: "bob@example.com")
        #expect(bob.userID == bobVault.identity.userID)
        t.append("by email, any case: \(bob.name)")
        t.append("by id: \(try await f.store.contact(matching: bobVault.identity.userID).name)")
        t.append("unknown: " + (await outcome { try await f.store.contact(matching: "nobody@example.com") }))
        // A contact Alice pinned is whom a zone is shared with by email.
        try f.alice.vault.pin(newer)
        let zone = try await f.alice.privateDatabase.createZone(named: "Z")
        _ = try await f.alice.share(zone: zone)
        let share = try await f.alice.addParticipant("bob@example.com", permission: .readOnly, to: zone)
        t.append("shared with: \(share.participants.map { $0.name ?? "-" })")
        return t
    }

    @Test("contacts: add, update, search without case, as on the file")
    func sameContacts() async throws { try await Self.sameOnFileAndDriver(Self.contacts) }

    // MARK: - Racing writers

    @Test("two store objects, each through its own driver, save one record with the same change tag: exactly one wins")
    func exactConflicts() async throws {
        try await withDriverStore(.driver) { f in
            let zone = try await f.alice.privateDatabase.createZone(named: "Contested")
            let other = try f.otherDriverStore()
            let second = try await other.openSession(vault: f.alice.vault)
            var current = try await f.alice.privateDatabase.save(Self.note(zone, "r", title: "start", body: "0"))
            for round in 0..<10 {
                var mine = current, theirs = current
                mine.values["title"] = .string("a\(round)")
                theirs.values["title"] = .string("b\(round)")
                let first = mine, other = theirs
                async let a = Self.result { try await f.alice.privateDatabase.save(first) }
                async let b = Self.result { try await second.privateDatabase.save(other) }
                let results = await [a, b]
                let won = results.compactMap { try? $0.get() }
                #expect(won.count == 1, "round \(round): \(results)")
                for case .failure(let error) in results {
                    let storeError = try #require(error as? StoreError)
                    #expect(storeError.code == .serverRecordChanged)
                    #expect(storeError.serverRecord?.values["title"] == won.first?.values["title"])
                }
                current = try #require(won.first)
            }
            let read = try await f.onFile(f.alice).privateDatabase.record(named: "r", in: zone)
            #expect(read.changeTag == current.changeTag)
            #expect(try await f.onFile(f.alice).audit().findings.isEmpty)
        }
    }

    @Test("two drivers on one file commit to one zone at once: every batch lands, the log stays one chain")
    func headRace() async throws {
        try await withDriverStore(.driver) { f in
            let zone = try await f.alice.privateDatabase.createZone(named: "Busy")
            let other = try f.otherDriverStore()
            let second = try await other.openSession(vault: f.alice.vault)
            try await withThrowingTaskGroup(of: Void.self) { group in
                for (label, session) in [("a", f.alice), ("b", second)] {
                    group.addTask {
                        for batch in 0..<10 {
                            let records = (0..<4).map { Self.note(zone, "\(label)-\(batch)-\($0)", title: label, body: "\(batch)") }
                            _ = try await session.privateDatabase.modify(saving: records, in: zone)
                        }
                    }
                }
                try await group.waitForAll()
            }
            let direct = try await f.onFile(f.alice)
            #expect(try await direct.privateDatabase.records(in: zone).count == 2 * 10 * 4)
            #expect(try await direct.privateDatabase.zones().first?.sequence == 1 + 2 * 10) // the genesis and one entry a batch
            #expect(try await direct.audit().findings.isEmpty)
        }
    }

    @Test("two drivers create zones at once: each gets an id of its own, and no id of a deleted zone is used again")
    func zoneIDs() async throws {
        try await withDriverStore(.driver) { f in
            let gone = try await f.alice.privateDatabase.createZone(named: "Gone")
            let goneID = try #require(try f.zoneRowIDs()["Gone"])
            try await f.alice.privateDatabase.deleteZone(gone)
            let other = try f.otherDriverStore()
            let second = try await other.openSession(vault: f.alice.vault)
            try await withThrowingTaskGroup(of: Void.self) { group in
                for (label, session) in [("a", f.alice), ("b", second)] {
                    group.addTask { for i in 0..<5 { _ = try await session.privateDatabase.createZone(named: "\(label)\(i)") } }
                }
                try await group.waitForAll()
            }
            let ids = try f.zoneRowIDs()
            #expect(ids.count == 10)
            #expect(Set(ids.values).count == 10)
            #expect(ids.values.allSatisfy { $0 > goneID })
            // The file's own inserts go on after the driver's ids.
            _ = try await f.onFile(f.alice).privateDatabase.createZone(named: "direct")
            #expect(try f.zoneRowIDs()["direct"] == (ids.values.max() ?? 0) + 1)
            #expect(try await f.onFile(f.alice).audit().findings.isEmpty)
        }
    }

    @Test("a change stream through the driver yields a save made on the file by another session")
    func stream() async throws {
        try await withDriverStore(.driver) { f in
            let zone = try await f.alice.privateDatabase.createZone(named: "Live")
            let caughtUp = try await f.alice.privateDatabase.changes(in: zone, since: nil).token
            let stream = f.alice.privateDatabase.changeStream(in: zone, since: caughtUp, pollInterval: .milliseconds(50))
            let direct = try await f.onFile(f.alice).privateDatabase
            let writer = Task {
                try await Task.sleep(for: .milliseconds(200)) // the stream has polled a few times by now
                return try await direct.save(Self.note(zone, "remote", title: "from the file", body: "b"))
            }
            var first: ZoneChanges?
            for try await page in stream {
                first = page
                break
            }
            let page = try #require(first)
            let saved = try await writer.value
            #expect(page.changed.map(\.name) == ["remote"])
            #expect(page.changed.first?.changeTag == saved.changeTag)
            #expect(page.changed.first?.encryptedValues["body"] == .string("b"))
        }
    }

    // MARK: - The driver's own rules

    @Test("a fetch reads every need of one state; a zone that moved on since drops what was read before")
    func movedZoneDropsReads() async throws {
        try await withDriverStore(.file) { f in
            let zone = try await f.alice.privateDatabase.createZone(named: "Z")
            _ = try await f.alice.privateDatabase.save(Self.note(zone, "n1", title: "t", body: "b"))
            let driver = SQLiteSnapshotDriver(storage: try f.store.sqliteStorage(for: "a test"), logger: Vault.disabledLogger)
            #expect(driver.storeDescription == "the SQLite store at \(f.path)")
            let snapshot = StorageSnapshot(writable: true)
            let a = ZoneID(name: "New1", ownerID: f.alice.userID), b = ZoneID(name: "New2", ownerID: f.alice.userID)
            try await driver.fetch([.zone(zone), .newZoneID(a), .newZoneID(b), .contact(f.alice.userID), .contact("nobody")], into: snapshot)
            let row = try #require(snapshot.fetched.zones[zone] ?? nil)
            #expect(row.logFormat == 1)
            #expect(snapshot.fetched.heads[row.rowID]??.seq == 2)
            #expect(snapshot.fetched.wrappedKeys[row.rowID]?[1]?[f.alice.userID] != nil)
            #expect(snapshot.fetched.schemaRows[row.rowID]?["Note"]?.map(\.field).sorted() == ["body", "title"])
            #expect(snapshot.fetched.zoneDetails.contains(row.rowID))
            #expect(snapshot.fetched.tombstoneFlags[row.rowID] == false)
            #expect(snapshot.fetched.shareLinks[row.rowID] != nil && snapshot.fetched.shareLinks[row.rowID]! == nil)
            let ids = [snapshot.fetched.newZoneIDs[a], snapshot.fetched.newZoneIDs[b]].compactMap { $0 }
            #expect(ids.count == 2 && Set(ids).count == 2 && ids.allSatisfy { $0 > row.rowID })
            #expect(snapshot.fetched.contacts[f.alice.userID]??.card.isEmpty == false)
            #expect(snapshot.fetched.contacts["nobody"] != nil && snapshot.fetched.contacts["nobody"]! == nil)

            // A log read brings its authors' cards along.
            let logs = StorageSnapshot(writable: false)
            try await driver.fetch([.log(zoneRowID: row.rowID, after: 0)], into: logs)
            #expect(logs.fetched.logs[row.rowID]?.entries.map(\.seq) == [1, 2])
            #expect(logs.fetched.contacts[f.alice.userID] != nil)

            // Unchanged: a second fetch adds to the first.
            try await driver.fetch([.counter], into: snapshot)
            #expect(snapshot.fetched.zones[zone] != nil && snapshot.fetched.counter != nil)
            // Another commit moves the zone on: what was read of it goes, the cards stay.
            _ = try await f.alice.privateDatabase.save(Self.note(zone, "n2", title: "t", body: "b"))
            try await driver.fetch([.records(zoneRowID: row.rowID, names: ["n1", "n9"])], into: snapshot)
            #expect(snapshot.fetched.zones[zone] == nil)
            #expect(snapshot.fetched.heads[row.rowID] == nil)
            #expect(snapshot.fetched.newZoneIDs.isEmpty)
            #expect(snapshot.fetched.contacts[f.alice.userID] != nil)
            #expect(snapshot.fetched.records[row.rowID]?["n1"]??.name == "n1")
            #expect(snapshot.fetched.records[row.rowID]?["n9"] != nil && snapshot.fetched.records[row.rowID]!["n9"]! == nil)
        }
    }

    @Test("a write against a log head or a row that moved on, or onto a taken id, is a conflict and writes nothing")
    func conflicts() async throws {
        try await withDriverStore(.file) { f in
            let zone = try await f.alice.privateDatabase.createZone(named: "Z")
            let saved = try await f.alice.privateDatabase.save(Self.note(zone, "n1", title: "t", body: "b"))
            let driver = SQLiteSnapshotDriver(storage: try f.store.sqliteStorage(for: "a test"), logger: Vault.disabledLogger)
            let rowID = try #require(try f.zoneRowIDs()["Z"])
            let counter: () async throws -> Int64 = { try await f.store.dbPool.read { db in try SQLiteTransaction(db).databaseCounter().current } }
            let before = try await counter()
            // Entry 3: the log has no entry 3, so the head check alone refuses it.
            let entry = LogEntry(zoneUID: [UInt8](repeating: 0, count: 16), seq: 3, prev: .zero, kind: .commit, authorID: f.alice.userID,
                                 time: 0, payload: [])
            // The zone's head is 2 now: a run that extended 1 came too late.
            await #expect(throws: SnapshotConflict.self) {
                try await driver.apply([.touchZone(rowID: rowID),
                                        .appendLog(zoneRowID: rowID, head: 1, entry: entry, body: [1], signature: [UInt8](repeating: 0, count: 64),
                                                   hash: .zero, entries: nil, names: nil)], operation: nil)
            }
            #expect(try await counter() == before, "nothing of the batch was written")
            // A row that is not at the sequence read.
            await #expect(throws: SnapshotConflict.self) {
                try await driver.apply([.touchZone(rowID: rowID), .deleteRecord(zoneRowID: rowID, name: "n1", storedSeq: 1)], operation: nil)
            }
            await #expect(throws: SnapshotConflict.self) { try await driver.apply([.deleteRecord(zoneRowID: rowID, name: "gone", storedSeq: 2)], operation: nil) }
            #expect(try await counter() == before)
            #expect(try await f.alice.privateDatabase.record(named: "n1", in: zone).changeTag == saved.changeTag)
            // A key that another writer stored first (a unique violation).
            await #expect(throws: SnapshotConflict.self) {
                try await driver.apply([.wrappedKey(zoneRowID: rowID, epoch: 1, memberID: f.alice.userID, wrapped: [1, 2, 3])], operation: nil)
            }
            // An id reserved, then taken by another writer's zone (even one deleted since).
            let snapshot = StorageSnapshot(writable: true)
            let id = ZoneID(name: "Late", ownerID: f.alice.userID)
            try await driver.fetch([.newZoneID(id)], into: snapshot)
            let reserved = try #require(snapshot.fetched.newZoneIDs[id])
            try await f.alice.privateDatabase.deleteZone(try await f.alice.privateDatabase.createZone(named: "Between"))
            await #expect(throws: SnapshotConflict.self) {
                try await driver.apply([.insertZone(rowID: reserved, uid: [UInt8](repeating: 7, count: 16), id: id, created: 0)], operation: nil)
            }
            #expect(try f.zoneRowIDs()["Late"] == nil)
            #expect(try await f.onFile(f.alice).audit().findings.isEmpty)
        }
    }

    @Test("a store over a pool that is not a Coffer store is refused")
    func notAStore() async throws {
        let folder = try makeTemporaryFolder(prefix: "coffer-driver-tests")
        defer { try? FileManager.default.removeItem(at: folder) }
        let pool = try DatabasePool(path: folder.appendingPathComponent("empty.sqlite").path)
        #expect(throws: StoreError.self) { try Store(snapshotOver: pool) }
    }
}

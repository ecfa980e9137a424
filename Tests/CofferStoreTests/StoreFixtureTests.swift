import CofferCrypto
import CofferTestSupport
import CofferVault
import CofferStoreTestSupport
import Foundation
import GRDB
import Testing
@testable import CofferStore

/// Stores of earlier formats committed in `Keys/`, with the vault fixtures that act in them
/// (throwaway passphrases, see `Keys/README.md`). Each is opened from a temporary copy and must
/// show the records recorded when it was made: a change that breaks existing stores fails here.
@Suite("Store fixtures in Keys/")
struct StoreFixtureTests {
    static let keysFolder = URL(fileURLWithPath: #filePath)
        .deletingLastPathComponent() // CofferStoreTests
        .deletingLastPathComponent() // Tests
        .deletingLastPathComponent() // package root
        .appendingPathComponent("Keys", isDirectory: true)

    /// The store of migration v5 (`v5-commit-names`): made by the code of that format.
    static let v5 = "store-v5.sqlite"
    /// The store of migration v6 (`v6-zone-log`): the same users and records, with a zone log.
    static let v6 = "store-v6.sqlite"
    /// The store of migration v7 (`v7-log-head-index`): as v6, with the log head index.
    static let v7 = "store-v7.sqlite"
    static let alicePassphrase = "throwaway fixture passphrase v1-min"
    static let bobPassphrase = "throwaway fixture passphrase v1-interactive"

    /// What the v5 fixture holds, by zone: record name → (plain title, encrypted body, creator).
    /// TestStore Alice owns Notes (shared read-write with TestStore Bob, who accepted and wrote b1;
    /// TestStore Carol was added read-only, accepted, and removed, so Notes is at key epoch 2 with
    /// n1 and b1 still sealed under epoch 1; n2 was deleted) and Private (unshared); TestStore Bob
    /// owns Bobs (unshared).
    struct Expected: Sendable {
        let title: String
        let body: String
        let creator: String // "alice" or "bob"
        let epoch: Int64
    }

    static let notes: [String: Expected] = [
        "n1": Expected(title: "First note", body: "fixture body one", creator: "alice", epoch: 1),
        "b1": Expected(title: "From Bob", body: "written by bob", creator: "bob", epoch: 1),
        "n3": Expected(title: "After the rotation", body: "fixture body three", creator: "alice", epoch: 2),
    ]
    static let privateRecords: [String: Expected] = [
        "p1": Expected(title: "Private", body: "fixture private secret", creator: "alice", epoch: 1),
    ]
    static let bobRecords: [String: Expected] = [
        "x1": Expected(title: "Bob's own", body: "bob private secret", creator: "bob", epoch: 1),
    ]

    struct Opened {
        let folder: URL
        let store: Store
        let alice: Vault
        let bob: Vault
    }

    /// A temporary copy of a store fixture and of the vault fixtures that act in it.
    static func withCopy<R>(_ file: String, _ body: (Opened) async throws -> R) async throws -> R {
        try await withTemporaryFolder { folder async throws in
            for name in [file, "vault-v1-min.coffer", "vault-v1-interactive.coffer"] {
                try FileManager.default.copyItem(at: keysFolder.appendingPathComponent(name), to: folder.appendingPathComponent(name))
            }
            let alice = try Vault.open(at: folder.appendingPathComponent("vault-v1-min.coffer"), passphrase: secure(alicePassphrase))
            let bob = try Vault.open(at: folder.appendingPathComponent("vault-v1-interactive.coffer"), passphrase: secure(bobPassphrase))
            let store = try Store(path: folder.appendingPathComponent(file).path)
            return try await body(Opened(folder: folder, store: store, alice: alice, bob: bob))
        }
    }

    static func check(_ records: [CofferStore.Record], against expected: [String: Expected], alice: String, bob: String) {
        #expect(Set(records.map(\.name)) == Set(expected.keys))
        for record in records {
            guard let want = expected[record.name] else { continue }
            #expect(record.values["title"]?.stringValue == want.title, "\(record.name)")
            #expect(record.encryptedValues["body"]?.stringValue == want.body, "\(record.name)")
            #expect(record.creatorID == (want.creator == "alice" ? alice : bob), "\(record.name)")
        }
    }

    /// Each fixture user's session, after checking that each reads every record they could read
    /// when the fixture was made.
    static func readAll(_ f: Opened, beforeBobReads: (Session, Session) async throws -> Void = { _, _ in }) async throws -> (alice: Session, bob: Session) {
        let alice = try f.store.session(vault: f.alice)
        let bob = try f.store.session(vault: f.bob)
        try await beforeBobReads(alice, bob)
        let aliceID = f.alice.identity.userID, bobID = f.bob.identity.userID
        let notes = ZoneID(name: "Notes", ownerID: aliceID)
        let query = Query(recordType: "Note")
        check(try await alice.privateDatabase.query(query, in: notes).records, against: Self.notes, alice: aliceID, bob: bobID)
        check(try await bob.sharedDatabase.query(query, in: notes).records, against: Self.notes, alice: aliceID, bob: bobID)
        check(try await alice.privateDatabase.query(query, in: ZoneID(name: "Private", ownerID: aliceID)).records,
              against: privateRecords, alice: aliceID, bob: bobID)
        check(try await bob.privateDatabase.query(query, in: ZoneID(name: "Bobs", ownerID: bobID)).records,
              against: bobRecords, alice: aliceID, bob: bobID)
        return (alice, bob)
    }

    @Test("the v5 store opens: each user reads every record they could read when it was made")
    func v5Opens() async throws {
        try await Self.withCopy(Self.v5) { f async throws in
            let aliceID = f.alice.identity.userID, bobID = f.bob.identity.userID
            let notes = ZoneID(name: "Notes", ownerID: aliceID)
            let (alice, bob) = try await Self.readAll(f) { alice, bob in
                // After the upgrade Bob is invited again, not yet accepted: he accepts with the
                // share's URL, as he did before.
                let share = try await alice.fetchShare(in: notes)
                #expect(share.participants.first { $0.userID == bobID }?.status == .pending)
                let error = await expectStoreError(.permissionFailure) { try await bob.sharedDatabase.record(named: "n1", in: notes) }
                #expect(error?.message.contains("have not accepted") == true, "\(error?.message ?? "")")
                _ = try await bob.acceptShare(url: share.url)
            }
            let query = Query(recordType: "Note")
            let share = try await alice.fetchShare(in: notes)
            #expect(share.title == "Fixture share")
            #expect(share.participants.first { $0.userID == bobID }?.status == .accepted)
            #expect(share.participants.first { $0.userID == bobID }?.permission == .readWrite)
            // The upgrade sealed every record again under a new key of the next epoch (3; the
            // zone was at 2), made by the owner, and dropped the older keys: a re-key has
            // nothing left to do.
            #expect(try await alice.privateDatabase.query(query, in: notes).records.allSatisfy { $0.keyEpoch == 3 })
            #expect(share.keyEpoch == 3)
            #expect(try await alice.rekey(zone: notes) == 0)
            // The change feed lists every record from the upgrade on; the earlier format's
            // deletions are not in the log, so its change tokens expire.
            let changes = try await alice.privateDatabase.changes(in: notes, since: nil)
            #expect(Set(changes.changed.map(\.name)) == Set(Self.notes.keys) && changes.deleted.isEmpty && changes.refused.isEmpty)
            // Bob can still write.
            _ = try await bob.sharedDatabase.save(makeNote("b2", in: notes, title: "Bob again", body: "after the upgrade"))
            #expect(try await bob.sharedDatabase.record(named: "n1", in: notes).encryptedValues["body"]?.stringValue == "fixture body one")
            let report = try await alice.audit()
            #expect(report.findings.isEmpty, "\(report.findings)")
        }
    }

    @Test("the v6 and v7 stores open: every entry kind of the zone log verifies, and each user reads what they could",
          arguments: [v6, v7])
    func v6Opens(_ file: String) async throws {
        try await Self.withCopy(file) { f async throws in
            let (alice, bob) = try await Self.readAll(f)
            let aliceID = f.alice.identity.userID, bobID = f.bob.identity.userID
            let notes = ZoneID(name: "Notes", ownerID: aliceID)
            let query = Query(recordType: "Note")
            // Genesis, membership, acceptance, commit and rewrite entries are all in Notes' log.
            let kinds = try await f.store.dbPool.read { db in
                try Int.fetchAll(db, sql: "SELECT DISTINCT kind FROM zone_log WHERE zone_id = (SELECT id FROM zone WHERE name = 'Notes') ORDER BY kind")
            }
            #expect(kinds == [1, 2, 3, 4, 5])
            let share = try await alice.fetchShare(in: notes)
            #expect(share.title == "Fixture share" && share.keyEpoch == 2)
            #expect(share.participants.first { $0.userID == bobID }?.status == .accepted)
            func formats() async throws -> [LogEntry.Format] {
                try await f.store.dbPool.read { db in
                    try Data.fetchAll(db, sql: "SELECT body FROM zone_log WHERE zone_id = (SELECT id FROM zone WHERE name = 'Notes') ORDER BY seq")
                        .map { try #require(LogEntry.decode(Array($0))).format }
                }
            }
            let before = try await formats()
            #expect(!before.isEmpty && before.allSatisfy { $0 == .v1 }, "the fixture's entries are of log entry format 1")
            _ = try await bob.sharedDatabase.save(makeNote("b2", in: notes, title: "Bob again", body: "on the v6 store"))
            // The log goes on in format 2 after its format 1 entries, and both verify.
            #expect(try await formats() == before + [.v2])
            #expect(try await f.store.openSession(vault: f.alice).privateDatabase.record(named: "b2", in: notes).modifierID == bobID)
            #expect(try await alice.audit().findings.isEmpty)
            #expect(try await bob.audit().findings.isEmpty)
        }
    }

    // MARK: - Writing the fixture

    /// Writes a store fixture with the code of its format, once, on purpose:
    /// `COFFER_WRITE_FIXTURES=1 swift test --filter StoreFixtureTests/writeFixture`. Refuses to
    /// replace one that exists. Only the newest format's fixture can be written by this code:
    /// `store-v5.sqlite` was written by the code of format v5, before the zone log, and
    /// `store-v6.sqlite` by that of format v6, before the log head index.
    @Test(.enabled(if: ProcessInfo.processInfo.environment["COFFER_WRITE_FIXTURES"] == "1",
                   "writes the store fixture in Keys/ only when COFFER_WRITE_FIXTURES=1"), arguments: [v7])
    func writeFixture(_ file: String) async throws {
        let target = Self.keysFolder.appendingPathComponent(file)
        guard !FileManager.default.fileExists(atPath: target.path) else {
            Issue.record("Keys/\(file) exists; fixtures are never replaced (delete it by hand to re-make it)")
            return
        }
        try await withTemporaryFolder { folder async throws in
            for name in ["vault-v1-min.coffer", "vault-v1-interactive.coffer"] {
                try FileManager.default.copyItem(at: Self.keysFolder.appendingPathComponent(name), to: folder.appendingPathComponent(name))
            }
            let aliceVault = try Vault.open(at: folder.appendingPathComponent("vault-v1-min.coffer"), passphrase: secure(Self.alicePassphrase))
            let bobVault = try Vault.open(at: folder.appendingPathComponent("vault-v1-interactive.coffer"), passphrase: secure(Self.bobPassphrase))
            let carolVault = try Vault.create(at: folder.appendingPathComponent("carol.coffer"), name: "Fixture Carol",
                                              email: "carol@fixtures.example", passphrase: secure("carol"), kdf: .min)
            let path = folder.appendingPathComponent("work.sqlite").path
            do {
                let store = try Store(path: path)
                let alice = try store.session(vault: aliceVault)
                let bob = try store.session(vault: bobVault)
                let carol = try store.session(vault: carolVault)
                func note(_ name: String, _ e: Expected, in zone: ZoneID, parent: String? = nil) -> CofferStore.Record {
                    var r = CofferStore.Record(type: "Note", name: name, zone: zone, parent: parent)
                    r.values["title"] = .string(e.title)
                    r.values["count"] = .int(Int64(name.count))
                    r.values["tags"] = .list([.string("fixture"), .string(name)])
                    r.encryptedValues["body"] = .string(e.body)
                    return r
                }
                let notes = try await alice.privateDatabase.createZone(named: "Notes")
                _ = try await alice.privateDatabase.save(note("n1", Self.notes["n1"]!, in: notes))
                _ = try await alice.privateDatabase.save(note("n2", Expected(title: "Second", body: "fixture body two", creator: "alice", epoch: 1),
                                                              in: notes, parent: "n1"))
                _ = try await alice.share(zone: notes, title: "Fixture share")
                _ = try await alice.addParticipant(bobVault.identity.userID, permission: .readWrite, to: notes)
                _ = try await alice.addParticipant(carolVault.identity.userID, permission: .readOnly, to: notes)
                let url = try await alice.fetchShare(in: notes).url
                _ = try await bob.acceptShare(url: url)
                _ = try await carol.acceptShare(url: url)
                _ = try await bob.sharedDatabase.save(note("b1", Self.notes["b1"]!, in: notes))
                _ = try await alice.removeParticipant(carolVault.identity.userID, from: notes)
                _ = try await alice.privateDatabase.save(note("n3", Self.notes["n3"]!, in: notes))
                _ = try await alice.privateDatabase.modify(saving: [], deleting: [RecordDeletion(name: "n2")], in: notes)
                let priv = try await alice.privateDatabase.createZone(named: "Private")
                _ = try await alice.privateDatabase.save(note("p1", Self.privateRecords["p1"]!, in: priv))
                let bobs = try await bob.privateDatabase.createZone(named: "Bobs")
                _ = try await bob.privateDatabase.save(note("x1", Self.bobRecords["x1"]!, in: bobs))
                if file != Self.v5 { _ = try await alice.rekey(zone: notes) } // a rewrite entry
                // One file, no -wal: a clean copy.
                try await store.dbPool.writeWithoutTransaction { db in
                    try db.execute(sql: "VACUUM INTO ?", arguments: [target.path])
                }
            }
        }
    }
}

import CofferCrypto
import CofferTestSupport
import CofferVault
import CofferStoreTestSupport
import Foundation
import GRDB
import Testing
@testable import CofferStore

/// The hostile store before the upgrade: zones of the earlier format (`Keys/store-v5.sqlite`)
/// that someone who can write the file changed before their owner's first session of this
/// format. That format signed commits, membership entries and shares, but not the zone row
/// itself, and committed to a key only in a share: the upgrade must not sign what the rows
/// alone say.
@Suite("Hostile store: upgrading the earlier format")
struct HostileUpgradeTests {
    typealias TestStore = StoreFixtureTests

    /// Mallory's vault, in the copy's folder.
    static func mallory(_ f: StoreFixtureTests.Opened) throws -> Vault {
        try Vault.create(at: f.folder.appendingPathComponent("mallory.coffer"), name: "Mallory", email: "mallory@example.com",
                         passphrase: secure("mallory"), kdf: .min)
    }

    /// Alice's key of `epoch` for a zone of the earlier format, as her vault opens it.
    static func legacyKey(_ f: StoreFixtureTests.Opened, zone name: String, epoch: Int64) throws -> (uid: [UInt8], key: SymmetricKey) {
        let aliceID = f.alice.identity.userID
        return try f.store.dbPool.read { db in
            let row = try #require(try Row.fetchOne(db, sql: """
                SELECT z.uid, k.wrapped_key FROM zone z JOIN zone_key k ON k.zone_id = z.id
                WHERE z.name = ? AND z.owner_id = ? AND k.epoch = ? AND k.member_id = ?
                """, arguments: [name, aliceID, epoch, aliceID]))
            let uid = Array(row[0] as Data)
            return (uid, try KeyRing.unwrapZoneKey(Array(row[1] as Data), zoneUID: uid, epoch: epoch, with: f.alice.boxKey))
        }
    }

    /// No sealed value in the file opens with `key`.
    static func expectNothingSealed(under key: SymmetricKey, in store: Store, sourceLocation: SourceLocation = #_sourceLocation) throws {
        try store.dbPool.read { db in
            let rows = try Row.fetchAll(db, sql: """
                SELECT z.id, z.uid, z.owner_id, z.name, r.name, r.type, r.epoch, r.sealed FROM record r JOIN zone z ON z.id = r.zone_id
                WHERE r.sealed IS NOT NULL
                """)
            #expect(!rows.isEmpty, sourceLocation: sourceLocation)
            for row in rows {
                let zone = ZoneRow(rowID: row[0], uid: Array(row[1] as Data), id: ZoneID(name: row[3], ownerID: row[2]), sequence: 0,
                                   created: Date(), logFormat: 1)
                let ad = RecordSealer.associatedData(zone: zone, name: row[4], type: row[5], epoch: row[6])
                let opened = try? Envelope(bytes: Array(row[7] as Data)).open(using: key, authenticating: ad)
                #expect(opened == nil, "record '\(row[4] as String)' is sealed under the earlier key", sourceLocation: sourceLocation)
            }
        }
    }

    /// Whatever key the earlier format held (its own, or one someone wrapped to the owner), the
    /// upgraded zone is under a new key the owner made, at the next epoch: nothing the owner
    /// writes afterwards, nor any record re-sealed, opens with the earlier key.
    @Test("the upgrade seals under a new key of the owner's making, never the earlier format's key")
    func upgradeMakesANewKey() async throws {
        try await TestStore.withCopy(TestStore.v5) { f async throws in
            let notes = try Self.legacyKey(f, zone: "Notes", epoch: 2)
            let priv = try Self.legacyKey(f, zone: "Private", epoch: 1)
            let alice = try f.store.session(vault: f.alice)
            let aliceID = f.alice.identity.userID
            let privateZone = ZoneID(name: "Private", ownerID: aliceID)
            _ = try await alice.privateDatabase.save(makeNote("p2", in: privateZone, body: "after the upgrade"))
            #expect(try await alice.privateDatabase.record(named: "p2", in: privateZone).keyEpoch == 2)
            #expect(try await alice.privateDatabase.record(named: "p1", in: privateZone).keyEpoch == 2)
            for key in [notes.key, priv.key] { try Self.expectNothingSealed(under: key, in: f.store) }
            // The removed participant (Carol) holds no key; Bob's is the new one, for when he accepts again.
            let members = try await f.store.dbPool.read { db in
                try String.fetchAll(db, sql: "SELECT member_id FROM zone_key WHERE zone_id = (SELECT id FROM zone WHERE name = 'Notes') ORDER BY member_id")
            }
            #expect(Set(members) == [aliceID, f.bob.identity.userID])
        }
    }

    /// Mallory replaces the key wrapped to Alice for her unshared zone with a key of her own
    /// (a sealed box needs only Alice's public key). The records Alice sealed do not open with
    /// it: the zone is not upgraded, Alice is told why, audit reports it.
    @Test("a key planted in an unshared zone of the earlier format stops its upgrade")
    func plantedKey() async throws {
        try await TestStore.withCopy(TestStore.v5) { f async throws in
            let priv = try Self.legacyKey(f, zone: "Private", epoch: 1)
            let planted = SymmetricKey()
            try await f.store.dbPool.write { db in
                try db.execute(sql: "UPDATE zone_key SET wrapped_key = ? WHERE zone_id = (SELECT id FROM zone WHERE name = 'Private') AND epoch = 1",
                               arguments: [Data(KeyRing.wrapZoneKey(planted, zoneUID: priv.uid, epoch: 1, to: f.alice.identity.boxKey))])
            }
            let alice = try f.store.session(vault: f.alice)
            let zone = ZoneID(name: "Private", ownerID: f.alice.identity.userID)
            #expect(try await alice.privateDatabase.zones().map(\.id.name) == ["Notes"])
            let error = await expectStoreError(.integrityFailure) { try await alice.privateDatabase.record(named: "p1", in: zone) }
            #expect(error?.message.contains("cannot be upgraded: the encrypted values of record 'p1' fail authentication") == true,
                    "\(error?.message ?? "")")
            await expectStoreError(.integrityFailure) { try await alice.privateDatabase.save(makeNote("p9", in: zone)) }
            let report = try await alice.audit()
            #expect(report.findings.contains { $0.zone == zone && $0.kind == .log }, "\(report.findings)")
            // Nothing was sealed under the planted key; the owner can delete the zone.
            try Self.expectNothingSealed(under: planted, in: f.store)
            try await alice.privateDatabase.deleteZone(zone)
            #expect(try await alice.audit().findings.isEmpty)
        }
    }

    /// Mallory adds a zone of the earlier format in Alice's name, with a key of her own wrapped
    /// to Alice and a record: nothing in it is signed by Alice, so it is not upgraded (Alice
    /// would otherwise sign a log for it and write into it). A commit Mallory signs in Alice's
    /// name fails Alice's signature.
    @Test("a zone of the earlier format that its owner signed nothing of is not upgraded", arguments: ["no commit", "a forged commit"])
    func plantedZone(variant: String) async throws {
        try await TestStore.withCopy(TestStore.v5) { f async throws in
            let mallory = try Self.mallory(f)
            let aliceID = f.alice.identity.userID
            let uid = SecureRandom.bytes(count: 16)
            let key = SymmetricKey()
            try await f.store.dbPool.write { db in
                try db.execute(sql: """
                    INSERT INTO zone (uid, owner_id, name, current_epoch, sequence, membership_seq, created_at, log_format)
                    VALUES (?, ?, 'Payroll', 1, ?, 0, 0, 0)
                    """, arguments: [Data(uid), aliceID, variant == "no commit" ? 0 : 1])
                let id = db.lastInsertedRowID
                try db.execute(sql: "INSERT INTO zone_key (zone_id, epoch, member_id, wrapped_key) VALUES (?, 1, ?, ?)",
                               arguments: [id, aliceID, Data(KeyRing.wrapZoneKey(key, zoneUID: uid, epoch: 1, to: f.alice.identity.boxKey))])
                if variant == "a forged commit" {
                    let plain = Array(#"{"title":"mallory"}"#.utf8)
                    let hash = LegacyZone.recordHash(zoneUID: uid, name: "m1", type: "Note", parent: nil, seq: 1, epoch: 1, membershipSeq: 0,
                                                     creatorID: aliceID, created: 1, modified: 1, plain: plain, sealed: nil)
                    let names = [UInt8(0), 2] + Array("m1".utf8)
                    let bytes = LegacyZone.commitBytes(zoneUID: uid, seq: 1, membershipSeq: 0, epoch: 1, authorID: aliceID, authorLabel: nil,
                                                       time: 1, prevHash: [UInt8](repeating: 0, count: 32), entries: hash, names: names)
                    try db.execute(sql: """
                        INSERT INTO zone_commit (zone_id, seq, author_id, author_label, membership_seq, epoch, committed_at, prev_hash, entries, hash, signature, names)
                        VALUES (?, 1, ?, NULL, 0, 1, 1, ?, ?, ?, ?, ?)
                        """, arguments: [id, aliceID, Data(count: 32), Data(hash), Data(BLAKE2b.hash(bytes)),
                                         Data(mallory.signingKey.signature(for: bytes)), Data(names)])
                    try db.execute(sql: """
                        INSERT INTO record (zone_id, name, type, parent, plain, sealed, epoch, seq, membership_seq, creator_id, modifier_id, created_at, modified_at)
                        VALUES (?, 'm1', 'Note', NULL, ?, NULL, 1, 1, 0, ?, ?, 1, 1)
                        """, arguments: [id, String(decoding: plain, as: UTF8.self), aliceID, aliceID])
                }
            }
            let alice = try f.store.session(vault: f.alice)
            let zone = ZoneID(name: "Payroll", ownerID: aliceID)
            #expect(try await alice.privateDatabase.zones().map(\.id.name).sorted() == ["Notes", "Private"])
            let error = await expectStoreError(.integrityFailure) { try await alice.privateDatabase.save(makeNote("secret", in: zone)) }
            let why = variant == "no commit" ? "nothing in it is signed" : "commit 1 fails its author's signature"
            #expect(error?.message.contains(why) == true, "\(error?.message ?? "")")
            let count = try await f.store.dbPool.read { db in
                try Int.fetchOne(db, sql: "SELECT count(*) FROM zone_log WHERE zone_id = (SELECT id FROM zone WHERE name = 'Payroll')")
            }
            #expect(count == 0)
            let report = try await alice.audit()
            #expect(report.findings.contains { $0.zone == zone }, "\(report.findings)")
        }
    }
}

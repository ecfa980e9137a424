import CofferCrypto
import CofferVault
import Foundation
import GRDB
import Testing
@testable import CofferStore

/// The share is signed by its owner over its whole content, wrapped keys included; every reader
/// verifies it. Acceptances are signed by their participant. Rows edited by hand, through a
/// separate SQLite connection, are `.integrityFailure`.
@Suite("Share signatures")
struct ShareSignatureTests {
    /// Alice's "Family" (n1, n2) shared with Bob (read-only, accepted) and Carol (pending).
    struct Scene {
        let f: ShareFixture
        let zone: ZoneID
        let zoneRowID: Int64
        let bob: Session
        let carol: Session
        let mallory: Session
    }

    func scene(_ f: ShareFixture) async throws -> Scene {
        let bob = try f.user("Bob", "bob@example.com")
        let carol = try f.user("Carol", "carol@example.com")
        let mallory = try f.user("Mallory", "mallory@example.com")
        let (zone, share) = try await f.sharedWith(bob, .readOnly)
        _ = try await f.alice.addParticipant(carol.userID, permission: .readWrite, to: zone)
        #expect(share.testParticipant(bob.userID)?.status == .accepted)
        return Scene(f: f, zone: zone, zoneRowID: try f.zoneRowID(zone), bob: bob, carol: carol, mallory: mallory)
    }

    enum Tamper: String, CaseIterable, Sendable {
        case title, publicPermission, version, modifiedTime, createdTime, keyCommitment, signature
        case participantPermission, participantRole, participantStatus, participantDeleted, participantInserted
        case participantWrappedKey, pendingWrappedKey, participantWrappedKeyDeleted

        func apply(_ s: Scene) throws {
            let z = s.zoneRowID
            try s.f.raw { db in
                switch self {
                case .title:
                    try db.execute(sql: "UPDATE share SET title = 'Hacked' WHERE zone_id = ?", arguments: [z])
                case .publicPermission:
                    try db.execute(sql: "UPDATE share SET public_permission = 2 WHERE zone_id = ?", arguments: [z])
                case .version:
                    try db.execute(sql: "UPDATE share SET version = version + 1 WHERE zone_id = ?", arguments: [z])
                case .modifiedTime:
                    try db.execute(sql: "UPDATE share SET modified_at = modified_at + 1 WHERE zone_id = ?", arguments: [z])
                case .createdTime:
                    try db.execute(sql: "UPDATE share SET created_at = created_at - 1 WHERE zone_id = ?", arguments: [z])
                case .keyCommitment:
                    try db.execute(sql: "UPDATE share SET key_commitment = ? WHERE zone_id = ?", arguments: [Data(SecureRandom.bytes(count: 32)), z])
                case .signature:
                    try db.execute(sql: "UPDATE share SET signature = ? WHERE zone_id = ?", arguments: [Data(SecureRandom.bytes(count: 64)), z])
                case .participantPermission: // Bob makes himself read-write
                    try db.execute(sql: "UPDATE share_participant SET permission = 2 WHERE zone_id = ? AND user_id = ?", arguments: [z, s.bob.userID])
                case .participantRole:
                    try db.execute(sql: "UPDATE share_participant SET role = 2 WHERE zone_id = ? AND user_id = ?", arguments: [z, s.bob.userID])
                case .participantStatus:
                    try db.execute(sql: "UPDATE share_participant SET status = 2 WHERE zone_id = ? AND user_id = ?", arguments: [z, s.carol.userID])
                case .participantDeleted:
                    try db.execute(sql: "DELETE FROM share_participant WHERE zone_id = ? AND user_id = ?", arguments: [z, s.carol.userID])
                case .participantInserted:
                    try db.execute(sql: "INSERT INTO share_participant (zone_id, user_id, role, permission, status) VALUES (?, ?, 1, 2, 0)",
                                   arguments: [z, s.mallory.userID])
                case .participantWrappedKey: // a valid wrap, to Bob, of another key
                    let other = SealedBoxWrap.seal(SymmetricKey().bytes, to: s.bob.vault.identity.boxKey)
                    try db.execute(sql: "UPDATE zone_key SET wrapped_key = ? WHERE zone_id = ? AND member_id = ?", arguments: [Data(other), z, s.bob.userID])
                    #expect(db.changesCount == 1)
                case .pendingWrappedKey:
                    let other = SealedBoxWrap.seal(SymmetricKey().bytes, to: s.carol.vault.identity.boxKey)
                    try db.execute(sql: "UPDATE zone_key SET wrapped_key = ? WHERE zone_id = ? AND member_id = ?", arguments: [Data(other), z, s.carol.userID])
                    #expect(db.changesCount == 1)
                case .participantWrappedKeyDeleted:
                    try db.execute(sql: "DELETE FROM zone_key WHERE zone_id = ? AND member_id = ?", arguments: [z, s.carol.userID])
                    #expect(db.changesCount == 1)
                }
            }
        }
    }

    @Test(arguments: Tamper.allCases)
    func anEditedShareRowFailsEveryReader(_ tamper: Tamper) async throws {
        try await ShareFixture.run { f in
            let s = try await scene(f)
            // Untouched, fresh sessions read and see the share.
            #expect(shareBody(try await f.fresh(f.alice).privateDatabase.record(named: "n1", in: s.zone)) == "body of n1")
            #expect(shareBody(try await f.fresh(s.bob).sharedDatabase.record(named: "n1", in: s.zone)) == "body of n1")
            #expect(try await f.fresh(s.bob).fetchShare(in: s.zone).title == "Family notes")
            let url = try await f.fresh(f.alice).fetchShare(in: s.zone).url

            try tamper.apply(s)

            let bob = try f.fresh(s.bob), alice = try f.fresh(f.alice), carol = try f.fresh(s.carol)
            await shareExpectError(.integrityFailure, "Bob reads") { try await bob.sharedDatabase.record(named: "n1", in: s.zone) }
            await shareExpectError(.integrityFailure, "Bob queries") { try await bob.sharedDatabase.query(Query(recordType: "Note"), in: s.zone) }
            await shareExpectError(.integrityFailure, "Bob writes") { try await bob.sharedDatabase.save(shareNote("n9", in: s.zone)) }
            await shareExpectError(.integrityFailure, "Bob's share") { try await bob.fetchShare(in: s.zone) }
            await shareExpectError(.integrityFailure, "Bob's shares") { try await bob.fetchShares() }
            #expect(await bob.canRead(zone: s.zone) == false)
            #expect(await bob.canModify(zone: s.zone) == false)
            await shareExpectError(.integrityFailure, "Alice reads") { try await alice.privateDatabase.record(named: "n1", in: s.zone) }
            await shareExpectError(.integrityFailure, "Alice writes") { try await alice.privateDatabase.save(shareNote("n9", in: s.zone)) }
            await shareExpectError(.integrityFailure, "Alice's share") { try await alice.fetchShare(in: s.zone) }
            await shareExpectError(.integrityFailure, "Alice adds") { try await alice.addParticipant(s.mallory.userID, permission: .readOnly, to: s.zone) }
            await shareExpectError(.integrityFailure, "Carol accepts") { try await carol.acceptShare(url: url) }
            // Nothing was written by the refused calls.
            #expect(try f.raw { db in try Int.fetchOne(db, sql: "SELECT count(*) FROM record WHERE name = 'n9'") } == 0)
        }
    }

    @Test func aSubstitutedOwnerKeyFailsTheSignedCommitment() async throws {
        try await ShareFixture.run { f in
            let s = try await scene(f)
            let alice = f.alice
            let row = try f.zoneRow(s.zone)
            try f.raw { db in
                // A well-formed wrapped key for this zone and epoch, but of another key.
                let other = Session.wrapZoneKey(SymmetricKey(), zoneUID: row.uid, epoch: row.currentEpoch, to: alice.vault.identity.boxKey)
                try db.execute(sql: "UPDATE zone_key SET wrapped_key = ? WHERE zone_id = ? AND member_id = ?",
                               arguments: [Data(other), s.zoneRowID, alice.userID])
                #expect(db.changesCount == 1)
            }
            let fresh = try f.fresh(alice)
            let error = await shareExpectError(.integrityFailure) { try await fresh.privateDatabase.record(named: "n1", in: s.zone) }
            #expect(error?.message.contains("commitment") == true)
            await shareExpectError(.integrityFailure) { try await fresh.privateDatabase.save(shareNote("n9", in: s.zone)) }
            // Bob's own wrapped key and the signature are untouched: he still reads.
            #expect(shareBody(try await f.fresh(s.bob).sharedDatabase.record(named: "n2", in: s.zone)) == "body of n2")
        }
    }

    @Test func aForgedAcceptanceIsAnIntegrityFailure() async throws {
        try await ShareFixture.run { f in
            let s = try await scene(f)
            // Someone writes an acceptance for Carol, who never accepted.
            try f.raw { db in
                try db.execute(sql: "INSERT INTO share_acceptance (zone_id, user_id, role, state, at, signature) VALUES (?, ?, 1, 1, ?, ?)",
                               arguments: [s.zoneRowID, s.carol.userID, Date().timeIntervalSince1970, Data(SecureRandom.bytes(count: 64))])
            }
            await shareExpectError(.integrityFailure) { try await f.fresh(s.carol).sharedDatabase.record(named: "n1", in: s.zone) }
            await shareExpectError(.integrityFailure) { try await f.fresh(s.carol).sharedDatabase.save(shareNote("n9", in: s.zone)) }
            await shareExpectError(.integrityFailure, "the owner's view") { try await f.fresh(f.alice).fetchShare(in: s.zone) }
            #expect(try await f.fresh(s.carol).canRead(zone: s.zone) == false)
            #expect(try await f.fresh(s.carol).sharedDatabase.zones().isEmpty)
        }
    }

    @Test func anotherParticipantsSignatureDoesNotAcceptForYou() async throws {
        try await ShareFixture.run { f in
            let s = try await scene(f)
            // Bob's real acceptance signature, copied into a row for Carol.
            try f.raw { db in
                let row = try #require(try Row.fetchOne(db, sql: "SELECT at, signature FROM share_acceptance WHERE zone_id = ? AND user_id = ?",
                                                        arguments: [s.zoneRowID, s.bob.userID]))
                try db.execute(sql: "INSERT INTO share_acceptance (zone_id, user_id, role, state, at, signature) VALUES (?, ?, 1, 1, ?, ?)",
                               arguments: [s.zoneRowID, s.carol.userID, row["at"] as Double, row["signature"] as Data])
            }
            await shareExpectError(.integrityFailure) { try await f.fresh(s.carol).sharedDatabase.record(named: "n1", in: s.zone) }
        }
    }

    @Test func flippingALeaveBackToAcceptedIsAnIntegrityFailure() async throws {
        try await ShareFixture.run { f in
            let s = try await scene(f)
            try await s.bob.leaveShare(zone: s.zone)
            await shareExpectError(.permissionFailure) { try await f.fresh(s.bob).sharedDatabase.record(named: "n1", in: s.zone) }
            try f.raw { db in
                try db.execute(sql: "UPDATE share_acceptance SET state = 1 WHERE zone_id = ? AND user_id = ?", arguments: [s.zoneRowID, s.bob.userID])
                #expect(db.changesCount == 1)
            }
            await shareExpectError(.integrityFailure) { try await f.fresh(s.bob).sharedDatabase.record(named: "n1", in: s.zone) }
            await shareExpectError(.integrityFailure) { try await f.fresh(f.alice).fetchShare(in: s.zone) }
        }
    }

    @Test func aRemovedParticipantCannotReinstateThemselves() async throws {
        try await ShareFixture.run { f in
            let s = try await scene(f)
            let url = try await f.alice.removeParticipant(s.bob.userID, from: s.zone).url
            try f.raw { db in
                try db.execute(sql: "UPDATE share_participant SET status = 0 WHERE zone_id = ? AND user_id = ?", arguments: [s.zoneRowID, s.bob.userID])
                #expect(db.changesCount == 1)
            }
            await shareExpectError(.integrityFailure) { try await f.fresh(s.bob).sharedDatabase.record(named: "n1", in: s.zone) }
            await shareExpectError(.integrityFailure) { try await f.fresh(s.bob).acceptShare(url: url) }
        }
    }

    /// The verified-share cache is keyed by signature only: a session that verified the share
    /// once must still notice rows edited afterwards (the signature stays, the content changes).
    @Test func aSessionThatAlreadyVerifiedTheShareStillCatchesLaterTampering() async throws {
        try await ShareFixture.run { f in
            let s = try await scene(f)
            let bob = s.bob
            #expect(shareBody(try await bob.sharedDatabase.record(named: "n1", in: s.zone)) == "body of n1")
            await shareExpectError(.permissionFailure, "read-only") { try await bob.sharedDatabase.save(shareNote("n9", in: s.zone)) }

            try Tamper.participantPermission.apply(s)
            // Bob's own, long-lived session: read-only must not become read-write by editing a row.
            await shareExpectError(.integrityFailure, "Bob's escalated write in his old session") {
                try await bob.sharedDatabase.save(shareNote("n9", in: s.zone, body: "escalated"))
            }
            #expect(try f.raw { db in try Int.fetchOne(db, sql: "SELECT count(*) FROM record WHERE name = 'n9'") } == 0)

            try Tamper.title.apply(s)
            await shareExpectError(.integrityFailure, "the owner's old session") { try await f.alice.fetchShare(in: s.zone) }
            await shareExpectError(.integrityFailure, "Bob's old session") { try await bob.fetchShare(in: s.zone) }
        }
    }

    /// A user with write access to the file signs an acceptance "by link" for herself, without
    /// ever holding the link secret. It must never make her a member: in particular the next
    /// key rotation must not wrap the zone key to her.
    @Test func aSelfSignedLinkAcceptanceWithoutTheSecretNeverYieldsTheKey() async throws {
        try await ShareFixture.run { f in
            let s = try await scene(f)
            let mallory = s.mallory
            let shareUID = try f.shareUID(s.zone)
            let at = Date().timeIntervalSince1970
            let signature = mallory.vault.signingKey.signature(
                for: Acceptance.signedBytes(shareUID: shareUID, userID: mallory.userID, role: .publicUser, state: .accepted, at: at))
            try f.raw { db in
                try db.execute(sql: "INSERT INTO share_acceptance (zone_id, user_id, role, state, at, signature) VALUES (?, ?, 2, 1, ?, ?)",
                               arguments: [s.zoneRowID, mallory.userID, at, Data(signature)])
            }
            // The owner opens a read-only link; Carol, still pending, leaves the share and the key rotates.
            let share = try await f.alice.setPublicPermission(.readOnly, in: s.zone)
            #expect(share.keyEpoch == 2)
            #expect(share.testParticipant(s.carol.userID) == nil)

            #expect(try f.wrappedKey(s.zone, member: mallory.userID, epoch: 2) == nil, "the new zone key is wrapped to Mallory")
            await shareExpectError(.permissionFailure, "Mallory never held the link secret") {
                try await f.fresh(mallory).sharedDatabase.record(named: "n1", in: s.zone)
            }
            #expect(share.testParticipant(mallory.userID)?.status != .accepted, "Mallory shows as an accepted link participant")
        }
    }
}

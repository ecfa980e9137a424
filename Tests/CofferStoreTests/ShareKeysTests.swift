import CofferCrypto
import CofferVault
import CofferStoreTestSupport
import Foundation
import GRDB
import Testing
@testable import CofferStore

/// Zone keys of shares: wrapped to each named member, sealed under the link key for a public
/// share; rotated on remove and stop in O(members); re-key re-seals every record.
@Suite("Share keys")
struct ShareKeysTests {
    /// Opens a record's sealed blob with `key`, binding `epoch` into the associated data.
    func open(_ blob: [UInt8], key: SymmetricKey, f: TestStore, zone: ZoneID, name: String, epoch: Int64) throws -> [UInt8] {
        let ad = RecordSealer.associatedData(zone: try f.sqliteZoneRow(zone), name: name, type: "Note", epoch: epoch)
        return try Envelope(bytes: blob).open(using: key, authenticating: ad)
    }

    /// Opens a wrapped zone key: `crypto_box_seal` of "CZK1" ‖ zone uid (16) ‖ epoch (8) ‖ key (32).
    func unwrap(_ wrapped: [UInt8]?, for session: Session) throws -> SymmetricKey {
        let payload = try SealedBoxWrap.open(try #require(wrapped), with: session.vault.boxKey)
        try #require(payload.count == 60)
        #expect(payload.withUnsafeBytes { Array($0.prefix(4)) } == Array("CZK1".utf8))
        return try SymmetricKey(bytes: payload.slice(28..<60))
    }

    @Test func namedParticipantsGetTheZoneKeyWrappedToTheirX25519Key() async throws {
        try await withStore { f in
            let bob = try await f.user("Bob", "bob@example.com")
            let carol = try await f.user("Carol", "carol@example.com")
            let zone = try await f.makeZone("Family")
            _ = try await f.alice.share(zone: zone, title: "t")
            #expect(try await f.zoneKeyRows(zone) == [KeyRow(epoch: 1, member: f.alice.userID)])
            _ = try await f.alice.addParticipant(bob.userID, permission: .readOnly, to: zone)
            #expect(Set(try await f.zoneKeyRows(zone)) == [KeyRow(epoch: 1, member: f.alice.userID), KeyRow(epoch: 1, member: bob.userID)])

            let aliceKey = try unwrap(try await f.wrappedKey(zone, member: f.alice.userID, epoch: 1), for: f.alice)
            let bobWrapped = try #require(try await f.wrappedKey(zone, member: bob.userID, epoch: 1))
            let bobKey = try unwrap(bobWrapped, for: bob)
            #expect(bobKey == aliceKey)
            #expect(bobWrapped.count == 60 + SealedBoxWrap.overhead)
            #expect(throws: (any Error).self, "Carol's key does not open Bob's wrapped key") {
                _ = try SealedBoxWrap.open(bobWrapped, with: carol.vault.boxKey)
            }
            // The key matches the owner-signed commitment in the log, and opens the records.
            let commitment = try #require(try await f.state(zone).commitments[1])
            let uid = try f.sqliteZoneRow(zone).uid
            #expect(KeyRing.commitment(to: bobKey, zoneUID: uid, epoch: 1) == commitment)
            let plaintext = try open(try await f.sealedBlob(zone, "n1"), key: bobKey, f: f, zone: zone, name: "n1", epoch: 1)
            #expect(try SealedValuesCodec.decode(plaintext)["body"] == .string("body of n1"))
        }
    }

    @Test func aPublicPermissionPutsTheLinkSecretInTheURLFragment() async throws {
        try await withStore { f in
            let bob = try await f.user("Bob", "bob@example.com")
            let (zone, closed) = try await f.sharedWith(bob, .readOnly)
            #expect(!closed.url.contains("#"))
            #expect(try f.sqlite { db in try Row.fetchOne(db, sql: "SELECT * FROM share_link") } == nil)
            #expect(try await f.state(zone).share?.linkPublicKey == nil)

            let open = try await f.alice.setPublicPermission(.readOnly, in: zone)
            let url = try ShareURL(string: open.url)
            let secret = try #require(url.linkSecret)
            #expect(secret.count == 32)
            // The fragment's secret opens the link-sealed key, which is the zone key.
            let sealed = try f.sqlite { db in Array(try #require(try Data.fetchOne(db, sql: "SELECT sealed_key FROM share_link"))) }
            let key = try SymmetricKey(bytes: Envelope(bytes: sealed).openSecret(using: ShareService.linkSealKey(secret),
                                                                                 authenticating: ShareService.linkAD(zoneUID: try f.sqliteZoneRow(zone).uid, shareUID: url.shareUID)))
            // The log publishes the link's public key: the one the secret derives.
            #expect(try await f.state(zone).share?.linkPublicKey == (try ShareService.linkSigningKey(secret).publicKey.rawRepresentation))
            #expect(key == (try unwrap(try await f.wrappedKey(zone, member: f.alice.userID, epoch: 1), for: f.alice)))
            // Members print the same URL, secret included.
            #expect(try await bob.fetchShare(in: zone).url == open.url)
            #expect(try await f.fresh(f.alice).fetchShare(in: zone).url == open.url)
            // Going public and back to private: same share, no fragment, no link columns.
            let back = try await f.alice.setPublicPermission(.none, in: zone)
            #expect(!back.url.contains("#"))
            #expect(back.url == closed.url)
            #expect(try f.sqlite { db in try Row.fetchOne(db, sql: "SELECT * FROM share_link") } == nil)
            // A new link has a new secret.
            let reopened = try await f.alice.setPublicPermission(.readWrite, in: zone)
            #expect(reopened.url.contains("#"))
            #expect(reopened.url != open.url)
        }
    }

    /// Removing a participant starts a new epoch: O(members) key rows, no record rewritten,
    /// history readable to the rest, and the removed participant opens nothing written after.
    @Test func removingAParticipantStartsANewKeyEpoch() async throws {
        try await withStore { f in
            let bob = try await f.user("Bob", "bob@example.com")
            let carol = try await f.user("Carol", "carol@example.com")
            let notes = (1...30).map { "old\($0)" }
            let zone = try await f.makeZone("Family", notes: notes)
            _ = try await f.alice.share(zone: zone, title: "t")
            _ = try await f.alice.addParticipant(bob.userID, permission: .readWrite, to: zone)
            let share = try await f.alice.addParticipant(carol.userID, permission: .readWrite, to: zone)
            _ = try await bob.acceptShare(url: share.url)
            _ = try await carol.acceptShare(url: share.url)
            #expect(noteBody(try await carol.sharedDatabase.record(named: "old1", in: zone)) == "body of old1")
            // What Carol could keep: her wrapped key of epoch 1, and so the key itself.
            let carolsOldKey = try unwrap(try await f.wrappedKey(zone, member: carol.userID, epoch: 1), for: carol)
            let before = try f.sqlite { db in try Row.fetchAll(db, sql: "SELECT name, seq, epoch, sealed FROM record ORDER BY name") }
            #expect(before.count == 30)

            let removed = try await f.alice.removeParticipant(carol.userID, from: zone)
            #expect(removed.keyEpoch == 2)
            #expect(removed.version > share.version)
            #expect(removed.testParticipant(carol.userID)?.status == .removed)
            #expect(try await f.alice.privateDatabase.zones().first?.keyEpoch == 2)
            // O(members): the remaining members' wrapped keys and one chain link; records untouched.
            #expect(Set(try await f.zoneKeyRows(zone)) == [KeyRow(epoch: 2, member: f.alice.userID), KeyRow(epoch: 2, member: bob.userID)])
            #expect(try await f.chainEpochs(zone) == [1])
            let after = try f.sqlite { db in try Row.fetchAll(db, sql: "SELECT name, seq, epoch, sealed FROM record ORDER BY name") }
            #expect(after == before)
            #expect(try f.sqlite { db in try Int.fetchOne(db, sql: "SELECT count(*) FROM zone_key WHERE member_id = ?", arguments: [carol.userID]) } == 0)

            // History stays readable to the remaining members, through the chain.
            let bobFresh = try await f.fresh(bob)
            let old = try await bobFresh.sharedDatabase.record(named: "old7", in: zone)
            #expect(noteBody(old) == "body of old7")
            #expect(old.keyEpoch == 1)
            #expect(try await bobFresh.sharedDatabase.records(in: zone).count == 30)
            // New writes use the new epoch.
            let byAlice = try await f.alice.privateDatabase.save(makeNote("new-alice", in: zone, body: "after removal A"))
            #expect(byAlice.keyEpoch == 2)
            let byBob = try await bob.sharedDatabase.save(makeNote("new-bob", in: zone, body: "after removal B"))
            #expect(byBob.keyEpoch == 2)
            // A rewrite of an old record moves it to the new epoch.
            var rewritten = old
            rewritten.encryptedValues["body"] = "rewritten"
            #expect(try await bobFresh.sharedDatabase.save(rewritten).keyEpoch == 2)
            #expect(try await f.recordEpochs(zone)["old7"] == 2)
            #expect(try await f.recordEpochs(zone)["old8"] == 1)

            // Carol, by the API: a clean refusal.
            await expectStoreError(.permissionFailure) { try await carol.sharedDatabase.record(named: "new-alice", in: zone) }
            await expectStoreError(.permissionFailure) { try await f.fresh(carol).sharedDatabase.record(named: "new-bob", in: zone) }
            // Carol, with the file and her old key: what was sealed before opens (the control),
            // what was written after does not.
            let oldBlob = try await f.sealedBlob(zone, "old8")
            #expect(try SealedValuesCodec.decode(try open(oldBlob, key: carolsOldKey, f: f, zone: zone, name: "old8", epoch: 1))["body"] == .string("body of old8"))
            for name in ["new-alice", "new-bob", "old7"] {
                let blob = try await f.sealedBlob(zone, name)
                #expect(try Envelope(bytes: blob).keyID == 2)
                #expect(throws: CryptoError.self, "\(name) under the epoch-2 AD") { _ = try open(blob, key: carolsOldKey, f: f, zone: zone, name: name, epoch: 2) }
                #expect(throws: CryptoError.self, "\(name) under the epoch-1 AD") { _ = try open(blob, key: carolsOldKey, f: f, zone: zone, name: name, epoch: 1) }
            }
            // Nor does her old key open the new key's chain link (the chain goes the other way).
            let link = try f.sqlite { db in Array(try #require(try Data.fetchOne(db, sql: "SELECT sealed_key FROM zone_key_chain"))) }
            #expect(throws: CryptoError.self) {
                _ = try Envelope(bytes: link).openSecret(using: carolsOldKey, authenticating: KeyRing.chainAD(zoneUID: try f.sqliteZoneRow(zone).uid, epoch: 1))
            }
        }
    }

    @Test func stoppingAShareRotatesToAKeyOfTheOwnerAlone() async throws {
        try await withStore { f in
            let bob = try await f.user("Bob", "bob@example.com")
            let (zone, share) = try await f.sharedWith(bob, .readWrite)
            let bobsOldKey = try unwrap(try await f.wrappedKey(zone, member: bob.userID, epoch: 1), for: bob)
            #expect(share.keyEpoch == 1)
            try await f.alice.stopSharing(zone: zone)
            #expect(try await f.zoneKeyRows(zone) == [KeyRow(epoch: 2, member: f.alice.userID)])
            #expect(try await f.chainEpochs(zone) == [1])
            #expect(try await f.alice.privateDatabase.zones().first?.keyEpoch == 2)
            let saved = try await f.alice.privateDatabase.save(makeNote("after-stop", in: zone))
            #expect(saved.keyEpoch == 2)
            let blob = try await f.sealedBlob(zone, "after-stop")
            #expect(throws: CryptoError.self) {
                _ = try open(blob, key: bobsOldKey, f: f, zone: zone, name: "after-stop", epoch: 2)
            }
            #expect(noteBody(try await f.fresh(f.alice).privateDatabase.record(named: "n1", in: zone)) == "body of n1")
        }
    }

    @Test func rekeyReSealsEveryRecordAndDeletesTheOlderKeys() async throws {
        try await withStore { f in
            let bob = try await f.user("Bob", "bob@example.com")
            let carol = try await f.user("Carol", "carol@example.com")
            let dave = try await f.user("Dave", "dave@example.com")
            let zone = try await f.makeZone("Family", notes: [])
            _ = try await f.alice.share(zone: zone, title: "t")
            for who in [bob, carol, dave] {
                let s = try await f.alice.addParticipant(who.userID, permission: .readWrite, to: zone)
                _ = try await who.acceptShare(url: s.url)
            }
            // 401 records at epoch 1, 2 at epoch 2, 1 at epoch 3.
            let batch1 = (0..<400).map { makeNote(String(format: "e1-%03d", $0), in: zone) }
            _ = try await f.alice.privateDatabase.modify(saving: batch1, in: zone)
            _ = try await bob.sharedDatabase.save(makeNote("e1-400", in: zone))
            let carolsKey = try unwrap(try await f.wrappedKey(zone, member: carol.userID, epoch: 1), for: carol)
            _ = try await f.alice.removeParticipant(carol.userID, from: zone)
            _ = try await bob.sharedDatabase.modify(saving: [makeNote("e2-a", in: zone), makeNote("e2-b", in: zone)], in: zone)
            _ = try await f.alice.removeParticipant(dave.userID, from: zone)
            _ = try await f.alice.privateDatabase.save(makeNote("e3-a", in: zone))
            let epochs = try await f.recordEpochs(zone)
            #expect(epochs.count == 404)
            #expect(epochs.values.filter { $0 == 1 }.count == 401)
            #expect(epochs.values.filter { $0 == 2 }.count == 2)
            #expect(epochs.values.filter { $0 == 3 }.count == 1)
            #expect(try await f.chainEpochs(zone) == [1, 2])

            await expectStoreError(.permissionFailure, "a participant cannot re-key") { try await bob.rekey(zone: zone) }

            let log = ProgressCalls()
            let count = try await f.alice.rekey(zone: zone) { done, total in log.append(done, total) }
            #expect(count == 403)
            #expect(log.calls == [[0, 403], [400, 403], [403, 403]])
            #expect(Set(try await f.recordEpochs(zone).values) == [3])
            #expect(try await f.chainEpochs(zone) == [])
            #expect(try await f.zoneKeyRows(zone).allSatisfy { $0.epoch == 3 })
            #expect(Set(try await f.zoneKeyRows(zone).map(\.member)) == [f.alice.userID, bob.userID])

            // Everything still reads, for the owner and the remaining participant, in new sessions.
            let aliceAll = try await f.fresh(f.alice).privateDatabase.records(in: zone, limit: 500)
            #expect(aliceAll.count == 404)
            #expect(aliceAll.allSatisfy { $0.keyEpoch == 3 && noteBody($0) == "body of \($0.name)" })
            let bobAll = try await f.fresh(bob).sharedDatabase.records(in: zone, limit: 500)
            #expect(bobAll.map(\.name) == aliceAll.map(\.name))
            #expect(bobAll.allSatisfy { noteBody($0) == "body of \($0.name)" })
            // Carol's old key now opens nothing in the file.
            let blob = try await f.sealedBlob(zone, "e1-000")
            #expect(throws: CryptoError.self) {
                _ = try open(blob, key: carolsKey, f: f, zone: zone, name: "e1-000", epoch: 3)
            }
            #expect(throws: CryptoError.self) {
                _ = try open(blob, key: carolsKey, f: f, zone: zone, name: "e1-000", epoch: 1)
            }

            // A second re-key has nothing to do.
            let again = ProgressCalls()
            #expect(try await f.alice.rekey(zone: zone) { again.append($0, $1) } == 0)
            #expect(again.calls == [[0, 0]])
        }
    }

    @Test func keysAreUnwrappedOncePerSession() async throws {
        try await withStore { f in
            let bob = try await f.user("Bob", "bob@example.com")
            let (zone, _) = try await f.sharedWith(bob, .readOnly)
            let rowID = try f.zoneRowID(zone)
            let session = try await f.fresh(bob)
            #expect(session.keyRing.cache.withLock { $0[rowID]?.keys.sorted() } == nil)
            _ = try await session.sharedDatabase.records(in: zone)
            #expect(session.keyRing.cache.withLock { $0[rowID]?.keys.sorted() } == [1])
            #expect(session.keyRing.cache.withLock { $0[rowID]?[1] } == (try unwrap(try await f.wrappedKey(zone, member: bob.userID, epoch: 1), for: bob)))
        }
    }
}

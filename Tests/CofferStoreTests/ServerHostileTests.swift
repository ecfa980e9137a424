import CofferCrypto
import CofferTestSupport
import CofferVault
import CofferStoreTestSupport
import Foundation
import GRDB
import Testing
@testable import CofferStore
#if canImport(Glibc)
import Glibc
#endif

/// Two attackers around a server. A user who bypasses their client and sends the server writes
/// of their own making: the server refuses what it can check without keys. A server that edits
/// its own store between requests (played by the test, on the server's SQLite file): clients
/// refuse what it serves, naming the zone.
@Suite("coffer serve: forged requests and a hostile server")
struct ServerHostileTests {
    /// Alice's zone "Family" shared with Bob (read-only) and Carol (read-write), and her private
    /// zone "Private", on a server.
    struct Scene {
        let fixture: ServerFixture
        let alice: (vault: Vault, store: Store, session: Session)
        let bob: (vault: Vault, store: Store, session: Session)
        let carol: (vault: Vault, store: Store, session: Session)
        let family: ZoneID
        let privateZone: ZoneID

        static func make(_ fixture: ServerFixture) async throws -> Scene {
            let alice = try await fixture.user("Alice", "alice@example.com")
            let bob = try await fixture.user("Bob Builder", "bob@example.com")
            let carol = try await fixture.user("Carol Danvers", "carol@example.com")
            let db = alice.session.privateDatabase
            let family = try await db.createZone(named: "Family")
            var note = Record(type: "Note", name: "n1", zone: family)
            note.encryptedValues["body"] = "eggs"
            _ = try await db.save(note)
            let share = try await alice.session.share(zone: family)
            _ = try await alice.session.addParticipant(bob.vault.identity.userID, permission: .readOnly, to: family)
            _ = try await alice.session.addParticipant(carol.vault.identity.userID, permission: .readWrite, to: family)
            _ = try await bob.session.acceptShare(url: share.url)
            _ = try await carol.session.acceptShare(url: share.url)
            let privateZone = try await db.createZone(named: "Private")
            var secret = Record(type: "Note", name: "p1", zone: privateZone)
            secret.values["title"] = "plain but private"
            _ = try await db.save(secret)
            return Scene(fixture: fixture, alice: alice, bob: bob, carol: carol, family: family, privateZone: privateZone)
        }

        func driver(_ store: Store) throws -> RemoteStorage {
            guard case .snapshot(let driver as RemoteStorage) = store.backend else { throw StoreError(.internalError, "not a server's store") }
            return driver
        }

        /// The row id `store`'s client knows a zone by (each client numbers the zones it meets
        /// for itself: requests name them by uid).
        func rowID(_ row: ZoneRow, in store: Store) throws -> Int64 { try driver(store).zones.handle(row.uid) }

        /// The zone's row and the state of its log, as `session` verifies them now.
        func head(_ session: Session, _ zone: ZoneID) async throws -> (row: ZoneRow, state: ZoneState) {
            try await session.store.read { db in
                let row = try session.accessControl.zoneRow(db, zone)
                return (row, try session.verifiedLogs.zoneLog(db, zone: row).state)
            }
        }

        /// A commit entry of `vault`'s on the zone's head, as a write (`signer` signs it).
        func commit(by vault: Vault, signer: Vault? = nil, on head: (row: ZoneRow, state: ZoneState), entries: [UInt8] = [], names: [UInt8] = [],
                    adjust: (inout LogEntry) -> Void = { _ in }) -> (write: StorageSnapshot.Write, seq: Int64) {
            let payload = RecordsPayload(epoch: head.state.epoch, ownerSeq: head.state.ownerSeq, label: nil,
                                         records: RecordsSummary(entries: entries, names: names))
            var entry = LogEntry(zoneUID: head.row.uid, seq: head.state.headSeq + 1, prev: head.state.headHash, kind: .commit,
                                 authorID: vault.identity.userID, time: Date().timeIntervalSince1970, payload: payload.encoded)
            adjust(&entry)
            let body = entry.body
            let signature = (signer ?? vault).signingKey.signature(for: body)
            return (.appendLog(zoneRowID: head.row.rowID, head: head.state.headSeq, entry: entry, body: body, signature: signature,
                               hash: LogEntry.hash(body: body, signature: signature), entries: entries, names: names), entry.seq)
        }
    }

    /// Expects the server to refuse `writes` sent as `store`'s user with `.permissionFailure`
    /// whose message holds `reason`.
    func expectRefused(_ scene: Scene, _ store: Store, _ writes: [StorageSnapshot.Write], _ reason: String,
                       sourceLocation: SourceLocation = #_sourceLocation) async throws {
        do {
            try await scene.driver(store).apply(writes, operation: nil)
            Issue.record("the server applied a forged batch (\(reason))", sourceLocation: sourceLocation)
        } catch let error as StoreError {
            #expect(error.code == .permissionFailure, "\(error)", sourceLocation: sourceLocation)
            #expect(error.message.contains(reason), "\(error.message)", sourceLocation: sourceLocation)
        }
    }

    @Test func serverRefusesForgedWrites() async throws {
        try await withServer(.sqlite) { fixture in
            let scene = try await Scene.make(fixture)
            let head = try await scene.head(scene.bob.session, scene.family)
            let bob = scene.bob, carol = scene.carol
            let carolHead = try await scene.head(carol.session, scene.family)
            // A read-only participant's commit, validly signed, on the head.
            try await expectRefused(scene, bob.store, [scene.commit(by: bob.vault, on: head).write], "commit by")
            // An entry in another user's name, or with a signature that does not verify.
            try await expectRefused(scene, bob.store, [scene.commit(by: carol.vault, signer: bob.vault, on: head).write], "their own log entries")
            try await expectRefused(scene, bob.store, [scene.commit(by: bob.vault, signer: carol.vault, on: head).write], "does not verify")
            // Key injection, and deleting a zone of someone else's.
            try await expectRefused(scene, bob.store, [.storeWrappedKey(zoneRowID: head.row.rowID, epoch: head.state.epoch, memberID: carol.vault.identity.userID,
                                                                        wrapped: SecureRandom.bytes(count: 80))], "others' keys")
            try await expectRefused(scene, bob.store, [.deleteZone(rowID: head.row.rowID)], "deletes it")
            try await expectRefused(scene, bob.store, [.setZoneMembers(zoneRowID: head.row.rowID, members: [], shareUID: nil)], "members")
            // A record row without a commit, and one its writer's commit does not list.
            let stamp = VersionStamp(name: "planted", type: "Note", parent: nil, seq: head.state.headSeq + 1, epoch: head.state.epoch,
                                     membershipSeq: head.state.ownerSeq, creatorID: carol.vault.identity.userID,
                                     modifierID: carol.vault.identity.userID, created: 1, modified: 1)
            let planted = SealedVersion(stamp: stamp, plain: Array("{}".utf8), plainTypes: [], sealed: nil, digest: .zero)
            try await expectRefused(scene, carol.store, [.insertRecord(zoneRowID: carolHead.row.rowID, planted)], "signed commit")
            let listed = scene.commit(by: carol.vault, on: carolHead, entries: SecureRandom.bytes(count: 32), names: [0, 7] + Array("planted".utf8))
            try await expectRefused(scene, carol.store, [listed.write, .insertRecord(zoneRowID: carolHead.row.rowID, planted)], "not the version its commit signs")
            // A read-write member's own commit in log entry format 1 after the zone's format 2
            // entries, and one that names a signing device, which this version does not know.
            try await expectRefused(scene, carol.store, [scene.commit(by: carol.vault, on: carolHead) { $0.format = .v1 }.write],
                                    "the entry is of format 1, after one of format 2")
            try await expectRefused(scene, carol.store, [scene.commit(by: carol.vault, on: carolHead) {
                $0.deviceID = [UInt8](repeating: 7, count: LogEntry.deviceIDLength)
                $0.userLogSeq = 1
            }.write], "signed by a device")
            // A version its commit lists, whose plain values break the schema: "body" is an
            // encrypted field of Note in this zone, here in the clear.
            var clearStamp = stamp
            clearStamp.name = "clear"
            let clear = SealedVersion(stamp: clearStamp, plain: Array(#"{"body":"in the clear"}"#.utf8), plainTypes: [1], sealed: nil, digest: .zero)
            let clearDigest = clear.digest(zoneUID: head.row.uid, creatorID: clearStamp.creatorID, created: clearStamp.created)
            let clearCommit = scene.commit(by: carol.vault, on: carolHead, entries: clearDigest.bytes, names: [0, 5] + Array("clear".utf8))
            await #expect { try await scene.driver(carol.store).apply([clearCommit.write, .insertRecord(zoneRowID: carolHead.row.rowID, clear)], operation: nil) } throws: { error in
                (error as? StoreError)?.code == .invalidArguments && (error as? StoreError)?.message.contains("schema") == true
            }
            // Over the local limits: 401 records for one commit.
            let many = (0..<401).map { StorageSnapshot.Write.deleteRecord(zoneRowID: carolHead.row.rowID, name: "x\($0)", storedSeq: 1) }
            await #expect { try await scene.driver(carol.store).apply([listed.write] + many, operation: nil) } throws: { error in
                (error as? StoreError)?.code == .limitExceeded
            }
            // Bookkeeping of someone else's zone or feed: another user's deletion marks, a zone
            // touched or its history compacted by someone outside it or without a commit.
            let familyRow = head.row
            try await expectRefused(scene, bob.store, [.zoneGone(familyRow, users: [carol.vault.identity.userID], reason: "removed")], "others' lists")
            try await expectRefused(scene, bob.store, [.zoneBack(familyRow, user: carol.vault.identity.userID)], "others' lists")
            try await expectRefused(scene, carol.store, [.compactTombstones(zoneRowID: familyRow.rowID, through: head.state.headSeq)], "compacts")
            let outsider = try await fixture.user("Mallory Mint", "mallory@example.com")
            let privateHead = try await scene.head(scene.alice.session, scene.privateZone)
            try await expectRefused(scene, outsider.store, [.touchZone(rowID: try scene.rowID(privateHead.row, in: outsider.store))], "touches it")
            // A card whose columns are not the card's (another name in the directory).
            let card = try ContactCard(vault: bob.vault)
            let identity = card.identity
            await #expect { try await scene.driver(bob.store).apply([.contact(userID: identity.userID, name: "Alice", email: "alice@example.com",
                                                                               signingKey: Array(identity.signingKey.rawRepresentation),
                                                                               boxKey: Array(identity.boxKey.rawRepresentation), card: Array(card.jsonData()),
                                                                               cardCreated: card.created, added: 0)], operation: nil) } throws: { error in
                (error as? StoreError)?.code == .invalidArguments
            }
            // Reads and listings of what is not theirs.
            let privateRow = try scene.rowID(try await scene.head(scene.alice.session, scene.privateZone).row, in: bob.store)
            try await expectRefused(scene, bob.store, [.addZoneMember(zoneRowID: privateRow, userID: bob.vault.identity.userID)], "lists its members")
            for need: StorageSnapshot.Need in [.records(zoneRowID: privateRow, names: ["p1"]), .allRows(zoneRowID: privateRow),
                                                .ownedZones(scene.alice.vault.identity.userID)] {
                await #expect(throws: StoreError.self) { try await scene.driver(bob.store).fetch([need], into: StorageSnapshot(writable: false)) }
            }
            // A lookup of the zone by name answers as for a zone the store does not have.
            let lookup = StorageSnapshot(writable: false)
            try await scene.driver(bob.store).fetch([.zone(scene.privateZone)], into: lookup)
            #expect(lookup.fetched.zones[scene.privateZone].map { $0 == nil } == true)
            // Nothing landed: the zone is where it was, and every user's audit is clean.
            #expect(try await scene.head(scene.alice.session, scene.family).state.headSeq == head.state.headSeq)
            for session in [scene.alice.session, bob.session, carol.session] { #expect(try await session.audit().findings.isEmpty) }
            // Carol's real write still lands.
            var real = Record(type: "Note", name: "real", zone: scene.family)
            real.encryptedValues["body"] = "ok"
            _ = try await carol.session.sharedDatabase.save(real)
        }
    }

    /// A read pin is its user's: another user who sends its id (learned, or guessed) gets a
    /// pin of their own, on the store as it is now, and the owner's pin keeps its state.
    @Test func anotherUsersPinIsNotShared() async throws {
        try await withServer(.sqlite) { fixture in
            let scene = try await Scene.make(fixture)
            let alice = try scene.driver(scene.alice.store), bob = try scene.driver(scene.bob.store)
            func head(_ driver: RemoteStorage, _ pin: RemoteReadPin) async throws -> Int64? {
                let t = StorageSnapshot(writable: false)
                try await pin.fetch([.zone(scene.family)], into: t)
                guard case .some(.some(let row)) = t.fetched.zones[scene.family] else { return nil }
                let heads = StorageSnapshot(writable: false)
                try await pin.fetch([.log(zoneRowID: row.rowID, after: Int64.max)], into: heads)
                return heads.fetched.heads[row.rowID]??.seq
            }
            let alicePin = RemoteReadPin(remote: alice)
            let pinned = try await head(alice, alicePin)
            let id = try #require(alicePin.id.withLock { $0 })
            // Alice writes: her pin still shows the state it was taken at.
            var note = Record(type: "Note", name: "later", zone: scene.family)
            note.encryptedValues["body"] = "after the pin"
            _ = try await scene.alice.session.privateDatabase.save(note)
            // Bob sends Alice's pin id: the server opens one of his own, on the state of now.
            let bobPin = RemoteReadPin(remote: bob)
            bobPin.id.withLock { $0 = id }
            let bobSees = try await head(bob, bobPin)
            #expect(bobPin.id.withLock { $0 } != id, "Bob was answered on Alice's pin")
            #expect(bobSees == (pinned ?? 0) + 1, "Bob read Alice's pinned state")
            #expect(try await head(alice, alicePin) == pinned && alicePin.id.withLock { $0 } == id, "Alice's pin moved")
            // Nor can Bob release it.
            try await bob.unpin(id)
            #expect(try await head(alice, alicePin) == pinned && alicePin.id.withLock { $0 } == id, "Bob released Alice's pin")
            await alicePin.close()
            await bobPin.close()
        }
    }

    /// The server's store edited between requests: a dropped commit, a membership rolled back,
    /// a key planted. Each client that saw more, or whose key it is, refuses, naming the zone.
    @Test func clientsRefuseAHostileServer() async throws {
        try await withServer(.sqlite) { fixture in
            let scene = try await Scene.make(fixture)
            let path = try #require(fixture.storePath)
            let alice = scene.alice
            var later = Record(type: "Note", name: "n2", zone: scene.family)
            later.encryptedValues["body"] = "later"
            _ = try await alice.session.privateDatabase.save(later)
            try alice.session.saveMarks()
            let head = try await scene.head(alice.session, scene.family)
            // A dropped commit: the last entry and its row go.
            let queue = try DatabaseQueue(path: path)
            let stored = try await queue.read { db in try serverRowID(db, head.row) }
            try await queue.write { db in
                try db.execute(sql: "DELETE FROM zone_log WHERE zone_id = ? AND seq = ?", arguments: [stored, head.state.headSeq])
                try db.execute(sql: "UPDATE zone SET sequence = ? WHERE id = ?", arguments: [head.state.headSeq - 1, stored])
                try db.execute(sql: "DELETE FROM record WHERE zone_id = ? AND name = 'n2'", arguments: [stored])
            }
            let fresh = try await fixture.client(alice.vault).openSession(vault: alice.vault)
            await #expect { _ = try await fresh.privateDatabase.record(named: "n1", in: scene.family) } throws: { error in
                let error = error as? StoreError
                return error?.code == .integrityFailure && error?.message.contains("'Family'") == true && error?.message.contains("rolled back") == true
            }
            // A planted key: Bob's wrapped key replaced by another key wrapped to him.
            let bobID = scene.bob.vault.identity.userID
            let planted = KeyRing.wrapZoneKey(SymmetricKey(), zoneUID: head.row.uid, epoch: head.state.epoch, to: scene.bob.vault.boxKey.publicKey)
            try await queue.write { db in
                try db.execute(sql: "UPDATE zone_key SET wrapped_key = ? WHERE zone_id = ? AND member_id = ?", arguments: [Data(planted), stored, bobID])
            }
            let bobFresh = try await fixture.client(scene.bob.vault).openSession(vault: scene.bob.vault)
            await #expect { _ = try await bobFresh.sharedDatabase.record(named: "n1", in: scene.family) } throws: { error in
                let error = error as? StoreError
                return error?.code == .integrityFailure && error?.message.contains("Family") == true
            }
            try queue.close()
        }
    }

    /// A membership rolled back by the server (Carol's removal taken out of the log, her key slot
    /// put back): the owner, who signed the removal, refuses the zone, naming it.
    @Test func membershipRolledBack() async throws {
        try await withServer(.sqlite) { fixture in
            let scene = try await Scene.make(fixture)
            let path = try #require(fixture.storePath)
            let before = try await scene.head(scene.alice.session, scene.family)
            _ = try await scene.alice.session.removeParticipant(scene.carol.vault.identity.userID, from: scene.family)
            try scene.alice.session.saveMarks()
            let queue = try DatabaseQueue(path: path)
            try await queue.write { db in
                let stored = try serverRowID(db, before.row)
                try db.execute(sql: "DELETE FROM zone_log WHERE zone_id = ? AND seq > ?", arguments: [stored, before.state.headSeq])
                try db.execute(sql: "UPDATE zone SET sequence = ? WHERE id = ?", arguments: [before.state.headSeq, stored])
            }
            try queue.close()
            let fresh = try await fixture.client(scene.alice.vault).openSession(vault: scene.alice.vault)
            await #expect { _ = try await fresh.fetchShare(in: scene.family) } throws: { error in
                let error = error as? StoreError
                return error?.code == .integrityFailure && error?.message.contains("'Family'") == true && error?.message.contains("rolled back") == true
            }
        }
    }

    /// An old answer replayed (by the server, or on the way): a read answered with what the
    /// server said before Alice's last commit shows her a log behind what she verified, and
    /// she refuses it, naming the zone.
    @Test func replayedOldAnswer() async throws {
        try await withServer(.sqlite) { fixture in
            let scene = try await Scene.make(fixture)
            let store = try await fixture.client(scene.alice.vault)
            let driver = try scene.driver(store)
            let alice = try await store.openSession(vault: scene.alice.vault)
            driver.keepsReadAnswers.withLock { $0 = true }
            _ = try await alice.privateDatabase.record(named: "n1", in: scene.family)
            driver.keepsReadAnswers.withLock { $0 = false }
            let old = driver.readAnswers.withLock { $0 }
            #expect(!old.isEmpty)
            var later = Record(type: "Note", name: "n9", zone: scene.family)
            later.encryptedValues["body"] = "after the answer was kept"
            _ = try await alice.privateDatabase.save(later)
            try alice.saveMarks()
            // A new session of Alice's (her marks say what she verified), whose reads are answered
            // with the old answers, in the order they came.
            let fresh = try await fixture.client(scene.alice.vault)
            let replaying = try scene.driver(fresh)
            let session = try await fresh.openSession(vault: scene.alice.vault)
            replaying.replayedReadAnswers.withLock { $0 = old }
            await #expect { _ = try await session.privateDatabase.record(named: "n1", in: scene.family) } throws: { error in
                let error = error as? StoreError
                return error?.code == .integrityFailure && error?.message.contains("'Family'") == true && error?.message.contains("rolled back") == true
            }
        }
    }

    /// Forks the family zone on the server: with both members' marks saved, the server keeps a
    /// copy of its store, lets Alice commit "a" (returning her heads), then serves the copy from a
    /// second instance, on which the caller lets Carol commit: two entries at one position.
    static func forkAfterAliceCommits(_ fixture: ServerFixture, _ scene: Scene, storePath path: String) async throws -> (ZoneHeads, ServerChild) {
        for session in [scene.alice.session, scene.carol.session] {
            _ = try await session.database(for: scene.family).record(named: "n1", in: scene.family)
            try session.saveMarks()
        }
        #expect(await fixture.server.stop().status == 0)
        // The store with its write-ahead log, if the stop left one (a checkpoint at close is
        // not promised): the main file alone may lack the last commits.
        let copy = path + ".copy"
        for suffix in ["", "-wal"] where FileManager.default.fileExists(atPath: path + suffix) {
            try FileManager.default.copyItem(atPath: path + suffix, toPath: copy + suffix)
        }
        let first = try await fixture.secondInstance()
        var a = Record(type: "Note", name: "a", zone: scene.family)
        a.encryptedValues["body"] = "Alice's branch"
        let aliceSession = try await fixture.client(scene.alice.vault, server: first).openSession(vault: scene.alice.vault)
        _ = try await aliceSession.privateDatabase.save(a)
        try aliceSession.saveMarks()
        let aliceHeads = try await aliceSession.verifiedHeads()
        await first.stop()
        try FileManager.default.removeItem(atPath: path)
        for suffix in ["-wal", "-shm"] { try? FileManager.default.removeItem(atPath: path + suffix) }
        for suffix in ["", "-wal"] where FileManager.default.fileExists(atPath: copy + suffix) {
            try FileManager.default.moveItem(atPath: copy + suffix, toPath: path + suffix)
        }
        return (aliceHeads, try await fixture.secondInstance())
    }

    /// A log forked by the server, one branch shown to each user: the user who saw the other
    /// branch refuses it, and comparing heads finds the fork.
    @Test func forkShownToTwoUsers() async throws {
        try await withServer(.sqlite) { fixture in
            let scene = try await Scene.make(fixture)
            let path = try #require(fixture.storePath)
            let (aliceHeads, second) = try await Self.forkAfterAliceCommits(fixture, scene, storePath: path)
            do {
                let carolSession = try await fixture.client(scene.carol.vault, server: second).openSession(vault: scene.carol.vault)
                var c = Record(type: "Note", name: "c", zone: scene.family)
                c.encryptedValues["body"] = "Carol's branch"
                _ = try await carolSession.sharedDatabase.save(c)
                let aliceAgain = try await fixture.client(scene.alice.vault, server: second).openSession(vault: scene.alice.vault)
                await #expect { _ = try await aliceAgain.privateDatabase.record(named: "n1", in: scene.family) } throws: { error in
                    let error = error as? StoreError
                    return error?.code == .integrityFailure && error?.message.contains("'Family'") == true && error?.message.contains("forked") == true
                }
                let comparison = try await carolSession.compareHeads(aliceHeads.encoded())
                #expect(!comparison.findings.isEmpty, "Carol's comparison with Alice's heads finds the fork")
                await second.stop()
            } catch {
                await second.stop(SIGKILL)
                throw error
            }
        }
    }
}

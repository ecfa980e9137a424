import CofferCrypto
@testable import CofferVault
import CofferStoreTestSupport
import Foundation
import GRDB
import Testing
@testable import CofferStore

/// The hostile store: an attacker who can read and write every byte of the store's file, with
/// raw SQL and libsodium, holding only their own vault (a backup thief, a database admin, a
/// participant who bypasses the library). Each attack is a test that must keep failing: the
/// forgery is refused on read or on write with `.integrityFailure` (or a refusal that gives the
/// attacker nothing), `audit` reports it, no read returns a value the attacker chose, and no
/// secret is ever sealed under a key the attacker holds.
@Suite("Hostile store")
struct HostileStoreTests {
    /// A store with Alice (owner), Bob and Carol (participants to be) and Mallory (the attacker,
    /// with a vault of her own), each with a session.
    struct Scene {
        let f: TestStore
        let bob: Session
        let carol: Session
        let mallory: Session
        var alice: Session { f.alice }

        static func run(_ body: (Scene) async throws -> Void) async throws {
            try await withStore { f in
                let scene = Scene(f: f, bob: try await f.user("Bob", "bob@example.com"), carol: try await f.user("Carol", "carol@example.com"),
                                  mallory: try await f.user("Mallory", "mallory@example.com"))
                try await body(scene)
            }
        }

        /// The attacker's own connection to the file.
        func raw<T>(_ body: (Database) throws -> T) throws -> T { try f.sqlite(body) }

        func rowID(_ zone: ZoneID) throws -> Int64 { try f.zoneRowID(zone) }

        /// A new session of the same user, who remembers what they verified (the same vault).
        func fresh(_ s: Session) async throws -> Session { try await f.fresh(s) }

        /// The same user on a machine that never saw the zone: the vault opened again, without
        /// its marks.
        func forgetful(_ s: Session) throws -> Session {
            try? FileManager.default.removeItem(atPath: s.vault.url.path + ".marks")
            let vault = try Vault.open(at: s.vault.url, passphrase: SecureBytes(copying: Array(testPassphrase.utf8)))
            for mark in try vault.marks.all() { try vault.marks.reset(zone: mark.zoneUID, to: nil) }
            return try f.store.session(vault: vault)
        }

        /// Every record of the zone that `s` can read, refused ones left out, by name.
        func readable(_ zone: ZoneID, as s: Session) async throws -> [String: CofferStore.Record] {
            let db = s.zoneIDIsMine(zone) ? s.privateDatabase : s.sharedDatabase
            let result = try await db.query(Query(recordType: "Note"), in: zone)
            return Dictionary(uniqueKeysWithValues: result.records.map { ($0.name, $0) })
        }

        /// No record `s` reads carries a value the attacker chose (they all say "mallory").
        func expectNoAttackerValue(_ zone: ZoneID, as s: Session, sourceLocation: SourceLocation = #_sourceLocation) async {
            guard let records = try? await readable(zone, as: s) else { return } // refused outright: nothing returned
            for record in records.values {
                let values = record.values.values.map { "\($0)" } + record.encryptedValues.values.map { "\($0)" }
                #expect(!values.contains { $0.lowercased().contains("mallory") }, "\(record.name) has a value the attacker chose",
                        sourceLocation: sourceLocation)
            }
        }

        /// No sealed value in the file opens with `key` (a key the attacker holds).
        func expectNothingSealedUnder(_ key: SymmetricKey, sourceLocation: SourceLocation = #_sourceLocation) throws {
            try raw { db in
                for row in try Row.fetchAll(db, sql: "SELECT z.owner_id, z.name, r.name, r.type, r.epoch, r.sealed, z.uid, z.id FROM record r JOIN zone z ON z.id = r.zone_id WHERE r.sealed IS NOT NULL") {
                    let zone = ZoneRow(rowID: row[7], uid: Array(row[6] as Data), id: ZoneID(name: row[1], ownerID: row[0]), sequence: 0,
                                       created: Date(), logFormat: 1)
                    let ad = RecordSealer.associatedData(zone: zone, name: row[2], type: row[3], epoch: row[4])
                    let opened = try? Envelope(bytes: Array(row[5] as Data)).open(using: key, authenticating: ad)
                    #expect(opened == nil, "record '\(row[2] as String)' is sealed under the attacker's key", sourceLocation: sourceLocation)
                }
            }
        }

        /// The audit of `s` reports a finding about the zone.
        func expectAuditFinding(_ zone: ZoneID, as s: Session, _ kinds: Set<AuditFinding.Kind> = [], sourceLocation: SourceLocation = #_sourceLocation) async throws {
            let report = try await s.audit()
            let found = report.findings.filter { $0.zone == zone && (kinds.isEmpty || kinds.contains($0.kind)) }
            #expect(!found.isEmpty, "audit reports nothing about zone '\(zone.name)': \(report.findings)", sourceLocation: sourceLocation)
        }

        /// The head of the zone's log in the file: its sequence and stored hash.
        func head(_ zone: ZoneID) throws -> (seq: Int64, hash: Digest32) {
            let id = try rowID(zone)
            return try raw { db in try #require(try SQLiteTransaction(db).logHead(zoneRowID: id)) }
        }

        /// Alice's zone with two notes, shared with Bob (read-only) and Carol (read-write), both accepted.
        func sharedZone(_ name: String = "Family") async throws -> ZoneID {
            let zone = try await f.makeZone(name)
            _ = try await alice.share(zone: zone, title: "Family notes")
            for (who, permission) in [(bob, SharePermission.readOnly), (carol, .readWrite)] {
                let share = try await alice.addParticipant(who.userID, permission: permission, to: zone)
                _ = try await who.acceptShare(url: share.url)
            }
            // Everyone has read the zone: their marks are at its head.
            for s in [alice, bob, carol] { _ = try await readable(zone, as: s) }
            return zone
        }

        /// Alice's zone with two notes, never shared.
        func unsharedZone(_ name: String = "Private") async throws -> ZoneID {
            let zone = try await f.makeZone(name)
            _ = try await readable(zone, as: alice)
            return zone
        }
    }

    // MARK: - 1. Key injection

    /// Mallory wraps a key of her own to Alice for the next epoch and moves the zone's (unsigned)
    /// epoch column to it: the log, not the column, says which epoch is current, so Alice's
    /// next save is sealed under the genuine key.
    @Test("key injection: a key wrapped to the owner for a next epoch, and the epoch column moved to it", arguments: [false, true])
    func keyInjectionNextEpoch(shared: Bool) async throws {
        try await Scene.run { s in
            let zone = shared ? try await s.sharedZone() : try await s.unsharedZone()
            let injected = SymmetricKey()
            let row = try await s.f.zoneRow(zone)
            try s.raw { db in
                for (user, epoch) in [(s.alice, Int64(2))] + (shared ? [(s.carol, Int64(2))] : []) {
                    let wrapped = KeyRing.wrapZoneKey(injected, zoneUID: row.uid, epoch: epoch, to: user.vault.identity.boxKey)
                    try db.execute(sql: "INSERT INTO zone_key (zone_id, epoch, member_id, wrapped_key) VALUES (?, ?, ?, ?)",
                                   arguments: [row.rowID, epoch, user.userID, Data(wrapped)])
                }
                try db.execute(sql: "UPDATE zone SET current_epoch = 2 WHERE id = ?", arguments: [row.rowID])
            }
            // Writers seal under the epoch the log says (1), with the key its commitment names.
            _ = try await s.fresh(s.alice).privateDatabase.save(makeNote("after", in: zone, body: "secret after the injection"))
            if shared {
                _ = try await s.fresh(s.carol).sharedDatabase.save(makeNote("carols", in: zone, body: "carol's secret"))
            }
            try s.expectNothingSealedUnder(injected)
            #expect(try await s.f.recordEpochs(zone)["after"] == 1)
            try await s.expectAuditFinding(zone, as: s.fresh(s.alice), [.cache])
        }
    }

    /// Mallory replaces the key wrapped to a member for the current epoch with one of her own,
    /// validly wrapped: it opens, but does not match the owner's commitment in the log.
    @Test("key injection: the current epoch's key wrapped to a member is replaced by another key", arguments: [false, true])
    func keyInjectionCurrentEpoch(shared: Bool) async throws {
        try await Scene.run { s in
            let zone = shared ? try await s.sharedZone() : try await s.unsharedZone()
            let victim = shared ? s.carol : s.alice
            let injected = SymmetricKey()
            let row = try await s.f.zoneRow(zone)
            try s.raw { db in
                let wrapped = KeyRing.wrapZoneKey(injected, zoneUID: row.uid, epoch: 1, to: victim.vault.identity.boxKey)
                try db.execute(sql: "UPDATE zone_key SET wrapped_key = ? WHERE zone_id = ? AND member_id = ?",
                               arguments: [Data(wrapped), row.rowID, victim.userID])
                #expect(db.changesCount == 1)
            }
            let db = shared ? try await s.fresh(victim).sharedDatabase : try await s.fresh(victim).privateDatabase
            let error = await expectStoreError(.integrityFailure) { try await db.save(makeNote("after", in: zone, body: "never sealed")) }
            #expect(error?.message.contains("not the one its owner committed to") == true, "\(error?.message ?? "")")
            await expectStoreError(.integrityFailure) { try await db.record(named: "n1", in: zone) }
            try s.expectNothingSealedUnder(injected)
            try await s.expectAuditFinding(zone, as: s.fresh(victim), [.key])
            if shared { #expect(noteBody(try await s.fresh(s.alice).privateDatabase.record(named: "n1", in: zone)) == "body of n1") }
        }
    }

    @Test("a forged wrapped key (bytes that are not a sealed box to the member) is refused")
    func forgedWrappedKey() async throws {
        try await Scene.run { s in
            let zone = try await s.sharedZone()
            let rid = try s.rowID(zone)
            try s.raw { db in
                try db.execute(sql: "UPDATE zone_key SET wrapped_key = ? WHERE zone_id = ? AND member_id = ?",
                               arguments: [Data(SecureRandom.bytes(count: 108)), rid, s.bob.userID])
            }
            let error = await expectStoreError(.integrityFailure) { try await s.fresh(s.bob).sharedDatabase.record(named: "n1", in: zone) }
            #expect(error?.message.contains("does not open") == true, "\(error?.message ?? "")")
            try await s.expectAuditFinding(zone, as: s.fresh(s.bob), [.key])
        }
    }

    /// A key-chain link of an older epoch replaced by one sealing another key under the current
    /// key (which a participant holds): records of the older epoch are refused, never opened
    /// with the substituted key.
    @Test("a key-chain link that opens to another key than the committed one is refused")
    func forgedChainLink() async throws {
        try await Scene.run { s in
            let zone = try await s.sharedZone()
            _ = try await s.alice.removeParticipant(s.bob.userID, from: zone) // epoch 2; n1, n2 sealed under epoch 1
            let row = try await s.f.zoneRow(zone)
            let current = try s.raw { db in try s.carol.keyRing.zoneKey(SQLiteTransaction(db), zone: row, epoch: 2, state: try s.carol.verifiedLogs.zoneState(SQLiteTransaction(db), zone: row)) }
            let substitute = SymmetricKey()
            try s.raw { db in
                let link = Envelope.seal(substitute.bytes, using: current, keyID: 2, authenticating: KeyRing.chainAD(zoneUID: row.uid, epoch: 1))
                try db.execute(sql: "UPDATE zone_key_chain SET sealed_key = ? WHERE zone_id = ? AND epoch = 1", arguments: [Data(link.bytes), row.rowID])
            }
            let error = await expectStoreError(.integrityFailure) { try await s.fresh(s.alice).privateDatabase.record(named: "n1", in: zone) }
            #expect(error?.message.contains("not the one its owner committed to") == true, "\(error?.message ?? "")")
            try await s.expectAuditFinding(zone, as: s.fresh(s.alice), [.record])
        }
    }

    // MARK: - 2. Contact key swap

    /// Mallory puts her own box key in Bob's contact row and dates it in the future, so that a
    /// card refresh would never repair it. Keys come from the signed card: the owner's next
    /// invitation (unshared zone) or rotation (shared zone) wraps the zone key to Bob's real key.
    @Test("contact key swap: a participant's box key column replaced and dated in the future", arguments: [false, true])
    func contactKeySwap(shared: Bool) async throws {
        try await Scene.run { s in
            let zone = shared ? try await s.sharedZone() : try await s.unsharedZone()
            try s.raw { db in
                try db.execute(sql: "UPDATE contact SET box_key = ?, name = 'Mallory', email = 'mallory@example.com', card_created = '2999-01-01T00:00:00Z' WHERE user_id = ?",
                               arguments: [Data(s.mallory.vault.identity.boxKey.rawRepresentation), s.bob.userID])
                #expect(db.changesCount == 1)
            }
            let alice = try await s.fresh(s.alice)
            if shared {
                _ = try await alice.removeParticipant(s.carol.userID, from: zone) // rotation: wrapped to Bob again
            } else {
                _ = try await alice.share(zone: zone, title: "now shared")
                _ = try await alice.addParticipant(s.bob.userID, permission: .readOnly, to: zone)
                _ = try await s.bob.acceptShare(url: try await alice.fetchShare(in: zone).url)
            }
            // Every key wrapped to Bob opens with Bob's key; none with Mallory's.
            let row = try await s.f.zoneRow(zone)
            for key in try await s.f.zoneKeyRows(zone) where key.member == s.bob.userID {
                let wrapped = try #require(try await s.f.wrappedKey(zone, member: s.bob.userID, epoch: key.epoch))
                #expect(throws: CryptoError.self) { _ = try SealedBoxWrap.open(wrapped, with: s.mallory.vault.boxKey) }
                _ = try KeyRing.unwrapZoneKey(wrapped, zoneUID: row.uid, epoch: key.epoch, with: s.bob.vault.boxKey)
            }
            #expect(noteBody(try await s.fresh(s.bob).sharedDatabase.record(named: "n1", in: zone)) == "body of n1")
            // The contact as the store reports it is the card's, not the row's.
            let contact = try await s.f.store.contact(matching: s.bob.userID)
            #expect(contact.name == "Bob" && contact.identity.boxKey == s.bob.vault.identity.boxKey)
            #expect((try? await s.f.store.contact(matching: "mallory@example.com"))?.userID == s.mallory.userID)
            let report = try await alice.audit()
            #expect(report.findings.contains { (f: AuditFinding) in f.kind == .contact && f.subject == s.bob.userID }, "\(report.findings)")
        }
    }

    @Test("a card dated in the future is refused, when added and when found stored")
    func futureDatedCard() async throws {
        try await Scene.run { s in
            let zone = try await s.sharedZone()
            let future = ContactCard(vault: s.mallory.vault, created: Date().addingTimeInterval(86_400 * 365))
            expectStoreErrorSync(.invalidArguments) { try s.f.store.addContact(future) }
            // Stored by hand: the card does not count, so Mallory's entries cannot verify.
            try s.raw { db in
                try db.execute(sql: "UPDATE contact SET card = ?, card_created = ? WHERE user_id = ?",
                               arguments: [future.jsonData(), future.created, s.mallory.userID])
            }
            expectStoreErrorSync(.unknownItem) { try s.f.store.contact(matching: "mallory@example.com") }
            _ = try s.raw { db in try forgeCommit(SQLiteTransaction(db), zone: zone, signer: s.mallory, name: "m1", title: "mallory", body: nil) }
            let result = try await s.fresh(s.alice).privateDatabase.query(Query(recordType: "Note"), in: zone)
            #expect(result.refused.keys.contains("m1"))
            #expect(result.refused["m1"]?.message.contains("dated") == true || result.refused["m1"]?.message.contains("not a contact") == true,
                    "\(result.refused["m1"]?.message ?? "")")
            await s.expectNoAttackerValue(zone, as: try await s.fresh(s.alice))
            let report = try await s.fresh(s.alice).audit()
            #expect(report.findings.contains { (f: AuditFinding) in f.kind == .contact && f.subject == s.mallory.userID }, "\(report.findings)")
        }
    }

    @Test("a new card for a user id whose keys changed is refused")
    func cardWithOtherKeys() async throws {
        try await Scene.run { s in
            // A card signed with Bob's signing key (Bob's id) but another box key.
            let other = X25519.PrivateKey()
            let identity = UserIdentity(name: "Bob", email: "bob@example.com", signingKey: s.bob.vault.identity.signingKey, boxKey: other.publicKey)
            let created = ISO8601DateFormatter().string(from: Date().addingTimeInterval(60))
            let signature = s.bob.vault.signingKey.signature(for: ContactCard.signedBytes(identity: identity, created: created))
            let json: [String: Any] = ["format": ContactCard.format, "version": ContactCard.version, "userID": identity.userID, "name": "Bob",
                                       "email": "bob@example.com", "signingKey": Data(identity.signingKey.rawRepresentation).base64EncodedString(),
                                       "boxKey": Data(other.publicKey.rawRepresentation).base64EncodedString(), "created": created,
                                       "signature": Data(signature).base64EncodedString()]
            let card = try ContactCard.verify(try JSONSerialization.data(withJSONObject: json))
            let error = expectStoreErrorSync(.invalidArguments) { try s.f.store.addContact(card) }
            #expect(error?.message.contains("keeps its keys") == true, "\(error?.message ?? "")")
            #expect(try s.f.store.contact(matching: s.bob.userID).identity.boxKey == s.bob.vault.identity.boxKey)
        }
    }

    // MARK: - 3. Membership rollback

    /// Carol was read-write and is demoted to read-only. With her own vault and raw SQL she puts
    /// the log back to before her demotion (the entry deleted, everything after it too) and
    /// signs a commit in its place. Everyone who saw the demotion refuses the store.
    @Test("membership rollback: a demoted writer drops the demotion entry and writes in its place")
    func membershipRollbackShared() async throws {
        try await Scene.run { s in
            let zone = try await s.sharedZone()
            let before = try s.head(zone).seq
            _ = try await s.alice.setPermission(.readOnly, for: s.carol.userID, in: zone)
            _ = try await s.readable(zone, as: s.bob) // Bob saw the demotion too
            let rid = try s.rowID(zone)
            try s.raw { db in
                try db.execute(sql: "DELETE FROM zone_log WHERE zone_id = ? AND seq > ?", arguments: [rid, before])
                try forgeCommit(SQLiteTransaction(db), zone: zone, signer: s.carol, name: "by-carol", title: "mallory-style edit", body: "carol rewrote history")
            }
            for reader in [s.alice, s.bob] {
                let db = reader === s.alice ? try await s.fresh(reader).privateDatabase : try await s.fresh(reader).sharedDatabase
                let error = await expectStoreError(.integrityFailure) { try await db.record(named: "by-carol", in: zone) }
                #expect(error?.message.contains("zone 'Family'") == true, "\(error?.message ?? "")")
                await s.expectNoAttackerValue(zone, as: try await s.fresh(reader))
            }
            try await s.expectAuditFinding(zone, as: s.fresh(s.alice), [.log])
        }
    }

    /// The unshared variant: a zone once shared with Carol read-write, then no longer (the share
    /// stopped). Carol drops the entry that stopped it and writes.
    @Test("membership rollback: a former writer drops the entry that stopped the share and writes")
    func membershipRollbackUnshared() async throws {
        try await Scene.run { s in
            let zone = try await s.sharedZone()
            let before = try s.head(zone).seq
            try await s.alice.stopSharing(zone: zone)
            _ = try await s.readable(zone, as: s.alice)
            let rid = try s.rowID(zone)
            try s.raw { db in
                try db.execute(sql: "DELETE FROM zone_log WHERE zone_id = ? AND seq > ?", arguments: [rid, before])
                try forgeCommit(SQLiteTransaction(db), zone: zone, signer: s.carol, name: "by-carol", title: "mallory-style", body: nil)
            }
            await expectStoreError(.integrityFailure) { try await s.fresh(s.alice).privateDatabase.record(named: "by-carol", in: zone) }
            await expectStoreError(.integrityFailure) { try await s.fresh(s.alice).privateDatabase.save(makeNote("n3", in: zone)) }
            try await s.expectAuditFinding(zone, as: s.fresh(s.alice), [.log])
        }
    }

    /// A reader who never saw the demotion cannot tell it was dropped (fork consistency is for
    /// users comparing heads), but the dropped entry cannot be put back with a forged one: the
    /// demoted writer's commit after it is refused.
    @Test("a demoted writer's commit after the demotion entry is refused even by a reader who saw nothing before")
    func demotedWriterAfterDemotion() async throws {
        try await Scene.run { s in
            let zone = try await s.sharedZone()
            _ = try await s.alice.setPermission(.readOnly, for: s.carol.userID, in: zone)
            _ = try s.raw { db in try forgeCommit(SQLiteTransaction(db), zone: zone, signer: s.carol, name: "by-carol", title: "mallory", body: nil) }
            let stranger = try s.forgetful(s.alice)
            let error = await expectStoreError(.integrityFailure) { try await stranger.privateDatabase.record(named: "by-carol", in: zone) }
            #expect(error?.message.contains("has read-only permission") == true, "\(error?.message ?? "")")
            await s.expectNoAttackerValue(zone, as: stranger)
            try await s.expectAuditFinding(zone, as: stranger, [.log])
        }
    }

    // MARK: - 4. Rekey laundering

    /// A row edited by hand (its plain value, parent, creator, dates) must not come out of a
    /// re-key validly signed by the owner: the re-key verifies every row first, stops naming the
    /// record, and writes nothing.
    @Test("rekey laundering: a row edited by hand stops the re-key, named, before anything is written",
          arguments: [(false, "plain"), (true, "plain"), (true, "parent"), (true, "creator_id"), (true, "created_at")])
    func rekeyLaundering(shared: Bool, column: String) async throws {
        try await Scene.run { s in
            let zone = shared ? try await s.sharedZone() : try await s.unsharedZone()
            if shared {
                _ = try await s.alice.removeParticipant(s.bob.userID, from: zone)
            } else {
                _ = try await s.alice.share(zone: zone, title: "briefly")
                try await s.alice.stopSharing(zone: zone) // epoch 2: the notes are under epoch 1
            }
            let id = try s.rowID(zone)
            let value: any DatabaseValueConvertible = switch column {
            case "plain": #"{"title":"mallory was here"}"#
            case "parent": "n2"
            case "creator_id": s.mallory.userID
            default: 1.0
            }
            try s.raw { db in
                try db.execute(sql: "UPDATE record SET \(column) = ? WHERE zone_id = ? AND name = 'n1'", arguments: [value, id])
                #expect(db.changesCount == 1)
            }
            let headBefore = try s.head(zone)
            let rowsBefore = try s.raw { db in try Row.fetchAll(db, sql: "SELECT * FROM record WHERE zone_id = ? ORDER BY name", arguments: [id]) }
            let error = await expectStoreError(.integrityFailure) { try await s.fresh(s.alice).rekey(zone: zone) }
            #expect(error?.message.contains("record 'n1'") == true && error?.message.contains("before writing anything") == true,
                    "\(error?.message ?? "")")
            let headAfter = try s.head(zone)
            #expect(headAfter.seq == headBefore.seq && headAfter.hash == headBefore.hash)
            #expect(try s.raw { db in try Row.fetchAll(db, sql: "SELECT * FROM record WHERE zone_id = ? ORDER BY name", arguments: [id]) } == rowsBefore)
            await s.expectNoAttackerValue(zone, as: try await s.fresh(s.alice))
            try await s.expectAuditFinding(zone, as: s.fresh(s.alice), [.record])
        }
    }

    /// The laundering without an edit: an older signed version of a row put back (or a deleted
    /// row put back), which passes the per-row check. A re-key would sign it again as current;
    /// it stops instead, before writing anything, naming the record and the later entry.
    @Test("rekey laundering: an older signed version put back, or a deleted record put back, stops the re-key",
          arguments: ["rolled back", "put back after deletion"])
    func rekeyLaunderingOldVersion(variant: String) async throws {
        try await Scene.run { s in
            let zone = try await s.unsharedZone()
            let id = try s.rowID(zone)
            let name = variant == "rolled back" ? "n1" : "n2"
            let old = try s.raw { db in try #require(try Row.fetchOne(db, sql: "SELECT * FROM record WHERE zone_id = ? AND name = ?", arguments: [id, name])) }
            if variant == "rolled back" {
                _ = try await s.alice.privateDatabase.save(makeNote("n1", in: zone, title: "second", body: "the current version"), policy: .allKeys)
            } else {
                _ = try await s.alice.privateDatabase.modify(saving: [], deleting: [RecordDeletion(name: "n2")], in: zone)
            }
            _ = try await s.alice.share(zone: zone, title: "briefly")
            try await s.alice.stopSharing(zone: zone) // epoch 2: the notes are under epoch 1
            try s.raw { db in
                try db.execute(sql: "DELETE FROM record WHERE zone_id = ? AND name = ?", arguments: [id, name])
                let columns = old.columnNames.joined(separator: ", ")
                try db.execute(sql: "INSERT INTO record (\(columns)) VALUES (\(old.columnNames.map { _ in "?" }.joined(separator: ", ")))",
                               arguments: StatementArguments(old.databaseValues))
            }
            let headBefore = try s.head(zone)
            let error = await expectStoreError(.integrityFailure) { try await s.fresh(s.alice).rekey(zone: zone) }
            let why = variant == "rolled back" ? "wrote a later one" : "was deleted by entry"
            #expect(error?.message.contains("record '\(name)'") == true && error?.message.contains(why) == true
                    && error?.message.contains("before writing anything") == true, "\(error?.message ?? "")")
            let headAfter = try s.head(zone)
            #expect(headAfter.seq == headBefore.seq && headAfter.hash == headBefore.hash)
            try await s.expectAuditFinding(zone, as: s.fresh(s.alice), [.record])
        }
    }

    // MARK: - The change feed's deletions

    /// `record_tombstone` only finds deletions for the feed: a deletion planted for a record the
    /// log never deleted is refused (named), and a genuine one's author, label and time come
    /// from its signed entry, whatever the row says.
    @Test("change feed: a planted deletion is refused; an edited one shows what its entry signed")
    func feedTombstones() async throws {
        try await Scene.run { s in
            let zone = try await s.sharedZone()
            var db = s.alice.privateDatabase
            db.transactionAuthor = "cleanup"
            _ = try await db.modify(saving: [], deleting: [RecordDeletion(name: "n2")], in: zone)
            db.transactionAuthor = nil
            let deletedAt = try s.head(zone).seq
            let token = try await s.bob.sharedDatabase.changes(in: zone, since: nil).token
            _ = try await db.save(makeNote("n3", in: zone))
            let rid = try s.rowID(zone)
            try s.raw { db in
                try db.execute(sql: "UPDATE record_tombstone SET author_id = ?, author_label = 'mallory', deleted_at = 0 WHERE zone_id = ? AND name = 'n2'",
                               arguments: [s.mallory.userID, rid])
                try db.execute(sql: "INSERT INTO record_tombstone (zone_id, name, seq, author_id, author_label, deleted_at) VALUES (?, 'n1', ?, ?, NULL, 0)",
                               arguments: [rid, deletedAt + 1, s.alice.userID])
            }
            let reader = try await s.fresh(s.bob).sharedDatabase
            let all = try await reader.changes(in: zone, since: nil)
            let n2 = try #require(all.deleted.first { $0.name == "n2" })
            #expect(n2.authorID == s.alice.userID && n2.transactionAuthor == "cleanup" && n2.deleted.timeIntervalSince1970 > 0)
            #expect(!all.deleted.contains { $0.name == "n1" })
            #expect(all.refused["n1"]?.message.contains("is not in its signed log") == true, "\(all.refused)")
            let later = try await reader.changes(in: zone, since: token)
            #expect(later.changed.map(\.name) == ["n3"] && later.deleted.isEmpty && later.refused.keys.sorted() == ["n1"])
            try await s.expectAuditFinding(zone, as: s.fresh(s.alice), [.cache])
        }
    }

    /// A deletion hidden from the feed (its tombstone deleted, or moved back to an earlier
    /// deletion of the same name) passes the feed; audit reports it from the log.
    @Test("change feed: a hidden or misdated deletion is reported by audit", arguments: ["hidden", "misdated"])
    func feedHiddenDeletion(variant: String) async throws {
        try await Scene.run { s in
            let zone = try await s.unsharedZone()
            let db = s.alice.privateDatabase
            _ = try await db.modify(saving: [], deleting: [RecordDeletion(name: "n2")], in: zone)
            let first = try s.head(zone).seq
            _ = try await db.save(makeNote("n2", in: zone))
            _ = try await db.modify(saving: [], deleting: [RecordDeletion(name: "n2")], in: zone)
            #expect(try await s.fresh(s.alice).audit().findings.isEmpty)
            let rid = try s.rowID(zone)
            try s.raw { db in
                if variant == "hidden" {
                    try db.execute(sql: "DELETE FROM record_tombstone WHERE zone_id = ?", arguments: [rid])
                } else {
                    try db.execute(sql: "UPDATE record_tombstone SET seq = ? WHERE zone_id = ? AND name = 'n2'", arguments: [first, rid])
                }
            }
            let report = try await s.fresh(s.alice).audit()
            let finding = report.findings.first { $0.zone == zone && $0.subject == "n2" }
            #expect(finding?.kind == .cache, "\(report.findings)")
            #expect(finding?.message.contains(variant == "hidden" ? "does not have it" : "dates it at entry \(first)") == true, "\(report.findings)")
        }
    }

    /// A read-write participant signs a commit whose transaction author holds a terminal escape
    /// sequence: the entry does not decode, so every reader refuses it, and its label never
    /// reaches anyone's output.
    @Test("a commit whose transaction author holds control characters is refused")
    func controlCharactersInLabel() async throws {
        try await Scene.run { s in
            let zone = try await s.sharedZone()
            try s.raw { db in _ = try forgeCommit(SQLiteTransaction(db), zone: zone, signer: s.carol, name: "c1", title: "t", body: nil, label: "ok\u{1b}[2J\u{9b}31m") }
            let result = try await s.fresh(s.alice).privateDatabase.query(Query(recordType: "Note"), in: zone)
            #expect(result.refused.keys.contains("c1"), "\(result.refused)")
            #expect(!result.records.contains { $0.transactionAuthor?.contains("\u{1b}") == true })
            try await s.expectAuditFinding(zone, as: s.fresh(s.alice), [.log])
        }
    }

    // MARK: - The schema

    /// The schema (`field_schema`) is not signed, and some plain types share a JSON form: a
    /// string and a reference, a double and a date, lists of them. Retyped, the same bytes would
    /// read as another value; the version hash signs each plain field's type, so the record is
    /// refused instead.
    @Test("a plain field retyped in the schema (string as reference, double as date, list of strings as list of references) is refused",
          arguments: [("title", "ref"), ("score", "date"), ("tags", "[ref]")])
    func retypedField(field: String, newType: String) async throws {
        try await Scene.run { s in
            let zone = try await s.f.makeZone("Typed")
            var record = CofferStore.Record(type: "Item", name: "i1", zone: zone)
            record.values["title"] = .string("first")
            record.values["score"] = .double(12.5)
            record.values["tags"] = .list([.string("a"), .string("b")])
            _ = try await s.alice.privateDatabase.save(record)
            let rid = try s.rowID(zone)
            try s.raw { db in
                try db.execute(sql: "UPDATE field_schema SET value_type = ? WHERE zone_id = ? AND record_type = 'Item' AND field = ?",
                               arguments: [newType, rid, field])
                #expect(db.changesCount == 1)
            }
            let reader = try await s.fresh(s.alice)
            let error = await expectStoreError(.integrityFailure) { try await reader.privateDatabase.record(named: "i1", in: zone) }
            #expect(error?.message.contains("record 'i1'") == true, "\(error?.message ?? "")")
            let result = try await reader.privateDatabase.query(Query(recordType: "Item"), in: zone)
            #expect(result.records.isEmpty && result.refused.keys.sorted() == ["i1"])
            try await s.expectAuditFinding(zone, as: s.fresh(s.alice), [.record])
        }
    }

    /// A writer skips the key checks of a record whose keys are all in its type's schema, so a
    /// field name in the schema must be one Coffer writes. Mallory adds a field named with a
    /// quote and a control character: the schema is refused, on save and on read, and nothing
    /// is written.
    @Test("a field named outside the identifier rules, planted in the schema, is refused on save and read; nothing is written")
    func plantedFieldName() async throws {
        try await Scene.run { s in
            let zone = try await s.f.makeZone("Named")
            var record = CofferStore.Record(type: "Item", name: "i1", zone: zone)
            record.values["title"] = .string("first")
            _ = try await s.alice.privateDatabase.save(record)
            let rid = try s.rowID(zone)
            let planted = "x\"); DROP TABLE record; --\u{7}"
            try s.raw { db in
                try db.execute(sql: "INSERT INTO field_schema (zone_id, record_type, field, value_type, encrypted) VALUES (?, 'Item', ?, 'string', 0)",
                               arguments: [rid, planted])
            }
            let writer = try await s.fresh(s.alice)
            var second = CofferStore.Record(type: "Item", name: "i2", zone: zone)
            second.values[planted] = .string("v")
            let error = await expectStoreError(.integrityFailure) { try await writer.privateDatabase.save(second) }
            #expect(error?.message.contains("Coffer does not write") == true, "\(error?.message ?? "")")
            #expect(error?.message.contains("\u{7}") == false)
            await expectStoreError(.integrityFailure) { try await writer.privateDatabase.record(named: "i1", in: zone) }
            let count = try s.raw { db in try Int.fetchOne(db, sql: "SELECT count(*) FROM record WHERE zone_id = ? AND name = 'i2'", arguments: [rid]) }
            #expect(count == 0)
        }
    }

    // MARK: - Indexes

    /// The log's head is read through an index (`zone_log_head`), which no signature covers.
    /// Mallory points it at another index's b-tree (their root pages swapped in
    /// `sqlite_schema`): the head read is garbage. Alice, who verified the log before, is
    /// refused with a clear error, and never shown a record.
    @Test("the log head index pointed at another b-tree: a reader who verified the log is refused, with no record shown")
    func swappedLogHeadIndex() async throws {
        try await Scene.run { s in
            let zone = try await s.f.makeZone("Headed")
            var record = CofferStore.Record(type: "Item", name: "i1", zone: zone)
            record.values["title"] = .string("first")
            _ = try await s.alice.privateDatabase.save(record)
            try s.raw { db in
                let pages = try Row.fetchAll(db, sql: "SELECT name, rootpage FROM sqlite_schema WHERE name IN ('zone_log_head', 'record_parent')")
                    .reduce(into: [String: Int64]()) { $0[$1[0]] = $1[1] }
                let version = try #require(try Int64.fetchOne(db, sql: "PRAGMA schema_version"))
                try db.execute(sql: "PRAGMA writable_schema = ON")
                try db.execute(sql: "UPDATE sqlite_schema SET rootpage = ? WHERE name = 'zone_log_head'", arguments: [pages["record_parent"]])
                try db.execute(sql: "UPDATE sqlite_schema SET rootpage = ? WHERE name = 'record_parent'", arguments: [pages["zone_log_head"]])
                try db.execute(sql: "PRAGMA schema_version = \(version + 1)")
                try db.execute(sql: "PRAGMA writable_schema = OFF")
            }
            let reader = try await s.fresh(s.alice)
            do {
                let got = try await reader.privateDatabase.record(named: "i1", in: zone)
                Issue.record("a record was shown through a swapped log index: \(got.values)")
            } catch let error as StoreError {
                // Here the garbage head reads as no log at all: less than the mark says.
                #expect(error.code == .integrityFailure && error.message.contains("zone 'Headed'"), "\(error.code): \(error.message)")
            }
        }
    }

    /// Indexes are not signed. Mallory swaps the b-trees of two field indexes (their root pages
    /// in `sqlite_schema`) under a running session: SQLite then answers a query on `kind` from
    /// the `title` index. Each record is still genuine, but not what the query asked for: it is
    /// refused, and a page out of the sort order fails.
    @Test("field indexes swapped under a running session: non-matching records are refused, an unordered page fails")
    func swappedIndexes() async throws {
        try await Scene.run { s in
            let zone = try await s.f.makeZone("Indexed")
            let db = s.alice.privateDatabase
            for (name, title, kind) in [("r1", "A", "B"), ("r2", "B", "A"), ("r3", "C", "C")] {
                var record = CofferStore.Record(type: "Item", name: name, zone: zone)
                record.values["title"] = .string(title)
                record.values["kind"] = .string(kind)
                _ = try await db.save(record)
            }
            let byKind = Query(recordType: "Item", predicates: [.init("kind", .equal, .string("A"))])
            #expect(try await db.query(byKind, in: zone).records.map(\.name) == ["r2"])
            _ = try await db.query(Query(recordType: "Item", predicates: [.init("title", .equal, .string("A"))]), in: zone)
            let kindIndex = SQLiteFieldIndex.name(recordType: "Item", field: "kind"), titleIndex = SQLiteFieldIndex.name(recordType: "Item", field: "title")
            try s.raw { db in
                let pages = try Row.fetchAll(db, sql: "SELECT name, rootpage FROM sqlite_schema WHERE name IN (?, ?)", arguments: [kindIndex, titleIndex])
                    .reduce(into: [String: Int64]()) { $0[$1[0]] = $1[1] }
                let version = try #require(try Int64.fetchOne(db, sql: "PRAGMA schema_version"))
                try db.execute(sql: "PRAGMA writable_schema = ON")
                try db.execute(sql: "UPDATE sqlite_schema SET rootpage = ? WHERE name = ?", arguments: [pages[titleIndex], kindIndex])
                try db.execute(sql: "UPDATE sqlite_schema SET rootpage = ? WHERE name = ?", arguments: [pages[kindIndex], titleIndex])
                try db.execute(sql: "PRAGMA schema_version = \(version + 1)")
                try db.execute(sql: "PRAGMA writable_schema = OFF")
            }
            let result = try await db.query(byKind, in: zone)
            #expect(!result.records.contains { $0.values["kind"] != .string("A") }, "\(result.records.map(\.name))")
            #expect(result.refused["r1"]?.message.contains("does not match the query") == true, "\(result.refused)")
            let sorted = Query(recordType: "Item", sort: [.init("kind")])
            let error = await expectStoreError(.integrityFailure) { try await db.query(sorted, in: zone) }
            #expect(error?.message.contains("out of order") == true, "\(error?.message ?? "")")
        }
    }

    /// The index on record names, pointed at a b-tree Mallory built: looking up `n1` finds
    /// `n2`'s row (SQLite then reads the name from the index, the rest from `n2`'s row). The
    /// hybrid fails its version hash: neither `n2`'s values nor anything else come back as `n1`.
    @Test("a name lookup that an edited index sends to another record's row is refused")
    func forgedNameIndex() async throws {
        try await Scene.run { s in
            let zone = try await s.unsharedZone()
            let rid = try s.rowID(zone)
            try s.raw { db in
                let n2 = try #require(try Int64.fetchOne(db, sql: "SELECT id FROM record WHERE zone_id = ? AND name = 'n2'", arguments: [rid]))
                // An index of the same shape (zone id, name → row id), holding n1 → n2's row id.
                try db.execute(sql: "CREATE TABLE fake (zone_id INTEGER, name TEXT); CREATE UNIQUE INDEX fake_index ON fake (zone_id, name)")
                try db.execute(sql: "INSERT INTO fake (rowid, zone_id, name) SELECT id, zone_id, name FROM record WHERE zone_id = ? AND name NOT IN ('n1', 'n2')",
                               arguments: [rid])
                try db.execute(sql: "INSERT INTO fake (rowid, zone_id, name) VALUES (?, ?, 'n1')", arguments: [n2, rid])
                let root = try #require(try Int64.fetchOne(db, sql: "SELECT rootpage FROM sqlite_schema WHERE name = 'fake_index'"))
                let version = try #require(try Int64.fetchOne(db, sql: "PRAGMA schema_version"))
                try db.execute(sql: "PRAGMA writable_schema = ON")
                try db.execute(sql: "UPDATE sqlite_schema SET rootpage = ? WHERE name = 'sqlite_autoindex_record_1'", arguments: [root])
                try db.execute(sql: "PRAGMA schema_version = \(version + 1)")
                try db.execute(sql: "PRAGMA writable_schema = OFF")
            }
            let error = await expectStoreError(.integrityFailure) { try await s.alice.privateDatabase.record(named: "n1", in: zone) }
            #expect(error?.message.contains("record 'n1'") == true, "\(error?.message ?? "")")
            let fetched = try await s.alice.privateDatabase.records(named: ["n1"], in: zone)
            #expect(fetched.count == 1)
            #expect(throws: StoreError.self) { try fetched["n1"]?.get() }
        }
    }

    // MARK: - Rollback, cuts, drops

    @Test("a whole-file rollback: an old copy of the store put back after users worked", arguments: [false, true])
    func wholeFileRollback(shared: Bool) async throws {
        try await Scene.run { s in
            let zone = shared ? try await s.sharedZone() : try await s.unsharedZone()
            let path = s.f.store.url.path
            // The copy, taken as a backup would be (a consistent snapshot).
            let copy = s.f.folder.appendingPathComponent("old.sqlite").path
            let snapshot = try DatabaseQueue(path: path)
            try await snapshot.writeWithoutTransaction { db in try db.execute(sql: "VACUUM INTO ?", arguments: [copy]) }
            try snapshot.close()
            _ = try await s.alice.privateDatabase.save(makeNote("later", in: zone, body: "written after the copy"))
            if shared { _ = try await s.alice.setPermission(.readOnly, for: s.carol.userID, in: zone) }
            for s2 in [s.alice] + (shared ? [s.bob] : []) { _ = try await s.readable(zone, as: s2) }
            try s.raw { db in
                // Put the copy back, page for page, through SQLite (as restoring a backup would).
                try db.execute(sql: "ATTACH DATABASE ? AS old", arguments: [copy])
                for table in ["zone_log", "record", "zone_key", "zone_member"] {
                    try db.execute(sql: "DELETE FROM main.\(table)")
                    try db.execute(sql: "INSERT INTO main.\(table) SELECT * FROM old.\(table)")
                }
                try db.execute(sql: "UPDATE main.zone SET sequence = (SELECT sequence FROM old.zone WHERE old.zone.id = main.zone.id)")
            }
            _ = path
            for reader in [s.alice] + (shared ? [s.bob] : []) {
                let db = reader === s.alice ? try await s.fresh(reader).privateDatabase : try await s.fresh(reader).sharedDatabase
                let error = await expectStoreError(.integrityFailure) { try await db.record(named: "n1", in: zone) }
                #expect(error?.message.contains("zone 'Family'") == true || error?.message.contains("zone 'Private'") == true, "\(error?.message ?? "")")
                #expect(error?.message.contains("rolled back") == true, "\(error?.message ?? "")")
            }
            if shared {
                // Carol was demoted after the copy but never read since: she cannot know the
                // demotion was dropped, and her client writes. Those who saw it refuse her write.
                _ = try? await s.fresh(s.carol).sharedDatabase.save(makeNote("c9", in: zone, title: "mallory"))
                await expectStoreError(.integrityFailure) { try await s.fresh(s.alice).privateDatabase.record(named: "c9", in: zone) }
                await expectStoreError(.integrityFailure) { try await s.fresh(s.bob).sharedDatabase.record(named: "c9", in: zone) }
            }
            try await s.expectAuditFinding(zone, as: s.fresh(s.alice), [.log])
        }
    }

    /// Alice deletes a zone; Mallory puts back a copy of it from an older file (its rows, keys
    /// and log, all genuine). Alice's marks remember the deletion: the zone is refused, to her
    /// and in her zone list, and audit reports it.
    @Test("a zone its owner deleted, put back from an old copy of the file, is refused")
    func deletedZonePutBack() async throws {
        try await Scene.run { s in
            let zone = try await s.unsharedZone()
            let copy = s.f.folder.appendingPathComponent("old.sqlite").path
            let snapshot = try DatabaseQueue(path: s.f.store.url.path)
            try await snapshot.writeWithoutTransaction { db in try db.execute(sql: "VACUUM INTO ?", arguments: [copy]) }
            try snapshot.close()
            try await s.alice.privateDatabase.deleteZone(zone)
            let mark = try #require(try s.alice.vault.marks.all().first { $0.isDeletion })
            #expect(mark.ownerID == s.alice.userID)
            try s.raw { db in
                try db.execute(sql: "ATTACH DATABASE ? AS old", arguments: [copy])
                for table in ["zone", "zone_key", "zone_log", "record"] {
                    try db.execute(sql: "INSERT INTO main.\(table) SELECT * FROM old.\(table) WHERE \(table == "zone" ? "name" : "zone_id IN (SELECT id FROM old.zone WHERE name") = 'Private'\(table == "zone" ? "" : ")")")
                }
            }
            let alice = try await s.fresh(s.alice)
            let error = await expectStoreError(.integrityFailure) { try await alice.privateDatabase.record(named: "n1", in: zone) }
            #expect(error?.message.contains("you deleted it") == true, "\(error?.message ?? "")")
            #expect(try await alice.privateDatabase.zones().isEmpty)
            await expectStoreError(.integrityFailure) { try await alice.privateDatabase.save(makeNote("n9", in: zone)) }
            try await s.expectAuditFinding(zone, as: alice, [.log])
        }
    }

    @Test("a tail cut: the log's last entries deleted", arguments: [1, 3])
    func tailCut(entries: Int) async throws {
        try await Scene.run { s in
            let zone = try await s.sharedZone()
            for i in 0..<3 { _ = try await s.alice.privateDatabase.save(makeNote("t\(i)", in: zone)) }
            _ = try await s.readable(zone, as: s.bob)
            let head = try s.head(zone).seq
            let rid = try s.rowID(zone)
            try s.raw { db in
                try db.execute(sql: "DELETE FROM zone_log WHERE zone_id = ? AND seq > ?", arguments: [rid, head - Int64(entries)])
            }
            for reader in [s.alice, s.bob] {
                let db = reader === s.alice ? try await s.fresh(reader).privateDatabase : try await s.fresh(reader).sharedDatabase
                let error = await expectStoreError(.integrityFailure) { try await db.query(Query(recordType: "Note"), in: zone) }
                #expect(error?.message.contains("ends at entry \(head - Int64(entries)), but you verified it up to entry \(head)") == true,
                        "\(error?.message ?? "")")
            }
            try await s.expectAuditFinding(zone, as: s.fresh(s.alice), [.log])
        }
    }

    /// The whole log deleted, and the zone's format column set back to the store's earlier
    /// format (so it looks like a zone still to be upgraded): those who verified the log refuse
    /// it as rolled back, and the owner's upgrade does not run over it.
    @Test("the whole log deleted and the zone made to look not yet upgraded", arguments: [false, true])
    func wholeLogDeleted(legacyFormat: Bool) async throws {
        try await Scene.run { s in
            let zone = try await s.sharedZone()
            let rid = try s.rowID(zone)
            try s.raw { db in
                try db.execute(sql: "DELETE FROM zone_log WHERE zone_id = ?", arguments: [rid])
                if legacyFormat { try db.execute(sql: "UPDATE zone SET log_format = 0 WHERE id = ?", arguments: [rid]) }
            }
            for reader in [s.alice, s.bob, s.carol] {
                let db = reader === s.alice ? try await s.fresh(reader).privateDatabase : try await s.fresh(reader).sharedDatabase
                let error = await expectStoreError(.integrityFailure) { try await db.record(named: "n1", in: zone) }
                #expect(error?.message.contains("its log ends at entry 0") == true, "\(error?.message ?? "")")
            }
            await expectStoreError(.integrityFailure) { try await s.fresh(s.alice).privateDatabase.save(makeNote("n9", in: zone)) }
            try await s.expectAuditFinding(zone, as: s.fresh(s.alice), [.log])
        }
    }

    @Test("a dropped commit, and a dropped membership entry, in the middle of the log", arguments: ["commit", "membership"])
    func droppedEntry(kind: String) async throws {
        try await Scene.run { s in
            let zone = try await s.sharedZone()
            _ = try await s.alice.privateDatabase.save(makeNote("c1", in: zone))
            let commitSeq = try s.head(zone).seq
            _ = try await s.alice.setPermission(.readOnly, for: s.carol.userID, in: zone)
            let membershipSeq = try s.head(zone).seq
            _ = try await s.alice.privateDatabase.save(makeNote("c2", in: zone))
            let dropped = kind == "commit" ? commitSeq : membershipSeq
            let rid = try s.rowID(zone)
            try s.raw { db in
                try db.execute(sql: "DELETE FROM zone_log WHERE zone_id = ? AND seq = ?", arguments: [rid, dropped])
                #expect(db.changesCount == 1)
            }
            await expectStoreError(.integrityFailure) { try await s.fresh(s.alice).privateDatabase.record(named: "n1", in: zone) }
            // One who never saw the log reads up to the gap only: nothing after it is believed.
            let stranger = try s.forgetful(s.alice)
            let result = try await stranger.privateDatabase.query(Query(recordType: "Note"), in: zone)
            #expect(!result.records.map(\.name).contains("c2"))
            #expect(result.refused.keys.contains("c2"))
            try await s.expectAuditFinding(zone, as: s.fresh(s.alice), [.log])
        }
    }

    // MARK: - Acceptances

    /// Bob accepted and then left. His old acceptance entry, copied to the head of the log,
    /// does not make him a member again: it names its own position and the share's old version.
    @Test("acceptance replay: an old acceptance copied to the head after a leave")
    func acceptanceReplay() async throws {
        try await Scene.run { s in
            let zone = try await s.sharedZone()
            let id = try s.rowID(zone)
            let accepted = try s.raw { db in
                try #require(try Row.fetchOne(db, sql: "SELECT seq, body, signature FROM zone_log WHERE zone_id = ? AND kind = 4 AND author_id = ? ORDER BY seq LIMIT 1",
                                              arguments: [id, s.bob.userID]))
            }
            try await s.bob.leaveShare(zone: zone)
            _ = try await s.readable(zone, as: s.alice)
            let head = try s.head(zone)
            try s.raw { db in
                let body = Array(accepted[1] as Data), signature = Array(accepted[2] as Data)
                try db.execute(sql: "INSERT INTO zone_log (zone_id, seq, kind, author_id, body, signature, hash) VALUES (?, ?, 4, ?, ?, ?, ?)",
                               arguments: [id, head.seq + 1, s.bob.userID, Data(body), Data(signature),
                                           Data(LogEntry.hash(body: body, signature: signature).bytes)])
            }
            await expectStoreError(.permissionFailure) { try await s.forgetful(s.bob).sharedDatabase.record(named: "n1", in: zone) }
            let share = try await s.forgetful(s.alice).fetchShare(in: zone)
            #expect(share.testParticipant(s.bob.userID)?.status == .removed && share.testParticipant(s.bob.userID)?.left == true)
            try await s.expectAuditFinding(zone, as: s.fresh(s.alice), [.log])
        }
    }

    /// Bob's acceptance of one zone, moved into another zone of Alice's where he is invited but
    /// has not accepted, does not accept for him there.
    @Test("acceptance replay: an acceptance moved to another zone")
    func acceptanceMovedToAnotherZone() async throws {
        try await Scene.run { s in
            let first = try await s.sharedZone("Family")
            let second = try await s.f.makeZone("Work")
            _ = try await s.alice.share(zone: second, title: "Work")
            _ = try await s.alice.addParticipant(s.bob.userID, permission: .readOnly, to: second)
            let from = try s.rowID(first), to = try s.rowID(second)
            try s.raw { db in
                let row = try #require(try Row.fetchOne(db, sql: "SELECT body, signature FROM zone_log WHERE zone_id = ? AND kind = 4 AND author_id = ?",
                                                        arguments: [from, s.bob.userID]))
                let head = try #require(try SQLiteTransaction(db).logHead(zoneRowID: to))
                let body = Array(row[0] as Data), signature = Array(row[1] as Data)
                try db.execute(sql: "INSERT INTO zone_log (zone_id, seq, kind, author_id, body, signature, hash) VALUES (?, ?, 4, ?, ?, ?, ?)",
                               arguments: [to, head.seq + 1, s.bob.userID, Data(body), Data(signature),
                                           Data(LogEntry.hash(body: body, signature: signature).bytes)])
            }
            let error = await expectStoreError(.permissionFailure) { try await s.forgetful(s.bob).sharedDatabase.record(named: "n1", in: second) }
            #expect(error?.message.contains("have not accepted") == true, "\(error?.message ?? "")")
            try await s.expectAuditFinding(second, as: s.forgetful(s.alice), [.log])
        }
    }

    @Test("another participant's acceptance, relabeled as yours, does not accept for you")
    func acceptanceOfAnother() async throws {
        try await Scene.run { s in
            let zone = try await s.f.makeZone("Family")
            _ = try await s.alice.share(zone: zone, title: "t")
            _ = try await s.alice.addParticipant(s.bob.userID, permission: .readOnly, to: zone)
            let share = try await s.alice.addParticipant(s.carol.userID, permission: .readOnly, to: zone)
            _ = try await s.bob.acceptShare(url: share.url)
            let rid = try s.rowID(zone)
            try s.raw { db in
                let id = rid
                let seq = try #require(try Int64.fetchOne(db, sql: "SELECT seq FROM zone_log WHERE zone_id = ? AND kind = 4", arguments: [id]))
                try editEntry(db, zoneRowID: id, seq: seq) { e in
                    LogEntry(zoneUID: e.zoneUID, seq: e.seq, prev: e.prev, kind: e.kind, authorID: s.carol.userID, time: e.time, payload: e.payload)
                }
            }
            await expectStoreError(.permissionFailure) { try await s.forgetful(s.carol).sharedDatabase.record(named: "n1", in: zone) }
            try await s.expectAuditFinding(zone, as: s.forgetful(s.alice), [.log])
        }
    }

    // MARK: - The public link

    /// While the public permission is read-write, only those who hold the link may write: Mallory,
    /// who never had it, signs an acceptance by link without a valid proof, then commits.
    @Test("a public-link writer without proof of the link", arguments: ["no proof", "her own key's proof", "a commit with no acceptance"])
    func publicWriterWithoutProof(variant: String) async throws {
        try await Scene.run { s in
            let zone = try await s.f.makeZone("Open")
            let share = try await s.alice.share(zone: zone, title: "open", publicPermission: .readWrite)
            _ = try await s.carol.acceptShare(url: share.url) // Carol holds the link
            _ = try await s.carol.sharedDatabase.save(makeNote("by-carol", in: zone))
            let state = try await s.f.state(zone)
            try s.raw { db in
                if variant != "a commit with no acceptance" {
                    let proof: [UInt8]? = variant == "no proof" ? nil
                        : s.mallory.vault.signingKey.signature(for: AcceptancePayload.proofMessage(zoneUID: state.zoneUID, shareUID: state.share!.shareUID,
                                                                                                    userID: s.mallory.userID))
                    let payload = AcceptancePayload(shareUID: state.share!.shareUID, ownerID: state.ownerID, version: state.ownerSeq,
                                                    role: .publicUser, state: .accepted, linkProof: proof)
                    try forgeEntry(SQLiteTransaction(db), zone: zone, signer: s.mallory, kind: .acceptance, payload: payload.encoded)
                }
                try forgeCommit(SQLiteTransaction(db), zone: zone, signer: s.mallory, name: "by-mallory", title: "mallory", body: nil)
            }
            let reader = try s.forgetful(s.alice)
            let result = try await reader.privateDatabase.query(Query(recordType: "Note"), in: zone)
            #expect(result.records.map(\.name).sorted() == ["by-carol", "n1", "n2"])
            #expect(result.refused.keys.contains("by-mallory"))
            await s.expectNoAttackerValue(zone, as: reader)
            try await s.expectAuditFinding(zone, as: try await s.fresh(reader), [.log])
            // Nothing more is written after the refused entries: the owner's next write is refused
            // too, so the forged tail stays for audit to report, and no key is wrapped to her.
            let error = await expectStoreError(.integrityFailure) { try await reader.setPublicPermission(.none, in: zone) }
            #expect(error?.message.contains("do not verify") == true, "\(error?.message ?? "")")
            #expect(try await s.f.zoneKeyRows(zone).allSatisfy { $0.member != s.mallory.userID })
            #expect(try await s.fresh(reader).audit().findings.contains { $0.zone == zone && $0.subject == "by-mallory" })
        }
    }

    /// A session that verified the log keeps what it verified: an entry edited afterwards does not
    /// make a read-only participant read-write in their long-lived session, nor show the
    /// attacker's title; a new session of the same user refuses the store.
    @Test("a long-lived session keeps the log it verified; a later edit of an entry is refused by new sessions")
    func longLivedSessionAfterTampering() async throws {
        try await Scene.run { s in
            let zone = try await s.sharedZone()
            let bob = s.bob
            await expectStoreError(.permissionFailure, "read-only") { try await bob.sharedDatabase.save(makeNote("n9", in: zone)) }
            let id = try s.rowID(zone)
            // Entry 4 invites Bob read-only; Bob edits it to read-write, and the share's title.
            try s.raw { db in
                try editEntry(db, zoneRowID: id, seq: 4) { e in
                    var state = e.payload.withUnsafeBytes { raw -> StatePayload in
                        var r = RawReader(raw, what: "membership")
                        return try! StatePayload.decode(&r)
                    }
                    state.share!.participants[bob.userID] = .init(role: .privateUser, permission: .readWrite, status: .pending)
                    state.share!.title = "mallory"
                    var w = ByteWriter()
                    state.encode(into: &w)
                    return LogEntry(zoneUID: e.zoneUID, seq: e.seq, prev: e.prev, kind: e.kind, authorID: e.authorID, time: e.time, payload: w.bytes)
                }
            }
            await expectStoreError(.permissionFailure, "Bob's escalated write in his old session") {
                try await bob.sharedDatabase.save(makeNote("n9", in: zone, body: "escalated"))
            }
            #expect(try s.raw { db in try Int.fetchOne(db, sql: "SELECT count(*) FROM record WHERE name = 'n9'") } == 0)
            #expect(try await s.alice.fetchShare(in: zone).title == "Family notes")
            await expectStoreError(.integrityFailure) { try await s.fresh(bob).sharedDatabase.record(named: "n1", in: zone) }
            await expectStoreError(.integrityFailure) { try await s.fresh(s.alice).fetchShare(in: zone) }
            try await s.expectAuditFinding(zone, as: s.fresh(s.alice), [.log])
        }
    }

    // MARK: - Zones bound to their owners

    /// Mallory takes over a zone's uid: the row says she owns it, and a genesis she signed names
    /// her. Bob, who read the zone as Alice's, refuses it: his marks pin its owner.
    @Test("a zone's uid taken over by another owner is refused by a user whose marks pin the first owner")
    func ownerPinnedByMarks() async throws {
        try await Scene.run { s in
            let zone = try await s.sharedZone()
            let id = try s.rowID(zone)
            try s.raw { db in
                try db.execute(sql: "DELETE FROM zone_log WHERE zone_id = ?", arguments: [id])
                try db.execute(sql: "UPDATE zone SET owner_id = ? WHERE id = ?", arguments: [s.mallory.userID, id])
                let genesis = GenesisPayload(zoneName: "Family",
                                             state: StatePayload(epoch: 1, newCommitments: [1: [UInt8](repeating: 1, count: 32)], share: nil),
                                             records: .empty)
                try forgeEntry(SQLiteTransaction(db), zone: ZoneID(name: "Family", ownerID: s.mallory.userID), signer: s.mallory, kind: .genesis,
                               payload: genesis.encoded, seq: 1, prev: .zero)
            }
            let taken = ZoneID(name: "Family", ownerID: s.mallory.userID)
            let error = await expectStoreError(.integrityFailure) { try await s.fresh(s.bob).sharedDatabase.record(named: "n1", in: taken) }
            #expect(error?.message.contains("you saw it owned by") == true, "\(error?.message ?? "")")
        }
    }

    @Test("a zone whose row names another owner than its genesis is refused; a participant's marks pin the owner")
    func zoneOwnerSwap() async throws {
        try await Scene.run { s in
            let zone = try await s.sharedZone()
            // Mallory makes a zone of her own, then gives it Alice's name and owner in the row.
            let hers = try await s.mallory.privateDatabase.createZone(named: "Lure")
            _ = try await s.mallory.privateDatabase.save(makeNote("m1", in: hers, title: "mallory"))
            try s.raw { db in
                try db.execute(sql: "UPDATE zone SET name = 'Family2', owner_id = ? WHERE owner_id = ? AND name = 'Lure'",
                               arguments: [s.alice.userID, s.mallory.userID])
            }
            let lure = ZoneID(name: "Family2", ownerID: s.alice.userID)
            let error = await expectStoreError(.integrityFailure) { try await s.forgetful(s.alice).privateDatabase.record(named: "m1", in: lure) }
            #expect(error?.message.contains("genesis") == true, "\(error?.message ?? "")")
            try await s.expectAuditFinding(lure, as: s.forgetful(s.alice), [.log])
            // Swapping the uids of Alice's zone and Mallory's does not move a zone either.
            try s.raw { db in
                try db.execute(sql: "UPDATE zone SET owner_id = ?, name = 'Lure' WHERE name = 'Family2'", arguments: [s.mallory.userID])
                let a = try #require(try Data.fetchOne(db, sql: "SELECT uid FROM zone WHERE name = 'Family'"))
                let m = try #require(try Data.fetchOne(db, sql: "SELECT uid FROM zone WHERE name = 'Lure'"))
                try db.execute(sql: "UPDATE zone SET uid = ? WHERE name = 'Lure'", arguments: [Data(repeating: 0, count: 16)])
                try db.execute(sql: "UPDATE zone SET uid = ? WHERE name = 'Family'", arguments: [m])
                try db.execute(sql: "UPDATE zone SET uid = ? WHERE name = 'Lure'", arguments: [a])
            }
            await expectStoreError(.integrityFailure) { try await s.fresh(s.bob).sharedDatabase.record(named: "n1", in: zone) }
            await s.expectNoAttackerValue(zone, as: try await s.fresh(s.bob))
            try await s.expectAuditFinding(zone, as: s.fresh(s.bob), [.log])
        }
    }
}

extension Session {
    func zoneIDIsMine(_ zone: ZoneID) -> Bool { zone.ownerID == userID }
}

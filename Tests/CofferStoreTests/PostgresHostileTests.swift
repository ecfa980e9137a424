import CofferCrypto
import CofferTestSupport
import CofferVault
import CofferStoreTestSupport
import Foundation
import PostgresNIO
import Testing
@testable import CofferStore

/// The attacks of the hostile-store suite, made by someone who can write the PostgreSQL
/// database (its password, or the server): rows written straight into its tables. Every one
/// must be refused by the clients, who check what they read against signed data, or reported by
/// `audit`; none may make a client believe, or write, what the attacker chose.
@Suite("Hostile PostgreSQL store", .postgres)
struct PostgresHostileTests {
    /// Alice's zone "Family" with notes n1 and n2, shared with Bob (read-only) and Carol
    /// (read-write), both accepted; Mallory has a vault and a card in the store.
    struct Scene {
        let f: TestStore
        let zone: ZoneID
        let bob: Session, carol: Session, mallory: Session

        /// The zone's row id in the database.
        func rowID() async throws -> Int64 {
            let zone = self.zone
            return try await f.postgresAdmin { admin in
                try #require(try await admin.query("SELECT id FROM zone WHERE owner_id = \(zone.ownerID) AND name = \(zone.name)").first)
                    .decode(Int64.self)
            }
        }

        /// Runs one statement as the attacker; returns the rows it changed (or returned).
        @discardableResult
        func attack(_ query: PostgresQuery) async throws -> Int {
            try await f.postgresAdmin { admin in try await admin.query(query).count }
        }

        /// Every record `s` can read in the zone, by name, or the error that refused them.
        func readable(as s: Session) async throws -> [String: CofferStore.Record] {
            let db = s.userID == zone.ownerID ? s.privateDatabase : s.sharedDatabase
            return Dictionary(try await db.records(in: zone, limit: 1000).map { ($0.name, $0) }) { a, _ in a }
        }

        /// Whatever `s` can read, nothing holds a value the attacker chose ("mallory").
        func expectNoAttackerValue(as s: Session, sourceLocation: SourceLocation = #_sourceLocation) async {
            guard let records = try? await readable(as: s) else { return } // refused outright: nothing returned
            for record in records.values {
                let values = record.values.values.map { "\($0)" } + record.encryptedValues.values.map { "\($0)" }
                #expect(!values.contains { $0.lowercased().contains("mallory") }, "\(record.name) has a value the attacker chose",
                        sourceLocation: sourceLocation)
            }
        }

        /// A commit signed by `signer` for a record `name` (title and body the attacker's),
        /// written at the head of the zone's log through the storage calls: what someone holding
        /// the participant's keys and the database writes, with none of the engine's checks.
        func forge(_ signer: Session, name: String) async throws {
            let zone = self.zone
            try await f.store.write { db in
                _ = try forgeCommit(db, zone: zone, signer: signer, name: name, title: "mallory", body: "mallory wrote this")
            }
        }

        /// The same user with no marks: a machine that never saw the store.
        func forgetful(_ s: Session) async throws -> Session {
            try? FileManager.default.removeItem(atPath: s.vault.url.path + ".marks")
            let vault = try Vault.open(at: s.vault.url, passphrase: SecureBytes(copying: Array(testPassphrase.utf8)))
            for mark in try vault.marks.all() { try vault.marks.reset(zone: mark.zoneUID, to: nil) }
            return try await f.store.openSession(vault: vault)
        }

        func expectAuditFinding(as s: Session, _ kinds: Set<AuditFinding.Kind>, sourceLocation: SourceLocation = #_sourceLocation) async throws {
            let report = try await s.audit()
            let found = report.findings.filter { $0.zone == zone && kinds.contains($0.kind) }
            #expect(!found.isEmpty, "audit reports nothing of \(kinds) about zone '\(zone.name)': \(report.findings)", sourceLocation: sourceLocation)
        }
    }

    /// Expects `body` to be refused with one of `codes`.
    static func expectRefused<T>(_ codes: Set<StoreError.Code>, sourceLocation: SourceLocation = #_sourceLocation,
                                 _ body: () async throws -> T) async {
        do {
            _ = try await body()
            Issue.record("expected a refusal (\(codes)), but it succeeded", sourceLocation: sourceLocation)
        } catch let error as StoreError {
            #expect(codes.contains(error.code), "\(error.code): \(error.message)", sourceLocation: sourceLocation)
        } catch {
            Issue.record("expected a StoreError, got \(error)", sourceLocation: sourceLocation)
        }
    }

    static func scene(_ body: (Scene) async throws -> Void) async throws {
        try await withStore(.postgres) { f in
            let bob = try await f.user("Bob", "bob@example.com")
            let carol = try await f.user("Carol", "carol@example.com")
            let mallory = try await f.user("Mallory", "mallory@example.com")
            let zone = try await f.makeZone("Family")
            _ = try await f.alice.share(zone: zone, title: "Family")
            _ = try await f.alice.addParticipant(bob.userID, permission: .readOnly, to: zone)
            let share = try await f.alice.addParticipant(carol.userID, permission: .readWrite, to: zone)
            _ = try await bob.acceptShare(url: share.url)
            _ = try await carol.acceptShare(url: share.url)
            try await body(Scene(f: f, zone: zone, bob: bob, carol: carol, mallory: mallory))
        }
    }

    @Test("a zone key planted for a participant (wrapped to them, chosen by the attacker) is refused: it matches no commitment")
    func plantedKey() async throws {
        try await Self.scene { s in
            let id = try await s.rowID()
            let row = try await s.f.zoneRow(s.zone)
            let planted = KeyRing.wrapZoneKey(SymmetricKey(), zoneUID: row.uid, epoch: 1, to: s.bob.vault.identity.boxKey)
            #expect(try await s.attack("UPDATE zone_key SET wrapped_key = \(Data(planted)) WHERE zone_id = \(id) AND member_id = \(s.bob.userID) RETURNING epoch") == 1)
            await expectStoreError(.integrityFailure) { try await s.f.fresh(s.bob).sharedDatabase.record(named: "n1", in: s.zone) }
            // And a key planted for a stranger gives them nothing: the log does not make them a member.
            let stranger = KeyRing.wrapZoneKey(SymmetricKey(), zoneUID: row.uid, epoch: 1, to: s.mallory.vault.identity.boxKey)
            try await s.attack("INSERT INTO zone_key (zone_id, epoch, member_id, wrapped_key) VALUES (\(id), 1, \(s.mallory.userID), \(Data(stranger)))")
            try await s.attack("INSERT INTO zone_member (zone_id, user_id) VALUES (\(id), \(s.mallory.userID))")
            #expect(try await s.f.fresh(s.mallory).zoneDirectory.sharedZones().isEmpty)
            await Self.expectRefused([.zoneNotFound, .permissionFailure]) { try await s.f.fresh(s.mallory).sharedDatabase.record(named: "n1", in: s.zone) }
            try await s.expectAuditFinding(as: s.f.fresh(s.f.alice), [.cache])
        }
    }

    @Test("a membership rolled back in the database (the removal of a participant cut from the log) is refused by those who saw it")
    func rolledBackMembership() async throws {
        try await Self.scene { s in
            let id = try await s.rowID()
            let before = try await s.f.state(s.zone).headSeq
            _ = try await s.f.alice.removeParticipant(s.carol.userID, from: s.zone)
            try s.f.alice.saveMarks()
            // The attacker cuts the removal and its new key from the log, and puts Carol's old key back.
            try await s.attack("DELETE FROM zone_log WHERE zone_id = \(id) AND seq > \(before)")
            try await s.attack("UPDATE zone SET sequence = \(before) WHERE id = \(id)")
            let error = await expectStoreError(.integrityFailure) { try await s.f.fresh(s.f.alice).privateDatabase.record(named: "n1", in: s.zone) }
            #expect(error?.message.contains("rolled back") == true, "\(error?.message ?? "")")
            try await s.expectAuditFinding(as: s.f.fresh(s.f.alice), [.log])
        }
    }

    @Test("a read-only participant's commit, signed with their own key and written into the database, is refused by every reader")
    func readOnlyWriterForges() async throws {
        try await Self.scene { s in
            try await s.forge(s.bob, name: "by-bob")
            let stranger = try await s.forgetful(s.f.alice)
            let error = await expectStoreError(.integrityFailure) { try await stranger.privateDatabase.record(named: "by-bob", in: s.zone) }
            #expect(error?.message.contains("has read-only permission") == true, "\(error?.message ?? "")")
            await s.expectNoAttackerValue(as: stranger)
            await s.expectNoAttackerValue(as: try await s.f.fresh(s.carol))
            try await s.expectAuditFinding(as: s.f.fresh(s.f.alice), [.log])
        }
    }

    @Test("a demoted writer who cuts the demotion from the log and writes in its place is refused by those who saw the demotion")
    func demotionCutAndForged() async throws {
        try await Self.scene { s in
            let id = try await s.rowID()
            let before = try await s.f.state(s.zone).headSeq
            _ = try await s.f.alice.setPermission(.readOnly, for: s.carol.userID, in: s.zone)
            _ = try await s.readable(as: s.bob) // Bob saw the demotion too
            try s.f.alice.saveMarks()
            try s.bob.saveMarks()
            try await s.attack("DELETE FROM zone_log WHERE zone_id = \(id) AND seq > \(before)")
            try await s.attack("UPDATE zone SET sequence = \(before) WHERE id = \(id)")
            try await s.forge(s.carol, name: "by-carol")
            for reader in [s.f.alice, s.bob] {
                let fresh = try await s.f.fresh(reader)
                let db = reader === s.f.alice ? fresh.privateDatabase : fresh.sharedDatabase
                let error = await expectStoreError(.integrityFailure) { try await db.record(named: "by-carol", in: s.zone) }
                #expect(error?.message.contains("zone 'Family'") == true, "\(error?.message ?? "")")
                await s.expectNoAttackerValue(as: fresh)
            }
            try await s.expectAuditFinding(as: s.f.fresh(s.f.alice), [.log])
        }
    }

    @Test("a row edited in the database is not laundered by a re-key: it stops before writing anything, naming the record")
    func launderedThroughRekey() async throws {
        try await Self.scene { s in
            let id = try await s.rowID()
            _ = try await s.f.alice.removeParticipant(s.bob.userID, from: s.zone) // epoch 2: n1 and n2 need re-sealing
            #expect(try await s.attack(#"UPDATE record SET plain = '{"title":"mallory"}' WHERE zone_id = \#(id) AND name = 'n1' RETURNING id"#) == 1)
            let rows = try await s.f.recordEpochs(s.zone)
            let error = await expectStoreError(.integrityFailure) { try await s.f.fresh(s.f.alice).rekey(zone: s.zone) }
            #expect(error?.message.contains("record 'n1'") == true && error?.message.contains("before writing anything") == true,
                    "\(error?.message ?? "")")
            #expect(try await s.f.recordEpochs(s.zone) == rows)
            #expect(try await s.f.state(s.zone).epoch == 2)
            await s.expectNoAttackerValue(as: try await s.f.fresh(s.f.alice))
            try await s.expectAuditFinding(as: s.f.fresh(s.f.alice), [.record])
        }
    }

    @Test("an older signed version of a row put back in the database is refused by a re-key and reported by audit")
    func rolledBackRow() async throws {
        try await Self.scene { s in
            let id = try await s.rowID()
            let columns = "name, type, parent, plain, sealed, epoch, seq, membership_seq, creator_id, modifier_id, created_at, modified_at"
            try await s.attack(PostgresQuery(unsafeSQL: "CREATE TABLE kept AS SELECT \(columns) FROM record WHERE zone_id = \(id) AND name = 'n1'"))
            _ = try await s.f.alice.privateDatabase.save(makeNote("n1", in: s.zone, title: "second", body: "the current version"), policy: .allKeys)
            try await s.attack(PostgresQuery(unsafeSQL: """
                UPDATE record r SET (\(columns)) = (SELECT \(columns) FROM kept) WHERE r.zone_id = \(id) AND r.name = 'n1'
                """))
            _ = try await s.f.alice.removeParticipant(s.bob.userID, from: s.zone)
            let error = await expectStoreError(.integrityFailure) { try await s.f.fresh(s.f.alice).rekey(zone: s.zone) }
            #expect(error?.message.contains("rolled back") == true, "\(error?.message ?? "")")
            try await s.expectAuditFinding(as: s.f.fresh(s.f.alice), [.record])
        }
    }

    @Test("a row deleted in the database, and a deletion forged in the change feed's list, are reported by audit")
    func deletedRowAndForgedTombstone() async throws {
        try await Self.scene { s in
            let id = try await s.rowID()
            #expect(try await s.attack("DELETE FROM record WHERE zone_id = \(id) AND name = 'n2' RETURNING id") == 1)
            try await s.attack("INSERT INTO record_tombstone (zone_id, name, seq, author_id, author_label, deleted_at) VALUES (\(id), 'n1', 1, \(s.mallory.userID), 'mallory', 0)")
            let report = try await s.f.fresh(s.f.alice).audit()
            let subjects = Set(report.findings.filter { $0.zone == s.zone }.map(\.subject))
            #expect(subjects.contains("n2") && subjects.contains("n1"), "\(report.findings)")
        }
    }

    @Test("a contact row whose box key the attacker swapped for their own: keys still go to the signed card's key; audit reports the row")
    func swappedContactKey() async throws {
        try await Self.scene { s in
            #expect(try await s.attack("""
                UPDATE contact SET box_key = \(Data(s.mallory.vault.identity.boxKey.rawRepresentation)) WHERE user_id = \(s.bob.userID) RETURNING user_id
                """) == 1)
            // A rotation wraps the new key to each member: Bob's must open with Bob's vault, not Mallory's.
            _ = try await s.f.alice.removeParticipant(s.carol.userID, from: s.zone)
            #expect(noteBody(try await s.f.fresh(s.bob).sharedDatabase.record(named: "n1", in: s.zone)) == "body of n1")
            let wrapped = try #require(try await s.f.wrappedKey(s.zone, member: s.bob.userID, epoch: 2))
            let uid = try await s.f.zoneRow(s.zone).uid
            #expect(throws: (any Error).self) { _ = try KeyRing.unwrapZoneKey(wrapped, zoneUID: uid, epoch: 2, with: s.mallory.vault.boxKey) }
            let report = try await s.f.fresh(s.f.alice).audit()
            #expect(report.findings.contains { $0.kind == .contact && $0.subject == s.bob.userID }, "\(report.findings)")
        }
    }

    @Test("a read-only participant's key copied to a stranger's row, and the stranger listed as a member, open nothing for the stranger")
    func copiedKey() async throws {
        try await Self.scene { s in
            let id = try await s.rowID()
            try await s.attack("""
                INSERT INTO zone_key (zone_id, epoch, member_id, wrapped_key)
                SELECT zone_id, epoch, \(s.mallory.userID), wrapped_key FROM zone_key WHERE zone_id = \(id) AND member_id = \(s.bob.userID)
                """)
            try await s.attack("INSERT INTO zone_member (zone_id, user_id) VALUES (\(id), \(s.mallory.userID))")
            let mallory = try await s.f.fresh(s.mallory)
            await Self.expectRefused([.zoneNotFound, .permissionFailure, .integrityFailure]) { try await mallory.sharedDatabase.record(named: "n1", in: s.zone) }
            #expect(try await mallory.zoneDirectory.sharedZones().isEmpty)
            await Self.expectRefused([.zoneNotFound, .permissionFailure, .integrityFailure]) {
                try await mallory.sharedDatabase.save(makeNote("m1", in: s.zone, title: "mallory"))
            }
            await s.expectNoAttackerValue(as: try await s.f.fresh(s.f.alice))
        }
    }

    @Test("a wrapped key replaced by bytes that are not a sealed box to the member is refused, and audit names the key")
    func forgedWrappedKey() async throws {
        try await Self.scene { s in
            let id = try await s.rowID()
            #expect(try await s.attack("UPDATE zone_key SET wrapped_key = \(Data(SecureRandom.bytes(count: 108))) WHERE zone_id = \(id) AND member_id = \(s.bob.userID) RETURNING epoch") == 1)
            let error = await expectStoreError(.integrityFailure) { try await s.f.fresh(s.bob).sharedDatabase.record(named: "n1", in: s.zone) }
            #expect(error?.message.contains("does not open") == true, "\(error?.message ?? "")")
            try await s.expectAuditFinding(as: s.f.fresh(s.bob), [.key])
        }
    }

    @Test("a plain field retyped in the schema table is refused on read, by fetch and by query, and reported by audit",
          arguments: [("title", "ref"), ("score", "date"), ("tags", "[ref]")])
    func retypedField(field: String, newType: String) async throws {
        try await Self.scene { s in
            var record = CofferStore.Record(type: "Item", name: "i1", zone: s.zone)
            record.values["title"] = .string("first")
            record.values["score"] = .double(12.5)
            record.values["tags"] = .list([.string("a"), .string("b")])
            _ = try await s.f.alice.privateDatabase.save(record)
            let id = try await s.rowID()
            #expect(try await s.attack("UPDATE field_schema SET value_type = \(newType) WHERE zone_id = \(id) AND record_type = 'Item' AND field = \(field) RETURNING field") == 1)
            let reader = try await s.f.fresh(s.f.alice)
            let error = await expectStoreError(.integrityFailure) { try await reader.privateDatabase.record(named: "i1", in: s.zone) }
            #expect(error?.message.contains("record 'i1'") == true, "\(error?.message ?? "")")
            let result = try await reader.privateDatabase.query(Query(recordType: "Item"), in: s.zone)
            #expect(result.records.isEmpty && result.refused.keys.sorted() == ["i1"])
            try await s.expectAuditFinding(as: s.f.fresh(s.f.alice), [.record])
        }
    }

    @Test("a tail cut (the log's last entries deleted) is refused by everyone who verified the head, naming both ends", arguments: [1, 3])
    func tailCut(entries: Int) async throws {
        try await Self.scene { s in
            for i in 0..<3 { _ = try await s.f.alice.privateDatabase.save(makeNote("t\(i)", in: s.zone)) }
            _ = try await s.readable(as: s.bob)
            try s.f.alice.saveMarks()
            try s.bob.saveMarks()
            let head = try await s.f.state(s.zone).headSeq
            let id = try await s.rowID()
            #expect(try await s.attack("DELETE FROM zone_log WHERE zone_id = \(id) AND seq > \(head - Int64(entries)) RETURNING seq") == entries)
            for reader in [s.f.alice, s.bob] {
                let fresh = try await s.f.fresh(reader)
                let db = reader === s.f.alice ? fresh.privateDatabase : fresh.sharedDatabase
                let error = await expectStoreError(.integrityFailure) { try await db.query(Query(recordType: "Note"), in: s.zone) }
                #expect(error?.message.contains("ends at entry \(head - Int64(entries)), but you verified it up to entry \(head)") == true,
                        "\(error?.message ?? "")")
            }
            try await s.expectAuditFinding(as: s.f.fresh(s.f.alice), [.log])
        }
    }

    @Test("a commit or a membership entry dropped from the middle of the log: refused, and a reader who never saw the log believes nothing after the gap",
          arguments: ["commit", "membership"])
    func droppedEntry(kind: String) async throws {
        try await Self.scene { s in
            _ = try await s.f.alice.privateDatabase.save(makeNote("c1", in: s.zone))
            let commitSeq = try await s.f.state(s.zone).headSeq
            _ = try await s.f.alice.setPermission(.readOnly, for: s.carol.userID, in: s.zone)
            let membershipSeq = try await s.f.state(s.zone).headSeq
            _ = try await s.f.alice.privateDatabase.save(makeNote("c2", in: s.zone))
            let id = try await s.rowID()
            let dropped = kind == "commit" ? commitSeq : membershipSeq
            #expect(try await s.attack("DELETE FROM zone_log WHERE zone_id = \(id) AND seq = \(dropped) RETURNING seq") == 1)
            await expectStoreError(.integrityFailure) { try await s.f.fresh(s.f.alice).privateDatabase.record(named: "n1", in: s.zone) }
            let stranger = try await s.forgetful(s.f.alice)
            let result = try await stranger.privateDatabase.query(Query(recordType: "Note"), in: s.zone)
            #expect(!result.records.map(\.name).contains("c2"))
            #expect(result.refused.keys.contains("c2"))
            try await s.expectAuditFinding(as: s.f.fresh(s.f.alice), [.log])
        }
    }

    @Test("the whole log deleted is refused by the owner and both participants, and the owner cannot write over it")
    func wholeLogDeleted() async throws {
        try await Self.scene { s in
            let id = try await s.rowID()
            try await s.attack("DELETE FROM zone_log WHERE zone_id = \(id)")
            for reader in [s.f.alice, s.bob, s.carol] {
                let fresh = try await s.f.fresh(reader)
                let db = reader === s.f.alice ? fresh.privateDatabase : fresh.sharedDatabase
                let error = await expectStoreError(.integrityFailure) { try await db.record(named: "n1", in: s.zone) }
                #expect(error?.message.contains("its log ends at entry 0") == true, "\(error?.message ?? "")")
            }
            await expectStoreError(.integrityFailure) { try await s.f.fresh(s.f.alice).privateDatabase.save(makeNote("n9", in: s.zone)) }
            try await s.expectAuditFinding(as: s.f.fresh(s.f.alice), [.log])
        }
    }

    @Test("a zone of the attacker's given the owner's name in its row is refused (its genesis names another owner); swapping zone uids moves no zone")
    func zoneOwnerSwap() async throws {
        try await Self.scene { s in
            let hers = try await s.mallory.privateDatabase.createZone(named: "Lure")
            _ = try await s.mallory.privateDatabase.save(makeNote("m1", in: hers, title: "mallory"))
            #expect(try await s.attack("UPDATE zone SET name = 'Family2', owner_id = \(s.f.alice.userID) WHERE owner_id = \(s.mallory.userID) AND name = 'Lure' RETURNING id") == 1)
            let lure = ZoneID(name: "Family2", ownerID: s.f.alice.userID)
            let error = await expectStoreError(.integrityFailure) { try await s.forgetful(s.f.alice).privateDatabase.record(named: "m1", in: lure) }
            #expect(error?.message.contains("genesis") == true, "\(error?.message ?? "")")
            // The uids of Alice's zone and Mallory's swapped: Bob, who saw Alice's zone, is refused.
            _ = try await s.readable(as: s.bob)
            try s.bob.saveMarks()
            try await s.attack("UPDATE zone SET owner_id = \(s.mallory.userID), name = 'Lure' WHERE name = 'Family2'")
            try await s.f.postgresAdmin { admin in
                let uids = try await admin.query("SELECT name, uid FROM zone WHERE name IN ('Family', 'Lure')")
                var byName = [String: Data]()
                for row in uids { let (name, uid) = try row.decode((String, Data).self); byName[name] = uid }
                let family = try #require(byName["Family"]), lure = try #require(byName["Lure"])
                _ = try await admin.query("UPDATE zone SET uid = \(Data(repeating: 0, count: 16)) WHERE name = 'Lure'")
                _ = try await admin.query("UPDATE zone SET uid = \(lure) WHERE name = 'Family'")
                _ = try await admin.query("UPDATE zone SET uid = \(family) WHERE name = 'Lure'")
            }
            await expectStoreError(.integrityFailure) { try await s.f.fresh(s.bob).sharedDatabase.record(named: "n1", in: s.zone) }
            await s.expectNoAttackerValue(as: try await s.f.fresh(s.bob))
            try await s.expectAuditFinding(as: s.f.fresh(s.bob), [.log])
        }
    }

    @Test("a key-chain link replaced by one that opens, under the current key, to another key than the committed one is refused")
    func forgedChainLink() async throws {
        try await Self.scene { s in
            _ = try await s.f.alice.removeParticipant(s.bob.userID, from: s.zone) // epoch 2; n1, n2 sealed under epoch 1
            let row = try await s.f.zoneRow(s.zone)
            let carol = s.carol
            // Carol holds the current key; she seals a key of her choosing as epoch 1's link.
            let zone = s.zone
            let current = try await s.f.store.read { db in
                let row = try #require(try db.zoneRow(zone))
                return try carol.keyRing.zoneKey(db, zone: row, epoch: 2, state: try carol.verifiedLogs.zoneState(db, zone: row))
            }
            let link = Envelope.seal(SymmetricKey().bytes, using: current, keyID: 2, authenticating: KeyRing.chainAD(zoneUID: row.uid, epoch: 1))
            #expect(try await s.attack("UPDATE zone_key_chain SET sealed_key = \(Data(link.bytes)) WHERE zone_id = \(row.rowID) AND epoch = 1 RETURNING epoch") == 1)
            let error = await expectStoreError(.integrityFailure) { try await s.f.fresh(s.f.alice).privateDatabase.record(named: "n1", in: s.zone) }
            #expect(error?.message.contains("not the one its owner committed to") == true, "\(error?.message ?? "")")
            try await s.expectAuditFinding(as: s.f.fresh(s.f.alice), [.record])
        }
    }

    @Test("a contact card dated in the future is refused when added, and does not count when written into the database")
    func futureDatedCard() async throws {
        try await Self.scene { s in
            let future = ContactCard(vault: s.mallory.vault, created: Date().addingTimeInterval(86_400 * 365))
            await Self.expectRefused([.invalidArguments]) { try await s.f.store.addContact(future) }
            #expect(try await s.attack("UPDATE contact SET card = \(future.jsonData()), card_created = \(future.created) WHERE user_id = \(s.mallory.userID) RETURNING user_id") == 1)
            await Self.expectRefused([.unknownItem]) { try await s.f.store.contact(matching: "mallory@example.com") }
            let (zone, mallory) = (s.zone, s.mallory)
            try await s.f.store.write { db in _ = try forgeCommit(db, zone: zone, signer: mallory, name: "m1", title: "mallory", body: nil) }
            let result = try await s.f.fresh(s.f.alice).privateDatabase.query(Query(recordType: "Note"), in: s.zone)
            #expect(result.refused.keys.contains("m1"))
            await s.expectNoAttackerValue(as: try await s.f.fresh(s.f.alice))
            let report = try await s.f.fresh(s.f.alice).audit()
            #expect(report.findings.contains { (f: AuditFinding) in f.kind == .contact && f.subject == s.mallory.userID }, "\(report.findings)")
        }
    }

    @Test("a field named outside the identifier rules, planted in the schema table, is refused on save and read; nothing is written")
    func plantedFieldName() async throws {
        try await Self.scene { s in
            var record = CofferStore.Record(type: "Item", name: "i1", zone: s.zone)
            record.values["title"] = .string("first")
            _ = try await s.f.alice.privateDatabase.save(record)
            let id = try await s.rowID()
            let planted = "x\"); DROP TABLE record; --\u{7}"
            try await s.attack("INSERT INTO field_schema (zone_id, record_type, field, value_type, encrypted) VALUES (\(id), 'Item', \(planted), 'string', false)")
            let writer = try await s.f.fresh(s.f.alice)
            var second = CofferStore.Record(type: "Item", name: "i2", zone: s.zone)
            second.values[planted] = .string("v")
            let error = await expectStoreError(.integrityFailure) { try await writer.privateDatabase.save(second) }
            #expect(error?.message.contains("Coffer does not write") == true, "\(error?.message ?? "")")
            #expect(error?.message.contains("\u{7}") == false)
            await expectStoreError(.integrityFailure) { try await writer.privateDatabase.record(named: "i1", in: s.zone) }
            #expect(try await s.attack("SELECT name FROM record WHERE zone_id = \(id) AND name = 'i2'") == 0)
        }
    }

    @Test("an old acceptance copied to the head of the log after its author left does not make them a member again")
    func acceptanceReplay() async throws {
        try await Self.scene { s in
            let id = try await s.rowID()
            let bob = s.bob.userID
            let (body, signature) = try await s.f.postgresAdmin { admin in
                try #require(try await admin.query("SELECT body, signature FROM zone_log WHERE zone_id = \(id) AND kind = 4 AND author_id = \(bob) ORDER BY seq LIMIT 1").first)
                    .decode((Data, Data).self)
            }
            try await s.bob.leaveShare(zone: s.zone)
            _ = try await s.readable(as: s.f.alice)
            let head = try await s.f.state(s.zone).headSeq
            let hash = Data(LogEntry.hash(body: Array(body), signature: Array(signature)).bytes)
            try await s.attack("INSERT INTO zone_log (zone_id, seq, kind, author_id, body, signature, hash) VALUES (\(id), \(head + 1), 4, \(bob), \(body), \(signature), \(hash))")
            await expectStoreError(.permissionFailure) { try await s.forgetful(s.bob).sharedDatabase.record(named: "n1", in: s.zone) }
            let share = try await s.forgetful(s.f.alice).fetchShare(in: s.zone)
            #expect(share.testParticipant(bob)?.status == .removed && share.testParticipant(bob)?.left == true)
            try await s.expectAuditFinding(as: s.f.fresh(s.f.alice), [.log])
        }
    }

    @Test("a deletion hidden from, or misdated in, the change feed's table is reported by audit", arguments: ["hidden", "misdated"])
    func feedHiddenDeletion(variant: String) async throws {
        try await Self.scene { s in
            let db = s.f.alice.privateDatabase
            _ = try await db.modify(saving: [], deleting: [RecordDeletion(name: "n2")], in: s.zone)
            let first = try await s.f.state(s.zone).headSeq
            _ = try await db.save(makeNote("n2", in: s.zone))
            _ = try await db.modify(saving: [], deleting: [RecordDeletion(name: "n2")], in: s.zone)
            #expect(try await s.f.fresh(s.f.alice).audit().findings.isEmpty)
            let id = try await s.rowID()
            if variant == "hidden" {
                #expect(try await s.attack("DELETE FROM record_tombstone WHERE zone_id = \(id) RETURNING name") == 1)
            } else {
                #expect(try await s.attack("UPDATE record_tombstone SET seq = \(first) WHERE zone_id = \(id) AND name = 'n2' RETURNING name") == 1)
            }
            let report = try await s.f.fresh(s.f.alice).audit()
            let finding = report.findings.first { $0.zone == s.zone && $0.subject == "n2" }
            #expect(finding?.kind == .cache, "\(report.findings)")
            #expect(finding?.message.contains(variant == "hidden" ? "does not have it" : "dates it at entry \(first)") == true, "\(report.findings)")
        }
    }
}

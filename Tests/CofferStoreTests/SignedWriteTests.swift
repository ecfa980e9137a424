import CofferCrypto
import CofferVault
import Foundation
import GRDB
import Testing
@testable import CofferStore

// Signed writes (Docs/Security.md, "Signed writes"): every commit is signed by its writer,
// every read recomputes the record's hash and checks it against its signed commit, and the
// writer's permission is checked at the commit's membership sequence. These tests change the
// database file with SQL, outside the library, then read through it with a fresh session
// (whose caches of verified commits are empty).

@Suite("Signed writes")
struct SignedWriteTests {
    // MARK: - Hand edits of record rows

    @Test("a plain value edited by hand: record(named:) fails naming the record; query and changes refuse it")
    func plainValueEdited() async throws {
        try await SignedHarness.run { h in
            let zone = try await h.ownerZone(notes: [])
            _ = try await h.ownerDB.save(signedNote("r1", in: zone, title: "original title"))
            _ = try await h.ownerDB.save(signedNote("r2", in: zone, title: "other title"))
            let rowID = try signedRowID(h, zone)
            let edited = try h.sql { db -> Int in
                try db.execute(sql: "UPDATE record SET plain = replace(plain, 'original title', 'forged title') WHERE zone_id = ? AND name = 'r1'",
                               arguments: [rowID])
                return db.changesCount
            }
            #expect(edited == 1)
            // The edit is a valid JSON value of the right type: only the signature can catch it.
            let stored = try h.sql { db in try String.fetchOne(db, sql: "SELECT plain FROM record WHERE zone_id = ? AND name = 'r1'", arguments: [rowID]) }
            #expect(stored == #"{"title":"forged title"}"#)

            let reader = try h.fresh(h.owner).privateDatabase
            let error = await signedExpectError(.integrityFailure) { try await reader.record(named: "r1", in: zone) }
            #expect(error?.message.contains("record 'r1'") == true, "\(error?.message ?? "")")
            #expect(error?.message.contains("does not match its signed commit 1") == true, "\(error?.message ?? "")")
            // The untouched record still reads.
            let r2 = try await reader.record(named: "r2", in: zone)
            #expect(r2.values["title"] == .string("other title"))
            #expect(r2.encryptedValues["body"] == .string("body of r2"))

            // records(named:) maps the name to its error.
            let several = try await reader.records(named: ["r1", "r2"], in: zone)
            #expect(throws: StoreError.self) { try several["r1"]!.get() }
            #expect((try? several["r2"]!.get())?.name == "r2")

            let result = try await reader.query(Query(recordType: "Note"), in: zone)
            #expect(result.records.map(\.name) == ["r2"])
            #expect(Array(result.refused.keys) == ["r1"])
            #expect(result.refused["r1"]?.code == .integrityFailure)
            // Filtering on the forged value does not surface it either.
            let byTitle = try await reader.query(Query(recordType: "Note", predicates: [.init("title", .equal, "forged title")]), in: zone)
            #expect(byTitle.records.isEmpty)
            #expect(Array(byTitle.refused.keys) == ["r1"])

            let changes = try await reader.changes(in: zone, since: nil)
            #expect(changes.changed.map(\.name) == ["r2"])
            #expect(Array(changes.refused.keys) == ["r1"])
            #expect(changes.refused["r1"]?.code == .integrityFailure)
            #expect(changes.moreComing == false)
            // The token moves past the refused record.
            let next = try await reader.changes(in: zone, since: changes.token)
            #expect(next.changed.isEmpty && next.refused.isEmpty && next.deleted.isEmpty)
        }
    }

    @Test("a row copied from another record (plain, sealed and seq of r2 onto r1) is refused; r2 still reads")
    func rowCopiedFromAnotherRecord() async throws {
        try await SignedHarness.run { h in
            let zone = try await h.ownerZone(notes: [])
            _ = try await h.ownerDB.save(signedNote("r1", in: zone, title: "one", body: "secret one"))
            _ = try await h.ownerDB.save(signedNote("r2", in: zone, title: "two", body: "secret two"))
            let rowID = try signedRowID(h, zone)
            try h.sql { db in
                try db.execute(sql: """
                    UPDATE record SET (plain, sealed, seq) = (SELECT plain, sealed, seq FROM record WHERE zone_id = ?1 AND name = 'r2')
                    WHERE zone_id = ?1 AND name = 'r1'
                    """, arguments: [rowID])
                #expect(db.changesCount == 1)
            }
            let reader = try h.fresh(h.owner).privateDatabase
            let error = await signedExpectError(.integrityFailure) { try await reader.record(named: "r1", in: zone) }
            #expect(error?.message.contains("record 'r1'") == true, "\(error?.message ?? "")")
            #expect(try await reader.record(named: "r2", in: zone).encryptedValues["body"] == .string("secret two"))
            let result = try await reader.query(Query(recordType: "Note"), in: zone)
            #expect(result.records.map(\.name) == ["r2"])
            #expect(Set(result.refused.keys) == ["r1"])
            let changes = try await reader.changes(in: zone, since: nil)
            #expect(changes.changed.map(\.name) == ["r2"])
            #expect(Set(changes.refused.keys) == ["r1"])
        }
    }

    /// One column of one record row changed by hand, and whether a read must refuse it.
    struct ColumnEdit: Sendable, CustomTestStringConvertible {
        let label: String
        let sql: String
        let refused: Bool
        var testDescription: String { label }
    }

    static let columnEdits: [ColumnEdit] = [
        ColumnEdit(label: "sealed byte flipped", sql: "UPDATE record SET sealed = CAST(substr(sealed, 1, 40) || (CASE WHEN substr(sealed, 41, 1) = X'00' THEN X'01' ELSE X'00' END) || substr(sealed, 42) AS BLOB) WHERE zone_id = ? AND name = 'r1'", refused: true),
        ColumnEdit(label: "sealed removed", sql: "UPDATE record SET sealed = NULL WHERE zone_id = ? AND name = 'r1'", refused: true),
        ColumnEdit(label: "created_at", sql: "UPDATE record SET created_at = created_at - 86400 WHERE zone_id = ? AND name = 'r1'", refused: true),
        ColumnEdit(label: "modified_at", sql: "UPDATE record SET modified_at = modified_at + 1 WHERE zone_id = ? AND name = 'r1'", refused: true),
        ColumnEdit(label: "creator_id", sql: "UPDATE record SET creator_id = 'someone-else' WHERE zone_id = ? AND name = 'r1'", refused: true),
        ColumnEdit(label: "membership_seq", sql: "UPDATE record SET membership_seq = 7 WHERE zone_id = ? AND name = 'r1'", refused: true),
        ColumnEdit(label: "parent", sql: "UPDATE record SET parent = 'r2' WHERE zone_id = ? AND name = 'r1'", refused: true),
        ColumnEdit(label: "seq moved to another commit", sql: "UPDATE record SET seq = 2 WHERE zone_id = ? AND name = 'r1'", refused: true),
        ColumnEdit(label: "seq to a missing commit", sql: "UPDATE record SET seq = 99 WHERE zone_id = ? AND name = 'r1'", refused: true),
        ColumnEdit(label: "name", sql: "UPDATE record SET name = 'r9' WHERE zone_id = ? AND name = 'r1'", refused: true),
    ]

    @Test("every hashed column of a record row edited by hand is refused", arguments: columnEdits)
    func hashedColumnEdited(_ edit: ColumnEdit) async throws {
        try await SignedHarness.run { h in
            let zone = try await h.ownerZone(notes: [])
            _ = try await h.ownerDB.save(signedNote("r1", in: zone))
            _ = try await h.ownerDB.save(signedNote("r2", in: zone))
            let rowID = try signedRowID(h, zone)
            try h.sql { db in
                try db.execute(sql: edit.sql, arguments: [rowID])
                #expect(db.changesCount == 1)
            }
            let name = edit.label == "name" ? "r9" : "r1"
            let reader = try h.fresh(h.owner).privateDatabase
            let error = await signedExpectError(.integrityFailure) { try await reader.record(named: name, in: zone) }
            #expect(error?.message.contains("'\(name)'") == true, "\(error?.message ?? "")")
            let result = try await reader.query(Query(recordType: "Note"), in: zone)
            #expect(result.records.map(\.name) == ["r2"])
            #expect(Set(result.refused.keys) == [name])
            let changes = try await reader.changes(in: zone, since: nil)
            #expect(changes.changed.map(\.name) == ["r2"])
            #expect(Set(changes.refused.keys) == [name])
        }
    }

    @Test("the modifier column is not trusted: a record reports its signed commit's author")
    func modifierColumnIsNotTrusted() async throws {
        try await SignedHarness.run { h in
            let zone = try await h.ownerZone(notes: ["r1"])
            let bob = try h.newUser("Bob Reader", "bob@example.com")
            let rowID = try signedRowID(h, zone)
            try h.sql { db in
                try db.execute(sql: "UPDATE record SET modifier_id = ? WHERE zone_id = ? AND name = 'r1'", arguments: [bob.userID, rowID])
                #expect(db.changesCount == 1)
            }
            let record = try await h.fresh(h.owner).privateDatabase.record(named: "r1", in: zone)
            #expect(record.modifierID == h.owner.userID)
            #expect(record.creatorID == h.owner.userID)
        }
    }

    @Test("a read of many rows (helper threads decoding) refuses every row of a forged commit, each by its own name", arguments: [false, true])
    func batchReadRefusesEveryRowOfAForgedCommit(query: Bool) async throws {
        try await SignedHarness.run { h in
            let db = h.ownerDB
            let zone = try await db.createZone(named: "Notes")
            // Commit 1: 40 notes (enough for the helper threads); commit 2: 5 more.
            let first = (0..<40).map { String(format: "a%02d", $0) }, second = (0..<5).map { "b\($0)" }
            _ = try await db.modify(saving: first.map { signedNote($0, in: zone) }, in: zone)
            _ = try await db.modify(saving: second.map { signedNote($0, in: zone) }, in: zone)
            let rowID = try signedRowID(h, zone)
            try h.sql { db in
                try db.execute(sql: "UPDATE zone_commit SET author_label = 'someone else' WHERE zone_id = ? AND seq = 1", arguments: [rowID])
                #expect(db.changesCount == 1)
            }
            let reader = try h.fresh(h.owner).privateDatabase
            var refused = [String: StoreError](), read = [String]()
            if query {
                let result = try await reader.query(Query(recordType: "Note"), in: zone)
                refused = result.refused
                read = result.records.map(\.name)
            } else {
                for (name, outcome) in try await reader.records(named: first + second, in: zone) {
                    switch outcome {
                    case .success(let record): read.append(record.name)
                    case .failure(let error): refused[name] = error
                    }
                }
            }
            #expect(read.sorted() == second)
            #expect(refused.keys.sorted() == first)
            for (name, error) in refused {
                #expect(error.code == .integrityFailure)
                #expect(error.message.contains("record '\(name)'") && error.message.contains("commit 1 of zone 'Notes' fails its author's signature"),
                        "\(error.message)")
            }
            // The refusal is not cached as a success: the same session refuses them again.
            let again = try await reader.records(named: [first[0], first[39]], in: zone)
            #expect(again.values.allSatisfy { if case .failure(let e) = $0 { e.code == .integrityFailure } else { false } })
        }
    }

    // MARK: - Writers who bypass the library

    @Test("a commit forged by a read-only participant is refused; the same forgery by a read-write participant verifies")
    func readOnlyParticipantForgery() async throws {
        try await SignedHarness.run { h in
            let zone = try await h.ownerZone(notes: ["n1"])
            let bob = try h.newUser("Bob Reader", "bob@example.com")
            let carol = try h.newUser("Carol Writer", "carol@example.com")
            try await h.share(zone, with: [(bob, .readOnly), (carol, .readWrite)])
            let zoneRow = try h.zoneRow(zone)
            #expect(zoneRow.membershipSeq == 3) // share created (1), Bob added (2), Carol added (3)

            // Through the library, Bob cannot write.
            await signedExpectError(.permissionFailure) { try await bob.sharedDatabase.save(signedNote("via-library", in: zone)) }

            // Bypassing it, Bob signs a commit of his own; his zone key seals a body that opens.
            let bobSeq = try h.forge(in: zone, signer: bob, name: "by-bob", title: "bob was here", body: "bob's body")
            #expect(bobSeq == zoneRow.sequence + 1)
            let reader = try h.fresh(h.owner).privateDatabase
            let error = await signedExpectError(.integrityFailure) { try await reader.record(named: "by-bob", in: zone) }
            let message = error?.message ?? ""
            #expect(message.contains("record 'by-bob'"), "\(message)")
            #expect(message.contains("commit \(bobSeq) of zone 'Notes' was signed by \(bob.userID), who was not a read-write participant at membership 3"),
                    "\(message)")
            // Bob's own reading refuses it too, and so do queries and change feeds.
            await signedExpectError(.integrityFailure) { try await h.fresh(bob).sharedDatabase.record(named: "by-bob", in: zone) }
            let result = try await reader.query(Query(recordType: "Note"), in: zone)
            #expect(result.records.map(\.name) == ["n1"])
            #expect(Set(result.refused.keys) == ["by-bob"])
            // The query path gives the same reason.
            #expect(result.refused["by-bob"]?.message.contains("who was not a read-write participant at membership 3") == true,
                    "\(result.refused["by-bob"]?.message ?? "")")
            let changes = try await reader.changes(in: zone, since: nil)
            #expect(changes.changed.map(\.name) == ["n1"])
            #expect(Set(changes.refused.keys) == ["by-bob"])

            // Control: the very same forgery signed by Carol (read-write at membership 3) verifies.
            let carolSeq = try h.forge(in: zone, signer: carol, name: "by-carol", title: "carol was here", body: "carol's body")
            #expect(carolSeq == bobSeq + 1)
            let byCarol = try await h.fresh(h.owner).privateDatabase.record(named: "by-carol", in: zone)
            #expect(byCarol.values["title"] == .string("carol was here"))
            #expect(byCarol.encryptedValues["body"] == .string("carol's body"))
            #expect(byCarol.modifierID == carol.userID)
            #expect(byCarol.changeTag == ChangeTag.make(carolSeq))
        }
    }

    @Test("a forged commit claiming membership 0 or a future membership is refused even for a read-write participant")
    func forgedMembershipSequenceOutOfRange() async throws {
        try await SignedHarness.run { h in
            let zone = try await h.ownerZone(notes: ["n1"])
            let carol = try h.newUser("Carol Writer", "carol@example.com")
            try await h.share(zone, with: [(carol, .readWrite)])
            #expect(try h.zoneRow(zone).membershipSeq == 2)
            try h.forge(in: zone, signer: carol, name: "claims-zero", title: "t", membershipSeq: 0)
            try h.forge(in: zone, signer: carol, name: "claims-future", title: "t", membershipSeq: 3)
            let reader = try h.fresh(h.owner).privateDatabase
            let zero = await signedExpectError(.integrityFailure) { try await reader.record(named: "claims-zero", in: zone) }
            #expect(zero?.message.contains("not a read-write participant at membership 0") == true, "\(zero?.message ?? "")")
            let future = await signedExpectError(.integrityFailure) { try await reader.record(named: "claims-future", in: zone) }
            #expect(future?.message.contains("not a read-write participant at membership 3") == true, "\(future?.message ?? "")")
        }
    }

    @Test("a commit signed by someone who is not the author it names is refused")
    func commitSignedByAnotherKey() async throws {
        try await SignedHarness.run { h in
            let zone = try await h.ownerZone(notes: ["n1"])
            let mallory = try h.newUser("Mallory", "mallory@example.com")
            // Mallory signs, then relabels the commit as the owner's.
            let seq = try h.forge(in: zone, signer: mallory, name: "forged", title: "t", body: nil)
            let rowID = try signedRowID(h, zone)
            try h.sql { db in
                try db.execute(sql: "UPDATE zone_commit SET author_id = ? WHERE zone_id = ? AND seq = ?", arguments: [h.owner.userID, rowID, seq])
                try db.execute(sql: "UPDATE record SET creator_id = ?, modifier_id = ? WHERE zone_id = ? AND name = 'forged'",
                               arguments: [h.owner.userID, h.owner.userID, rowID])
            }
            let error = await signedExpectError(.integrityFailure) { try await h.fresh(h.owner).privateDatabase.record(named: "forged", in: zone) }
            #expect(error?.message.contains("fails its author's signature") == true, "\(error?.message ?? "")")
        }
    }

    // MARK: - Shares, memberships, commits

    @Test("a share edited by hand (title, public permission) fails with .integrityFailure", arguments: [
        "UPDATE share SET title = 'Hijacked' WHERE zone_id = ?",
        "UPDATE share SET public_permission = 2 WHERE zone_id = ?",
    ])
    func shareEdited(_ statement: String) async throws {
        try await SignedHarness.run { h in
            let zone = try await h.ownerZone(notes: ["n1"])
            let bob = try h.newUser("Bob Reader", "bob@example.com")
            try await h.share(zone, with: [(bob, .readOnly)])
            let rowID = try signedRowID(h, zone)
            try h.sql { db in
                try db.execute(sql: statement, arguments: [rowID])
                #expect(db.changesCount == 1)
            }
            let owner = await signedExpectError(.integrityFailure) { try await h.fresh(h.owner).privateDatabase.record(named: "n1", in: zone) }
            #expect(owner?.message.contains("the share of zone 'Notes' fails its owner's signature") == true, "\(owner?.message ?? "")")
            await signedExpectError(.integrityFailure) { try await h.fresh(bob).sharedDatabase.record(named: "n1", in: zone) }
            await signedExpectError(.integrityFailure) { try await h.fresh(bob).sharedDatabase.changes(in: zone, since: nil) }
            await signedExpectError(.integrityFailure) { try await h.fresh(h.owner).privateDatabase.query(Query(recordType: "Note"), in: zone) }
            await signedExpectError(.integrityFailure) { try await h.fresh(h.owner).fetchShare(in: zone) }
        }
    }

    @Test("a membership_log entry edited by hand: records written under it fail with .integrityFailure")
    func membershipEntryEdited() async throws {
        try await SignedHarness.run { h in
            let zone = try await h.ownerZone(notes: ["n1"])
            let bob = try h.newUser("Bob Reader", "bob@example.com")
            let carol = try h.newUser("Carol Writer", "carol@example.com")
            try await h.share(zone, with: [(carol, .readWrite)])
            // Carol writes at membership 2 (she was added then); Bob is added at 3.
            _ = try await h.fresh(carol).sharedDatabase.save(signedNote("c2", in: zone))
            let bobShare = try await h.owner.addParticipant(bob.userID, permission: .readOnly, to: zone)
            _ = try await bob.acceptShare(url: bobShare.url)
            let zoneRow = try h.zoneRow(zone)
            #expect(zoneRow.membershipSeq == 3)
            #expect(try await h.fresh(h.owner).privateDatabase.record(named: "c2", in: zone).modifierID == carol.userID)

            // Bob rewrites entry 3 to make himself read-write, and forges a commit under it.
            let forged = MembershipEntry(seq: 3, fromCommit: zoneRow.sequence, epoch: zoneRow.currentEpoch, publicPermission: .none,
                                         members: [carol.userID: .readWrite, bob.userID: .readWrite])
            try h.sql { db in
                try db.execute(sql: "UPDATE membership_log SET content = ? WHERE zone_id = ? AND seq = 3",
                               arguments: [Data(forged.encoded(zoneUID: zoneRow.uid)), zoneRow.rowID])
                #expect(db.changesCount == 1)
            }
            try h.forge(in: zone, signer: bob, name: "by-bob", title: "mine now")
            let reader = try h.fresh(h.owner).privateDatabase
            let error = await signedExpectError(.integrityFailure) { try await reader.record(named: "by-bob", in: zone) }
            #expect(error?.message.contains("membership 3 of zone 'Notes' fails its owner's signature") == true, "\(error?.message ?? "")")
            // Carol's record was written under entry 2, whose window ends where entry 3 begins:
            // with entry 3 forged, that window cannot be checked, so her record is refused too.
            // The owner's records need no membership entry and still verify.
            await signedExpectError(.integrityFailure) { try await reader.record(named: "c2", in: zone) }
            #expect(try await reader.record(named: "n1", in: zone).modifierID == h.owner.userID)

            // Editing one byte of entry 2 by hand (Carol's permission, its last byte: read-write → read-only)
            // refuses Carol's record.
            try h.sql { db in
                let content = try #require(try Data.fetchOne(db, sql: "SELECT content FROM membership_log WHERE zone_id = ? AND seq = 2",
                                                             arguments: [zoneRow.rowID]))
                #expect(content.last == UInt8(SharePermission.readWrite.rawValue))
                var edited = Array(content)
                edited[edited.count - 1] = UInt8(SharePermission.readOnly.rawValue)
                try db.execute(sql: "UPDATE membership_log SET content = ? WHERE zone_id = ? AND seq = 2", arguments: [Data(edited), zoneRow.rowID])
                #expect(db.changesCount == 1)
            }
            let reader2 = try h.fresh(h.owner).privateDatabase
            let carolError = await signedExpectError(.integrityFailure) { try await reader2.record(named: "c2", in: zone) }
            #expect(carolError?.message.contains("record 'c2'") == true, "\(carolError?.message ?? "")")
            #expect(carolError?.message.contains("membership 2") == true, "\(carolError?.message ?? "")")
            let result = try await reader2.query(Query(recordType: "Note"), in: zone)
            #expect(result.records.map(\.name) == ["n1"])
            #expect(Set(result.refused.keys) == ["by-bob", "c2"])
        }
    }

    @Test("a commit's author_label edited by hand fails with .integrityFailure")
    func commitLabelEdited() async throws {
        try await SignedHarness.run { h in
            let zone = try await h.ownerZone(notes: [])
            var db = h.ownerDB
            db.transactionAuthor = "importer"
            _ = try await db.save(signedNote("r1", in: zone))
            _ = try await db.save(signedNote("r2", in: zone))
            let rowID = try signedRowID(h, zone)
            try h.sql { db in
                try db.execute(sql: "UPDATE zone_commit SET author_label = 'someone else' WHERE zone_id = ? AND seq = 1", arguments: [rowID])
                #expect(db.changesCount == 1)
            }
            let reader = try h.fresh(h.owner).privateDatabase
            let error = await signedExpectError(.integrityFailure) { try await reader.record(named: "r1", in: zone) }
            #expect(error?.message.contains("record 'r1'") == true, "\(error?.message ?? "")")
            #expect(error?.message.contains("commit 1 of zone 'Notes' fails its author's signature") == true, "\(error?.message ?? "")")
            #expect(try await reader.record(named: "r2", in: zone).transactionAuthor == "importer")

            // Removing the label (NULL) is an edit too.
            try h.sql { db in
                try db.execute(sql: "UPDATE zone_commit SET author_label = NULL WHERE zone_id = ? AND seq = 2", arguments: [rowID])
            }
            await signedExpectError(.integrityFailure) { try await h.fresh(h.owner).privateDatabase.record(named: "r2", in: zone) }
        }
    }

    @Test("a commit deleted by hand: the records of that commit are refused, the others read")
    func commitDeleted() async throws {
        try await SignedHarness.run { h in
            let zone = try await h.ownerZone(notes: ["a"])
            _ = try await h.ownerDB.modify(saving: [signedNote("b1", in: zone), signedNote("b2", in: zone)], in: zone)
            _ = try await h.ownerDB.save(signedNote("c", in: zone))
            let rowID = try signedRowID(h, zone)
            try h.sql { db in
                try db.execute(sql: "DELETE FROM zone_commit WHERE zone_id = ? AND seq = 2", arguments: [rowID])
                #expect(db.changesCount == 1)
            }
            let reader = try h.fresh(h.owner).privateDatabase
            for name in ["b1", "b2"] {
                let error = await signedExpectError(.integrityFailure) { try await reader.record(named: name, in: zone) }
                #expect(error?.message.contains("record '\(name)'") == true, "\(error?.message ?? "")")
                #expect(error?.message.contains("commit 2 of zone 'Notes' is missing") == true, "\(error?.message ?? "")")
            }
            let result = try await reader.query(Query(recordType: "Note"), in: zone)
            #expect(result.records.map(\.name) == ["a", "c"])
            #expect(Set(result.refused.keys) == ["b1", "b2"])
            let changes = try await reader.changes(in: zone, since: nil)
            #expect(changes.changed.map(\.name) == ["a", "c"])
            #expect(Set(changes.refused.keys) == ["b1", "b2"])
        }
    }

    // MARK: - Permission by membership sequence

    @Test("a writer demoted to read-only: their earlier records still verify; a new commit under the new membership is refused")
    func demotedWriterEarlierRecordsVerify() async throws {
        try await SignedHarness.run { h in
            let zone = try await h.ownerZone(notes: ["n1"])
            let carol = try h.newUser("Carol Writer", "carol@example.com")
            try await h.share(zone, with: [(carol, .readWrite)])
            var carolDB = carol.sharedDatabase
            carolDB.transactionAuthor = "carol-app"
            let saved = try await carolDB.save(signedNote("c1", in: zone, body: "carol's secret"))
            #expect(try h.zoneRow(zone).membershipSeq == 2)
            _ = try await h.owner.setPermission(.readOnly, for: carol.userID, in: zone)
            #expect(try h.zoneRow(zone).membershipSeq == 3)

            // Carol's earlier record verifies for everyone, with her as its author.
            for reader in try [h.fresh(h.owner).privateDatabase, h.fresh(carol).sharedDatabase] {
                let c1 = try await reader.record(named: "c1", in: zone)
                #expect(c1.modifierID == carol.userID)
                #expect(c1.transactionAuthor == "carol-app")
                #expect(c1.changeTag == saved.changeTag)
                #expect(c1.encryptedValues["body"] == .string("carol's secret"))
                let result = try await reader.query(Query(recordType: "Note"), in: zone)
                #expect(result.records.map(\.name) == ["c1", "n1"])
                #expect(result.refused.isEmpty)
            }
            let report = try await h.fresh(h.owner).audit()
            #expect(report.findings.isEmpty, "\(report.findings)")

            // Now read-only: the library refuses her writes ...
            await signedExpectError(.permissionFailure) { try await carol.sharedDatabase.save(signedNote("c2", in: zone)) }
            // ... and a commit she forges under the current membership is refused on read.
            try h.forge(in: zone, signer: carol, name: "c3", title: "after demotion")
            let error = await signedExpectError(.integrityFailure) { try await h.fresh(h.owner).privateDatabase.record(named: "c3", in: zone) }
            #expect(error?.message.contains("not a read-write participant at membership 3") == true, "\(error?.message ?? "")")
        }
    }

    @Test("a demoted writer's forged commit claiming the earlier membership is refused (the membership was no longer in force)")
    func demotedWriterClaimingEarlierMembership() async throws {
        try await SignedHarness.run { h in
            let zone = try await h.ownerZone(notes: ["n1"]) // the schema knows Note.title and Note.body
            let carol = try h.newUser("Carol Writer", "carol@example.com")
            try await h.share(zone, with: [(carol, .readWrite)])
            _ = try await h.owner.setPermission(.readOnly, for: carol.userID, in: zone)
            try h.forge(in: zone, signer: carol, name: "backdated", title: "claims membership 2", membershipSeq: 2)
            let error = await signedExpectError(.integrityFailure) { try await h.fresh(h.owner).privateDatabase.record(named: "backdated", in: zone) }
            #expect(error?.message.contains("no longer in force") == true, "\(error?.message ?? "")")
        }
    }

    @Test("a reader promoted to read-write: records written after the promotion verify")
    func promotedReaderWrites() async throws {
        try await SignedHarness.run { h in
            let zone = try await h.ownerZone(notes: ["n1"])
            let bob = try h.newUser("Bob Reader", "bob@example.com")
            try await h.share(zone, with: [(bob, .readOnly)])
            await signedExpectError(.permissionFailure) { try await bob.sharedDatabase.save(signedNote("b0", in: zone)) }
            _ = try await h.owner.setPermission(.readWrite, for: bob.userID, in: zone)
            _ = try await bob.sharedDatabase.save(signedNote("b1", in: zone))
            let b1 = try await h.fresh(h.owner).privateDatabase.record(named: "b1", in: zone)
            #expect(b1.modifierID == bob.userID)
            #expect(try await h.fresh(h.owner).audit().findings.isEmpty)
        }
    }

    @Test("a removed participant's earlier records still verify")
    func removedWriterEarlierRecordsVerify() async throws {
        try await SignedHarness.run { h in
            let zone = try await h.ownerZone(notes: [])
            let carol = try h.newUser("Carol Writer", "carol@example.com")
            try await h.share(zone, with: [(carol, .readWrite)])
            _ = try await carol.sharedDatabase.save(signedNote("c1", in: zone, body: "before removal"))
            _ = try await h.owner.removeParticipant(carol.userID, from: zone)
            let c1 = try await h.fresh(h.owner).privateDatabase.record(named: "c1", in: zone)
            #expect(c1.modifierID == carol.userID)
            #expect(c1.encryptedValues["body"] == .string("before removal"))
            await signedExpectError(.permissionFailure) { try await h.fresh(carol).sharedDatabase.record(named: "c1", in: zone) }
        }
    }

    @Test("after the share stops (an entry with no members), earlier participant records verify; a later forgery is refused")
    func stoppedShare() async throws {
        try await SignedHarness.run { h in
            let zone = try await h.ownerZone(notes: ["n1"])
            let carol = try h.newUser("Carol Writer", "carol@example.com")
            try await h.share(zone, with: [(carol, .readWrite)])
            _ = try await carol.sharedDatabase.save(signedNote("c1", in: zone, body: "while shared"))
            try await h.owner.stopSharing(zone: zone)
            let row = try h.zoneRow(zone)
            #expect(row.membershipSeq == 3)
            let entry = try h.sql { db in try h.owner.membership(db, zone: row, seq: 3) }
            #expect(entry.members.isEmpty && entry.publicPermission == .none)

            let c1 = try await h.fresh(h.owner).privateDatabase.record(named: "c1", in: zone)
            #expect(c1.modifierID == carol.userID)
            #expect(c1.encryptedValues["body"] == .string("while shared"))
            // Carol has lost the key, but a plain-only record needs none: she still cannot write one.
            try h.forge(in: zone, signer: carol, name: "after-stop", title: "still here", body: nil)
            let error = await signedExpectError(.integrityFailure) { try await h.fresh(h.owner).privateDatabase.record(named: "after-stop", in: zone) }
            #expect(error?.message.contains("not a read-write participant at membership 3") == true, "\(error?.message ?? "")")
            #expect(try await h.fresh(h.owner).audit().signedKeys == [SignedFinding(.commit, "commit 3"), SignedFinding(.record, "after-stop")])
        }
    }

    @Test("a public read-write link: a link writer's records verify; after the link goes read-only their new commits are refused")
    func publicLinkWriter() async throws {
        try await SignedHarness.run { h in
            let zone = try await h.ownerZone(notes: ["n1"])
            let eve = try h.newUser("Eve Linker", "eve@example.com")
            let share = try await h.owner.share(zone: zone, title: "Open", publicPermission: .readWrite)
            _ = try await eve.acceptShare(url: share.url)
            _ = try await eve.sharedDatabase.save(signedNote("e1", in: zone, body: "via link"))
            let m = try h.zoneRow(zone).membershipSeq
            _ = try await h.owner.setPublicPermission(.readOnly, in: zone)
            #expect(try h.zoneRow(zone).membershipSeq > m)
            let e1 = try await h.fresh(h.owner).privateDatabase.record(named: "e1", in: zone)
            #expect(e1.modifierID == eve.userID)
            #expect(e1.encryptedValues["body"] == .string("via link"))
            await signedExpectError(.permissionFailure) { try await eve.sharedDatabase.save(signedNote("e2", in: zone)) }
            try h.forge(in: zone, signer: eve, name: "e3", title: "forged after read-only")
            await signedExpectError(.integrityFailure) { try await h.fresh(h.owner).privateDatabase.record(named: "e3", in: zone) }
        }
    }

    @Test("a removed writer cannot backdate a commit to the membership where they were read-write (key rotation is no defence)",
          arguments: ["plain only", "sealed under the old key"])
    func removedWriterBackdatedForgery(_ variant: String) async throws {
        try await SignedHarness.run { h in
            let zone = try await h.ownerZone(notes: ["n1"])
            let carol = try h.newUser("Carol Writer", "carol@example.com")
            try await h.share(zone, with: [(carol, .readWrite)])
            _ = try await carol.sharedDatabase.save(signedNote("c1", in: zone)) // Carol holds the epoch-1 key
            _ = try await h.owner.removeParticipant(carol.userID, from: zone)
            let row = try h.zoneRow(zone)
            #expect(row.currentEpoch == 2 && row.membershipSeq == 3)
            await signedExpectError(.permissionFailure) { try await carol.sharedDatabase.save(signedNote("c2", in: zone)) }

            // Removed, Carol signs a commit claiming membership 2 (when she was read-write) and epoch 1.
            try h.forge(in: zone, signer: carol, name: "after-removal", title: "written after removal",
                        body: variant == "plain only" ? nil : "sealed with a key she kept", membershipSeq: 2, epoch: 1)
            let reader = try h.fresh(h.owner).privateDatabase
            await signedExpectError(.integrityFailure, "a commit made after Carol's removal verifies as hers") {
                try await reader.record(named: "after-removal", in: zone)
            }
        }
    }

    // MARK: - One signature per commit

    @Test("a batch of 400 saves is one commit with 400 entries")
    func batchOf400IsOneCommit() async throws {
        try await SignedHarness.run { h in
            let zone = try await h.ownerDB.createZone(named: "Bulk")
            let records = (0..<400).map { signedNote(String(format: "r%03d", $0), in: zone) }
            let result = try await h.ownerDB.modify(saving: records, in: zone)
            #expect(result.saved.count == 400)
            #expect(Set(result.saved.compactMap(\.changeTag)) == ["1"])
            let rowID = try signedRowID(h, zone)
            let (count, length, signatureLength) = try h.sql { db -> (Int, Int, Int) in
                let row = try #require(try Row.fetchOne(db, sql: "SELECT count(*), max(length(entries)), max(length(signature)) FROM zone_commit WHERE zone_id = ?",
                                                         arguments: [rowID]))
                return (row[0], row[1], row[2])
            }
            #expect(count == 1)
            #expect(length == 400 * 32)
            #expect(signatureLength == 64)
            // Every record of the batch verifies against that one commit.
            let fetched = try await h.fresh(h.owner).privateDatabase.query(Query(recordType: "Note"), in: zone)
            #expect(fetched.records.count == 400)
            #expect(fetched.refused.isEmpty)
            // One verified commit in the reader's cache for the whole batch.
            let reader = try h.fresh(h.owner)
            #expect(try await reader.privateDatabase.query(Query(recordType: "Note"), in: zone).records.count == 400)
            #expect(reader.commits.withLock { $0[rowID]?.count } == 1)

            // A batch of saves and deletes is one commit too.
            _ = try await h.ownerDB.modify(saving: [signedNote("extra", in: zone)], deleting: (0..<10).map { RecordDeletion(name: String(format: "r%03d", $0)) }, in: zone)
            let second = try h.sql { db in try Int.fetchOne(db, sql: "SELECT length(entries) FROM zone_commit WHERE zone_id = ? AND seq = 2", arguments: [rowID]) }
            #expect(second == 11 * 32)
            #expect(try h.commitCount(zone) == 2)
            // One more record than the limit is refused, and writes no commit.
            await signedExpectError(.limitExceeded) {
                try await h.ownerDB.modify(saving: (0..<401).map { signedNote("x\($0)", in: zone) }, in: zone)
            }
            #expect(try h.commitCount(zone) == 2)
        }
    }
}

import CofferCrypto
import CofferVault
import CofferStoreTestSupport
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
        try await withStore { h in
            let zone = try await h.makeZone(notes: [])
            _ = try await h.db.save(makeNote("r1", in: zone, title: "original title"))
            _ = try await h.db.save(makeNote("r2", in: zone, title: "other title"))
            let rowID = try h.zoneRowID(zone)
            let edited = try h.sqlite { db -> Int in
                try db.execute(sql: "UPDATE record SET plain = replace(plain, 'original title', 'forged title') WHERE zone_id = ? AND name = 'r1'",
                               arguments: [rowID])
                return db.changesCount
            }
            #expect(edited == 1)
            // The edit is a valid JSON value of the right type: only the signature can catch it.
            let stored = try h.sqlite { db in try String.fetchOne(db, sql: "SELECT plain FROM record WHERE zone_id = ? AND name = 'r1'", arguments: [rowID]) }
            #expect(stored == #"{"title":"forged title"}"#)

            let reader = try await h.fresh(h.alice).privateDatabase
            let error = await expectStoreError(.integrityFailure) { try await reader.record(named: "r1", in: zone) }
            #expect(error?.message.contains("record 'r1'") == true, "\(error?.message ?? "")")
            #expect(error?.message.contains("does not match its signed log entry 2") == true, "\(error?.message ?? "")")
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
        try await withStore { h in
            let zone = try await h.makeZone(notes: [])
            _ = try await h.db.save(makeNote("r1", in: zone, title: "one", body: "secret one"))
            _ = try await h.db.save(makeNote("r2", in: zone, title: "two", body: "secret two"))
            let rowID = try h.zoneRowID(zone)
            try h.sqlite { db in
                try db.execute(sql: """
                    UPDATE record SET (plain, sealed, seq) = (SELECT plain, sealed, seq FROM record WHERE zone_id = ?1 AND name = 'r2')
                    WHERE zone_id = ?1 AND name = 'r1'
                    """, arguments: [rowID])
                #expect(db.changesCount == 1)
            }
            let reader = try await h.fresh(h.alice).privateDatabase
            let error = await expectStoreError(.integrityFailure) { try await reader.record(named: "r1", in: zone) }
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
        ColumnEdit(label: "seq moved to another commit", sql: "UPDATE record SET seq = 3 WHERE zone_id = ? AND name = 'r1'", refused: true),
        ColumnEdit(label: "seq moved to the genesis", sql: "UPDATE record SET seq = 1 WHERE zone_id = ? AND name = 'r1'", refused: true),
        ColumnEdit(label: "modifier_id", sql: "UPDATE record SET modifier_id = 'someone-else' WHERE zone_id = ? AND name = 'r1'", refused: true),
        ColumnEdit(label: "seq to a missing commit", sql: "UPDATE record SET seq = 99 WHERE zone_id = ? AND name = 'r1'", refused: true),
        ColumnEdit(label: "name", sql: "UPDATE record SET name = 'r9' WHERE zone_id = ? AND name = 'r1'", refused: true),
    ]

    @Test("every hashed column of a record row edited by hand is refused", arguments: columnEdits)
    func hashedColumnEdited(_ edit: ColumnEdit) async throws {
        try await withStore { h in
            let zone = try await h.makeZone(notes: [])
            _ = try await h.db.save(makeNote("r1", in: zone))
            _ = try await h.db.save(makeNote("r2", in: zone))
            let rowID = try h.zoneRowID(zone)
            try h.sqlite { db in
                try db.execute(sql: edit.sql, arguments: [rowID])
                #expect(db.changesCount == 1)
            }
            let name = edit.label == "name" ? "r9" : "r1"
            let reader = try await h.fresh(h.alice).privateDatabase
            let error = await expectStoreError(.integrityFailure) { try await reader.record(named: name, in: zone) }
            #expect(error?.message.contains("'\(name)'") == true, "\(error?.message ?? "")")
            let result = try await reader.query(Query(recordType: "Note"), in: zone)
            #expect(result.records.map(\.name) == ["r2"])
            #expect(Set(result.refused.keys) == [name])
            let changes = try await reader.changes(in: zone, since: nil)
            #expect(changes.changed.map(\.name) == ["r2"])
            #expect(Set(changes.refused.keys) == [name])
        }
    }

    @Test("the modifier column is signed: edited to another user, the record is refused")
    func modifierColumnIsSigned() async throws {
        try await withStore { h in
            let zone = try await h.makeZone(notes: ["r1"])
            let bob = try await h.user("Bob Reader", "bob@example.com")
            let rowID = try h.zoneRowID(zone)
            try h.sqlite { db in
                try db.execute(sql: "UPDATE record SET modifier_id = ? WHERE zone_id = ? AND name = 'r1'", arguments: [bob.userID, rowID])
                #expect(db.changesCount == 1)
            }
            let error = await expectStoreError(.integrityFailure) { try await h.fresh(h.alice).privateDatabase.record(named: "r1", in: zone) }
            #expect(error?.message.contains("record 'r1'") == true, "\(error?.message ?? "")")
        }
    }

    @Test("a read of many rows refuses every row of an edited commit and of the commits after it, each by its own name", arguments: [false, true])
    func batchReadRefusesEveryRowOfAForgedCommit(query: Bool) async throws {
        try await withStore { h in
            let db = h.db
            let zone = try await db.createZone(named: "Notes")
            // Commit 1: 40 notes; commit 2: 5 more.
            let first = (0..<40).map { String(format: "a%02d", $0) }, second = (0..<5).map { "b\($0)" }
            _ = try await db.modify(saving: first.map { makeNote($0, in: zone) }, in: zone)
            _ = try await db.modify(saving: second.map { makeNote($0, in: zone) }, in: zone)
            let rowID = try h.zoneRowID(zone)
            // The first commit (entry 2, after the genesis) has its label edited: its body no longer
            // hashes to what entry 3 names, so it and everything after it are refused.
            try h.sqlite { db in try editEntryLabel(db, zoneRowID: rowID, seq: 2, to: "someone else") }
            // The owner saw the log to its end: the store no longer extends it.
            await expectStoreError(.integrityFailure) { try await h.fresh(h.alice).privateDatabase.record(named: "b0", in: zone) }
            // A reader who never saw it reads up to the refused entry: nothing after it.
            let reader = try await h.stranger(h.alice).privateDatabase
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
            #expect(read.isEmpty)
            #expect(refused.keys.sorted() == first + second)
            for (name, error) in refused {
                #expect(error.code == .integrityFailure)
                #expect(error.message.contains("record '\(name)'") && error.message.contains("entry 2 of the log of zone 'Notes'"),
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
        try await withStore { h in
            let zone = try await h.makeZone(notes: ["n1"])
            let bob = try await h.user("Bob Reader", "bob@example.com")
            let carol = try await h.user("Carol Writer", "carol@example.com")
            try await h.share(zone, with: [(bob, .readOnly), (carol, .readWrite)])
            let zoneRow = try await h.zoneRow(zone)
            // genesis (1), n1 (2), share created (3), Bob added (4), Bob accepts (5), Carol added (6), Carol accepts (7)
            #expect(try await h.state(zone).ownerSeq == 6)

            // Through the library, Bob cannot write.
            await expectStoreError(.permissionFailure) { try await bob.sharedDatabase.save(makeNote("via-library", in: zone)) }

            // Bypassing it, Bob signs a commit of his own; his zone key seals a body that opens.
            let bobSeq = try await h.forge(in: zone, signer: bob, name: "by-bob", title: "bob was here", body: "bob's body")
            #expect(bobSeq == zoneRow.sequence + 1)
            let reader = try await h.fresh(h.alice).privateDatabase
            let error = await expectStoreError(.integrityFailure) { try await reader.record(named: "by-bob", in: zone) }
            let message = error?.message ?? ""
            #expect(message.contains("record 'by-bob'"), "\(message)")
            #expect(message.contains("entry \(bobSeq) of the log of zone 'Notes'") && message.contains("a commit by \(bob.userID), who has read-only permission"),
                    "\(message)")
            // Bob's own reading refuses it too, and so do queries and change feeds.
            await expectStoreError(.integrityFailure) { try await h.fresh(bob).sharedDatabase.record(named: "by-bob", in: zone) }
            let result = try await reader.query(Query(recordType: "Note"), in: zone)
            #expect(result.records.map(\.name) == ["n1"])
            #expect(Set(result.refused.keys) == ["by-bob"])
            // The query path gives the same reason.
            #expect(result.refused["by-bob"]?.message.contains("who has read-only permission") == true,
                    "\(result.refused["by-bob"]?.message ?? "")")
            let changes = try await reader.changes(in: zone, since: nil)
            #expect(changes.changed.map(\.name) == ["n1"])
            #expect(Set(changes.refused.keys) == ["by-bob"])

            // Control: the very same forgery signed by Carol (read-write) verifies, once it takes the
            // place of Bob's refused entry at the head of the verified log.
            try h.sqlite { db in try db.execute(sql: "DELETE FROM zone_log WHERE zone_id = ? AND seq = ?", arguments: [zoneRow.rowID, bobSeq]) }
            let carolSeq = try await h.forge(in: zone, signer: carol, name: "by-carol", title: "carol was here", body: "carol's body")
            #expect(carolSeq == bobSeq)
            let byCarol = try await h.fresh(h.alice).privateDatabase.record(named: "by-carol", in: zone)
            #expect(byCarol.values["title"] == .string("carol was here"))
            #expect(byCarol.encryptedValues["body"] == .string("carol's body"))
            #expect(byCarol.modifierID == carol.userID)
            #expect(byCarol.changeTag == ChangeTag.make(carolSeq))
        }
    }

    @Test("a forged commit claiming an owner entry other than the one in force is refused even for a read-write participant",
          arguments: [Int64(1), 0, 99])
    func forgedOwnerSequence(_ claimed: Int64) async throws {
        try await withStore { h in
            let zone = try await h.makeZone(notes: ["n1"])
            let carol = try await h.user("Carol Writer", "carol@example.com")
            try await h.share(zone, with: [(carol, .readWrite)])
            #expect(try await h.state(zone).ownerSeq == 4)
            try await h.forge(in: zone, signer: carol, name: "claims", title: "t", ownerSeq: claimed)
            let reader = try await h.fresh(h.alice).privateDatabase
            let error = await expectStoreError(.integrityFailure) { try await reader.record(named: "claims", in: zone) }
            #expect(error?.message.contains(claimed == 0 ? "is malformed" : "claims membership \(claimed); the one in force is 4") == true,
                    "\(error?.message ?? "")")
        }
    }

    @Test("a writer's signed commit in the earlier entry format, after entries of the current one, is refused; so is one that names a signing device",
          arguments: ["format 1", "device", "device at position 0"])
    func entryFormatForgery(_ variant: String) async throws {
        try await withStore { h in
            let zone = try await h.makeZone(notes: ["n1"])
            let carol = try await h.user("Carol Writer", "carol@example.com")
            try await h.share(zone, with: [(carol, .readWrite)])
            // Every entry written now is of format 2.
            let rowID = try h.zoneRowID(zone)
            let formats = try h.sqlite { db in
                try Data.fetchAll(db, sql: "SELECT body FROM zone_log WHERE zone_id = ? ORDER BY seq", arguments: [rowID])
                    .map { try #require(LogEntry.decode(Array($0))).format }
            }
            #expect(formats.count == 5 && formats.allSatisfy { $0 == .v2 })
            // A read-write member signs, with her own key, a commit whose only fault is its format.
            let seq = try await h.forge(in: zone, signer: carol, name: "by-carol", title: "carol", body: "carol's body") { entry in
                switch variant {
                case "format 1": entry.format = .v1
                case "device": entry.deviceID = [UInt8](repeating: 7, count: LogEntry.deviceIDLength); entry.userLogSeq = 1
                default: entry.deviceID = [UInt8](repeating: 7, count: LogEntry.deviceIDLength)
                }
            }
            let reader = try await h.fresh(h.alice).privateDatabase
            let error = await expectStoreError(.integrityFailure) { try await reader.record(named: "by-carol", in: zone) }
            let message = error?.message ?? ""
            switch variant {
            case "format 1":
                #expect(message.contains("entry \(seq) of the log of zone 'Notes'") && message.contains("the entry is of format 1, after one of format 2"),
                        "\(message)")
            case "device":
                #expect(message.contains("entry \(seq)") && message.contains("signed by a device, which this version of Coffer does not know"),
                        "\(message)")
            default: // a device with no user-log position does not even decode
                #expect(message.contains("entry \(seq)") && message.contains("malformed"), "\(message)")
            }
            // The records before it still read.
            #expect(try await reader.record(named: "n1", in: zone).name == "n1")
        }
    }

    @Test("a read never writes the marks file; a commit writes it when it is due, with what reads advanced")
    func marksWrittenAtCommit() async throws {
        try await withStore { h in
            let zone = try await h.makeZone(notes: ["n1"])
            let carol = try await h.user("Carol Writer", "carol@example.com")
            try await h.share(zone, with: [(carol, .readWrite)])
            let reader = try await h.fresh(h.alice)
            try reader.saveMarks()
            let url = reader.vault.marks.url
            let before = try Data(contentsOf: url)
            _ = try await carol.sharedDatabase.save(makeNote("by-carol", in: zone))
            reader.lastMarkSave.withLock { $0 = 0 } // a write of the file is due
            // The read verifies Carol's commit and advances the owner's mark, in memory only.
            #expect(try await reader.privateDatabase.record(named: "by-carol", in: zone).modifierID == carol.userID)
            #expect(reader.vault.marks.hasUnsavedChanges)
            #expect(try Data(contentsOf: url) == before, "a read wrote the marks file")
            // The owner's next commit writes the file, with the mark at the head it made.
            _ = try await reader.privateDatabase.save(makeNote("n2", in: zone))
            #expect(!reader.vault.marks.hasUnsavedChanges)
            #expect(try Data(contentsOf: url) != before)
            let head = try await h.state(zone)
            #expect(try reader.vault.marks.mark(forZone: head.zoneUID)?.seq == head.headSeq)
        }
    }

    @Test("a commit signed by someone who is not the author it names is refused")
    func commitSignedByAnotherKey() async throws {
        try await withStore { h in
            let zone = try await h.makeZone(notes: ["n1"])
            let mallory = try await h.user("Mallory", "mallory@example.com")
            // Mallory signs, then relabels the commit as the owner's.
            let seq = try await h.forge(in: zone, signer: mallory, name: "forged", title: "t", body: nil)
            let rowID = try h.zoneRowID(zone)
            try h.sqlite { db in
                try editEntry(db, zoneRowID: rowID, seq: seq) { e in
                    LogEntry(zoneUID: e.zoneUID, seq: e.seq, prev: e.prev, kind: e.kind, authorID: h.alice.userID, time: e.time, payload: e.payload)
                }
                try db.execute(sql: "UPDATE record SET creator_id = ?, modifier_id = ? WHERE zone_id = ? AND name = 'forged'",
                               arguments: [h.alice.userID, h.alice.userID, rowID])
            }
            let error = await expectStoreError(.integrityFailure) { try await h.fresh(h.alice).privateDatabase.record(named: "forged", in: zone) }
            #expect(error?.message.contains("its signature by you does not verify") == true, "\(error?.message ?? "")")
        }
    }

    // MARK: - Shares, memberships, commits

    @Test("a membership entry edited by hand (title, public permission, a member's permission) is refused, with every entry after it",
          arguments: ["title", "public", "member"])
    func membershipEntryEdited(_ field: String) async throws {
        try await withStore { h in
            let zone = try await h.makeZone(notes: ["n1"])
            let bob = try await h.user("Bob Reader", "bob@example.com")
            let carol = try await h.user("Carol Writer", "carol@example.com")
            try await h.share(zone, with: [(bob, .readOnly), (carol, .readWrite)])
            _ = try await carol.sharedDatabase.save(makeNote("c2", in: zone))
            let rowID = try h.zoneRowID(zone)
            // Entry 4 adds Bob; Bob edits it, without the owner's key.
            try h.sqlite { db in
                try editEntry(db, zoneRowID: rowID, seq: 4) { e in
                    var w = ByteWriter()
                    var state = e.payload.withUnsafeBytes { raw -> StatePayload in
                        var r = RawReader(raw, what: "membership")
                        return try! StatePayload.decode(&r)
                    }
                    switch field {
                    case "title": state.share!.title = "Hijacked"
                    case "public": state.share!.publicPermission = .readWrite; state.share!.linkPublicKey = [UInt8](repeating: 7, count: 32)
                    default: state.share!.participants[bob.userID] = .init(role: .privateUser, permission: .readWrite, status: .pending)
                    }
                    state.encode(into: &w)
                    return LogEntry(zoneUID: e.zoneUID, seq: e.seq, prev: e.prev, kind: e.kind, authorID: e.authorID, time: e.time, payload: w.bytes)
                }
            }
            for reader in [try await h.fresh(h.alice).privateDatabase, try await h.fresh(carol).sharedDatabase] {
                // The owner's marks (and Carol's) were past entry 4: the log no longer extends them.
                let error = await expectStoreError(.integrityFailure) { try await reader.record(named: "n1", in: zone) }
                #expect(error?.message.contains("zone 'Notes'") == true, "\(error?.message ?? "")")
            }
            // A user who never saw the zone: the verified prefix ends before entry 4, so Bob is not
            // invited there, and Carol's record (after it) is refused.
            let stranger = try await h.user("Dan Newcomer", "dan@example.com")
            await expectStoreError(.zoneNotFound) { try await stranger.sharedDatabase.record(named: "n1", in: zone) }
            let fresh = try await h.otherStoreSession(h.alice)
            try fresh.vault.marks.reset(zone: try await h.zoneRow(zone).uid, to: nil)
            let result = try await fresh.privateDatabase.query(Query(recordType: "Note"), in: zone)
            #expect(result.records.map(\.name) == ["n1"])
            #expect(Set(result.refused.keys) == ["c2"])
            #expect(result.refused["c2"]?.message.contains("entry 4 of the log of zone 'Notes'") == true, "\(result.refused["c2"]?.message ?? "")")
            #expect(try await fresh.audit().findingKeys.contains(Finding(.log, "log")))
        }
    }

    @Test("a commit's author_label edited by hand fails with .integrityFailure")
    func commitLabelEdited() async throws {
        try await withStore { h in
            let zone = try await h.makeZone(notes: [])
            var db = h.db
            db.transactionAuthor = "importer"
            _ = try await db.save(makeNote("r1", in: zone))
            _ = try await db.save(makeNote("r2", in: zone))
            let rowID = try h.zoneRowID(zone)
            try h.sqlite { db in try editEntryLabel(db, zoneRowID: rowID, seq: 3, to: "someone else") }
            await expectStoreError(.integrityFailure) { try await h.fresh(h.alice).privateDatabase.record(named: "r1", in: zone) }
            let reader = try await h.stranger(h.alice).privateDatabase
            #expect(try await reader.record(named: "r1", in: zone).transactionAuthor == "importer")
            let error = await expectStoreError(.integrityFailure) { try await reader.record(named: "r2", in: zone) }
            #expect(error?.message.contains("record 'r2'") == true, "\(error?.message ?? "")")
            #expect(error?.message.contains("its signature by you does not verify") == true, "\(error?.message ?? "")")

            // Removing the label is an edit too.
            try h.sqlite { db in try editEntryLabel(db, zoneRowID: rowID, seq: 2, to: nil) }
            await expectStoreError(.integrityFailure) { try await h.stranger(h.alice).privateDatabase.record(named: "r1", in: zone) }
        }
    }

    @Test("a commit deleted by hand: the log no longer extends what its readers saw; one who never saw it reads up to the gap")
    func commitDeleted() async throws {
        try await withStore { h in
            let zone = try await h.makeZone(notes: ["a"])
            _ = try await h.db.modify(saving: [makeNote("b1", in: zone), makeNote("b2", in: zone)], in: zone)
            _ = try await h.db.save(makeNote("c", in: zone))
            let rowID = try h.zoneRowID(zone)
            try h.sqlite { db in
                try db.execute(sql: "DELETE FROM zone_log WHERE zone_id = ? AND seq = 3", arguments: [rowID])
                #expect(db.changesCount == 1)
            }
            let error = await expectStoreError(.integrityFailure) { try await h.fresh(h.alice).privateDatabase.record(named: "a", in: zone) }
            #expect(error?.message.contains("zone 'Notes'") == true && error?.message.contains("rolled back or its log was cut") == true,
                    "\(error?.message ?? "")")
            let stranger = try await h.otherStoreSession(h.alice)
            try stranger.vault.marks.reset(zone: try await h.zoneRow(zone).uid, to: nil)
            let reader = stranger.privateDatabase
            let result = try await reader.query(Query(recordType: "Note"), in: zone)
            #expect(result.records.map(\.name) == ["a"])
            #expect(Set(result.refused.keys) == ["b1", "b2", "c"])
            let changes = try await reader.changes(in: zone, since: nil)
            #expect(changes.changed.map(\.name) == ["a"])
            #expect(Set(changes.refused.keys) == ["b1", "b2", "c"])
        }
    }

    // MARK: - Permission by membership sequence

    @Test("a writer demoted to read-only: their earlier records still verify; a new commit under the new membership is refused", arguments: TestBackend.all)
    func demotedWriterEarlierRecordsVerify(_ backend: TestBackend) async throws {
        try await withStore(backend) { h in
            let zone = try await h.makeZone(notes: ["n1"])
            let carol = try await h.user("Carol Writer", "carol@example.com")
            try await h.share(zone, with: [(carol, .readWrite)])
            var carolDB = carol.sharedDatabase
            carolDB.transactionAuthor = "carol-app"
            let saved = try await carolDB.save(makeNote("c1", in: zone, body: "carol's secret"))
            #expect(try await h.state(zone).ownerSeq == 4)
            _ = try await h.alice.setPermission(.readOnly, for: carol.userID, in: zone)
            #expect(try await h.state(zone).ownerSeq == 7)

            // Carol's earlier record verifies for everyone, with her as its author.
            for reader in [try await h.fresh(h.alice).privateDatabase, try await h.fresh(carol).sharedDatabase] {
                let c1 = try await reader.record(named: "c1", in: zone)
                #expect(c1.modifierID == carol.userID)
                #expect(c1.transactionAuthor == "carol-app")
                #expect(c1.changeTag == saved.changeTag)
                #expect(c1.encryptedValues["body"] == .string("carol's secret"))
                let result = try await reader.query(Query(recordType: "Note"), in: zone)
                #expect(result.records.map(\.name) == ["c1", "n1"])
                #expect(result.refused.isEmpty)
            }
            let report = try await h.fresh(h.alice).audit()
            #expect(report.findings.isEmpty, "\(report.findings)")

            // Now read-only: the library refuses her writes ...
            await expectStoreError(.permissionFailure) { try await carol.sharedDatabase.save(makeNote("c2", in: zone)) }
            // ... and a commit she forges under the current membership is refused on read.
            try await h.forge(in: zone, signer: carol, name: "c3", title: "after demotion")
            let error = await expectStoreError(.integrityFailure) { try await h.fresh(h.alice).privateDatabase.record(named: "c3", in: zone) }
            #expect(error?.message.contains("has read-only permission") == true, "\(error?.message ?? "")")
        }
    }

    @Test("a demoted writer's forged commit claiming the earlier membership is refused (the membership was no longer in force)", arguments: TestBackend.all)
    func demotedWriterClaimingEarlierMembership(_ backend: TestBackend) async throws {
        try await withStore(backend) { h in
            let zone = try await h.makeZone(notes: ["n1"]) // the schema knows Note.title and Note.body
            let carol = try await h.user("Carol Writer", "carol@example.com")
            try await h.share(zone, with: [(carol, .readWrite)])
            _ = try await h.alice.setPermission(.readOnly, for: carol.userID, in: zone)
            try await h.forge(in: zone, signer: carol, name: "backdated", title: "claims membership 4", ownerSeq: 4)
            let error = await expectStoreError(.integrityFailure) { try await h.fresh(h.alice).privateDatabase.record(named: "backdated", in: zone) }
            #expect(error?.message.contains("claims membership 4; the one in force is 6") == true, "\(error?.message ?? "")")
        }
    }

    @Test("a reader promoted to read-write: records written after the promotion verify", arguments: TestBackend.all)
    func promotedReaderWrites(_ backend: TestBackend) async throws {
        try await withStore(backend) { h in
            let zone = try await h.makeZone(notes: ["n1"])
            let bob = try await h.user("Bob Reader", "bob@example.com")
            try await h.share(zone, with: [(bob, .readOnly)])
            await expectStoreError(.permissionFailure) { try await bob.sharedDatabase.save(makeNote("b0", in: zone)) }
            _ = try await h.alice.setPermission(.readWrite, for: bob.userID, in: zone)
            _ = try await bob.sharedDatabase.save(makeNote("b1", in: zone))
            let b1 = try await h.fresh(h.alice).privateDatabase.record(named: "b1", in: zone)
            #expect(b1.modifierID == bob.userID)
            #expect(try await h.fresh(h.alice).audit().findings.isEmpty)
        }
    }

    @Test("a removed participant's earlier records still verify", arguments: TestBackend.all)
    func removedWriterEarlierRecordsVerify(_ backend: TestBackend) async throws {
        try await withStore(backend) { h in
            let zone = try await h.makeZone(notes: [])
            let carol = try await h.user("Carol Writer", "carol@example.com")
            try await h.share(zone, with: [(carol, .readWrite)])
            _ = try await carol.sharedDatabase.save(makeNote("c1", in: zone, body: "before removal"))
            _ = try await h.alice.removeParticipant(carol.userID, from: zone)
            let c1 = try await h.fresh(h.alice).privateDatabase.record(named: "c1", in: zone)
            #expect(c1.modifierID == carol.userID)
            #expect(c1.encryptedValues["body"] == .string("before removal"))
            await expectStoreError(.permissionFailure) { try await h.fresh(carol).sharedDatabase.record(named: "c1", in: zone) }
        }
    }

    @Test("after the share stops (an entry with no members), earlier participant records verify; a later forgery is refused", arguments: TestBackend.all)
    func stoppedShare(_ backend: TestBackend) async throws {
        try await withStore(backend) { h in
            let zone = try await h.makeZone(notes: ["n1"])
            let carol = try await h.user("Carol Writer", "carol@example.com")
            try await h.share(zone, with: [(carol, .readWrite)])
            _ = try await carol.sharedDatabase.save(makeNote("c1", in: zone, body: "while shared"))
            try await h.alice.stopSharing(zone: zone)
            let state = try await h.state(zone)
            #expect(state.share == nil && state.ownerSeq == state.headSeq)

            let c1 = try await h.fresh(h.alice).privateDatabase.record(named: "c1", in: zone)
            #expect(c1.modifierID == carol.userID)
            #expect(c1.encryptedValues["body"] == .string("while shared"))
            // Carol has lost the key, but a plain-only record needs none: she still cannot write one.
            try await h.forge(in: zone, signer: carol, name: "after-stop", title: "still here", body: nil)
            let error = await expectStoreError(.integrityFailure) { try await h.fresh(h.alice).privateDatabase.record(named: "after-stop", in: zone) }
            #expect(error?.message.contains("is not a member (the zone is not shared)") == true, "\(error?.message ?? "")")
            #expect(try await h.fresh(h.alice).audit().findingKeys == [Finding(.log, "log"), Finding(.record, "after-stop")])
        }
    }

    @Test("a public read-write link: a link writer's records verify; after the link goes read-only their new commits are refused", arguments: TestBackend.all)
    func publicLinkWriter(_ backend: TestBackend) async throws {
        try await withStore(backend) { h in
            let zone = try await h.makeZone(notes: ["n1"])
            let eve = try await h.user("Eve Linker", "eve@example.com")
            let share = try await h.alice.share(zone: zone, title: "Open", publicPermission: .readWrite)
            _ = try await eve.acceptShare(url: share.url)
            _ = try await eve.sharedDatabase.save(makeNote("e1", in: zone, body: "via link"))
            let m = try await h.state(zone).ownerSeq
            _ = try await h.alice.setPublicPermission(.readOnly, in: zone)
            #expect(try await h.state(zone).ownerSeq > m)
            let e1 = try await h.fresh(h.alice).privateDatabase.record(named: "e1", in: zone)
            #expect(e1.modifierID == eve.userID)
            #expect(e1.encryptedValues["body"] == .string("via link"))
            await expectStoreError(.permissionFailure) { try await eve.sharedDatabase.save(makeNote("e2", in: zone)) }
            try await h.forge(in: zone, signer: eve, name: "e3", title: "forged after read-only")
            await expectStoreError(.integrityFailure) { try await h.fresh(h.alice).privateDatabase.record(named: "e3", in: zone) }
        }
    }

    @Test("a removed writer cannot backdate a commit to the membership where they were read-write (key rotation is no defence)",
          arguments: ["plain only", "sealed under the old key"])
    func removedWriterBackdatedForgery(_ variant: String) async throws {
        try await withStore { h in
            let zone = try await h.makeZone(notes: ["n1"])
            let carol = try await h.user("Carol Writer", "carol@example.com")
            try await h.share(zone, with: [(carol, .readWrite)])
            _ = try await carol.sharedDatabase.save(makeNote("c1", in: zone)) // Carol holds the epoch-1 key
            _ = try await h.alice.removeParticipant(carol.userID, from: zone)
            let state = try await h.state(zone)
            #expect(state.epoch == 2 && state.ownerSeq == 7)
            await expectStoreError(.permissionFailure) { try await carol.sharedDatabase.save(makeNote("c2", in: zone)) }

            // Removed, Carol signs a commit claiming membership 2 (when she was read-write) and epoch 1.
            try await h.forge(in: zone, signer: carol, name: "after-removal", title: "written after removal",
                        body: variant == "plain only" ? nil : "sealed with a key she kept", ownerSeq: 4, epoch: 1)
            let reader = try await h.fresh(h.alice).privateDatabase
            await expectStoreError(.integrityFailure, "a commit made after Carol's removal verifies as hers") {
                try await reader.record(named: "after-removal", in: zone)
            }
        }
    }

    // MARK: - One signature per commit

    @Test("a batch of 400 saves is one commit with 400 entries")
    func batchOf400IsOneCommit() async throws {
        try await withStore { h in
            let zone = try await h.db.createZone(named: "Bulk")
            let records = (0..<400).map { makeNote(String(format: "r%03d", $0), in: zone) }
            let result = try await h.db.modify(saving: records, in: zone)
            #expect(result.saved.count == 400)
            #expect(Set(result.saved.compactMap(\.changeTag)) == ["2"])
            let rowID = try h.zoneRowID(zone)
            let (count, length, signatureLength) = try h.sqlite { db -> (Int, Int, Int) in
                let row = try #require(try Row.fetchOne(db, sql: "SELECT count(*), max(length(entries)), max(length(signature)) FROM zone_log WHERE zone_id = ? AND kind = 3",
                                                         arguments: [rowID]))
                return (row[0], row[1], row[2])
            }
            #expect(count == 1)
            #expect(length == 400 * 32)
            #expect(signatureLength == 64)
            // Every record of the batch verifies against that one commit.
            let fetched = try await h.fresh(h.alice).privateDatabase.query(Query(recordType: "Note"), in: zone)
            #expect(fetched.records.count == 400)
            #expect(fetched.refused.isEmpty)
            // One verified commit in the reader's cache for the whole batch.
            let reader = try await h.fresh(h.alice)
            #expect(try await reader.privateDatabase.query(Query(recordType: "Note"), in: zone).records.count == 400)
            #expect(reader.commits.withLock { $0[rowID]?.count } == 1)

            // A batch of saves and deletes is one commit too.
            _ = try await h.db.modify(saving: [makeNote("extra", in: zone)], deleting: (0..<10).map { RecordDeletion(name: String(format: "r%03d", $0)) }, in: zone)
            let second = try h.sqlite { db in try Int.fetchOne(db, sql: "SELECT length(entries) FROM zone_log WHERE zone_id = ? AND seq = 3", arguments: [rowID]) }
            #expect(second == 11 * 32)
            #expect(try await h.commitCount(zone) == 2)
            // One more record than the limit is refused, and writes no commit.
            await expectStoreError(.limitExceeded) {
                try await h.db.modify(saving: (0..<401).map { makeNote("x\($0)", in: zone) }, in: zone)
            }
            #expect(try await h.commitCount(zone) == 2)
        }
    }
}

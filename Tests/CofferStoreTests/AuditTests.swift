import CofferCrypto
import CofferVault
import CofferStoreTestSupport
import Foundation
import GRDB
import Synchronization
import Testing
@testable import CofferStore

// `Session.audit()` (Docs/Security.md, "coffer audit"): it checks each zone's whole log (every
// chain link, signature and rule), the caches that repeat it, the zone key and every record this
// user can open, and with `plaintexts` scans the store's files for each text.

/// A tampering of the file and the findings an audit must report for it, as (kind, subject).
enum Tamper: String, CaseIterable, Sendable, CustomTestStringConvertible {
    case plainEdited, rowCopied, commitLabelEdited, commitDeleted, hashColumnEdited, forgedByReader, membershipEdited, shareEdited

    var testDescription: String { rawValue }
}

/// Collects the messages of a @Sendable progress callback.
final class ProgressLines: Sendable {
    private let lines = Mutex<[String]>([])
    func append(_ line: String) { lines.withLock { $0.append(line) } }
    var all: [String] { lines.withLock { $0 } }
}

@Suite("Audit")
struct AuditTests {
    @Test("a clean store: no findings; counts equal the zones, shares, memberships, commits and records")
    func cleanStore() async throws {
        try await withStore { h in
            let a = try await h.makeZone("A", notes: ["n1", "n2"])
            _ = try await h.db.modify(saving: ["b1", "b2", "b3"].map { makeNote($0, in: a) }, in: a)
            let b = try await h.makeZone("B", notes: ["x", "y"])
            try await h.db.delete(recordNamed: "x", in: b)
            let bob = try await h.user("Bob Writer", "bob@example.com")
            try await h.share(a, with: [(bob, .readWrite)])
            _ = try await bob.sharedDatabase.save(makeNote("bobnote", in: a))

            // The facts, from the file.
            let (zones, commits, records, memberships) = try h.sqlite { db -> (Int, Int, Int, Int) in
                (try Int.fetchOne(db, sql: "SELECT count(*) FROM zone")!, try Int.fetchOne(db, sql: "SELECT count(*) FROM zone_log WHERE kind = 3")!,
                 try Int.fetchOne(db, sql: "SELECT count(*) FROM record")!, try Int.fetchOne(db, sql: "SELECT count(*) FROM zone_log WHERE kind IN (1, 2)")!)
            }
            // A: genesis, n1, n2, a batch, the share, Bob's invitation, his acceptance, his note;
            // B: genesis, x, y, x deleted.
            #expect((zones, commits, records, memberships) == (2, 7, 7, 4))

            let progress = ProgressLines()
            let report = try await h.fresh(h.alice).audit(progress: { progress.append($0) })
            #expect(report.findings.isEmpty, "\(report.findings)")
            #expect(report.zones == 2)
            #expect(report.shares == 1)
            #expect(report.memberships == 4)
            #expect(report.commits == 7)
            #expect(report.acceptances == 1)
            #expect(report.records == 7)
            #expect(report.files == 0)
            #expect(report.bytesScanned == 0)
            #expect(progress.all == ["zone A", "zone B"])

            // Bob audits what he can open: the shared zone A.
            let bobReport = try await h.fresh(bob).audit()
            #expect(bobReport.findings.isEmpty, "\(bobReport.findings)")
            #expect(bobReport.zones == 1)
            #expect(bobReport.shares == 1)
            #expect(bobReport.memberships == 3)
            #expect(bobReport.commits == 4)
            #expect(bobReport.records == 6)
        }
    }

    @Test("an empty store: an empty report", arguments: TestBackend.all)
    func emptyStore(_ backend: TestBackend) async throws {
        try await withStore(backend) { h in
            let report = try await h.alice.audit()
            #expect(report.findings.isEmpty)
            #expect(report.zones == 0 && report.commits == 0 && report.records == 0 && report.shares == 0 && report.memberships == 0)
        }
    }

    @Test("after each tampering, audit names what was changed", arguments: Tamper.allCases)
    func tampered(_ tamper: Tamper) async throws {
        try await withStore { h in
            let zone = try await h.makeZone("Notes", notes: ["r1", "r2", "r3"])
            let rowID = try h.zoneRowID(zone)
            #expect(try await h.fresh(h.alice).audit().findings.isEmpty)
            let expected: Set<Finding>
            var reader: Session? = nil
            switch tamper {
            case .plainEdited:
                try h.sqlite { db in
                    try db.execute(sql: "UPDATE record SET plain = replace(plain, '\"r1\"', '\"forged\"') WHERE zone_id = ? AND name = 'r1'", arguments: [rowID])
                    #expect(db.changesCount == 1)
                }
                expected = [Finding(.record, "r1")]
            case .rowCopied:
                try h.sqlite { db in
                    try db.execute(sql: """
                        UPDATE record SET (plain, sealed, seq) = (SELECT plain, sealed, seq FROM record WHERE zone_id = ?1 AND name = 'r2')
                        WHERE zone_id = ?1 AND name = 'r1'
                        """, arguments: [rowID])
                }
                expected = [Finding(.record, "r1")]
            case .commitLabelEdited:
                // Entry 3 (r2's commit) no longer verifies: it and r3's commit after it are refused.
                try h.sqlite { db in try editEntryLabel(db, zoneRowID: rowID, seq: 3, to: "x") }
                expected = [Finding(.log, "log"), Finding(.record, "r2"), Finding(.record, "r3")]
            case .commitDeleted:
                try h.sqlite { db in
                    try db.execute(sql: "DELETE FROM zone_log WHERE zone_id = ? AND seq = 3", arguments: [rowID])
                    #expect(db.changesCount == 1)
                }
                // Entry 4 no longer follows the one before it; r2's entry is missing.
                expected = [Finding(.log, "log"), Finding(.record, "r2"), Finding(.record, "r3")]
            case .hashColumnEdited:
                // The stored hash is a cache (readers compute it): a changed one is reported, nothing else.
                try h.sqlite { db in
                    try db.execute(sql: "UPDATE zone_log SET hash = zeroblob(32) WHERE zone_id = ? AND seq = 3", arguments: [rowID])
                    #expect(db.changesCount == 1)
                }
                expected = [Finding(.cache, "entry 3")]
            case .forgedByReader:
                let bob = try await h.user("Bob Reader", "bob@example.com")
                try await h.share(zone, with: [(bob, .readOnly)])
                let seq = try await h.forge(in: zone, signer: bob, name: "forged", title: "bob's")
                #expect(seq == 8)
                expected = [Finding(.log, "log"), Finding(.record, "forged")]
                reader = bob
            case .membershipEdited:
                let carol = try await h.user("Carol Writer", "carol@example.com")
                try await h.share(zone, with: [(carol, .readWrite)])
                _ = try await carol.sharedDatabase.save(makeNote("c1", in: zone))
                try h.sqlite { db in
                    try db.execute(sql: "UPDATE zone_log SET signature = randomblob(64) WHERE zone_id = ? AND seq = 6", arguments: [rowID])
                    #expect(db.changesCount == 1)
                }
                expected = [Finding(.log, "log"), Finding(.record, "c1")]
                reader = carol
            case .shareEdited:
                let bob = try await h.user("Bob Reader", "bob@example.com")
                try await h.share(zone, with: [(bob, .readOnly)])
                try h.sqlite { db in
                    try editEntry(db, zoneRowID: rowID, seq: 5) { e in
                        var state = e.payload.withUnsafeBytes { raw -> StatePayload in
                            var r = RawReader(raw, what: "membership")
                            return try! StatePayload.decode(&r)
                        }
                        state.share!.title = "Hijacked"
                        var w = ByteWriter()
                        state.encode(into: &w)
                        return LogEntry(zoneUID: e.zoneUID, seq: e.seq, prev: e.prev, kind: e.kind, authorID: e.authorID, time: e.time, payload: w.bytes)
                    }
                }
                expected = [Finding(.log, "log")]
                reader = bob // the participant cannot open the zone now: their audit says why
            }
            let report = try await h.fresh(h.alice).audit()
            #expect(report.findingKeys == expected, "\(report.findings.map { "\($0.kind) \($0.subject): \($0.message)" })")
            #expect(report.findings.allSatisfy { $0.zone == zone })
            if tamper == .commitDeleted {
                #expect(report.findings.contains { $0.message.contains("entry 4 of the log") },
                        "\(report.findings.map(\.message))")
            }
            if let reader {
                // A participant's audit of the shared zone reports the same.
                let theirs = try await h.fresh(reader).audit()
                #expect(theirs.findingKeys == expected, "\(theirs.findings.map { "\($0.kind) \($0.subject): \($0.message)" })")
            }
        }
    }

    @Test("audit finds a row rolled back to an older signed version, deleted from the file, or put back after its deletion")
    func absentAndStaleRows() async throws {
        try await withStore { h in
            let zone = try await h.makeZone("Notes", notes: ["r", "gone", "back", "kept"])
            let rowID = try h.zoneRowID(zone)
            // Old copies of the rows of "r" and "back", taken from the file.
            try h.sqlite { db in try db.execute(sql: "CREATE TABLE saved AS SELECT * FROM record WHERE zone_id = ? AND name IN ('r', 'back')", arguments: [rowID]) }
            _ = try await h.db.save(makeNote("r", in: zone, title: "v2", body: "new"), policy: .allKeys)
            try await h.db.delete(recordNamed: "back", in: zone)
            #expect(try await h.fresh(h.alice).audit().findings.isEmpty)
            try h.sqlite { db in
                try db.execute(sql: "DELETE FROM record WHERE zone_id = ? AND name IN ('r', 'gone')", arguments: [rowID])
                try db.execute(sql: "INSERT INTO record SELECT * FROM saved")
                try db.execute(sql: "DROP TABLE saved")
            }
            // Each restored row still matches the commit it names: a read cannot tell.
            #expect(try await h.fresh(h.alice).privateDatabase.record(named: "r", in: zone).values["title"] == "r")
            let report = try await h.fresh(h.alice).audit()
            let messages = Dictionary(uniqueKeysWithValues: report.findings.map { ($0.subject, $0.message) })
            #expect(Set(messages.keys) == ["r", "gone", "back"], "\(report.findings)")
            #expect(messages["r"]?.contains("rolled back") == true)
            #expect(messages["gone"]?.contains("deleted there") == true)
            #expect(messages["back"]?.contains("put back") == true)
            #expect(report.findings.allSatisfy { $0.kind == .record && $0.zone == zone })
        }
    }

    @Test("no finding after saves, updates, deletes, a re-created name, records moved into a share, a removal and a re-key", arguments: TestBackend.all)
    func everydayHistoryIsClean(_ backend: TestBackend) async throws {
        try await withStore(backend) { h in
            let zone = try await h.makeZone("Notes", notes: ["a", "b", "c", "d"])
            _ = try await h.db.save(makeNote("a", in: zone, title: "again"), policy: .allKeys)
            try await h.db.delete(recordNamed: "b", in: zone)
            _ = try await h.db.save(makeNote("b", in: zone, title: "born again"))
            _ = try await h.db.modify(saving: [makeNote("e", in: zone)], deleting: [RecordDeletion(name: "c")], in: zone)
            let bob = try await h.user("Bob Writer", "bob@example.com")
            _ = try await h.alice.share(records: ["d"], in: zone, intoZoneNamed: "Shared", title: "moved")
            let shared = h.alice.privateDatabase.zoneID(named: "Shared")
            _ = try await h.alice.addParticipant(bob.userID, permission: .readWrite, to: shared)
            _ = try await bob.acceptShare(url: try await h.alice.fetchShare(in: shared).url)
            _ = try await bob.sharedDatabase.save(makeNote("by-bob", in: shared))
            _ = try await h.alice.removeParticipant(bob.userID, from: shared)
            _ = try await h.alice.rekey(zone: shared)
            let report = try await h.fresh(h.alice).audit()
            #expect(report.findings.isEmpty, "\(report.findings.map { "\($0.subject): \($0.message)" })")
            #expect(report.records == 5) // Notes: a, b, e; Shared: d, by-bob
        }
    }

    @Test("a commit's stored names or version hashes that are not the ones it signs are refused; a malformed list its author signed is reported by audit")
    func commitLists() async throws {
        try await withStore { h in
            let zone = try await h.makeZone("Notes", notes: ["n1", "n2"])
            let rowID = try h.zoneRowID(zone)
            let names = try h.sqlite { db in try Data.fetchOne(db, sql: "SELECT names FROM zone_log WHERE zone_id = ? AND seq = 3", arguments: [rowID]) }
            #expect(names.map(Array.init) == [0, 2] + Array("n2".utf8))
            for column in ["names", "entries"] {
                for value: Data? in [nil, Data([0, 2] + Array("n3".utf8)), Data([7, 2] + Array("n2".utf8)), Data(repeating: 1, count: 32)] {
                    let kept = try h.sqlite { db in try Data.fetchOne(db, sql: "SELECT \(column) FROM zone_log WHERE zone_id = ? AND seq = 3", arguments: [rowID]) }
                    try h.sqlite { db in try db.execute(sql: "UPDATE zone_log SET \(column) = ? WHERE zone_id = ? AND seq = 3", arguments: [value, rowID]) }
                    await expectStoreError(.integrityFailure, "\(column) \(String(describing: value))") {
                        try await h.fresh(h.alice).privateDatabase.record(named: "n2", in: zone)
                    }
                    #expect(try await h.fresh(h.alice).privateDatabase.record(named: "n1", in: zone).name == "n1")
                    #expect(try await h.fresh(h.alice).audit().findings.contains { $0.subject == "entry 3" })
                    try h.sqlite { db in try db.execute(sql: "UPDATE zone_log SET \(column) = ? WHERE zone_id = ? AND seq = 3", arguments: [kept, rowID]) }
                }
            }
            #expect(try await h.fresh(h.alice).audit().findings.isEmpty)
            // A malformed list signed by its author (reads do not parse names): audit reports it.
            try h.sqlite { db in
                let bad: [UInt8] = [7, 2] + Array("n2".utf8)
                try db.execute(sql: "UPDATE zone_log SET names = ? WHERE zone_id = ? AND seq = 3", arguments: [Data(bad), rowID])
                try editEntry(db, zoneRowID: rowID, seq: 3) { e in
                    let p = RecordsPayload.decode(e.payload)!
                    return LogEntry(zoneUID: e.zoneUID, seq: e.seq, prev: e.prev, kind: e.kind, authorID: e.authorID, time: e.time,
                                    payload: RecordsPayload(epoch: p.epoch, ownerSeq: p.ownerSeq, label: p.label,
                                                            records: RecordsSummary(count: p.records.count, entriesHash: p.records.entriesHash,
                                                                                    namesHash: BLAKE2b.hash(bad))).encoded)
                }
                // Signed again by its author, and the next entry's link follows it: the owner's own doing.
                let body = Array(try Data.fetchOne(db, sql: "SELECT body FROM zone_log WHERE zone_id = ? AND seq = 3", arguments: [rowID])!)
                let signature = h.alice.vault.signingKey.signature(for: body)
                try db.execute(sql: "UPDATE zone_log SET signature = ?, hash = ? WHERE zone_id = ? AND seq = 3",
                               arguments: [Data(signature), Data(LogEntry.hash(body: body, signature: signature).bytes), rowID])
            }
            let owner = try await h.otherStoreSession(h.alice)
            try owner.vault.marks.reset(zone: try await h.zoneRow(zone).uid, to: nil)
            #expect(try await owner.audit().findings.contains { $0.subject == "entry 3" && $0.message.contains("damaged list of names") })
        }
    }

    @Test("a record finding carries the reading error's message")
    func findingMessages() async throws {
        try await withStore { h in
            let zone = try await h.makeZone("Notes", notes: ["r1"])
            let rowID = try h.zoneRowID(zone)
            try h.sqlite { db in
                try db.execute(sql: "UPDATE record SET plain = replace(plain, '\"r1\"', '\"forged\"') WHERE zone_id = ?", arguments: [rowID])
            }
            let report = try await h.fresh(h.alice).audit()
            let finding = try #require(report.findings.first)
            #expect(report.findings.count == 1)
            #expect(finding.kind == .record)
            #expect(finding.subject == "r1")
            #expect(finding.zone == zone)
            #expect(finding.message.contains("record 'r1' in zone 'Notes' does not match its signed log entry 2"), "\(finding.message)")
        }
    }

    @Test("audit(plaintexts:) finds a plain value in the store's files and not an encrypted one")
    func plaintextScan() async throws {
        try await withStore { h in
            let plainText = "plainmarker-\(UUID().uuidString)"
            let secretText = "secretmarker-\(UUID().uuidString)"
            let zone = try await h.db.createZone(named: "Notes")
            _ = try await h.db.save(makeNote("r1", in: zone, title: plainText, body: secretText))

            let progress = ProgressLines()
            let found = try await h.alice.audit(plaintexts: [plainText], progress: { progress.append($0) })
            let plaintextFindings = found.findings.filter { $0.kind == .plaintext }
            #expect(!plaintextFindings.isEmpty)
            #expect(plaintextFindings.allSatisfy { $0.zone == nil && $0.message.contains("UTF-8") && $0.subject.hasPrefix("store.sqlite") },
                    "\(plaintextFindings)")
            #expect(found.findings.allSatisfy { $0.kind == .plaintext })
            #expect(found.files >= 1)
            #expect(found.bytesScanned > 0)
            #expect(progress.all.contains { $0.hasPrefix("scanning ") && $0.hasSuffix("store.sqlite") })

            let secret = try await h.alice.audit(plaintexts: [secretText])
            #expect(secret.findings.isEmpty, "\(secret.findings)")
            #expect(secret.files == found.files)
            #expect(secret.bytesScanned > 0)

            // Both at once: only the plain one is reported.
            let both = try await h.alice.audit(plaintexts: [secretText, plainText])
            #expect(both.findings.count == plaintextFindings.count)
            #expect(both.findings.allSatisfy { $0.message.contains("(\(plainText.count) characters)") })
        }
    }

    @Test("audit(plaintexts:) finds base64 of a text at each of the three byte alignments", arguments: [0, 1, 2])
    func plaintextBase64Alignment(_ prefix: Int) async throws {
        try await withStore { h in
            let text = "alignmarker-\(UUID().uuidString.prefix(18))"
            let zone = try await h.db.createZone(named: "Notes")
            var record = CofferStore.Record(type: "Blob", name: "b", zone: zone)
            record.values["raw"] = .bytes(Array(repeating: 0x5a, count: prefix) + Array(text.utf8) + [0x7e])
            _ = try await h.db.save(record)
            let report = try await h.alice.audit(plaintexts: [text])
            let messages = report.findings.map(\.message)
            #expect(!messages.isEmpty, "prefix \(prefix)")
            #expect(messages.allSatisfy { $0.contains("appears in base64 in store.sqlite") }, "\(messages)")
        }
    }

    @Test("audit(plaintexts:) finds a text stored as base64 (a bytes field) and names the form")
    func plaintextBase64Form() async throws {
        try await withStore { h in
            let text = "formmarker-\(UUID().uuidString.prefix(12))"
            let zone = try await h.db.createZone(named: "Notes")
            var record = CofferStore.Record(type: "Blob", name: "b", zone: zone)
            record.values["raw"] = .bytes(Array(text.utf8)) // stored as a base64 string in the plain JSON
            _ = try await h.db.save(record)
            let report = try await h.alice.audit(plaintexts: [text])
            let messages = report.findings.map(\.message)
            #expect(!messages.isEmpty)
            #expect(messages.allSatisfy { $0.contains("appears in base64 in store.sqlite") }, "\(messages)")
        }
    }
}

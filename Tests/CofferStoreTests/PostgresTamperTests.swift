import CofferStoreTestSupport
import Foundation
import PostgresNIO
import Testing
@testable import CofferStore

/// Record rows changed in PostgreSQL by whoever administers the database, one edit at a time
/// (the row edits of the SQLite tampering tests): every read of the damaged record fails with
/// `.integrityFailure`, the other records still read, a query reports it refused, and audit
/// reports it.
@Suite("Tampering with a PostgreSQL store's rows", .postgres)
struct PostgresTamperTests {
    /// One edit: `sql` with `$a` and `$b` (the row ids of zones A and B) and `$bob` filled in;
    /// then record `damaged` of zone `inZone` fails to read and the notes `others` of that zone
    /// still read.
    struct Edit: Sendable, CustomTestStringConvertible {
        let what: String
        let sql: String
        var damaged = "n1"
        var inZone = "A"
        var others = ["n2", "n3"]
        /// Whether a query of type Note selects the row (not when its type column changed).
        var queried = true
        var testDescription: String { what }
    }

    static let edits: [Edit] = [
        Edit(what: "sealed bytes copied from another record of the zone",
             sql: "UPDATE record SET sealed = (SELECT sealed FROM record WHERE zone_id = $a AND name = 'n2') WHERE zone_id = $a AND name = 'n1'"),
        Edit(what: "sealed bytes copied from a record of another zone",
             sql: "UPDATE record SET sealed = (SELECT sealed FROM record WHERE zone_id = $b AND name = 'm1') WHERE zone_id = $a AND name = 'n1'"),
        Edit(what: "a row moved whole to another zone",
             sql: "UPDATE record SET zone_id = $b WHERE zone_id = $a AND name = 'n1'", inZone: "B", others: ["m1", "m2"]),
        Edit(what: "a row renamed", sql: "UPDATE record SET name = 'n9' WHERE zone_id = $a AND name = 'n1'", damaged: "n9"),
        Edit(what: "a row's type changed", sql: "UPDATE record SET type = 'Memo' WHERE zone_id = $a AND name = 'n1'", queried: false),
        Edit(what: "the epoch column set to 0", sql: "UPDATE record SET epoch = 0 WHERE zone_id = $a AND name = 'n1'"),
        Edit(what: "the epoch column set to 2", sql: "UPDATE record SET epoch = 2 WHERE zone_id = $a AND name = 'n1'"),
        Edit(what: "the epoch column set to the largest bigint", sql: "UPDATE record SET epoch = 9223372036854775807 WHERE zone_id = $a AND name = 'n1'"),
        Edit(what: "a negative seq column", sql: "UPDATE record SET seq = -5 WHERE zone_id = $a AND name = 'n1'"),
        Edit(what: "a negative membership_seq column", sql: "UPDATE record SET membership_seq = -5 WHERE zone_id = $a AND name = 'n1'"),
        Edit(what: "one bit of the sealed bytes flipped",
             sql: "UPDATE record SET sealed = set_byte(sealed, 40, get_byte(sealed, 40) # 1) WHERE zone_id = $a AND name = 'n1'"),
        Edit(what: "the sealed bytes truncated", sql: "UPDATE record SET sealed = substring(sealed from 1 for 20) WHERE zone_id = $a AND name = 'n1'"),
        Edit(what: "the sealed bytes extended", sql: "UPDATE record SET sealed = sealed || '\\x00'::bytea WHERE zone_id = $a AND name = 'n1'"),
        Edit(what: "the sealed bytes emptied", sql: "UPDATE record SET sealed = ''::bytea WHERE zone_id = $a AND name = 'n1'"),
        Edit(what: "the sealed bytes removed", sql: "UPDATE record SET sealed = NULL WHERE zone_id = $a AND name = 'n1'"),
        Edit(what: "the plain values not JSON", sql: "UPDATE record SET plain = '{' WHERE zone_id = $a AND name = 'n1'"),
        Edit(what: "a plain value of another type", sql: #"UPDATE record SET plain = '{"title":42}' WHERE zone_id = $a AND name = 'n1'"#),
        Edit(what: "a plain value changed", sql: #"UPDATE record SET plain = '{"title":"mallory"}' WHERE zone_id = $a AND name = 'n1'"#),
        Edit(what: "the creator changed", sql: "UPDATE record SET creator_id = $bob WHERE zone_id = $a AND name = 'n1'"),
        Edit(what: "the modification time changed", sql: "UPDATE record SET modified_at = modified_at + 60 WHERE zone_id = $a AND name = 'n1'"),
        Edit(what: "a parent set", sql: "UPDATE record SET parent = 'n2' WHERE zone_id = $a AND name = 'n1'"),
    ]

    @Test("a record row edited in PostgreSQL is refused on every read, the others still read, audit reports it", arguments: edits)
    func edited(_ edit: Edit) async throws {
        try await withStore(.postgres) { f in
            let a = try await f.makeZone("A", notes: ["n1", "n2", "n3"])
            let b = try await f.makeZone("B", notes: ["m1", "m2"])
            let bob = try await f.user("Bob", "bob@example.com")
            let (aID, bID) = (try await f.zoneRow(a).rowID, try await f.zoneRow(b).rowID)
            let sql = edit.sql.replacingOccurrences(of: "$bob", with: "'\(bob.userID)'")
                .replacingOccurrences(of: "$a", with: "\(aID)").replacingOccurrences(of: "$b", with: "\(bID)")
            try await f.postgresAdmin { admin in
                let changed = try await admin.query(PostgresQuery(unsafeSQL: sql + " RETURNING 1")).count
                #expect(changed == 1, "\(edit.what): \(changed) rows changed")
            }
            let zone = edit.inZone == "A" ? a : b
            for session in [f.alice, try await f.fresh(f.alice)] {
                let db = session.privateDatabase
                let error = await expectStoreError(.integrityFailure) { try await db.record(named: edit.damaged, in: zone) }
                #expect(error?.message.contains("the store was changed") == true || error?.message.contains("'\(edit.damaged)'") == true,
                        "\(error?.message ?? "")")
                let many = try await db.records(named: [edit.damaged] + edit.others, in: zone)
                if case .failure(let e)? = many[edit.damaged] {
                    #expect(e.code == .integrityFailure)
                } else {
                    Issue.record("records(named:) did not report '\(edit.damaged)' as a failure")
                }
                for other in edit.others {
                    #expect(try many[other]?.get().encryptedValues["body"] == .string("body of \(other)"))
                }
                let page = try await db.query(Query(recordType: "Note"), in: zone)
                #expect(Set(page.records.map(\.name)) == Set(edit.others))
                if edit.queried { #expect(page.refused[edit.damaged]?.code == .integrityFailure, "\(page.refused)") }
                #expect(!page.records.contains { $0.values["title"] == .string("mallory") })
            }
            let report = try await f.fresh(f.alice).audit()
            #expect(report.findings.contains { $0.zone == zone }, "\(report.findings)")
        }
    }
}

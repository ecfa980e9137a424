import CofferCrypto
import CofferVault
import CofferStoreTestSupport
import Foundation
import GRDB
import Testing
@testable import CofferStore

// Change tokens (Sources/CofferStore/CofferStore.docc/Changes.md, "Tokens"): base64url of magic `CCT`, version 1, kind, store
// id (16), zone uid or user hash (16), sequence (8, big-endian), then 0, or 1 + 2-byte length +
// name. Everything else is `.invalidArguments`.

/// Builds token bytes field by field, independently of the library's encoder.
struct TokenBytes {
    var magic: [UInt8] = Array("CCT".utf8)
    var version: UInt8 = 1
    var kind: UInt8 = 1
    var store: [UInt8]
    var scope: [UInt8]
    var seq: UInt64
    var flag: UInt8? = nil
    var name: [UInt8]? = nil
    var nameLength: Int? = nil
    var trailing: [UInt8] = []

    var bytes: [UInt8] {
        var out = magic + [version, kind] + store + scope
        for shift in stride(from: 56, through: 0, by: -8) { out.append(UInt8(seq >> UInt64(shift) & 0xff)) }
        if let name {
            let n = nameLength ?? name.count
            out += [flag ?? 1, UInt8(n >> 8 & 0xff), UInt8(n & 0xff)] + name
        } else {
            out.append(flag ?? 0)
        }
        return out + trailing
    }

    var string: String { base64URL(bytes) }
}

@Suite("Change tokens")
struct ChangeTokenTests {
    /// A zone with commits 1…3, a mid-commit token and a caught-up token.
    static func setUp(_ h: TestStore) async throws -> (ZoneID, ZoneRow, mid: ChangeToken, end: ChangeToken) {
        let zone = try await h.db.createZone(named: "Notes")
        _ = try await h.db.save(makeNote("a", in: zone))
        _ = try await h.db.modify(saving: ["b", "c", "d"].map { makeNote($0, in: zone) }, in: zone)
        _ = try await h.db.save(makeNote("e", in: zone))
        let mid = try await h.db.changes(in: zone, since: nil, limit: 2).token
        let end = try await h.db.changes(in: zone, since: nil).token
        return (zone, try await h.zoneRow(zone), mid, end)
    }

    @Test("ChangeToken(string:) round-trips .string, for caught-up and mid-commit tokens")
    func roundTrip() async throws {
        try await withStore { h in
            let (zone, row, mid, end) = try await Self.setUp(h)
            #expect(mid.seq == 3 && mid.name == "b")
            #expect(end.seq == 4 && end.name == nil)
            let dbToken = try await h.db.databaseChanges(since: nil).token
            let sharedToken = try await h.alice.sharedDatabase.databaseChanges(since: nil).token
            for token in [mid, end, dbToken, sharedToken] {
                let parsed = try ChangeToken(string: token.string)
                #expect(parsed == token)
                #expect(parsed.string == token.string)
                #expect(token.description == token.string)
                #expect(!token.string.contains("="))
                #expect(token.string.allSatisfy { $0.isASCII && ($0.isLetter || $0.isNumber || $0 == "-" || $0 == "_") })
            }
            // A parsed mid-commit token continues where it stopped.
            let rest = try await h.db.changes(in: zone, since: try ChangeToken(string: mid.string))
            #expect(rest.changed.map(\.name) == ["c", "d", "e"])

            // The documented layout.
            let bytes = try #require(base64URLDecode(end.string))
            let layoutCount = 3 + 1 + 1 + 16 + 16 + 8 + 1
            #expect(bytes.count == layoutCount)
            #expect(Array(bytes[0..<3]) == Array("CCT".utf8))
            #expect(bytes[3] == 1)
            #expect(bytes[4] == 1)
            #expect(Array(bytes[5..<21]) == h.store.storeID)
            #expect(Array(bytes[21..<37]) == row.uid)
            #expect(Array(bytes[37..<45]) == [0, 0, 0, 0, 0, 0, 0, 4])
            #expect(bytes[45] == 0)
            let midBytes = try #require(base64URLDecode(mid.string))
            #expect(Array(midBytes[45...]) == [1, 0, 1] + Array("b".utf8))
            let db = try #require(base64URLDecode(dbToken.string))
            #expect(db[4] == 2)
            #expect(Array(db[21..<37]) == ChangeToken.userScope(h.alice.userID))
            #expect(try #require(base64URLDecode(sharedToken.string))[4] == 3)

            // A token built from the documented layout by hand is accepted and means what it says.
            let handMade = TokenBytes(store: h.store.storeID, scope: row.uid, seq: 3, name: Array("c".utf8))
            let page = try await h.db.changes(in: zone, since: try ChangeToken(string: handMade.string))
            #expect(page.changed.map(\.name) == ["d", "e"])
        }
    }

    @Test("malformed token strings are .invalidArguments", arguments: [
        "", "!", "not a token", "CCT", "Q0NU", "AAAA", "====", "Q0NUAQ==", " ", "\u{00e9}\u{00e9}\u{00e9}\u{00e9}",
        String(repeating: "A", count: 600),
    ])
    func malformed(_ text: String) {
        let error = expectStoreErrorSync(.invalidArguments) { try ChangeToken(string: text) }
        #expect(error?.message.hasPrefix("not a change token") == true, "\(error?.message ?? "")")
    }

    @Test("every truncation of a valid token is .invalidArguments")
    func truncated() async throws {
        try await withStore { h in
            let (_, _, mid, end) = try await Self.setUp(h)
            for token in [mid, end] {
                let bytes = try #require(base64URLDecode(token.string))
                for length in 0..<bytes.count {
                    expectStoreErrorSync(.invalidArguments, "\(length) of \(bytes.count) bytes") {
                        try ChangeToken(string: base64URL(Array(bytes.prefix(length))))
                    }
                }
                // Characters dropped from the string.
                for drop in 1...3 {
                    expectStoreErrorSync(.invalidArguments, "\(drop) characters dropped") {
                        try ChangeToken(string: String(token.string.dropLast(drop)))
                    }
                }
            }
        }
    }

    @Test("wrong magic, version, kind, flag, sequence, name, or trailing bytes are .invalidArguments")
    func wrongFields() async throws {
        try await withStore { h in
            let (zone, row, _, _) = try await Self.setUp(h)
            let good = TokenBytes(store: h.store.storeID, scope: row.uid, seq: 3)
            #expect(try ChangeToken(string: good.string).seq == 3) // the baseline parses

            var cases = [(String, TokenBytes)]()
            for magic in ["CCX", "cct", "CQC", "\0\0\0"] { var t = good; t.magic = Array(magic.utf8); cases.append(("magic \(magic)", t)) }
            for version: UInt8 in [0, 2, 255] { var t = good; t.version = version; cases.append(("version \(version)", t)) }
            for kind: UInt8 in [0, 4, 255] { var t = good; t.kind = kind; cases.append(("kind \(kind)", t)) }
            for flag: UInt8 in [2, 255] { var t = good; t.flag = flag; cases.append(("flag \(flag)", t)) }
            var negative = good; negative.seq = UInt64(1) << 63; cases.append(("negative sequence", negative))
            var trailing = good; trailing.trailing = [0]; cases.append(("one trailing byte", trailing))
            var trailingName = good; trailingName.trailing = Array("abc".utf8); cases.append(("name after flag 0", trailingName))
            var namedTrailing = good; namedTrailing.name = Array("b".utf8); namedTrailing.trailing = [0x41]; cases.append(("bytes after the name", namedTrailing))
            var longer = good; longer.name = Array("b".utf8); longer.nameLength = 5; cases.append(("name length beyond the end", longer))
            var shorter = good; shorter.name = Array("bcd".utf8); shorter.nameLength = 1; cases.append(("name length short of the end", shorter))
            var invalid = good; invalid.name = [0xff, 0xfe]; cases.append(("name not UTF-8", invalid))
            var shortStore = good; shortStore.store = Array(h.store.storeID.prefix(15)); cases.append(("15-byte store id", shortStore))
            var longScope = good; longScope.scope = row.uid + [0]; cases.append(("17-byte scope", longScope))

            for (label, token) in cases {
                let error = expectStoreErrorSync(.invalidArguments, "\(label)") { try ChangeToken(string: token.string) }
                #expect(error?.message.hasPrefix("not a change token") == true, "\(label): \(error?.message ?? "")")
            }
            // Padding and the standard alphabet are not the canonical form.
            let canonical = good.string
            expectStoreErrorSync(.invalidArguments) { try ChangeToken(string: canonical + "=") }
            expectStoreErrorSync(.invalidArguments) { try ChangeToken(string: canonical + "\n") }
            expectStoreErrorSync(.invalidArguments) { try ChangeToken(string: " " + canonical) }
            _ = zone
        }
    }

    @Test("a token of another kind, user or store is .invalidArguments")
    func wrongKindUserOrStore() async throws {
        try await withStore { h in
            let (zone, _, mid, end) = try await Self.setUp(h)
            let privateToken = try await h.db.databaseChanges(since: nil).token
            let sharedToken = try await h.alice.sharedDatabase.databaseChanges(since: nil).token

            // A zone token as a database token, and the reverse.
            for token in [mid, end] {
                await expectStoreError(.invalidArguments) { try await h.db.databaseChanges(since: token) }
                await expectStoreError(.invalidArguments) { try await h.alice.sharedDatabase.databaseChanges(since: token) }
            }
            await expectStoreError(.invalidArguments) { try await h.db.changes(in: zone, since: privateToken) }
            await expectStoreError(.invalidArguments) { try await h.db.changes(in: zone, since: sharedToken) }
            // Private and shared database tokens are not interchangeable.
            await expectStoreError(.invalidArguments) { try await h.alice.sharedDatabase.databaseChanges(since: privateToken) }
            await expectStoreError(.invalidArguments) { try await h.db.databaseChanges(since: sharedToken) }
            // Another user's database token.
            let bob = try await h.user("Bob", "bob@example.com")
            await expectStoreError(.invalidArguments) { try await bob.privateDatabase.databaseChanges(since: privateToken) }
            await expectStoreError(.invalidArguments) { try await bob.sharedDatabase.databaseChanges(since: sharedToken) }

            // Another store: the same user and a zone of the same name there.
            let otherStore = try Store(path: h.folder.appendingPathComponent("other.sqlite").path)
            let other = try otherStore.session(vault: h.alice.vault)
            let otherZone = try await other.privateDatabase.createZone(named: "Notes")
            #expect(otherZone == zone)
            _ = try await other.privateDatabase.save(makeNote("x", in: otherZone))
            await expectStoreError(.invalidArguments) { try await other.privateDatabase.changes(in: otherZone, since: end) }
            await expectStoreError(.invalidArguments) { try await other.privateDatabase.databaseChanges(since: privateToken) }
            let otherToken = try await other.privateDatabase.changes(in: otherZone, since: nil).token
            await expectStoreError(.invalidArguments) { try await h.db.changes(in: zone, since: otherToken) }
        }
    }

    @Test("a token of a deleted zone is .zoneNotFound, also after a zone of the same name is created again")
    func deletedZone() async throws {
        try await withStore { h in
            let (zone, _, mid, end) = try await Self.setUp(h)
            try await h.db.deleteZone(zone)
            await expectStoreError(.zoneNotFound) { try await h.db.changes(in: zone, since: end) }
            let again = try await h.db.createZone(named: "Notes")
            #expect(again == zone)
            for token in [mid, end] {
                let error = await expectStoreError(.zoneNotFound) { try await h.db.changes(in: again, since: token) }
                #expect(error?.message.contains("no longer exists") == true, "\(error?.message ?? "")")
            }
            // The new zone's feed starts afresh.
            _ = try await h.db.save(makeNote("new", in: again))
            let fresh = try await h.db.changes(in: again, since: nil)
            #expect(fresh.changed.map(\.name) == ["new"])
            #expect(fresh.deleted.isEmpty)
            #expect(fresh.token.seq == 2)
        }
    }

    @Test("compactHistory: older tokens expire, newer ones still work, tombstones up to the horizon are gone")
    func compaction() async throws {
        try await withStore { h in
            let db = h.db
            let zone = try await db.createZone(named: "Notes")
            func token() async throws -> ChangeToken { try await db.changes(in: zone, since: nil).token }
            _ = try await db.save(makeNote("a", in: zone))          // 1
            _ = try await db.save(makeNote("b", in: zone))          // 2
            let t2 = try await token()
            try await db.delete(recordNamed: "a", in: zone)           // 3
            let t3 = try await token()
            _ = try await db.save(makeNote("c", in: zone))          // 4
            let t4 = try await token()
            try await db.delete(recordNamed: "b", in: zone)           // 5
            let t5 = try await token()
            _ = try await db.save(makeNote("d", in: zone))          // 6
            #expect([t2, t3, t4, t5].map(\.seq) == [3, 4, 5, 6])
            let midCommit3 = ChangeToken(kind: .zone, storeID: h.store.storeID, scopeID: t3.scopeID, seq: 3, name: "a")

            let rowID = try h.zoneRowID(zone)
            func tombstones() throws -> [String] {
                try h.sqlite { db in try String.fetchAll(db, sql: "SELECT name FROM record_tombstone WHERE zone_id = ? ORDER BY seq", arguments: [rowID]) }
            }
            #expect(try tombstones() == ["a", "b"])

            let removed = try await db.compactHistory(of: zone, through: 5)
            #expect(removed == 1)
            #expect(try tombstones() == ["b"])
            #expect(try h.sqlite { db in try Int64.fetchOne(db, sql: "SELECT compacted_seq FROM zone WHERE id = ?", arguments: [rowID]) } == 5)

            for old in [t2, t3, midCommit3] {
                let error = await expectStoreError(.changeTokenExpired) { try await db.changes(in: zone, since: old) }
                #expect(error?.message.contains("afresh") == true)
            }
            let fromT4 = try await db.changes(in: zone, since: t4)
            #expect(fromT4.changed.map(\.name) == ["d"])
            #expect(fromT4.deleted.map(\.name) == ["b"])
            let fromT5 = try await db.changes(in: zone, since: t5)
            #expect(fromT5.changed.map(\.name) == ["d"])
            #expect(fromT5.deleted.isEmpty)
            // From the beginning: every record, and the deletions kept.
            let all = try await db.changes(in: zone, since: nil)
            #expect(all.changed.map(\.name) == ["c", "d"])
            #expect(all.deleted.map(\.name) == ["b"])
            #expect(all.token.seq == 7)

            // A token from the future is expired too.
            let future = ChangeToken(kind: .zone, storeID: h.store.storeID, scopeID: t4.scopeID, seq: 8, name: nil)
            await expectStoreError(.changeTokenExpired) { try await db.changes(in: zone, since: future) }

            // Compacting to an older horizon changes nothing; past the end, it stops at the last commit.
            #expect(try await db.compactHistory(of: zone, through: 2) == 0)
            #expect(try await db.changes(in: zone, since: t4).deleted.map(\.name) == ["b"])
            #expect(try await db.compactHistory(of: zone, through: 1_000) == 1)
            #expect(try tombstones().isEmpty)
            await expectStoreError(.changeTokenExpired) { try await db.changes(in: zone, since: t5) }
            let latest = try await db.changes(in: zone, since: all.token)
            #expect(latest.changed.isEmpty && latest.deleted.isEmpty)
            // Records and commits are kept: every record still reads and verifies.
            #expect(try await h.fresh(h.alice).privateDatabase.query(Query(recordType: "Note"), in: zone).records.map(\.name) == ["c", "d"])
            #expect(try await h.commitCount(zone) == 6)
        }
    }

    @Test("a database token from the future is .changeTokenExpired")
    func futureDatabaseToken() async throws {
        try await withStore { h in
            _ = try await h.db.createZone(named: "Notes")
            let current = try await h.db.databaseChanges(since: nil).token
            let future = ChangeToken(kind: .privateDatabase, storeID: h.store.storeID, scopeID: ChangeToken.userScope(h.alice.userID),
                                     seq: current.seq + 10, name: nil)
            await expectStoreError(.changeTokenExpired) { try await h.db.databaseChanges(since: future) }
            let same = ChangeToken(kind: .privateDatabase, storeID: h.store.storeID, scopeID: ChangeToken.userScope(h.alice.userID),
                                   seq: current.seq, name: nil)
            #expect(try await h.db.databaseChanges(since: same).changed.isEmpty)
        }
    }

    @Test("only the owner compacts a zone's history")
    func compactionOwnerOnly() async throws {
        try await withStore { h in
            let zone = try await h.makeZone(notes: ["n1"])
            let bob = try await h.user("Bob", "bob@example.com")
            try await h.share(zone, with: [(bob, .readWrite)])
            try await bob.sharedDatabase.delete(recordNamed: "n1", in: zone)
            await expectStoreError(.permissionFailure) { try await bob.sharedDatabase.compactHistory(of: zone, through: 2) }
            #expect(try await h.db.changes(in: zone, since: nil).deleted.map(\.name) == ["n1"])
        }
    }
}

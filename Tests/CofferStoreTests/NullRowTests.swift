import CofferCrypto
@testable import CofferVault
import CofferStoreTestSupport
import Foundation
import GRDB
import Testing
@testable import CofferStore

/// A `NOT NULL` column that holds NULL, or a `STRICT` column that holds a value of another type.
/// Someone with write access to the file sets `PRAGMA writable_schema = ON`, drops the `NOT NULL`
/// (or the table's `STRICT`) from the table's text in `sqlite_schema`, writes the value, and puts
/// the text back word for word: SQLite never checks the rows again, and the schema check at open
/// sees the text Coffer made. Every read of such a column must refuse the store with a
/// `StoreError` (most often `.integrityFailure`), never trap: GRDB's row subscripts used to end
/// the whole process ("could not decode String from database value NULL"). A test that crashes
/// the test process is exactly the bug.
@Suite("NULL and mistyped values in NOT NULL and STRICT columns")
struct NullRowTests {
    // MARK: - The attack

    /// Writes `value` into `column` of the rows of `table` that `filter` picks, past the
    /// column's `NOT NULL` (and, with `dropStrict`, the table's `STRICT`), then puts the table's
    /// text back as it was.
    static func forge(_ f: TestStore, _ table: String, set column: String, to value: DatabaseValue, where filter: String,
                      _ arguments: StatementArguments = [], dropStrict: Bool = false,
                      sourceLocation: SourceLocation = #_sourceLocation) throws {
        let original = try tableSQL(f, table)
        var edited = original.replacingOccurrences(of: " NOT NULL", with: "")
        if dropStrict {
            edited = edited.replacingOccurrences(of: ") STRICT, WITHOUT ROWID", with: ") WITHOUT ROWID").replacingOccurrences(of: ") STRICT", with: ")")
        }
        #expect(edited != original, "the text of table \(table) did not change", sourceLocation: sourceLocation)
        try setTableSQL(f, table, edited)
        // A new connection reads the edited text: neither NOT NULL nor STRICT stops the write.
        var all: StatementArguments = [value]
        all += arguments
        let changed = try f.sqlite { db -> Int in
            try db.execute(sql: "UPDATE \(table) SET \(column) = ? WHERE \(filter)", arguments: all)
            return db.changesCount
        }
        #expect(changed >= 1, "no row of \(table) was changed", sourceLocation: sourceLocation)
        try setTableSQL(f, table, original)
        #expect(try tableSQL(f, table) == original, "the text of table \(table) was not put back", sourceLocation: sourceLocation)
        let stored = try f.sqlite { db in
            try Row.fetchOne(db, sql: "SELECT \(column) FROM \(table) WHERE \(filter)", arguments: arguments).map { $0[0] as DatabaseValue }
        }
        #expect(stored == value, "\(table).\(column) holds \(String(describing: stored))", sourceLocation: sourceLocation)
    }

    static func tableSQL(_ f: TestStore, _ table: String) throws -> String {
        try f.sqlite { db in
            try #require(try String.fetchOne(db, sql: "SELECT sql FROM sqlite_schema WHERE type = 'table' AND name = ?", arguments: [table]))
        }
    }

    /// Rewrites a table's text in `sqlite_schema`, bumping the schema version so that every open
    /// connection (the store's own too) reads the new text.
    static func setTableSQL(_ f: TestStore, _ table: String, _ sql: String) throws {
        try f.sqlite { db in
            let version = try #require(try Int64.fetchOne(db, sql: "PRAGMA schema_version"))
            try db.execute(sql: "PRAGMA writable_schema = ON")
            try db.execute(sql: "UPDATE sqlite_schema SET sql = ? WHERE type = 'table' AND name = ?", arguments: [sql, table])
            try db.execute(sql: "PRAGMA schema_version = \(version + 1)")
            try db.execute(sql: "PRAGMA writable_schema = OFF")
        }
    }

    /// The same user in a store object opened afresh on the file (no cached zone log, key,
    /// schema or contact card; its schema check at open passes, the text being Coffer's).
    static func reopened(_ f: TestStore, _ s: Session) throws -> Session {
        try Store(path: f.store.url.path).session(vault: s.vault)
    }

    /// Runs the reads (and a save) of `zone` and of the store that `s` can run: each must return
    /// or throw a ``StoreError``, never another error (and never trap).
    static func sweep(_ s: Session, _ zone: ZoneID, sourceLocation: SourceLocation = #_sourceLocation) async {
        let db = s.zoneIDIsMine(zone) ? s.privateDatabase : s.sharedDatabase
        let outcomes: [(String, Outcome)] = [
            ("zones", await attempt { try await db.zones() }),
            ("record", await attempt { try await db.record(named: "n1", in: zone) }),
            ("records", await attempt { try await db.records(named: ["n1", "n2"], in: zone) }),
            ("listing", await attempt { try await db.records(in: zone) }),
            ("query", await attempt { try await db.query(Query(recordType: "Note", sort: [.init("title")]), in: zone) }),
            ("changes", await attempt { try await db.changes(in: zone, since: nil) }),
            ("database changes", await attempt { try await db.databaseChanges(since: nil) }),
            ("schema", await attempt { try await db.schema(of: "Note", in: zone) }),
            ("record types", await attempt { try await db.recordTypes(named: ["n1", "n2"], in: zone) }),
            ("shares", await attempt { try await s.fetchShares() }),
            ("contacts", await attempt { try await s.store.contacts() }),
            ("audit", await attempt { try await s.audit() }),
            ("save", await attempt { try await db.save(makeNote("n3", in: zone)) }),
        ]
        for (operation, outcome) in outcomes {
            if case .otherError(let text) = outcome { Issue.record("\(operation): \(text)", sourceLocation: sourceLocation) }
        }
    }

    static func expectColumn(_ error: StoreError?, _ column: String, sourceLocation: SourceLocation = #_sourceLocation) {
        #expect(error?.message.contains("column '\(column)'") == true, "\(error?.message ?? "no error")", sourceLocation: sourceLocation)
        #expect(error?.message.contains("the store was changed") == true, "\(error?.message ?? "no error")", sourceLocation: sourceLocation)
    }

    // MARK: - The accessors

    @Test("Row.required and Row.optional: NULL, a value of another type and a missing column throw .integrityFailure, naming the column")
    func accessors() throws {
        let queue = try DatabaseQueue()
        let row = try #require(try queue.read { db in try Row.fetchOne(db, sql: "SELECT NULL AS gone, 'text' AS word, 7 AS number, x'0102' AS bytes") })
        #expect(try row.optional("gone") as String? == nil)
        #expect(try row.optional(0) as Int64? == nil)
        #expect(try row.required("word") as String == "text")
        #expect(try row.required(2) as Int64 == 7)
        #expect(try row.optional("number") as Int64? == 7)
        #expect(try row.required("bytes") as Data == Data([1, 2]))
        Self.expectColumn(expectStoreErrorSync(.integrityFailure) { try row.required("gone") as String }, "gone")
        Self.expectColumn(expectStoreErrorSync(.integrityFailure) { try row.required(0) as Data }, "gone")
        Self.expectColumn(expectStoreErrorSync(.integrityFailure) { try row.required("word") as Int64 }, "word")
        Self.expectColumn(expectStoreErrorSync(.integrityFailure) { try row.optional(1) as Int64? }, "word")
        Self.expectColumn(expectStoreErrorSync(.integrityFailure) { try row.required("number") as Data }, "number")
        let missing = expectStoreErrorSync(.integrityFailure) { try row.required("nothing") as String }
        #expect(missing?.message.contains("'nothing'") == true, "\(missing?.message ?? "")")
        #expect(throws: StoreError.self) { try row.optional("nothing") as String? }
        // A dictionary's value type is optional: `required` still refuses NULL there.
        var counts = [String: Int64]()
        Self.expectColumn(expectStoreErrorSync(.integrityFailure) { counts["gone"] = try row.required("gone") }, "gone")
        Self.expectColumn(expectStoreErrorSync(.integrityFailure) { counts["word"] = try row.required("word") }, "word")
        #expect(counts.isEmpty)
    }

    @Test("GRDB's RowDecodingError (a scalar fetch meeting NULL) becomes .integrityFailure naming the column, not an internal error")
    func rowDecodingErrorIsMapped() throws {
        let queue = try DatabaseQueue()
        let thrown: (any Error)? = try queue.read { db in
            do { _ = try String.fetchAll(db, sql: "SELECT NULL AS user_id"); return nil } catch { return error }
        }
        let error = try #require(thrown)
        #expect(error is RowDecodingError, "\(type(of: error))")
        let mapped = try #require(Store.map(error) as? StoreError)
        #expect(mapped.code == .integrityFailure)
        Self.expectColumn(mapped, "user_id")
        #expect(!mapped.message.contains("SELECT"), "the message quotes the query: \(mapped.message)")
    }

    // MARK: - Zones

    @Test("zone.name NULL: zone list and the database's changes refuse the store, naming the column")
    func zoneNameNull() async throws {
        try await withStore { f in
            let zone = try await f.makeZone("Notes")
            try Self.forge(f, "zone", set: "name", to: .null, where: "id = ?", [try f.zoneRowID(zone)])
            let alice = try Self.reopened(f, f.alice)
            Self.expectColumn(await expectStoreError(.integrityFailure) { try await alice.privateDatabase.zones() }, "name")
            Self.expectColumn(await expectStoreError(.integrityFailure) { try await alice.privateDatabase.databaseChanges(since: nil) }, "name")
            // The session that made the zone, too.
            Self.expectColumn(await expectStoreError(.integrityFailure) { try await f.alice.privateDatabase.zones() }, "name")
            await Self.sweep(alice, zone)
        }
    }

    @Test("zone.log_format NULL: zone list refuses the store, naming the column")
    func zoneLogFormatNull() async throws {
        try await withStore { f in
            let zone = try await f.makeZone("Notes")
            try Self.forge(f, "zone", set: "log_format", to: .null, where: "id = ?", [try f.zoneRowID(zone)])
            let alice = try Self.reopened(f, f.alice)
            Self.expectColumn(await expectStoreError(.integrityFailure) { try await alice.privateDatabase.zones() }, "log_format")
            await Self.sweep(alice, zone)
        }
    }

    @Test("zone.log_format holding TEXT (STRICT dropped): zone list refuses the store, naming the column")
    func zoneLogFormatText() async throws {
        try await withStore { f in
            let zone = try await f.makeZone("Notes")
            try Self.forge(f, "zone", set: "log_format", to: "one".databaseValue, where: "id = ?", [try f.zoneRowID(zone)], dropStrict: true)
            let alice = try Self.reopened(f, f.alice)
            let error = await expectStoreError(.integrityFailure) { try await alice.privateDatabase.zones() }
            Self.expectColumn(error, "log_format")
            #expect(error?.message.contains("wrong type") == true, "\(error?.message ?? "")")
            await Self.sweep(alice, zone)
        }
    }

    @Test("zone.uid NULL: zone list and record reads refuse the store")
    func zoneUIDNull() async throws {
        try await withStore { f in
            let zone = try await f.makeZone("Notes")
            try Self.forge(f, "zone", set: "uid", to: .null, where: "id = ?", [try f.zoneRowID(zone)])
            let alice = try Self.reopened(f, f.alice)
            Self.expectColumn(await expectStoreError(.integrityFailure) { try await alice.privateDatabase.zones() }, "uid")
            await expectStoreError(.integrityFailure) { try await alice.privateDatabase.record(named: "n1", in: zone) }
            await Self.sweep(alice, zone)
        }
    }

    // MARK: - Records

    @Test("record.plain NULL: get, query and changes refuse the record; the others still read")
    func recordPlainNull() async throws {
        try await withStore { f in
            let zone = try await f.makeZone("Notes")
            try Self.forge(f, "record", set: "plain", to: .null, where: "zone_id = ? AND name = 'n1'", [try f.zoneRowID(zone)])
            let alice = try Self.reopened(f, f.alice)
            let db = alice.privateDatabase
            await expectStoreError(.integrityFailure) { try await db.record(named: "n1", in: zone) }
            #expect(try await db.record(named: "n2", in: zone).name == "n2")
            let result = try await db.query(Query(recordType: "Note"), in: zone)
            #expect(result.records.map(\.name) == ["n2"])
            #expect(result.refused["n1"]?.code == .integrityFailure, "\(result.refused)")
            let changes = try await db.changes(in: zone, since: nil)
            #expect(changes.changed.map(\.name) == ["n2"])
            Self.expectColumn(changes.refused["n1"], "plain")
            #expect(changes.refused["n1"]?.code == .integrityFailure)
            await Self.sweep(alice, zone)
        }
    }

    @Test("record.creator_id NULL: get and changes refuse the record")
    func recordCreatorNull() async throws {
        try await withStore { f in
            let zone = try await f.makeZone("Notes")
            try Self.forge(f, "record", set: "creator_id", to: .null, where: "zone_id = ? AND name = 'n1'", [try f.zoneRowID(zone)])
            let alice = try Self.reopened(f, f.alice)
            await expectStoreError(.integrityFailure) { try await alice.privateDatabase.record(named: "n1", in: zone) }
            let changes = try await alice.privateDatabase.changes(in: zone, since: nil)
            #expect(changes.changed.map(\.name) == ["n2"])
            Self.expectColumn(changes.refused["n1"], "creator_id")
            await Self.sweep(alice, zone)
        }
    }

    @Test("record.epoch holding TEXT (STRICT dropped): get and changes refuse the record")
    func recordEpochText() async throws {
        try await withStore { f in
            let zone = try await f.makeZone("Notes")
            try Self.forge(f, "record", set: "epoch", to: "one".databaseValue, where: "zone_id = ? AND name = 'n1'", [try f.zoneRowID(zone)],
                           dropStrict: true)
            let alice = try Self.reopened(f, f.alice)
            await expectStoreError(.integrityFailure) { try await alice.privateDatabase.record(named: "n1", in: zone) }
            let changes = try await alice.privateDatabase.changes(in: zone, since: nil)
            #expect(changes.changed.map(\.name) == ["n2"])
            Self.expectColumn(changes.refused["n1"], "epoch")
            #expect(changes.refused["n1"]?.message.contains("wrong type") == true, "\(changes.refused)")
            await Self.sweep(alice, zone)
        }
    }

    @Test("record_tombstone.author_id NULL: the change feed still lists the deletion, its author from the signed log")
    func tombstoneAuthorNull() async throws {
        try await withStore { f in
            let zone = try await f.makeZone("Notes")
            try await f.alice.privateDatabase.delete(recordNamed: "n2", in: zone)
            try Self.forge(f, "record_tombstone", set: "author_id", to: .null, where: "zone_id = ? AND name = 'n2'", [try f.zoneRowID(zone)])
            let alice = try Self.reopened(f, f.alice)
            let changes = try await alice.privateDatabase.changes(in: zone, since: nil)
            #expect(changes.deleted.map(\.name) == ["n2"])
            #expect(changes.deleted.first?.authorID == alice.userID)
            #expect(changes.refused.isEmpty, "\(changes.refused)")
            await Self.sweep(alice, zone)
        }
    }

    @Test("record_tombstone.seq NULL: audit refuses the store, naming the column")
    func tombstoneSeqNull() async throws {
        try await withStore { f in
            let zone = try await f.makeZone("Notes")
            try await f.alice.privateDatabase.delete(recordNamed: "n2", in: zone)
            try Self.forge(f, "record_tombstone", set: "seq", to: .null, where: "zone_id = ? AND name = 'n2'", [try f.zoneRowID(zone)])
            let alice = try Self.reopened(f, f.alice)
            Self.expectColumn(await expectStoreError(.integrityFailure) { try await alice.audit() }, "seq")
            await Self.sweep(alice, zone)
        }
    }

    @Test("field_schema.value_type NULL: reads of the record type refuse the store, naming the column")
    func fieldSchemaTypeNull() async throws {
        try await withStore { f in
            let zone = try await f.makeZone("Notes")
            try Self.forge(f, "field_schema", set: "value_type", to: .null, where: "zone_id = ? AND record_type = 'Note' AND field = 'title'",
                           [try f.zoneRowID(zone)])
            let alice = try Self.reopened(f, f.alice)
            Self.expectColumn(await expectStoreError(.integrityFailure) { try await alice.privateDatabase.record(named: "n1", in: zone) }, "value_type")
            Self.expectColumn(await expectStoreError(.integrityFailure) { try await alice.privateDatabase.schema(of: "Note", in: zone) }, "value_type")
            await Self.sweep(alice, zone)
        }
    }

    @Test("store_counter.db_seq NULL, or its row deleted: the database's changes refuse the store")
    func storeCounter() async throws {
        try await withStore { f in
            let zone = try await f.makeZone("Notes")
            try Self.forge(f, "store_counter", set: "db_seq", to: .null, where: "id = 1")
            let alice = try Self.reopened(f, f.alice)
            Self.expectColumn(await expectStoreError(.integrityFailure) { try await alice.privateDatabase.databaseChanges(since: nil) }, "db_seq")
            await Self.sweep(alice, zone)
            try f.sqlite { db in try db.execute(sql: "DELETE FROM store_counter") }
            let error = await expectStoreError(.integrityFailure) { try await alice.privateDatabase.databaseChanges(since: nil) }
            #expect(error?.message.contains("change counter") == true, "\(error?.message ?? "")")
            await Self.sweep(alice, zone)
        }
    }

    // MARK: - Keys and the log

    @Test("zone_key.wrapped_key NULL: reading a sealed record refuses the store, naming the column")
    func wrappedKeyNull() async throws {
        try await withStore { f in
            let zone = try await f.makeZone("Notes")
            try Self.forge(f, "zone_key", set: "wrapped_key", to: .null, where: "zone_id = ? AND member_id = ?", [try f.zoneRowID(zone), f.alice.userID])
            let alice = try Self.reopened(f, f.alice)
            Self.expectColumn(await expectStoreError(.integrityFailure) { try await alice.privateDatabase.record(named: "n1", in: zone) }, "wrapped_key")
            await Self.sweep(alice, zone)
        }
    }

    @Test("zone_log.body NULL: the zone's log fails verification; reads refuse it and audit reports it")
    func logBodyNull() async throws {
        try await withStore { f in
            let zone = try await f.makeZone("Notes")
            try Self.forge(f, "zone_log", set: "body", to: .null, where: "zone_id = ? AND seq = 2", [try f.zoneRowID(zone)])
            let alice = try Self.reopened(f, f.alice)
            await expectStoreError(.integrityFailure) { try await alice.privateDatabase.record(named: "n1", in: zone) }
            await expectStoreError(.integrityFailure) { try await alice.privateDatabase.changes(in: zone, since: nil) }
            let report = try await alice.audit()
            #expect(report.findings.contains { $0.zone == zone }, "\(report.findings)")
            await Self.sweep(alice, zone)
        }
    }

    // MARK: - Contacts

    @Test("contact.card NULL: the contact is refused (left out of the list, reported by audit), naming the column")
    func contactCardNull() async throws {
        try await withStore { f in
            let bob = try await f.user("Bob", "bob@example.com")
            try Self.forge(f, "contact", set: "card", to: .null, where: "user_id = ?", [bob.userID])
            let alice = try Self.reopened(f, f.alice)
            Self.expectColumn(expectStoreErrorSync(.integrityFailure) { try alice.store.verifiedContact(userID: bob.userID) }, "card")
            #expect(try await alice.store.contacts().map(\.userID) == [alice.userID])
            let report = try await alice.audit()
            let found = report.findings.filter { $0.kind == .contact && $0.subject == bob.userID }
            #expect(found.contains { $0.message.contains("column 'card'") }, "\(report.findings)")
        }
    }

    @Test("contact.name NULL: reads take the name from the card; audit, which compares the column, refuses the store")
    func contactNameNull() async throws {
        try await withStore { f in
            let bob = try await f.user("Bob", "bob@example.com")
            try Self.forge(f, "contact", set: "name", to: .null, where: "user_id = ?", [bob.userID])
            let alice = try Self.reopened(f, f.alice)
            #expect(try await alice.store.contact(matching: bob.userID).name == "Bob")
            Self.expectColumn(await expectStoreError(.integrityFailure) { try await alice.audit() }, "name")
        }
    }

    // MARK: - Shares

    @Test("share_link.sealed_secret NULL: the link secret is refused (share show leaves it out of the URL); sealed_key NULL: joining by link is refused")
    func shareLinkNull() async throws {
        try await withStore { f in
            let zone = try await f.makeZone("Notes")
            let share = try await f.alice.share(zone: zone, title: "Notes", publicPermission: .readOnly)
            #expect(share.url.contains("#"))
            let rowID = try f.zoneRowID(zone)
            try Self.forge(f, "share_link", set: "sealed_secret", to: .null, where: "zone_id = ?", [rowID])
            let alice = try Self.reopened(f, f.alice)
            let shown = try await alice.fetchShare(in: zone)
            #expect(!shown.url.contains("#"), "\(shown.url)")
            let row = try await f.zoneRow(zone)
            let error = expectStoreErrorSync(.integrityFailure) {
                try alice.read { db in
                    _ = try alice.sharing.linkSecret(db, zone: row, state: try alice.verifiedLogs.zoneState(db, zone: row))
                    return true
                }
            }
            #expect(error?.message.contains("sealed_secret") == true, "\(error?.message ?? "")")

            try Self.forge(f, "share_link", set: "sealed_key", to: .null, where: "zone_id = ?", [rowID])
            let bob = try await f.user("Bob", "bob@example.com")
            await expectStoreError(.integrityFailure) { try await bob.acceptShare(url: share.url) }
            await Self.sweep(alice, zone)
        }
    }
}

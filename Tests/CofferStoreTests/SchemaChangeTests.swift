import CofferCrypto
import CofferVault
import CofferStoreTestSupport
import Foundation
import Testing
@testable import CofferStore

@Suite("Schema files, imports and drops")
struct SchemaChangeTests {
    static let sample = """
        -- notes
        DEFINE SCHEMA
        record type Note (
            title STRING QUERYABLE,   // plain, indexed at import
            body  STRING ENCRYPTED,
            due   timestamp,
            tags  LIST<STRING>,
            n     INT, ratio DOUBLE, done BOOL, raw BYTES, link REF,
        );
        RECORD TYPE Task ( pins LIST<INT64> ENCRYPTED )
        """

    @Test func fileParsesAndPrintsBackTheSame() throws {
        let file = try SchemaFile(parsing: Self.sample)
        #expect(file.types.map(\.name) == ["Note", "Task"])
        let note = try #require(file.types.first)
        #expect(note.fields.map(\.name) == ["title", "body", "due", "tags", "n", "ratio", "done", "raw", "link"])
        #expect(note.fields[0] == SchemaFile.Field(name: "title", type: .string, encrypted: false, queryable: true, line: 4, column: 5))
        #expect(note.fields[1].encrypted && !note.fields[1].queryable)
        #expect(note.fields.map(\.type) == [.string, .string, .date, .list(.string), .int, .double, .bool, .bytes, .reference])
        #expect(file.types[1].fields == [SchemaFile.Field(name: "pins", type: .list(.int), encrypted: true, queryable: false, line: 10, column: 20)])
        // A schema printed and parsed again is the same schema.
        var schema = [String: [String: FieldSchema]]()
        for declaration in file.declarations {
            schema[declaration.recordType, default: [:]][declaration.field] = FieldSchema(type: declaration.type, encrypted: declaration.encrypted)
        }
        let printed = SchemaFile(schema: schema)
        let again = try SchemaFile(parsing: printed.text)
        #expect(again.types.map(\.name) == ["Note", "Task"])
        #expect(Set(again.declarations) == Set(file.declarations))
        #expect(SchemaFile(schema: schema).text == SchemaFile(schema: schema).text)
        #expect(printed.text.contains("    title STRING QUERYABLE\n);"), "\(printed.text)")
        #expect(printed.text.contains("    body  STRING ENCRYPTED,\n"), "\(printed.text)")
        #expect(printed.text.hasPrefix("DEFINE SCHEMA\n\nRECORD TYPE Note (\n"), "\(printed.text)")
    }

    @Test("a file the grammar does not allow is refused at its line and column", arguments: [
        ("RECORD TYPE Note ( title STRNG )", 1, 26, "unknown type 'STRNG'"),
        ("RECORD TYPE Note (\n  title STRING,\n  title INT64\n)", 3, 3, "declared twice"),
        ("RECORD TYPE Note ( a STRING ENCRYPTED QUERYABLE )", 1, 39, "cannot be QUERYABLE"),
        ("RECORD TYPE Note ( a BYTES QUERYABLE )", 1, 20, "cannot be queried"),
        ("RECORD TYPE Note ( a STRING SORTABLE )", 1, 29, "unknown attribute 'SORTABLE'"),
        ("RECORD TYPE Note ( a LIST<LIST<INT64>> )", 1, 27, "list of lists"),
        ("RECORD TYPE Note ( a STRING b INT64 )", 1, 29, "missing"),
        ("RECORD TYPE Note ()", 1, 13, "no fields"),
        ("RECORD TYPE 9Note ( a STRING )", 1, 13, "must start with a letter"),
        ("RECORD TYPE Note ( a STRING );\nRECORD TYPE Note ( b STRING )", 2, 1, "declared twice (first at 1:1)"),
        ("RECORD TYPE Note ( a STRING ) extra", 1, 31, "expected RECORD TYPE, found 'extra'"),
        ("RECORD TYPE Note ( a STRING", 1, 28, "found the end of the file"),
        ("RECORD Note ( a STRING )", 1, 8, "expected TYPE"),
        ("RECORD TYPE Note ( a\u{7} STRING )", 1, 21, "control character"),
        ("-- a comment that rings \u{7}\nRECORD TYPE Note ( a STRING )", 1, 25, "control character"),
        ("RECORD TYPE Note ( a STRING ) // \u{1b}[2J clears the screen", 1, 34, "control character"),
        ("// reads as \u{202e}txt.exe\nRECORD TYPE Note ( a STRING )", 1, 13, "format character"),
        ("RECORD TYPE Note ( a STRING ENCRYPTED ENCRYPTED )", 1, 39, "given twice"),
    ])
    func fileErrors(_ text: String, _ line: Int, _ column: Int, _ message: String) {
        let result = Result { () throws(SchemaFile.ParseError) -> SchemaFile in try SchemaFile(parsing: text) }
        guard case .failure(let error) = result else {
            Issue.record("the file parsed: \(text)")
            return
        }
        #expect(error.line == line && error.column == column, "\(error)")
        #expect(error.message.contains(message), "\(error)")
        #expect(!error.description.contains("\n"))
    }

    @Test func closestNames() {
        #expect(SchemaDelta.closest(to: "titel", among: ["title", "body"]) == "title")
        #expect(SchemaDelta.closest(to: "Title", among: ["title"]) == "title")
        #expect(SchemaDelta.closest(to: "bdy", among: ["body", "title"]) == "body")
        #expect(SchemaDelta.closest(to: "xyz", among: ["body", "title"]) == nil)
        #expect(SchemaDelta.closest(to: "ab", among: ["cd"]) == nil)
        let zone = ZoneID(name: "Z", ownerID: "a")
        let note = makeRecord("Note", "n", in: zone, plain: ["titel": "x", "title2": "y"])
        let delta = SchemaDelta(records: [note], schema: ["Note": ["title": FieldSchema(type: .string, encrypted: false)], "Task": [:]])
        #expect(delta.newTypes.isEmpty)
        #expect(delta.newFields.map { $0.name } == ["titel", "title2"])
        #expect(delta.newFields.map { $0.suggestion } == ["title", "title"])
        let task = makeRecord("Tsk", "t", in: zone, plain: ["a": 1])
        let newType = SchemaDelta(records: [task], schema: ["Task": ["a": FieldSchema(type: .int, encrypted: false)]])
        #expect(newType.newTypes == [SchemaDelta.NewType(name: "Tsk", suggestion: "Task")])
        #expect(newType.newFields.map { $0.ofNewType } == [true])
    }

    @Test func importAddsAndIsIdempotentAndRefusesConflicts() async throws {
        try await withStore { f async throws in
            let zone = try await f.db.createZone(named: "Z")
            _ = try await f.db.save(makeRecord("Note", "a", in: zone, plain: ["title": "t"]))
            let file = try SchemaFile(parsing: Self.sample)
            let added = try await f.db.addFields(file.declarations, in: zone)
            #expect(added.count == file.declarations.count - 1, "title was there")
            let schema = try await f.db.schema(in: zone)
            #expect(schema["Task"]?["pins"] == FieldSchema(type: .list(.int), encrypted: true))
            #expect(schema["Note"]?["due"] == FieldSchema(type: .date, encrypted: false))
            #expect(try await f.db.addFields(file.declarations, in: zone).isEmpty)
            // A conflicting file fixes nothing, not even its agreeing new fields.
            let conflicting = try SchemaFile(parsing: "RECORD TYPE Note ( fresh STRING, due STRING )")
            #expect(conflicting.conflicts(with: schema).map(\.field.name) == ["due"])
            try await expectStoreError(.invalidArguments) { try await f.db.addFields(conflicting.declarations, in: zone) }
            #expect(try await f.db.schema(in: zone)["Note"]?["fresh"] == nil)
        }
    }

    @Test func dropIsRefusedWhileUsedThenAllowedAndTheNameRedefinable() async throws {
        try await withStore { f async throws in
            let zone = try await f.db.createZone(named: "Z")
            _ = try await f.db.save(makeRecord("Note", "a", in: zone, plain: ["titel": "x", "title": "y"]))
            _ = try await f.db.save(makeRecord("Note", "b", in: zone, encrypted: ["pin": 1]))
            _ = try await f.db.save(makeRecord("Note", "c", in: zone, plain: ["title": "z"]))
            let refused = try await expectStoreError(.invalidArguments) { try await f.db.dropField("titel", of: "Note", in: zone) }
            #expect(refused?.message.contains("1 record") == true, "\(String(describing: refused))")
            // An encrypted field is found by opening the records.
            try await expectStoreError(.invalidArguments) { try await f.db.dropField("pin", of: "Note", in: zone) }
            let typeRefused = try await expectStoreError(.invalidArguments) { try await f.db.dropRecordType("Note", in: zone) }
            #expect(typeRefused?.message.contains("3 records") == true, "\(String(describing: typeRefused))")
            try await expectStoreError(.unknownItem) { try await f.db.dropField("nope", of: "Note", in: zone) }
            try await expectStoreError(.unknownItem) { try await f.db.dropRecordType("Nope", in: zone) }
            // Another user (no access) and a read-write participant may not drop.
            let bob = try await f.user("Bob Builder", "bob@example.com")
            let share = try await f.alice.share(zone: zone)
            _ = try await f.alice.addParticipant(bob.userID, permission: .readWrite, to: zone)
            _ = try await bob.acceptShare(url: share.url)
            try await expectStoreError(.permissionFailure) { try await bob.sharedDatabase.dropField("titel", of: "Note", in: zone) }
            try await expectStoreError(.permissionFailure) {
                try await bob.sharedDatabase.addFields([FieldDeclaration("x", of: "Note", type: .int, encrypted: false)], in: zone)
            }
            // A session that cached the schema before the drop.
            let stale = try await f.fresh(f.alice)
            _ = try await stale.privateDatabase.record(named: "a", in: zone)
            // Once no record has the field, it goes, and the name takes another type.
            var a = try await f.db.record(named: "a", in: zone)
            a.values["titel"] = nil
            _ = try await f.db.save(a)
            let before = try await f.alice.store.read { db in try f.alice.verifiedLogs.zoneState(db, zone: try f.alice.accessControl.zoneRow(db, zone)).headSeq }
            try await f.db.dropField("titel", of: "Note", in: zone)
            let after = try await f.alice.store.read { db in try f.alice.verifiedLogs.zoneState(db, zone: try f.alice.accessControl.zoneRow(db, zone)).headSeq }
            #expect(after == before + 1, "the drop is an entry of the log")
            #expect(try await f.db.schema(of: "Note", in: zone)["titel"] == nil)
            _ = try await f.db.save(makeRecord("Note", "d", in: zone, plain: ["titel": 7]))
            #expect(try await f.db.schema(of: "Note", in: zone)["titel"] == FieldSchema(type: .int, encrypted: false))
            // The stale session reads the redefined field, and its own save of the field fixes
            // nothing it should not.
            #expect(try await stale.privateDatabase.record(named: "d", in: zone).values["titel"] == .int(7))
            try await expectStoreError(.invalidArguments) { _ = try await stale.privateDatabase.save(makeRecord("Note", "e", in: zone, plain: ["titel": "text"])) }
            // A whole type: delete its records, drop it, define it again.
            for name in ["a", "b", "c", "d"] { try await f.db.delete(recordNamed: name, in: zone) }
            try await f.db.dropRecordType("Note", in: zone)
            #expect(try await f.db.schema(in: zone)["Note"] == nil)
            _ = try await f.db.save(makeRecord("Note", "n", in: zone, encrypted: ["title": "now sealed"]))
            #expect(try await f.db.schema(of: "Note", in: zone)["title"] == FieldSchema(type: .string, encrypted: true))
            for session in [f.alice, bob, stale] { #expect(try await session.audit().findings.isEmpty) }
        }
    }

    /// Drops on each backend (PostgreSQL too): refused while a record (plain or encrypted field)
    /// uses the name, done once none does, seen by another store object on the same database
    /// (another instance of a service), and the name defined again with another type.
    @Test(arguments: TestBackend.all)
    func dropOnEachBackend(_ backend: TestBackend) async throws {
        try await withStore(backend) { f async throws in
            let zone = try await f.db.createZone(named: "Z")
            _ = try await f.db.save(makeRecord("Note", "a", in: zone, plain: ["titel": "x", "title": "y"]))
            _ = try await f.db.save(makeRecord("Note", "b", in: zone, encrypted: ["pin": 1]))
            try await expectStoreError(.invalidArguments) { try await f.db.dropField("titel", of: "Note", in: zone) }
            try await expectStoreError(.invalidArguments) { try await f.db.dropField("pin", of: "Note", in: zone) }
            try await expectStoreError(.invalidArguments) { try await f.db.dropRecordType("Note", in: zone) }
            // Another instance, whose session cached the schema before the drop.
            let other = try await f.otherStore().openSession(vault: f.vault)
            #expect(try await other.privateDatabase.schema(of: "Note", in: zone)["titel"] == FieldSchema(type: .string, encrypted: false))
            var a = try await f.db.record(named: "a", in: zone)
            a.values["titel"] = nil
            _ = try await f.db.save(a)
            try await f.db.dropField("titel", of: "Note", in: zone)
            #expect(try await f.db.schema(of: "Note", in: zone)["titel"] == nil)
            // The other instance saves the name with another type: the drop reached it.
            _ = try await other.privateDatabase.save(makeRecord("Note", "c", in: zone, plain: ["titel": 7]))
            #expect(try await f.db.record(named: "c", in: zone).values["titel"] == .int(7))
            #expect(try await f.db.schema(of: "Note", in: zone)["titel"] == FieldSchema(type: .int, encrypted: false))
            for name in ["a", "b", "c"] { try await f.db.delete(recordNamed: name, in: zone) }
            try await f.db.dropRecordType("Note", in: zone)
            #expect(try await f.db.schema(in: zone)["Note"] == nil)
            #expect(try await f.fresh(f.alice).audit().findings.isEmpty)
            #expect(try await other.audit().findings.isEmpty)
        }
    }

    /// Through a server: the owner imports and drops; a participant's batch that drops a field,
    /// or writes schema rows without a commit, is refused by the server, whatever it signs.
    @Test func serverTakesSchemaChangesFromTheOwnerOnly() async throws {
        try await withServer(.sqlite) { fixture in
            let alice = try await fixture.user("Alice", "alice@example.com")
            let carol = try await fixture.user("Carol Danvers", "carol@example.com")
            let db = alice.session.privateDatabase
            let zone = try await db.createZone(named: "Family")
            _ = try await db.save(makeRecord("Note", "n1", in: zone, plain: ["title": "t", "titel": "typo"]))
            let share = try await alice.session.share(zone: zone)
            _ = try await alice.session.addParticipant(carol.vault.identity.userID, permission: .readWrite, to: zone)
            _ = try await carol.session.acceptShare(url: share.url)
            try await db.addFields([FieldDeclaration("due", of: "Note", type: .date, encrypted: false)], in: zone)
            try await expectStoreError(.permissionFailure) { try await carol.session.sharedDatabase.dropField("due", of: "Note", in: zone) }
            // Carol's own batches: a drop with her signed (valid) commit, a drop alone, schema rows alone.
            guard case .snapshot(let driver as RemoteStorage) = carol.store.backend else { throw StoreError(.internalError, "not a server's store") }
            let (row, state) = try await carol.session.store.read { db in
                let row = try carol.session.accessControl.zoneRow(db, zone)
                return (row, try carol.session.verifiedLogs.zoneLog(db, zone: row).state)
            }
            let payload = RecordsPayload(epoch: state.epoch, ownerSeq: state.ownerSeq, label: nil, records: RecordsSummary(entries: [], names: []))
            let entry = LogEntry(zoneUID: row.uid, seq: state.headSeq + 1, prev: state.headHash, kind: .commit,
                                 authorID: carol.vault.identity.userID, time: Date().timeIntervalSince1970, payload: payload.encoded)
            let signature = carol.vault.signingKey.signature(for: entry.body)
            let commit = StorageSnapshot.Write.appendLog(zoneRowID: row.rowID, head: state.headSeq, entry: entry, body: entry.body, signature: signature,
                                                         hash: LogEntry.hash(body: entry.body, signature: signature), entries: [], names: [])
            for writes: [StorageSnapshot.Write] in [
                [commit, .dropFieldSchema(zoneRowID: row.rowID, recordType: "Note", field: "due")],
                [.dropFieldSchema(zoneRowID: row.rowID, recordType: "Note", field: "due")],
                [.fieldSchema(zoneRowID: row.rowID, recordType: "Note", field: "x", schema: FieldSchema(type: .int, encrypted: false))],
            ] {
                await #expect { try await driver.apply(writes, operation: nil) } throws: { error in
                    (error as? StoreError)?.code == .permissionFailure
                }
            }
            #expect(try await db.schema(of: "Note", in: zone)["due"] == FieldSchema(type: .date, encrypted: false))
            // The owner's drop without an entry of hers is refused too: a drop is always ordered among commits.
            guard case .snapshot(let aliceDriver as RemoteStorage) = alice.store.backend else { throw StoreError(.internalError, "not a server's store") }
            await #expect { try await aliceDriver.apply([.dropFieldSchema(zoneRowID: row.rowID, recordType: "Note", field: "due")], operation: nil) } throws: { error in
                (error as? StoreError)?.code == .permissionFailure
            }
            // The owner drops what no record uses; one in use stays.
            try await expectStoreError(.invalidArguments) { try await db.dropField("titel", of: "Note", in: zone) }
            try await db.dropField("due", of: "Note", in: zone)
            #expect(try await db.schema(of: "Note", in: zone)["due"] == nil)
            // Carol, whose session cached the schema, fixes the name again by a save.
            var again = Record(type: "Note", name: "c1", zone: zone)
            again.values["due"] = "soon"
            _ = try await carol.session.sharedDatabase.save(again)
            #expect(try await db.schema(of: "Note", in: zone)["due"] == FieldSchema(type: .string, encrypted: false))
            for session in [alice.session, carol.session] { #expect(try await session.audit().findings.isEmpty) }
        }
    }
}

import CofferCrypto
import CofferStoreTestSupport
import Foundation
import Testing
@testable import CofferStore

/// An import's save seals and hashes each batch ahead of its transaction, and its whole-file
/// check agrees field types chunk by chunk in parallel: what a batch sealed ahead becomes when
/// the zone moved on, and which line a chunk's disagreement is reported on.
@Suite("Import pipeline")
struct ImportPipelineTests {
    /// `record`, prepared and sealed ahead with `sealing` for log entry `seq`.
    static func presealed(_ record: Record, _ sealing: SealingKey, seq: Int64) throws -> PreparedRecord {
        var prepared = try RecordWriter.prepare(record, zone: record.zoneID)
        sealing.preseal(&prepared, of: record, seq: seq, time: Date().timeIntervalSince1970, nonces: nil)
        return prepared
    }

    static func note(_ name: String, _ zone: ZoneID) -> Record {
        var r = Record(type: "Note", name: name, zone: zone)
        r.values["n"] = 1
        r.encryptedValues["secret"] = .string("s-\(name)")
        return r
    }

    @Test("a batch sealed ahead is written as sealed when the log is where it expected, hashed again when the head moved, sealed again after a re-key; every record reads and audit is clean",
          arguments: TestBackend.all)
    func sealedAhead(_ backend: TestBackend) async throws {
        try await withStore(backend) { h in
            let db = h.db
            let zone = try await db.createZone(named: "Z")
            // As expected: the stored sealed bytes are the ones sealed ahead.
            let sealing = try await h.alice.writer.sealingKey(for: zone)
            let first = Self.note("a", zone)
            let prepared = try Self.presealed(first, sealing, seq: sealing.headSeq + 1)
            let expected = try #require(prepared.presealed?.version)
            _ = try await db.modify(saving: [first], prepared: [prepared], in: zone, policy: .allKeys, declaring: [],
                                    time: expected.stamp.modified)
            let zoneRow = sealing.zone
            let stored = try await h.store.read { tx in
                var rows = [[UInt8]]()
                try tx.readRecordRows(zoneRowID: zoneRow.rowID, names: ["a"], into: { row in
                    rows.append(row.withBytes { Array($0.dropFirst(row.plainCount)) })
                })
                return rows
            }
            #expect(stored.count == 1 && stored.first == expected.sealed)

            // The head moved after sealing (another write came first): hashed again, same seal.
            let stale = try await h.alice.writer.sealingKey(for: zone)
            _ = try await db.save(Self.note("other", zone))
            let b = Self.note("b", zone)
            _ = try await db.modify(saving: [b], prepared: [try Self.presealed(b, stale, seq: stale.headSeq + 1)], in: zone,
                                    policy: .allKeys, declaring: [])
            // A new key epoch after sealing (a member removed): sealed again under the new key.
            let older = try await h.alice.writer.sealingKey(for: zone)
            let bob = try await h.user("Bob", "bob@example.com")
            try await h.share(zone, with: [(bob, .readOnly)])
            _ = try await h.alice.removeParticipant(bob.userID, from: zone)
            let c = Self.note("c", zone)
            _ = try await db.modify(saving: [c], prepared: [try Self.presealed(c, older, seq: older.headSeq + 1)], in: zone,
                                    policy: .allKeys, declaring: [])

            let fresh = try await h.fresh(h.alice)
            for name in ["a", "b", "c"] {
                let record = try await fresh.privateDatabase.record(named: name, in: zone)
                #expect(record.encryptedValues["secret"] == .string("s-\(name)"))
            }
            #expect(try await fresh.privateDatabase.record(named: "c", in: zone).keyEpoch == older.epoch + 1)
            let report = try await fresh.audit()
            #expect(report.findings.isEmpty, "\(report.findings)")
        }
    }

    @Test("an import saved while other writes land between its batches: every record reads, audit is clean", arguments: TestBackend.all)
    func writesBetweenBatches(_ backend: TestBackend) async throws {
        try await withStore(backend) { h in
            let db = h.db
            let zone = try await db.createZone(named: "Z")
            let lines = (0..<1_300).map { #"{"name":"r\#($0)","type":"Note","values":{"n":\#($0)},"encryptedValues":{"secret":"s\#($0)"}}"# }
            let checked = try await RecordImport(jsonLines: Data((lines.joined(separator: "\n") + "\n").utf8), into: zone, of: db)
            // Another writer saves a record into the zone again and again while the import runs.
            let other = try await h.fresh(h.alice)
            let summary = try await withThrowingTaskGroup(of: RecordImport.Summary?.self) { group in
                group.addTask { try await checked.save(to: db) }
                group.addTask {
                    for i in 0..<20 {
                        var r = Record(type: "Note", name: "w\(i)", zone: zone)
                        r.values["n"] = .int(Int64(-i))
                        _ = try await other.privateDatabase.save(r)
                    }
                    return nil
                }
                var summary: RecordImport.Summary?
                for try await result in group { if let result { summary = result } }
                return summary
            }
            #expect(summary == RecordImport.Summary(records: 1_300, batches: 4))
            let fresh = try await h.fresh(h.alice)
            for i in stride(from: 0, to: 1_300, by: 97) {
                #expect(try await fresh.privateDatabase.record(named: "r\(i)", in: zone).encryptedValues["secret"] == .string("s\(i)"))
            }
            #expect(try await fresh.privateDatabase.records(in: zone, limit: 2_000).count == 1_320)
            let report = try await fresh.audit()
            #expect(report.findings.isEmpty, "\(report.findings)")
        }
    }

    /// Lines enough for at least two chunks of the parallel check on a machine of two or more CPUs.
    static let many = 4_100

    static func row(_ i: Int, values: String = #"{"n":1}"#, types: String? = nil) -> String {
        #"{"name":"r\#(i)","type":"Row","values":\#(values),"encryptedValues":{}\#(types.map { #","types":\#($0)"# } ?? "")}"#
    }

    func check(_ lines: [String], into db: RecordDatabase, _ zone: ZoneID) async throws -> RecordImport {
        let checked = try await RecordImport(jsonLines: Data((lines.joined(separator: "\n") + "\n").utf8), into: zone, of: db)
        if ProcessInfo.processInfo.activeProcessorCount >= 2 { #expect(checked.chunks.count >= 2) }
        return checked
    }

    @Test("field types fixed in one chunk hold in the next: a disagreement is reported on its own line, an empty list takes the type fixed before")
    func chunksAgree() async throws {
        try await withStore { f in
            let zone = try await f.db.createZone(named: "Z")
            // A field fixed as int by line 1 and first used as a string by line 3001, in another chunk.
            var lines = (0..<Self.many).map { Self.row($0) }
            lines[0] = Self.row(0, values: #"{"n":1,"f":7}"#)
            lines[3_000] = Self.row(3_000, values: #"{"n":1,"f":"seven"}"#)
            do {
                _ = try await check(lines, into: f.db, zone)
                Issue.record("the import was not refused")
            } catch let e as StoreError {
                #expect(e.code == .invalidArguments && e.message.hasPrefix("line 3001: field 'f' of Row has type int"), "\(e.message)")
            }
            // A later line of that chunk disagrees within the chunk too: still line 3001.
            lines[3_500] = Self.row(3_500, values: #"{"n":"x"}"#)
            do {
                _ = try await check(lines, into: f.db, zone)
                Issue.record("the import was not refused")
            } catch let e as StoreError {
                #expect(e.message.hasPrefix("line 3001: field 'f' of Row has type int"), "\(e.message)")
            }
            // The same line in the first chunk's own disagreement comes first.
            lines[100] = Self.row(100, values: #"{"n":true}"#)
            do {
                _ = try await check(lines, into: f.db, zone)
                Issue.record("the import was not refused")
            } catch let e as StoreError {
                #expect(e.message.hasPrefix("line 101: field 'n' of Row has type int"), "\(e.message)")
            }

            // Empty lists in the second chunk: of a field the first chunk fixed (no `types`
            // needed, and a declared type other than the fixed one is the fixed one), and of a
            // new field declared there.
            lines = (0..<Self.many).map { Self.row($0) }
            lines[0] = Self.row(0, values: #"{"n":1,"l":[1,2]}"#)
            lines[3_000] = Self.row(3_000, values: #"{"n":1,"l":[]}"#)
            lines[3_001] = Self.row(3_001, values: #"{"n":1,"l":[]}"#, types: #"{"l":"[string]"}"#)
            lines[3_002] = Self.row(3_002, values: #"{"n":1,"e":[]}"#, types: #"{"e":"[date]"}"#)
            lines[4_000] = Self.row(4_000, values: #"{"n":1,"late":"x"}"#)
            let checked = try await check(lines, into: f.db, zone)
            #expect(try await checked.save(to: f.db).records == Self.many)
            let schema = try await f.db.schema(of: "Row", in: zone)
            #expect(schema["l"] == FieldSchema(type: .list(.int), encrypted: false))
            #expect(schema["e"] == FieldSchema(type: .list(.date), encrypted: false))
            #expect(schema["late"] == FieldSchema(type: .string, encrypted: false))
            #expect(try await f.db.record(named: "r3001", in: zone).values["l"] == .list([]))

            // Without the first chunk's list, the empty one needs its type.
            lines = (0..<Self.many).map { Self.row($0 + Self.many) }
            lines[3_000] = Self.row(3_000 + Self.many, values: #"{"n":1,"z":[]}"#)
            do {
                _ = try await check(lines, into: f.db, zone)
                Issue.record("the import was not refused")
            } catch let e as StoreError {
                #expect(e.message.hasPrefix("line 3001: field 'z' is a new empty list"), "\(e.message)")
            }
        }
    }
}

#if COFFER_MICRO
// Per-step costs of the record paths, for development. Built only with
// `swift build -c release --scratch-path .build-prof --product coffer-bench -Xswiftc -enable-testing -Xswiftc -DCOFFER_MICRO`,
// then `.build-prof/release/coffer-bench micro`. See Docs/Performance.md.
import ArgumentParser
import CofferCrypto
@testable import CofferStore
import CofferVault
import Foundation

struct MicroBench: AsyncParsableCommand {
    static let configuration = CommandConfiguration(commandName: "micro", abstract: "Per-step costs of saving and reading a record (development build only).")

    @Option(help: "Run only the steps whose name contains this, many times (for a profiler).") var only: String?

    func run() async throws {
        // Kept as one function: the steps measured, in the order they are printed, each a few lines.
        func time(_ name: String, _ n: Int = 20000, _ body: () async throws -> Void) async rethrows {
            if let only { guard name.contains(only) else { return } }
            let n = only == nil ? n : n * 40
            let start = DispatchTime.now().uptimeNanoseconds
            for _ in 0..<n { try await body() }
            let micros = Double(DispatchTime.now().uptimeNanoseconds - start) / Double(n) / 1000
            print(name.padding(toLength: 30, withPad: " ", startingAt: 0), String(format: "%9.2f µs", micros))
        }
        // One Note as RecordsBench makes them.
        let row = RecordsBench.makeRows(200)[0]
        let zoneID = ZoneID(name: "Bench", ownerID: "u")
        var note = CofferStore.Record(type: "Note", name: row.name, zone: zoneID)
        note.values = ["title": .string(row.title), "count": .int(row.count), "date": .date(row.date)]
        note.encryptedValues = ["body": .string(row.body), "n": .int(row.n)]
        let record = note
        let schema: [String: FieldSchema] = ["title": FieldSchema(type: .string, encrypted: false), "count": FieldSchema(type: .int, encrypted: false),
                                           "date": FieldSchema(type: .date, encrypted: false), "body": FieldSchema(type: .string, encrypted: true),
                                           "n": FieldSchema(type: .int, encrypted: true)]
        let key = SymmetricKey()
        let zone = ZoneRow(rowID: 1, uid: Array(repeating: 7, count: 16), id: zoneID, sequence: 1, created: Date(), logFormat: 1)
        let context = WriteContext(zone: zone, key: key, epoch: 1, seq: 2, membershipSeq: 1, authorID: String(repeating: "a", count: 32),
                                   authorLabel: nil, time: 1.7e9, schemas: ["Note": schema])
        let (plain, plainTypes) = PlainValuesCodec.encodeWithTypes(record.values)
        let sealedPlain = SealedValuesCodec.encode(record.encryptedValues)
        func seal() -> [UInt8] { RecordSealer.seal(sealedPlain, key: key, zone: zone, name: record.name, type: "Note", epoch: 1) }
        let stamp = VersionStamp(name: record.name, type: "Note", parent: nil, seq: 2, epoch: 1, membershipSeq: 1, creatorID: context.authorID,
                                 modifierID: context.authorID, created: 1.7e9, modified: 1.7e9)
        func versionHash(_ sealed: [UInt8]) -> Digest32 {
            plain.withUnsafeBytes { p in
                plainTypes.withUnsafeBytes { t in
                    sealed.withUnsafeBytes { s in RecordSealer.versionHash(zoneUID: zone.uid, stamp, plain: p, plainTypes: t, sealed: s) }
                }
            }
        }
        let sealed = seal()

        print("write, per record")
        try await time("  validate and encode") { _ = try RecordWriter.prepare(record, zone: zoneID) }
        await time("  plain values to JSON") { _ = PlainValuesCodec.encodeBytes(record.values) }
        await time("  encrypted values to bytes") { _ = SealedValuesCodec.encode(record.encryptedValues) }
        await time("  seal (with nonce, AD)") { _ = seal() }
        await time("  record-version hash") {
            _ = versionHash(sealed)
        }
        await time("  all of the above") { _ = RecordWriter.sealWrite(record, context) }
        let batched = WriteContext(zone: zone, key: key, epoch: 1, seq: 2, membershipSeq: 1, authorID: context.authorID,
                                   authorLabel: nil, time: 1.7e9, schemas: ["Note": schema], nonces: NonceReserve())
        await time("  all, nonces drawn per batch") { _ = RecordWriter.sealWrite(record, batched) }

        print("read, per record")
        try await time("  plain values from JSON") { _ = try plain.withUnsafeBytes { try PlainValuesCodec.decode($0, typeOf: { schema[$0]?.type }) } }
        try await time("  open") {
            try sealed.withUnsafeBytes { s in
                try RecordSealer.withAssociatedData(zone: zone, name: record.name, type: "Note", epoch: 1) { ad in
                    try Envelope.withOpened(s, using: key, authenticating: ad) { _ in }
                }
            }
        }
        try await time("  encrypted values from bytes") { _ = try SealedValuesCodec.decode(sealedPlain) }
        let digest = versionHash(sealed)
        let commit = VerifiedCommit(seq: 2, kind: .commit, authorID: context.authorID, label: nil, ownerSeq: 1, epoch: 1, time: 1.7e9,
                                    entries: digest.bytes.withUnsafeBytes { DigestSet(entries: $0) }, names: [])
        let stored = StoredRow.make(name: record.name, type: "Note", parent: nil, epoch: 1, seq: 2, membershipSeq: 1, creatorID: context.authorID,
                                    modifierID: context.authorID, created: 1.7e9, modified: 1.7e9, plain: plain, sealed: sealed)
        let rowContext = RowContext(commit: commit, schema: schema, key: .success(key))
        guard case .record = RecordReader.decode(stored, context: rowContext, zone: zone) else { throw ValidationError("decode failed") }
        await time("  check, open, decode") { _ = RecordReader.decode(stored, context: rowContext, zone: zone) }
        let worker = DecodeWorker(zone: zone)
        await time("  400 on this thread (each)", 50) { for _ in 0..<400 { _ = worker.decode(stored, rowContext) } }
        // Making 400 kept records, then freeing them, timed apart.
        let ownRows = (0..<400).map { _ in
            StoredRow.make(name: String(decoding: Array(record.name.utf8), as: UTF8.self), type: "Note", parent: nil, epoch: 1, seq: 2,
                           membershipSeq: 1, creatorID: context.authorID, modifierID: context.authorID, created: 1.7e9, modified: 1.7e9,
                           plain: plain, sealed: sealed)
        }
        do {
            let n = only == nil ? 50 : 2000
            var making: UInt64 = 0, freeing: UInt64 = 0
            for _ in 0..<n {
                let t0 = DispatchTime.now().uptimeNanoseconds
                var kept = ownRows.map { worker.decode($0, rowContext) }
                let t1 = DispatchTime.now().uptimeNanoseconds
                kept = []
                freeing += DispatchTime.now().uptimeNanoseconds - t1
                making += t1 - t0
                withExtendedLifetime(kept) {}
            }
            if only == nil || "  400 kept".contains(only!) {
                print("  400 kept".padding(toLength: 30, withPad: " ", startingAt: 0),
                      String(format: "%9.2f µs, then %.2f µs to free", Double(making) / Double(n) / 1000, Double(freeing) / Double(n) / 1000))
            }
        }
        withExtendedLifetime(rowContext) {}

        // A store of 2,000 Notes (20 values of count, 100 records each) and one more.
        let folder = try Clock.temporaryFolder("coffer-micro")
        defer { try? FileManager.default.removeItem(at: folder) }
        let vault = try Vault.create(at: folder.appendingPathComponent("v.coffer"), name: "M", passphrase: SecureBytes(copying: Array("m".utf8)), kdf: .min)
        let store = try Store(path: folder.appendingPathComponent("s.sqlite").path)
        let session = try await store.openSession(vault: vault)
        let db = session.privateDatabase
        let z = try await db.createZone(named: "Z")
        for b in 0..<5 {
            let batch = (0..<400).map { i -> CofferStore.Record in
                var x = CofferStore.Record(type: "Note", name: "n-\(b * 400 + i)", zone: z)
                x.values = record.values
                x.values["count"] = .int(Int64((b * 400 + i) % 20))
                x.encryptedValues = record.encryptedValues
                return x
            }
            _ = try await db.modify(saving: batch, in: z)
        }
        var single = CofferStore.Record(type: "Note", name: "single", zone: z)
        single.values = record.values
        single.values["count"] = .int(999)
        _ = try await db.modify(saving: [single], in: z)
        let names = (0..<400).map { "n-\($0)" }
        print("store operations")
        try await time("  query returning 1", 1000) { _ = try await db.query(Query(recordType: "Note", predicates: [.init("count", .equal, .int(999))]), in: z) }
        try await time("  query returning 100", 200) { _ = try await db.query(Query(recordType: "Note", predicates: [.init("count", .equal, .int(3))]), in: z) }
        try await time("  fetch 1 by name", 1000) { _ = try await db.records(named: ["n-5"], in: z) }
        try await time("  fetch 400 by name", 100) { _ = try await db.records(named: names, in: z) }
        try await time("  400 lookups, rows copied", 100) {
            try store.dbPool.read { db in
                guard let zr = try SQLiteTransaction(db).zoneRow(z) else { throw ValidationError("the zone is missing") }
                let statement = try RawStatement(db.cachedStatement(sql: "SELECT \(SQLiteTransaction.recordColumns) FROM record WHERE zone_id = ? AND name = ?"))
                var rows = [StoredRow]()
                for name in names {
                    statement.bind(1, zr.rowID)
                    statement.bind(2, name)
                    _ = try RecordRows.read(statement, limit: 1) { rows.append($0) }
                }
            }
        }
        try await time("  read transaction, zone, access", 1000) { _ = try await store.read { tx in try session.accessControl.checkCanRead(tx, zone: try session.accessControl.zoneRow(tx, z)) } }
    }
}
#endif

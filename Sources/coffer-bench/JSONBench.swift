import ArgumentParser
import CofferCrypto
import CofferStore
import CofferVault
import Foundation

/// The JSON interchange against the store's own save: records of the `records` benchmark's
/// shape saved with `modify` in batches of 400 (the save rate), exported as JSON lines through
/// `exportRecords`, queried in pages of 10,000 written as `coffer record query --json` writes
/// them (pretty) and as JSON lines, and the exported lines imported into a fresh store through
/// `RecordImport` (the check of the whole file, then the save, each timed too).
struct JSONBench: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "json",
        abstract: "JSON lines export and import of Note records (3 plain fields, 2 encrypted) against the store's save rate.")

    @Option(help: "Number of records.") var records = 50_000
    @Flag(help: "One JSON object on stdout.") var json = false
    @Option(help: "Keep the stores and the exported file in this folder instead of a temporary one.") var dir: String?

    func validate() throws {
        guard records >= 1 else { throw ValidationError("--records must be at least 1") }
    }

    func run() async throws {
        // Kept as one function: the benchmark's phases in the order they run and are reported, each a few lines.
        let folder = try dir.map { URL(fileURLWithPath: $0) } ?? Clock.temporaryFolder("coffer-bench-json")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        defer { if dir == nil { try? FileManager.default.removeItem(at: folder) } }
        let vault = try Vault.create(at: folder.appendingPathComponent("bench.coffer"), name: "Bench",
                                     passphrase: SecureBytes(copying: Array("bench".utf8)), kdf: .min)
        let saveStore = try Store(path: folder.appendingPathComponent("save.sqlite").path)
        let importStore = try Store(path: folder.appendingPathComponent("import.sqlite").path)
        let saveDB = try saveStore.session(vault: vault).privateDatabase
        let importDB = try importStore.session(vault: vault).privateDatabase
        let saveZone = try await saveDB.createZone(named: "Bench")
        let importZone = try await importDB.createZone(named: "Bench")

        let rows = RecordsBench.makeRows(records)
        let batches = stride(from: 0, to: rows.count, by: RecordsBench.batchSize).map { start in
            rows[start..<min(start + RecordsBench.batchSize, rows.count)].map { RecordsBench.record($0, zone: saveZone) }
        }
        log("\(records) records")

        sync()
        let save = try await Clock.measure {
            for batch in batches { _ = try await saveDB.modify(saving: batch, in: saveZone) }
        }
        log(String(format: "save    %.2f s", save.wall))

        // Export to a file, as `coffer record export > file` does.
        let path = folder.appendingPathComponent("export.jsonl").path
        FileManager.default.createFile(atPath: path, contents: nil)
        let out = try FileHandle(forWritingTo: URL(fileURLWithPath: path))
        var exported = 0, bytes = 0
        sync()
        let export = try await Clock.measure {
            exported = try await saveDB.exportRecords(in: saveZone) { data in
                bytes += data.count
                try out.write(contentsOf: data)
            }
            try out.close()
        }
        guard exported == records else { throw ValidationError("exported \(exported) of \(records) records") }
        log(String(format: "export  %.2f s, %d bytes", export.wall, bytes))

        // Query pages as `coffer record query --json` reads and prints them: the query (reading
        // and decoding), then each page written pretty (the CLI's layout) and as JSON lines.
        let schema = try await saveDB.schema(of: "Note", in: saveZone)
        var decode = (wall: 0.0, cpu: 0.0), pretty = (wall: 0.0, cpu: 0.0), jsonLines = (wall: 0.0, cpu: 0.0)
        var queried = 0, prettyBytes = 0
        var writer = JSONWriter(pretty: true, capacity: 1 << 20), lineWriter = JSONWriter(capacity: 1 << 20)
        let sink = FileHandle(forWritingAtPath: "/dev/null")!
        var cursor: QueryCursor?
        sync()
        repeat {
            var page: QueryResult?
            let q = try await Clock.measure {
                page = try await saveDB.query(Query(recordType: "Note", limit: Limits.maxQueryLimit), in: saveZone, cursor: cursor)
            }
            let result = page!
            let p = try await Clock.measure {
                writer.reset()
                try RecordJSON.write(result, schema: schema, userID: nil, into: &writer)
                writer.bytes.append(0x0a)
                sink.write(Data(writer.bytes))
            }
            let l = try await Clock.measure {
                lineWriter.reset()
                for record in result.records {
                    try RecordJSON.write(record, schema: schema, userID: nil, into: &lineWriter)
                    lineWriter.bytes.append(0x0a)
                }
                sink.write(Data(lineWriter.bytes))
            }
            decode = (decode.wall + q.wall, decode.cpu + q.cpu)
            pretty = (pretty.wall + p.wall, pretty.cpu + p.cpu)
            jsonLines = (jsonLines.wall + l.wall, jsonLines.cpu + l.cpu)
            queried += result.records.count
            prettyBytes += writer.bytes.count
            cursor = result.cursor
        } while cursor != nil
        guard queried == records else { throw ValidationError("queried \(queried) of \(records) records") }
        let queryJSON = (wall: decode.wall + pretty.wall, cpu: decode.cpu + pretty.cpu)
        log(String(format: "query   %.2f s + pretty JSON %.2f s (%d bytes), JSON lines %.2f s", decode.wall, pretty.wall, prettyBytes, jsonLines.wall))

        let lines = try Data(contentsOf: URL(fileURLWithPath: path))
        var check = (wall: 0.0, cpu: 0.0), saving = (wall: 0.0, cpu: 0.0)
        var summary: RecordImport.Summary?
        sync()
        let importing = try await Clock.measure {
            var checked: RecordImport?
            check = try await Clock.measure { checked = try await RecordImport(jsonLines: lines, into: importZone, of: importDB) }
            saving = try await Clock.measure { summary = try await checked.take()!.save(to: importDB) }
        }
        guard summary?.records == records else { throw ValidationError("imported \(summary?.records ?? 0) of \(records) records") }
        log(String(format: "import  %.2f s (check %.2f s, save %.2f s)", importing.wall, check.wall, saving.wall))

        func entry(_ m: (wall: Double, cpu: Double)) -> [String: Any] {
            ["recordsPerSecond": (Double(records) / m.wall).rounded(), "seconds": m.wall, "cpuSeconds": m.cpu,
             "microsecondsPerRecord": (m.wall / Double(records) * 1e7).rounded() / 10,
             "cpuMicrosecondsPerRecord": (m.cpu / Double(records) * 1e7).rounded() / 10]
        }
        var importEntry = entry(importing)
        importEntry["checkSeconds"] = check.wall
        let result: [String: Any] = [
            "records": records, "batchSize": RecordsBench.batchSize, "exportBytes": bytes,
            "save": entry(save), "export": entry(export), "import": importEntry,
            "importCheck": entry(check), "importSave": entry(saving),
            "query": entry(decode), "queryPretty": entry(pretty), "queryJSONLines": entry(jsonLines), "queryJSON": entry(queryJSON),
            "importToSaveRatio": (save.wall / importing.wall * 1000).rounded() / 1000,
        ]
        if json {
            Clock.emitJSON(result)
        } else {
            for (phase, label) in [("save", "save"), ("export", "export"), ("query", "query (read, decode)"), ("queryPretty", "  pretty JSON"),
                                   ("queryJSONLines", "  JSON lines"), ("queryJSON", "query + pretty"), ("import", "import"),
                                   ("importCheck", "  check"), ("importSave", "  save")] {
                let e = result[phase] as! [String: Any]
                print(label.padding(toLength: 21, withPad: " ", startingAt: 0)
                      + String(format: "%10.0f records/s  %6.1f µs/record wall  %6.1f µs/record CPU",
                               e["recordsPerSecond"] as! Double, e["microsecondsPerRecord"] as! Double, e["cpuMicrosecondsPerRecord"] as! Double))
            }
            print(String(format: "import/save ratio %.3f (check of the whole file: %.2f s wall, %.2f s CPU)", result["importToSaveRatio"] as! Double, check.wall, check.cpu))
        }
    }

    func log(_ text: String) {
        if !json { FileHandle.standardError.write(Data((text + "\n").utf8)) }
    }
}

import CofferCrypto
import Foundation

/// A file of JSON lines of the `record get` shape, checked whole against a zone and ready to be
/// saved in atomic batches.
///
/// ```swift
/// let data = try Data(contentsOf: URL(fileURLWithPath: "backup.jsonl"))
/// let checked = try await RecordImport(jsonLines: data, into: zone, of: db)   // saves nothing
/// let summary = try await checked.save(to: db)
/// print("\(summary.records) records in \(summary.batches) batches")
/// ```
///
/// Each line needs `name`, `type`, `values` and `encryptedValues`; `parent` and `types` are
/// optional, the other keys of the shape (``RecordJSON/knownKeys``) are ignored, and any other
/// key is refused. JSON numbers, strings, booleans and lists map to int or double, string, bool
/// and list, unless `types` or the zone's schema gives the field's type (a date as an ISO 8601
/// string or seconds since 1970, bytes as canonical base64, a ref as a name).
///
/// The whole file is checked before anything is saved: JSON (strict, no key twice in an
/// object), each record (names, values, sizes), field types agreeing with the zone's schema and
/// with earlier lines, a new empty list declared in `types`, a record that exists keeping its
/// type, each parent in the file or the zone, no cycle of parents. Records are then ordered
/// parents first and saved in atomic batches of at most 400 records, under the batch size limit.
/// Records that exist are replaced.
///
/// Errors are ``StoreError``s whose message names the line (`line 3: …; nothing was imported`);
/// an encrypted field's value is never quoted.
public struct RecordImport: Sendable {
    /// The zone the records go to.
    public let zone: ZoneID
    /// The checked records, each after its parent when the parent is in the file.
    public var records: [Record] { (0..<count).map { record(at: $0) } }
    /// The number of checked records (left to save, after ``skipStored(in:)``).
    public private(set) var count: Int
    /// The records in file order as the parallel check left them (each chunk of `chunkSize`
    /// lines, with each record checked and encoded as its save needs it, so the save, on one
    /// thread, does not do it again): kept in place, not copied into one array.
    let chunks: [Chunk]
    let chunkSize: Int
    /// The save order, by index in file order: nil when it is the file's order.
    private(set) var order: [Int]?
    /// Empty lists of fields the zone does not know yet, each fixed with the batch of the
    /// first record (by index in ``records``) that has it, so a refused batch fixes nothing.
    private(set) var newEmptyLists: [(record: Int, declaration: FieldDeclaration)]
    /// The fields the file fixes that the zone's schema did not have when it was checked, by
    /// record type (a type with none there is new).
    public let newFields: [String: [String: FieldSchema]]

    /// The outcome of a save.
    public struct Summary: Sendable, Hashable {
        /// Records saved.
        public let records: Int
        /// Batches saved.
        public let batches: Int
        /// The records the save had to save.
        public let total: Int
        /// Whether the save stopped before the end, when asked to (see ``save(to:progress:stopping:)``).
        public let stopped: Bool

        /// `total`: the records of the whole import, `records` when it ran to the end.
        init(records: Int, batches: Int, total: Int? = nil, stopped: Bool = false) {
            self.records = records
            self.batches = batches
            self.total = total ?? records
            self.stopped = stopped
        }
    }

    /// Parses and checks every line of `jsonLines` (UTF-8, one JSON object per line; blank lines
    /// are skipped) against the zone, without saving anything.
    ///
    /// ```swift
    /// let checked = try await RecordImport(jsonLines: Data(line.utf8), into: zone, of: db)
    /// ```
    /// - Throws: `.invalidArguments` for a line that is not a valid record (the message names the
    ///   line), `.unknownItem` for a parent neither in the file nor in the zone, the store's
    ///   errors for a record that would not save, `.zoneNotFound`.
    public init(jsonLines: Data, into zone: ZoneID, of database: RecordDatabase) async throws {
        self.zone = zone
        let lines: [(number: Int, range: Range<Int>)] = jsonLines.withUnsafeBytes { Self.lines($0) }
        // Each line is read, typed and checked on its own, in parallel chunks; then, in file
        // order, each line's outcome is taken with the checks that depend on earlier lines.
        var (parsed, schemas, chunkSize) = try await Self.parseInChunks(lines, of: jsonLines, zone: zone, database: database)
        var chunks = [Chunk]()
        var count = 0
        var names = Set<String>()
        // Field types as the zone's schema and the file so far fix them: a line that disagrees
        // is refused before any save.
        var kinds = schemas
        var newEmptyLists = [(record: Int, declaration: FieldDeclaration)]()
        var lineNumbers = [Int]()
        // Each record's name, parent and type in file order (read in place: a record copied
        // out of its chunk retains and releases every field).
        var fileNames = [String](), parents = [String?](), types = [String]()
        lineNumbers.reserveCapacity(lines.count)
        fileNames.reserveCapacity(lines.count)
        parents.reserveCapacity(lines.count)
        types.reserveCapacity(lines.count)
        names.reserveCapacity(lines.count)
        for n in parsed.indices {
            // Taken out of `parsed`, so that its arrays are moved, not copied.
            guard let chunk = parsed[n].take() else { continue }
            // The chunk's own agreement of field types stands when what it fixed agrees with
            // what the lines before it fixed; otherwise each of its lines is agreed again here.
            let agreed = chunk.agrees(after: kinds)
            if agreed {
                for (type, fields) in chunk.fixed {
                    for (key, field) in fields where kinds[type]?[key] == nil { kinds[type, default: [:]][key] = field }
                }
                newEmptyLists += chunk.newEmptyLists.map { (count + $0.record, $0.declaration) }
            }
            for i in chunk.records.indices {
                do {
                    guard names.insert(chunk.records[i].name).inserted else {
                        throw Self.dataError("record '\(chunk.records[i].name)' appears twice")
                    }
                    if !agreed {
                        try Self.agree(chunk.records[i], declared: chunk.declared[i], kinds: &kinds[chunk.records[i].recordType, default: [:]]) { declaration in
                            newEmptyLists.append((count + i, declaration))
                        }
                    }
                    lineNumbers.append(chunk.numbers[i])
                    fileNames.append(chunk.records[i].name)
                    parents.append(chunk.records[i].parent)
                    types.append(chunk.records[i].recordType)
                } catch let e as StoreError {
                    throw StoreError(e.code, "line \(chunk.numbers[i]): \(e.message); nothing was imported")
                }
            }
            count += chunk.records.count
            chunks.append(chunk)
            // A chunk stops at its first refused line.
            if let (number, e) = chunk.failure {
                throw StoreError(e.code, "line \(number): \(e.message); nothing was imported")
            }
        }

        try await Self.checkAgainstZone(zone, of: database, chunks: chunks, names: names, fileNames: fileNames, parents: parents,
                                        types: types, lineNumbers: lineNumbers)
        // Parents are saved before their children (a batch's parents must exist): records in
        // order of their depth below the file's roots, the file's order otherwise kept.
        let order = try Self.parentsFirst(names: fileNames, parents: parents, lineNumbers: lineNumbers)
        var position = [Int](repeating: 0, count: count)
        for (new, old) in order.enumerated() { position[old] = new }
        self.chunks = chunks
        self.chunkSize = chunkSize
        self.count = count
        self.order = order.elementsEqual(0..<count) ? nil : order
        self.newEmptyLists = newEmptyLists.map { (position[$0.record], $0.declaration) }
        newFields = kinds.compactMapValues { fields in fields.isEmpty ? nil : fields }.reduce(into: [:]) { new, type in
            let added = type.value.filter { schemas[type.key]?[$0.key] == nil }
            if !added.isEmpty { new[type.key] = added }
        }
    }

    /// Reads, types and checks each line on its own, in chunks parsed in parallel; returns the
    /// chunks in file order, the zone's schemas they fetched, and the chunk size.
    private static func parseInChunks(_ lines: [(number: Int, range: Range<Int>)], of jsonLines: Data, zone: ZoneID,
                                      database: RecordDatabase) async throws -> ([Chunk?], [String: [String: FieldSchema]], Int) {
        let chunkSize = max(2_000, (lines.count + ProcessInfo.processInfo.activeProcessorCount - 1) / max(1, ProcessInfo.processInfo.activeProcessorCount))
        let starts = Array(stride(from: 0, to: lines.count, by: chunkSize))
        var parsed = [Chunk?](repeating: nil, count: starts.count)
        var schemas = [String: [String: FieldSchema]]()
        try await withThrowingTaskGroup(of: (Int, Chunk, [String: [String: FieldSchema]]).self) { group in
            for (n, start) in starts.enumerated() {
                let part = lines[start..<min(start + chunkSize, lines.count)]
                group.addTask {
                    let (result, fetched) = try await Self.parse(part, of: jsonLines, zone: zone, database: database)
                    return (n, result, fetched)
                }
            }
            for try await (n, result, fetched) in group {
                parsed[n] = result
                schemas.merge(fetched) { a, _ in a }
            }
        }
        return (parsed, schemas, chunkSize)
    }

    /// A record that exists keeps its type, and a parent is in the file or in the zone: checked
    /// against the zone before any save.
    private static func checkAgainstZone(_ zone: ZoneID, of database: RecordDatabase, chunks: [Chunk], names: Set<String>,
                                         fileNames: [String], parents: [String?], types: [String], lineNumbers: [Int]) async throws {
        var existing = [String: String]()
        for chunk in chunks { existing.merge(chunk.existing) { a, _ in a } }
        let outside = Set(parents.compactMap { $0 }).subtracting(names)
        if !outside.isEmpty {
            existing.merge(try await database.recordTypes(named: outside.sorted(), in: zone)) { a, _ in a }
        }
        for i in fileNames.indices {
            if let type = existing[fileNames[i]], type != types[i] {
                throw StoreError(.invalidArguments, "line \(lineNumbers[i]): record '\(fileNames[i])' exists as type \(type); its type cannot change to \(types[i]) (delete it first); nothing was imported")
            }
            if let parent = parents[i], !names.contains(parent), existing[parent] == nil {
                throw StoreError(.unknownItem, "line \(lineNumbers[i]): parent '\(parent)' of record '\(fileNames[i])' is neither in the file nor in zone \(zone.name); nothing was imported")
            }
        }
    }

    /// The chunk and the place in it of the record saved `i`th.
    func location(_ i: Int) -> (chunk: Int, index: Int) {
        let inFile = order?[i] ?? i
        return (inFile / chunkSize, inFile % chunkSize)
    }

    /// The record saved `i`th.
    func record(at i: Int) -> Record {
        let (c, k) = location(i)
        return chunks[c].records[k]
    }

    /// Leaves out of the save every record that the zone holds already exactly as the file
    /// has it: same name, type and parent, and the same plain and encrypted fields (names,
    /// types and values). What an import stopped part way (or a save that failed after some
    /// batches) left to do is then what is saved: records saved before keep their change tags,
    /// and a record changed since, or saved only in part, is saved again.
    ///
    /// ```swift
    /// var checked = try await RecordImport(jsonLines: data, into: zone, of: db)
    /// let skipped = try await checked.skipStored(in: db)
    /// ```
    /// - Returns: the number of records left out.
    /// - Throws: the store's errors for reading the zone's records (a record that fails
    ///   verification is not left out: it is saved again).
    @discardableResult
    public mutating func skipStored(in database: RecordDatabase) async throws -> Int {
        var existing = Set<String>()
        for chunk in chunks { existing.formUnion(chunk.existing.keys) }
        guard !existing.isEmpty else { return 0 }
        var positions = [String: Int]()
        for i in 0..<count {
            let (c, k) = location(i)
            let name = chunks[c].records[k].name
            if existing.contains(name) { positions[name] = i }
        }
        var skipped = Set<Int>()
        let names = positions.keys.sorted()
        for start in stride(from: 0, to: names.count, by: Limits.maxBatchRecords) {
            let page = Array(names[start..<min(start + Limits.maxBatchRecords, names.count)])
            let stored = try await database.records(named: page, in: zone)
            for name in page {
                guard case .success(let record)? = stored[name], let i = positions[name] else { continue }
                let (c, k) = location(i)
                let line = chunks[c].records[k]
                if record.recordType == line.recordType, record.parent == line.parent, record.values == line.values,
                   record.encryptedValues == line.encryptedValues {
                    skipped.insert(i)
                }
            }
        }
        guard !skipped.isEmpty else { return 0 }
        var kept = [Int](), newPosition = [Int](repeating: 0, count: count)
        kept.reserveCapacity(count - skipped.count)
        for i in 0..<count {
            newPosition[i] = kept.count
            if !skipped.contains(i) { kept.append(order?[i] ?? i) }
        }
        // A declaration goes with the first record kept at or after the one it went with
        // (declaring a field that is fixed already changes nothing); past the last, it is dropped.
        newEmptyLists = newEmptyLists.compactMap { item in
            newPosition[item.record] < kept.count ? (newPosition[item.record], item.declaration) : nil
        }
        order = kept
        count = kept.count
        return skipped.count
    }

    /// Saves the records in atomic batches: at most 400 records and well under the batch size
    /// limit each, parents before children. `progress` is told the records saved so far and the
    /// total after each batch.
    ///
    /// While a batch is written, a child task seals and hashes the next ones (at most two
    /// ahead), under the zone's key and for the log entry expected when the save begins: a batch
    /// whose transaction finds another entry hashes its records again, and one that finds another
    /// key epoch (a re-key in between) seals them again. The batch before is freed meanwhile, so
    /// the work overlaps on two cores. The checked records are consumed as they are saved.
    ///
    /// `stopping` is asked before each batch: once it says true, the save stops there, between
    /// two atomic batches, and its summary says so (``Summary/stopped``): what it saved is whole
    /// batches, and the rest can be saved later (see ``skipStored(in:)``).
    ///
    /// ```swift
    /// let summary = try await checked.save(to: db) { done, total in print("\(done)/\(total)") }
    /// ```
    /// - Throws: the first failing batch's error (for a partial failure, the code of one of its
    ///   records), with a message that says how many records earlier batches saved.
    @discardableResult
    public consuming func save(to database: RecordDatabase, progress: ((_ saved: Int, _ total: Int) -> Void)? = nil,
                               stopping: (@Sendable () -> Bool)? = nil) async throws -> Summary {
        let plan = batchPlan()
        let zone = self.zone, total = count
        guard !plan.isEmpty else { return Summary(records: 0, batches: 0, total: 0) }
        if stopping?() == true { return Summary(records: 0, batches: 0, total: total, stopped: true) }
        let sealing = try await database.session.writer.sealingKey(for: zone)
        // The records, handed whole to the task that seals them, which moves each into its batch.
        let handoff = Handoff(Source(chunks: chunks, order: order, chunkSize: chunkSize))
        self = RecordImport(zone: zone)
        // Sealed batches, and the leave to seal one more (at most `ahead` wait to be written).
        let (sealed, sealedInput) = AsyncStream<Batch>.makeStream()
        let (leave, leaveInput) = AsyncStream<Void>.makeStream()
        let ahead = 2
        return try await withThrowingTaskGroup(of: Void.self) { group in
            group.addTask {
                guard var source = handoff.take() else { return }
                var leaves = leave.makeAsyncIterator()
                // Batch n is expected to write log entry head + 1 + n (if another write comes
                // first, its transaction hashes the records again).
                for n in plan.indices {
                    guard await leaves.next() != nil else { break }
                    sealedInput.yield(source.take(plan[n], sealing: sealing, seq: sealing.headSeq + 1 + Int64(n)))
                }
                sealedInput.finish()
            }
            defer { leaveInput.finish() }
            for _ in 0..<ahead { leaveInput.yield() }
            var batches = sealed.makeAsyncIterator()
            var imported = 0
            var previous: Batch?
            for n in plan.indices {
                if n > 0, stopping?() == true { return Summary(records: imported, batches: n, total: total, stopped: true) }
                guard let batch = await batches.next() else { throw CancellationError() }
                async let written = database.modify(saving: batch.records, prepared: batch.prepared, in: zone, policy: .allKeys,
                                                    declaring: batch.declarations, time: batch.time)
                // While it is written: the batch before is freed, and the next one sealed.
                previous?.release()
                leaveInput.yield()
                do {
                    _ = try await written
                } catch let e as StoreError {
                    let detail = e.partialErrors.isEmpty ? e.message : e.partialErrors.sorted { $0.key < $1.key }.prefix(3).map { "\($0.key): \($0.value.message)" }.joined(separator: "; ")
                    throw StoreError(e.code == .partialFailure ? (e.partialErrors.values.first?.code ?? e.code) : e.code,
                                     "\(detail) (\(imported) records in \(n) batches were imported before this batch; batches are atomic)",
                                     underlying: e)
                }
                previous = batch
                imported += batch.records.count
                progress?(imported, total)
            }
            return Summary(records: imported, batches: plan.count, total: total)
        }
    }

    /// The checked records on their way to the task that seals them.
    final class Handoff: Sendable {
        private let source: Locked<Source?>
        init(_ source: Source) { self.source = Locked(source) }
        /// The records, once (then nil): moved out, so that the taker holds the only reference.
        func take() -> Source? { source.withLock { $0.take() } }
    }

    /// An empty import into `zone`, what a consumed one leaves.
    private init(zone: ZoneID) {
        self.zone = zone
        chunks = []
        chunkSize = 1
        count = 0
        order = nil
        newEmptyLists = []
        newFields = [:]
    }

    /// The batches of the save, in order: each a range of save positions (at most 400 records
    /// and three quarters of the batch size limit by ``estimatedSize(_:)``) and the empty lists
    /// its records are the first to use.
    func batchPlan() -> [(range: Range<Int>, declarations: [FieldDeclaration])] {
        var plan = [(range: Range<Int>, declarations: [FieldDeclaration])]()
        var start = 0, declarationIndex = 0
        while start < count {
            var end = start, bytes = 0
            while end < count, end - start < Limits.maxBatchRecords {
                let (c, k) = location(end)
                let size = chunks[c].sizes[k]
                if end > start && bytes + size > Limits.maxBatchBytes * 3 / 4 { break }
                bytes += size
                end += 1
            }
            var declarations = [FieldDeclaration]()
            while declarationIndex < newEmptyLists.count, newEmptyLists[declarationIndex].record < end {
                declarations.append(newEmptyLists[declarationIndex].declaration)
                declarationIndex += 1
            }
            plan.append((start..<end, declarations))
            start = end
        }
        return plan
    }

    /// One batch of the save: its records moved out of the checked chunks, prepared, sealed
    /// and hashed at `time`.
    struct Batch: Sendable {
        var records: [Record]
        var prepared: [PreparedRecord]
        var declarations: [FieldDeclaration]
        let time: Double

        /// Frees the records (here, and not where the next batch is written).
        mutating func release() {
            records = []
            prepared = []
        }
    }

    /// The checked records as the save takes them: each moved out of its chunk (swapped with an
    /// empty record), not copied.
    struct Source: Sendable {
        var chunks: [Chunk]
        let order: [Int]?
        let chunkSize: Int

        /// The records of `part`, sealed and hashed for log entry `seq`, now.
        mutating func take(_ part: (range: Range<Int>, declarations: [FieldDeclaration]), sealing: SealingKey, seq: Int64) -> Batch {
            var batch = Batch(records: [], prepared: [], declarations: part.declarations, time: Date().timeIntervalSince1970)
            batch.records.reserveCapacity(part.range.count)
            batch.prepared.reserveCapacity(part.range.count)
            let nonces = NonceReserve(chunk: min(64, part.range.count))
            for i in part.range {
                let inFile = order?[i] ?? i
                let (c, k) = (inFile / chunkSize, inFile % chunkSize)
                var record = Record(type: "", name: "", zone: ZoneID(name: "", ownerID: ""), parent: nil, values: [:], encryptedValues: [:])
                swap(&record, &chunks[c].records[k])
                var prepared = PreparedRecord(plain: [], plainTypes: [], sealedPlaintext: nil, expectedSeq: nil)
                swap(&prepared, &chunks[c].prepared[k])
                sealing.preseal(&prepared, of: record, seq: seq, time: batch.time, nonces: nonces)
                batch.records.append(record)
                batch.prepared.append(prepared)
            }
            return batch
        }
    }

    // MARK: Lines

    /// Consecutive lines' records, each with its line number, the types its `types` declares
    /// and its prepared form, up to the first line refused (and why).
    struct Chunk: Sendable {
        var records = [Record]()
        var numbers = [Int]()
        var declared = [[String: FieldType]]()
        var prepared = [PreparedRecord]()
        /// ``RecordImport/estimatedSize(_:)`` of each record.
        var sizes = [Int]()
        var failure: (number: Int, error: StoreError)?
        /// The type of each record of the chunk that the zone holds already.
        var existing = [String: String]()
        /// Whether every line agreed on field types with the zone's schema and the chunk's
        /// earlier lines (``agree(_:declared:kinds:newEmptyList:)`` in the chunk alone).
        var agreed = true
        /// The fields the chunk's lines fixed that the zone's schema does not have, by type.
        var fixed = [String: [String: FieldSchema]]()
        /// The new empty lists the chunk declared, by index in the chunk.
        var newEmptyLists = [(record: Int, declaration: FieldDeclaration)]()

        /// Whether the chunk's own agreement holds after lines before it fixed `kinds`: it
        /// agreed, and each field it fixed is new there or fixed alike. (An empty list it
        /// declared of a field fixed alike before is then declared again, which changes nothing.)
        func agrees(after kinds: [String: [String: FieldSchema]]) -> Bool {
            agreed && fixed.allSatisfy { type, fields in
                fields.allSatisfy { key, field in kinds[type]?[key].map { $0 == field } ?? true }
            }
        }
    }

    /// Reads and checks `lines` of `data` each on its own (as JSON, as a record, against the
    /// zone's schema of its type, fetched as needed and returned), up to the first refused, and
    /// reads which of their records the zone holds.
    static func parse(_ lines: ArraySlice<(number: Int, range: Range<Int>)>, of data: Data, zone: ZoneID,
                      database: RecordDatabase) async throws -> (Chunk, [String: [String: FieldSchema]]) {
        var schemas = [String: [String: FieldSchema]]()
        var kinds = [String: [String: FieldSchema]]()
        var chunk = Chunk()
        chunk.records.reserveCapacity(lines.count)
        chunk.numbers.reserveCapacity(lines.count)
        chunk.declared.reserveCapacity(lines.count)
        chunk.prepared.reserveCapacity(lines.count)
        chunk.sizes.reserveCapacity(lines.count)
        for (number, range) in lines {
            do {
                let object = try data.withUnsafeBytes { raw in
                    try Self.object(UnsafeBufferPointer(rebasing: raw.bindMemory(to: UInt8.self)[range]))
                }
                guard case .string(let type) = object["type"] else { throw Self.dataError("'name' and 'type' must be strings") }
                if schemas[type] == nil {
                    schemas[type] = (try? await database.schema(of: type, in: zone)) ?? [:]
                }
                let (record, declared, prepared) = try Self.record(object, zone: zone, schema: schemas[type]!)
                if chunk.agreed {
                    // Field types agreed within the chunk, from the zone's schema on.
                    do {
                        let index = chunk.records.count
                        try Self.agree(record, declared: declared, kinds: &kinds[type, default: schemas[type]!]) { declaration in
                            chunk.newEmptyLists.append((index, declaration))
                        }
                    } catch {
                        chunk.agreed = false
                    }
                }
                chunk.records.append(record)
                chunk.numbers.append(number)
                chunk.declared.append(declared)
                chunk.prepared.append(prepared)
                chunk.sizes.append(estimatedSize(record))
            } catch let e as StoreError {
                chunk.failure = (number, e)
                break
            }
        }
        for (type, fields) in kinds {
            for (key, field) in fields where schemas[type]?[key] == nil { chunk.fixed[type, default: [:]][key] = field }
        }
        // Which of the chunk's records the zone holds, read here, in parallel with the other chunks.
        chunk.existing = try await database.recordTypes(named: chunk.records.map(\.name), in: zone)
        return (chunk, schemas)
    }

    /// The non-blank lines of `data` (split at LF), with their 1-based numbers.
    static func lines(_ data: UnsafeRawBufferPointer) -> [(number: Int, range: Range<Int>)] {
        var lines = [(number: Int, range: Range<Int>)]()
        var start = 0, number = 1
        let bytes = data.bindMemory(to: UInt8.self)
        while start <= bytes.count {
            // The next LF by `memchr`, which reads a word at a time.
            let end = start == bytes.count ? start
                : memchr(bytes.baseAddress! + start, 0x0a, bytes.count - start).map { bytes.baseAddress!.distance(to: $0.assumingMemoryBound(to: UInt8.self)) } ?? bytes.count
            var k = start
            while k < end, bytes[k] == 0x20 || bytes[k] == 0x09 || bytes[k] == 0x0d { k += 1 }
            if k < end { lines.append((number, start..<end)) }
            start = end + 1
            number += 1
        }
        return lines
    }

    static func dataError(_ message: String) -> StoreError { StoreError(.invalidArguments, message) }

    /// One line as a JSON object with only known keys.
    static func object(_ line: UnsafeBufferPointer<UInt8>) throws -> JSONObject {
        let parsed: JSONValue
        var duplicate: String?
        do {
            parsed = try JSONReader.parse(line, firstDuplicateKey: &duplicate)
        } catch {
            throw dataError("not valid JSON (or a number beyond a double's range)")
        }
        guard case .object(let object) = parsed else { throw dataError("not a JSON object") }
        if let duplicate { throw dataError("the key '\(duplicate)' appears twice in one object") }
        var unknown: String?
        for member in object.members where !RecordJSON.isKnownKey(member.key) {
            if unknown.map({ member.key < $0 }) ?? true { unknown = member.key }
        }
        if let unknown { throw dataError("unknown key '\(unknown)'") }
        return object
    }

    /// The record a line's object describes, the types its `types` declares, and the record
    /// checked and encoded for its save (``Record/validate()`` and the encoding, in one pass).
    static func record(_ object: JSONObject, zone: ZoneID, schema: [String: FieldSchema]) throws -> (Record, [String: FieldType], PreparedRecord) {
        guard case .string(let name) = object["name"], case .string(let type) = object["type"] else {
            throw dataError("'name' and 'type' must be strings")
        }
        guard case .object(let values) = object["values"], case .object(let encrypted) = object["encryptedValues"] else {
            throw dataError("'values' and 'encryptedValues' must be objects")
        }
        var declared = [String: FieldType]()
        if let types = object["types"] {
            guard case .object(let types) = types else { throw dataError("'types' must map fields to type names") }
            declared.reserveCapacity(types.count)
            for (field, typeName) in types.members {
                guard case .string(let typeName) = typeName else { throw dataError("'types' must map fields to type names") }
                guard let t = FieldType(name: typeName) else { throw dataError("unknown type '\(typeName)' for '\(field)'") }
                declared[field] = t
            }
        }
        var record = Record(type: type, name: name, zone: zone)
        record.values.reserveCapacity(values.count)
        record.encryptedValues.reserveCapacity(encrypted.count)
        switch object["parent"] {
        case nil, .null?: break
        case .string(let p)?: record.parent = p
        default: throw dataError("'parent' must be a string")
        }
        for (key, raw) in values.members {
            record.values[key] = try RecordValue(json: raw, key: key, type: declared[key] ?? schema[key]?.type)
        }
        for (key, raw) in encrypted.members {
            record.encryptedValues[key] = try RecordValue(json: raw, key: key, type: declared[key] ?? schema[key]?.type, encrypted: true)
        }
        let prepared = try RecordWriter.prepare(record, zone: zone)
        return (record, declared, prepared)
    }

    /// Checks each field of `record` against `kinds` (its type's fields as the zone and earlier
    /// lines fix them) and adds the fields it is the first to use; `newEmptyList` gets the
    /// declaration of each new empty list.
    static func agree(_ record: Record, declared: [String: FieldType], kinds: inout [String: FieldSchema],
                      newEmptyList: (FieldDeclaration) -> Void) throws {
        func agree(_ fields: [String: RecordValue], encrypted: Bool) throws {
            for (key, value) in fields {
                let type: FieldType
                var isEmptyList = false
                if case .list(let items) = value, items.isEmpty {
                    isEmptyList = true
                    type = kinds[key]?.type ?? declared[key] ?? value.fieldType
                } else {
                    type = value.fieldType
                }
                if let known = kinds[key] {
                    guard known.encrypted == encrypted else {
                        throw dataError("field '\(key)' of \(record.recordType) is \(known.encrypted ? "encrypted" : "plain") (fixed by the zone or an earlier line), not \(encrypted ? "encrypted" : "plain")")
                    }
                    guard known.type == type else {
                        throw dataError("field '\(key)' of \(record.recordType) has type \(known.type) (fixed by the zone or an earlier line), not \(type)")
                    }
                } else {
                    if isEmptyList {
                        guard declared[key] != nil else {
                            throw dataError("field '\(key)' is a new empty list; give its type in 'types' (for example \"[int]\")")
                        }
                        newEmptyList(FieldDeclaration(key, of: record.recordType, type: type, encrypted: encrypted))
                    }
                    kinds[key] = FieldSchema(type: type, encrypted: encrypted)
                }
            }
        }
        try agree(record.values, encrypted: false)
        try agree(record.encryptedValues, encrypted: true)
    }

    /// Indexes of `records` with every record after its parent (when the parent is in the
    /// file too): by depth, then file order. A cycle of parents in the file is refused.
    static func parentsFirst(names: [String], parents: [String?], lineNumbers: [Int]) throws -> [Int] {
        // No parents: the file's order.
        guard parents.contains(where: { $0 != nil }) else { return Array(names.indices) }
        var index = [String: Int](minimumCapacity: names.count)
        for (i, name) in names.enumerated() { index[name] = i }
        var depth = [Int?](repeating: nil, count: names.count)
        for start in names.indices where depth[start] == nil {
            var chain = [start], onChain: Set<Int> = [start]
            // Walk up to a record of known depth, or to one whose parent is not in the file.
            while let parent = parents[chain.last!], let up = index[parent], depth[up] == nil {
                guard onChain.insert(up).inserted else {
                    throw StoreError(.invalidArguments, "line \(lineNumbers[up]): record '\(names[up])' is its own ancestor through its parents in the file; nothing was imported")
                }
                chain.append(up)
            }
            var d = parents[chain.last!].flatMap { index[$0] }.flatMap { depth[$0] }.map { $0 + 1 } ?? 0
            for i in chain.reversed() {
                depth[i] = d
                d += 1
            }
        }
        return names.indices.sorted { (depth[$0]!, $0) < (depth[$1]!, $1) }
    }

    /// A generous estimate of a record's share of a batch, to keep batches under the limit.
    static func estimatedSize(_ record: Record) -> Int {
        func size(_ v: RecordValue) -> Int {
            switch v {
            case .string(let s), .reference(let s): return s.utf8.count + 8
            case .bytes(let b): return b.count * 4 / 3 + 8
            case .list(let items): return items.reduce(8) { $0 + size($1) }
            default: return 24
            }
        }
        var total = 128
        for v in record.values.values { total += size(v) }
        for v in record.encryptedValues.values { total += size(v) }
        return total
    }
}

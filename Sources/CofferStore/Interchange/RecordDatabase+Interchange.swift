import Foundation

extension RecordDatabase {
    /// Writes every record of a zone as JSON lines of the `record get` shape (see ``RecordJSON``),
    /// decrypted, page by page: `write` gets each page's lines, and no more than a page is held.
    ///
    /// ```swift
    /// let out = FileHandle(forWritingAtPath: "backup.jsonl")!
    /// let count = try await db.exportRecords(in: zone) { try out.write(contentsOf: $0) }
    /// ```
    /// The output holds the decrypted secrets: keep it as safe as the vault.
    /// - Parameters:
    ///   - zone: the zone to export.
    ///   - pageSize: records read and written at a time.
    ///   - refused: changes a replica kept because the server refused them
    ///     (``Replica/refusedChanges()``): each is written in place of the record of its name,
    ///     or where its name falls, flagged `"refused": true` with `refusedWhy`; a refused
    ///     deletion writes nothing of its own (the record stays as the server holds it).
    ///   - write: called with each page's lines.
    /// - Returns: the number of records written.
    /// - Throws: `.zoneNotFound`, `.permissionFailure`, `.integrityFailure` for a record that
    ///   fails authentication, and what `write` throws.
    @discardableResult
    public func exportRecords(in zone: ZoneID, pageSize: Int = 400, refused: [PendingChanges.Kept] = [],
                              to write: (Data) throws -> Void) async throws -> Int {
        var after: String?
        var count = 0
        var schemas = [String: [String: FieldSchema]]()
        var writer = JSONWriter(capacity: pageSize * 1536)
        let userID = session.userID
        // The refused versions, merged into the pages' name order.
        var waiting = PendingChanges.Kept.exportOrder(refused, in: zone)[...]
        let replaced = Set(waiting.map(\.name))
        /// Writes the refused versions whose names come up to `name` (all, for nil).
        func writeRefused(upTo name: String?) async throws {
            while let next = waiting.first, let local = next.local, name.map({ !Array($0.utf8).lexicographicallyPrecedes(Array(next.name.utf8)) }) ?? true {
                if schemas[local.recordType] == nil {
                    schemas[local.recordType] = (try? await schema(of: local.recordType, in: zone)) ?? [:]
                }
                try RecordJSON.write(local, schema: schemas[local.recordType], userID: userID, refused: next.note, into: &writer)
                writer.bytes.append(0x0a)
                count += 1
                waiting = waiting.dropFirst()
            }
        }
        while true {
            let page = try await records(in: zone, after: after, limit: pageSize)
            guard let last = page.last else { break }
            writer.reset()
            for record in page {
                try await writeRefused(upTo: record.name)
                // A record with a refused version: that version was written in its place.
                if replaced.contains(record.name) { continue }
                if schemas[record.recordType] == nil {
                    schemas[record.recordType] = try await schema(of: record.recordType, in: zone)
                }
                try RecordJSON.write(record, schema: schemas[record.recordType], userID: userID, into: &writer)
                writer.bytes.append(0x0a)
                count += 1
            }
            try write(Data(writer.bytes))
            after = last.name
        }
        writer.reset()
        try await writeRefused(upTo: nil)
        if !writer.bytes.isEmpty { try write(Data(writer.bytes)) }
        return count
    }

    /// Writes, as ``exportRecords(in:pageSize:refused:to:)`` writes them, only the refused
    /// changes of `zone`: for a zone gone from the replica (deleted upstream, or the user removed),
    /// whose refused changes are all there is left of it.
    /// - Returns: the number of records written.
    @discardableResult
    public func exportRefused(_ refused: [PendingChanges.Kept], in zone: ZoneID, to write: (Data) throws -> Void) throws -> Int {
        var writer = JSONWriter()
        let changes = PendingChanges.Kept.exportOrder(refused, in: zone)
        for change in changes {
            guard let local = change.local else { continue }
            try RecordJSON.write(local, schema: nil, userID: session.userID, refused: change.note, into: &writer)
            writer.bytes.append(0x0a)
        }
        if !writer.bytes.isEmpty { try write(Data(writer.bytes)) }
        return changes.count
    }

    /// Checks JSON lines of the `record get` shape against a zone, then saves them in atomic
    /// batches (see ``RecordImport``): a file that fails a check saves nothing.
    ///
    /// ```swift
    /// let summary = try await db.importRecords(jsonLines: data, into: zone)
    /// ```
    /// - Throws: as ``RecordImport/init(jsonLines:into:of:)`` and ``RecordImport/save(to:progress:stopping:)``.
    @discardableResult
    public func importRecords(jsonLines: Data, into zone: ZoneID,
                              progress: ((_ saved: Int, _ total: Int) -> Void)? = nil) async throws -> RecordImport.Summary {
        try await RecordImport(jsonLines: jsonLines, into: zone, of: self).save(to: self, progress: progress)
    }
}

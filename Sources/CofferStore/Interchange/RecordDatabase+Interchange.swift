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
    ///   - write: called with each page's lines.
    /// - Returns: the number of records written.
    /// - Throws: `.zoneNotFound`, `.permissionFailure`, `.integrityFailure` for a record that
    ///   fails authentication, and what `write` throws.
    @discardableResult
    public func exportRecords(in zone: ZoneID, pageSize: Int = 400, to write: (Data) throws -> Void) async throws -> Int {
        var after: String?
        var count = 0
        var schemas = [String: [String: FieldSchema]]()
        var writer = JSONWriter(capacity: pageSize * 1536)
        let userID = session.userID
        while true {
            let page = try await records(in: zone, after: after, limit: pageSize)
            guard let last = page.last else { break }
            writer.reset()
            for record in page {
                if schemas[record.recordType] == nil {
                    schemas[record.recordType] = try await schema(of: record.recordType, in: zone)
                }
                try RecordJSON.write(record, schema: schemas[record.recordType], userID: userID, into: &writer)
                writer.bytes.append(0x0a)
            }
            try write(Data(writer.bytes))
            count += page.count
            after = last.name
        }
        return count
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

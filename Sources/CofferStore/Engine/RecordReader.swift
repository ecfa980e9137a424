import CofferCrypto
import CofferVault
import Foundation

/// Reads records: fetches their rows, decodes them, checks each against the verified commit
/// that wrote it, and opens the sealed values with the zone key of its epoch.
struct RecordReader: Sendable {
    /// The store read, and what it knows of its indexes.
    let store: Store
    /// The zone keys that open sealed values.
    let keyRing: KeyRing
    /// The zones' logs, with the verified commits each row is checked against.
    let verifiedLogs: VerifiedLogs
    /// Who may read a zone.
    let accessControl: AccessControl
    /// The schemas that type each row's plain values.
    let schemaRegistry: SchemaRegistry
    /// The contexts of rows kept between reads (``Session/rowContexts``).
    let rowContexts: RowContexts
    /// Decode workers kept between reads (``Session/decodeWorkers``).
    let decodeWorkers: Locked<[DecodeWorker]>
}

extension RecordReader {
    /// The record named `name`, or nil.
    func fetchRow(_ db: any StorageTransaction, zone: ZoneRow, name: String) throws -> Record? {
        try db.recordRow(zoneRowID: zone.rowID, name: name).map { try decodeOne(db, zone: zone, row: $0) }
    }

    /// Checks and opens one stored row on this thread.
    /// With `log`, the row is checked against that log (audit's own walk) instead of the
    /// session's.
    func decodeOne(_ db: any StorageTransaction, zone: ZoneRow, row: StoredRow, log: ZoneLog? = nil) throws -> Record {
        func context() throws -> RowContext {
            try self.context(db, zone: zone, row: row, log: log).mapError { Self.rowError($0, row: row, zone: zone) }.get()
        }
        switch Self.decode(row, context: try context(), zone: zone) {
        case .record(let record): return record
        case .failed(let error): throw error
        case .staleSchema:
            // Another process may have added fields since this session cached the schema.
            _ = try schemaRegistry.schema(db, zoneRowID: zone.rowID, recordType: row.type, fresh: true)
            switch Self.decode(row, context: try context(), zone: zone, final: true) {
            case .record(let record): return record
            case .failed(let error): throw error
            case .staleSchema: throw StoreError(.internalError, "record '\(row.name)' could not be decoded")
            }
        }
    }

    static func withOptionalBytes<R>(_ data: Data?, _ body: (UnsafeRawBufferPointer?) throws -> R) rethrows -> R {
        guard let data else { return try body(nil) }
        return try data.withUnsafeBytes { try body($0) }
    }

    static func withOptionalBytes<R>(_ bytes: [UInt8]?, _ body: (UnsafeRawBufferPointer?) throws -> R) rethrows -> R {
        guard let bytes else { return try body(nil) }
        return try bytes.withUnsafeBytes { try body($0) }
    }

    func fetch(zone zoneID: ZoneID, names: [String]) async throws -> [String: Result<Record, StoreError>] {
        try await verifiedLogs.read { db in
            let zone = try self.accessControl.zoneRow(db, zoneID)
            try self.accessControl.checkCanRead(db, zone: zone)
            var out = [String: Result<Record, StoreError>](minimumCapacity: names.count)
            try self.decodeRows(db, zone: zone, expected: names.count, read: { add in
                try db.readRecordRows(zoneRowID: zone.rowID, names: names, into: add)
            }, deliver: { row, result in
                switch consume result {
                case .success(let record): out[row.name] = .success(record)
                case .failure(let e as StoreError) where e.code == .integrityFailure: out[row.name] = .failure(e)
                case .failure(let error): throw error
                }
            })
            // Every name found (the usual case): no second lookup per name.
            if out.count < names.count {
                for name in names where out[name] == nil {
                    out[name] = .failure(StoreError(.unknownItem, "no record '\(name)' in zone '\(zoneID.name)'"))
                }
            }
            return out
        }
    }
}

import Foundation

/// The owner's changes to a zone's schema (fields declared ahead of any save, fields dropped),
/// and the whole schema as the store holds it.
struct SchemaChanges: Sendable {
    /// The store the changes are written to.
    let store: Store
    /// The zone keys: a change checks that the owner holds the current one.
    let keyRing: KeyRing
    /// The zones' logs: a drop signs an entry of its own.
    let verifiedLogs: VerifiedLogs
    /// Who may change a zone's schema (its owner) and read it.
    let accessControl: AccessControl
    /// The schemas cached and their checks.
    let schemaRegistry: SchemaRegistry
    /// The records of a type, decoded to see which fields they use before a drop.
    let reader: RecordReader
}

extension SchemaChanges {
    /// Every record type of a zone with its fields, read from the store.
    func zoneSchema(zone zoneID: ZoneID) async throws -> [String: [String: FieldSchema]] {
        try await verifiedLogs.read { db in
            let zone = try self.accessControl.zoneRow(db, zoneID)
            _ = try self.accessControl.checkCanRead(db, zone: zone)
            return try Self.schemaTable(db.allFieldSchemaRows(zoneRowID: zone.rowID), zone: zone)
        }
    }

    /// The stored rows as specs; a row Coffer could not have written is `.integrityFailure`.
    static func schemaTable(_ rows: [String: [(field: String, valueType: String, encrypted: Bool)]], zone: ZoneRow) throws -> [String: [String: FieldSchema]] {
        var table = [String: [String: FieldSchema]]()
        for (recordType, fields) in rows {
            guard Names.isIdentifier(recordType) else {
                throw StoreError(.integrityFailure, "the schema of zone '\(zone.id.name)' names a record type '\(Names.printable(recordType))' Coffer does not write: the store was changed")
            }
            for row in fields {
                guard let type = FieldType(name: row.valueType), Names.isIdentifier(row.field) else {
                    throw StoreError(.integrityFailure, "the schema of \(recordType) in zone '\(zone.id.name)' has a field Coffer does not write: the store was changed")
                }
                table[recordType, default: [:]][row.field] = FieldSchema(type: type, encrypted: row.encrypted)
            }
        }
        return table
    }

    /// Fixes the declared fields the zone does not have yet, in one transaction, as its owner.
    /// A declared field the zone has with another type or encryption fails the whole call
    /// (`.invalidArguments`, naming it) and fixes nothing. Returns the declarations that were new.
    func addFields(_ declarations: [FieldDeclaration], zone zoneID: ZoneID) async throws -> [FieldDeclaration] {
        for declaration in declarations {
            try Names.validateRecordType(declaration.recordType)
            try Names.validateFieldKey(declaration.field)
        }
        return try await store.write { db in
            let zone = try self.accessControl.zoneRow(db, zoneID)
            let access = try self.accessControl.requireOwner(db, zone: zone, to: "change its schema")
            _ = try self.keyRing.zoneKey(db, zone: zone, epoch: access.state.epoch, state: access.state)
            let current = try Self.schemaTable(db.allFieldSchemaRows(zoneRowID: zone.rowID), zone: zone)
            var new = [FieldDeclaration](), seen = Set<String>()
            for declaration in declarations {
                if let fixed = current[declaration.recordType]?[declaration.field] {
                    guard fixed.type == declaration.type, fixed.encrypted == declaration.encrypted else {
                        throw StoreError(.invalidArguments, "field '\(declaration.field)' of \(declaration.recordType) is \(fixed.encrypted ? "encrypted" : "plain") \(fixed.type) (fixed by its first save), not \(declaration.encrypted ? "encrypted" : "plain") \(declaration.type)")
                    }
                } else if seen.insert(declaration.recordType + "\u{0}" + declaration.field).inserted {
                    new.append(declaration)
                }
            }
            _ = try self.schemaRegistry.declareFields(db, zoneRowID: zone.rowID, new)
            return new
        }
    }

    /// Removes fields of a record type from the zone's schema (all of them when `fields` is nil:
    /// the type), as the zone's owner, when no record of the zone uses them: afterwards each name
    /// can be fixed again, with any type. The drop is signed: it writes an empty commit of the
    /// owner to the zone's log in the same transaction, which orders it among the zone's
    /// commits (a commit read before it conflicts, and is made again on the schema after it).
    ///
    /// - Throws: `.unknownItem` when the type or a field is not in the schema; `.invalidArguments`
    ///   when records use them (the message counts them); `.integrityFailure` when a record of
    ///   the type fails verification (it cannot be told what it holds); `.permissionFailure`
    ///   for anyone but the owner.
    func dropFields(_ fields: [String]?, of recordType: String, zone zoneID: ZoneID, label: String?) async throws {
        try Names.validateRecordType(recordType)
        for field in fields ?? [] { try Names.validateFieldKey(field) }
        let now = Date().timeIntervalSince1970
        try await store.write { db in
            let zone = try self.accessControl.zoneRow(db, zoneID)
            var log = try self.accessControl.requireOwner(db, zone: zone, to: "change its schema").log
            _ = try self.keyRing.zoneKey(db, zone: zone, epoch: log.state.epoch, state: log.state)
            let current = try self.schemaRegistry.schema(db, zoneRowID: zone.rowID, recordType: recordType, fresh: true)
            let typeText = "record type \(recordType)"
            guard !current.isEmpty else { throw StoreError(.unknownItem, "zone '\(zoneID.name)' has no \(typeText) in its schema") }
            let dropped = fields ?? current.keys.sorted()
            for field in dropped where current[field] == nil {
                throw StoreError(.unknownItem, "\(recordType) has no field '\(field)' in zone '\(zoneID.name)'")
            }
            // Every record of the type, from the store as this transaction sees it.
            let plan = QueryPlan(recordType: recordType, predicates: [], sorts: [], after: nil, limit: nil)
            if fields == nil {
                var count = 0
                _ = try db.queryRecordRows(zoneRowID: zone.rowID, plan: plan) { _ in count += 1 }
                guard count == 0 else {
                    throw StoreError(.invalidArguments, "\(count == 1 ? "1 record uses" : "\(count) records use") \(typeText) in zone '\(zoneID.name)'; delete \(count == 1 ? "it" : "them") first")
                }
            } else {
                let wanted = Set(dropped)
                var users = 0
                var failed = [String]()
                try self.reader.decodeRows(db, zone: zone, read: { add in _ = try db.queryRecordRows(zoneRowID: zone.rowID, plan: plan, into: add) },
                                    deliver: { row, result in
                    switch consume result {
                    case .success(let record):
                        if wanted.contains(where: { record.values[$0] != nil || record.encryptedValues[$0] != nil }) { users += 1 }
                    case .failure: failed.append(row.name)
                    }
                })
                if !failed.isEmpty {
                    throw StoreError(.integrityFailure, "\(failed.count == 1 ? "record '\(failed[0])' fails" : "\(failed.count) records fail") verification, so it cannot be told whether \(failed.count == 1 ? "it uses" : "they use") the field; run 'coffer audit'")
                }
                guard users == 0 else {
                    let what = dropped.count == 1 ? "field '\(dropped[0])'" : "these fields"
                    throw StoreError(.invalidArguments, "\(users == 1 ? "1 record" : "\(users) records") of \(typeText) in zone '\(zoneID.name)' \(users == 1 ? "uses" : "use") \(what); remove it from \(users == 1 ? "that record" : "them") or delete \(users == 1 ? "it" : "them") first")
                }
            }
            try db.touchZone(zoneRowID: zone.rowID)
            let commit = CommitBuilder(zoneUID: zone.uid, seq: log.state.headSeq + 1, capacity: 0)
            try commit.write(db, logs: verifiedLogs, zone: zone, log: &log, kind: .commit, label: label, time: now)
            for field in dropped { try db.deleteFieldSchema(zoneRowID: zone.rowID, recordType: recordType, field: field) }
            let key = SchemaKey(zoneRowID: zone.rowID, recordType: recordType)
            let forget: @Sendable () -> Void = { [schemaRegistry] in schemaRegistry.forgetDropped(key) }
            db.afterTransaction(onCommit: forget, onRollback: forget)
        }
    }
}

import Foundation

/// The `record get` JSON shape of a record, written fast and read strictly: the form of the
/// CLI's `--json` output and of JSON lines export and import.
///
/// ```swift
/// let schema = try await db.schema(of: "Note", in: zone)
/// let data = try RecordJSON.encode(note, schema: schema, userID: session.userID)
/// // {"changeTag":"…","created":"…","creator":"…","encryptedValues":{"body":"eggs, milk"},…}
/// ```
///
/// The object's keys: `zone` (the zone's name, or `name@owner` for another user's zone),
/// `name`, `type`, `parent`, `changeTag`, `values`, `encryptedValues` (decrypted), `types`
/// (each field's type name, from the schema when given), `creator`, `modifier`, `created`,
/// `modified` (ISO 8601, whole seconds), `keyEpoch`; absent facts are `null`. Keys are sorted
/// by their UTF-8 bytes. Values: strings and references as strings, ints as integers, doubles
/// in their shortest round-trip form, bools, dates as ``ISODate/format(_:)`` writes them,
/// bytes as base64, lists as arrays.
public enum RecordJSON {
    /// The keys an imported line may hold; others are refused.
    /// (`pending`, `refused` and `refusedWhy` flag a replica's offline change; an import reads
    /// such a line as any other.)
    public static let knownKeys: Set<String> = ["zone", "name", "type", "parent", "changeTag", "values", "encryptedValues", "types",
                                                "creator", "modifier", "created", "modified", "keyEpoch", "pending", "refused", "refusedWhy"]

    /// Whether `key` is one of ``knownKeys`` (compared, not hashed: an import asks for every key
    /// of every line).
    static func isKnownKey(_ key: String) -> Bool {
        switch key {
        case "zone", "name", "type", "parent", "changeTag", "values", "encryptedValues", "types",
             "creator", "modifier", "created", "modified", "keyEpoch", "pending", "refused", "refusedWhy": true
        default: false
        }
    }

    /// The record as one JSON object (no newline).
    ///
    /// ```swift
    /// FileHandle.standardOutput.write(try RecordJSON.encode(record, pretty: true))
    /// ```
    /// - Parameters:
    ///   - record: the record to write.
    ///   - schema: the record type's fields in the zone; the `types` of an empty list come from it.
    ///   - userID: the user whose zones are named without `@owner`.
    ///   - pretty: Foundation's pretty layout instead of one line.
    /// - Throws: `.invalidArguments` for a double that is not finite (the store keeps none).
    public static func encode(_ record: Record, schema: [String: FieldSchema]? = nil, userID: String? = nil, pretty: Bool = false) throws -> Data {
        var writer = JSONWriter(pretty: pretty)
        try write(record, schema: schema, userID: userID, into: &writer)
        return Data(writer.bytes)
    }

    /// Writes the record's object. Without `secrets`, `encryptedFields` (the sorted names of the
    /// encrypted fields) stands in place of `encryptedValues`: the shape a write prints. With
    /// `transactionAuthor`, that key is added (the change feed's shape). With `news`, `newFields`
    /// (the names of the fields the save added to the schema) and `newType` (whether it added the
    /// record type): the shape `record put` prints. With `pending`, `"pending": true`: a write
    /// kept in a replica offline, not synced yet. With `refused`, `"refused"` and why: a write
    /// kept offline that the server refused.
    package static func write(_ record: Record, schema: [String: FieldSchema]?, userID: String?, secrets: Bool = true,
                              transactionAuthor: Bool = false, news: (newType: Bool, newFields: [String])? = nil, pending: Bool = false,
                              refused: String? = nil, into w: inout JSONWriter) throws {
        func optional(_ text: String?) { if let text { w.string(text) } else { w.null() } }
        w.beginObject()
        w.key("changeTag"); optional(record.changeTag)
        w.key("created"); optional(record.created.map(ISODate.formatSeconds))
        w.key("creator"); optional(record.creatorID)
        if secrets {
            w.key("encryptedValues"); try fields(record.encryptedValues, into: &w)
        } else {
            w.key("encryptedFields")
            w.beginArray()
            for key in sortedKeys(record.encryptedValues) { w.string(key) }
            w.endArray()
        }
        w.key("keyEpoch"); if let epoch = record.keyEpoch { w.int(epoch) } else { w.null() }
        w.key("modified"); optional(record.modified.map(ISODate.formatSeconds))
        w.key("modifier"); optional(record.modifierID)
        w.key("name"); w.string(record.name)
        if let news {
            w.key("newFields")
            w.beginArray()
            for field in news.newFields { w.string(field) }
            w.endArray()
            w.key("newType"); w.bool(news.newType)
        }
        w.key("parent"); optional(record.parent)
        if pending { w.key("pending"); w.bool(true) }
        if let refused { w.key("refused"); w.bool(true); w.key("refusedWhy"); w.string(refused) }
        if transactionAuthor { w.key("transactionAuthor"); optional(record.transactionAuthor) }
        w.key("type"); w.string(record.recordType)
        w.key("types")
        w.beginObject()
        // A field is plain or encrypted, never both: the two sets of keys merge without a clash.
        var all = sortedKeys(record.values), sealed = sortedKeys(record.encryptedValues)
        if !sealed.isEmpty {
            all += sealed
            all.sort(by: byBytes)
        }
        for key in all {
            let value = record.values[key] ?? record.encryptedValues[key]!
            w.key(key)
            w.string((schema?[key]?.type ?? value.fieldType).description)
        }
        w.endObject()
        w.key("values"); try fields(record.values, into: &w)
        w.key("zone")
        if let userID, record.zoneID.ownerID == userID { w.string(record.zoneID.name) } else { w.string("\(record.zoneID.name)@\(record.zoneID.ownerID)") }
        w.endObject()
    }

    /// Writes a page of query results, as `coffer record query --json` prints it: `cursor` (its
    /// token, or null), `moreComing`, `records` (each in the `record get` shape) and `refused`
    /// (each refused record's `message` and `name`, by name). With `flush`, the writer's bytes
    /// go to it whenever they pass `flushBytes`, so that a large page is not held whole.
    package static func write(_ result: QueryResult, schema: [String: FieldSchema]?, userID: String?, into w: inout JSONWriter,
                              flushBytes: Int = 1 << 20, flush: ((UnsafeRawBufferPointer) throws -> Void)? = nil) throws {
        w.beginObject()
        w.key("cursor")
        if let cursor = result.cursor { w.string(cursor.token) } else { w.null() }
        w.key("moreComing"); w.bool(result.cursor != nil)
        w.key("records")
        w.beginArray()
        for record in result.records {
            try write(record, schema: schema, userID: userID, into: &w)
            if let flush, w.bytes.count >= flushBytes { try w.flush(to: flush) }
        }
        w.endArray()
        w.key("refused")
        w.beginArray()
        for name in result.refused.keys.sorted() {
            w.beginObject()
            w.key("message"); w.string(result.refused[name]!.message)
            w.key("name"); w.string(name)
            w.endObject()
        }
        w.endArray()
        w.endObject()
    }

    /// Sorts by UTF-8 bytes (field keys are ASCII, where this is also code point order).
    package static func byBytes(_ a: String, _ b: String) -> Bool {
        a.utf8.lexicographicallyPrecedes(b.utf8)
    }

    static func sortedKeys(_ fields: [String: RecordValue]) -> [String] {
        fields.count < 2 ? Array(fields.keys) : fields.keys.sorted(by: byBytes)
    }

    private static func fields(_ fields: [String: RecordValue], into w: inout JSONWriter) throws {
        w.beginObject()
        for key in sortedKeys(fields) {
            w.key(key)
            try value(fields[key]!, into: &w)
        }
        w.endObject()
    }

    /// One value in its JSON form.
    package static func value(_ value: RecordValue, into w: inout JSONWriter) throws {
        switch value {
        case .string(let s), .reference(let s): w.string(s)
        case .int(let v): w.int(v)
        case .double(let v):
            do { try w.double(v) } catch { throw StoreError(.invalidArguments, "a double that is not finite has no JSON form") }
        case .bool(let v): w.bool(v)
        case .date(let d): w.string(ISODate.format(d))
        case .bytes(let b): w.string(Data(b).base64EncodedString())
        case .list(let items):
            w.beginArray()
            for item in items { try self.value(item, into: &w) }
            w.endArray()
        }
    }
}

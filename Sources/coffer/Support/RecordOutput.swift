import CofferStore
import Foundation

/// Records for people (text) and scripts (`--json`, in the library's `record get` shape).
enum RecordOutput {
    /// Writes the `record get` shape (see ``RecordJSON``); without `secrets`, the `record put`
    /// shape: `encryptedFields`, the sorted names of the encrypted fields, in place of
    /// `encryptedValues` (a write prints no secret).
    static func write(_ record: Record, context: SessionContext, schema: [String: FieldSchema]? = nil, secrets: Bool = true,
                      transactionAuthor: Bool = false, into writer: inout JSONWriter) throws {
        try RecordJSON.write(record, schema: schema, userID: context.session.userID, secrets: secrets,
                             transactionAuthor: transactionAuthor, into: &writer)
    }

    /// One record's JSON, pretty, on stdout.
    /// `news`: the `record put` keys `newType` and `newFields` (see ``RecordJSON``).
    /// `refused`: why the server refused this version (a change kept offline).
    static func printJSON(_ record: Record, context: SessionContext, schema: [String: FieldSchema]?, secrets: Bool = true,
                          news: (newType: Bool, newFields: [String])? = nil, refused: String? = nil) throws {
        var writer = JSONWriter(pretty: true)
        try RecordJSON.write(record, schema: schema, userID: context.session.userID, secrets: secrets, news: news,
                             pending: !secrets && context.writesPending, refused: refused, into: &writer)
        print(writer)
    }

    /// The writer's document (or what is left of it) and a newline on stdout.
    static func print(_ writer: JSONWriter) {
        writer.bytes.withUnsafeBytes(write)
        [UInt8(0x0a)].withUnsafeBytes(write)
    }

    /// Bytes on stdout, as they are (not copied into a `Data` first).
    static func write(_ bytes: UnsafeRawBufferPointer) { Output.out(bytes) }

    static func data(_ object: Any, pretty: Bool) throws -> Data {
        var options: JSONSerialization.WritingOptions = [.sortedKeys, .withoutEscapingSlashes]
        if pretty { options.insert(.prettyPrinted) }
        return try JSONSerialization.data(withJSONObject: object, options: options)
    }

    static func printJSON(_ object: Any) throws {
        Output.out(try data(object, pretty: true) + Data("\n".utf8))
    }

    /// The human form of `record get` (and, without `secrets`, of `record put`: encrypted fields by
    /// name and type only, since a write prints no secret).
    /// With `schema`, a field's type is the one its first save fixed (an empty list carries none
    /// of its own: `[]` of a `[double]` field would show as `[string]`).
    static func printText(_ record: Record, context: SessionContext, schema: [String: FieldSchema]? = nil, secrets: Bool = true) {
        Output.fields([
            ("Record", "\(record.name) (\(record.recordType)) in \(record.zoneID.name)"),
            ("Change tag", record.changeTag ?? "-"),
            ("Parent", record.parent ?? "-"),
            ("Created", "\(record.created.map(Output.iso) ?? "-") by \(context.displayName(record.creatorID))"),
            ("Modified", "\(record.modified.map(Output.iso) ?? "-") by \(context.displayName(record.modifierID))"),
        ])
        printFields("Values", record.values, schema: schema)
        if secrets {
            printFields("Encrypted values", record.encryptedValues, schema: schema)
        } else {
            printFields("Encrypted fields", record.encryptedValues, schema: schema, values: false)
        }
    }

    /// `title:` then a line per field, `key (type) = value`, or `key (type)` without `values`.
    static func printFields(_ title: String, _ fields: [String: RecordValue], schema: [String: FieldSchema]? = nil, values: Bool = true) {
        Output.line("\(title):" + (fields.isEmpty ? " none" : ""))
        for key in fields.keys.sorted() {
            let type = "  \(key) (\(schema?[key]?.type ?? fields[key]!.fieldType))"
            Output.line(values ? "\(type) = \(display(fields[key]!))" : type)
        }
    }

    /// A value for the text form of `record get`, on one line: control characters escaped, and
    /// the text items of a list quoted (`["a", "b,c"]`), so that no item can pass for two.
    static func display(_ value: RecordValue) -> String { display(value, quoted: false) }

    private static func display(_ value: RecordValue, quoted: Bool) -> String {
        switch value {
        case .string(let s), .reference(let s):
            guard quoted else { return Output.oneLine(s) }
            return "\"" + Output.oneLine(s.replacingOccurrences(of: "\\", with: "\\\\").replacingOccurrences(of: "\"", with: "\\\"")) + "\""
        case .date(let d): return ISODate.format(d)
        case .bytes(let b): return "\(b.count) bytes, base64 \(Data(b.prefix(48)).base64EncodedString())\(b.count > 48 ? "…" : "")"
        case .list(let items): return "[" + items.map { display($0, quoted: true) }.joined(separator: ", ") + "]"
        default: return value.description
        }
    }
}

import CofferStore
import Foundation

/// The `record get` shape, for `--json`, export and import.
enum RecordOutput {
    static func jsonObject(_ record: Record, context: SessionContext, schema: [String: FieldSchema]? = nil) -> [String: Any] {
        var types = [String: String]()
        for (k, v) in record.values { types[k] = (schema?[k]?.type ?? v.fieldType).description }
        for (k, v) in record.encryptedValues { types[k] = (schema?[k]?.type ?? v.fieldType).description }
        return [
            "zone": record.zoneID.ownerID == context.session.userID ? record.zoneID.name : "\(record.zoneID.name)@\(record.zoneID.ownerID)",
            "name": record.name,
            "type": record.recordType,
            "parent": record.parent as Any? ?? NSNull(),
            "changeTag": record.changeTag ?? NSNull(),
            "values": record.values.mapValues(jsonValue),
            "encryptedValues": record.encryptedValues.mapValues(jsonValue),
            "types": types,
            "creator": record.creatorID ?? NSNull(),
            "modifier": record.modifierID ?? NSNull(),
            "created": record.created.map(Output.iso) ?? NSNull(),
            "modified": record.modified.map(Output.iso) ?? NSNull(),
            "keyEpoch": record.keyEpoch ?? NSNull(),
        ]
    }

    /// The `record put` shape: that of `record get`, but with `encryptedFields`, the sorted names of
    /// the encrypted fields, in place of `encryptedValues`: a write prints no secret.
    static func savedJSONObject(_ record: Record, context: SessionContext, schema: [String: FieldSchema]? = nil) -> [String: Any] {
        var object = jsonObject(record, context: context, schema: schema)
        object["encryptedValues"] = nil
        object["encryptedFields"] = record.encryptedValues.keys.sorted()
        return object
    }

    static func jsonValue(_ value: RecordValue) -> Any {
        switch value {
        case .string(let s), .reference(let s): return s
        case .int(let v): return v
        case .double(let v): return v
        case .bool(let v): return v
        case .date(let d): return isoFractional(d)
        case .bytes(let b): return Data(b).base64EncodedString()
        case .list(let items): return items.map(jsonValue)
        }
    }

    /// A date value as ISO 8601 in UTC with the fewest fraction digits, 3 to 9, that
    /// ``FieldAssignment/parseDate(_:)`` reads back as exactly this date: `record export` →
    /// `record import` keeps every date to the bit (3 digits cut them to the millisecond, and
    /// truncated: .002 came out as .001). The parser reads the text as its whole second plus the
    /// fraction's value, so each candidate is checked by that same sum, without the calendar.
    static func isoFractional(_ date: Date) -> String {
        let t = date.timeIntervalSinceReferenceDate
        let whole = t.rounded(.down)
        var seconds = whole, fraction = "000"
        for digits in 3...9 {
            let scale = pow(10, Double(digits))
            var second = whole, scaled = ((t - whole) * scale).rounded()
            if scaled >= scale { (second, scaled) = (whole + 1, 0) }
            let text = String(Int(scaled))
            (seconds, fraction) = (second, String(repeating: "0", count: digits - text.count) + text)
            if second + Double("0." + fraction)! == t { break }
        }
        let c = FieldAssignment.utcCalendar.dateComponents([.year, .month, .day, .hour, .minute, .second],
                                                           from: Date(timeIntervalSinceReferenceDate: seconds))
        guard let year = c.year, (1...9999).contains(year) else { return date.formatted(Date.ISO8601FormatStyle(includingFractionalSeconds: true)) }
        func two(_ v: Int?) -> String { v.map { $0 < 10 ? "0\($0)" : "\($0)" } ?? "00" }
        return String(repeating: "0", count: 4 - String(year).count)
            + "\(year)-\(two(c.month))-\(two(c.day))T\(two(c.hour)):\(two(c.minute)):\(two(c.second)).\(fraction)Z"
    }

    static func data(_ object: Any, pretty: Bool) throws -> Data {
        var options: JSONSerialization.WritingOptions = [.sortedKeys, .withoutEscapingSlashes]
        if pretty { options.insert(.prettyPrinted) }
        return try JSONSerialization.data(withJSONObject: object, options: options)
    }

    static func printJSON(_ object: Any) throws {
        FileHandle.standardOutput.write(try data(object, pretty: true) + Data("\n".utf8))
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
        case .date(let d): return isoFractional(d)
        case .bytes(let b): return "\(b.count) bytes, base64 \(Data(b.prefix(48)).base64EncodedString())\(b.count > 48 ? "…" : "")"
        case .list(let items): return "[" + items.map { display($0, quoted: true) }.joined(separator: ", ") + "]"
        default: return value.description
        }
    }
}

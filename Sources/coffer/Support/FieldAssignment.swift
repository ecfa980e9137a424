import CofferStore
import Foundation

/// Parses `key=value`, `key:TYPE=value` and `key:[TYPE]=v1,v2` (the CLI contract's field syntax).
enum FieldAssignment {
    static func parse(_ text: String) throws -> (key: String, value: RecordValue) {
        let (key, value, _) = try parseTyped(text)
        return (key, value)
    }

    /// Also returns the type written (`string` when none was), which an empty list needs.
    static func parseTyped(_ text: String) throws -> (key: String, value: RecordValue, type: FieldType) {
        guard let eq = text.firstIndex(of: "=") else {
            throw CLIError(ExitStatus.dataError, "'\(text)' is not a field assignment: use key=value or key:TYPE=value")
        }
        let left = text[..<eq], raw = String(text[text.index(after: eq)...])
        var key = String(left), type = FieldType.string
        if let colon = left.firstIndex(of: ":") {
            key = String(left[..<colon])
            let typeName = String(left[left.index(after: colon)...])
            guard let parsed = FieldType(name: typeName) else {
                throw CLIError(ExitStatus.dataError, "unknown type '\(typeName)' in '\(text)': use string, int, double, bool, date, bytes, ref or [TYPE]")
            }
            type = parsed
        }
        guard !key.isEmpty else { throw CLIError(ExitStatus.dataError, "'\(text)' has no field key") }
        return (key, try value(raw, as: type, key: key), type)
    }

    static func value(_ raw: String, as type: FieldType, key: String) throws -> RecordValue {
        func bad(_ what: String) -> CLIError {
            CLIError(ExitStatus.dataError, "field '\(key)': '\(raw.prefix(60))' is not \(what)")
        }
        switch type {
        case .string: return .string(raw)
        case .int:
            guard let v = Int64(raw) else { throw bad("an int (64-bit integer)") }
            return .int(v)
        case .double:
            guard let v = Double(raw), v.isFinite else { throw bad("a finite double") }
            return .double(v)
        case .bool:
            switch raw.lowercased() {
            case "true": return .bool(true)
            case "false": return .bool(false)
            default: throw bad("a bool (true or false)")
            }
        case .date:
            guard let d = parseDate(raw) else { throw bad("an ISO 8601 date (2026-11-22 or 2026-11-22T10:30:00Z)") }
            return .date(d)
        case .bytes:
            if raw.hasPrefix("@") {
                let path = String(raw.dropFirst())
                guard let data = FileManager.default.contents(atPath: path) else {
                    throw CLIError(ExitStatus.notFound, "field '\(key)': cannot read \(path)")
                }
                return .bytes(Array(data))
            }
            guard let data = Data(base64Encoded: raw) else { throw bad("base64 (or @path to read a file)") }
            return .bytes(Array(data))
        case .reference: return .reference(raw)
        case .list(let element):
            if raw.isEmpty { return .list([]) }
            return .list(try splitList(raw).map { try value($0, as: element, key: key) })
        }
    }

    /// Splits on commas; `\,` is a literal comma and `\\` a backslash.
    static func splitList(_ raw: String) -> [String] {
        var items = [String](), current = "", escaped = false
        for c in raw {
            if escaped { current.append(c); escaped = false; continue }
            if c == "\\" { escaped = true; continue }
            if c == "," { items.append(current); current = ""; continue }
            current.append(c)
        }
        if escaped { current.append("\\") }
        items.append(current)
        return items
    }

    static func parseDate(_ raw: String) -> Date? {
        if let d = try? Date(raw, strategy: .iso8601) { return d }
        if let d = try? Date(raw, strategy: Date.ISO8601FormatStyle(includingFractionalSeconds: true)) { return d }
        if let d = try? Date(raw, strategy: Date.ISO8601FormatStyle().year().month().day()) { return d }
        return nil
    }
}

import CofferStore
import Foundation

/// Parses `key=value`, `key:TYPE=value` and `key:[TYPE]=v1,v2` (the CLI contract's field syntax).
enum FieldAssignment {
    /// Parses one assignment, and returns the type written (`string` when none was), which an
    /// empty list needs. When `encrypted`, no error message quotes the value (nor the text, which
    /// holds it): a secret must never reach stderr.
    static func parseTyped(_ text: String, encrypted: Bool) throws -> (key: String, value: RecordValue, type: FieldType) {
        let (key, type, raw) = try split(text, hidden: encrypted, flag: "--secret", form: "key=value or key:TYPE=value")
        return (key, try value(raw, as: type ?? .string, key: key, encrypted: encrypted), type ?? .string)
    }

    /// An assignment whose value is parsed once its type is known: at once when it writes a type,
    /// otherwise with the type the zone's schema gives the field (``typed(as:recordType:)``), or
    /// as a string for a field the schema does not have.
    struct Pending {
        let key: String
        let encrypted: Bool
        /// The type written (`key:TYPE=`), nil when none was.
        let written: FieldType?
        let raw: String
        /// The value, when the type was written.
        let value: RecordValue?

        /// The value and its type, `schema` giving the type when none was written. A value that
        /// does not parse as the schema's type is 65 naming the field and that type.
        func typed(by schema: FieldSchema?, recordType: String) throws -> (key: String, value: RecordValue, type: FieldType) {
            if let value, let written { return (key, value, written) }
            guard let spec = schema else { return (key, .string(raw), .string) }
            do {
                return (key, try FieldAssignment.value(raw, as: spec.type, key: key, encrypted: encrypted), spec.type)
            } catch let error as CLIError where error.status == ExitStatus.dataError {
                throw CLIError(error.status, error.message
                    + " (the zone's schema has field '\(key)' of \(recordType) as \(spec.type); write key:TYPE=value to give a type)")
            }
        }
    }

    /// Parses one assignment, its value only when it writes a type (see ``Pending``).
    static func parsePending(_ text: String, encrypted: Bool) throws -> Pending {
        let (key, type, raw) = try split(text, hidden: encrypted, flag: "--secret", form: "key=value or key:TYPE=value")
        return Pending(key: key, encrypted: encrypted, written: type, raw: raw,
                       value: try type.map { try value(raw, as: $0, key: key, encrypted: encrypted) })
    }

    /// `key=REST` or `key:TYPE=REST` split at the first `=`: the key, the type (nil when none
    /// is written) and REST. When `hidden` (the text may hold a secret), errors name `flag`
    /// instead of quoting the text; `form` says what is expected.
    static func split(_ text: String, hidden: Bool, flag: String, form: String) throws -> (key: String, type: FieldType?, rest: String) {
        guard let eq = text.firstIndex(of: "=") else {
            throw CLIError(ExitStatus.dataError, hidden
                ? "a \(flag) argument is not a field assignment: use \(form) (it is not shown because it may hold a secret)"
                : "'\(text.prefix(60))' is not a field assignment: use \(form)")
        }
        let left = text[..<eq], rest = String(text[text.index(after: eq)...])
        var key = String(left), type: FieldType?
        if let colon = left.firstIndex(of: ":") {
            key = String(left[..<colon])
            let typeName = String(left[left.index(after: colon)...])
            guard let parsed = FieldType(name: typeName) else {
                let shown = hidden ? "field '\(key)'" : "'\(text.prefix(60))'"
                throw CLIError(ExitStatus.dataError, "unknown type '\(typeName)' in \(shown): use string, int, double, bool, date, bytes, ref or [TYPE]")
            }
            type = parsed
        }
        guard !key.isEmpty else {
            throw CLIError(ExitStatus.dataError, hidden
                ? "a \(flag) argument has no field key: use \(form) (it is not shown because it may hold a secret)"
                : "'\(text.prefix(60))' has no field key")
        }
        return (key, type, rest)
    }

    /// The error for a field value that is wrong: `problem` reads after the value ("is not an int").
    /// A plain field's value is quoted (shortened to `shown`); an encrypted field's never is.
    static func invalidValue(key: String, shown: String, problem: String, encrypted: Bool) -> CLIError {
        CLIError(ExitStatus.dataError, RecordValue.invalidMessage(key: key, shown: shown, problem: problem, encrypted: encrypted))
    }

    /// Canonical base64 only, as `record get` and export print it.
    static func base64(_ text: String) -> Data? { RecordValue.canonicalBase64(text) }

    /// What a date value may be, for error messages.
    static let dateForms = ISODate.forms

    static func value(_ raw: String, as type: FieldType, key: String, encrypted: Bool = false) throws -> RecordValue {
        func bad(_ what: String) -> CLIError {
            invalidValue(key: key, shown: "'\(raw.prefix(60))'", problem: "is not \(what)", encrypted: encrypted)
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
            guard let d = parseDate(raw) else { throw bad(dateForms) }
            return .date(d)
        case .bytes:
            if raw.hasPrefix("@") {
                let path = String(raw.dropFirst())
                guard let data = FileManager.default.contents(atPath: path) else {
                    throw CLIError(ExitStatus.notFound, "field '\(key)': cannot read \(path)")
                }
                return .bytes(Array(data))
            }
            guard let data = Self.base64(raw) else { throw bad("base64 (or @path to read a file)") }
            return .bytes(Array(data))
        case .reference: return .reference(raw)
        case .list(let element):
            if raw.isEmpty { return .list([]) }
            return .list(try splitList(raw).map { try value($0, as: element, key: key, encrypted: encrypted) })
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

    /// A whole, valid ISO 8601 date, or nil (see ``ISODate/parse(_:)``).
    static func parseDate(_ raw: String) -> Date? { ISODate.parse(raw) }
}

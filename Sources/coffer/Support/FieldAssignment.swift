import CofferStore
import Foundation

/// Parses `key=value`, `key:TYPE=value` and `key:[TYPE]=v1,v2` (the CLI contract's field syntax).
enum FieldAssignment {
    /// Parses one assignment, and returns the type written (`string` when none was), which an
    /// empty list needs. When `encrypted`, no error message quotes the value (nor the text, which
    /// holds it): a secret must never reach stderr.
    static func parseTyped(_ text: String, encrypted: Bool) throws -> (key: String, value: RecordValue, type: FieldType) {
        let (key, type, raw) = try split(text, hidden: encrypted, flag: "--secret", form: "key=value or key:TYPE=value")
        return (key, try value(raw, as: type, key: key, encrypted: encrypted), type)
    }

    /// `key=REST` or `key:TYPE=REST` split at the first `=`: the key, the type (`string` when none
    /// is written) and REST. When `hidden` (the text may hold a secret), errors name `flag`
    /// instead of quoting the text; `form` says what is expected.
    static func split(_ text: String, hidden: Bool, flag: String, form: String) throws -> (key: String, type: FieldType, rest: String) {
        guard let eq = text.firstIndex(of: "=") else {
            throw CLIError(ExitStatus.dataError, hidden
                ? "a \(flag) argument is not a field assignment: use \(form) (it is not shown because it may hold a secret)"
                : "'\(text.prefix(60))' is not a field assignment: use \(form)")
        }
        let left = text[..<eq], rest = String(text[text.index(after: eq)...])
        var key = String(left), type = FieldType.string
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
        CLIError(ExitStatus.dataError, encrypted
            ? "field '\(key)' (encrypted): the value \(problem); it is not shown because the field is encrypted"
            : "field '\(key)': \(shown) \(problem)")
    }

    /// Canonical base64 only, as `record get` and export print it: re-encoding gives the same text
    /// (`Data(base64Encoded:)` alone reads `====` as a zero byte and `AA=A` as two bytes).
    static func base64(_ text: String) -> Data? {
        guard let data = Data(base64Encoded: text), data.base64EncodedString() == text else { return nil }
        return data
    }

    /// What a date value may be, for error messages.
    static let dateForms = "an ISO 8601 date (2026-11-22, midnight UTC) or date and time with a time zone (2026-11-22T10:30:00Z, 2026-11-22T10:30:00.250+02:00)"

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

    /// A whole, valid ISO 8601 date, or nil. Two forms:
    /// - `YYYY-MM-DD`: that day at midnight UTC;
    /// - `YYYY-MM-DDThh:mm:ss[.f…]` then `Z` or `±hh:mm`: a date and time with its time zone
    ///   (1 to 9 fraction digits).
    /// Years 0001-9999 of the Gregorian calendar (Julian before 1582-10-15, as dates are printed);
    /// every field must be in range (a day that the month has, hour < 24, minute < 60,
    /// second < 60), and nothing may follow.
    static func parseDate(_ raw: String) -> Date? {
        let b = Array(raw.utf8)
        var i = 0
        func isDigit(_ c: UInt8) -> Bool { c >= 0x30 && c <= 0x39 }
        func number(_ count: Int) -> Int? {
            guard i + count <= b.count, b[i..<(i + count)].allSatisfy(isDigit) else { return nil }
            defer { i += count }
            return b[i..<(i + count)].reduce(0) { $0 * 10 + Int($1 - 0x30) }
        }
        func skip(_ c: Character) -> Bool {
            guard i < b.count, b[i] == c.asciiValue else { return false }
            i += 1
            return true
        }
        guard let year = number(4), skip("-"), let month = number(2), skip("-"), let day = number(2) else { return nil }
        var hour = 0, minute = 0, second = 0, fraction = 0.0, offset = 0
        if i < b.count {
            guard skip("T"), let h = number(2), skip(":"), let m = number(2), skip(":"), let s = number(2) else { return nil }
            (hour, minute, second) = (h, m, s)
            if skip(".") {
                let start = i
                while i < b.count, isDigit(b[i]) { i += 1 }
                guard (1...9).contains(i - start), let f = Double("0." + String(decoding: b[start..<i], as: UTF8.self)) else { return nil }
                fraction = f
            }
            if skip("Z") {
                offset = 0
            } else if i < b.count, b[i] == UInt8(ascii: "+") || b[i] == UInt8(ascii: "-") {
                let sign = b[i] == UInt8(ascii: "-") ? -1 : 1
                i += 1
                guard let oh = number(2), skip(":"), let om = number(2), oh < 24, om < 60 else { return nil }
                offset = sign * (oh * 3600 + om * 60)
            } else {
                return nil // a date and time needs its time zone
            }
            guard i == b.count else { return nil }
        }
        guard year >= 1, hour < 24, minute < 60, second < 60 else { return nil }
        // The calendar that `record get` prints dates in; a field out of range (2026-02-30) does
        // not come back the same from it.
        let fields = [1, year, month, day, hour, minute, second]
        guard let date = utcCalendar.date(from: DateComponents(year: year, month: month, day: day, hour: hour, minute: minute, second: second))
        else { return nil }
        let back = utcCalendar.dateComponents([.era, .year, .month, .day, .hour, .minute, .second], from: date)
        guard [back.era, back.year, back.month, back.day, back.hour, back.minute, back.second] == fields else { return nil }
        return date.addingTimeInterval(fraction - Double(offset))
    }

    static let utcCalendar: Calendar = {
        var calendar = Calendar(identifier: .gregorian)
        calendar.timeZone = TimeZone(identifier: "UTC")!
        return calendar
    }()
}

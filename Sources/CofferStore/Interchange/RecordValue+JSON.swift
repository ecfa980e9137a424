import Foundation

extension RecordValue {
    /// A JSON value as a record value, typed by a declared or schema type when there is one,
    /// else by its JSON kind: a string, a bool, an integer (int), any other number (double), a
    /// list of them (a list of numbers that are not all integers is a `[double]`).
    /// An encrypted field's value (`encrypted`) is never quoted in an error.
    /// - Throws: `.invalidArguments`.
    init(json raw: JSONValue, key: String, type: FieldType?, encrypted: Bool = false) throws {
        func bad(_ what: String) -> StoreError {
            StoreError(.invalidArguments, encrypted ? "field '\(key)' (encrypted): \(what)" : "field '\(key)': \(what)")
        }
        func invalid(_ shown: String, _ problem: String) -> StoreError {
            StoreError(.invalidArguments, RecordValue.invalidMessage(key: key, shown: shown, problem: problem, encrypted: encrypted))
        }
        if let type {
            if case .list(let element) = type {
                guard case .array(let items) = raw else { throw bad("expected a list of \(element)") }
                self = .list(try items.map { try RecordValue(json: $0, key: key, type: element, encrypted: encrypted) })
                return
            }
            switch (type, raw) {
            case (.string, .string(let s)): self = .string(s)
            case (.reference, .string(let s)): self = .reference(s)
            case (.date, .string(let s)):
                guard let d = ISODate.parse(s) else { throw invalid("'\(s.prefix(40))'", "is not \(ISODate.forms)") }
                self = .date(d)
            case (.bytes, .string(let s)):
                guard let data = RecordValue.canonicalBase64(s) else { throw bad("not base64") }
                self = .bytes(Array(data))
            case (.bool, .bool(let b)): self = .bool(b)
            case (.int, .integer(let v)): self = .int(v)
            case (.int, .bigInteger(let text, _)): throw invalid(text, "is outside the 64-bit integer range")
            case (.int, .number(let d)): throw invalid("\(d)", "is not a 64-bit integer")
            case (.double, _) where raw.doubleValue != nil: self = .double(raw.doubleValue!)
            case (.date, _) where raw.doubleValue != nil: self = .date(Date(timeIntervalSince1970: raw.doubleValue!))
            default: throw bad("expected \(type)")
            }
            return
        }
        switch raw {
        case .string(let s): self = .string(s)
        case .bool(let b): self = .bool(b)
        case .integer(let v): self = .int(v)
        case .bigInteger(let text, _): throw invalid(text, "is outside the 64-bit integer range")
        case .number(let d): self = .double(d)
        case .array(let items):
            // JSON has one kind of number: a list of numbers that are not all integers is a [double].
            if items.contains(where: { if case .number = $0 { true } else { false } }), items.allSatisfy({ $0.doubleValue != nil }) {
                self = .list(items.map { .double($0.doubleValue!) })
                return
            }
            self = .list(try items.map { try RecordValue(json: $0, key: key, type: nil, encrypted: encrypted) })
        case .null, .object: throw bad("null and objects are not values")
        }
    }

    /// The message for a field value that is wrong: `problem` reads after the value ("is not an
    /// int"). A plain field's value is quoted (shortened to `shown`); an encrypted field's never is.
    package static func invalidMessage(key: String, shown: String, problem: String, encrypted: Bool) -> String {
        encrypted
            ? "field '\(key)' (encrypted): the value \(problem); it is not shown because the field is encrypted"
            : "field '\(key)': \(shown) \(problem)"
    }

    /// Canonical base64 only, as the JSON shape writes it: re-encoding gives the same text
    /// (`Data(base64Encoded:)` alone reads `====` as a zero byte and `AA=A` as two bytes).
    package static func canonicalBase64(_ text: String) -> Data? {
        guard let data = Data(base64Encoded: text), data.base64EncodedString() == text else { return nil }
        return data
    }
}

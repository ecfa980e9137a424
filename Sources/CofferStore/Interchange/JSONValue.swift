/// A parsed JSON value, with numbers kept as they were written: an integer (no fraction, no
/// exponent) is exact, never a double that happens to be whole.
///
/// ```swift
/// let value = try JSONReader.parse(Array(#"{"n": 1, "d": 1.0}"#.utf8))
/// // .object(JSONObject([("n", .integer(1)), ("d", .number(1.0))]))
/// ```
package enum JSONValue: Sendable, Equatable {
    case null
    case bool(Bool)
    case string(String)
    /// An integer as written, within the 64-bit range.
    case integer(Int64)
    /// An integer as written, outside the 64-bit range: its text and nearest double.
    case bigInteger(String, Double)
    /// A number written with a fraction or an exponent.
    case number(Double)
    case array([JSONValue])
    /// An object's members in document order.
    case object(JSONObject)

    /// The value of any number as a double (`nil` for other values).
    package var doubleValue: Double? {
        switch self {
        case .integer(let v): return Double(v)
        case .bigInteger(_, let d), .number(let d): return d
        default: return nil
        }
    }
}

/// A JSON object's members in document order (a key the document repeats appears twice: the
/// reader reports it, and a lookup finds the first). Records' objects are small: a lookup scans them,
/// which beats hashing every key.
package struct JSONObject: Sendable, Equatable {
    package var members: [(key: String, value: JSONValue)]

    package init(_ members: [(key: String, value: JSONValue)] = []) { self.members = members }

    package subscript(key: String) -> JSONValue? {
        for member in members where member.key == key { return member.value }
        return nil
    }

    package var keys: [String] { members.map(\.key) }
    package var count: Int { members.count }

    /// Equal members, in any order.
    package static func == (a: JSONObject, b: JSONObject) -> Bool {
        a.count == b.count && a.members.allSatisfy { b[$0.key] == $0.value }
    }
}

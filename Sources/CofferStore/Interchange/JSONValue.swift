/// A parsed JSON value, with numbers kept as they were written: an integer (no fraction, no
/// exponent) is exact, never a double that happens to be whole.
///
/// ```swift
/// let value = try JSONReader.parse(Array(#"{"n": 1, "d": 1.0}"#.utf8))
/// // .object(["n": .integer(1), "d": .number(1.0)])
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
    case object([String: JSONValue])

    /// The value of any number as a double (`nil` for other values).
    package var doubleValue: Double? {
        switch self {
        case .integer(let v): return Double(v)
        case .bigInteger(_, let d), .number(let d): return d
        default: return nil
        }
    }
}

import Foundation

/// A field value. Plain values stay queryable; encrypted ones are sealed at rest.
/// References are plain record names in the same zone, as in CloudKit.
public enum RecordValue: Sendable, Hashable {
    case string(String)
    case int(Int64)
    case double(Double)
    case bool(Bool)
    case date(Date)
    case bytes([UInt8])
    case reference(String)
    /// A list of values of one scalar type.
    case list([RecordValue])

    /// The value's type; for an empty list, `nil` element type (it takes the field's type).
    public var fieldType: FieldType {
        switch self {
        case .string: return .string
        case .int: return .int
        case .double: return .double
        case .bool: return .bool
        case .date: return .date
        case .bytes: return .bytes
        case .reference: return .reference
        case .list(let items): return .list(items.first?.fieldType.scalar ?? .string)
        }
    }

    public var stringValue: String? { if case .string(let s) = self { return s }; return nil }
    public var intValue: Int64? { if case .int(let v) = self { return v }; return nil }
    public var doubleValue: Double? { if case .double(let v) = self { return v }; return nil }
    public var boolValue: Bool? { if case .bool(let v) = self { return v }; return nil }
    public var dateValue: Date? { if case .date(let v) = self { return v }; return nil }
    public var bytesValue: [UInt8]? { if case .bytes(let v) = self { return v }; return nil }
}

extension RecordValue: ExpressibleByStringLiteral, ExpressibleByIntegerLiteral, ExpressibleByFloatLiteral, ExpressibleByBooleanLiteral {
    public init(stringLiteral value: String) { self = .string(value) }
    public init(integerLiteral value: Int64) { self = .int(value) }
    public init(floatLiteral value: Double) { self = .double(value) }
    public init(booleanLiteral value: Bool) { self = .bool(value) }
}

extension RecordValue: CustomStringConvertible {
    public var description: String {
        switch self {
        case .string(let s): return s
        case .int(let v): return String(v)
        case .double(let v): return String(v)
        case .bool(let v): return String(v)
        case .date(let d): return d.formatted(.iso8601)
        case .bytes(let b): return Data(b).base64EncodedString()
        case .reference(let r): return r
        case .list(let items): return items.map(\.description).joined(separator: ",")
        }
    }
}

/// The type of a field, fixed by its first save for a record type in a zone.
public indirect enum FieldType: Sendable, Hashable, CustomStringConvertible {
    case string, int, double, bool, date, bytes, reference
    case list(FieldType)

    /// The scalar type, or the element type of a list.
    public var scalar: FieldType {
        if case .list(let element) = self { return element }
        return self
    }

    public var isList: Bool { if case .list = self { return true }; return false }

    /// `string`, `int`, … and `[int]` for lists: the names the CLI and the schema table use.
    public var description: String {
        switch self {
        case .string: return "string"
        case .int: return "int"
        case .double: return "double"
        case .bool: return "bool"
        case .date: return "date"
        case .bytes: return "bytes"
        case .reference: return "ref"
        case .list(let element): return "[\(element)]"
        }
    }

    /// Parses ``description``; nil for anything else (nested lists included).
    public init?(name: String) {
        switch name {
        case "string": self = .string
        case "int": self = .int
        case "double": self = .double
        case "bool": self = .bool
        case "date": self = .date
        case "bytes": self = .bytes
        case "ref", "reference": self = .reference
        default:
            guard name.hasPrefix("["), name.hasSuffix("]"), let inner = FieldType(name: String(name.dropFirst().dropLast())),
                  !inner.isList else { return nil }
            self = .list(inner)
        }
    }

    /// Whether the plain form can be indexed and compared (`=`, `<`, begins-with …).
    var isQueryable: Bool {
        switch self {
        case .string, .int, .double, .bool, .date, .reference: return true
        case .bytes, .list: return false
        }
    }
}

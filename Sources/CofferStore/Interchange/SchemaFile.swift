import Foundation

/// A zone's schema as text: record types, their fields, each field's type and whether it is
/// encrypted, and the plain fields to index (see <doc:Schema> for the grammar).
///
/// ```swift
/// let file = try SchemaFile(parsing: """
///     RECORD TYPE Note (
///         title STRING QUERYABLE,
///         body  STRING ENCRYPTED,
///         due   TIMESTAMP,
///         tags  LIST<STRING>
///     );
///     """)
/// let text = SchemaFile(schema: try await db.schema(in: zone)).text
/// ```
///
/// The parser is strict: an unknown word, a type Coffer does not have, a field given twice, an
/// attribute that does not apply, anything after the last statement is a ``ParseError`` naming
/// its line and column.
public struct SchemaFile: Sendable, Hashable {
    /// One field as the file declares it.
    public struct Field: Sendable, Hashable {
        public let name: String
        public let type: FieldType
        public let encrypted: Bool
        /// `QUERYABLE`: build its query index at import (plain fields of a queryable type only).
        public let queryable: Bool
        /// Where the field's name stands in the file (1-based; 0 for a file made from a schema).
        public let line: Int
        public let column: Int

        public init(name: String, type: FieldType, encrypted: Bool, queryable: Bool, line: Int = 0, column: Int = 0) {
            self.name = name
            self.type = type
            self.encrypted = encrypted
            self.queryable = queryable
            self.line = line
            self.column = column
        }

        public var schema: FieldSchema { FieldSchema(type: type, encrypted: encrypted) }
    }

    /// One `RECORD TYPE` statement.
    public struct RecordType: Sendable, Hashable {
        public let name: String
        public let fields: [Field]
        public let line: Int
        public let column: Int
    }

    /// A place in the file and what is wrong there; its description is `LINE:COLUMN: message`.
    public struct ParseError: Error, Sendable, Hashable, CustomStringConvertible {
        public let line: Int
        public let column: Int
        public let message: String
        public var description: String { "\(line):\(column): \(message)" }
    }

    /// The record types, in file order (sorted by name for a file made from a schema).
    public let types: [RecordType]

    /// The declarations the file makes, one a field, in file order.
    public var declarations: [FieldDeclaration] {
        types.flatMap { type in type.fields.map { FieldDeclaration($0.name, of: type.name, type: $0.type, encrypted: $0.encrypted) } }
    }

    /// The file that describes `schema` (record type → field → spec), types and fields sorted by
    /// name; every plain field of a queryable type is marked `QUERYABLE`.
    public init(schema: [String: [String: FieldSchema]]) {
        types = schema.keys.sorted().compactMap { name in
            guard let fields = schema[name], !fields.isEmpty else { return nil }
            return RecordType(name: name, fields: fields.keys.sorted().map { key in
                let spec = fields[key]!
                return Field(name: key, type: spec.type, encrypted: spec.encrypted, queryable: !spec.encrypted && spec.type.isQueryable)
            }, line: 0, column: 0)
        }
    }

    /// Parses the text of a schema file.
    /// - Throws: ``ParseError`` at the first thing the grammar does not allow.
    public init(parsing text: String) throws(ParseError) {
        var parser = Parser(text)
        types = try parser.file()
    }

    /// The file's text, as `coffer schema export` writes it; it parses back to the same types.
    public var text: String {
        var out = "DEFINE SCHEMA\n"
        for type in types {
            out += "\nRECORD TYPE \(type.name) (\n"
            let width = type.fields.map(\.name.count).max() ?? 0
            for (i, field) in type.fields.enumerated() {
                var words = [field.name.padding(toLength: width, withPad: " ", startingAt: 0), Self.typeName(field.type)]
                if field.encrypted { words.append("ENCRYPTED") }
                if field.queryable { words.append("QUERYABLE") }
                out += "    " + words.joined(separator: " ") + (i + 1 < type.fields.count ? ",\n" : "\n")
            }
            out += ");\n"
        }
        return out
    }

    /// The file's name of a type: `STRING`, `INT64`, …, `LIST<STRING>`.
    public static func typeName(_ type: FieldType) -> String {
        switch type {
        case .string: return "STRING"
        case .int: return "INT64"
        case .double: return "DOUBLE"
        case .bool: return "BOOL"
        case .date: return "TIMESTAMP"
        case .bytes: return "BYTES"
        case .reference: return "REFERENCE"
        case .list(let element): return "LIST<\(typeName(element))>"
        }
    }

    /// The scalar types by their names in a file (any case), aliases included.
    static let scalarNames: [String: FieldType] = [
        "STRING": .string, "INT64": .int, "INT": .int, "DOUBLE": .double, "BOOL": .bool, "TIMESTAMP": .date, "DATE": .date,
        "BYTES": .bytes, "REFERENCE": .reference, "REF": .reference,
    ]
    static let typeList = "STRING, INT64, DOUBLE, BOOL, TIMESTAMP, BYTES, REFERENCE or LIST<type>"

    /// A conflict between a field the file declares and the field a schema fixed.
    public struct Conflict: Sendable, Hashable, CustomStringConvertible {
        public let recordType: String
        public let field: Field
        public let fixed: FieldSchema
        public var description: String {
            let place = field.line > 0 ? "\(field.line):\(field.column): " : ""
            return place + "field '\(field.name)' of \(recordType) is \(fixed.encrypted ? "encrypted" : "plain") \(Self.name(fixed.type)) in the zone "
                + "(fixed by its first save), not \(field.encrypted ? "encrypted" : "plain") \(Self.name(field.type)); "
                + "drop it first ('coffer schema drop-field') if no record uses it"
        }

        private static func name(_ type: FieldType) -> String { SchemaFile.typeName(type) }
    }

    /// The fields of the file that a zone's `schema` has with another type or encryption.
    public func conflicts(with schema: [String: [String: FieldSchema]]) -> [Conflict] {
        types.flatMap { type in
            type.fields.compactMap { field in
                guard let fixed = schema[type.name]?[field.name], fixed != field.schema else { return nil }
                return Conflict(recordType: type.name, field: field, fixed: fixed)
            }
        }
    }

    /// The fields of the file that `schema` does not have yet.
    public func newFields(comparedWith schema: [String: [String: FieldSchema]]) -> [(recordType: String, field: Field)] {
        types.flatMap { type in type.fields.filter { schema[type.name]?[$0.name] == nil }.map { (recordType: type.name, field: $0) } }
    }
}

extension SchemaFile {
    /// A hand-written recursive-descent parser over the file's characters.
    struct Parser {
        private let scalars: [Unicode.Scalar]
        private var i = 0
        private var line = 1
        private var column = 1

        init(_ text: String) { scalars = Array(text.unicodeScalars) }

        private func fail(_ message: String, line: Int? = nil, column: Int? = nil) -> ParseError {
            ParseError(line: line ?? self.line, column: column ?? self.column, message: message)
        }

        private var atEnd: Bool { i >= scalars.count }
        private var current: Unicode.Scalar? { atEnd ? nil : scalars[i] }

        private mutating func advance() {
            if scalars[i] == "\n" { line += 1; column = 1 } else { column += 1 }
            i += 1
        }

        /// Skips spaces, line ends and comments (`--` or `//` to the end of the line).
        private mutating func skipSpace() throws(ParseError) {
            while let c = current {
                if c == " " || c == "\t" || c == "\n" || c == "\r" {
                    advance()
                } else if (c == "-" || c == "/"), i + 1 < scalars.count, scalars[i + 1] == c {
                    // A comment holds no control character but a tab (a terminal would act on
                    // an escape sequence) and no invisible format character (a bidirectional
                    // override could make it show as other text).
                    while let d = current, d != "\n" {
                        if d.properties.generalCategory == .control && d != "\t" && d != "\r" || !d.isASCII && d.properties.generalCategory == .format {
                            throw fail("a \(d.properties.generalCategory == .control ? "control" : "format") character (U+\(String(d.value, radix: 16, uppercase: true))) is not allowed in a comment")
                        }
                        advance()
                    }
                } else if c.properties.generalCategory == .control || c == "\u{FEFF}" && i > 0 {
                    throw fail("a control character (U+\(String(c.value, radix: 16, uppercase: true))) is not allowed here")
                } else if c == "\u{FEFF}" {
                    advance() // a byte order mark at the start
                } else {
                    return
                }
            }
        }

        private static func isWordStart(_ c: Unicode.Scalar) -> Bool { c.isASCII && (c.properties.isAlphabetic || c == "_") }
        private static func isWordPart(_ c: Unicode.Scalar) -> Bool { c.isASCII && (c.properties.isAlphabetic || c == "_" || ("0"..."9").contains(c)) }

        /// The next word (letters, digits, `_`), where it starts; nil when the next thing is not one.
        private mutating func word() throws(ParseError) -> (text: String, line: Int, column: Int)? {
            try skipSpace()
            guard let c = current, Self.isWordStart(c) || ("0"..."9").contains(c) else { return nil }
            let start = (line, column)
            var text = ""
            while let d = current, Self.isWordPart(d) { text.unicodeScalars.append(d); advance() }
            return (text, start.0, start.1)
        }

        /// What stands at the current place, shortened, for an error.
        private func shown() -> String {
            guard let c = current else { return "the end of the file" }
            if Self.isWordPart(c) {
                var text = "", j = i
                while j < scalars.count, Self.isWordPart(scalars[j]), text.count < 40 { text.unicodeScalars.append(scalars[j]); j += 1 }
                return "'\(text)'"
            }
            if c.properties.generalCategory == .control || !c.isASCII && c.properties.generalCategory == .format {
                return "U+\(String(c.value, radix: 16, uppercase: true))"
            }
            return "'\(Character(c))'"
        }

        private mutating func expectKeyword(_ keyword: String) throws(ParseError) {
            try skipSpace()
            let save = (i, line, column)
            guard let w = try word(), w.text.uppercased() == keyword else {
                (i, line, column) = save
                throw fail("expected \(keyword), found \(shown())", line: save.1, column: save.2)
            }
        }

        private mutating func symbol(_ s: Unicode.Scalar) throws(ParseError) -> Bool {
            try skipSpace()
            guard current == s else { return false }
            advance()
            return true
        }

        private mutating func expectSymbol(_ s: Unicode.Scalar, _ what: String) throws(ParseError) {
            guard try symbol(s) else { throw fail("expected \(what), found \(shown())") }
        }

        mutating func file() throws(ParseError) -> [RecordType] {
            var types = [RecordType]()
            var seen = [String: (Int, Int)]()
            try skipSpace()
            // An optional `DEFINE SCHEMA` header, as cktool writes it.
            let save = (i, line, column)
            if let w = try word(), w.text.uppercased() == "DEFINE" {
                try expectKeyword("SCHEMA")
            } else {
                (i, line, column) = save
            }
            while true {
                try skipSpace()
                if atEnd { break }
                let (l, c) = (line, column)
                let start = i
                guard let w = try word(), w.text.uppercased() == "RECORD" else {
                    (i, line, column) = (start, l, c)
                    throw fail("expected RECORD TYPE, found \(shown())", line: l, column: c)
                }
                try expectKeyword("TYPE")
                let type = try recordType(line: l, column: c)
                if let first = seen[type.name] {
                    throw fail("record type \(type.name) is declared twice (first at \(first.0):\(first.1))", line: l, column: c)
                }
                seen[type.name] = (l, c)
                types.append(type)
                _ = try symbol(";")
            }
            return types
        }

        private mutating func name(_ what: String) throws(ParseError) -> (text: String, line: Int, column: Int) {
            try skipSpace()
            let (l, c) = (line, column)
            guard let w = try word() else { throw fail("expected a \(what), found \(shown())", line: l, column: c) }
            guard Names.isIdentifier(w.text) else {
                throw fail("\(what) '\(w.text)' must start with a letter, then letters, digits or '_' (at most \(Names.maxLength))", line: l, column: c)
            }
            return w
        }

        private mutating func recordType(line l: Int, column c: Int) throws(ParseError) -> RecordType {
            let typeName = try name("record type name")
            try expectSymbol("(", "'(' after the record type name")
            var fields = [Field]()
            var seen = [String: (Int, Int)]()
            if try !symbol(")") {
                while true {
                    let field = try self.field()
                    if let first = seen[field.name] {
                        throw fail("field '\(field.name)' is declared twice in \(typeName.text) (first at \(first.0):\(first.1))",
                                   line: field.line, column: field.column)
                    }
                    seen[field.name] = (field.line, field.column)
                    fields.append(field)
                    if try symbol(")") { break }
                    guard try symbol(",") else { throw fail("expected ',' or ')' after field '\(field.name)', found \(shown())") }
                    if try symbol(")") { break } // a trailing comma
                }
            }
            guard !fields.isEmpty else {
                throw fail("record type \(typeName.text) has no fields: a record type exists through its fields", line: typeName.line, column: typeName.column)
            }
            return RecordType(name: typeName.text, fields: fields, line: l, column: c)
        }

        private mutating func field() throws(ParseError) -> Field {
            let fieldName = try name("field name")
            let type = try self.type()
            var encrypted = false, queryable = false
            while true {
                try skipSpace()
                let (l, c) = (line, column)
                let save = (i, line, column)
                guard let w = try word() else { break }
                switch w.text.uppercased() {
                case "ENCRYPTED":
                    guard !encrypted else { throw fail("ENCRYPTED is given twice for field '\(fieldName.text)'", line: l, column: c) }
                    encrypted = true
                case "QUERYABLE":
                    guard !queryable else { throw fail("QUERYABLE is given twice for field '\(fieldName.text)'", line: l, column: c) }
                    queryable = true
                default:
                    (i, line, column) = save
                    throw fail("unknown attribute '\(w.text)' for field '\(fieldName.text)'; use ENCRYPTED or QUERYABLE (or is a ',' missing before it?)", line: l, column: c)
                }
                if encrypted && queryable {
                    throw fail("field '\(fieldName.text)' is ENCRYPTED: an encrypted field cannot be QUERYABLE", line: l, column: c)
                }
            }
            if queryable && !type.isQueryable {
                throw fail("field '\(fieldName.text)' is \(SchemaFile.typeName(type)), which cannot be queried: only STRING, INT64, DOUBLE, BOOL, TIMESTAMP and REFERENCE fields are QUERYABLE",
                           line: fieldName.line, column: fieldName.column)
            }
            return Field(name: fieldName.text, type: type, encrypted: encrypted, queryable: queryable, line: fieldName.line, column: fieldName.column)
        }

        private mutating func type() throws(ParseError) -> FieldType {
            try skipSpace()
            let (l, c) = (line, column)
            guard let w = try word() else { throw fail("expected a type (\(SchemaFile.typeList)), found \(shown())", line: l, column: c) }
            let upper = w.text.uppercased()
            if upper == "LIST" {
                try expectSymbol("<", "'<' after LIST")
                try skipSpace()
                let (el, ec) = (line, column)
                guard let inner = try word() else { throw fail("expected the element type of the list, found \(shown())", line: el, column: ec) }
                guard let scalar = SchemaFile.scalarNames[inner.text.uppercased()] else {
                    if inner.text.uppercased() == "LIST" { throw fail("a list of lists is not a Coffer type", line: el, column: ec) }
                    throw fail("unknown type '\(inner.text)'; use \(SchemaFile.typeList)", line: el, column: ec)
                }
                try expectSymbol(">", "'>' after the list's element type")
                return .list(scalar)
            }
            guard let scalar = SchemaFile.scalarNames[upper] else {
                throw fail("unknown type '\(w.text)'; use \(SchemaFile.typeList)", line: l, column: c)
            }
            return scalar
        }
    }
}

import Foundation

/// Coffer's binary encoding of the server API's bulk messages (a read's request and answer, a
/// batch of writes, a stage's part and answer), in place of JSON: bytes travel as themselves
/// rather than as base64 in escaped strings, and a body is decoded once, with no second pass to
/// find keys the type does not know. A body starts with the four bytes `CWB` 0x01; then one value:
///
/// | tag | value | then |
/// | --- | --- | --- |
/// | 0 | null | |
/// | 1, 2 | false, true | |
/// | 3 | integer | 8 bytes, little-endian two's complement |
/// | 4 | double | 8 bytes, little-endian IEEE 754 (finite only) |
/// | 5 | string | 4-byte little-endian length, then that many bytes of valid UTF-8 |
/// | 6 | bytes | 4-byte length, then the bytes |
/// | 7 | array | 4-byte length of the items, then the items |
/// | 8 | object | 4-byte length of the members, then each member: its key (4-byte length and UTF-8) and value |
///
/// The values map to a Codable type as JSON's do (a `Data` is tag 6; an absent optional is left
/// out of its object). Decoding refuses a key the type does not know, a key given twice, a
/// length that runs past its container, bytes after the value, non-finite doubles, invalid
/// UTF-8 and containers nested over 64 deep.
package enum WireBinary {
    /// The first bytes of a body in this encoding (no JSON text starts with them).
    package static let magic: [UInt8] = [0x43, 0x57, 0x42, 0x01]
    /// The deepest nesting of containers a decoded body may have.
    static let maxDepth = 64

    enum Tag: UInt8 {
        case null = 0, no = 1, yes = 2, int = 3, double = 4, string = 5, bytes = 6, array = 7, object = 8
    }

    /// Whether `data` is a body in this encoding.
    package static func isBinary(_ data: Data) -> Bool {
        data.count >= 4 && data.prefix(4).elementsEqual(magic)
    }

    /// `value` in this encoding, the magic first.
    package static func encode<T: Encodable>(_ value: T) throws -> Data {
        let writer = Writer()
        writer.bytes.reserveCapacity(4_096)
        writer.bytes.append(contentsOf: magic)
        try writer.value(value, path: [])
        return Data(writer.bytes)
    }

    /// Decodes a body in this encoding.
    /// - Throws: `DecodingError` for a body that is not the encoding of a `T` (see the type).
    package static func decode<T: Decodable>(_ type: T.Type, from data: Data) throws -> T {
        guard isBinary(data) else { throw corrupt([], "not a binary body") }
        return try data.withUnsafeBytes { raw in
            let reader = Reader(raw)
            let end = try reader.end(of: 4, within: raw.count, nil)
            guard end == raw.count else { throw corrupt([], "bytes after the value") }
            return try reader.value(T.self, at: 4, nil, depth: 0)
        }
    }

    static func corrupt(_ path: [any CodingKey], _ what: String) -> DecodingError {
        .dataCorrupted(DecodingError.Context(codingPath: path, debugDescription: what))
    }

    static func mismatch(_ type: Any.Type, _ path: [any CodingKey]) -> DecodingError {
        .typeMismatch(type, DecodingError.Context(codingPath: path, debugDescription: "a value of another type"))
    }

    /// Where a value is in the body, as a chain from the top: made into a coding path only for
    /// an error (an array of keys made for every value cost more than the decoding).
    final class PathNode: Sendable {
        let parent: PathNode?
        let key: String?
        let index: Int?

        init(parent: PathNode?, key: String? = nil, index: Int? = nil) {
            self.parent = parent
            self.key = key
            self.index = index
        }

        static func path(_ node: PathNode?) -> [any CodingKey] {
            var keys = [any CodingKey]()
            var node = node
            while let n = node {
                if let key = n.key { keys.append(Name(key)) } else { keys.append(Index(n.index ?? 0)) }
                node = n.parent
            }
            return keys.reversed()
        }
    }

    struct Name: CodingKey {
        var stringValue: String
        var intValue: Int? { nil }
        init(_ name: String) { stringValue = name }
        init?(stringValue: String) { self.stringValue = stringValue }
        init?(intValue: Int) { nil }
    }

    struct Index: CodingKey {
        var intValue: Int?
        var stringValue: String { "\(intValue ?? 0)" }
        init(_ index: Int) { intValue = index }
        init?(stringValue: String) { nil }
        init?(intValue: Int) { self.intValue = intValue }
    }
}

// MARK: - Encoding

extension WireBinary {
    /// The bytes written so far, shared by every encoder and container of one body.
    final class Writer {
        var bytes: [UInt8] = []

        func tag(_ tag: Tag) { bytes.append(tag.rawValue) }

        func uint32(_ n: Int, path: @autoclosure () -> [any CodingKey]) throws {
            guard n >= 0, n <= Int(UInt32.max) else {
                throw EncodingError.invalidValue(n, EncodingError.Context(codingPath: path(), debugDescription: "over 4 GiB"))
            }
            withUnsafeBytes(of: UInt32(n).littleEndian) { bytes.append(contentsOf: $0) }
        }

        func int(_ n: Int64) {
            tag(.int)
            withUnsafeBytes(of: n.littleEndian) { bytes.append(contentsOf: $0) }
        }

        func double(_ d: Double, path: @autoclosure () -> [any CodingKey]) throws {
            guard d.isFinite else {
                throw EncodingError.invalidValue(d, EncodingError.Context(codingPath: path(), debugDescription: "a double that is not finite"))
            }
            tag(.double)
            withUnsafeBytes(of: d.bitPattern.littleEndian) { bytes.append(contentsOf: $0) }
        }

        func text(_ s: String, path: @autoclosure () -> [any CodingKey]) throws {
            var s = s
            try s.withUTF8 { utf8 in
                try uint32(utf8.count, path: path())
                bytes.append(contentsOf: utf8)
            }
        }

        func string(_ s: String, path: @autoclosure () -> [any CodingKey]) throws {
            tag(.string)
            try text(s, path: path())
        }

        func data(_ d: Data, path: @autoclosure () -> [any CodingKey]) throws {
            tag(.bytes)
            try uint32(d.count, path: path())
            bytes.append(contentsOf: d)
        }

        /// Opens a container: its tag and room for its length; returns where the length goes.
        func open(_ tag: Tag) -> Int {
            self.tag(tag)
            let at = bytes.count
            bytes.append(contentsOf: [0, 0, 0, 0])
            return at
        }

        /// Writes the length of the container whose length goes at `at`.
        func close(_ at: Int, path: @autoclosure () -> [any CodingKey]) throws {
            let length = bytes.count - at - 4
            guard length <= Int(UInt32.max) else {
                throw EncodingError.invalidValue(length, EncodingError.Context(codingPath: path(), debugDescription: "over 4 GiB"))
            }
            withUnsafeBytes(of: UInt32(length).littleEndian) { raw in
                for i in 0..<4 { bytes[at + i] = raw[i] }
            }
        }

        /// Writes one value: the common types at once, any other through its `encode(to:)`.
        func value<T: Encodable>(_ value: T, path: @autoclosure () -> [any CodingKey]) throws {
            // Compared by type first: a cast that fails costs a search of the runtime's tables.
            if T.self == Data.self { return try data(value as! Data, path: path()) }
            if T.self == String.self { return try string(value as! String, path: path()) }
            if T.self == Int64.self { return int(value as! Int64) }
            if T.self == Int.self { return int(Int64(value as! Int)) }
            if T.self == Bool.self { return tag(value as! Bool ? .yes : .no) }
            if T.self == Double.self { return try double(value as! Double, path: path()) }
            // The types a body carries by the thousand write their members in one pass.
            if T.self == WireVersion.self { return try (value as! WireVersion).write(to: self) }
            if T.self == WireWrite.self { return try (value as! WireWrite).write(to: self) }
            do {
                // The path is not kept below the top: building it for every value cost more
                // than the encoding (an encoding error is the program's, not the input's).
                let encoder = ValueEncoder(writer: self, codingPath: [])
                let mark = bytes.count
                try value.encode(to: encoder)
                if let open = encoder.opened {
                    try close(open, path: path())
                } else if bytes.count == mark {
                    // A value that encoded nothing: an empty object, as JSON writes `{}`.
                    try close(self.open(.object), path: path())
                }
            }
        }
    }

    /// The encoder one value is encoded with: it opens at most one container, closed once the
    /// value's `encode(to:)` returns.
    final class ValueEncoder: Encoder {
        let writer: Writer
        let codingPath: [any CodingKey]
        var userInfo: [CodingUserInfoKey: Any] { [:] }
        /// Where the length of the container opened goes.
        var opened: Int?

        init(writer: Writer, codingPath: [any CodingKey]) {
            self.writer = writer
            self.codingPath = codingPath
        }

        func container<Key: CodingKey>(keyedBy type: Key.Type) -> KeyedEncodingContainer<Key> {
            if opened == nil { opened = writer.open(.object) }
            return KeyedEncodingContainer(KeyedWriter<Key>(writer: writer, codingPath: codingPath))
        }

        func unkeyedContainer() -> any UnkeyedEncodingContainer {
            if opened == nil { opened = writer.open(.array) }
            return UnkeyedWriter(writer: writer, codingPath: codingPath)
        }

        func singleValueContainer() -> any SingleValueEncodingContainer { SingleWriter(writer: writer, codingPath: codingPath) }
    }

    struct KeyedWriter<Key: CodingKey>: KeyedEncodingContainerProtocol {
        let writer: Writer
        let codingPath: [any CodingKey]

        mutating func encodeNil(forKey key: Key) throws {
            try writer.text(key.stringValue, path: codingPath)
            writer.tag(.null)
        }

        mutating func encode<T: Encodable>(_ value: T, forKey key: Key) throws {
            try writer.text(key.stringValue, path: codingPath)
            try writer.value(value, path: codingPath)
        }

        mutating func nestedContainer<NestedKey: CodingKey>(keyedBy keyType: NestedKey.Type, forKey key: Key) -> KeyedEncodingContainer<NestedKey> {
            // Not used by the API's types (their coding is synthesized): a nested container
            // would have no point at which its length is known.
            preconditionFailure("WireBinary does not encode nested containers")
        }

        mutating func nestedUnkeyedContainer(forKey key: Key) -> any UnkeyedEncodingContainer {
            preconditionFailure("WireBinary does not encode nested containers")
        }

        mutating func superEncoder() -> any Encoder { preconditionFailure("WireBinary does not encode super encoders") }
        mutating func superEncoder(forKey key: Key) -> any Encoder { preconditionFailure("WireBinary does not encode super encoders") }
    }

    struct UnkeyedWriter: UnkeyedEncodingContainer {
        let writer: Writer
        let codingPath: [any CodingKey]
        var count = 0

        mutating func encodeNil() throws {
            writer.tag(.null)
            count += 1
        }

        mutating func encode<T: Encodable>(_ value: T) throws {
            try writer.value(value, path: codingPath)
            count += 1
        }

        mutating func nestedContainer<NestedKey: CodingKey>(keyedBy keyType: NestedKey.Type) -> KeyedEncodingContainer<NestedKey> {
            preconditionFailure("WireBinary does not encode nested containers")
        }

        mutating func nestedUnkeyedContainer() -> any UnkeyedEncodingContainer {
            preconditionFailure("WireBinary does not encode nested containers")
        }

        mutating func superEncoder() -> any Encoder { preconditionFailure("WireBinary does not encode super encoders") }
    }

    struct SingleWriter: SingleValueEncodingContainer {
        let writer: Writer
        let codingPath: [any CodingKey]

        mutating func encodeNil() throws { writer.tag(.null) }
        mutating func encode(_ value: Bool) throws { writer.tag(value ? .yes : .no) }
        mutating func encode(_ value: String) throws { try writer.string(value, path: codingPath) }
        mutating func encode(_ value: Double) throws { try writer.double(value, path: codingPath) }
        mutating func encode(_ value: Float) throws { try writer.double(Double(value), path: codingPath) }
        mutating func encode(_ value: Int) throws { writer.int(Int64(value)) }
        mutating func encode(_ value: Int8) throws { writer.int(Int64(value)) }
        mutating func encode(_ value: Int16) throws { writer.int(Int64(value)) }
        mutating func encode(_ value: Int32) throws { writer.int(Int64(value)) }
        mutating func encode(_ value: Int64) throws { writer.int(value) }
        mutating func encode(_ value: UInt) throws { try encodeUnsigned(UInt64(value)) }
        mutating func encode(_ value: UInt8) throws { writer.int(Int64(value)) }
        mutating func encode(_ value: UInt16) throws { writer.int(Int64(value)) }
        mutating func encode(_ value: UInt32) throws { writer.int(Int64(value)) }
        mutating func encode(_ value: UInt64) throws { try encodeUnsigned(value) }
        mutating func encode<T: Encodable>(_ value: T) throws { try writer.value(value, path: codingPath) }

        private func encodeUnsigned(_ value: UInt64) throws {
            guard let n = Int64(exactly: value) else {
                throw EncodingError.invalidValue(value, EncodingError.Context(codingPath: codingPath, debugDescription: "over Int64.max"))
            }
            writer.int(n)
        }
    }
}

// MARK: - Decoding

extension WireBinary {
    /// The body's bytes, and the reads every decoder and container of it share. A value's place
    /// (`at`) is a chain of nodes, made into a coding path only for an error.
    final class Reader {
        let raw: UnsafeRawBufferPointer

        init(_ raw: UnsafeRawBufferPointer) { self.raw = raw }

        func tag(at i: Int, _ at: @autoclosure () -> PathNode?) throws -> Tag {
            guard i < raw.count, let tag = Tag(rawValue: raw[i]) else { throw corrupt(PathNode.path(at()), "an unknown value tag") }
            return tag
        }

        func uint32(at i: Int) -> Int {
            Int(raw.loadUnaligned(fromByteOffset: i, as: UInt32.self).littleEndian)
        }

        func int64(at i: Int) -> Int64 {
            Int64(littleEndian: raw.loadUnaligned(fromByteOffset: i, as: Int64.self))
        }

        /// Where the value at `i` ends; it must end by `limit`.
        func end(of i: Int, within limit: Int, _ at: @autoclosure () -> PathNode?) throws -> Int {
            let end: Int
            switch try tag(at: i, at()) {
            case .null, .no, .yes: end = i + 1
            case .int, .double: end = i + 9
            case .string, .bytes, .array, .object:
                guard i + 5 <= limit else { throw corrupt(PathNode.path(at()), "a length that runs past its container") }
                end = i + 5 + uint32(at: i + 1)
            }
            guard end <= limit else { throw corrupt(PathNode.path(at()), "a length that runs past its container") }
            return end
        }

        /// The UTF-8 text of `count` bytes at `i`, which must be valid.
        func text(at i: Int, count: Int, _ at: @autoclosure () -> PathNode?) throws -> String {
            let bytes = UnsafeRawBufferPointer(rebasing: raw[i..<(i + count)])
            // ASCII (keys, names, user ids) is valid UTF-8 as it is: made into a string without
            // the validating initializer's generic path, which led a pull's profile.
            if bytes.allSatisfy({ $0 < 0x80 }) { return String(decoding: bytes, as: UTF8.self) }
            guard let text = String(validating: bytes, as: UTF8.self) else {
                throw corrupt(PathNode.path(at()), "text that is not UTF-8")
            }
            return text
        }

        /// Whether the `count` bytes at `i` are `name`'s UTF-8.
        func bytes(at i: Int, count: Int, equal name: String) -> Bool {
            var name = name
            return name.withUTF8 { utf8 in
                utf8.count == count && (count == 0 || memcmp(raw.baseAddress! + i, utf8.baseAddress!, count) == 0)
            }
        }

        /// Decodes the value at `i` (whose end was checked) as a `T`.
        func value<T: Decodable>(_ type: T.Type, at i: Int, _ at: @autoclosure () -> PathNode?, depth: Int) throws -> T {
            if T.self == Data.self {
                guard try tag(at: i, at()) == .bytes else { throw mismatch(T.self, PathNode.path(at())) }
                return Data(raw[(i + 5)..<(i + 5 + uint32(at: i + 1))]) as! T
            }
            if T.self == String.self { return try string(at: i, at()) as! T }
            if T.self == Int64.self { return try int(at: i, at()) as! T }
            if T.self == Bool.self { return try bool(at: i, at()) as! T }
            if T.self == Double.self { return try double(at: i, at()) as! T }
            let node = at()
            guard depth < maxDepth else { throw corrupt(PathNode.path(node), "containers nested over \(maxDepth) deep") }
            let decoder = ValueDecoder(reader: self, at: i, node: node, depth: depth + 1)
            // The two types a body carries by the thousand read their members in one pass (see ``Members``).
            if T.self == WireVersion.self { return try WireVersion(wire: decoder) as! T }
            if T.self == WireWrite.self { return try WireWrite(wire: decoder) as! T }
            return try T(from: decoder)
        }

        func string(at i: Int, _ at: @autoclosure () -> PathNode?) throws -> String {
            guard try tag(at: i, at()) == .string else { throw mismatch(String.self, PathNode.path(at())) }
            return try text(at: i + 5, count: uint32(at: i + 1), at())
        }

        func int(at i: Int, _ at: @autoclosure () -> PathNode?) throws -> Int64 {
            guard try tag(at: i, at()) == .int else { throw mismatch(Int64.self, PathNode.path(at())) }
            return int64(at: i + 1)
        }

        func bool(at i: Int, _ at: @autoclosure () -> PathNode?) throws -> Bool {
            switch try tag(at: i, at()) {
            case .yes: return true
            case .no: return false
            default: throw mismatch(Bool.self, PathNode.path(at()))
            }
        }

        func double(at i: Int, _ at: @autoclosure () -> PathNode?) throws -> Double {
            guard try tag(at: i, at()) == .double else { throw mismatch(Double.self, PathNode.path(at())) }
            let d = Double(bitPattern: UInt64(bitPattern: int64(at: i + 1)))
            guard d.isFinite else { throw corrupt(PathNode.path(at()), "a double that is not finite") }
            return d
        }

        func exactly<N: FixedWidthInteger>(_ type: N.Type, at i: Int, _ at: @autoclosure () -> PathNode?) throws -> N {
            guard let n = N(exactly: try int(at: i, at())) else { throw mismatch(N.self, PathNode.path(at())) }
            return n
        }
    }

    struct ValueDecoder: Decoder {
        let reader: Reader
        let at: Int
        let node: PathNode?
        let depth: Int
        var codingPath: [any CodingKey] { PathNode.path(node) }
        var userInfo: [CodingUserInfoKey: Any] { [:] }

        init(reader: Reader, at: Int, node: PathNode?, depth: Int) {
            self.reader = reader
            self.at = at
            self.node = node
            self.depth = depth
        }

        func container<Key: CodingKey>(keyedBy type: Key.Type) throws -> KeyedDecodingContainer<Key> {
            KeyedDecodingContainer(try KeyedReader<Key>(self))
        }

        func unkeyedContainer() throws -> any UnkeyedDecodingContainer {
            guard try reader.tag(at: at, node) == .array else { throw mismatch([Any].self, codingPath) }
            return UnkeyedReader(decoder: self, cursor: at + 5, end: at + 5 + reader.uint32(at: at + 1))
        }

        func singleValueContainer() throws -> any SingleValueDecodingContainer { SingleReader(decoder: self) }
    }

    /// A member of an object: where its key's bytes and its value are.
    struct Member {
        let keyAt: Int, keyCount: Int, at: Int
    }

    struct KeyedReader<Key: CodingKey>: KeyedDecodingContainerProtocol {
        let decoder: ValueDecoder
        let members: [Member]
        var codingPath: [any CodingKey] { decoder.codingPath }
        var allKeys: [Key] {
            members.compactMap { (try? decoder.reader.text(at: $0.keyAt, count: $0.keyCount, nil)).flatMap(Key.init(stringValue:)) }
        }

        /// Reads the object's members; refuses a key `Key` does not know, and one given twice.
        init(_ decoder: ValueDecoder) throws {
            self.decoder = decoder
            let reader = decoder.reader, node = decoder.node
            guard try reader.tag(at: decoder.at, node) == .object else { throw mismatch([String: Any].self, PathNode.path(node)) }
            let end = decoder.at + 5 + reader.uint32(at: decoder.at + 1)
            var members = [Member]()
            var i = decoder.at + 5
            while i < end {
                guard i + 4 <= end else { throw corrupt(PathNode.path(node), "a key that runs past its object") }
                let count = reader.uint32(at: i)
                guard i + 4 + count <= end else { throw corrupt(PathNode.path(node), "a key that runs past its object") }
                let name = try reader.text(at: i + 4, count: count, node)
                guard Key(stringValue: name) != nil else { throw corrupt(PathNode.path(node), "an unknown field '\(Names.printable(name))'") }
                guard !members.contains(where: { reader.bytes(at: $0.keyAt, count: $0.keyCount, equal: name) }) else {
                    throw corrupt(PathNode.path(node), "the field '\(name)' twice")
                }
                let at = i + 4 + count
                i = try reader.end(of: at, within: end, PathNode(parent: node, key: name))
                members.append(Member(keyAt: at - count, keyCount: count, at: at))
            }
            self.members = members
        }

        func member(_ key: Key) -> Member? {
            let name = key.stringValue
            return members.first { decoder.reader.bytes(at: $0.keyAt, count: $0.keyCount, equal: name) }
        }

        func at(_ key: Key) throws -> Int {
            guard let member = member(key) else {
                throw DecodingError.keyNotFound(key, DecodingError.Context(codingPath: codingPath, debugDescription: "no value"))
            }
            return member.at
        }

        func node(_ key: Key) -> PathNode { PathNode(parent: decoder.node, key: key.stringValue) }

        func contains(_ key: Key) -> Bool { member(key) != nil }

        func decodeNil(forKey key: Key) throws -> Bool {
            try decoder.reader.tag(at: try at(key), node(key)) == .null
        }

        func decode<T: Decodable>(_ type: T.Type, forKey key: Key) throws -> T {
            try decoder.reader.value(T.self, at: try at(key), node(key), depth: decoder.depth)
        }

        func nestedContainer<NestedKey: CodingKey>(keyedBy type: NestedKey.Type, forKey key: Key) throws -> KeyedDecodingContainer<NestedKey> {
            try ValueDecoder(reader: decoder.reader, at: try at(key), node: node(key), depth: decoder.depth + 1).container(keyedBy: type)
        }

        func nestedUnkeyedContainer(forKey key: Key) throws -> any UnkeyedDecodingContainer {
            try ValueDecoder(reader: decoder.reader, at: try at(key), node: node(key), depth: decoder.depth + 1).unkeyedContainer()
        }

        func superDecoder() throws -> any Decoder { throw corrupt(codingPath, "no super decoder") }
        func superDecoder(forKey key: Key) throws -> any Decoder { throw corrupt(codingPath, "no super decoder") }
    }

    struct UnkeyedReader: UnkeyedDecodingContainer {
        let decoder: ValueDecoder
        var cursor: Int
        let end: Int
        var currentIndex = 0
        var codingPath: [any CodingKey] { decoder.codingPath }
        var count: Int? { nil }
        var isAtEnd: Bool { cursor >= end }

        init(decoder: ValueDecoder, cursor: Int, end: Int) {
            self.decoder = decoder
            self.cursor = cursor
            self.end = end
        }

        private var node: PathNode { PathNode(parent: decoder.node, index: currentIndex) }

        /// The next item's start, after checking where it ends; moves past it.
        private mutating func next() throws -> Int {
            guard !isAtEnd else {
                throw DecodingError.valueNotFound(Any.self, DecodingError.Context(codingPath: PathNode.path(node), debugDescription: "no more items"))
            }
            let at = cursor
            cursor = try decoder.reader.end(of: at, within: end, node)
            currentIndex += 1
            return at
        }

        mutating func decodeNil() throws -> Bool {
            guard !isAtEnd, try decoder.reader.tag(at: cursor, node) == .null else { return false }
            _ = try next()
            return true
        }

        mutating func decode<T: Decodable>(_ type: T.Type) throws -> T {
            let here = currentIndex, parent = decoder.node
            let at = try next()
            return try decoder.reader.value(T.self, at: at, PathNode(parent: parent, index: here), depth: decoder.depth)
        }

        mutating func nestedContainer<NestedKey: CodingKey>(keyedBy type: NestedKey.Type) throws -> KeyedDecodingContainer<NestedKey> {
            let node = self.node
            return try ValueDecoder(reader: decoder.reader, at: try next(), node: node, depth: decoder.depth + 1).container(keyedBy: type)
        }

        mutating func nestedUnkeyedContainer() throws -> any UnkeyedDecodingContainer {
            let node = self.node
            return try ValueDecoder(reader: decoder.reader, at: try next(), node: node, depth: decoder.depth + 1).unkeyedContainer()
        }

        mutating func superDecoder() throws -> any Decoder { throw corrupt(codingPath, "no super decoder") }
    }

    struct SingleReader: SingleValueDecodingContainer {
        let decoder: ValueDecoder
        var codingPath: [any CodingKey] { decoder.codingPath }
        private var reader: Reader { decoder.reader }
        private var at: Int { decoder.at }
        private var node: PathNode? { decoder.node }

        func decodeNil() -> Bool { (try? reader.tag(at: at, node)) == .null }
        func decode(_ type: Bool.Type) throws -> Bool { try reader.bool(at: at, node) }
        func decode(_ type: String.Type) throws -> String { try reader.string(at: at, node) }
        func decode(_ type: Double.Type) throws -> Double { try reader.double(at: at, node) }
        func decode(_ type: Float.Type) throws -> Float {
            guard let f = Float(exactly: try reader.double(at: at, node)) else { throw mismatch(Float.self, codingPath) }
            return f
        }
        func decode(_ type: Int.Type) throws -> Int { try reader.exactly(Int.self, at: at, node) }
        func decode(_ type: Int8.Type) throws -> Int8 { try reader.exactly(Int8.self, at: at, node) }
        func decode(_ type: Int16.Type) throws -> Int16 { try reader.exactly(Int16.self, at: at, node) }
        func decode(_ type: Int32.Type) throws -> Int32 { try reader.exactly(Int32.self, at: at, node) }
        func decode(_ type: Int64.Type) throws -> Int64 { try reader.int(at: at, node) }
        func decode(_ type: UInt.Type) throws -> UInt { try reader.exactly(UInt.self, at: at, node) }
        func decode(_ type: UInt8.Type) throws -> UInt8 { try reader.exactly(UInt8.self, at: at, node) }
        func decode(_ type: UInt16.Type) throws -> UInt16 { try reader.exactly(UInt16.self, at: at, node) }
        func decode(_ type: UInt32.Type) throws -> UInt32 { try reader.exactly(UInt32.self, at: at, node) }
        func decode(_ type: UInt64.Type) throws -> UInt64 { try reader.exactly(UInt64.self, at: at, node) }
        func decode<T: Decodable>(_ type: T.Type) throws -> T { try reader.value(T.self, at: at, node, depth: decoder.depth) }
    }
}

// MARK: - The bulk types, read in one pass

extension WireBinary {
    /// An object's members for a type that reads them itself (``WireVersion``, ``WireWrite``),
    /// where `Codable`'s keyed container looks each key up among the members, a key at a time
    /// (a `records/modify` batch and a pull's page carry thousands of them). The checks, their
    /// order and the errors are the keyed container's: first every member (lengths, the key's
    /// text, a key the type does not know, a key given twice), then the values, read in `keys`'
    /// order, which must be the order of the type's stored properties (its synthesized
    /// `init(from:)` reads them in that order, for any other decoder).
    struct Members {
        let decoder: ValueDecoder
        let keys: [String]
        /// Where each key's value starts, in `keys`' order; nil when the object leaves it out.
        private var at: [Int?]

        init(_ decoder: ValueDecoder, keys: [String]) throws {
            self.decoder = decoder
            self.keys = keys
            at = Array(repeating: nil, count: keys.count)
            let reader = decoder.reader, node = decoder.node
            guard try reader.tag(at: decoder.at, node) == .object else { throw mismatch([String: Any].self, PathNode.path(node)) }
            let end = decoder.at + 5 + reader.uint32(at: decoder.at + 1)
            var i = decoder.at + 5
            while i < end {
                guard i + 4 <= end else { throw corrupt(PathNode.path(node), "a key that runs past its object") }
                let count = reader.uint32(at: i)
                guard i + 4 + count <= end else { throw corrupt(PathNode.path(node), "a key that runs past its object") }
                guard let index = keys.firstIndex(where: { reader.bytes(at: i + 4, count: count, equal: $0) }) else {
                    let name = try reader.text(at: i + 4, count: count, node) // text that is not UTF-8 is refused as such
                    throw corrupt(PathNode.path(node), "an unknown field '\(Names.printable(name))'")
                }
                guard at[index] == nil else { throw corrupt(PathNode.path(node), "the field '\(keys[index])' twice") }
                let value = i + 4 + count
                i = try reader.end(of: value, within: end, PathNode(parent: node, key: keys[index]))
                at[index] = value
            }
        }

        private func node(_ key: Int) -> PathNode { PathNode(parent: decoder.node, key: keys[key]) }

        private func required(_ key: Int) throws -> Int {
            guard let at = at[key] else {
                throw DecodingError.keyNotFound(Name(keys[key]), DecodingError.Context(codingPath: decoder.codingPath, debugDescription: "no value"))
            }
            return at
        }

        /// Whether an optional's key is left out or null (what `decodeIfPresent` takes for nil).
        private func absent(_ key: Int) throws -> Bool {
            guard let at = at[key] else { return true }
            return try decoder.reader.tag(at: at, node(key)) == .null
        }

        func string(_ key: Int) throws -> String { try decoder.reader.string(at: try required(key), node(key)) }
        func int(_ key: Int) throws -> Int64 { try decoder.reader.int(at: try required(key), node(key)) }
        func double(_ key: Int) throws -> Double { try decoder.reader.double(at: try required(key), node(key)) }
        func value<T: Decodable>(_ type: T.Type, _ key: Int) throws -> T {
            try decoder.reader.value(T.self, at: try required(key), node(key), depth: decoder.depth)
        }

        func string(ifPresent key: Int) throws -> String? { try absent(key) ? nil : string(key) }
        func int(ifPresent key: Int) throws -> Int64? { try absent(key) ? nil : int(key) }
        func double(ifPresent key: Int) throws -> Double? { try absent(key) ? nil : double(key) }
        func bool(ifPresent key: Int) throws -> Bool? { try absent(key) ? nil : decoder.reader.bool(at: try required(key), node(key)) }
        func value<T: Decodable>(ifPresent type: T.Type, _ key: Int) throws -> T? { try absent(key) ? nil : value(T.self, key) }
    }
}

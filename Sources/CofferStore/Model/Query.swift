import CofferCrypto
import Foundation

/// A query over the plain fields of one record type in a zone (CloudKit's `CKQuery`).
///
/// ```swift
/// var query = Query(recordType: "Note")
/// query.predicates = [.init("count", .greaterThanOrEqual, 3), .init("title", .beginsWith, "Sh")]
/// query.sort = [.init("count", ascending: false)]
/// query.limit = 50
/// ```
/// Encrypted fields cannot be filtered or sorted on: such a query fails with
/// `.invalidArguments`, never an empty result.
public struct Query: Sendable, Hashable {
    public enum Comparison: String, Sendable, Hashable, CaseIterable {
        case equal = "="
        case notEqual = "!="
        case lessThan = "<"
        case lessThanOrEqual = "<="
        case greaterThan = ">"
        case greaterThanOrEqual = ">="
        /// Strings and references only.
        case beginsWith = "^="
    }

    public struct Predicate: Sendable, Hashable {
        public let field: String
        public let comparison: Comparison
        public let value: RecordValue

        public init(_ field: String, _ comparison: Comparison, _ value: RecordValue) {
            self.field = field
            self.comparison = comparison
            self.value = value
        }
    }

    public struct Sort: Sendable, Hashable {
        public let field: String
        public let ascending: Bool

        public init(_ field: String, ascending: Bool = true) {
            self.field = field
            self.ascending = ascending
        }
    }

    public var recordType: String
    /// All must hold (AND).
    public var predicates: [Predicate]
    /// Sort keys; by record name when empty. Ties break by record name.
    public var sort: [Sort]
    /// Records per page; nil returns every match at once.
    public var limit: Int?

    public init(recordType: String, predicates: [Predicate] = [], sort: [Sort] = [], limit: Int? = nil) {
        self.recordType = recordType
        self.predicates = predicates
        self.sort = sort
        self.limit = limit
    }

    /// A stable fingerprint, so that a cursor is only accepted by the query that made it:
    /// BLAKE2b over an unambiguous encoding (length-prefixed names, values in their exact
    /// binary form).
    var fingerprint: [UInt8] {
        var bytes = Array("coffer.query.v1".utf8) + [0]
        func framed(_ b: [UInt8]) { bytes += BigEndian.bytes(UInt32(b.count)) + b }
        framed(Array(recordType.utf8))
        bytes += BigEndian.bytes(UInt32(predicates.count))
        for p in predicates {
            framed(Array(p.field.utf8))
            framed(Array(p.comparison.rawValue.utf8))
            var v = [UInt8]()
            SealedValuesCodec.append(p.value, to: &v, withTag: true)
            framed(v)
        }
        bytes += BigEndian.bytes(UInt32(sort.count))
        for s in sort { framed(Array(s.field.utf8)); bytes.append(s.ascending ? 1 : 0) }
        bytes += BigEndian.bytes(Int64(limit ?? -1))
        return BLAKE2b.hash(bytes, outputByteCount: 16)
    }
}

/// One page of a query's results.
public struct QueryResult: Sendable {
    public let records: [Record]
    /// Matching records refused because they fail verification (`.integrityFailure`), by name.
    /// They are never returned as records.
    public let refused: [String: StoreError]
    /// Pass it back for the next page; nil when there is none.
    public let cursor: QueryCursor?
}

/// An opaque position in a query's results (CloudKit's `CKQueryOperation.Cursor`): the last
/// record of a page, by the values it was sorted on and its name. The next page starts after
/// that position, so records saved or deleted between pages neither shift it nor make it skip
/// or repeat a record: a record that still matches and sorts after the position is on a later
/// page, whatever happened to the records before it.
///
/// Encoded form (``token``), base64url without padding of:
///
/// | bytes | field |
/// | --- | --- |
/// | 3 | magic `CQC` |
/// | 1 | version `0x02` |
/// | 16 | the zone's uid |
/// | 16 | the query's fingerprint |
/// | 1 | n, the number of sort keys (the query's) |
/// | n × (1 + …) | each sort value as SQLite compared it: tag `0` null; `1` int, 8 bytes big-endian; `2` double, its 8-byte IEEE 754 pattern big-endian; `3` text, 4-byte big-endian length and UTF-8 |
/// | 1 + k | the record name: length k (1-255), then its ASCII |
///
/// A cursor is refused by any other zone or query, and a token that is not exactly this is
/// refused (version 1 cursors, positions by offset, are not accepted: run the query again).
/// The token holds plain (queryable) values of the last record; never an encrypted one.
public struct QueryCursor: Sendable, Hashable {
    static let magic: [UInt8] = Array("CQC".utf8)
    static let version: UInt8 = 2
    /// The longest token accepted: a sort value is a plain field, at most a record's 1 MB.
    static let maxTokenLength = 1_500_000

    /// A sort value as SQLite compares it (`json_extract` of the plain field).
    enum SortValue: Sendable, Hashable {
        case null
        case int(Int64)
        case double(Double)
        case text(String)


        /// Whether a plain field of `type` can have this value (as `json_extract` yields it).
        func fits(_ type: FieldType) -> Bool {
            switch (self, type) {
            case (.null, _): return true
            case (.text, .string), (.text, .reference): return true
            case (.int, .int), (.int, .bool): return true
            case (.int, .double), (.int, .date), (.double, .double), (.double, .date): return true
            default: return false
            }
        }
    }

    let zoneUID: [UInt8]
    let queryFingerprint: [UInt8]
    /// The last record's values of the query's sort keys, in order.
    let sortValues: [SortValue]
    /// The last record's name (the final tie-break).
    let name: String

    init(zoneUID: [UInt8], queryFingerprint: [UInt8], sortValues: [SortValue], name: String) {
        self.zoneUID = zoneUID
        self.queryFingerprint = queryFingerprint
        self.sortValues = sortValues
        self.name = name
    }

    /// The printable form, for passing between processes.
    public var token: String {
        var bytes = Self.magic + [Self.version] + zoneUID + queryFingerprint + [UInt8(sortValues.count)]
        for value in sortValues {
            switch value {
            case .null: bytes.append(0)
            case .int(let v): bytes += [1] + BigEndian.bytes(v)
            case .double(let v): bytes += [2] + BigEndian.bytes(v.bitPattern)
            case .text(let v): bytes += [3] + BigEndian.bytes(UInt32(v.utf8.count)) + Array(v.utf8)
            }
        }
        bytes += [UInt8(name.utf8.count)] + Array(name.utf8)
        return Base64URL.encode(bytes)
    }

    /// Parses a token printed by ``token``; throws `.invalidArguments` for anything else.
    public init(token: String) throws {
        func bad(_ why: String) -> StoreError { StoreError(.invalidArguments, "not a query cursor: \(why)") }
        guard token.utf8.count <= Self.maxTokenLength, let bytes = Base64URL.decode(token) else { throw bad("not base64url") }
        self = try bytes.withUnsafeBytes { raw in
            var r = RawReader(raw, what: "query cursor")
            do {
                guard Array(try r.take(3)) == Self.magic else { throw bad("bad magic") }
                let v = try r.u8()
                guard v == Self.version else {
                    throw v == 1 ? StoreError(.invalidArguments, "this query cursor was made by an older coffer; run the query again from its first page")
                                 : bad("unsupported version \(v)")
                }
                let zone = Array(try r.take(16)), fingerprint = Array(try r.take(16))
                var values = [SortValue]()
                for _ in 0..<(try r.u8()) {
                    switch try r.u8() {
                    case 0: values.append(.null)
                    case 1: values.append(.int(Int64(bitPattern: try r.u64())))
                    case 2:
                        let d = Double(bitPattern: try r.u64())
                        guard d.isFinite else { throw bad("a sort value is not a finite number") }
                        values.append(.double(d))
                    case 3: values.append(.text(try r.utf8(count: Int(try r.u32()))))
                    default: throw bad("unknown sort value tag")
                    }
                }
                let name = try r.utf8(count: Int(try r.u8()))
                guard (try? Names.validateRecord(name)) != nil else { throw bad("bad record name") }
                guard r.remaining == 0 else { throw bad("trailing bytes") }
                return QueryCursor(zoneUID: zone, queryFingerprint: fingerprint, sortValues: values, name: name)
            } catch let e as StoreError where e.code == .integrityFailure {
                throw bad("truncated or not UTF-8")
            }
        }
    }
}

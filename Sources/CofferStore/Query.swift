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

/// An opaque position in a query's results (CloudKit's `CKQueryOperation.Cursor`).
///
/// Encoded form (``token``): base64url of magic `CQC`, version `0x01`, the zone's 16-byte uid,
/// the query's 16-byte fingerprint, and the offset (8 bytes big-endian). A cursor is
/// refused by any other zone or query. Records saved or deleted between pages can shift
/// what the next page holds.
public struct QueryCursor: Sendable, Hashable {
    static let magic: [UInt8] = Array("CQC".utf8)
    static let version: UInt8 = 1
    let zoneUID: [UInt8]
    let queryFingerprint: [UInt8]
    let offset: Int64

    init(zoneUID: [UInt8], queryFingerprint: [UInt8], offset: Int64) {
        self.zoneUID = zoneUID
        self.queryFingerprint = queryFingerprint
        self.offset = offset
    }

    /// The printable form, for passing between processes.
    public var token: String {
        let bytes = Self.magic + [Self.version] + zoneUID + queryFingerprint + BigEndian.bytes(Int64(offset))
        return Data(bytes).base64EncodedString()
            .replacingOccurrences(of: "+", with: "-").replacingOccurrences(of: "/", with: "_").replacingOccurrences(of: "=", with: "")
    }

    /// Parses a token; throws `.invalidArguments` for anything that is not a v1 cursor.
    public init(token: String) throws {
        var b64 = token.replacingOccurrences(of: "-", with: "+").replacingOccurrences(of: "_", with: "/")
        while b64.count % 4 != 0 { b64 += "=" }
        guard token.count < 200, let data = Data(base64Encoded: b64), data.count == 3 + 1 + 16 + 16 + 8 else {
            throw StoreError(.invalidArguments, "not a query cursor")
        }
        let bytes = Array(data)
        guard Array(bytes[0..<3]) == Self.magic else { throw StoreError(.invalidArguments, "not a query cursor") }
        guard bytes[3] == Self.version else { throw StoreError(.invalidArguments, "unsupported query cursor version \(bytes[3])") }
        let offset = bytes[36..<44].reduce(UInt64(0)) { $0 << 8 | UInt64($1) }
        guard offset <= UInt64(Int64.max) else { throw StoreError(.invalidArguments, "not a query cursor") }
        self.init(zoneUID: Array(bytes[4..<20]), queryFingerprint: Array(bytes[20..<36]), offset: Int64(offset))
    }
}

import Foundation

/// What saving records would add to a zone's schema: record types it does not have, and new
/// fields of the types it has, each with the existing name it is closest to (a likely typo).
///
/// ```swift
/// let delta = SchemaDelta(records: [note], schema: try await db.schema(in: zone))
/// for field in delta.newFields { print("new field \(field.name) of \(field.recordType)", field.suggestion ?? "") }
/// ```
public struct SchemaDelta: Sendable, Hashable {
    /// A record type the zone's schema does not have.
    public struct NewType: Sendable, Hashable {
        public let name: String
        /// A type of the zone whose name is close to this one.
        public let suggestion: String?
    }

    /// A field a record type of the zone's schema does not have.
    public struct NewField: Sendable, Hashable {
        public let recordType: String
        public let name: String
        /// Whether its record type is new too.
        public let ofNewType: Bool
        /// A field of the type whose name is close to this one.
        public let suggestion: String?
    }

    /// In the order the records first name them.
    public let newTypes: [NewType]
    /// By record type (in the order of the records), then by name.
    public let newFields: [NewField]

    public var isEmpty: Bool { newTypes.isEmpty && newFields.isEmpty }

    /// The types and fields `records` use that `schema` (record type → field → spec) lacks.
    public init(records: [Record], schema: [String: [String: FieldSchema]]) {
        var fields = [String: Set<String>](), order = [String]()
        for record in records {
            if fields[record.recordType] == nil { order.append(record.recordType) }
            fields[record.recordType, default: []].formUnion(record.values.keys)
            fields[record.recordType, default: []].formUnion(record.encryptedValues.keys)
        }
        self.init(fields: order.map { ($0, fields[$0]!) }, schema: schema)
    }

    /// The same from the field names each record type uses (an import's summary).
    public init(fields used: [(recordType: String, fields: Set<String>)], schema: [String: [String: FieldSchema]]) {
        var types = [NewType](), fields = [NewField]()
        let knownTypes = schema.filter { !$0.value.isEmpty }.keys.sorted()
        for (recordType, names) in used {
            let known = schema[recordType] ?? [:]
            let isNew = known.isEmpty
            if isNew { types.append(NewType(name: recordType, suggestion: Self.closest(to: recordType, among: knownTypes))) }
            let knownFields = known.keys.sorted()
            for name in names.sorted() where known[name] == nil {
                fields.append(NewField(recordType: recordType, name: name, ofNewType: isNew,
                                       suggestion: isNew ? nil : Self.closest(to: name, among: knownFields.filter { !names.contains($0) })))
            }
        }
        newTypes = types
        newFields = fields
    }

    /// The name of `candidates` nearest to `name` when it is near enough to be a typo of it: the
    /// same but for case, or within an edit distance (insertions, deletions, substitutions and
    /// swaps of neighbours) of 1, or 2 for names of 5 characters or more. Ties go to the first
    /// in sorted order.
    public static func closest(to name: String, among candidates: some Sequence<String>) -> String? {
        let limit = name.count >= 5 ? 2 : 1
        var best: (distance: Int, name: String)?
        for candidate in candidates where candidate != name {
            let d = candidate.lowercased() == name.lowercased() ? 0 : distance(Array(name.unicodeScalars), Array(candidate.unicodeScalars), limit: limit)
            guard d <= limit else { continue }
            if best == nil || d < best!.distance || (d == best!.distance && candidate < best!.name) { best = (d, candidate) }
        }
        return best?.name
    }

    /// Optimal string alignment distance, or `limit + 1` once it must exceed `limit`.
    static func distance(_ a: [Unicode.Scalar], _ b: [Unicode.Scalar], limit: Int) -> Int {
        guard abs(a.count - b.count) <= limit else { return limit + 1 }
        if a.isEmpty || b.isEmpty { return max(a.count, b.count) }
        var before = [Int](repeating: 0, count: b.count + 1)
        var previous = Array(0...b.count)
        var current = [Int](repeating: 0, count: b.count + 1)
        for i in 1...a.count {
            current[0] = i
            var rowMin = current[0]
            for j in 1...b.count {
                let cost = a[i - 1] == b[j - 1] ? 0 : 1
                var d = min(previous[j] + 1, current[j - 1] + 1, previous[j - 1] + cost)
                if i > 1, j > 1, a[i - 1] == b[j - 2], a[i - 2] == b[j - 1] { d = min(d, before[j - 2] + 1) }
                current[j] = d
                rowMin = min(rowMin, d)
            }
            if rowMin > limit { return limit + 1 }
            (before, previous, current) = (previous, current, before)
        }
        return previous[b.count]
    }
}

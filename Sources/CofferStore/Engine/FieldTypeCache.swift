/// The plain field keys and types of the last row a read decoded, by position. Rows of a
/// type mostly have the same fields, stored in the same (sorted) order: a key equal to the
/// one at its position last time has the same type in the same schema, found by comparing
/// two strings (two words for a short key) instead of hashing one. A key that differs is looked
/// up in the schema and replaces the one kept. The owner drops it whenever the schema changes.
struct FieldTypeCache {
    private var keys = [String]()
    private var types = [FieldType]()
    private var position = 0

    /// Starts a row.
    mutating func begin() { position = 0 }

    /// The type of the next field of the row, `key`.
    mutating func type(of key: String, in schema: [String: FieldSchema]) -> FieldType? {
        defer { position += 1 }
        if position < keys.count, keys[position] == key { return types[position] }
        guard let type = schema[key]?.type else { return nil }
        if position < keys.count {
            keys[position] = key
            types[position] = type
        } else if position == keys.count {
            keys.append(key)
            types.append(type)
        }
        return type
    }
}

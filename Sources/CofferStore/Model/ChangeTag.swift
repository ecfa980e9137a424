/// A change tag: the sequence number of the log entry that wrote a record version, in base 36.
enum ChangeTag {
    static func make(_ seq: Int64) -> String { String(seq, radix: 36) }

    static func parse(_ tag: String) throws -> Int64 {
        guard !tag.isEmpty, tag.count <= 13, let v = Int64(tag, radix: 36), v > 0, make(v) == tag else {
            throw StoreError(.invalidArguments, "'\(Names.printable(tag))' is not a change tag")
        }
        return v
    }
}

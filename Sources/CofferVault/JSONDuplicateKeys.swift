import Foundation

/// Finds a key that appears twice in one JSON object. `JSONSerialization` keeps the last value of
/// a repeated key without a word, so a signed document (a contact card) could then be read one
/// way here and another way by a parser that keeps the first: decoders refuse such input.
package enum JSONDuplicateKeys {
    /// The first key repeated within one object of `json`, or nil. `json` must already have
    /// parsed as JSON (this scans its structure, it does not validate it).
    package static func first(in json: Data) -> String? {
        json.withUnsafeBytes { first(in: $0) }
    }

    private static func first(in b: UnsafeRawBufferPointer) -> String? {
        // One frame per open object or array: an object's keys so far, and whether a key comes next.
        var frames: [(keys: Set<String>?, expectingKey: Bool)] = []
        var i = 0
        while i < b.count {
            switch b[i] {
            case UInt8(ascii: "{"): frames.append((keys: [], expectingKey: true))
            case UInt8(ascii: "["): frames.append((keys: nil, expectingKey: false))
            case UInt8(ascii: "}"), UInt8(ascii: "]"): _ = frames.popLast()
            case UInt8(ascii: ","): if frames.last?.keys != nil { frames[frames.count - 1].expectingKey = true }
            case UInt8(ascii: ":"): if !frames.isEmpty { frames[frames.count - 1].expectingKey = false }
            case UInt8(ascii: "\""):
                var end = i + 1, escaped = false
                while end < b.count, !(b[end] == UInt8(ascii: "\"") && !escaped) {
                    escaped = !escaped && b[end] == UInt8(ascii: "\\")
                    end += 1
                }
                if let frame = frames.last, frame.expectingKey, frame.keys != nil {
                    let raw = UnsafeRawBufferPointer(rebasing: b[i...min(end, b.count - 1)])
                    // Escapes (\u0061 is "a") are decoded, so two spellings of one key match.
                    let key = raw.contains(UInt8(ascii: "\\"))
                        ? (try? JSONSerialization.jsonObject(with: Data(raw), options: .fragmentsAllowed)) as? String ?? String(decoding: raw, as: UTF8.self)
                        : String(decoding: raw.dropFirst().dropLast(), as: UTF8.self)
                    if frames[frames.count - 1].keys!.insert(key).inserted == false { return key }
                }
                i = end
            default: break
            }
            i += 1
        }
        return nil
    }
}

/// The naming rules (CloudKit's): names of zones and records are ASCII, at most
/// 255 characters, printable, with no leading `_`; zone names also exclude `@` (used by
/// `NAME@OWNER`). Record types and field keys start with a letter, then letters, digits, `_`.
package enum Names {
    package static let maxLength = 255

    package static func validateZone(_ name: String) throws {
        try validateName(name, what: "zone name")
        guard !name.contains("@") else { throw StoreError(.invalidArguments, "zone name '\(name)' contains '@', which names an owner") }
    }

    package static func validateRecord(_ name: String) throws {
        try validateName(name, what: "record name")
    }

    private static func validateName(_ name: String, what: String) throws {
        guard !name.isEmpty else { throw StoreError(.invalidArguments, "a \(what) cannot be empty") }
        guard name.utf8.count <= maxLength else { throw StoreError(.invalidArguments, "a \(what) is at most \(maxLength) characters") }
        guard name.utf8.allSatisfy({ $0 >= 0x20 && $0 < 0x7f }) else {
            throw StoreError(.invalidArguments, "\(what) '\(printable(name))' must be printable ASCII")
        }
        guard name.utf8.first != UInt8(ascii: "_") else { throw StoreError(.invalidArguments, "\(what) '\(name)' cannot start with '_'") }
    }

    package static func validateRecordType(_ type: String) throws {
        guard isIdentifier(type) else {
            throw StoreError(.invalidArguments, "record type '\(printable(type))' must start with a letter, then letters, digits or '_' (at most \(maxLength))")
        }
    }

    package static func validateFieldKey(_ key: String) throws {
        guard isIdentifier(key) else {
            throw StoreError(.invalidArguments, "field key '\(printable(key))' must start with a letter, then letters, digits or '_' (at most \(maxLength))")
        }
    }

    /// `[A-Za-z][A-Za-z0-9_]*`, at most 255: safe to inline in SQL and JSON paths.
    package static func isIdentifier(_ s: String) -> Bool {
        let bytes = s.utf8
        guard let first = bytes.first, bytes.count <= maxLength, isLetter(first) else { return false }
        return bytes.allSatisfy { isLetter($0) || ($0 >= 0x30 && $0 <= 0x39) || $0 == 0x5f }
    }

    private static func isLetter(_ b: UInt8) -> Bool { (b >= 0x41 && b <= 0x5a) || (b >= 0x61 && b <= 0x7a) }

    /// The name with control characters (C0, DEL and C1: a terminal reads some of them as
    /// escape sequences) replaced by `?`, for error messages.
    package static func printable(_ s: String) -> String {
        String(s.unicodeScalars.prefix(80).map { $0.properties.generalCategory == .control ? "?" : Character($0) })
    }
}

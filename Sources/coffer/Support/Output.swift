import CofferVault
import Foundation

/// Writing results: text for people, one JSON document for scripts.
enum Output {
    static func line(_ text: String = "") {
        FileHandle.standardOutput.write(Data((text + "\n").utf8))
    }

    static func note(_ text: String) {
        FileHandle.standardError.write(Data((text + "\n").utf8))
    }

    static func json<T: Encodable>(_ value: T) throws {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.prettyPrinted, .sortedKeys, .withoutEscapingSlashes]
        encoder.dateEncodingStrategy = .iso8601
        var data = try encoder.encode(value)
        data.append(0x0a)
        FileHandle.standardOutput.write(data)
    }

    /// Aligned `label: value` lines.
    static func fields(_ pairs: [(String, String)]) {
        let width = pairs.map { $0.0.count }.max() ?? 0
        for (label, value) in pairs {
            line(label + ":" + String(repeating: " ", count: width - label.count + 1) + value)
        }
    }

    static func iso(_ date: Date) -> String { date.formatted(.iso8601) }
}

/// The `vault show` JSON shape.
struct IdentityJSON: Encodable {
    let userID: String
    let name: String
    let email: String?
    let fingerprint: String
    let signingKey: String
    let boxKey: String

    init(_ identity: UserIdentity) {
        userID = identity.userID
        name = identity.name
        email = identity.email
        fingerprint = identity.fingerprint
        signingKey = Data(identity.signingKey.rawRepresentation).base64EncodedString()
        boxKey = Data(identity.boxKey.rawRepresentation).base64EncodedString()
    }

    enum CodingKeys: String, CodingKey { case userID, name, email, fingerprint, signingKey, boxKey }

    func encode(to encoder: any Encoder) throws {
        var c = encoder.container(keyedBy: CodingKeys.self)
        try c.encode(userID, forKey: .userID)
        try c.encode(name, forKey: .name)
        try c.encode(email, forKey: .email) // null when absent: the key always exists
        try c.encode(fingerprint, forKey: .fingerprint)
        try c.encode(signingKey, forKey: .signingKey)
        try c.encode(boxKey, forKey: .boxKey)
    }
}

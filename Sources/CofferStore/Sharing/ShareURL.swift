import CofferCrypto
import Foundation

/// A share URL. Version 1:
///
/// ```
/// coffer://share/v1/<store id: 32 hex>/<share uid: 32 hex>[#<link secret: 43 base64url>]
/// ```
///
/// The path names the store and the share; the fragment, present only while the public
/// permission is not none, carries the 32-byte link secret from which the link key is derived.
/// A parser refuses any other scheme, host, version, length or character.
public struct ShareURL: Sendable, Hashable, CustomStringConvertible {
    public let storeID: [UInt8]
    public let shareUID: [UInt8]
    /// The link secret, in guarded memory; nil for a URL without a fragment.
    public let linkSecret: SecureBytes?

    init(storeID: [UInt8], shareUID: [UInt8], linkSecret: SecureBytes?) {
        self.storeID = storeID
        self.shareUID = shareUID
        self.linkSecret = linkSecret
    }

    /// The URL text (it contains the link secret: treat it as a secret when it has a fragment).
    public var string: String {
        var s = "coffer://share/v1/\(Hex.encode(storeID))/\(Hex.encode(shareUID))"
        if let linkSecret {
            s += "#" + linkSecret.withUnsafeBytes { Base64URL.encode(Array($0)) }
        }
        return s
    }

    /// Without the secret: safe for logs.
    public var description: String {
        "coffer://share/v1/\(Hex.encode(storeID))/\(Hex.encode(shareUID))" + (linkSecret == nil ? "" : "#<link secret>")
    }

    /// Parses a share URL; throws `.invalidArguments` with a clear reason otherwise.
    public init(string: String) throws {
        func bad(_ why: String) -> StoreError { StoreError(.invalidArguments, "not a Coffer share URL: \(why)") }
        guard string.utf8.count <= 200 else { throw bad("too long") }
        let prefix = "coffer://share/"
        guard string.hasPrefix(prefix) else { throw bad("it must start with \(prefix)") }
        var rest = Substring(string.dropFirst(prefix.count))
        var fragment: Substring?
        if let hash = rest.firstIndex(of: "#") {
            fragment = rest[rest.index(after: hash)...]
            rest = rest[..<hash]
        }
        let parts = rest.split(separator: "/", omittingEmptySubsequences: false)
        guard let version = parts.first, version.hasPrefix("v") else { throw bad("no version") }
        guard version == "v1" else { throw bad("unsupported version '\(version)' (this build reads v1)") }
        guard parts.count == 3, let store = Hex.decode(String(parts[1])), store.count == 16,
              let share = Hex.decode(String(parts[2])), share.count == 16,
              parts[1].allSatisfy({ $0.isHexDigit && !$0.isUppercase }), parts[2].allSatisfy({ $0.isHexDigit && !$0.isUppercase }) else {
            throw bad("expected v1/<32 hex>/<32 hex>")
        }
        var secret: SecureBytes?
        if let fragment {
            guard var bytes = Base64URL.decode(String(fragment)), bytes.count == 32 else { throw bad("the link secret is not 32 bytes of base64url") }
            secret = SecureBytes(copying: bytes)
            for i in bytes.indices { bytes[i] = 0 }
        }
        self.init(storeID: store, shareUID: share, linkSecret: secret)
    }

    public static func == (lhs: ShareURL, rhs: ShareURL) -> Bool {
        lhs.storeID == rhs.storeID && lhs.shareUID == rhs.shareUID && lhs.linkSecret == rhs.linkSecret
    }

    public func hash(into hasher: inout Hasher) {
        hasher.combine(storeID)
        hasher.combine(shareUID)
    }
}

/// Unpadded base64url (RFC 4648 section 5), strict: no padding, no other characters.
package enum Base64URL {
    package static func encode(_ bytes: [UInt8]) -> String {
        Data(bytes).base64EncodedString()
            .replacingOccurrences(of: "+", with: "-").replacingOccurrences(of: "/", with: "_").replacingOccurrences(of: "=", with: "")
    }

    package static func decode(_ text: String) -> [UInt8]? {
        guard text.allSatisfy({ $0.isASCII && ($0.isLetter || $0.isNumber || $0 == "-" || $0 == "_") }) else { return nil }
        var b64 = text.replacingOccurrences(of: "-", with: "+").replacingOccurrences(of: "_", with: "/")
        guard b64.count % 4 != 1 else { return nil }
        while b64.count % 4 != 0 { b64 += "=" }
        guard let data = Data(base64Encoded: b64) else { return nil }
        let bytes = Array(data)
        return encode(bytes) == text ? bytes : nil // canonical form only
    }
}

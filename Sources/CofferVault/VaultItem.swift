import CofferCrypto
import Foundation

/// A keychain-like item kept in a vault: who it is for (service, account), how it is
/// shown (label), free attributes, and the secret itself, which stays in guarded memory.
///
/// Like a keychain's generic password, an item is unique by class, service and account.
public struct VaultItem: Sendable, CustomStringConvertible {
    /// The kind of secret, stored as one byte.
    public enum ItemClass: UInt8, Sendable, CaseIterable, CustomStringConvertible {
        /// A password or token for a service and account (the keychain's generic password).
        case generic = 1
        /// A cryptographic key kept for an application.
        case key = 2
        /// A secure note.
        case note = 3

        public var description: String {
            switch self {
            case .generic: return "generic"
            case .key: return "key"
            case .note: return "note"
            }
        }

        public init?(name: String) {
            guard let match = Self.allCases.first(where: { $0.description == name }) else { return nil }
            self = match
        }
    }

    static let maxItems = 100_000
    static let maxAttributes = 64
    public static let maxSecretBytes = 1 << 20

    /// 16 random bytes.
    public let id: [UInt8]
    public var itemClass: ItemClass
    public var service: String
    public var account: String
    public var label: String
    public var attributes: [String: String]
    /// Milliseconds since 1970.
    public var created: Int64
    public var modified: Int64
    /// The secret; read it with `SecureBytes.withUnsafeBytes(_:)`.
    public var secret: SecureBytes

    init(id: [UInt8], itemClass: ItemClass, service: String, account: String, label: String,
         attributes: [String: String], created: Int64, modified: Int64, secret: SecureBytes) {
        self.id = id
        self.itemClass = itemClass
        self.service = service
        self.account = account
        self.label = label
        self.attributes = attributes
        self.created = created
        self.modified = modified
        self.secret = secret
    }

    public var createdDate: Date { Date(timeIntervalSince1970: Double(created) / 1000) }
    public var modifiedDate: Date { Date(timeIntervalSince1970: Double(modified) / 1000) }

    public var description: String {
        "VaultItem(\(itemClass) service: \(service), account: \(account), label: \(label), secret: redacted)"
    }
}

/// A query over vault items: every non-nil field must match exactly; `attributes` must all be present.
public struct VaultItemQuery: Sendable {
    public var itemClass: VaultItem.ItemClass?
    public var service: String?
    public var account: String?
    public var label: String?
    public var attributes: [String: String]

    public init(itemClass: VaultItem.ItemClass? = nil, service: String? = nil, account: String? = nil,
                label: String? = nil, attributes: [String: String] = [:]) {
        self.itemClass = itemClass
        self.service = service
        self.account = account
        self.label = label
        self.attributes = attributes
    }

    /// Every item.
    public static let all = VaultItemQuery()

    func matches(_ item: VaultItem) -> Bool {
        if let itemClass, item.itemClass != itemClass { return false }
        if let service, item.service != service { return false }
        if let account, item.account != account { return false }
        if let label, item.label != label { return false }
        return attributes.allSatisfy { item.attributes[$0.key] == $0.value }
    }
}

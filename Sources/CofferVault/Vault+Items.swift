import CofferCrypto
import Foundation

extension Vault {
    /// Metadata of the items that match `query`, sorted by service then account. The
    /// secrets come along in guarded memory; printing an item never shows them.
    public func items(matching query: VaultItemQuery = .all) -> [VaultItem] {
        read { state in
            state.body.items.filter { query.matches($0) }.sorted { ($0.service, $0.account) < ($1.service, $1.account) }
        }
    }

    /// The one item for `service` and `account` (and class).
    /// - Throws: ``VaultError`` `.itemNotFound`.
    public func item(service: String, account: String, itemClass: VaultItem.ItemClass = .generic) throws -> VaultItem {
        guard let item = items(matching: VaultItemQuery(itemClass: itemClass, service: service, account: account)).first else {
            throw VaultError(.itemNotFound, "no item for service '\(service)' and account '\(account)'")
        }
        return item
    }

    /// Adds an item. Service and account together with the class must be new.
    /// - Throws: ``VaultError`` `.alreadyExists`, `.invalidArguments`, or a write error.
    @discardableResult
    public func addItem(service: String, account: String, label: String? = nil, itemClass: VaultItem.ItemClass = .generic,
                        attributes: [String: String] = [:], secret: SecureBytes) throws -> VaultItem {
        try Self.validateItem(service: service, account: account, label: label, attributes: attributes, secret: secret)
        let now = Self.nowMillis()
        let item = VaultItem(id: SecureRandom.bytes(count: 16), itemClass: itemClass, service: service, account: account,
                             label: label ?? "\(service) (\(account))", attributes: attributes,
                             created: now, modified: now, secret: secret)
        try mutate { state in
            guard !state.body.items.contains(where: { $0.itemClass == itemClass && $0.service == service && $0.account == account }) else {
                throw VaultError(.alreadyExists, "an item for service '\(service)' and account '\(account)' already exists")
            }
            guard state.body.items.count < VaultItem.maxItems else {
                throw VaultError(.invalidArguments, "the vault holds the maximum of \(VaultItem.maxItems) items")
            }
            state.body.items.append(item)
        }
        return item
    }

    /// Updates the items that match `query`: a new secret, label and/or attributes
    /// (attributes given replace the old set). Returns how many changed.
    /// - Throws: ``VaultError`` `.itemNotFound` when none matches.
    @discardableResult
    public func updateItems(matching query: VaultItemQuery, secret: SecureBytes? = nil, label: String? = nil,
                            attributes: [String: String]? = nil) throws -> Int {
        if let secret { try Self.validateSecret(secret) }
        if let label { try Self.validateLabel(label) }
        if let attributes { try Self.validateAttributes(attributes) }
        var changed = 0
        try mutate { state in
            let now = Self.nowMillis()
            for i in state.body.items.indices where query.matches(state.body.items[i]) {
                if let secret { state.body.items[i].secret = secret }
                if let label { state.body.items[i].label = label }
                if let attributes { state.body.items[i].attributes = attributes }
                state.body.items[i].modified = now
                changed += 1
            }
            guard changed > 0 else { throw VaultError(.itemNotFound, "no item matches") }
        }
        return changed
    }

    /// Deletes the items that match `query`; returns how many.
    /// - Throws: ``VaultError`` `.itemNotFound` when none matches.
    @discardableResult
    public func deleteItems(matching query: VaultItemQuery) throws -> Int {
        var removed = 0
        try mutate { state in
            let before = state.body.items.count
            state.body.items.removeAll { query.matches($0) }
            removed = before - state.body.items.count
            guard removed > 0 else { throw VaultError(.itemNotFound, "no item matches") }
        }
        return removed
    }

    static func validateItem(service: String, account: String, label: String?, attributes: [String: String],
                             secret: SecureBytes) throws {
        for (what, value) in [("service", service), ("account", account)] {
            guard !value.isEmpty, value.utf8.count <= 1024 else {
                throw VaultError(.invalidArguments, "an item's \(what) must be 1 to 1024 bytes")
            }
            guard !value.containsControlCharacters else {
                throw VaultError(.invalidArguments, "an item's \(what) cannot contain control characters (newline, escape, …)")
            }
        }
        if let label { try validateLabel(label) }
        try validateAttributes(attributes)
        try validateSecret(secret)
    }

    static func validateLabel(_ label: String) throws {
        guard label.utf8.count <= 1024 else { throw VaultError(.invalidArguments, "an item's label is at most 1024 bytes") }
        guard !label.containsControlCharacters else { throw VaultError(.invalidArguments, "an item's label cannot contain control characters (newline, escape, …)") }
    }


    /// At most 64 attributes, keys of 1 to 255 bytes, values of at most 4096 bytes: well inside
    /// what the vault reader accepts, so a write never makes a vault that cannot be read.
    static func validateAttributes(_ attributes: [String: String]) throws {
        guard attributes.count <= VaultItem.maxAttributes else {
            throw VaultError(.invalidArguments, "an item has at most \(VaultItem.maxAttributes) attributes")
        }
        for (key, value) in attributes {
            guard (1...255).contains(key.utf8.count), value.utf8.count <= 4096 else {
                throw VaultError(.invalidArguments, "an item attribute's key is 1 to 255 bytes and its value at most 4096 bytes")
            }
        }
    }

    static func validateSecret(_ secret: SecureBytes) throws {
        guard secret.count <= VaultItem.maxSecretBytes else {
            throw VaultError(.invalidArguments, "an item's secret is at most \(VaultItem.maxSecretBytes) bytes")
        }
    }
}

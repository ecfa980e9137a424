import CofferCrypto
import CofferVault
import Foundation
import GRDB

/// A user known to the store: the identity from a verified contact card.
public struct Contact: Sendable, Hashable {
    public let identity: UserIdentity
    /// The card's creation time (ISO 8601), as signed.
    public let cardCreated: String
    /// When the card was added to this store.
    public let added: Date

    public var userID: String { identity.userID }
    public var name: String { identity.name }
    public var email: String? { identity.email }
    public var fingerprint: String { identity.fingerprint }
}

extension Store {
    /// What ``addContact(_:)`` did.
    public enum ContactAddResult: Sendable, Equatable {
        case added
        /// A newer card for the same user replaced the stored one.
        case updated
        /// The same card (or an older one) was already stored; nothing changed.
        case unchanged
    }

    /// Stores a verified contact card. A card for a user id already known replaces the stored
    /// one only if it is newer.
    @discardableResult
    public func addContact(_ card: ContactCard) throws -> ContactAddResult {
        let identity = card.identity
        let cardBytes = card.jsonData()
        // Read first: every session adds its own card, and a card already stored must not need
        // the write lock (reads go on while another process writes).
        let (userID, created) = (identity.userID, card.created)
        if try read({ db in try Self.isStored(db, userID: userID, card: cardBytes, created: created) }) { return .unchanged }
        return try write { db in
            if let row = try Row.fetchOne(db, sql: "SELECT card_created, card FROM contact WHERE user_id = ?", arguments: [identity.userID]) {
                let storedCreated: String = row["card_created"]
                let storedCard: Data = row["card"]
                if storedCard == cardBytes || storedCreated >= card.created { return .unchanged }
                try db.execute(sql: """
                    UPDATE contact SET name = ?, email = ?, box_key = ?, card = ?, card_created = ?, added_at = ?
                    WHERE user_id = ?
                    """, arguments: [identity.name, identity.email, Data(identity.boxKey.rawRepresentation), cardBytes,
                                     card.created, Date().timeIntervalSince1970, identity.userID])
                return .updated
            }
            try db.execute(sql: """
                INSERT INTO contact (user_id, name, email, signing_key, box_key, card, card_created, added_at)
                VALUES (?, ?, ?, ?, ?, ?, ?, ?)
                """, arguments: [identity.userID, identity.name, identity.email, Data(identity.signingKey.rawRepresentation),
                                 Data(identity.boxKey.rawRepresentation), cardBytes, card.created, Date().timeIntervalSince1970])
            return .added
        }
    }

    /// Whether this card, or a newer one of the same user, is stored.
    private static func isStored(_ db: Database, userID: String, card: Data, created: String) throws -> Bool {
        guard let row = try Row.fetchOne(db, sql: "SELECT card_created, card FROM contact WHERE user_id = ?", arguments: [userID]) else { return false }
        let storedCreated: String = row["card_created"], storedCard: Data = row["card"]
        return storedCard == card || storedCreated >= created
    }

    /// Every contact, by name.
    public func contacts() throws -> [Contact] {
        try read { db in
            try Row.fetchAll(db, sql: "SELECT * FROM contact ORDER BY name COLLATE NOCASE, user_id").map { try Self.contact(from: $0) }
        }
    }

    /// The contact that `who` names: a user id, an email (any case), or a contact name (any case).
    /// - Throws: ``StoreError`` `.unknownItem` when none matches, `.invalidArguments` when a
    ///   name or email matches several (use the user id then).
    public func contact(matching who: String) throws -> Contact {
        try read { db in
            if let row = try Row.fetchOne(db, sql: "SELECT * FROM contact WHERE user_id = ?", arguments: [who.lowercased()]) {
                return try Self.contact(from: row)
            }
            for column in ["email", "name"] {
                let rows = try Row.fetchAll(db, sql: "SELECT * FROM contact WHERE \(column) = ? COLLATE NOCASE", arguments: [who])
                if rows.count == 1 { return try Self.contact(from: rows[0]) }
                if rows.count > 1 {
                    throw StoreError(.invalidArguments, "'\(who)' matches \(rows.count) contacts by \(column); name one by its user id")
                }
            }
            throw StoreError(.unknownItem, "no contact matches '\(who)' (by user id, email or name); add their card with 'coffer contact add'")
        }
    }

    static func contact(from row: Row) throws -> Contact {
        let signing: Data = row["signing_key"], box: Data = row["box_key"]
        let identity = UserIdentity(name: row["name"], email: row["email"],
                                    signingKey: try Ed25519.PublicKey(rawRepresentation: Array(signing)),
                                    boxKey: try X25519.PublicKey(rawRepresentation: Array(box)))
        let storedID: String = row["user_id"]
        guard identity.userID == storedID else {
            throw StoreError(.integrityFailure, "the stored contact \(storedID) does not match its signing key")
        }
        return Contact(identity: identity, cardCreated: row["card_created"],
                       added: Date(timeIntervalSince1970: row["added_at"]))
    }
}

import CofferCrypto
import CofferVault
import Foundation

extension Store {
    /// What ``addContact(_:)-202vx`` did.
    public enum ContactAddResult: Sendable, Equatable {
        case added
        /// A newer card for the same user replaced the stored one.
        case updated
        /// The same card (or an older one) was already stored; nothing changed.
        case unchanged
    }

    /// How far in the future a card's creation time may be (clocks differ).
    static let cardClockSkew: TimeInterval = 300

    /// Stores a verified contact card. A card for a user id already known replaces the stored
    /// one only if it is newer and has the same keys: a user id keeps its keys.
    /// - Throws: `.invalidArguments` for a card dated in the future, or a newer card whose box
    ///   key differs from the stored card's.
    ///
    /// This async form works on every backend and suspends while the store answers; in
    /// synchronous code, the blocking form of the same name is chosen (SQLite only).
    @discardableResult
    public func addContact(_ card: ContactCard) async throws -> ContactAddResult {
        try Self.checkNotFuture(card)
        // Read first: every session adds its own card, and a card already stored must not need
        // the write lock (reads go on while another process writes).
        if try await read({ db in try self.compare(db, card) }) == .unchanged { return .unchanged }
        return try await write { db in try self.store(db, card) }
    }

    /// ``addContact(_:)`` blocking the calling thread, for synchronous code on an SQLite store.
    @_disfavoredOverload @discardableResult
    public func addContact(_ card: ContactCard) throws -> ContactAddResult {
        try Self.checkNotFuture(card)
        if try read({ db in try self.compare(db, card) }) == .unchanged { return .unchanged }
        return try write { db in try self.store(db, card) }
    }

    /// What storing `card` would do, against the stored card of its user id.
    /// - Throws: `.invalidArguments` when the stored card has other keys.
    private func compare(_ db: any StorageTransaction, _ card: ContactCard) throws -> ContactAddResult {
        let identity = card.identity
        guard let stored = try verifiedContact(db, userID: identity.userID) else { return .added }
        guard stored.identity.boxKey == identity.boxKey else {
            throw StoreError(.invalidArguments, "the card of \(identity.name) (\(identity.userID)) has other keys than the card this store holds for that user id; a user id keeps its keys, so this card is refused")
        }
        return stored.cardCreated >= card.created ? .unchanged : .updated
    }

    /// Stores `card` (in a write transaction) unless the stored card is as new.
    private func store(_ db: any StorageTransaction, _ card: ContactCard) throws -> ContactAddResult {
        let result = try compare(db, card)
        guard result != .unchanged else { return result }
        let identity = card.identity
        try db.storeContact(userID: identity.userID, name: identity.name, email: identity.email,
                            signingKey: Array(identity.signingKey.rawRepresentation), boxKey: Array(identity.boxKey.rawRepresentation),
                            card: Array(card.jsonData()), cardCreated: card.created, added: Date().timeIntervalSince1970)
        return result
    }

    static func checkNotFuture(_ card: ContactCard) throws {
        guard let created = ISO8601DateFormatter().date(from: card.created) else {
            throw StoreError(.invalidArguments, "the card of \(card.identity.name) has no valid creation time")
        }
        guard created.timeIntervalSinceNow <= cardClockSkew else {
            throw StoreError(.invalidArguments, "the card of \(card.identity.name) (\(card.identity.userID)) is dated \(card.created), in the future; it is refused (check the clock of the machine that made it)")
        }
    }

    /// Every contact whose stored card verifies, by name. A row whose card does not verify is
    /// left out (``Session/audit(plaintexts:progress:)`` reports it).
    /// In synchronous code, the blocking form of the same name is chosen (SQLite only).
    public func contacts() async throws -> [Contact] {
        try await read { db in try self.contacts(db) }
    }

    /// ``contacts()`` blocking the calling thread, for synchronous code on an SQLite store.
    @_disfavoredOverload
    public func contacts() throws -> [Contact] {
        try read { db in try self.contacts(db) }
    }

    private func contacts(_ db: any StorageTransaction) throws -> [Contact] {
        try db.contactUserIDs(email: nil, name: nil).compactMap { try? self.verifiedContact(db, userID: $0) }
            .sorted { ($0.name.lowercased(), $0.userID) < ($1.name.lowercased(), $1.userID) }
    }

    /// The contact that `who` names: a user id, an email (any case), or a contact name (any case),
    /// as their verified cards say (the row's own columns only narrow the search).
    /// - Throws: ``StoreError`` `.unknownItem` when none matches, `.invalidArguments` when a
    ///   name or email matches several (use the user id then).
    ///   In synchronous code, the blocking form of the same name is chosen (SQLite only).
    public func contact(matching who: String) async throws -> Contact {
        try await read { db in try self.contact(db, matching: who) }
    }

    /// ``contact(matching:)`` blocking the calling thread, for synchronous code on an SQLite store.
    @_disfavoredOverload
    public func contact(matching who: String) throws -> Contact {
        try read { db in try self.contact(db, matching: who) }
    }

    /// The contact of a user id, an email or a name in the store's directory of cards. The
    /// directory holds whatever the store's writers put there, under any name and email they
    /// claim: to find the person a user means by a name or an email, use
    /// ``Session/contact(matching:)``, which resolves them only to cards the user pinned.
    private func contact(_ db: any StorageTransaction, matching who: String) throws -> Contact {
        if let contact = try? verifiedContact(db, userID: who.lowercased()) { return contact }
        for field in ["email", "name"] {
            let candidates = try db.contactUserIDs(email: field == "email" ? who : nil, name: field == "name" ? who : nil)
            let matches = candidates.compactMap { try? verifiedContact(db, userID: $0) }.filter { contact in
                let value = field == "email" ? contact.email : contact.name
                return value?.lowercased() == who.lowercased()
            }
            if matches.count == 1 { return matches[0] }
            if matches.count > 1 {
                throw StoreError(.invalidArguments, "'\(who)' matches \(matches.count) contacts by \(field); name one by its user id")
            }
        }
        throw StoreError(.unknownItem, "no contact matches '\(who)' (by user id, email or name); add their card with 'coffer contact add'")
    }

    /// The contact of a user id from its stored card, verified (signature, user id, not dated in
    /// the future) once per card and kept; every field comes from the card, never from the row's
    /// other columns. Nil when the store has no row for the id.
    /// - Throws: `.integrityFailure` when the stored card does not verify or is of another user.
    func verifiedContact(_ db: any StorageTransaction, userID: String) throws -> Contact? {
        guard let stored = try db.contactCard(userID: userID) else { return nil }
        let bytes = Data(stored.card)
        let digest = BLAKE2b.hash(bytes)
        if let kept = verifiedCards.withLock({ $0[userID] }), kept.digest == digest { return kept.contact }
        let card: ContactCard
        do { card = try ContactCard.verify(bytes) } catch {
            throw StoreError(.integrityFailure, "the stored contact card of \(userID) does not verify: the store was changed", underlying: error as? VaultError)
        }
        guard card.identity.userID == userID else {
            throw StoreError(.integrityFailure, "the stored contact card of \(userID) is the card of \(card.identity.userID): the store was changed")
        }
        do { try Self.checkNotFuture(card) } catch {
            throw StoreError(.integrityFailure, "the stored contact card of \(userID) is dated \(card.created), in the future: it is refused")
        }
        let contact = Contact(identity: card.identity, cardCreated: card.created, added: Date(timeIntervalSince1970: stored.added))
        verifiedCards.withLock { $0[userID] = (digest, contact) }
        return contact
    }

    /// ``verifiedContact(_:userID:)`` in a read of its own.
    func verifiedContact(userID: String) throws -> Contact? {
        try read { db in try self.verifiedContact(db, userID: userID) }
    }

    /// The verified contact of a user id, or `.unknownItem`.
    func contactRow(_ db: any StorageTransaction, userID: String) throws -> Contact {
        guard let contact = try verifiedContact(db, userID: userID) else {
            throw StoreError(.unknownItem, "no contact with user id \(userID)")
        }
        return contact
    }
}

extension Store {
    /// A user's signing key, from their verified contact card. A user id is a hash of the key,
    /// so it names exactly one key.
    /// - Throws: `.unknownItem` when the store has no card for the user; `.integrityFailure`
    ///   when the stored card does not verify.
    func signingKey(_ db: any StorageTransaction, of userID: String) throws -> Ed25519.PublicKey {
        guard let contact = try verifiedContact(db, userID: userID) else {
            throw StoreError(.unknownItem, "no contact with user id \(userID)")
        }
        return contact.identity.signingKey
    }

    /// ``Session/contact(matching:)`` for the user of `vault`.
    func contact(matching who: String, for vault: Vault) async throws -> Contact {
        guard !UserIDs.isValid(who) else { return try await contact(matching: who) }
        let ids = Session.pinnedUserIDs(matching: who, in: vault)
        guard !ids.isEmpty else {
            throw StoreError(.unknownItem, "no contact you added matches '\(Names.printable(who))'; names and emails resolve only to cards you pinned ('coffer contact add CARD'), or give the user id")
        }
        guard ids.count == 1 else { throw StoreError(.invalidArguments, "'\(Names.printable(who))' matches \(ids.count) of your contacts; name one by its user id") }
        return try await contact(matching: ids[0])
    }
}

extension Session {
    /// The contact `who` names for this user: a user id (any verified card of that id is the
    /// user's: the id is the hash of their key), or an email or a name, which resolves only to a
    /// card this user pinned in their vault (`Vault.pin(_:)`, `coffer contact add`) or to
    /// themselves. A store's directory of cards, local or on a server, holds whatever its
    /// writers put there under any name and email, so it never decides who a name is.
    /// - Throws: `.unknownItem` when no pinned card matches; `.invalidArguments` when several do.
    public func contact(matching who: String) async throws -> Contact {
        try await store.contact(matching: who, for: vault)
    }

    /// Pins in this user's vault the store's card of `userID`, verified (a user id is the hash of
    /// one key, so the card of that id is that user's, whatever name it carries): from then on
    /// the name and email on it resolve to them (``contact(matching:)``). Returns the contact.
    /// - Throws: `.invalidArguments` for a malformed user id; `.unknownItem` when the store has
    ///   no card of it; `.integrityFailure` when the stored card does not verify.
    @discardableResult
    public func pinContact(userID: String) async throws -> Contact {
        guard UserIDs.isValid(userID) else { throw StoreError(.invalidArguments, "'\(Names.printable(userID))' is not a user id") }
        let stored = try await store.read { db in try db.contactCard(userID: userID)?.card }
        guard let stored else { throw StoreError(.unknownItem, "the store has no contact card of \(userID)") }
        let card: ContactCard
        do { card = try ContactCard.verify(Data(stored)) } catch {
            throw StoreError(.integrityFailure, "the stored contact card of \(userID) does not verify: the store was changed", underlying: error as? VaultError)
        }
        guard card.identity.userID == userID else {
            throw StoreError(.integrityFailure, "the stored contact card of \(userID) is the card of \(card.identity.userID): the store was changed")
        }
        do { try vault.pin(card) } catch let error as VaultError {
            throw StoreError(.internalError, "the card could not be pinned in your vault: \(error.message)", underlying: error)
        }
        return try await store.contact(matching: userID)
    }

    /// Whether this user pinned a card of `userID` in their vault (or is that user).
    public func hasPinned(userID: String) -> Bool {
        userID == vault.identity.userID || vault.isPinned(userID: userID)
    }

    /// The user ids an email or a name may mean for this user: their pinned cards' (by email,
    /// else by name), or their own.
    public func pinnedUserIDs(matching who: String) -> [String] {
        Self.pinnedUserIDs(matching: who, in: vault)
    }

    /// ``pinnedUserIDs(matching:)`` for the user of `vault`.
    static func pinnedUserIDs(matching who: String, in vault: Vault) -> [String] {
        let ids = vault.pinnedUserIDs(matching: who)
        let me = vault.identity
        if ids.isEmpty, me.email?.lowercased() == who.lowercased() || me.name.lowercased() == who.lowercased() { return [me.userID] }
        return ids
    }
}

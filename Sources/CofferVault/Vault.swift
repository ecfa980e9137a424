import CofferCrypto
import Foundation
import Logging

/// How to unlock a vault.
public enum VaultUnlock: Sendable {
    /// A passphrase (its UTF-8 bytes, in guarded memory).
    case passphrase(SecureBytes)
    /// The contents of a key file made by ``Vault/addKeyFile(at:)``.
    case keyFile(SymmetricKey)

    /// Reads a key file from disk (exactly 32 bytes).
    ///
    /// - Throws: ``VaultError`` `.unprotectedKeyFile` when the file's mode grants group or
    ///   others any permission (it is not read; `chmod 600` it), `.notFound`, `.malformed`.
    public static func keyFile(at url: URL) throws -> VaultUnlock {
        .keyFile(try VaultFile.readKeyFile(url))
    }
}

/// A user's vault: one file holding their identity keys and keychain-like items,
/// sealed under a random vault key that one or more key slots unlock.
///
/// ```swift
/// let vault = try Vault.create(at: url, name: "Alice", email: "alice@example.com",
///                              passphrase: SecureBytes(copying: Array("correct horse".utf8)))
/// try vault.addItem(service: "db", account: "app", secret: SecureBytes(copying: Array("s3cret".utf8)))
/// let again = try Vault.open(at: url, unlock: .passphrase(SecureBytes(copying: Array("correct horse".utf8))))
/// ```
///
/// Every change is written at once, atomically and durably (see `Docs/VaultFormat.md`), under
/// the vault's lock and to the file's latest contents: when another process (or another `Vault`
/// object) wrote the file after this one read it, the change applies on top of that write.
public final class Vault: Sendable {
    struct State {
        var header: VaultFormat.Header
        var vaultKey: SymmetricKey
        var body: VaultFormat.Body
        /// Hash of the file contents last read or written by this process.
        var fileHash: [UInt8]
    }

    /// The file this vault lives in.
    public let url: URL
    /// The user's public identity.
    public let identity: UserIdentity
    /// The identity's signing key (Ed25519), for the store module.
    package let signingKey: Ed25519.PrivateKey
    /// The identity's box key (X25519), for the store module.
    package let boxKey: X25519.PrivateKey
    /// This user's high-water marks of the zones they read or wrote, in `<vault file>.marks`
    /// beside the vault. Opening the vault does not read them: the book reads its file when
    /// first used.
    public let marks: MarkBook
    private let state: Locked<State>
    private let logger: Logger

    init(url: URL, state: State, logger: Logger) throws {
        self.url = url
        self.logger = logger
        let body = state.body
        self.signingKey = try Ed25519.PrivateKey(seed: body.signingSeed)
        self.boxKey = try X25519.PrivateKey(rawRepresentation: body.boxSecret)
        self.identity = UserIdentity(name: body.name, email: body.email,
                                     signingKey: signingKey.publicKey, boxKey: boxKey.publicKey)
        self.marks = try MarkBook(vaultURL: url, userID: identity.userID, signingSeed: body.signingSeed, logger: logger)
        self.state = Locked(state)
    }

    /// When the identity was created.
    public var created: Date {
        state.withLock { Date(timeIntervalSince1970: Double($0.body.created) / 1000) }
    }

    /// The Argon2id parameters of the passphrase slot, if the vault has one.
    public var passphraseParameters: Argon2id.Parameters? {
        state.withLock { $0.header.slots.first { $0.type == .passphrase }?.kdf }
    }

    /// The number of key-file slots.
    public var keyFileCount: Int {
        state.withLock { $0.header.slots.filter { $0.type == .keyFile }.count }
    }

    // MARK: - Create and open

    /// Creates a new vault with a fresh identity at `url`, which must not exist.
    ///
    /// - Parameters:
    ///   - url: where the vault file is created.
    ///   - name: the identity's name.
    ///   - email: the identity's email, if any.
    ///   - passphrase: the passphrase that opens the vault (1 to 4096 bytes).
    ///   - kdf: Argon2id cost for the passphrase slot; `.moderate` unless told otherwise, and at
    ///     most the work of the `.sensitive` preset (passes × memory), which is what a vault may ask for.
    ///   - logger: where the vault logs (nothing by default).
    /// - Throws: ``VaultError`` `.alreadyExists`, `.invalidArguments` (name, email, a `kdf` over the
    ///   maximum), `.io`.
    public static func create(at url: URL, name: String, email: String? = nil, passphrase: SecureBytes,
                              kdf: Argon2id.Parameters = .moderate, logger: Logger = Vault.disabledLogger) throws -> Vault {
        try IdentityRules.validate(name: name, email: email)
        try checkPassphrase(passphrase)
        if FileManager.default.fileExists(atPath: url.path) {
            throw VaultError(.alreadyExists, "a vault already exists at \(url.path)")
        }
        let vaultKey = SymmetricKey()
        let vaultID = SecureRandom.bytes(count: VaultFormat.vaultIDByteCount)
        let slot = try passphraseSlot(passphrase: passphrase, kdf: kdf, vaultID: vaultID, vaultKey: vaultKey)
        let body = VaultFormat.Body(name: name, email: email, created: nowMillis(),
                                    signingSeed: Ed25519.PrivateKey().seed,
                                    boxSecret: X25519.PrivateKey().rawRepresentation, items: [])
        let header = VaultFormat.Header(vaultID: vaultID, slots: [slot])
        let file = try seal(header: header, body: body, vaultKey: vaultKey)
        try VaultFile.create(file, at: url)
        logger.info("vault created", metadata: ["path": "\(url.path)", "kdf": "\(kdf)"])
        return try Vault(url: url, state: State(header: header, vaultKey: vaultKey, body: body,
                                                fileHash: VaultFile.contentHash(file)), logger: logger)
    }

    /// Opens the vault at `url`.
    ///
    /// - Throws: ``VaultError`` `.notFound`; `.malformed` for a file that is not a vault, of an
    ///   unknown version, or damaged; `.wrongPassphrase` / `.wrongKeyFile`; `.integrityFailure`
    ///   when a slot opens but the body does not authenticate.
    public static func open(at url: URL, unlock: VaultUnlock, logger: Logger = Vault.disabledLogger) throws -> Vault {
        let file = try VaultFile.read(url)
        let (header, bodyOffset) = try VaultFormat.parseHeader(file)
        let vaultKey = try unlockKey(header: header, unlock: unlock)
        guard let plaintext = openBody(file, bodyOffset: bodyOffset, vaultKey: vaultKey) else {
            throw VaultError(.integrityFailure, "the vault body fails authentication: the file was changed or damaged")
        }
        let body = try VaultFormat.decodeBody(plaintext)
        logger.debug("vault opened", metadata: ["path": "\(url.path)"])
        return try Vault(url: url, state: State(header: header, vaultKey: vaultKey, body: body,
                                                fileHash: VaultFile.contentHash(file)), logger: logger)
    }

    /// Opens with a passphrase.
    public static func open(at url: URL, passphrase: SecureBytes, logger: Logger = Vault.disabledLogger) throws -> Vault {
        try open(at: url, unlock: .passphrase(passphrase), logger: logger)
    }

    // MARK: - Slots

    /// Replaces the passphrase slot with one for `newPassphrase` (a fresh salt; the cost
    /// kept unless `kdf` is given). The vault key, the key-file slots and the body stay as they
    /// are, so a copy of the old file still opens with the old passphrase and yields the vault
    /// key and the identity keys. ``rekey(passphrase:kdf:)`` does not change that either.
    public func changePassphrase(to newPassphrase: SecureBytes, kdf: Argon2id.Parameters? = nil) throws {
        try Self.checkPassphrase(newPassphrase)
        // Argon2id runs before the vault's lock is taken, so other writers do not wait for it.
        let (vaultID, vaultKey, cost) = read { state in
            (state.header.vaultID, state.vaultKey, kdf ?? state.header.slots.first { $0.type == .passphrase }?.kdf ?? .moderate)
        }
        let slot = try Self.passphraseSlot(passphrase: newPassphrase, kdf: cost, vaultID: vaultID, vaultKey: vaultKey)
        try mutate { state in
            // The latest state opened with this vault key, so it is this vault id; checked anyway.
            guard state.header.vaultID == vaultID else {
                throw VaultError(.changedOnDisk, "the vault at \(url.path) was re-keyed since it was opened; open it again and retry")
            }
            state.header.slots.removeAll { $0.type == .passphrase }
            state.header.slots.insert(slot, at: 0)
        }
        logger.info("vault passphrase changed", metadata: ["path": "\(url.path)"])
    }

    /// Re-keys the vault: a new random vault key (and vault id) seals the body, one passphrase
    /// slot holds it, and every other slot is dropped, so key files and the old passphrase no
    /// longer open this file.
    ///
    /// The identity keys (the Ed25519 seed and the X25519 secret in the body) stay the same. So
    /// an old copy of the file still opens with the old passphrase or key file, and yields the
    /// identity: a re-key does not protect against someone who holds an old copy and an old
    /// secret. Only a new identity (a new vault) makes old copies worthless.
    public func rekey(passphrase: SecureBytes, kdf: Argon2id.Parameters? = nil) throws {
        try Self.checkPassphrase(passphrase)
        // Argon2id runs before the vault's lock is taken, so other writers do not wait for it.
        let cost = kdf ?? read { $0.header.slots.first { $0.type == .passphrase }?.kdf } ?? .moderate
        let newKey = SymmetricKey()
        let newID = SecureRandom.bytes(count: VaultFormat.vaultIDByteCount)
        let slot = try Self.passphraseSlot(passphrase: passphrase, kdf: cost, vaultID: newID, vaultKey: newKey)
        try mutate { state in
            state.header = VaultFormat.Header(vaultID: newID, slots: [slot])
            state.vaultKey = newKey
        }
        logger.info("vault re-keyed", metadata: ["path": "\(url.path)"])
    }

    /// Adds a key-file slot and writes the new 32-byte key file to `keyFileURL` (mode 0600;
    /// it must not exist). The key file then unlocks this vault on its own.
    ///
    /// - Returns: the new slot's id (see ``KeyFileSlot/id``).
    @discardableResult
    public func addKeyFile(at keyFileURL: URL) throws -> String {
        let keyFile = SymmetricKey()
        var id = ""
        if FileManager.default.fileExists(atPath: keyFileURL.path) {
            throw VaultError(.alreadyExists, "a file already exists at \(keyFileURL.path)")
        }
        try mutate { state in
            guard state.header.slots.count < VaultFormat.maxSlots else {
                throw VaultError(.invalidArguments, "the vault already has \(VaultFormat.maxSlots) key slots; re-key it to drop old ones")
            }
            let salt = SecureRandom.bytes(count: Argon2id.saltByteCount)
            var slot = VaultFormat.Slot(type: .keyFile, kdf: nil, salt: salt, wrappedKey: [])
            let slotKey = VaultFormat.keyFileSlotKey(keyFile: keyFile, vaultID: state.header.vaultID, salt: salt)
            slot.wrappedKey = try XChaCha20Poly1305.seal(state.vaultKey.bytes, using: slotKey,
                                                         authenticating: VaultFormat.slotAssociatedData(vaultID: state.header.vaultID, slot: slot)).combined
            state.header.slots.append(slot)
            // Write the key file first: if the vault write then fails, a stray key file opens nothing.
            try VaultFile.writeNewSecretFile(keyFile.bytes, to: keyFileURL)
            id = Self.keyFileID(salt: salt)
        }
        logger.info("vault key file added", metadata: ["path": "\(url.path)"])
        return id
    }

    // MARK: - Internals

    /// Applies `change` to the vault as it is on disk now, and writes it, under the vault's lock.
    ///
    /// When the file was written since this object last read or wrote it (by another process or
    /// another `Vault` object), it is read again and opened with the vault key this object
    /// holds, and `change` applies to that: concurrent writers wait their turn (at most
    /// ``VaultFile/lockWait``, then `.busy`) and each keeps its change. A file this key no longer
    /// opens (re-keyed elsewhere, replaced, removed) is `.changedOnDisk`. A failed change or
    /// write leaves the file and this object as they were.
    func mutate(_ change: (inout State) throws -> Void) throws {
        try VaultFile.withExclusiveLock(VaultFile.lockPath(forVault: url), guarding: "the vault at \(url.path)") {
            var next = try latestState()
            try change(&next)
            let file = try Self.seal(header: next.header, body: next.body, vaultKey: next.vaultKey)
            guard file.count <= VaultFormat.maxFileSize else {
                throw VaultError(.invalidArguments, "the vault would grow to \(file.count) bytes, over the \(VaultFormat.maxFileSize >> 20) MiB a vault may have; nothing was changed")
            }
            try VaultFile.replace(url, with: file)
            next.fileHash = VaultFile.contentHash(file)
            state.withLock { $0 = next }
        }
    }

    /// The vault as it is on disk now (the caller holds the vault's lock): this object's state
    /// when the file is the one it last read or wrote, otherwise the file opened with its vault key.
    private func latestState() throws -> State {
        let known = read { $0 }
        let file: [UInt8]
        do { file = try VaultFile.read(url) } catch let e as VaultError where e.code == .notFound {
            throw VaultError(.changedOnDisk, "the vault at \(url.path) was removed since it was opened")
        }
        let hash = VaultFile.contentHash(file)
        if hash == known.fileHash { return known }
        let (header, bodyOffset) = try VaultFormat.parseHeader(file)
        guard let plaintext = Self.openBody(file, bodyOffset: bodyOffset, vaultKey: known.vaultKey) else {
            throw VaultError(.changedOnDisk, "the vault at \(url.path) was re-keyed or replaced since it was opened; open it again and retry")
        }
        let body = try VaultFormat.decodeBody(plaintext)
        guard body.signingSeed == known.body.signingSeed else {
            throw VaultError(.changedOnDisk, "the vault at \(url.path) holds another identity since it was opened; open it again")
        }
        logger.debug("vault written elsewhere since read; changing its latest contents", metadata: ["path": "\(url.path)"])
        return State(header: header, vaultKey: known.vaultKey, body: body, fileHash: hash)
    }

    /// The body's plaintext, or nil when it does not authenticate under `vaultKey` with the
    /// header (the file's first `bodyOffset` bytes) as associated data.
    static func openBody(_ file: [UInt8], bodyOffset: Int, vaultKey: SymmetricKey) -> SecureBytes? {
        guard let box = try? XChaCha20Poly1305.SealedBox(combined: Array(file[bodyOffset...])) else { return nil }
        return try? XChaCha20Poly1305.openSecret(box, using: vaultKey, authenticating: Array(file[0..<bodyOffset]))
    }

    func read<R>(_ body: (State) throws -> R) rethrows -> R {
        try state.withLock { try body($0) }
    }

    static func seal(header: VaultFormat.Header, body: VaultFormat.Body, vaultKey: SymmetricKey) throws -> [UInt8] {
        let headerBytes = header.encoded()
        let plaintext = VaultFormat.encodeBody(body)
        let box = try XChaCha20Poly1305.seal(plaintext, using: vaultKey, authenticating: headerBytes)
        return headerBytes + box.combined
    }

    static func passphraseSlot(passphrase: SecureBytes, kdf: Argon2id.Parameters, vaultID: [UInt8],
                               vaultKey: SymmetricKey) throws -> VaultFormat.Slot {
        try VaultFormat.checkWritable(kdf)
        let salt = SecureRandom.bytes(count: Argon2id.saltByteCount)
        var slot = VaultFormat.Slot(type: .passphrase, kdf: kdf, salt: salt, wrappedKey: [])
        let slotKey = try Argon2id.deriveKey(passphrase: passphrase, salt: salt, parameters: kdf)
        slot.wrappedKey = try XChaCha20Poly1305.seal(vaultKey.bytes, using: slotKey,
                                                     authenticating: VaultFormat.slotAssociatedData(vaultID: vaultID, slot: slot)).combined
        return slot
    }

    static func unlockKey(header: VaultFormat.Header, unlock: VaultUnlock) throws -> SymmetricKey {
        switch unlock {
        case .passphrase(let passphrase):
            let slots = header.slots.filter { $0.type == .passphrase }
            guard !slots.isEmpty else {
                throw VaultError(.wrongPassphrase, "this vault has no passphrase; unlock it with its key file")
            }
            for slot in slots {
                let slotKey = try Argon2id.deriveKey(passphrase: passphrase, salt: slot.salt, parameters: slot.kdf!)
                if let key = try? unwrap(slot, slotKey: slotKey, vaultID: header.vaultID) { return key }
            }
            throw VaultError(.wrongPassphrase, "wrong passphrase for this vault")
        case .keyFile(let keyFile):
            for slot in header.slots where slot.type == .keyFile {
                let slotKey = VaultFormat.keyFileSlotKey(keyFile: keyFile, vaultID: header.vaultID, salt: slot.salt)
                if let key = try? unwrap(slot, slotKey: slotKey, vaultID: header.vaultID) { return key }
            }
            throw VaultError(.wrongKeyFile, "this key file does not unlock this vault")
        }
    }

    private static func unwrap(_ slot: VaultFormat.Slot, slotKey: SymmetricKey, vaultID: [UInt8]) throws -> SymmetricKey {
        let box = try XChaCha20Poly1305.SealedBox(combined: slot.wrappedKey)
        let raw = try XChaCha20Poly1305.openSecret(box, using: slotKey,
                                                   authenticating: VaultFormat.slotAssociatedData(vaultID: vaultID, slot: slot))
        return try SymmetricKey(bytes: raw)
    }

    static func checkPassphrase(_ passphrase: SecureBytes) throws {
        guard passphrase.count > 0 else { throw VaultError(.invalidArguments, "the passphrase is empty") }
        guard passphrase.count <= 4096 else { throw VaultError(.invalidArguments, "the passphrase is longer than 4096 bytes") }
    }

    static func nowMillis() -> Int64 { Int64((Date().timeIntervalSince1970 * 1000).rounded()) }

    /// A logger that drops everything: the library default. Only executables bootstrap logging.
    public static let disabledLogger = Logger(label: "coffer.disabled", factory: { _ in SwiftLogNoOpLogHandler() })
}

extension Vault: CustomStringConvertible {
    public var description: String { "Vault(\(identity.userID), \(identity.name), locked keys redacted)" }
}

import CofferCrypto
import Foundation
import Logging

extension Vault {
    /// The key that seals the vault's body, for the unlock agent (`coffer unlock`), which holds
    /// it so that later commands need no passphrase. It never leaves guarded memory but to go
    /// over the agent's pipe and socket.
    package var vaultKey: SymmetricKey { read { $0.vaultKey } }

    /// Opens the vault at `url` with its vault key (from the unlock agent) instead of a slot.
    ///
    /// The body authenticates under the key with the header as associated data, so a key that
    /// is not this file's (another vault's, or this vault's before `vault passwd --rekey`) fails
    /// cleanly with `.wrongKeyFile`, and a damaged file as ``open(at:unlock:logger:)`` fails.
    ///
    /// - Throws: ``VaultError`` `.notFound`, `.malformed`, `.wrongKeyFile`.
    package static func open(at url: URL, vaultKey: SymmetricKey, logger: Logger = Vault.disabledLogger) throws -> Vault {
        let file = try VaultFile.read(url)
        let (header, bodyOffset) = try VaultFormat.parseHeader(file)
        guard let plaintext = openBody(file, bodyOffset: bodyOffset, vaultKey: vaultKey) else {
            throw VaultError(.wrongKeyFile, "the unlock agent's key does not open the vault at \(url.path)")
        }
        let body = try VaultFormat.decodeBody(plaintext)
        logger.debug("vault opened with its vault key", metadata: ["path": "\(url.path)"])
        return try Vault(url: url, state: State(header: header, vaultKey: vaultKey, body: body,
                                                fileHash: VaultFile.contentHash(file)), logger: logger)
    }
}

import CofferCrypto
import Foundation

/// A key-file slot of a vault, as `vault keyfile --list` shows it: no secret.
public struct KeyFileSlot: Sendable, Equatable {
    /// 16 hex digits that name the slot: the first 8 bytes of
    /// `BLAKE2b-128("coffer.vault.keyfile-id.v1" ‖ the slot's salt)`. The salt is public (it is
    /// in the header), new for each key file, and unchanged by `vault passwd`, so the id is
    /// stable and says nothing about the key file.
    public let id: String
}

extension Vault {
    /// The key-file slots, in the order of the header.
    public var keyFiles: [KeyFileSlot] {
        read { state in state.header.slots.filter { $0.type == .keyFile }.map { KeyFileSlot(id: Self.keyFileID(salt: $0.salt)) } }
    }

    static func keyFileID(salt: [UInt8]) -> String {
        Hex.encode(BLAKE2b.hash(Array("coffer.vault.keyfile-id.v1".utf8) + salt, outputByteCount: 16).prefix(8))
    }

    /// Removes the key-file slot `id`, so that key file no longer opens this file (an old copy
    /// of the file still opens with it). Every other slot stays.
    ///
    /// - Throws: ``VaultError`` `.itemNotFound` for an unknown id; `.invalidArguments` when the
    ///   slot is the last one left, which would leave a vault nothing opens.
    public func revokeKeyFile(id: String) throws {
        try mutate { state in
            guard let index = state.header.slots.firstIndex(where: { $0.type == .keyFile && Self.keyFileID(salt: $0.salt) == id }) else {
                throw VaultError(.itemNotFound, "this vault has no key file with id '\(id)'; 'coffer vault keyfile --list' shows their ids")
            }
            guard state.header.slots.count > 1 else {
                throw VaultError(.invalidArguments, "key file '\(id)' is the only way left to open this vault; add a passphrase ('coffer vault passwd') or another key file first")
            }
            state.header.slots.remove(at: index)
        }
    }
}

/// An error from the vault module: a code that callers switch on and a message that
/// never holds a secret. `description` is the message.
public struct VaultError: Error, Sendable, CustomStringConvertible {
    public enum Code: Sendable, Equatable {
        /// No vault (or key file) at the path.
        case notFound
        /// `create` over an existing file, or an item that already exists.
        case alreadyExists
        /// Not a vault, an unknown version, or a damaged file (the header checksum fails).
        case malformed
        /// The header is intact and a slot opened, but the body fails authentication.
        case integrityFailure
        /// No passphrase slot opens with this passphrase.
        case wrongPassphrase
        /// No key-file slot opens with this key file.
        case wrongKeyFile
        /// A key file whose mode grants any permission to group or others: refused unread
        /// (`chmod 600` it), as ssh refuses such private keys.
        case unprotectedKeyFile
        /// The file changed since this process read it in a way a change cannot be applied to
        /// (re-keyed, replaced by another vault, removed); open it again.
        case changedOnDisk
        /// Another process held the vault's (or its marks') lock for longer than a writer waits.
        case busy
        /// No keychain item matches.
        case itemNotFound
        /// A caller's argument is out of bounds (a name too long, too many slots).
        case invalidArguments
        /// The file system refused (permissions, disk full).
        case io
    }

    public let code: Code
    public let message: String

    public init(_ code: Code, _ message: String) {
        self.code = code
        self.message = message
    }

    public var description: String { message }
}

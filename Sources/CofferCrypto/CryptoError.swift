/// The errors that the crypto module throws. A small closed set: none of them
/// carries key material or plaintext.
public enum CryptoError: Error, Sendable, Equatable, CustomStringConvertible {
    /// A ciphertext, wrapped key or sealed box did not authenticate under the key and
    /// associated data given: it was changed, moved, or the key is wrong.
    case authenticationFailure
    /// A signature did not verify under the public key given.
    case invalidSignature
    /// Input bytes do not have the shape this operation needs (a length, a version).
    case malformedInput(String)
    /// A public key that cannot be used (for X25519, one that yields an all-zero secret).
    case invalidPublicKey
    /// Key-derivation parameters outside the limits Coffer accepts.
    case parametersOutOfRange(String)
    /// The system refused memory that an operation needed (Argon2id, guarded memory).
    case outOfMemory

    public var description: String {
        switch self {
        case .authenticationFailure: return "authentication failed (data changed, moved, or wrong key)"
        case .invalidSignature: return "signature does not verify"
        case .malformedInput(let what): return "malformed input: \(what)"
        case .invalidPublicKey: return "unusable public key"
        case .parametersOutOfRange(let what): return "parameters out of range: \(what)"
        case .outOfMemory: return "out of memory"
        }
    }
}

import Foundation
internal import CSodium

/// X25519 keys, used to wrap zone keys to a member (`crypto_box_seal`).
public enum X25519 {
    public static let keyByteCount = 32

    /// A public key.
    public struct PublicKey: Sendable, Hashable, CustomStringConvertible {
        public let rawRepresentation: [UInt8]

        public init(rawRepresentation: [UInt8]) throws {
            guard rawRepresentation.count == X25519.keyByteCount else {
                throw CryptoError.malformedInput("an X25519 public key has 32 bytes, got \(rawRepresentation.count)")
            }
            self.rawRepresentation = rawRepresentation
        }

        public var description: String { "X25519.PublicKey(\(Hex.encode(rawRepresentation)))" }
    }

    /// A private key in guarded memory, with its public key.
    public struct PrivateKey: Sendable, CustomStringConvertible {
        public let rawRepresentation: SecureBytes
        public let publicKey: PublicKey

        /// A new random key.
        public init() {
            try! self.init(rawRepresentation: .random(count: X25519.keyByteCount))
        }

        /// The key with these 32 secret bytes.
        public init(rawRepresentation: SecureBytes) throws {
            Sodium.ensureInitialized()
            guard rawRepresentation.count == X25519.keyByteCount else {
                throw CryptoError.malformedInput("an X25519 private key has 32 bytes, got \(rawRepresentation.count)")
            }
            var pk = [UInt8](repeating: 0, count: X25519.keyByteCount)
            let result = rawRepresentation.withUnsafeBytes { sk in
                crypto_scalarmult_base(&pk, sk.baseAddress!.assumingMemoryBound(to: UInt8.self))
            }
            guard result == 0 else { throw CryptoError.malformedInput("X25519 private key") }
            self.rawRepresentation = rawRepresentation
            self.publicKey = try PublicKey(rawRepresentation: pk)
        }

        /// The raw X25519 shared secret with `peer` (`crypto_scalarmult`). Throws
        /// ``CryptoError/invalidPublicKey`` when the result is all zeros (a low-order point).
        /// Raw shared secrets must go through a KDF before use as a key.
        public func sharedSecret(with peer: PublicKey) throws -> SecureBytes {
            var failed = false
            let secret = SecureBytes(count: X25519.keyByteCount) { out in
                rawRepresentation.withUnsafeBytes { sk in
                    failed = crypto_scalarmult(out.baseAddress!.assumingMemoryBound(to: UInt8.self),
                                               sk.baseAddress!.assumingMemoryBound(to: UInt8.self),
                                               peer.rawRepresentation) != 0
                }
            }
            if failed { throw CryptoError.invalidPublicKey }
            return secret
        }

        public var description: String { "X25519.PrivateKey(redacted)" }
    }
}

/// Anonymous sealed boxes (`crypto_box_seal`): a message, typically a zone key, sealed to
/// an X25519 public key so that only the holder of the private key can open it.
///
/// Layout: ephemeral public key (32) ‖ XSalsa20-Poly1305 ciphertext ‖ tag (16), 48 bytes of overhead.
public enum SealedBoxWrap {
    public static let overhead = crypto_box_sealbytes()

    /// Seals secret bytes to `recipient`.
    public static func seal(_ secret: SecureBytes, to recipient: X25519.PublicKey) -> [UInt8] {
        Sodium.ensureInitialized()
        var out = [UInt8](repeating: 0, count: secret.count + overhead)
        secret.withUnsafeBytes { m in
            _ = crypto_box_seal(&out, m.baseAddress!.assumingMemoryBound(to: UInt8.self), UInt64(m.count),
                                recipient.rawRepresentation)
        }
        return out
    }

    /// Opens a sealed box with `recipient`'s private key into guarded memory. Throws
    /// ``CryptoError/authenticationFailure`` if any byte changed or the key is not the recipient's.
    public static func open(_ sealed: [UInt8], with recipient: X25519.PrivateKey) throws -> SecureBytes {
        Sodium.ensureInitialized()
        guard sealed.count >= overhead else {
            throw CryptoError.malformedInput("sealed box shorter than its \(overhead)-byte overhead")
        }
        var failed = false
        let opened = SecureBytes(count: sealed.count - overhead) { out in
            recipient.rawRepresentation.withUnsafeBytes { sk in
                failed = crypto_box_seal_open(out.baseAddress!.assumingMemoryBound(to: UInt8.self), sealed, UInt64(sealed.count),
                                              recipient.publicKey.rawRepresentation,
                                              sk.baseAddress!.assumingMemoryBound(to: UInt8.self)) != 0
            }
        }
        if failed { throw CryptoError.authenticationFailure }
        return opened
    }
}

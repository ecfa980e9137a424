import Foundation
internal import CSodium

/// Ed25519 signatures (libsodium `crypto_sign_*`, detached mode).
public enum Ed25519 {
    public static let publicKeyByteCount = 32
    public static let seedByteCount = 32
    public static let signatureByteCount = 64

    /// A public verification key.
    public struct PublicKey: Sendable, Hashable, CustomStringConvertible {
        public let rawRepresentation: [UInt8]

        public init(rawRepresentation: [UInt8]) throws {
            guard rawRepresentation.count == Ed25519.publicKeyByteCount else {
                throw CryptoError.malformedInput("an Ed25519 public key has 32 bytes, got \(rawRepresentation.count)")
            }
            self.rawRepresentation = rawRepresentation
        }

        /// True when `signature` is a valid signature of `message` by this key.
        public func isValidSignature(_ signature: [UInt8], for message: some ContiguousBytes) -> Bool {
            Sodium.ensureInitialized()
            guard signature.count == Ed25519.signatureByteCount else { return false }
            return message.withUnsafeBytes { m in
                crypto_sign_verify_detached(signature, m.baseAddress?.assumingMemoryBound(to: UInt8.self),
                                            UInt64(m.count), rawRepresentation) == 0
            }
        }

        /// Throws ``CryptoError/invalidSignature`` unless `signature` verifies.
        public func verify(_ signature: [UInt8], for message: some ContiguousBytes) throws {
            guard isValidSignature(signature, for: message) else { throw CryptoError.invalidSignature }
        }

        public var description: String { "Ed25519.PublicKey(\(Hex.encode(rawRepresentation)))" }
    }

    /// A signing key. The 64-byte libsodium secret key (seed ‖ public key) stays in guarded memory.
    public struct PrivateKey: Sendable, CustomStringConvertible {
        let secretKey: SecureBytes
        public let publicKey: PublicKey

        /// A new random key pair.
        public init() {
            self.init(validSeed: .random(count: Ed25519.seedByteCount))
        }

        /// The key pair determined by a 32-byte seed.
        public init(seed: SecureBytes) throws {
            guard seed.count == Ed25519.seedByteCount else {
                throw CryptoError.malformedInput("an Ed25519 seed has 32 bytes, got \(seed.count)")
            }
            self.init(validSeed: seed)
        }

        private init(validSeed seed: SecureBytes) {
            Sodium.ensureInitialized()
            var pk = [UInt8](repeating: 0, count: Ed25519.publicKeyByteCount)
            let sk = SecureBytes(count: crypto_sign_secretkeybytes()) { skBuf in
                seed.withUnsafeBytes { s in
                    _ = crypto_sign_seed_keypair(&pk, skBuf.baseAddress!.assumingMemoryBound(to: UInt8.self),
                                                 s.baseAddress!.assumingMemoryBound(to: UInt8.self))
                }
            }
            self.secretKey = sk
            self.publicKey = try! PublicKey(rawRepresentation: pk)
        }

        /// The 32-byte seed that determines this key (for storing it in a vault).
        public var seed: SecureBytes { secretKey.slice(0..<Ed25519.seedByteCount) }

        /// A 64-byte detached signature of `message`.
        public func signature(for message: some ContiguousBytes) -> [UInt8] {
            var sig = [UInt8](repeating: 0, count: Ed25519.signatureByteCount)
            message.withUnsafeBytes { m in
                secretKey.withUnsafeBytes { sk in
                    _ = crypto_sign_detached(&sig, nil, m.baseAddress?.assumingMemoryBound(to: UInt8.self), UInt64(m.count),
                                             sk.baseAddress!.assumingMemoryBound(to: UInt8.self))
                }
            }
            return sig
        }

        public var description: String { "Ed25519.PrivateKey(redacted)" }
    }
}

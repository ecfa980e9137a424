import Foundation
internal import CSodium

/// Argon2id password hashing (`crypto_pwhash`, algorithm `ARGON2ID13`), used to turn a
/// passphrase into a vault slot key.
public enum Argon2id {
    public static let saltByteCount = Int(crypto_pwhash_SALTBYTES)

    /// Cost parameters. Read from a file, they are checked against ``limits`` before any
    /// memory is allocated, so a hostile header cannot ask for 64 GiB.
    public struct Parameters: Sendable, Hashable, CustomStringConvertible {
        /// Passes over memory (libsodium `opslimit`).
        public let opsLimit: UInt32
        /// Memory in KiB (libsodium `memlimit` / 1024).
        public let memoryKiB: UInt32

        /// Accepts parameters inside the limits only.
        public init(opsLimit: UInt32, memoryKiB: UInt32) throws {
            guard Argon2id.limits.ops.contains(opsLimit) else {
                throw CryptoError.parametersOutOfRange("Argon2id passes \(opsLimit) outside \(Argon2id.limits.ops)")
            }
            guard Argon2id.limits.memoryKiB.contains(memoryKiB) else {
                throw CryptoError.parametersOutOfRange("Argon2id memory \(memoryKiB) KiB outside \(Argon2id.limits.memoryKiB)")
            }
            self.opsLimit = opsLimit
            self.memoryKiB = memoryKiB
        }

        private init(unchecked ops: UInt32, _ kib: UInt32) {
            self.opsLimit = ops
            self.memoryKiB = kib
        }

        /// libsodium's minimum (1 pass, 8 KiB): for tests and fixtures only, so not public API
        /// (a vault file with these parameters still opens: they are inside ``Argon2id/limits``).
        package static let min = Parameters(unchecked: UInt32(crypto_pwhash_argon2id_OPSLIMIT_MIN),
                                           UInt32(crypto_pwhash_argon2id_MEMLIMIT_MIN / 1024))
        /// libsodium's interactive preset (2 passes, 64 MiB).
        public static let interactive = Parameters(unchecked: UInt32(crypto_pwhash_argon2id_OPSLIMIT_INTERACTIVE),
                                                   UInt32(crypto_pwhash_argon2id_MEMLIMIT_INTERACTIVE / 1024))
        /// libsodium's moderate preset (3 passes, 256 MiB): Coffer's default.
        public static let moderate = Parameters(unchecked: UInt32(crypto_pwhash_argon2id_OPSLIMIT_MODERATE),
                                                UInt32(crypto_pwhash_argon2id_MEMLIMIT_MODERATE / 1024))
        /// libsodium's sensitive preset (4 passes, 1 GiB).
        public static let sensitive = Parameters(unchecked: UInt32(crypto_pwhash_argon2id_OPSLIMIT_SENSITIVE),
                                                 UInt32(crypto_pwhash_argon2id_MEMLIMIT_SENSITIVE / 1024))

        public var description: String { "Argon2id(passes: \(opsLimit), memory: \(memoryKiB) KiB)" }
    }

    /// The parameters Coffer accepts: from libsodium's minimum up to its sensitive preset's
    /// memory (1 GiB) and at most 10 passes.
    public static let limits = (ops: UInt32(crypto_pwhash_argon2id_OPSLIMIT_MIN)...10,
                                memoryKiB: UInt32(crypto_pwhash_argon2id_MEMLIMIT_MIN / 1024)...(1 << 20))

    /// Derives a 32-byte key from `passphrase` and a 16-byte `salt`.
    public static func deriveKey(passphrase: SecureBytes, salt: [UInt8], parameters: Parameters) throws -> SymmetricKey {
        Sodium.ensureInitialized()
        guard salt.count == saltByteCount else {
            throw CryptoError.malformedInput("an Argon2id salt has \(saltByteCount) bytes, got \(salt.count)")
        }
        // Re-check: Parameters can only be built inside the limits, but this is the last gate before allocation.
        _ = try Parameters(opsLimit: parameters.opsLimit, memoryKiB: parameters.memoryKiB)
        var status: Int32 = 0
        let out = SecureBytes(count: SymmetricKey.byteCount) { o in
            passphrase.withUnsafeBytes { p in
                status = crypto_pwhash(o.baseAddress!.assumingMemoryBound(to: UInt8.self), UInt64(o.count),
                                       p.baseAddress!.assumingMemoryBound(to: CChar.self), UInt64(p.count),
                                       salt, UInt64(parameters.opsLimit), Int(parameters.memoryKiB) * 1024,
                                       crypto_pwhash_ALG_ARGON2ID13)
            }
        }
        guard status == 0 else { throw CryptoError.outOfMemory }
        return try SymmetricKey(bytes: out)
    }
}

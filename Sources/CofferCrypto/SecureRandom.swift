internal import CSodium

/// Random bytes from libsodium (`randombytes_buf`, the system CSPRNG).
public enum SecureRandom {
    /// `count` random bytes in ordinary memory (salts, identifiers). Use
    /// ``SecureBytes/random(count:)`` for secrets.
    public static func bytes(count: Int) -> [UInt8] {
        Sodium.ensureInitialized()
        var out = [UInt8](repeating: 0, count: count)
        if count > 0 {
            out.withUnsafeMutableBytes { randombytes_buf($0.baseAddress!, count) }
        }
        return out
    }
}

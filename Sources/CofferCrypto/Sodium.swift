internal import CSodium

/// One-time libsodium initialisation. Every entry point of this module calls
/// ``Sodium/ensureInitialized()`` before touching the C library.
enum Sodium {
    private static let initialized: Bool = {
        // sodium_init returns 0 on success, 1 if already initialised, -1 on failure.
        let result = sodium_init()
        precondition(result >= 0, "libsodium failed to initialise")
        return true
    }()

    @inline(__always)
    static func ensureInitialized() {
        _ = initialized
    }

    /// Zeroes memory that held secrets (`sodium_memzero`, which the compiler cannot drop).
    static func wipe(_ buffer: UnsafeMutableRawBufferPointer) {
        guard let base = buffer.baseAddress, buffer.count > 0 else { return }
        sodium_memzero(base, buffer.count)
    }

    /// The libsodium version string, for diagnostics.
    static var versionString: String {
        ensureInitialized()
        return String(cString: sodium_version_string())
    }
}

/// Facts about the cryptographic library, safe to print.
public enum CryptoLibrary {
    /// The version of libsodium that this process loaded, for example `1.0.18`.
    public static var version: String { Sodium.versionString }
}

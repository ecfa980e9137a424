import CofferCrypto
import Foundation
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// Durable, atomic, locked file writes for vaults.
///
/// A write takes an exclusive advisory lock (`flock`) on a sidecar file `<vault>.lock`,
/// checks that the vault on disk is still the one this process read (by BLAKE2b hash),
/// writes a temporary file in the same folder with mode 0600, `fsync`s it, renames it over
/// the vault, and `fsync`s the folder. Foundation's atomic write does neither the folder
/// `fsync` nor the 0600 mode.
enum VaultFile {
    /// Opens a path for reading without blocking on FIFOs or devices: non-blocking open, then
    /// only regular files are accepted.
    static func openRegular(_ url: URL, what: String) throws -> Int32 {
        let fd = open(url.path, O_RDONLY | O_CLOEXEC | O_NONBLOCK)
        guard fd >= 0 else {
            if errno == ENOENT { throw VaultError(.notFound, "no \(what) at \(url.path)") }
            throw VaultError(.io, "cannot read \(url.path): \(String(cString: strerror(errno)))")
        }
        var st = stat()
        guard fstat(fd, &st) == 0, (st.st_mode & S_IFMT) == S_IFREG else {
            close(fd)
            throw VaultError(.malformed, "\(url.path) is not a regular file")
        }
        return fd
    }

    static func read(_ url: URL) throws -> [UInt8] {
        let fd = try openRegular(url, what: "vault")
        defer { close(fd) }
        var st = stat()
        guard fstat(fd, &st) == 0 else { throw VaultError(.io, "cannot stat \(url.path)") }
        guard Int(st.st_size) <= VaultFormat.maxFileSize else {
            throw VaultError(.malformed, "\(url.path) is too large to be a vault (\(st.st_size) bytes)")
        }
        return try readAll(fd, path: url.path, limit: VaultFormat.maxFileSize)
    }

    static func readAll(_ fd: Int32, path: String, limit: Int) throws -> [UInt8] {
        var out = [UInt8]()
        var chunk = [UInt8](repeating: 0, count: 65536)
        while true {
            let n = chunk.withUnsafeMutableBytes { Glibc.read(fd, $0.baseAddress!, $0.count) }
            if n < 0 {
                if errno == EINTR { continue }
                throw VaultError(.io, "cannot read \(path): \(String(cString: strerror(errno)))")
            }
            if n == 0 { break }
            out += chunk[0..<n]
            guard out.count <= limit else { throw VaultError(.malformed, "\(path) is too large") }
        }
        return out
    }

    /// The fingerprint of file contents used to detect a change between read and write.
    static func contentHash(_ bytes: [UInt8]) -> [UInt8] { BLAKE2b.hash(bytes) }

    /// Replaces (or creates) the file at `url` with `bytes`.
    ///
    /// - Parameter expectedHash: the hash of the contents this process read; nil means
    ///   the file must not exist yet.
    static func write(_ bytes: [UInt8], to url: URL, expectedHash: [UInt8]?) throws {
        let folder = url.deletingLastPathComponent()
        let lockPath = url.path + ".lock"
        let lockFD = open(lockPath, O_RDWR | O_CREAT | O_CLOEXEC, 0o600)
        guard lockFD >= 0 else {
            if errno == ENOENT { throw VaultError(.notFound, "the folder \(folder.path) does not exist") }
            throw VaultError(.io, "cannot lock \(url.path): \(String(cString: strerror(errno)))")
        }
        defer { close(lockFD) } // closing releases the lock
        while flock(lockFD, LOCK_EX) != 0 {
            guard errno == EINTR else { throw VaultError(.io, "cannot lock \(url.path): \(String(cString: strerror(errno)))") }
        }

        if let expectedHash {
            let current: [UInt8]
            do { current = try read(url) } catch let e as VaultError where e.code == .notFound {
                throw VaultError(.changedOnDisk, "the vault at \(url.path) was removed since it was opened")
            }
            guard contentHash(current) == expectedHash else {
                throw VaultError(.changedOnDisk, "the vault at \(url.path) changed since it was opened; open it again and retry")
            }
        } else if access(url.path, F_OK) == 0 {
            throw VaultError(.alreadyExists, "a file already exists at \(url.path)")
        }

        let tempPath = folder.appendingPathComponent(".\(url.lastPathComponent).tmp-\(Hex.encode(SecureRandom.bytes(count: 6)))").path
        let fd = open(tempPath, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0o600)
        guard fd >= 0 else { throw VaultError(.io, "cannot write in \(folder.path): \(String(cString: strerror(errno)))") }
        var ok = false
        defer {
            if !ok { unlink(tempPath) }
        }
        do {
            defer { close(fd) }
            _ = fchmod(fd, 0o600) // regardless of umask
            var written = 0
            while written < bytes.count {
                let n = bytes.withUnsafeBytes { Glibc.write(fd, $0.baseAddress! + written, bytes.count - written) }
                if n < 0 {
                    if errno == EINTR { continue }
                    throw VaultError(.io, "cannot write \(url.path): \(String(cString: strerror(errno)))")
                }
                written += n
            }
            guard fsync(fd) == 0 else { throw VaultError(.io, "cannot sync \(url.path): \(String(cString: strerror(errno)))") }
        }
        guard rename(tempPath, url.path) == 0 else {
            throw VaultError(.io, "cannot replace \(url.path): \(String(cString: strerror(errno)))")
        }
        ok = true
        try syncFolder(folder)
    }

    static func syncFolder(_ folder: URL) throws {
        let dirFD = open(folder.path, O_RDONLY | O_DIRECTORY | O_CLOEXEC)
        guard dirFD >= 0 else { throw VaultError(.io, "cannot open \(folder.path) to sync it") }
        defer { close(dirFD) }
        guard fsync(dirFD) == 0 else { throw VaultError(.io, "cannot sync \(folder.path)") }
    }

    /// Writes a new secret file (a key file) with mode 0600, refusing to replace one.
    static func writeNewSecretFile(_ secret: SecureBytes, to url: URL) throws {
        let fd = open(url.path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0o600)
        guard fd >= 0 else {
            if errno == EEXIST { throw VaultError(.alreadyExists, "a file already exists at \(url.path)") }
            if errno == ENOENT { throw VaultError(.notFound, "the folder \(url.deletingLastPathComponent().path) does not exist") }
            throw VaultError(.io, "cannot create \(url.path): \(String(cString: strerror(errno)))")
        }
        defer { close(fd) }
        _ = fchmod(fd, 0o600)
        let n = secret.withUnsafeBytes { Glibc.write(fd, $0.baseAddress!, $0.count) }
        guard n == secret.count, fsync(fd) == 0 else {
            unlink(url.path)
            throw VaultError(.io, "cannot write \(url.path)")
        }
        try syncFolder(url.deletingLastPathComponent())
    }

    /// Reads a key file: exactly 32 bytes, into guarded memory. As ssh does with private keys,
    /// a key file that grants any permission to group or others is refused before it is read.
    static func readKeyFile(_ url: URL) throws -> SymmetricKey {
        let fd = try openRegular(url, what: "key file")
        defer { close(fd) }
        var st = stat()
        guard fstat(fd, &st) == 0 else { throw VaultError(.io, "cannot stat \(url.path)") }
        let mode = st.st_mode & 0o777
        guard mode & 0o077 == 0 else {
            throw VaultError(.unprotectedKeyFile, "the key file \(url.path) is open to other users (mode 0\(String(mode, radix: 8))); it was not used: make it private with 'chmod 600 \(url.path)'")
        }
        var failed = false
        let bytes = SecureBytes(count: SymmetricKey.byteCount + 1) { buffer in
            var total = 0
            while total < buffer.count {
                let n = Glibc.read(fd, buffer.baseAddress! + total, buffer.count - total)
                if n < 0 && errno == EINTR { continue }
                if n <= 0 { failed = n < 0; break }
                total += n
            }
            if total != SymmetricKey.byteCount { failed = true }
        }
        guard !failed else {
            throw VaultError(.malformed, "\(url.path) is not a Coffer key file (a key file holds exactly 32 bytes)")
        }
        return try SymmetricKey(bytes: bytes.slice(0..<SymmetricKey.byteCount))
    }
}

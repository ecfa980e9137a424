import CofferCrypto
import Foundation
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// Durable, atomic, locked file writes for vaults (and the files kept beside them).
///
/// A writer takes an exclusive advisory lock (`flock`) on a sidecar file (`<vault>.lock`),
/// waiting a bounded time, then writes a temporary file in the same folder with mode 0600,
/// `fsync`s it, renames it over the file, and `fsync`s the folder. Foundation's atomic write
/// does neither the folder `fsync` nor the 0600 mode. Readers take no lock: a rename replaces
/// a file whole.
package enum VaultFile {
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

    /// The whole regular file at `url`, a `what` (a vault unless told) of at most `limit` bytes:
    /// a larger file is refused before it is read.
    static func read(_ url: URL, what: String = "vault", limit: Int = VaultFormat.maxFileSize) throws -> [UInt8] {
        let fd = try openRegular(url, what: what)
        defer { close(fd) }
        var st = stat()
        guard fstat(fd, &st) == 0 else { throw VaultError(.io, "cannot stat \(url.path)") }
        guard Int(st.st_size) <= limit else {
            throw VaultError(.malformed, "\(url.path) is too large to be a \(what) (\(st.st_size) bytes)")
        }
        return try readAll(fd, path: url.path, limit: limit)
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

    /// How long a writer waits for another process's lock before giving up.
    static let lockWait: TimeInterval = 10

    /// Runs `body` holding an exclusive advisory lock (`flock`) on the sidecar file `lockPath`
    /// (created with mode 0600 when missing), and releases it after. Waits at most `timeout`
    /// for another holder, sleeping between non-blocking tries (from 1 ms, doubling to 50 ms),
    /// then throws ``VaultError/Code/busy`` naming `what`. Locks taken through separate opens
    /// exclude each other, in one process as across processes.
    static func withExclusiveLock<R>(_ lockPath: String, guarding what: String, timeout: TimeInterval = lockWait,
                                     _ body: () throws -> R) throws -> R {
        let fd = open(lockPath, O_RDWR | O_CREAT | O_CLOEXEC, 0o600)
        guard fd >= 0 else {
            let folder = URL(fileURLWithPath: lockPath).deletingLastPathComponent().path
            if errno == ENOENT { throw VaultError(.notFound, "the folder \(folder) does not exist") }
            throw VaultError(.io, "cannot lock \(what): \(String(cString: strerror(errno)))")
        }
        defer { close(fd) } // closing releases the lock
        let clock = ContinuousClock()
        let deadline = clock.now + .seconds(timeout)
        var pause: TimeInterval = 0.001
        while flock(fd, LOCK_EX | LOCK_NB) != 0 {
            switch errno {
            case EINTR:
                continue
            case EWOULDBLOCK:
                guard clock.now < deadline else {
                    throw VaultError(.busy, "\(what) stayed locked by another process for \(String(format: "%g", timeout)) s; nothing was changed: try again")
                }
                Thread.sleep(forTimeInterval: pause)
                pause = min(pause * 2, 0.05)
            default:
                throw VaultError(.io, "cannot lock \(what): \(String(cString: strerror(errno)))")
            }
        }
        return try body()
    }

    /// Creates the vault file at `url`, which must not exist, under the vault's lock.
    static func create(_ bytes: [UInt8], at url: URL) throws {
        try withExclusiveLock(lockPath(forVault: url), guarding: "the vault at \(url.path)") {
            guard access(url.path, F_OK) != 0 else { throw VaultError(.alreadyExists, "a file already exists at \(url.path)") }
            try replace(url, with: bytes)
        }
    }

    /// The vault's lock sidecar, `<vault>.lock`.
    static func lockPath(forVault url: URL) -> String { url.path + ".lock" }

    /// Replaces (or creates) the file at `url` with `bytes`, atomically and durably: a temporary
    /// file `.<name>.tmp-<random>` in the same folder with mode 0600, `fsync`, `rename` over
    /// `url`, `fsync` of the folder. The caller holds the lock that guards `url`. On failure the
    /// old file stays and no temporary file is left.
    static func replace(_ url: URL, with bytes: [UInt8]) throws {
        let folder = url.deletingLastPathComponent()
        // What a writer killed before its rename left (the caller's lock keeps every live one out).
        removeLeftovers(of: url, olderThan: nil)
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

    /// Removes the temporary files (`.<name>.tmp-…`) that writers of `url` killed before their
    /// rename left in its folder. A file another process still holds a lock on (`flock`, as
    /// a live writer does), or modified within `olderThan` seconds, is left alone.
    package static func removeLeftovers(of url: URL, olderThan age: TimeInterval?) {
        let folder = url.deletingLastPathComponent()
        let prefix = ".\(url.lastPathComponent).tmp-"
        guard let names = try? FileManager.default.contentsOfDirectory(atPath: folder.path) else { return }
        let now = Date().timeIntervalSince1970
        for name in names where name.hasPrefix(prefix) {
            let path = folder.appendingPathComponent(name).path
            let fd = open(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK)
            guard fd >= 0 else { continue }
            defer { close(fd) }
            var info = stat()
            guard fstat(fd, &info) == 0, (info.st_mode & S_IFMT) == S_IFREG, info.st_uid == getuid() else { continue }
            if let age, Double(info.st_mtim.tv_sec) > now - age { continue }
            guard flock(fd, LOCK_EX | LOCK_NB) == 0 else { continue }
            unlink(path)
        }
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

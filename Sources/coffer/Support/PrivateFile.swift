import CofferVault
import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// A file that only its owner may read (mode 0600, whatever the umask), written whole or not at
/// all: the bytes go to a new temporary file in the same folder (`O_EXCL`), which is synced and
/// then takes the file's name. An existing file is never replaced unless `force` is given, and
/// then only at the end, in one step.
final class PrivateFile {
    let path: String
    private let tempPath: String
    private var fd: Int32
    private let force: Bool

    /// Starts writing `path`. Fails with 73 when it exists (without `force`), 66 when its folder
    /// does not, 1 when the folder cannot be written.
    init(_ path: String, force: Bool) throws {
        self.path = path
        self.force = force
        try Self.checkTarget(path, force: force)
        let url = URL(fileURLWithPath: path)
        let folder = url.deletingLastPathComponent()
        // What a command killed while writing this file left (unlocked, and a minute old).
        VaultFile.removeLeftovers(of: url, olderThan: 60)
        tempPath = folder.appendingPathComponent(".\(url.lastPathComponent).tmp-\(UUID().uuidString.prefix(8))").path
        fd = open(tempPath, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0o600)
        // Held while this process writes: another run leaves a locked temporary file alone.
        if fd >= 0 { _ = flock(fd, LOCK_EX | LOCK_NB) }
        guard fd >= 0 else {
            let reason = String(cString: strerror(errno))
            if errno == ENOENT { throw CLIError(ExitStatus.notFound, "the folder \(folder.path) does not exist") }
            throw CLIError(ExitStatus.failure, "cannot write in \(folder.path): \(reason)")
        }
        _ = fchmod(fd, 0o600)
    }

    /// Fails with 73 when `path` exists and `force` is not given (a folder is refused even then),
    /// before any work is done.
    static func checkTarget(_ path: String, force: Bool) throws {
        var isFolder: ObjCBool = false
        guard FileManager.default.fileExists(atPath: path, isDirectory: &isFolder) else { return }
        if isFolder.boolValue { throw CLIError(ExitStatus.alreadyExists, "\(path) is a folder; give a file name") }
        if !force { throw CLIError(ExitStatus.alreadyExists, "\(path) already exists; choose another file, or pass --force to replace it") }
    }

    deinit { discard() }

    func write(_ data: Data) throws {
        try data.withUnsafeBytes { raw in
            var written = 0
            while written < raw.count {
                let n = Glibc.write(fd, raw.baseAddress! + written, raw.count - written)
                if n < 0 {
                    if errno == EINTR { continue }
                    throw CLIError(ExitStatus.failure, "cannot write \(path): \(String(cString: strerror(errno)))")
                }
                written += n
            }
        }
    }

    /// Syncs the file and gives it its name: without `force`, only if no file took the name
    /// meanwhile (73 then).
    func commit() throws {
        guard fsync(fd) == 0 else { throw CLIError(ExitStatus.failure, "cannot sync \(path): \(String(cString: strerror(errno)))") }
        close(fd)
        fd = -1
        if force {
            guard rename(tempPath, path) == 0 else { throw CLIError(ExitStatus.failure, "cannot write \(path): \(String(cString: strerror(errno)))") }
        } else {
            guard link(tempPath, path) == 0 else {
                if errno == EEXIST { throw CLIError(ExitStatus.alreadyExists, "\(path) already exists; choose another file, or pass --force to replace it") }
                throw CLIError(ExitStatus.failure, "cannot write \(path): \(String(cString: strerror(errno)))")
            }
            unlink(tempPath)
        }
        let folder = open(URL(fileURLWithPath: path).deletingLastPathComponent().path, O_RDONLY | O_DIRECTORY | O_CLOEXEC)
        if folder >= 0 {
            _ = fsync(folder)
            close(folder)
        }
    }

    /// Drops the temporary file (nothing of it stays), unless it was committed.
    func discard() {
        if fd >= 0 {
            close(fd)
            fd = -1
        }
        unlink(tempPath)
    }
}

import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// The set-up of a store file: creating it with `O_EXCL` when it is missing (so one process's
/// new file is never replaced by another's), and an exclusive `flock` on its folder that
/// serializes migrations and the store id across processes and threads.
///
/// No descriptor of an existing store file is ever opened here: closing any descriptor of a file
/// drops every POSIX lock the process holds on it, and SQLite's connections (of this store, or of
/// another `Store` on the same file in this process) rely on theirs. A new file is opened only
/// to create it, when no connection can have it open.
final class StoreFileLock {
    private let folder: String
    private var fd: Int32 = -1
    /// The file had no bytes: a store no one has set up yet.
    let isEmpty: Bool

    init(path: String, create: Bool) throws {
        folder = URL(fileURLWithPath: path).deletingLastPathComponent().path
        var st = stat()
        if lstat(path, &st) != 0 {
            guard errno == ENOENT else {
                throw StoreError(.internalError, "cannot open the store at \(path): \(String(cString: strerror(errno)))")
            }
            guard create else { throw StoreError(.unknownItem, "no store at \(path)") }
            // Private from the start (SQLite gives -wal and -shm the file's mode).
            let made = open(path, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0o600)
            if made >= 0 {
                _ = fchmod(made, 0o600)
                Glibc.close(made) // a file this call made: no connection has it open
            } else if errno != EEXIST {
                throw StoreError(.internalError, "cannot create the store at \(path): \(String(cString: strerror(errno)))")
            }
            guard lstat(path, &st) == 0 else {
                throw StoreError(.internalError, "cannot open the store at \(path): \(String(cString: strerror(errno)))")
            }
        }
        guard (st.st_mode & S_IFMT) == S_IFREG else {
            throw StoreError(.internalError, "\(path) is not a regular file, so it is not a Coffer store")
        }
        isEmpty = st.st_size == 0
    }

    /// Waits for the exclusive set-up lock on the store's folder (held until ``close()``).
    func lock() throws {
        guard fd < 0 else { return }
        let dir = open(folder, O_RDONLY | O_DIRECTORY | O_CLOEXEC)
        guard dir >= 0 else { throw StoreError(.internalError, "cannot lock the folder \(folder): \(String(cString: strerror(errno)))") }
        while flock(dir, LOCK_EX) != 0 {
            guard errno == EINTR else {
                Glibc.close(dir)
                throw StoreError(.internalError, "cannot lock the folder \(folder): \(String(cString: strerror(errno)))")
            }
        }
        fd = dir
    }

    func close() {
        if fd >= 0 { Glibc.close(fd) } // releases the lock
        fd = -1
    }
}

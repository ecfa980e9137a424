import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// The store file, opened while a ``Store`` is set up: created with `O_EXCL` when missing (so
/// one process's new file is never replaced by another's), and lockable with an exclusive
/// `flock` that serializes the set-up (migrations, the store id) across processes and threads.
/// SQLite's own locks are POSIX record locks, which `flock` on Linux does not touch.
final class StoreFileLock {
    private let fd: Int32
    private var locked = false
    /// The file had no bytes when opened: a store no one has set up yet.
    let isEmpty: Bool

    init(path: String, create: Bool) throws {
        var fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW)
        if fd < 0 && errno == ENOENT {
            guard create else { throw StoreError(.unknownItem, "no store at \(path)") }
            // Private from the start (SQLite gives -wal and -shm the file's mode).
            let made = open(path, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0o600)
            if made >= 0 {
                _ = fchmod(made, 0o600)
                Glibc.close(made)
            } else if errno != EEXIST {
                throw StoreError(.internalError, "cannot create the store at \(path): \(String(cString: strerror(errno)))")
            }
            fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW)
        }
        guard fd >= 0 else {
            throw StoreError(.internalError, "cannot open the store at \(path): \(String(cString: strerror(errno)))")
        }
        var st = stat()
        guard fstat(fd, &st) == 0, (st.st_mode & S_IFMT) == S_IFREG else {
            Glibc.close(fd)
            throw StoreError(.internalError, "\(path) is not a regular file, so it is not a Coffer store")
        }
        self.fd = fd
        isEmpty = st.st_size == 0
    }

    /// Waits for the exclusive set-up lock (held until ``close()``).
    func lock() throws {
        guard !locked else { return }
        while flock(fd, LOCK_EX) != 0 {
            guard errno == EINTR else { throw StoreError(.internalError, "cannot lock the store: \(String(cString: strerror(errno)))") }
        }
        locked = true
    }

    func close() {
        Glibc.close(fd) // releases the lock
    }
}

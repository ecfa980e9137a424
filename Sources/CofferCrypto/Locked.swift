import Foundation

/// A value behind a lock, for state that several threads share. The lock is a POSIX mutex
/// (Foundation's `NSLock`), which ThreadSanitizer understands; the standard library's `Mutex`
/// waits with futexes on Linux, which it does not see, so every access under one was reported
/// as a race. Used the way `Mutex` is: all access goes through ``withLock(_:)``.
package final class Locked<Value>: @unchecked Sendable {
    private let lock = NSLock()
    private var value: Value

    package init(_ value: Value) {
        self.value = value
    }

    /// Runs `body` with the value, holding the lock.
    package func withLock<Result>(_ body: (inout Value) throws -> Result) rethrows -> Result {
        lock.lock()
        defer { lock.unlock() }
        return try body(&value)
    }
}

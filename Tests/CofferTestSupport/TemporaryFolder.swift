import Foundation

// Helpers shared by every test target: temporary folders, files, bytes and secrets.

/// A fresh, private (mode 0700), empty folder under the system's temporary directory, named
/// `prefix-UUID`. The caller removes it.
public func makeTemporaryFolder(prefix: String = "coffer-tests") throws -> URL {
    let folder = FileManager.default.temporaryDirectory
        .appendingPathComponent("\(prefix)-\(UUID().uuidString)", isDirectory: true)
    try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: false,
                                            attributes: [.posixPermissions: 0o700])
    return folder
}

/// Runs `body` with a fresh temporary folder, and removes the folder (and everything in it)
/// afterwards.
@discardableResult
public func withTemporaryFolder<R>(prefix: String = "coffer-tests", _ body: (URL) throws -> R) throws -> R {
    let folder = try makeTemporaryFolder(prefix: prefix)
    defer { try? FileManager.default.removeItem(at: folder) }
    return try body(folder)
}

/// The `async` form of ``withTemporaryFolder(prefix:_:)``.
@discardableResult
public func withTemporaryFolder<R>(prefix: String = "coffer-tests", _ body: (URL) async throws -> R) async throws -> R {
    let folder = try makeTemporaryFolder(prefix: prefix)
    defer { try? FileManager.default.removeItem(at: folder) }
    return try await body(folder)
}

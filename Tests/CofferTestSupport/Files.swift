import Foundation
import Testing

public func readBytes(_ url: URL) throws -> [UInt8] { Array(try Data(contentsOf: url)) }

public func writeBytes(_ bytes: [UInt8], to url: URL) throws { try Data(bytes).write(to: url) }

/// Writes `bytes` to `url` and makes it mode 0600, as a key file must be.
public func writePrivateBytes(_ bytes: [UInt8], to url: URL) throws {
    try writeBytes(bytes, to: url)
    try setPermissions(0o600, of: url)
}

public func setPermissions(_ mode: Int, of url: URL) throws {
    try FileManager.default.setAttributes([.posixPermissions: mode], ofItemAtPath: url.path)
}

/// The permission bits of the file at `url`.
public func permissions(_ url: URL) throws -> Int {
    let attributes = try FileManager.default.attributesOfItem(atPath: url.path)
    return try #require(attributes[.posixPermissions] as? Int)
}

/// The names in `folder`, hidden ones included, sorted.
public func folderContents(_ folder: URL) throws -> [String] {
    try FileManager.default.contentsOfDirectory(atPath: folder.path).sorted()
}

public func copyFile(_ from: URL, to: URL) throws {
    try writeBytes(try readBytes(from), to: to)
}

import CofferCrypto
import Foundation
import Synchronization
import Testing
#if canImport(Glibc)
import Glibc
#endif
@testable import CofferVault

// Shared helpers for the vault tests. Every vault made here uses `Argon2id.Parameters.min`.

/// A passphrase distinctive enough to search for in messages and files.
let testPassphrase = "correct-horse-battery-staple-Q7x9"
let otherPassphrase = "a-different-passphrase-Z2k4"

/// The UTF-8 bytes of `text` in guarded memory.
func secure(_ text: String) -> SecureBytes { SecureBytes(copying: Array(text.utf8)) }

/// Runs `body` with a fresh, unique, empty folder under the system's temporary directory,
/// and removes the folder (and everything in it) afterwards.
@discardableResult
func withTemporaryFolder<R>(_ body: (URL) throws -> R) throws -> R {
    let folder = try makeTemporaryFolder()
    defer { try? FileManager.default.removeItem(at: folder) }
    return try body(folder)
}

/// The `async` form of ``withTemporaryFolder(_:)``.
@discardableResult
func withTemporaryFolder<R>(_ body: (URL) async throws -> R) async throws -> R {
    let folder = try makeTemporaryFolder()
    defer { try? FileManager.default.removeItem(at: folder) }
    return try await body(folder)
}

private func makeTemporaryFolder() throws -> URL {
    let folder = FileManager.default.temporaryDirectory
        .appendingPathComponent("coffer-vault-tests-\(UUID().uuidString)", isDirectory: true)
    try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: false,
                                            attributes: [.posixPermissions: 0o700])
    return folder
}

/// Creates a vault at `folder/file` with the fast `min` Argon2id preset.
@discardableResult
func makeVault(in folder: URL, file: String = "alice.coffer", name: String = "Alice Liddell",
               email: String? = "alice@example.com", passphrase: String = testPassphrase) throws -> Vault {
    try Vault.create(at: folder.appendingPathComponent(file), name: name, email: email,
                     passphrase: secure(passphrase), kdf: .min)
}

/// Runs `body` and checks that it throws a ``VaultError`` with exactly `code`; returns the error.
@discardableResult
func expectVaultError<T>(_ code: VaultError.Code, _ comment: Comment? = nil,
                         sourceLocation: SourceLocation = #_sourceLocation,
                         _ body: () throws -> T) -> VaultError? {
    expectVaultError(oneOf: [code], comment, sourceLocation: sourceLocation, body)
}

/// Runs `body` and checks that it throws a ``VaultError`` whose code is one of `codes`.
@discardableResult
func expectVaultError<T>(oneOf codes: [VaultError.Code], _ comment: Comment? = nil,
                         sourceLocation: SourceLocation = #_sourceLocation,
                         _ body: () throws -> T) -> VaultError? {
    let context = comment.map { " (\($0))" } ?? ""
    do {
        _ = try body()
        Issue.record("expected a VaultError \(codes), but nothing was thrown\(context)", sourceLocation: sourceLocation)
        return nil
    } catch let error as VaultError {
        #expect(codes.contains(error.code), "expected \(codes), got .\(error.code): \(error.message)\(context)",
                sourceLocation: sourceLocation)
        return error
    } catch {
        Issue.record("expected a VaultError \(codes), got \(type(of: error)): \(error)\(context)", sourceLocation: sourceLocation)
        return nil
    }
}

// MARK: - Files

func readBytes(_ url: URL) throws -> [UInt8] { Array(try Data(contentsOf: url)) }

func writeBytes(_ bytes: [UInt8], to url: URL) throws { try Data(bytes).write(to: url) }

/// Writes `bytes` to `url` and makes it mode 0600, as a key file must be.
func writePrivateBytes(_ bytes: [UInt8], to url: URL) throws {
    try writeBytes(bytes, to: url)
    try setPermissions(0o600, of: url)
}

func setPermissions(_ mode: Int, of url: URL) throws {
    try FileManager.default.setAttributes([.posixPermissions: mode], ofItemAtPath: url.path)
}

/// The permission bits of the file at `url`.
func permissions(_ url: URL) throws -> Int {
    let attributes = try FileManager.default.attributesOfItem(atPath: url.path)
    return try #require(attributes[.posixPermissions] as? Int)
}

/// The names in `folder`, hidden ones included, sorted.
func folderContents(_ folder: URL) throws -> [String] {
    try FileManager.default.contentsOfDirectory(atPath: folder.path).sorted()
}

func copyFile(_ from: URL, to: URL) throws {
    try writeBytes(try readBytes(from), to: to)
}

/// Whether `needle` occurs anywhere in `haystack`.
func containsSubsequence(_ haystack: [UInt8], _ needle: [UInt8]) -> Bool {
    guard !needle.isEmpty, needle.count <= haystack.count else { return needle.isEmpty }
    let first = needle[0]
    var i = 0
    let last = haystack.count - needle.count
    while i <= last {
        if haystack[i] == first && haystack[i..<i + needle.count].elementsEqual(needle) { return true }
        i += 1
    }
    return false
}

// MARK: - Format v1 surgery

/// Offsets of format v1 for a vault whose header holds exactly one passphrase slot
/// (what `Vault.create` writes): magic 8, version 2, flags 2, vault id 16, slot count 1,
/// then the slot (type 1, passes 4, memory KiB 4, salt 16, wrapped key 72), then the
/// BLAKE2b-256 checksum (32) of everything before it.
enum V1 {
    static let versionOffset = 8
    static let flagsOffset = 10
    static let vaultIDOffset = 12
    static let slotCountOffset = 28
    static let firstSlotOffset = 29
    static let slotTypeOffset = 29
    static let opsOffset = 30
    static let memoryOffset = 34
    static let saltOffset = 38
    static let wrappedKeyOffset = 54
    static let passphraseSlotByteCount = 1 + 4 + 4 + 16 + 72
    /// The header end (= body start) for one passphrase slot.
    static let singleSlotHeaderByteCount = 29 + passphraseSlotByteCount + 32 // 158
}

/// The offset where the body starts, from the real parser.
func bodyOffset(of file: [UInt8]) throws -> Int {
    try VaultFormat.parseHeader(file).bodyOffset
}

/// Recomputes the header checksum of `file`, whose body starts at `headerEnd`, in place.
func recomputeChecksum(_ file: inout [UInt8], headerEnd: Int) {
    let checksumStart = headerEnd - VaultFormat.checksumByteCount
    let checksum = BLAKE2b.hash(Array(file[0..<checksumStart]), outputByteCount: VaultFormat.checksumByteCount)
    file.replaceSubrange(checksumStart..<headerEnd, with: checksum)
}

func putU16(_ value: UInt16, into file: inout [UInt8], at offset: Int) {
    file.replaceSubrange(offset..<offset + 2, with: BigEndian.bytes(value))
}

func putU32(_ value: UInt32, into file: inout [UInt8], at offset: Int) {
    file.replaceSubrange(offset..<offset + 4, with: BigEndian.bytes(value))
}

// MARK: - Threads and locks

/// Runs `body(0)` … `body(count - 1)` at once, each on its own thread, and returns the errors
/// thrown (empty when all succeeded).
func onThreads(_ count: Int, _ body: @escaping @Sendable (Int) throws -> Void) -> [String] {
    let failures = Mutex<[String]>([])
    let group = DispatchGroup()
    for i in 0..<count {
        group.enter()
        Thread {
            defer { group.leave() }
            do { try body(i) } catch { failures.withLock { $0.append("thread \(i): \(error)") } }
        }.start()
    }
    group.wait()
    return failures.withLock { $0 }
}

extension Thread {
    /// Runs `body` on a new thread after `delay` seconds; the returned group is left when it is done.
    static func detach(after delay: TimeInterval, _ body: @escaping @Sendable () -> Void) -> DispatchGroup {
        let group = DispatchGroup()
        group.enter()
        Thread {
            Thread.sleep(forTimeInterval: delay)
            body()
            group.leave()
        }.start()
        return group
    }
}

/// An exclusive `flock` on a path, as another process holding a vault's lock would have.
final class LockHolder: Sendable {
    private let fd: Int32

    init(_ path: String) throws {
        fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0o600)
        guard fd >= 0, flock(fd, LOCK_EX) == 0 else { throw VaultError(.io, "cannot lock \(path) for the test") }
    }

    /// Releases the lock (closing the descriptor).
    func release() { close(fd) }
}

/// CPU time the calling thread has used, user and system, in seconds (other tests running
/// at the same time do not count).
func threadCPUSeconds() -> Double {
    var usage = rusage()
    getrusage(__rusage_who_t(1), &usage) // RUSAGE_THREAD (Linux), not imported by Glibc
    func seconds(_ t: timeval) -> Double { Double(t.tv_sec) + Double(t.tv_usec) / 1e6 }
    return seconds(usage.ru_utime) + seconds(usage.ru_stime)
}

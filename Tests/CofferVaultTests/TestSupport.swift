import CofferCrypto
import CofferTestSupport
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

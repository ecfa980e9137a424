import CofferStoreTestSupport
import CofferTestSupport
import CofferVault
import Foundation
import Testing
@testable import CofferStore
#if canImport(Glibc)
import Glibc
#endif

/// A request to a server cancelled by its task: it ends as a cancellation, not as a server
/// that cannot be reached (a change stream whose consumer stops ends quietly).
@Suite("remote storage: cancellation")
struct RemoteCancellationTests {
    /// A loopback port whose kernel accepts connections that nothing ever reads or answers;
    /// its descriptor and port.
    static func silentListener() throws -> (fd: Int32, port: Int) {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        try #require(fd >= 0)
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = 0
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        let bound = withUnsafeMutablePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { pointer in
                bind(fd, pointer, length) == 0 && listen(fd, 16) == 0 && getsockname(fd, pointer, &length) == 0
            }
        }
        try #require(bound, "bind failed: \(errno)")
        return (fd, Int(UInt16(bigEndian: address.sin_port)))
    }

    /// Before, the request's cancellation surfaced as `.serviceUnavailable` "cannot be reached
    /// (cancelled)", and a change stream cancelled mid-request threw it instead of ending.
    @Test(.timeLimit(.minutes(1)))
    func cancelledMidRequest() async throws {
        try await withTemporaryFolder { folder in
            let vault = try makeVault(in: folder)
            let listener = try Self.silentListener()
            defer { close(listener.fd) }
            let server = try #require(URL(string: "http://127.0.0.1:\(listener.port)"))
            let request = Task {
                _ = try await RemoteStorage.open(server: server, vault: vault, timeout: .seconds(50), logger: Vault.disabledLogger)
            }
            try await Task.sleep(for: .milliseconds(300))
            request.cancel()
            let outcome = await request.result
            switch outcome {
            case .success: Issue.record("a server that never answers was read")
            case .failure(let error): #expect(error is CancellationError, "got \(error)")
            }
        }
    }
}

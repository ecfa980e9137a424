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
    /// Before, the request's cancellation surfaced as `.serviceUnavailable` "cannot be reached
    /// (cancelled)", and a change stream cancelled mid-request threw it instead of ending.
    @Test(.timeLimit(.minutes(1)))
    func cancelledMidRequest() async throws {
        try await withTemporaryFolder { folder in
            let vault = try makeVault(in: folder)
            let listener = try #require(loopbackSocket(listening: true), "no loopback socket")
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

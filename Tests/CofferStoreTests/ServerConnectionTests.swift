import AsyncHTTPClient
import CofferTestSupport
import CofferStoreTestSupport
import Foundation
import NIOCore
import NIOHTTP1
import Testing
#if canImport(Glibc)
import Glibc
#endif

/// The server's connections: idle ones do not keep others out, and they do not stay forever.
@Suite("coffer serve: connections")
struct ServerConnectionTests {
    /// A TCP connection to `port` on loopback that sends nothing; its descriptor.
    static func idleConnection(port: Int) throws -> Int32 {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        try #require(fd >= 0)
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = in_port_t(UInt16(port).bigEndian)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        let connected = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        }
        try #require(connected == 0, "connect failed: \(errno)")
        return fd
    }

    static func port(_ url: String) throws -> Int { try #require(URLComponents(string: url)?.port) }

    static func health(_ url: String) async throws -> Int {
        let response = try await HTTPClient.shared.execute(HTTPClientRequest(url: url + "/v1/health"), timeout: .seconds(10))
        return Int(response.status.code)
    }

    /// Started with an open-file limit of 256, the server raises it: with 300 idle connections
    /// open, it still answers its health check (before, accepting failed once the limit was
    /// reached, and new connections waited in the backlog).
    @Test(.timeLimit(.minutes(3)))
    func moreIdleConnectionsThanTheDefaultLimit() async throws {
        try await withTemporaryFolder { folder in
            let executable = try serverExecutable()
            let store = folder.appendingPathComponent("server.sqlite").path
            let process = try ChildProcess.Running("/bin/bash", ["-c", "ulimit -Sn 256 && exec \"$0\" serve --listen 127.0.0.1:0 --store \"$1\"", executable, store],
                                                   environment: ProcessInfo.processInfo.environment, directory: folder.path, timeout: 600)
            let url = await process.waitForOutput(seconds: 180) { out -> String? in
                out.range(of: #"http://127\.0\.0\.1:[0-9]+"#, options: .regularExpression).map { String(out[$0]) }
            }
            var fds = [Int32]()
            do {
                let url = try #require(url, "the server did not start: \(process.look())")
                #expect(try await Self.health(url) == 200)
                for _ in 0..<300 { fds.append(try Self.idleConnection(port: try Self.port(url))) }
                try await Task.sleep(for: .milliseconds(300))
                #expect(try await Self.health(url) == 200, "the health check answers with 300 idle connections open")
            } catch {
                for fd in fds { close(fd) }
                await process.stop(SIGKILL)
                throw error
            }
            for fd in fds { close(fd) }
            #expect(await process.stop().status == 0)
        }
    }

    /// A connection that sends nothing is closed by the server after its idle timeout (30 s).
    @Test(.timeLimit(.minutes(2)))
    func anIdleConnectionIsClosed() async throws {
        try await withServer(.sqlite) { fixture in
            let fd = try Self.idleConnection(port: try Self.port(fixture.server.url))
            defer { close(fd) }
            let clock = ContinuousClock(), start = clock.now
            // Wait (without blocking a thread) until the socket is readable: the server's close.
            var poller = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
            while poll(&poller, 1, 0) == 0, clock.now - start < .seconds(50) { try await Task.sleep(for: .milliseconds(250)) }
            var byte: UInt8 = 0
            let got = read(fd, &byte, 1)
            #expect(got == 0, "the server closed the connection (read \(got))")
            #expect(clock.now - start >= .seconds(25) && clock.now - start < .seconds(45), "\(clock.now - start)")
        }
    }
}

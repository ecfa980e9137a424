import CofferTestSupport
import Foundation
import Testing
#if canImport(Glibc)
import Glibc
#endif

/// `coffer server list` and `coffer server forget`: the store id a server answered with at
/// first contact is pinned to its URL; a copy of its store served at another URL is refused
/// until the user forgets the first pin.
@Suite("coffer server: pinned store ids")
struct ServerPinCommandTests {
    @Test func aCopyOfAServersStoreIsRefusedUntilForgotten() async throws {
        let sandbox = try Sandbox()
        let path = sandbox.path("server.sqlite")
        let first = try await ServerProcess.start(store: path, in: sandbox)
        let team = try Team([.alice], sandbox: sandbox, server: first.url)
        func asAlice(_ arguments: [String], server: String) throws -> CofferResult {
            try sandbox.coffer(arguments + ["--vault", team.vault(.alice), "--server", server], env: withPassphrase)
        }
        try team.createZone(.alice, "Notes")
        let listed = try team.json(.alice, ["server", "list"])
        let servers = try #require(listed["servers"] as? [[String: Any]])
        #expect(servers.count == 1 && servers.first?["url"] as? String == first.url, "\(listed)")
        let storeID = try #require(servers.first?["storeID"] as? String)
        #expect(storeID.count == 32)
        #expect(try team.ok(.alice, ["server", "list"]).out.contains(storeID))
        #expect(await first.stop().status == 0)

        // The same store, served at another URL.
        for suffix in ["", "-wal"] where FileManager.default.fileExists(atPath: path + suffix) {
            try FileManager.default.copyItem(atPath: path + suffix, toPath: sandbox.path("copy.sqlite") + suffix)
        }
        let copy = try await ServerProcess.start(store: sandbox.path("copy.sqlite"), in: sandbox)
        do {
            expectFailure(try asAlice(["zone", "list"], server: copy.url), 65, mentioning: "coffer server forget \(first.url)")
            expectFailure(try asAlice(["server", "forget", "http://127.0.0.1:1"], server: copy.url), 66, mentioning: "no server is pinned")
            expectFailure(try asAlice(["server", "forget", "ftp://example.com"], server: copy.url), 64)
            let forgot = try asAlice(["server", "forget", first.url, "--json"], server: copy.url)
            expectSuccess(forgot)
            #expect(try jsonObject(forgot)["storeID"] as? String == storeID)
            let zones = try asAlice(["zone", "list"], server: copy.url)
            expectSuccess(zones)
            #expect(zones.out.contains("Notes"))
            let pins = try jsonObject(try asAlice(["server", "list", "--json"], server: copy.url))
            #expect((pins["servers"] as? [[String: Any]])?.map { $0["url"] as? String } == [copy.url], "\(pins)")
        } catch {
            await copy.stop(SIGKILL)
            throw error
        }
        #expect(await copy.stop().status == 0)
    }

    @Test func serveTakesPublicURLs() async throws {
        let sandbox = try Sandbox()
        let bad = try sandbox.coffer(["serve", "--listen", "127.0.0.1:0", "--public-url", "ftp://coffer.example.com"])
        expectFailure(bad, 64, mentioning: "--public-url")
        let process = try ChildProcess.Running(try CofferProcess.executableURL().path,
                                               ["serve", "--listen", "127.0.0.1:0", "--store", sandbox.path("s.sqlite"), "--json",
                                                "--public-url", "https://Coffer.Example.com/api/"],
                                               environment: sandbox.baseEnvironment, directory: sandbox.root.path, timeout: 1800)
        let line = await process.waitForOutput(seconds: 120) { out -> String? in out.hasSuffix("\n") ? out : nil }
        let stopped = await process.stop()
        let object = try jsonObject(Data(try #require(line).utf8))
        let served = object["publicURLs"] as? [String] ?? []
        #expect(served.first == "https://coffer.example.com:443/api" && served.count == 2 && served[1].hasPrefix("http://127.0.0.1:"), "\(object)")
        #expect(stopped.status == 0)
    }
}

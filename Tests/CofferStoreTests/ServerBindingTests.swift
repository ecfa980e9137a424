import CofferCrypto
import CofferTestSupport
import CofferVault
import CofferStoreTestSupport
import Foundation
import Testing
@testable import CofferStore
#if canImport(Glibc)
import Glibc
#endif

/// Requests name their server: a request signed for one server is refused by every other, and
/// a server cannot pose as another at a user's first contact.
@Suite("coffer serve: requests bound to their server")
struct ServerBindingTests {
    static func listZones(_ user: String) -> Data {
        try! JSONSerialization.data(withJSONObject: ["needs": [["op": "zones/list", "owner": user]],
                                                     "basis": ["heads": [], "zones": [], "contacts": []]])
    }

    /// Another server, on a store of its own, in the fixture's folder.
    static func otherServer(_ fixture: ServerFixture, file: String, publicURL: String? = nil) async throws -> ServerChild {
        try await ServerChild.start(executable: try serverExecutable(), store: fixture.folder.appendingPathComponent(file).path,
                                    directory: fixture.folder.path, environment: fixture.serverEnvironment, publicURL: publicURL)
    }

    /// The operator of server A replays a user's signed requests to server B, where the user
    /// has a zone too: B refuses them, whether or not B serves A's URL as well.
    @Test func capturedRequestsReplayedToAnotherServerAreRefused() async throws {
        try await withServer(.sqlite) { fixture in
            let alice = try await fixture.user("Alice", "alice@example.com")
            _ = try await alice.session.privateDatabase.createZone(named: "Notes")
            let servers = [try await Self.otherServer(fixture, file: "b.sqlite"),
                           try await Self.otherServer(fixture, file: "c.sqlite", publicURL: fixture.server.url)]
            do {
                for server in servers {
                    // Alice works on B too, so B knows her and holds a zone of hers.
                    let onB = try await Store(server: URL(string: server.url)!, vault: alice.vault)
                    _ = try await onB.openSession(vault: alice.vault).privateDatabase.createZone(named: "Notes")
                    await onB.close()
                    let read = Self.listZones(alice.vault.identity.userID)
                    let captured = try await fixture.signature(alice.vault, "POST", "/v1/storage/read", body: read)
                    let replayed = try await fixture.raw("POST", "/v1/storage/read", body: read, headers: captured, to: server)
                    #expect(replayed.status == 401, "\(replayed)")
                    let message = replayed.body["message"] as? String ?? ""
                    #expect(message.contains("addressed to") || message.contains("store id"), "\(message)")
                    // The same request, not yet used, is served where it was signed for.
                    #expect(try await fixture.raw("POST", "/v1/storage/read", body: read, headers: captured).status == 200)
                }
                // A captured batch, replayed to B, is refused before it is read; Alice's zone there stays.
                let batch = try JSONSerialization.data(withJSONObject: ["operation": Data(count: 16).base64EncodedString(), "writes": []])
                let capturedBatch = try await fixture.signature(alice.vault, "POST", "/v1/records/modify", body: batch)
                let replayedBatch = try await fixture.raw("POST", "/v1/records/modify", body: batch, headers: capturedBatch, to: servers[0])
                #expect(replayedBatch.status == 401, "\(replayedBatch)")
                let onB = try await Store(server: URL(string: servers[0].url)!, vault: alice.vault)
                #expect(try await onB.openSession(vault: alice.vault).privateDatabase.zones().map(\.id.name) == ["Notes"])
                await onB.close()
            } catch {
                for server in servers { await server.stop(SIGKILL) }
                throw error
            }
            for server in servers { #expect(await server.stop().status == 0) }
        }
    }

    /// A server that answers with the store id another server answered Alice with at first
    /// contact is refused, naming both; so is the first server's URL answering with another
    /// store id. `forgetPin` (what `coffer server forget` does) lets her pin anew.
    @Test func aServerPosingAsAnotherIsRefused() async throws {
        try await withServer(.sqlite) { fixture in
            let alice = try await fixture.user("Alice", "alice@example.com")
            let zone = try await alice.session.privateDatabase.createZone(named: "Notes")
            var note = Record(type: "Note", name: "n1", zone: zone)
            note.values["title"] = "pinned"
            _ = try await alice.session.privateDatabase.save(note)
            let origin = try ServerOrigin(fixture.url)
            #expect(try alice.vault.marks.pins() == [ServerPin(origin: origin.text, storeID: alice.store.storeID)])
            // A copy of the server's store, served at another URL: the same store id.
            #expect(await fixture.server.stop().status == 0)
            let path = try #require(fixture.storePath), copy = fixture.folder.appendingPathComponent("copy.sqlite").path
            for suffix in ["", "-wal"] where FileManager.default.fileExists(atPath: path + suffix) {
                try FileManager.default.copyItem(atPath: path + suffix, toPath: copy + suffix)
            }
            let impostor = try await ServerChild.start(executable: try serverExecutable(), store: copy, directory: fixture.folder.path,
                                                       environment: fixture.serverEnvironment)
            // Another store, answering for the first server's URL.
            let replaced = try await Self.otherServer(fixture, file: "replaced.sqlite", publicURL: fixture.server.url)
            do {
                await #expect { _ = try await Store(server: URL(string: impostor.url)!, vault: alice.vault) } throws: { error in
                    let error = error as? StoreError
                    return error?.code == .integrityFailure && error?.message.contains(origin.text) == true
                        && error?.message.contains("coffer server forget") == true
                }
                await #expect { _ = try await Store(server: URL(string: replaced.url)!, naming: fixture.url, vault: alice.vault) } throws: { error in
                    let error = error as? StoreError
                    return error?.code == .integrityFailure && error?.message.contains("first met it as store") == true
                }
                // Bob never met the first server: the copy is his first contact.
                let bob = try makeVault(in: fixture.folder, file: "bob.coffer", name: "Bob", email: "bob@example.com")
                let bobStore = try await Store(server: URL(string: impostor.url)!, vault: bob)
                await bobStore.close()
                // Alice moved on purpose: she forgets the first pin, and the copy is pinned anew.
                #expect(try alice.vault.marks.forgetPin(origin: origin.text)?.storeID == alice.store.storeID)
                let moved = try await Store(server: URL(string: impostor.url)!, vault: alice.vault)
                let session = try await moved.openSession(vault: alice.vault)
                #expect(try await session.privateDatabase.record(named: "n1", in: zone).values["title"] == "pinned")
                await moved.close()
                #expect(try alice.vault.marks.pins().map(\.origin) == [try ServerOrigin(impostor.url).text])
            } catch {
                await impostor.stop(SIGKILL)
                await replaced.stop(SIGKILL)
                throw error
            }
            #expect(await impostor.stop().status == 0)
            #expect(await replaced.stop().status == 0)
        }
    }

    /// The pins are in the marks file: another process of the same user (another vault object)
    /// sees them, and a server that changed its store id is refused there too.
    @Test func pinsAreSharedByTheUsersProcesses() async throws {
        try await withServer(.sqlite) { fixture in
            let alice = try await fixture.user("Alice", "alice@example.com")
            let again = try Vault.open(at: alice.vault.url, passphrase: secure(testPassphrase))
            #expect(try again.marks.pins().map(\.storeID) == [alice.store.storeID])
            let replaced = try await Self.otherServer(fixture, file: "replaced.sqlite", publicURL: fixture.server.url)
            await #expect(throws: StoreError.self) { _ = try await Store(server: URL(string: replaced.url)!, naming: fixture.url, vault: again) }
            #expect(await replaced.stop().status == 0)
        }
    }
}

import CofferStoreTestSupport
import Foundation
import Testing
@testable import CofferStore

@Suite("Database scope")
struct DatabaseScopeTests {
    /// The private database holds the zones a user owns, the shared database those others own
    /// and shared: neither reads or writes a zone of the other, even one the user may write.
    @Test("a private database does not touch shared zones, nor a shared database the user's own", arguments: TestBackend.all)
    func scopes(_ backend: TestBackend) async throws {
        try await withStore(backend) { f in
            let bob = try await f.user("Bob", "bob@example.com")
            let (zone, _) = try await f.sharedWith(bob, .readWrite)
            let mine = try await bob.privateDatabase.createZone(named: "Mine")
            let note = makeNote("n3", in: zone, title: "from bob")

            let refusals: [(String, () async throws -> Void)] = [
                ("save", { _ = try await bob.privateDatabase.save(note) }),
                ("modify", { _ = try await bob.privateDatabase.modify(saving: [note], in: zone) }),
                ("record", { _ = try await bob.privateDatabase.record(named: "n1", in: zone) }),
                ("records", { _ = try await bob.privateDatabase.records(named: ["n1"], in: zone) }),
                ("records(in:)", { _ = try await bob.privateDatabase.records(in: zone) }),
                ("query", { _ = try await bob.privateDatabase.query(Query(recordType: "Note"), in: zone) }),
                ("delete", { try await bob.privateDatabase.delete(recordNamed: "n1", in: zone) }),
                ("schema", { _ = try await bob.privateDatabase.schema(of: "Note", in: zone) }),
                ("changes", { _ = try await bob.privateDatabase.changes(in: zone, since: nil) }),
                ("deleteZone", { try await bob.privateDatabase.deleteZone(zone) }),
                ("shared save", { _ = try await bob.sharedDatabase.save(makeNote("m1", in: mine)) }),
                ("shared record", { _ = try await bob.sharedDatabase.record(named: "m1", in: mine) }),
                ("shared query", { _ = try await bob.sharedDatabase.query(Query(recordType: "Note"), in: mine) }),
            ]
            for (what, call) in refusals {
                let error = await expectStoreError(.zoneNotFound, "\(what)") { try await call() }
                #expect(error?.message.contains("database") == true, "\(what): \(error?.message ?? "")")
            }
            // Nothing was written by the refused calls.
            #expect(try await f.alice.privateDatabase.records(named: ["n3"], in: zone)["n3"].map { (try? $0.get()) == nil } == true)
            #expect(try await f.alice.privateDatabase.records(in: zone).map(\.name) == ["n1", "n2"])

            // Through the right database, the same calls work.
            _ = try await bob.sharedDatabase.save(note)
            #expect(try await bob.sharedDatabase.record(named: "n3", in: zone).values["title"] == "from bob")
            _ = try await bob.privateDatabase.save(makeNote("m1", in: mine))
            #expect(bob.database(for: zone).scope == .shared)
            #expect(bob.database(for: mine).scope == .private)
        }
    }
}

import CofferCrypto
import CofferTestSupport
import CofferVault
import CofferStoreTestSupport
import Foundation
import Testing
@testable import CofferStore

/// A zone deleted on a server: the batch that deletes it carries its owner's signed deletion
/// entry, which the server verifies like any entry and keeps with the genesis; anyone who names
/// the zone's uid reads the pair, and the zone's readers' marks close on it.
extension ServerBatchTests {
    /// An entry of `kind` by `vault`'s user on the zone after `seq`, `prev` (the head by default),
    /// as a write and its hash.
    func entry(_ kind: LogEntry.Kind, by vault: Vault, on head: (row: ZoneRow, state: ZoneState), after seq: Int64? = nil, prev: Digest32? = nil,
               payload: [UInt8] = []) -> (write: StorageSnapshot.Write, hash: Digest32) {
        let at = seq ?? head.state.headSeq
        let entry = LogEntry(zoneUID: head.row.uid, seq: at + 1, prev: prev ?? head.state.headHash, kind: kind, authorID: vault.identity.userID,
                             time: Date().timeIntervalSince1970, payload: payload)
        let body = entry.body, signature = vault.signingKey.signature(for: body)
        let hash = LogEntry.hash(body: body, signature: signature)
        return (.appendLog(zoneRowID: head.row.rowID, head: at, entry: entry, body: body, signature: signature, hash: hash, entries: nil, names: nil), hash)
    }

    @Test("a zone deletion without its owner's deletion entry, a deletion by anyone else, and an entry after one are refused",
          arguments: TestBackend.local)
    func forgedDeletionsAreRefused(_ backend: TestBackend) async throws {
        try await withServer(backend) { fixture in
            let scene = try await Scene.make(fixture)
            let alice = scene.alice, carol = scene.carol
            let family = try await scene.head(alice.session, scene.family)
            let lone = try await scene.head(alice.session, scene.privateZone)
            let deleteFamily = StorageSnapshot.Write.deleteZone(rowID: family.row.rowID)

            // The owner deletes a zone without her signed deletion, or with a commit instead.
            try await expectRefused(scene, alice.store, [.deleteZone(rowID: lone.row.rowID)], "signed deletion entry")
            try await expectRefused(scene, alice.store, [scene.commit(by: alice.vault, on: family).write, deleteFamily], "signed deletion entry")
            // A read-write participant's deletion entry, with or without the zone's deletion.
            let carols = entry(.deletion, by: carol.vault, on: family)
            try await expectRefused(scene, carol.store, [carols.write], "a deletion signed by")
            try await expectRefused(scene, carol.store, [carols.write, deleteFamily], "a deletion signed by")
            // The owner's deletion entry without the zone's deletion, and an entry after it.
            let alices = entry(.deletion, by: alice.vault, on: family)
            try await expectRefused(scene, alice.store, [alices.write], "comes only with the zone's deletion")
            let commit = RecordsPayload(epoch: family.state.epoch, ownerSeq: family.state.ownerSeq, label: nil, records: .empty).encoded
            let after = entry(.commit, by: alice.vault, on: family, after: family.state.headSeq + 1, prev: alices.hash, payload: commit)
            try await expectRefused(scene, alice.store, [alices.write, after.write, deleteFamily], "zone was deleted by its owner at entry")

            // Nothing landed: both zones are there, and every user's audit is clean.
            #expect(try await alice.session.privateDatabase.zones().map(\.id.name).sorted() == ["Family", "Private"])
            for session in [alice.session, scene.bob.session, carol.session] { #expect(try await session.audit().findings.isEmpty) }
        }
    }

    @Test("the owner deletes a shared zone: the server keeps its genesis and deletion for anyone, and its readers' audits close their marks",
          arguments: TestBackend.local)
    func ownersDeletionIsKept(_ backend: TestBackend) async throws {
        try await withServer(backend) { fixture in
            let scene = try await Scene.make(fixture)
            let alice = scene.alice, bob = scene.bob, carol = scene.carol
            for session in [bob.session, carol.session] {
                _ = try await session.sharedDatabase.record(named: "n1", in: scene.family)
                try session.saveMarks()
            }
            let family = try await scene.head(alice.session, scene.family)
            #expect(try bob.vault.marks.mark(forZone: family.row.uid)?.isDeletion == false)
            try await alice.session.privateDatabase.deleteZone(scene.family)

            // Read by a user who never took part: the genesis and the owner's deletion, no more.
            let mallory = try await fixture.user("Mallory Mint", "mallory@example.com")
            let kept = try #require(try await mallory.store.read { db in try db.deletedZone(uid: family.row.uid) })
            #expect(kept.id == scene.family && kept.uid == family.row.uid)
            let deletion = try #require(LogEntry.decode(kept.deletion.body))
            #expect(deletion.kind == .deletion && deletion.seq == family.state.headSeq + 1 && deletion.prev == family.state.headHash)
            let unknown = SecureRandom.bytes(count: 16)
            #expect(try await mallory.store.read { db in try db.deletedZone(uid: unknown) } == nil)

            for user in [bob, carol] {
                let session = try await fixture.client(user.vault).openSession(vault: user.vault)
                let report = try await session.audit()
                #expect(report.findings.isEmpty, "\(report.findings)")
                #expect(try user.vault.marks.mark(forZone: family.row.uid)?.isDeletion == true)
            }
            let error = await expectStoreError(.zoneNotFound) {
                try await fixture.client(bob.vault).openSession(vault: bob.vault).sharedDatabase.record(named: "n1", in: scene.family)
            }
            #expect(error?.message.contains("was deleted by its owner") == true, "\(error?.message ?? "")")
        }
    }
}

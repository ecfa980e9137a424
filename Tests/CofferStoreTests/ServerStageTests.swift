import CofferCrypto
import CofferTestSupport
import CofferVault
import CofferStoreTestSupport
import Foundation
import Testing
@testable import CofferStore

/// A server's stage: writes too many for one request (a restore, a zone copied onto the server)
/// land whole or not at all, a run cut short goes on without sending again what the server
/// holds, and one user's stage is never another's.
@Suite("coffer serve: staged batches")
struct ServerStageTests {
    /// Alice's zone "Moved", made in a local store of hers with 900 records (so that its copy is
    /// a batch of its log and three of rows), as a backup holds it.
    static func movedZone(_ vault: Vault, in folder: URL) async throws -> ZoneCopy {
        let local = try Store(path: folder.appendingPathComponent("local-\(UUID().uuidString).sqlite").path)
        defer { Task { await local.close() } }
        let session = try await local.openSession(vault: vault)
        let zone = try await session.privateDatabase.createZone(named: "Moved")
        for start in stride(from: 0, to: 900, by: 300) {
            let records = (start..<start + 300).map { i -> Record in
                var record = Record(type: "Note", name: "r\(i)", zone: zone)
                record.values["title"] = .string("title \(i)")
                record.encryptedValues["body"] = .string("secret \(i)")
                return record
            }
            _ = try await session.privateDatabase.modify(saving: records, in: zone)
        }
        return try #require(try await session.makeBackup().zones.first { $0.id == zone })
    }

    func driver(_ store: Store) throws -> RemoteStorage {
        guard case .snapshot(let driver as RemoteStorage) = store.backend else { throw StoreError(.internalError, "not a server's store") }
        return driver
    }

    /// What the user's stage holds, as the server answers a signed request that asks.
    func heldParts(_ fixture: ServerFixture, _ vault: Vault) async throws -> [String] {
        let answer = try await fixture.signed(vault, "POST", RemoteAPI.Path.stage, body: Data("{}".utf8))
        #expect(answer.status == 200, "\(answer)")
        return answer.body["parts"] as? [String] ?? []
    }

    @Test("a staged batch lands whole or not at all, goes on from what the server holds, and is the user's own", arguments: TestBackend.local)
    func stagedBatch(_ backend: TestBackend) async throws {
        try await withServer(backend) { fixture in
            let alice = try await fixture.user("Alice", "alice@example.com")
            let bob = try await fixture.user("Bob Builder", "bob@example.com")
            let copy = try await Self.movedZone(alice.vault, in: fixture.folder)
            let remote = try driver(alice.store)
            let rowID = try #require(try await ZonePush.fetch([.newZoneID(copy.id)], from: remote).newZoneIDs[copy.id])
            let batches = try copy.batches(zoneRowID: rowID)
            #expect(batches.count == 4)
            func zoneThere() async throws -> Bool {
                let found = try await ZonePush.fetch([.zone(copy.id)], from: try driver(alice.store))
                if case .some(.some) = found.zones[copy.id] { return true }
                return false
            }

            // Its last row changed (a date its commit does not sign): the server refuses the
            // whole batch when it is committed, and nothing of the zone lands, not even the
            // parts before, which it checked and kept.
            var poisoned = batches
            guard case .insertRecord(let zoneRowID, let version)? = poisoned[3].last else { Issue.record("no row at the end"); return }
            var stamp = version.stamp
            stamp.modified += 1
            poisoned[3][poisoned[3].count - 1] = .insertRecord(zoneRowID: zoneRowID, SealedVersion(stamp: stamp, plain: version.plain,
                                                                                                   plainTypes: version.plainTypes,
                                                                                                   sealed: version.sealed, digest: .zero))
            await #expect { try await remote.applyStaged(poisoned) { _, _, _ in } } throws: { error in
                (error as? StoreError)?.code == .permissionFailure && (error as? StoreError)?.message.contains("not the version its commit signs") == true
            }
            #expect(try await zoneThere() == false)
            #expect(try await heldParts(fixture, alice.vault).count == 4)

            // Bob's stage is his own: empty, and a commit of his cannot take Alice's parts.
            #expect(try await heldParts(fixture, bob.vault).isEmpty)
            let stolen = try await fixture.signed(bob.vault, "POST", RemoteAPI.Path.stage,
                                                  body: RemoteAPI.encoder.encode(RemoteAPI.StageRequest(commit: 4, digest: Data(SecureRandom.bytes(count: 16)))))
            #expect(stolen.status == 503 && stolen.body["code"] as? String == "busy", "\(stolen)")
            // Nor can a commit of Alice's with a digest of other parts.
            let forged = try await fixture.signed(alice.vault, "POST", RemoteAPI.Path.stage,
                                                  body: RemoteAPI.encoder.encode(RemoteAPI.StageRequest(commit: 4, digest: Data(SecureRandom.bytes(count: 16)))))
            #expect(forged.status == 503 && forged.body["code"] as? String == "busy", "\(forged)")
            #expect(try await zoneThere() == false)

            // Run again as it should be: only the part that differs is sent; then the zone is
            // there whole, and the stage is empty.
            var held = [Bool]()
            try await remote.applyStaged(batches) { _, _, isHeld in held.append(isHeld) }
            #expect(held == [true, true, true, false])
            #expect(try await zoneThere())
            #expect(try await heldParts(fixture, alice.vault).isEmpty)
            let records = try await alice.session.privateDatabase.records(in: copy.id, limit: 1_000)
            #expect(records.count == 900)
            #expect(try await alice.session.audit().findings.isEmpty)

            // The same batch committed again (its answer lost, say) is applied once.
            try await remote.applyStaged(batches) { _, _, _ in }
            #expect(try await alice.session.privateDatabase.records(in: copy.id, limit: 1_000).count == 900)
            #expect(try await heldParts(fixture, alice.vault).isEmpty)
        }
    }

    @Test("a stage request that is not one of the three is refused (400)")
    func malformedStageRequests() async throws {
        try await withServer(.sqlite) { fixture in
            let alice = try await fixture.user("Alice", "alice@example.com")
            let copy = try await Self.movedZone(alice.vault, in: fixture.folder)
            let remote = try driver(alice.store)
            let rowID = try #require(try await ZonePush.fetch([.newZoneID(copy.id)], from: remote).newZoneIDs[copy.id])
            let first = try copy.batches(zoneRowID: rowID)[0]
            for write in first { if case .insertZone(let handle, let uid, _, _) = write { remote.zones.bind(handle, to: uid) } }
            let writes = try first.map { try WireWrite($0, remote.requestNames()) }
            let digest = Data(SecureRandom.bytes(count: 16))
            let bodies: [(String, Data)] = [
                ("a part numbered below 0", try RemoteAPI.encoder.encode(RemoteAPI.StageRequest(part: -1, writes: writes))),
                ("a part numbered past the most", try RemoteAPI.encoder.encode(RemoteAPI.StageRequest(part: RemoteAPI.maxStageParts, writes: writes))),
                ("a part without writes", try RemoteAPI.encoder.encode(RemoteAPI.StageRequest(part: 0, writes: []))),
                ("a part without its number", try RemoteAPI.encoder.encode(RemoteAPI.StageRequest(writes: writes))),
                ("a part and a commit", try RemoteAPI.encoder.encode(RemoteAPI.StageRequest(part: 0, writes: writes, commit: 1, digest: digest))),
                ("a commit of no parts", try RemoteAPI.encoder.encode(RemoteAPI.StageRequest(commit: 0, digest: digest))),
                ("a commit without a digest", try RemoteAPI.encoder.encode(RemoteAPI.StageRequest(commit: 1))),
                ("a digest of 15 bytes", try RemoteAPI.encoder.encode(RemoteAPI.StageRequest(commit: 1, digest: Data(SecureRandom.bytes(count: 15))))),
                ("a field the server does not know", Data(#"{"parts":1}"#.utf8)),
                ("not JSON", Data("part 0".utf8)),
            ]
            for (what, body) in bodies {
                let answer = try await fixture.signed(alice.vault, "POST", RemoteAPI.Path.stage, body: body)
                #expect(answer.status == 400 && answer.body["code"] as? String == "invalidArguments", "\(what): \(answer)")
            }
            #expect(try await heldParts(fixture, alice.vault).isEmpty)
            // A request signed for another path is refused before it is read.
            let signature = try await fixture.signature(alice.vault, "POST", RemoteAPI.Path.modify, body: Data("{}".utf8))
            let misdirected = try await fixture.raw("POST", RemoteAPI.Path.stage, body: Data("{}".utf8), headers: signature)
            #expect(misdirected.status == 401, "\(misdirected)")
        }
    }
}

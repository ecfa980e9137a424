import CofferCrypto
import CofferTestSupport
import CofferVault
import Foundation
import Testing
@testable import CofferStore

@Suite("Backup and restore")
struct BackupTests {
    /// A store with a zone of two records (one deleted before), its backup sealed by Alice.
    func sealedBackup(_ f: Fixture) async throws -> (ZoneID, [UInt8]) {
        let notes = try await f.db.createZone(named: "Notes")
        _ = try await f.db.save(makeRecord("Note", "a", in: notes, plain: ["title": .string("x")], encrypted: ["pin": .string("1234")]))
        _ = try await f.db.save(makeRecord("Note", "b", in: notes, plain: ["title": .string("y")]))
        _ = try await f.db.save(makeRecord("Note", "c", in: notes, plain: ["title": .string("z")]))
        try await f.db.delete(recordNamed: "c", in: notes)
        let backup = try await f.session.makeBackup()
        return (notes, try backup.sealed(by: f.vault))
    }

    @Test("a sealed backup opens with its vault and restores into a new store with every record as it was")
    func roundTrip() async throws {
        try await withStore { f in
            let (notes, file) = try await sealedBackup(f)
            let backup = try Backup(sealed: file, vault: f.vault)
            #expect(backup.summaries.map(\.zone) == [notes] && backup.recordCount == 2 && backup.userID == f.session.userID)
            let target = try Store(path: f.folder.appendingPathComponent("restored.sqlite").path)
            let session = try target.session(vault: f.vault)
            let result = try await session.restore(backup, resettingMarks: false)
            #expect(result.findings.isEmpty && result.tookStoreID && result.restored.count == 1)
            let reopened = try Store(path: target.url.path)
            #expect(reopened.storeID == f.store.storeID)
            let before = try await f.db.records(named: ["a", "b"], in: notes).mapValues { try $0.get() }
            let after = try await session.privateDatabase.records(named: ["a", "b"], in: notes).mapValues { try $0.get() }
            for name in ["a", "b"] {
                #expect(after[name]?.changeTag == before[name]?.changeTag && after[name]?.created == before[name]?.created && after[name]?.creatorID == before[name]?.creatorID
                        && after[name]?.encryptedValues == before[name]?.encryptedValues)
            }
            // Not empty any more: refused.
            await expectStoreError(.alreadyExists) { try await session.restore(backup, resettingMarks: true) }
        }
    }

    @Test("a backup sealed by its user whose zone names another owner than its log is refused as damaged, before anything is written")
    func changedOwnerIsDamaged() async throws {
        try await withStore { f in
            let notes = try await f.db.createZone(named: "Notes")
            _ = try await f.db.save(makeRecord("Note", "a", in: notes, plain: ["title": .string("x")]))
            var backup = try await f.session.makeBackup()
            let bob = try makeVault(in: f.folder, file: "bob.coffer", name: "Bob", email: "bob@example.com")
            let z = try #require(backup.zones.first)
            for (id, uid) in [(ZoneID(name: z.id.name, ownerID: bob.identity.userID), z.uid), (ZoneID(name: "Renamed", ownerID: z.id.ownerID), z.uid),
                              (z.id, SecureRandom.bytes(count: 16))] {
                backup.zones[0] = ZoneCopy(id: id, uid: uid, created: z.created, log: z.log, wrappedKeys: z.wrappedKeys, chainedKeys: z.chainedKeys,
                                           link: z.link, members: z.members, shareUID: z.shareUID, schema: z.schema, tombstones: z.tombstones, rows: z.rows)
                let reopened = try Backup(sealed: try backup.sealed(by: f.vault), vault: f.vault)
                try await withTemporaryFolder { folder in
                    let target = try Store(path: folder.appendingPathComponent("restored.sqlite").path)
                    let session = try target.session(vault: f.vault)
                    let error = await expectStoreError(.integrityFailure) { _ = try await session.restore(reopened, resettingMarks: true) }
                    #expect(error?.message.contains("the backup is damaged") == true, "\(String(describing: error))")
                    #expect(try await !target.hasZones(), "a zone was written")
                }
            }
        }
    }

    @Test("every byte of the file is covered: a change anywhere, a cut, or bytes added, is refused")
    func everyByte() async throws {
        try await withStore { f in
            let (_, file) = try await sealedBackup(f)
            for offset in stride(from: 0, to: file.count, by: max(1, file.count / 300)) {
                var changed = file
                changed[offset] ^= 0x20
                #expect(throws: StoreError.self, "byte \(offset)") { _ = try Backup(sealed: changed, vault: f.vault) }
            }
            for bad in [Array(file.dropLast()), file + [0], Array(file.prefix(200)), []] {
                #expect(throws: StoreError.self) { _ = try Backup(sealed: bad, vault: f.vault) }
            }
        }
    }

    @Test("another user's vault does not open a backup (permission), and a version or flag it does not know is refused")
    func foreignAndVersions() async throws {
        try await withStore { f in
            let (_, file) = try await sealedBackup(f)
            let bob = try makeVault(in: f.folder, file: "bob.coffer", name: "Bob", email: "bob@example.com")
            await expectStoreError(.permissionFailure) { _ = try Backup(sealed: file, vault: bob) }
            var newer = file
            newer[8] = 2
            let error = await expectStoreError(.invalidArguments) { _ = try Backup(sealed: newer, vault: f.vault) }
            #expect(error?.message.contains("version 2") == true)
            var flagged = file
            flagged[9] = 1
            await expectStoreError(.integrityFailure) { _ = try Backup(sealed: flagged, vault: f.vault) }
        }
    }

    @Test("the payload decoder refuses bytes after the last zone and counts beyond the data")
    func strictPayload() async throws {
        try await withStore { f in
            _ = try await f.db.createZone(named: "Notes")
            let backup = try await f.session.makeBackup()
            let payload = BackupFormat.encode(backup)
            _ = try BackupFormat.decode(payload, userID: backup.userID, created: backup.created, storeID: backup.storeID)
            #expect(throws: StoreError.self) {
                _ = try BackupFormat.decode(payload + [0], userID: backup.userID, created: backup.created, storeID: backup.storeID)
            }
            var huge = payload
            huge.replaceSubrange(0..<4, with: [0x7f, 0xff, 0xff, 0xff])
            #expect(throws: StoreError.self) {
                _ = try BackupFormat.decode(huge, userID: backup.userID, created: backup.created, storeID: backup.storeID)
            }
        }
    }

    @Test("marks: a backup older than what the user saw is a rollback; restoring without resetting is refused, with it the marks go back")
    func rollbackMarks() async throws {
        try await withStore { f in
            let notes = try await f.db.createZone(named: "Notes")
            _ = try await f.db.save(makeRecord("Note", "a", in: notes, plain: ["title": .string("x")]))
            let backup = try await f.session.makeBackup()
            _ = try await f.db.save(makeRecord("Note", "b", in: notes, plain: ["title": .string("y")]))
            try f.session.saveMarks()
            let checks = try backup.markChecks(against: f.vault.marks)
            #expect(checks.first?.standing == .older(entries: 1))
            let target = try Store(path: f.folder.appendingPathComponent("restored.sqlite").path)
            let session = try target.session(vault: f.vault)
            await expectStoreError(.invalidArguments) { try await session.restore(backup, resettingMarks: false) }
            #expect(try await !target.hasZones(), "a refused restore wrote nothing")
            let result = try await session.restore(backup, resettingMarks: true)
            #expect(result.marksReset == [notes] && result.findings.isEmpty)
            #expect(try await session.privateDatabase.record(named: "a", in: notes).name == "a")
        }
    }
}

/// The backup fixture in `Keys/`: a backup of format version 1 that must keep opening and
/// restoring (made by Fixture Alice from `store-v7.sqlite`, see `Keys/README.md`).
@Suite("Backup fixture in Keys/")
struct BackupFixtureTests {
    static let file = "backup-v1.backup"

    @Test("Keys/backup-v1.backup opens with Fixture Alice's vault and restores her zones, which audit clean")
    func fixtureRestores() async throws {
        try await StoreFixtureTests.withCopy(StoreFixtureTests.v7) { f in
            let bytes = [UInt8](try Data(contentsOf: StoreFixtureTests.keysFolder.appendingPathComponent(Self.file)))
            let backup = try Backup(sealed: bytes, vault: f.alice)
            #expect(backup.summaries.map(\.zone.name) == ["Notes", "Private"] && backup.recordCount == 4)
            await expectStoreError(.permissionFailure) { _ = try Backup(sealed: bytes, vault: f.bob) }
            let target = try Store(path: f.folder.appendingPathComponent("restored.sqlite").path)
            let session = try target.session(vault: f.alice)
            let result = try await session.restore(backup, resettingMarks: true)
            #expect(result.findings.isEmpty && result.tookStoreID)
            let aliceID = f.alice.identity.userID, bobID = f.bob.identity.userID
            let query = Query(recordType: "Note")
            StoreFixtureTests.check(try await session.privateDatabase.query(query, in: ZoneID(name: "Notes", ownerID: aliceID)).records,
                                    against: StoreFixtureTests.notes, alice: aliceID, bob: bobID)
            StoreFixtureTests.check(try await session.privateDatabase.query(query, in: ZoneID(name: "Private", ownerID: aliceID)).records,
                                    against: StoreFixtureTests.privateRecords, alice: aliceID, bob: bobID)
            let bob = try target.session(vault: f.bob)
            StoreFixtureTests.check(try await bob.sharedDatabase.query(query, in: ZoneID(name: "Notes", ownerID: aliceID)).records,
                                    against: StoreFixtureTests.notes, alice: aliceID, bob: bobID)
        }
    }

    /// Writes the fixture once, on purpose: `COFFER_WRITE_FIXTURES=1 swift test --filter
    /// BackupFixtureTests/writeFixture`. Refuses to replace one that exists.
    @Test(.enabled(if: ProcessInfo.processInfo.environment["COFFER_WRITE_FIXTURES"] == "1",
                   "writes the backup fixture in Keys/ only when COFFER_WRITE_FIXTURES=1"))
    func writeFixture() async throws {
        let target = StoreFixtureTests.keysFolder.appendingPathComponent(Self.file)
        guard !FileManager.default.fileExists(atPath: target.path) else {
            Issue.record("Keys/\(Self.file) exists; fixtures are never replaced (delete it by hand to re-make it)")
            return
        }
        try await StoreFixtureTests.withCopy(StoreFixtureTests.v7) { f in
            let session = try f.store.session(vault: f.alice)
            try Data(try await session.makeBackup().sealed(by: f.alice)).write(to: target)
        }
    }
}

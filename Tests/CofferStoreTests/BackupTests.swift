import CofferCrypto
import CofferTestSupport
import CofferVault
import CofferStoreTestSupport
import Foundation
import Testing
@testable import CofferStore

@Suite("Backup and restore")
struct BackupTests {
    /// A store with a zone of two records (one deleted before), its backup sealed by Alice.
    func sealedBackup(_ f: TestStore) async throws -> (ZoneID, [UInt8]) {
        let notes = try await f.db.createZone(named: "Notes")
        _ = try await f.db.save(makeRecord("Note", "a", in: notes, plain: ["title": .string("x")], encrypted: ["pin": .string("1234")]))
        _ = try await f.db.save(makeRecord("Note", "b", in: notes, plain: ["title": .string("y")]))
        _ = try await f.db.save(makeRecord("Note", "c", in: notes, plain: ["title": .string("z")]))
        try await f.db.delete(recordNamed: "c", in: notes)
        let backup = try await f.alice.makeBackup()
        return (notes, try backup.sealed(by: f.vault))
    }

    @Test("a sealed backup opens with its vault and restores into a new store with every record as it was")
    func roundTrip() async throws {
        try await withStore { f in
            let (notes, file) = try await sealedBackup(f)
            let backup = try Backup(sealed: file, vault: f.vault)
            #expect(backup.summaries.map(\.zone) == [notes] && backup.recordCount == 2 && backup.userID == f.alice.userID)
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

    /// Seals `backup`, opens it and restores it into a new store, which refuses it as damaged
    /// (its message saying `reason`) and is left without a zone.
    func expectDamagedRestore(_ backup: Backup, vault: Vault, saying reason: String,
                              sourceLocation: SourceLocation = #_sourceLocation) async throws {
        let reopened = try Backup(sealed: try backup.sealed(by: vault), vault: vault)
        try await withTemporaryFolder { folder in
            let target = try Store(path: folder.appendingPathComponent("restored.sqlite").path)
            let session = try target.session(vault: vault)
            let error = await expectStoreError(.integrityFailure, sourceLocation: sourceLocation) {
                _ = try await session.restore(reopened, resettingMarks: true)
            }
            #expect(error?.message.contains("the backup is damaged") == true && error?.message.contains(reason) == true,
                    "\(String(describing: error))", sourceLocation: sourceLocation)
            #expect(try await !target.localStorage(for: "a test").hasZones(), "a zone was written", sourceLocation: sourceLocation)
        }
    }

    @Test("a backup sealed by its user whose zone names another owner than its log is refused as damaged, before anything is written")
    func changedOwnerIsDamaged() async throws {
        try await withStore { f in
            let notes = try await f.db.createZone(named: "Notes")
            _ = try await f.db.save(makeRecord("Note", "a", in: notes, plain: ["title": .string("x")]))
            var backup = try await f.alice.makeBackup()
            let bob = try makeVault(in: f.folder, file: "bob.coffer", name: "Bob", email: "bob@example.com")
            let z = try #require(backup.zones.first)
            for (id, uid) in [(ZoneID(name: z.id.name, ownerID: bob.identity.userID), z.uid), (ZoneID(name: "Renamed", ownerID: z.id.ownerID), z.uid),
                              (z.id, SecureRandom.bytes(count: 16))] {
                backup.zones[0] = ZoneCopy(id: id, uid: uid, created: z.created, log: z.log, wrappedKeys: z.wrappedKeys, chainedKeys: z.chainedKeys,
                                           link: z.link, members: z.members, shareUID: z.shareUID, schema: z.schema, tombstones: z.tombstones, rows: z.rows)
                try await expectDamagedRestore(backup, vault: f.vault, saying: "the backup is damaged")
            }
        }
    }

    @Test("a backup sealed by its user whose zone's log does not start with its genesis (cut before it, or a first entry that does not decode) is refused as damaged, before anything is written")
    func logWithoutGenesisIsDamaged() async throws {
        try await withStore { f in
            let notes = try await f.db.createZone(named: "Notes")
            _ = try await f.db.save(makeRecord("Note", "a", in: notes, plain: ["title": .string("x")]))
            var backup = try await f.alice.makeBackup()
            let z = try #require(backup.zones.first)
            #expect(z.log.count >= 2)
            let first = z.log[0]
            let garbled = StoredLogEntry(seq: first.seq, body: Array(first.body.prefix(12)), signature: first.signature,
                                         entries: first.entries, names: first.names)
            // Cut before its genesis: the file's own decoder refuses it, as entries out of order.
            backup.zones[0] = ZoneCopy(id: z.id, uid: z.uid, created: z.created, log: Array(z.log.dropFirst()), wrappedKeys: z.wrappedKeys,
                                       chainedKeys: z.chainedKeys, link: z.link, members: z.members, shareUID: z.shareUID, schema: z.schema,
                                       tombstones: z.tombstones, rows: z.rows)
            let cut = await expectStoreError(.integrityFailure) { _ = try Backup(sealed: try backup.sealed(by: f.vault), vault: f.vault) }
            #expect(cut?.message.contains("out of order") == true, "\(String(describing: cut))")
            // At position 1, an entry that does not decode, or the next entry's bytes (which say
            // position 2): the restore refuses them.
            let second = z.log[1]
            let moved = StoredLogEntry(seq: first.seq, body: second.body, signature: second.signature, entries: second.entries, names: second.names)
            for log in [[garbled] + z.log.dropFirst(), [moved] + z.log.dropFirst()] {
                let reason = "has no readable first log entry"
                backup.zones[0] = ZoneCopy(id: z.id, uid: z.uid, created: z.created, log: log, wrappedKeys: z.wrappedKeys, chainedKeys: z.chainedKeys,
                                           link: z.link, members: z.members, shareUID: z.shareUID, schema: z.schema, tombstones: z.tombstones, rows: z.rows)
                try await expectDamagedRestore(backup, vault: f.vault, saying: reason)
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
            #expect(file[8] == 2, "backups are written in format version 2")
            var newer = file
            newer[8] = 3
            let error = await expectStoreError(.invalidArguments) { _ = try Backup(sealed: newer, vault: f.vault) }
            #expect(error?.message.contains("version 3") == true)
            // A file of version 2 read as version 1 (its header a field longer) fails its checks.
            var older = file
            older[8] = 1
            await expectStoreError(.integrityFailure) { _ = try Backup(sealed: older, vault: f.vault) }
            var flagged = file
            flagged[9] = 1
            await expectStoreError(.integrityFailure) { _ = try Backup(sealed: flagged, vault: f.vault) }
        }
    }

    @Test("the payload decoder refuses bytes after the last zone, counts beyond the data, and a row marker other than 0 or 1")
    func strictPayload() async throws {
        try await withStore { f in
            let notes = try await f.db.createZone(named: "Notes")
            _ = try await f.db.save(makeRecord("Note", "a", in: notes, plain: ["title": .string("x")]))
            let backup = try await f.alice.makeBackup()
            var payload = [UInt8]()
            try BackupFormat.encode(backup) { payload += $0 }
            func decode(_ bytes: [UInt8]) throws -> Backup {
                try BackupFormat.decode(bytes, version: 2, userID: backup.userID, created: backup.created, storeID: backup.storeID)
            }
            #expect(try decode(payload).recordCount == 1)
            #expect(throws: StoreError.self) { _ = try decode(payload + [0]) }
            var huge = payload
            huge.replaceSubrange(0..<4, with: [0x7f, 0xff, 0xff, 0xff])
            #expect(throws: StoreError.self) { _ = try decode(huge) }
            // The zone's rows end with a 0, the payload's last byte: anything else is refused,
            // and so is a payload cut before it.
            #expect(payload.last == 0)
            var marker = payload
            marker[marker.count - 1] = 2
            #expect(throws: StoreError.self) { _ = try decode(marker) }
            #expect(throws: StoreError.self) { _ = try decode(Array(payload.dropLast())) }
        }
    }

    @Test("a backup larger than a chunk is written chunk by chunk, opens whole, and refuses a file cut at a chunk's end")
    func manyChunks() async throws {
        try await withStore { f in
            let notes = try await f.db.createZone(named: "Notes")
            let big = String(repeating: "x", count: 60_000)
            for batch in 0..<4 {
                _ = try await f.db.modify(saving: (0..<10).map { makeRecord("Note", "n\(batch)-\($0)", in: notes, plain: ["body": .string(big)]) }, in: notes)
            }
            let sink = BackupFormat.MemorySink()
            let summary = try await f.alice.writeBackup(to: sink)
            #expect(summary.recordCount == 40 && summary.bytes == sink.bytes.count && sink.bytes.count > 2 * BackupFormat.chunkSize)
            let backup = try Backup(sealed: sink.bytes, vault: f.vault)
            #expect(backup.recordCount == 40 && backup.summaries == summary.zones)
            // Cut after the first chunk and signed again by the same key: the first chunk was not
            // sealed as the last, so it does not open as one.
            let header = BackupFormat.headerByteCount(2)
            var cut = Array(sink.bytes[..<(header + BackupFormat.chunkSize + XChaCha20Poly1305.overhead)])
            cut += f.vault.signingKey.signature(for: BackupFormat.signedMessage(cut[...]))
            let error = await expectStoreError(.integrityFailure) { _ = try Backup(sealed: cut, vault: f.vault) }
            #expect(error?.message.contains("chunk 0 does not open") == true, "\(String(describing: error))")
        }
    }

    @Test("marks: a backup older than what the user saw is a rollback; restoring without resetting is refused, with it the marks go back")
    func rollbackMarks() async throws {
        try await withStore { f in
            let notes = try await f.db.createZone(named: "Notes")
            _ = try await f.db.save(makeRecord("Note", "a", in: notes, plain: ["title": .string("x")]))
            let backup = try await f.alice.makeBackup()
            _ = try await f.db.save(makeRecord("Note", "b", in: notes, plain: ["title": .string("y")]))
            try f.alice.saveMarks()
            let checks = try backup.markChecks(against: f.vault.marks)
            #expect(checks.first?.standing == .older(entries: 1))
            let target = try Store(path: f.folder.appendingPathComponent("restored.sqlite").path)
            let session = try target.session(vault: f.vault)
            await expectStoreError(.invalidArguments) { try await session.restore(backup, resettingMarks: false) }
            #expect(try await !target.localStorage(for: "a test").hasZones(), "a refused restore wrote nothing")
            let result = try await session.restore(backup, resettingMarks: true)
            #expect(result.marksReset == [notes] && result.findings.isEmpty)
            #expect(try await session.privateDatabase.record(named: "a", in: notes).name == "a")
        }
    }
}

/// The backup fixtures in `Keys/`: a backup of each format version, which must keep opening
/// and restoring (made by TestStore Alice from `store-v7.sqlite`, see `Keys/README.md`).
@Suite("Backup fixtures in Keys/")
struct BackupFixtureTests {
    static let files = ["backup-v1.backup", "backup-v2.backup"]
    /// The fixture of the version Coffer writes now.
    static let current = "backup-v\(BackupFormat.version).backup"

    @Test("each Keys/backup-vN.backup opens with Fixture Alice's vault and restores her zones, which audit clean", arguments: files)
    func fixtureRestores(file: String) async throws {
        try await StoreFixtureTests.withCopy(StoreFixtureTests.v7) { f in
            let bytes = [UInt8](try Data(contentsOf: StoreFixtureTests.keysFolder.appendingPathComponent(file)))
            #expect(Int(bytes[8]) == Int(file.dropFirst("backup-v".count).prefix { $0.isNumber })!, "the fixture's format version")
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
        #expect(Self.files.contains(Self.current), "the fixture of the version written now is listed")
        let target = StoreFixtureTests.keysFolder.appendingPathComponent(Self.current)
        guard !FileManager.default.fileExists(atPath: target.path) else {
            Issue.record("Keys/\(Self.current) exists; fixtures are never replaced (delete it by hand to re-make it)")
            return
        }
        try await StoreFixtureTests.withCopy(StoreFixtureTests.v7) { f in
            let session = try f.store.session(vault: f.alice)
            try Data(try await session.makeBackup().sealed(by: f.alice)).write(to: target)
        }
    }
}

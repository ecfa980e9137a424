import CofferCrypto
import CofferTestSupport
import CofferVault
import CofferStoreTestSupport
import Foundation
import GRDB
import Testing
@testable import CofferStore
#if canImport(Glibc)
import Glibc
#endif

extension ServerHostileTests {
    /// A fork shown to two members, and the forked zone left out of one member's zone list (its
    /// `zone_member` row deleted from the server's store): that member's comparison with the
    /// other's heads, and their own audit, still find it, because their marks and the other's
    /// file name the zone whatever the list says.
    @Test func forkHiddenFromTheZoneList() async throws {
        try await withServer(.sqlite) { fixture in
            let scene = try await Scene.make(fixture)
            let path = try #require(fixture.storePath)
            let familyRow = try await scene.head(scene.alice.session, scene.family).row
            let carolID = scene.carol.vault.identity.userID
            let (aliceHeads, second) = try await Self.forkAfterAliceCommits(fixture, scene, storePath: path)
            // Carol commits on the copy: the zone forked.
            do {
                let carolSession = try await fixture.client(scene.carol.vault, server: second).openSession(vault: scene.carol.vault)
                var c = Record(type: "Note", name: "c", zone: scene.family)
                c.encryptedValues["body"] = "Carol's branch"
                _ = try await carolSession.sharedDatabase.save(c)
                try carolSession.saveMarks()
                await second.stop()
            } catch {
                await second.stop(SIGKILL)
                throw error
            }
            // The server then leaves the zone out of Carol's list of zones.
            let queue = try DatabaseQueue(path: path)
            try await queue.write { db in
                try db.execute(sql: "DELETE FROM zone_member WHERE zone_id = ? AND user_id = ?", arguments: [try serverRowID(db, familyRow), carolID])
            }
            try queue.close()
            let third = try await fixture.secondInstance()
            do {
                let carolSession = try await fixture.client(scene.carol.vault, server: third).openSession(vault: scene.carol.vault)
                #expect(try await carolSession.zoneDirectory.sharedZones().map(\.id) == [], "the zone is hidden from Carol's list")
                let uid = Hex.encode(familyRow.uid)
                func names(_ f: AuditFinding) -> Bool { f.zone == scene.family || f.subject == "zone \(uid)" }
                let comparison = try await carolSession.compareHeads(aliceHeads.encoded())
                #expect(comparison.findings.contains(where: names), "Carol's comparison finds the hidden zone: \(comparison.findings)")
                let fresh = try await fixture.client(scene.carol.vault, server: third).openSession(vault: scene.carol.vault)
                let report = try await fresh.audit()
                #expect(report.findings.contains(where: names), "Carol's audit finds the hidden zone: \(report.findings)")
                #expect(report.marks >= 1)
                await third.stop()
            } catch {
                await third.stop(SIGKILL)
                throw error
            }
        }
    }
}

/// A vault used with two stores keeps marks of the zones of both: the audit of one store checks
/// the marks of the zones verified in it (and those of a marks file that does not say where),
/// not the other store's, and still finds a zone of its own that the store hides.
@Suite("Audit: marks of the store audited")
struct MarksOfTheStoreAuditedTests {
    @Test func anotherStoresZonesAreNotFindings() async throws {
        try await withTemporaryFolder { folder in
            let vault = try makeVault(in: folder)
            let home = try Store(path: folder.appendingPathComponent("home.sqlite").path)
            let work = try Store(path: folder.appendingPathComponent("work.sqlite").path)
            let atHome = try await home.openSession(vault: vault), atWork = try await work.openSession(vault: vault)
            let kept = try await atHome.privateDatabase.createZone(named: "Kept")
            let hidden = try await atHome.privateDatabase.createZone(named: "Hidden")
            let office = try await atWork.privateDatabase.createZone(named: "Office")
            for (session, zone) in [(atHome, kept), (atHome, hidden), (atWork, office)] {
                var note = Record(type: "Note", name: "n1", zone: zone)
                note.encryptedValues["body"] = "x"
                _ = try await session.privateDatabase.save(note)
                try session.saveMarks()
            }
            #expect(try await atHome.audit().findings.isEmpty)
            #expect(try await atWork.audit().findings.isEmpty)
            // Home's store loses "Hidden" behind the engine's back: its audit names that zone,
            // and not work's "Office".
            let queue = try DatabaseQueue(path: folder.appendingPathComponent("home.sqlite").path)
            try await queue.write { db in try db.execute(sql: "DELETE FROM zone WHERE name = 'Hidden'") }
            try queue.close()
            let findings = try await home.openSession(vault: vault).audit().findings
            let uid = try await atWork.store.read { db in try atWork.accessControl.zoneRow(db, office).uid }
            #expect(findings.count == 1, "\(findings)")
            #expect(findings.allSatisfy { !$0.subject.contains(Hex.encode(uid)) && !$0.message.contains(Hex.encode(uid)) }, "\(findings)")
            #expect(try await work.openSession(vault: vault).audit().findings.isEmpty)
        }
    }
}

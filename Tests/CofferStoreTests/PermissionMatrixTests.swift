import CofferCrypto
import CofferVault
import CofferStoreTestSupport
import Foundation
import GRDB
import Testing
@testable import CofferStore

/// Every role and status against every operation: allowed, or the exact error code; and the
/// permission predicates agree with the same matrix. Each case runs in a store of its own.
@Suite("Permission matrix")
struct PermissionMatrixTests {
    enum Role: String, CaseIterable, Sendable, CustomTestStringConvertible {
        case owner
        case privateReadWriteAccepted
        case privateReadOnlyAccepted
        case privatePending
        case publicReadOnly
        case publicReadWrite
        case removed
        case left
        case stranger

        var testDescription: String { rawValue }
    }

    /// A role on a backend: the matrix runs on SQLite and on PostgreSQL.
    struct RoleOn: Sendable, CustomTestStringConvertible {
        let role: Role
        let backend: TestBackend
        var testDescription: String { "\(role.rawValue) on \(backend.rawValue)" }

        static var all: [RoleOn] { Role.allCases.flatMap { role in TestBackend.all.map { RoleOn(role: role, backend: $0) } } }
    }

    enum Operation: String, CaseIterable, Sendable, CustomTestStringConvertible {
        case fetchRecord, query, saveNewRecord, updateRecord, deleteRecord
        case addParticipant, changePublicPermission, stopShare

        var testDescription: String { rawValue }
        var readsRecords: Bool { self == .fetchRecord || self == .query }
        var writesRecords: Bool { self == .saveNewRecord || self == .updateRecord || self == .deleteRecord }
    }

    /// The matrix (Sources/CofferStore/CofferStore.docc/Sharing.md, "Permissions, enforced on every operation").
    static func expected(_ role: Role, _ op: Operation) -> Outcome {
        switch role {
        case .owner:
            return .allowed
        case .privateReadWriteAccepted, .publicReadWrite:
            return op.readsRecords || op.writesRecords ? .allowed : .refused(.permissionFailure)
        case .privateReadOnlyAccepted, .publicReadOnly:
            return op.readsRecords ? .allowed : .refused(.permissionFailure)
        case .privatePending, .removed, .left:
            return .refused(.permissionFailure)
        case .stranger:
            return .refused(.zoneNotFound)
        }
    }

    struct Scene {
        let f: TestStore
        let zone: ZoneID
        /// The user acting in the role.
        let actor: Session
        /// A contact to invite.
        let carol: Session
        var db: RecordDatabase { actor.userID == f.alice.userID ? actor.privateDatabase : actor.sharedDatabase }
    }

    /// Alice's "Family" (n1, n2), shared; Bob in `role` (or Alice herself for `.owner`).
    static func scene(_ role: Role, _ f: TestStore) async throws -> Scene {
        let bob = try await f.user("Bob", "bob@example.com")
        let carol = try await f.user("Carol", "carol@example.com")
        let alice = f.alice
        let zone = try await f.makeZone("Family")
        func invite(_ permission: SharePermission, accept: Bool) async throws {
            let share = try await alice.share(zone: zone, title: "Family notes")
            _ = try await alice.addParticipant(bob.userID, permission: permission, to: zone)
            if accept { _ = try await bob.acceptShare(url: share.url) }
        }
        func link(_ permission: SharePermission) async throws {
            let share = try await alice.share(zone: zone, title: "Family notes", publicPermission: permission)
            _ = try await bob.acceptShare(url: share.url)
        }
        switch role {
        case .owner:
            try await invite(.readWrite, accept: true)
            return Scene(f: f, zone: zone, actor: alice, carol: carol)
        case .privateReadWriteAccepted: try await invite(.readWrite, accept: true)
        case .privateReadOnlyAccepted: try await invite(.readOnly, accept: true)
        case .privatePending: try await invite(.readWrite, accept: false)
        case .publicReadOnly: try await link(.readOnly)
        case .publicReadWrite: try await link(.readWrite)
        case .removed:
            try await invite(.readWrite, accept: true)
            _ = try await alice.removeParticipant(bob.userID, from: zone)
        case .left:
            try await invite(.readWrite, accept: true)
            try await bob.leaveShare(zone: zone)
        case .stranger:
            _ = try await alice.share(zone: zone, title: "Family notes")
        }
        return Scene(f: f, zone: zone, actor: bob, carol: carol)
    }

    @Test(arguments: RoleOn.all, Operation.allCases)
    func operation(_ on: RoleOn, _ op: Operation) async throws {
        let role = on.role
        try await withStore(on.backend) { f in
            let s = try await Self.scene(role, f)
            let owner = try await f.fresh(f.alice)
            let publicBefore = try await owner.fetchShare(in: s.zone).publicPermission
            let newPublic: SharePermission = publicBefore == .readWrite ? .readOnly : .readWrite
            let outcome: Outcome
            switch op {
            case .fetchRecord:
                outcome = await attempt {
                    let record = try await s.db.record(named: "n1", in: s.zone)
                    #expect(noteBody(record) == "body of n1")
                    #expect(record.values["title"] == .string("n1"))
                }
            case .query:
                outcome = await attempt {
                    let page = try await s.db.query(Query(recordType: "Note", sort: [.init("title", ascending: false)]), in: s.zone)
                    #expect(page.records.map(\.name) == ["n2", "n1"])
                    #expect(page.records.map { noteBody($0) } == ["body of n2", "body of n1"])
                }
            case .saveNewRecord:
                outcome = await attempt { try await s.db.save(makeNote("new", in: s.zone, body: "new by \(role)")) }
            case .updateRecord:
                var record = try await owner.privateDatabase.record(named: "n1", in: s.zone)
                record.encryptedValues["body"] = .string("updated by \(role)")
                outcome = await attempt { try await s.db.save(record) }
            case .deleteRecord:
                let tag = try #require(try await owner.privateDatabase.record(named: "n2", in: s.zone).changeTag)
                outcome = await attempt { try await s.db.delete(recordNamed: "n2", in: s.zone, ifMatch: tag) }
            case .addParticipant:
                outcome = await attempt { try await s.actor.addParticipant(s.carol.userID, permission: .readOnly, to: s.zone) }
            case .changePublicPermission:
                outcome = await attempt { try await s.actor.setPublicPermission(newPublic, in: s.zone) }
            case .stopShare:
                outcome = await attempt { try await s.actor.stopSharing(zone: s.zone) }
            }
            #expect(outcome == Self.expected(role, op), "\(role) \(op)")

            // The effect, as the owner sees it in a new session: done exactly when allowed.
            let allowed = outcome == .allowed
            let check = try await f.fresh(f.alice)
            switch op {
            case .fetchRecord, .query:
                break
            case .saveNewRecord:
                let saved = try await check.privateDatabase.records(named: ["new"], in: s.zone)["new"]
                if allowed {
                    #expect(try saved?.get().encryptedValues["body"] == .string("new by \(role)"))
                } else {
                    #expect(throws: StoreError.self) { try saved?.get() }
                }
            case .updateRecord:
                let body = noteBody(try await check.privateDatabase.record(named: "n1", in: s.zone))
                #expect(body == (allowed ? "updated by \(role)" : "body of n1"))
            case .deleteRecord:
                let names = try await check.privateDatabase.records(in: s.zone).map(\.name)
                #expect(names == (allowed ? ["n1"] : ["n1", "n2"]))
            case .addParticipant:
                let carol = try await check.fetchShare(in: s.zone).testParticipant(s.carol.userID)
                #expect(carol?.status == (allowed ? .pending : nil))
            case .changePublicPermission:
                #expect(try await check.fetchShare(in: s.zone).publicPermission == (allowed ? newPublic : publicBefore))
            case .stopShare:
                #expect(try await check.isShared(s.zone) == !allowed)
            }
        }
    }

    @Test(arguments: TestBackend.all, Role.allCases)
    func predicatesAgreeWithTheMatrix(_ backend: TestBackend, _ role: Role) async throws {
        try await withStore(backend) { f in
            let s = try await Self.scene(role, f)
            let me = s.actor
            let record = try await f.alice.privateDatabase.record(named: "n1", in: s.zone)
            let readers: Set<Role> = [.owner, .privateReadWriteAccepted, .privateReadOnlyAccepted, .publicReadOnly, .publicReadWrite]
            let writers: Set<Role> = [.owner, .privateReadWriteAccepted, .publicReadWrite]

            #expect(await me.canRead(zone: s.zone) == readers.contains(role))
            #expect(await me.canModify(zone: s.zone) == writers.contains(role))
            #expect(await me.canUpdate(record) == writers.contains(role))
            #expect(await me.canDelete(record) == writers.contains(role))
            #expect(me.isOwner(s.zone) == (role == .owner))
            if role == .stranger && backend.isServer {
                // Through a server, a stranger cannot read the zone's log at all: no zone.
                await expectStoreError(.zoneNotFound) { try await me.isShared(s.zone) }
            } else {
                #expect(try await me.isShared(s.zone) == true)
            }
            // The predicates agree with what the operations do.
            #expect(await me.canRead(zone: s.zone) == (Self.expected(role, .fetchRecord) == .allowed))
            #expect(await me.canModify(zone: s.zone) == (Self.expected(role, .saveNewRecord) == .allowed))

            // Which shares the user sees. A removed participant and a stranger see none.
            let seesShare = role != .removed && role != .stranger
            let listed = try await me.fetchShares()
            #expect(listed.map(\.zoneID) == (seesShare ? [s.zone] : []), "fetchShares() of \(role)")
            let matching = try await me.fetchShares(matching: [s.zone, ZoneID(name: "Nope", ownerID: f.alice.userID)])
            #expect(Array(matching.keys) == (seesShare ? [s.zone] : []), "fetchShares(matching:) of \(role)")
            let fetched = await attempt { try await me.fetchShare(in: s.zone) }
            switch role {
            case .removed: #expect(fetched == .refused(.permissionFailure))
            case .stranger: #expect(fetched == .refused(.zoneNotFound))
            default: #expect(fetched == .allowed)
            }
            if seesShare {
                let share = try await me.fetchShare(in: s.zone)
                #expect(listed.first == share)
                #expect(matching[s.zone] == share)
                let mine = try #require(share.testParticipant(me.userID))
                switch role {
                case .owner:
                    #expect(mine.role == .owner)
                    #expect(mine.status == .accepted)
                case .privateReadWriteAccepted, .privateReadOnlyAccepted:
                    #expect(mine.role == .privateUser)
                    #expect(mine.status == .accepted)
                    #expect(mine.permission == (role == .privateReadWriteAccepted ? .readWrite : .readOnly))
                case .privatePending:
                    #expect(mine.role == .privateUser)
                    #expect(mine.status == .pending)
                case .publicReadOnly, .publicReadWrite:
                    #expect(mine.role == .publicUser)
                    #expect(mine.status == .accepted)
                    #expect(mine.permission == (role == .publicReadWrite ? .readWrite : .readOnly))
                case .left:
                    #expect(mine.status == .removed)
                    #expect(mine.left == true)
                case .removed, .stranger:
                    Issue.record("unreachable")
                }
            }

            // The shared database lists the zone exactly for the participants who may read it.
            let shared = try await me.sharedDatabase.zones().map(\.id)
            #expect(shared == (readers.contains(role) && role != .owner ? [s.zone] : []))
            #expect(try await me.privateDatabase.zones().map(\.id) == (role == .owner ? [s.zone] : []))
        }
    }
}

import CofferCrypto
import CofferTestSupport
import CofferVault
import CofferStoreTestSupport
import Foundation
import GRDB
import Testing
@testable import CofferStore

/// Who reads what of a zone through a server, as the zone's verified log says: raw signed
/// reads of users whose part ended (removed, left, joined by a link that was turned off) get
/// the zone's log up to the entry that ended it and nothing else; a lookup of a zone that is
/// not the user's answers as for a missing one; malformed reads are 400s.
@Suite("coffer serve: read access from the zone's log")
struct ServerAccessTests {
    typealias Scene = ServerHostileTests.Scene

    /// A raw signed `storage/read` of `needs` as `vault`: the status, the body, and the tables
    /// it answered (nil for an error).
    static func read(_ fixture: ServerFixture, _ vault: Vault, _ needs: [[String: Any]]) async throws
        -> (status: Int, body: [String: Any], tables: WireTables?) {
        let body = try JSONSerialization.data(withJSONObject: ["needs": needs, "basis": ["heads": [], "zones": [], "contacts": []]])
        let answer = try await fixture.signed(vault, "POST", RemoteAPI.Path.read, body: body)
        guard answer.status == 200 else { return (answer.status, answer.body, nil) }
        let data = try JSONSerialization.data(withJSONObject: answer.body)
        return (answer.status, answer.body, try JSONDecoder().decode(RemoteAPI.ReadResponse.self, from: data).tables)
    }

    /// A zone as a request names it: its uid, in base64.
    static func wire(_ row: ZoneRow) -> String { Data(row.uid).base64EncodedString() }

    /// A zone of `session`'s as a request names it.
    static func wire(_ session: Session, _ zone: ZoneID) async throws -> String {
        wire(try await session.store.read { db in try session.accessControl.zoneRow(db, zone) })
    }

    /// The head of the zone's log as `session` verifies it now.
    static func headSeq(_ session: Session, _ zone: ZoneID) async throws -> Int64 {
        try await session.store.read { db in try session.verifiedLogs.zoneLog(db, zone: try session.accessControl.zoneRow(db, zone)).state.headSeq }
    }

    /// A read of each kind that reads a zone's record rows (or their deletions).
    static func rowReads(_ zone: String) -> [[String: Any]] {
        [["op": "records/lookup", "zone": zone, "names": ["n1", "n3"]],
         ["op": "records/page", "zone": zone, "afterName": "", "limit": 100],
         ["op": "records/sealedPage", "zone": zone, "seq": 1_000, "afterName": "", "limit": 100],
         ["op": "records/all", "zone": zone],
         ["op": "records/query", "zone": zone, "plan": ["recordType": "Note", "predicates": [], "sorts": []]],
         ["op": "records/children", "zone": zone, "name": "n1"],
         ["op": "records/ancestors", "zone": zone, "name": "n1"],
         ["op": "records/hasTombstones", "zone": zone],
         ["op": "records/tombstones", "zone": zone],
         ["op": "changes/zone", "zone": zone, "after": 0, "limit": 100]]
    }

    /// Expects each row read of `zone` as `vault` refused (403, `permissionFailure`) with a
    /// message holding `reason`.
    static func expectRowsRefused(_ fixture: ServerFixture, _ vault: Vault, _ zone: String, _ reason: String,
                                  sourceLocation: SourceLocation = #_sourceLocation) async throws {
        for need in rowReads(zone) {
            let answer = try await read(fixture, vault, [need])
            #expect(answer.status == 403, "\(need["op"]!): \(answer.status)", sourceLocation: sourceLocation)
            #expect(answer.body["code"] as? String == "permissionFailure", sourceLocation: sourceLocation)
            #expect((answer.body["message"] as? String)?.contains(reason) == true, "\(answer.body)", sourceLocation: sourceLocation)
        }
    }

    /// Expects `vault`'s reads of the zone's log to answer up to and including entry `end` and
    /// no further (heads, entries, hashes), and its lookup to carry no keys.
    static func expectLogThrough(_ fixture: ServerFixture, _ vault: Vault, _ zone: ZoneID, rowID: String, end: Int64,
                                 sourceLocation: SourceLocation = #_sourceLocation) async throws {
        let log = try await read(fixture, vault, [["op": "log/entries", "zone": rowID, "after": 0]])
        #expect(log.status == 200, "\(log.body)", sourceLocation: sourceLocation)
        let seqs = log.tables?.logs?.first?.v.entries.map(\.seq) ?? []
        #expect(seqs.last == end && seqs.allSatisfy { $0 <= end }, "\(seqs) through \(end)", sourceLocation: sourceLocation)
        #expect(log.tables?.heads?.first?.v.value?.seq == end, sourceLocation: sourceLocation)
        #expect(try await read(fixture, vault, [["op": "log/entry", "zone": rowID, "seq": end]]).status == 200, sourceLocation: sourceLocation)
        #expect(try await read(fixture, vault, [["op": "log/entry", "zone": rowID, "seq": end + 1]]).status == 403, sourceLocation: sourceLocation)
        let hashes = try await read(fixture, vault, [["op": "log/hashes", "zone": rowID]])
        #expect(hashes.status == 200, sourceLocation: sourceLocation)
        #expect(hashes.tables?.logHashes?.first?.v.map(\.k).max() == end, sourceLocation: sourceLocation)
        let lookup = try await read(fixture, vault, [["op": "zones/lookup", "name": zone.name, "owner": zone.ownerID]])
        #expect(lookup.status == 200, sourceLocation: sourceLocation)
        #expect(lookup.tables?.zones?.first?.v.value?.uid == Data(base64Encoded: rowID), sourceLocation: sourceLocation)
        #expect(lookup.tables?.heads?.first?.v.value?.seq == end, sourceLocation: sourceLocation)
        #expect((lookup.tables?.wrappedKeys ?? []).allSatisfy { $0.v.isEmpty }, "no keys", sourceLocation: sourceLocation)
        #expect((lookup.tables?.chainedKeys ?? []).allSatisfy { $0.v.isEmpty }, "no keys", sourceLocation: sourceLocation)
        #expect((lookup.tables?.shareLinks ?? []).allSatisfy { $0.v.value == nil }, "no link", sourceLocation: sourceLocation)
    }

    /// Bob, removed from Alice's zone, reads none of its rows (old or new) through raw signed
    /// requests, only its log up to his removal; Carol, who stays, reads everything.
    @Test(arguments: TestBackend.local)
    func removedParticipant(_ backend: TestBackend) async throws {
        try await withServer(backend) { fixture in
            let scene = try await Scene.make(fixture)
            let before = try await scene.head(scene.alice.session, scene.family)
            let rowID = Self.wire(before.row)
            #expect(try await Self.read(fixture, scene.bob.vault, Self.rowReads(rowID)).status == 200)
            _ = try await scene.alice.session.removeParticipant(scene.bob.vault.identity.userID, from: scene.family)
            var later = Record(type: "Note", name: "n3", zone: scene.family)
            later.encryptedValues["body"] = "after Bob"
            _ = try await scene.alice.session.privateDatabase.save(later)
            let after = try await scene.head(scene.alice.session, scene.family)
            #expect(after.state.headSeq > before.state.headSeq + 1)
            try await Self.expectRowsRefused(fixture, scene.bob.vault, rowID, "removed")
            try await Self.expectLogThrough(fixture, scene.bob.vault, scene.family, rowID: rowID, end: before.state.headSeq + 1)
            // Carol, still a participant, reads the rows and the whole log.
            for need in Self.rowReads(rowID) { #expect(try await Self.read(fixture, scene.carol.vault, [need]).status == 200) }
            let log = try await Self.read(fixture, scene.carol.vault, [["op": "log/entries", "zone": rowID, "after": 0]])
            #expect(log.tables?.logs?.first?.v.entries.last?.seq == after.state.headSeq)
            // Bob's own client says why.
            let fresh = try await fixture.client(scene.bob.vault).openSession(vault: scene.bob.vault)
            await #expect { _ = try await fresh.sharedDatabase.record(named: "n1", in: scene.family) } throws: { error in
                (error as? StoreError)?.code == .permissionFailure
            }
        }
    }

    /// Carol leaves: her raw reads of the zone's rows are refused from her leaving on; its log
    /// she still reads (the log still invites her: she may accept again, and does).
    @Test(arguments: TestBackend.local)
    func participantWhoLeft(_ backend: TestBackend) async throws {
        try await withServer(backend) { fixture in
            let scene = try await Scene.make(fixture)
            let rowID = Self.wire(try await scene.head(scene.alice.session, scene.family).row)
            try await scene.carol.session.leaveShare(zone: scene.family)
            let left = try await scene.head(scene.alice.session, scene.family)
            try await Self.expectRowsRefused(fixture, scene.carol.vault, rowID, "accepted")
            let log = try await Self.read(fixture, scene.carol.vault, [["op": "log/entries", "zone": rowID, "after": 0]])
            #expect(log.status == 200)
            #expect(log.tables?.logs?.first?.v.entries.last?.seq == left.state.headSeq)
            // Accepting again gives her the rows again.
            let share = try await scene.alice.session.fetchShare(in: scene.family)
            _ = try await scene.carol.session.acceptShare(url: share.url)
            #expect(try await Self.read(fixture, scene.carol.vault, Self.rowReads(rowID)).status == 200)
        }
    }

    /// Dave joins a zone by its public link; once Alice turns the link off, his raw reads of
    /// its rows are refused, and its log he reads up to the entry that turned it off. A link
    /// joiner who leaves is refused the same way.
    @Test(arguments: TestBackend.local)
    func linkJoinerAfterTheLinkIsTurnedOff(_ backend: TestBackend) async throws {
        try await withServer(backend) { fixture in
            let alice = try await fixture.user("Alice", "alice@example.com")
            let dave = try await fixture.user("Dave Grohl", "dave@example.com")
            let erin = try await fixture.user("Erin Brockovich", "erin@example.com")
            let zone = try await alice.session.privateDatabase.createZone(named: "Open")
            var note = Record(type: "Note", name: "n1", zone: zone)
            note.encryptedValues["body"] = "for anyone with the link"
            _ = try await alice.session.privateDatabase.save(note)
            let share = try await alice.session.share(zone: zone, publicPermission: .readOnly)
            let rowID = try await Self.wire(alice.session, zone)
            // Before joining, anyone with the link reads the share, not its rows.
            #expect(try await Self.read(fixture, dave.vault, [["op": "log/entries", "zone": rowID, "after": 0]]).status == 200)
            try await Self.expectRowsRefused(fixture, dave.vault, rowID, "accepted")
            for who in [dave, erin] { _ = try await who.session.acceptShare(url: share.url) }
            #expect(try await dave.session.sharedDatabase.record(named: "n1", in: zone).encryptedValues["body"] == "for anyone with the link")
            #expect(try await Self.read(fixture, dave.vault, Self.rowReads(rowID)).status == 200)
            // Erin leaves while the link stands (her acceptance entry of leaving is the head).
            try await erin.session.leaveShare(zone: zone)
            let left = try await Self.headSeq(alice.session, zone)
            try await Self.expectRowsRefused(fixture, erin.vault, rowID, "accepted")
            // The link turned off (the owner's membership entry after that head).
            _ = try await alice.session.setPublicPermission(.none, in: zone)
            try await Self.expectRowsRefused(fixture, dave.vault, rowID, "link")
            try await Self.expectLogThrough(fixture, dave.vault, zone, rowID: rowID, end: left + 1)
            try await Self.expectRowsRefused(fixture, erin.vault, rowID, "left")
            try await Self.expectLogThrough(fixture, erin.vault, zone, rowID: rowID, end: left)
        }
    }

    /// A lookup by name of a zone that exists but is not the user's answers exactly as one of a
    /// zone the store does not have (status and body); so do zone lists the member lookup
    /// fills, for zones the log does not give the user.
    @Test(arguments: TestBackend.local)
    func lookupTellsNotYoursFromMissingNot(_ backend: TestBackend) async throws {
        try await withServer(backend) { fixture in
            let alice = try await fixture.user("Alice", "alice@example.com")
            let bob = try await fixture.user("Bob Builder", "bob@example.com")
            let lookup: [[String: Any]] = [["op": "zones/lookup", "name": "Secret", "owner": alice.vault.identity.userID]]
            func canonical(_ answer: (status: Int, body: [String: Any], tables: WireTables?)) throws -> String {
                "\(answer.status) " + String(decoding: try JSONSerialization.data(withJSONObject: answer.body, options: .sortedKeys), as: UTF8.self)
            }
            let missing = try canonical(try await Self.read(fixture, bob.vault, lookup))
            let zone = try await alice.session.privateDatabase.createZone(named: "Secret")
            var note = Record(type: "Note", name: "n1", zone: zone)
            note.values["title"] = "plain but private"
            _ = try await alice.session.privateDatabase.save(note)
            let notYours = try canonical(try await Self.read(fixture, bob.vault, lookup))
            #expect(notYours == missing)
            #expect(missing.hasPrefix("200 "))
            // Alice sees her zone.
            #expect(try await Self.read(fixture, alice.vault, lookup).tables?.zones?.first?.v.value != nil)
            // A member lookup that lists Bob (the server's clients cannot write one: someone with
            // the store's file did) gives him nothing: the log does not name him.
            let row = try await alice.session.store.read { db in try alice.session.accessControl.zoneRow(db, zone) }
            try await fixture.listInMemberLookup(row, bob.vault.identity.userID)
            #expect(try canonical(try await Self.read(fixture, bob.vault, lookup)) == missing)
            try await Self.expectRowsRefused(fixture, bob.vault, Self.wire(row), "not shared")
            let user = bob.vault.identity.userID
            let lists = try await Self.read(fixture, bob.vault, [["op": "zones/shared", "user": user], ["op": "zones/listing", "user": user],
                                                                ["op": "changes/database/shared", "user": user, "since": 0]])
            #expect(lists.status == 200)
            #expect((lists.tables?.sharedZones ?? []).allSatisfy { $0.v.isEmpty })
            #expect((lists.tables?.listingZones ?? []).allSatisfy { $0.v.isEmpty })
            #expect((lists.tables?.changedSharedZones ?? []).allSatisfy { $0.v.allSatisfy { $0.v.isEmpty } })
            #expect((lists.tables?.zones ?? []).isEmpty)
        }
    }

    /// Every field of a well-formed write of each kind (refused or applied for what it means,
    /// never for its form), made malformed (another type, negative, too large, fractional, the
    /// wrong length, not base64, not a user id or name, missing), is a 400 `invalidArguments`,
    /// never a 500; so is each field of a record version's stamp.
    @Test func malformedWritesAre400() async throws {
        try await withServer(.sqlite) { fixture in
            let alice = try await fixture.user("Alice", "alice@example.com")
            let mallory = try await fixture.user("Mallory Mint", "mallory@example.com")
            let aliceID = alice.vault.identity.userID, me = mallory.vault.identity.userID
            let zone = try await alice.session.privateDatabase.createZone(named: "Kept")
            let row = try await alice.session.store.read { db in try alice.session.accessControl.zoneRow(db, zone) }
            let uid = Self.wire(row)
            func b64(_ bytes: [UInt8]) -> String { Data(bytes).base64EncodedString() }
            let entry = LogEntry(zoneUID: row.uid, seq: 2, prev: Digest32(SecureRandom.bytes(count: 32)), kind: .commit, authorID: me, time: 1,
                                 payload: RecordsPayload(epoch: 1, ownerSeq: 1, label: nil, records: RecordsSummary(entries: [], names: [])).encoded)
            let card = try ContactCard(vault: mallory.vault), identity = card.identity
            let version: [String: Any] = ["name": "n1", "type": "Note", "seq": 2, "epoch": 1, "membershipSeq": 1, "creator": me, "modifier": me,
                                          "created": 1.0, "modified": 1.0, "plain": b64(Array("{}".utf8)), "plainTypes": b64([])]
            let valid: [[String: Any]] = [
                ["op": "zones/create", "zone": b64(SecureRandom.bytes(count: 16)), "owner": aliceID, "name": "New", "created": 1.0],
                ["op": "zones/delete", "zone": uid], ["op": "zones/touch", "zone": uid],
                ["op": "zones/gone", "zone": uid, "users": [aliceID], "reason": "deleted"], ["op": "zones/back", "zone": uid, "user": aliceID],
                ["op": "log/append", "zone": uid, "head": 1, "body": b64(entry.body), "signature": b64(mallory.vault.signingKey.signature(for: entry.body))],
                ["op": "keys/insert", "zone": uid, "epoch": 1, "user": aliceID, "bytes": b64(SecureRandom.bytes(count: 80))],
                ["op": "keys/store", "zone": uid, "epoch": 1, "user": aliceID, "bytes": b64(SecureRandom.bytes(count: 80))],
                ["op": "keys/delete", "zone": uid, "user": aliceID], ["op": "keys/chain", "zone": uid, "epoch": 1, "bytes": b64(SecureRandom.bytes(count: 72))],
                ["op": "keys/deleteOlder", "zone": uid, "epoch": 1],
                ["op": "shares/link", "zone": uid, "epoch": 1, "bytes": b64(SecureRandom.bytes(count: 80)), "secret": b64(SecureRandom.bytes(count: 80))],
                ["op": "shares/unlink", "zone": uid], ["op": "zones/members", "zone": uid, "users": [me]],
                ["op": "zones/addMember", "zone": uid, "user": me],
                ["op": "schema/insert", "zone": uid, "recordType": "Note", "field": "title", "valueType": "string", "encrypted": false],
                ["op": "schema/drop", "zone": uid, "recordType": "Note", "field": "title"],
                ["op": "records/insert", "zone": uid, "version": version],
                ["op": "records/replace", "zone": uid, "version": version, "storedSeq": 1, "keep": false],
                ["op": "records/delete", "zone": uid, "name": "n1", "storedSeq": 1],
                ["op": "tombstones/add", "zone": uid, "name": "n1", "seq": 2, "user": me, "time": 1.0],
                ["op": "tombstones/remove", "zone": uid, "name": "n1"], ["op": "tombstones/compact", "zone": uid, "seq": 1],
                ["op": "contacts/publish", "user": me, "name": identity.name, "email": identity.email ?? "", "signingKey": b64(Array(identity.signingKey.rawRepresentation)),
                 "boxKey": b64(Array(identity.boxKey.rawRepresentation)), "card": b64(Array(card.jsonData())), "cardCreated": card.created, "time": 1.0],
            ]
            #expect(Set(valid.map { $0["op"] as! String }).count == 24) // every write the API document lists
            func send(_ write: [String: Any]) async throws -> (status: Int, body: [String: Any]) {
                let body = try JSONSerialization.data(withJSONObject: ["operation": b64(SecureRandom.bytes(count: 16)), "writes": [write]])
                return try await fixture.signed(mallory.vault, "POST", RemoteAPI.Path.modify, body: body)
            }
            let optional: Set<String> = ["entries", "names", "uid", "label", "email", "parent", "sealed"]
            let numbers: Set<String> = ["head", "epoch", "storedSeq", "seq", "membershipSeq"]
            let bytes: Set<String> = ["zone", "body", "signature", "bytes", "secret", "signingKey", "boxKey", "card", "plain", "plainTypes"]
            let users: Set<String> = ["user", "owner", "creator", "modifier"]
            /// The mutants of one object's fields, each as the whole write it makes.
            func mutants(of object: [String: Any], in write: @escaping ([String: Any]) -> [String: Any]) -> [(String, [String: Any])] {
                var list = [(String, [String: Any])]()
                for (key, value) in object where key != "op" {
                    func with(_ v: Any?) -> [String: Any] { var o = object; o[key] = v; return write(o) }
                    list.append(("\(key) as another type", with(value is String || value is [Any] || value is [String: Any] ? 12 : "12")))
                    if value is Bool { list.append(("\(key) as a number", with(1.5))) }
                    if numbers.contains(key) {
                        list.append(("\(key) negative", with(-1)))
                        list.append(("\(key) past 64 bits", with(1e30)))
                        list.append(("\(key) fractional", with(2.5)))
                    }
                    if bytes.contains(key) { list.append(("\(key) not base64", with("%%%"))) }
                    if key == "zone" {
                        list.append(("zone short", with(b64([1, 2, 3]))))
                        list.append(("zone as a row id", with(1)))
                    }
                    if key == "signature" { list.append(("signature short", with(b64([1, 2, 3])))) }
                    if key == "body" { list.append(("body not an entry", with(b64([1, 2, 3])))) }
                    if users.contains(key) { list.append(("\(key) not a user id", with("mallory"))) }
                    if key == "users" { list.append(("users not user ids", with(["mallory"]))) }
                    if key == "recordType" || key == "type" { list.append(("\(key) not an identifier", with("9 lives"))) }
                    if key == "field" { list.append(("field not an identifier", with("a-b"))) }
                    if key == "name", object["op"] as? String != "contacts/publish" { list.append(("name empty", with(""))) }
                    // (keys/delete without a user deletes every member's keys.)
                    if !optional.contains(key), !(key == "user" && object["op"] as? String == "keys/delete") {
                        var missing = object
                        missing.removeValue(forKey: key)
                        list.append(("\(key) missing", write(missing)))
                    }
                }
                list.append(("an unknown field", write(object.merging(["zoneRow": ["uid": "AAAA"]]) { a, _ in a })))
                return list
            }
            var tried = 0
            for write in valid {
                let op = write["op"] as! String
                let sent = try await send(write)
                #expect(sent.status != 400 && sent.status != 500, "\(op) as sent: \(sent.status) \(sent.body)")
                var list = mutants(of: write) { $0 }
                if let stamp = write["version"] as? [String: Any] {
                    list += mutants(of: stamp) { var w = write; w["version"] = $0; return w }.map { ("version's \($0.0)", $0.1) }
                }
                for (what, mutant) in list {
                    let answer = try await send(mutant)
                    #expect(answer.status == 400, "\(op), \(what): \(answer.status) \(answer.body)")
                    #expect(answer.body["code"] as? String == "invalidArguments", "\(op), \(what)")
                    tried += 1
                }
            }
            #expect(tried > 200)
            // Nothing of it landed: Alice's zone is as she made it.
            #expect(try await alice.session.audit().findings.isEmpty)
            #expect(try await alice.session.privateDatabase.zones().map(\.id) == [zone])
        }
    }

    /// Every field of a valid read of each kind, made malformed (another type, negative, too
    /// large, the wrong length, missing), is a 400 `invalidArguments`, never a 500; so is a
    /// batch's zone row with a uid of the wrong length. A method a path does not take is a
    /// JSON 405.
    @Test func malformedReadsAre400() async throws {
        try await withServer(.sqlite) { fixture in
            let alice = try await fixture.user("Alice", "alice@example.com")
            let me = alice.vault.identity.userID
            let zone = try await alice.session.privateDatabase.createZone(named: "Kept")
            let row = try await alice.session.store.read { db in try alice.session.accessControl.zoneRow(db, zone) }
            let rowID = Self.wire(row)
            let uid = Data(repeating: 7, count: 16).base64EncodedString()
            let plan: [String: Any] = ["recordType": "Note", "predicates": [], "sorts": [], "limit": 10]
            let valid: [[String: Any]] = [
                ["op": "zones/lookup", "name": "Kept", "owner": me], ["op": "zones/list", "owner": me],
                ["op": "zones/exists", "uid": uid],
                ["op": "zones/listing", "user": me], ["op": "zones/shared", "user": me], ["op": "shares/zones", "uid": uid],
                ["op": "log/entries", "zone": rowID, "after": 0], ["op": "log/entry", "zone": rowID, "seq": 1],
                ["op": "log/hashes", "zone": rowID], ["op": "contacts/lookup", "user": me],
                ["op": "contacts/search", "email": "alice@example.com"], ["op": "contacts/list"],
                ["op": "records/lookup", "zone": rowID, "names": ["a"]],
                ["op": "records/page", "zone": rowID, "afterName": "", "limit": 10],
                ["op": "records/sealedPage", "zone": rowID, "seq": 1, "afterName": "", "limit": 10],
                ["op": "records/all", "zone": rowID], ["op": "records/children", "zone": rowID, "name": "a"],
                ["op": "records/childrenOfAny", "zone": rowID, "names": ["a"]], ["op": "records/ancestors", "zone": rowID, "name": "a"],
                ["op": "records/query", "zone": rowID, "plan": plan], ["op": "records/hasTombstones", "zone": rowID],
                ["op": "records/tombstones", "zone": rowID], ["op": "records/tombstoneCount", "zone": rowID, "seq": 1],
                ["op": "changes/zone", "zone": rowID, "after": 0, "afterName": "a", "limit": 10],
                ["op": "changes/database/counter"], ["op": "changes/database", "owner": me, "since": 0],
                ["op": "changes/database/shared", "user": me, "since": 0],
                ["op": "changes/database/deleted", "user": me, "since": 0, "owned": true],
            ]
            let optional: Set<String> = ["email", "name", "afterName"] // optional where contacts/search and changes/zone take them
            let numbers: Set<String> = ["after", "seq", "since", "limit"]
            var tried = 0
            for need in valid {
                let op = need["op"] as! String
                #expect(try await Self.read(fixture, alice.vault, [need]).status == 200, "\(op) as sent")
                var mutants = [(String, [String: Any])]()
                for (key, value) in need where key != "op" {
                    func with(_ v: Any?) -> [String: Any] { var n = need; n[key] = v; return n }
                    mutants.append(("\(key) as another type", with(value is String || value is [Any] || value is [String: Any] ? 12 : "12")))
                    if value is Bool { mutants.append(("\(key) as a number", with(1.5))) }
                    if numbers.contains(key) {
                        mutants.append(("\(key) negative", with(-1)))
                        mutants.append(("\(key) past 64 bits", with(1e30)))
                        mutants.append(("\(key) fractional", with(2.5)))
                    }
                    if key == "limit" { mutants.append(("limit 0", with(0))); mutants.append(("limit huge", with(Int64.max))) }
                    if key == "uid" || key == "zone" {
                        mutants.append(("\(key) short", with(Data([1, 2, 3]).base64EncodedString())))
                        mutants.append(("\(key) long", with(Data(repeating: 1, count: 64).base64EncodedString())))
                        mutants.append(("\(key) not base64", with("%%%")))
                        mutants.append(("\(key) as a row id", with(1)))
                    }
                    if key == "names" { mutants.append(("names of numbers", with([1, 2]))) }
                    if key == "plan" {
                        var p = plan
                        p["limit"] = -5
                        mutants.append(("plan limit negative", with(p)))
                        p = plan
                        p["recordType"] = ""
                        mutants.append(("plan without a type", with(p)))
                        p = plan
                        p["predicates"] = [["field": "x", "type": "int", "comparison": "==", "value": ["int": 1, "text": "a"]]]
                        mutants.append(("plan with a two-form value", with(p)))
                        p = plan
                        p.removeValue(forKey: "sorts")
                        mutants.append(("plan without sorts", with(p)))
                    }
                    if !(optional.contains(key) && (op == "contacts/search" || op == "changes/zone")) {
                        var missing = need
                        missing.removeValue(forKey: key)
                        mutants.append(("\(key) missing", missing))
                    }
                }
                mutants.append(("an unknown field", need.merging(["zoneRow": ["uid": "AAAA"]]) { a, _ in a }))
                for (what, mutant) in mutants {
                    let answer = try await Self.read(fixture, alice.vault, [mutant])
                    #expect(answer.status == 400, "\(op), \(what): \(answer.status) \(answer.body)")
                    #expect(answer.body["code"] as? String == "invalidArguments", "\(op), \(what)")
                    tried += 1
                }
            }
            #expect(tried > 100)
            // A batch whose zone uid is not 16 bytes, or that names a zone by a row as it once did.
            let short = Data([1, 2, 3]).base64EncodedString()
            let oldRow: [String: Any] = ["id": 1, "uid": rowID, "owner": me, "name": "Kept", "sequence": 1, "created": 0.0, "logFormat": 1]
            for write: [String: Any] in [["op": "zones/gone", "zone": short, "users": [me], "reason": "x"], ["op": "zones/back", "zone": short, "user": me],
                                         ["op": "zones/gone", "zoneRow": oldRow, "users": [me], "reason": "x"], ["op": "zones/touch", "zone": 1]] {
                let body = try JSONSerialization.data(withJSONObject: ["operation": Data(repeating: 9, count: 16).base64EncodedString(), "writes": [write]])
                let answer = try await fixture.signed(alice.vault, "POST", RemoteAPI.Path.modify, body: body)
                #expect(answer.status == 400, "\(answer.body)")
                #expect(answer.body["code"] as? String == "invalidArguments")
            }
            // Methods a path does not take.
            for (method, path) in [("GET", RemoteAPI.Path.read), ("PUT", RemoteAPI.Path.modify), ("DELETE", RemoteAPI.Path.read),
                                   ("POST", RemoteAPI.Path.health), ("POST", RemoteAPI.Path.wait)] {
                let answer = try await fixture.signed(alice.vault, method, path)
                #expect(answer.status == 405, "\(method) \(path)")
                #expect(answer.body["code"] as? String == "methodNotAllowed", "\(method) \(path)")
            }
            #expect(try await fixture.raw("GET", RemoteAPI.Path.health).status == 200)
        }
    }
}

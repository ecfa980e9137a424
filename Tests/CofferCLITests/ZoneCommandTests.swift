import Foundation
import Testing

/// `coffer zone create|list|delete|rekey`.
@Suite("coffer zone")
struct ZoneCommandTests {
    let team: Team

    init() throws { team = try Team() }

    /// `zone list --json` as `who`: the zones array.
    func zones(_ who: Who, sourceLocation: SourceLocation = #_sourceLocation) throws -> [[String: Any]] {
        let object = try team.json(who, ["zone", "list"], sourceLocation: sourceLocation)
        return try #require(object["zones"] as? [[String: Any]], "no 'zones' array: \(object)", sourceLocation: sourceLocation)
    }

    func zoneNames(_ who: Who, sourceLocation: SourceLocation = #_sourceLocation) throws -> [String] {
        try zones(who, sourceLocation: sourceLocation).map { $0["name"] as? String ?? "?" }.sorted()
    }

    // MARK: - create

    @Test("zone create makes an empty zone that zone list shows")
    func create() throws {
        #expect(try zoneNames(.alice) == [])
        try team.ok(.alice, ["zone", "create", "Notes"])
        #expect(try zoneNames(.alice) == ["Notes"])
        let zone = try #require(try zones(.alice).first)
        #expect(zone["owner"] as? String == team.id(.alice))
        #expect(zone["database"] as? String == "private")
        #expect(json(zone, "records") == .int(0))
        // A zone of the same name of another user is another zone.
        try team.ok(.bob, ["zone", "create", "Notes"])
        #expect(try zoneNames(.bob) == ["Notes"])
        #expect(try zones(.bob).first?["owner"] as? String == team.id(.bob))
    }

    @Test("zone create of an existing zone fails with 73 and changes nothing")
    func createExisting() throws {
        try team.createZone(.alice, "Notes")
        try team.put(.alice, "Notes", "n1", type: "Note", set: ["title=kept"])
        try team.fails(.alice, ["zone", "create", "Notes"], 73, mentioning: "Notes")
        #expect(try zoneNames(.alice) == ["Notes"])
        #expect(json(try team.get(.alice, "Notes", "n1")["values"] as? [String: Any] ?? [:], "title") == .string("kept"))
    }

    @Test("zone create refuses a bad name with 65 and creates nothing", arguments: [
        "_private", "_", "team@work", "@", "Zürich", "café", "日本", "tab\there", String(repeating: "z", count: 256), "",
    ])
    func createBadName(name: String) throws {
        try team.fails(.alice, ["zone", "create", name], 65)
        #expect(try zoneNames(.alice) == [])
    }

    @Test("zone names of 255 ASCII characters, with inner '_' and digits, are fine")
    func createGoodNames() throws {
        let long = String(repeating: "z", count: 255)
        for name in [long, "a_b", "Notes-2026", "x.y"] {
            try team.ok(.alice, ["zone", "create", name])
        }
        #expect(try zoneNames(.alice) == [long, "a_b", "Notes-2026", "x.y"].sorted())
    }

    @Test("COFFER_STORE names the store when --store is absent")
    func storeFromEnvironment() throws {
        let r = try team.run(.alice, ["zone", "create", "EnvZone"], storeFlag: false)
        expectSuccess(r)
        #expect(try zoneNames(.alice) == ["EnvZone"], "the zone did not go into the COFFER_STORE store")
        let list = try team.run(.alice, ["zone", "list", "--json"], storeFlag: false)
        expectSuccess(list)
        #expect((try jsonObject(list)["zones"] as? [[String: Any]])?.count == 1)
    }

    // MARK: - list

    @Test("zone list --json: zones I own are private, zones shared with me are shared")
    func listPrivateAndShared() throws {
        try team.createZone(.alice, "Notes")
        try team.createZone(.alice, "Work")
        try team.createZone(.bob, "Mine")
        try team.put(.alice, "Notes", "n1", type: "Note", set: ["t=1"])
        try team.put(.alice, "Notes", "n2", type: "Note", set: ["t=2"])
        try team.put(.bob, "Mine", "m1", type: "Note", set: ["t=3"])
        try team.share(.alice, "Notes", with: [(.bob, "read-only")])

        let alice = try zones(.alice).sorted { ($0["name"] as? String ?? "") < ($1["name"] as? String ?? "") }
        try #require(alice.count == 2, "alice sees \(alice)")
        #expect(alice.map { $0["name"] as? String } == ["Notes", "Work"])
        #expect(alice.allSatisfy { $0["database"] as? String == "private" && $0["owner"] as? String == team.id(.alice) })
        #expect(json(alice[0], "records") == .int(2))
        #expect(json(alice[1], "records") == .int(0))

        let bob = try zones(.bob)
        try #require(bob.count == 2, "bob sees \(bob)")
        let mine = try #require(bob.first { $0["database"] as? String == "private" })
        #expect(mine["name"] as? String == "Mine")
        #expect(mine["owner"] as? String == team.id(.bob))
        let shared = try #require(bob.first { $0["database"] as? String == "shared" }, "no shared zone for bob: \(bob)")
        #expect(shared["name"] as? String == "Notes")
        #expect(shared["owner"] as? String == team.id(.alice))
        #expect(json(shared, "records") == .int(2))

        // Carol, not invited, sees none of them.
        #expect(try zones(.carol).isEmpty)
    }

    @Test("a zone shared with me but not accepted yet is not in my list")
    func listPendingShare() throws {
        try team.createZone(.alice, "Notes")
        try team.share(.alice, "Notes", with: [(.bob, "read-only")], accept: false)
        #expect(try zones(.bob).isEmpty)
    }

    // MARK: - delete

    @Test("zone delete removes the zone and its records; then record get and zone delete fail with 66")
    func delete() throws {
        try team.createZone(.alice, "Notes")
        try team.createZone(.alice, "Keep")
        try team.put(.alice, "Notes", "n1", type: "Note", set: ["title=gone"], secret: ["pin=1"])
        try team.put(.alice, "Keep", "k1", type: "Note", set: ["title=kept"])
        try team.ok(.alice, ["zone", "delete", "Notes"])
        #expect(try zoneNames(.alice) == ["Keep"])
        try team.fails(.alice, ["record", "get", "Notes", "n1"], 66)
        try team.fails(.alice, ["zone", "delete", "Notes"], 66)
        try team.fails(.alice, ["record", "put", "Notes", "n2", "--type", "Note", "--set", "a=1"], 66)
        #expect(json(try team.get(.alice, "Keep", "k1")["values"] as? [String: Any] ?? [:], "title") == .string("kept"))
        // A zone made again under the same name starts empty.
        try team.createZone(.alice, "Notes")
        try team.fails(.alice, ["record", "get", "Notes", "n1"], 66)
    }

    @Test("zone delete of a zone that never existed fails with 66")
    func deleteMissing() throws {
        try team.fails(.alice, ["zone", "delete", "Nothing"], 66, mentioning: "Nothing")
    }

    @Test("only the owner deletes a shared zone; the participant gets 77 and the zone stays")
    func deleteAsParticipant() throws {
        try team.createZone(.alice, "Notes")
        try team.put(.alice, "Notes", "n1", type: "Note", set: ["t=1"])
        try team.share(.alice, "Notes", with: [(.bob, "read-write")])
        try team.fails(.bob, ["zone", "delete", "Notes@\(Who.alice.email)"], 77)
        #expect(try zoneNames(.alice) == ["Notes"])
        #expect(try team.get(.bob, "Notes@\(Who.alice.email)", "n1")["name"] as? String == "n1")
        // Deleting a shared zone ends the share: bob no longer finds it.
        try team.ok(.alice, ["zone", "delete", "Notes"])
        try team.fails(.bob, ["record", "get", "Notes@\(Who.alice.email)", "n1"], 66)
    }

    // MARK: - rekey

    @Test("zone rekey after a share remove re-seals the older records; they stay readable")
    func rekeyAfterRemove() throws {
        try team.createZone(.alice, "Notes")
        for i in 1...3 {
            try team.put(.alice, "Notes", "n\(i)", type: "Note", set: ["title=note \(i)"], secret: ["pin=secret-\(i)"])
        }
        let zoneRef = "Notes@\(Who.alice.name)"
        try team.share(.alice, "Notes", with: [(.bob, "read-only")])
        #expect(json(try team.get(.bob, zoneRef, "n1")["encryptedValues"] as? [String: Any] ?? [:], "pin") == .string("secret-1"))

        try team.ok(.alice, ["share", "remove", "Notes", "--participant", Who.bob.email])
        try team.fails(.bob, ["record", "get", zoneRef, "n1"], 77)
        // Written after the rotation: already under the new key.
        try team.put(.alice, "Notes", "n4", type: "Note", set: ["title=note 4"], secret: ["pin=secret-4"])

        let rekey = try team.json(.alice, ["zone", "rekey", "Notes"])
        #expect(rekey["zone"] as? String == "Notes")
        #expect(json(rekey, "resealed") == .int(3), "expected the count 3 (a JSON number) of records re-sealed: \(rekey)")

        var epochs = Set<JSON>()
        for i in 1...4 {
            let record = try team.get(.alice, "Notes", "n\(i)")
            #expect(json(record["values"] as? [String: Any] ?? [:], "title") == .string("note \(i)"))
            #expect(json(record["encryptedValues"] as? [String: Any] ?? [:], "pin") == .string("secret-\(i)"))
            epochs.insert(json(record, "keyEpoch"))
        }
        #expect(epochs.count == 1, "after rekey every record is under one key epoch: \(epochs)")

        // Nothing is left to re-seal.
        let again = try team.json(.alice, ["zone", "rekey", "Notes"])
        #expect(json(again, "resealed") == .int(0), "\(again)")
        try team.fails(.bob, ["record", "get", zoneRef, "n2"], 77)
    }

    @Test("zone rekey of a missing zone fails with 66; of someone else's zone with 77")
    func rekeyErrors() throws {
        try team.fails(.alice, ["zone", "rekey", "Nothing"], 66)
        try team.createZone(.alice, "Notes")
        try team.share(.alice, "Notes", with: [(.bob, "read-write")])
        try team.fails(.bob, ["zone", "rekey", "Notes@\(Who.alice.email)"], 77)
    }
}

import Foundation
import Synchronization
import Testing

/// `coffer record put|get|delete`: the field syntax, plain and secret fields, fixed field types,
/// change tags, merge, limits and errors.
@Suite("coffer record")
struct RecordCommandTests {
    let team: Team

    init() throws {
        team = try Team([.alice, .bob])
        try team.createZone(.alice, "Notes")
    }

    func values(_ record: [String: Any]) -> [String: Any] { record["values"] as? [String: Any] ?? [:] }
    func secrets(_ record: [String: Any]) -> [String: Any] { record["encryptedValues"] as? [String: Any] ?? [:] }
    func types(_ record: [String: Any]) -> [String: Any] { record["types"] as? [String: Any] ?? [:] }

    // MARK: - put / get

    @Test("record put and get keep every field type exactly")
    func everyType() throws {
        let blob = randomBytes(300)
        let blobPath = try team.sandbox.write("blob.bin", blob)
        let started = Date().addingTimeInterval(-5)
        let put = try team.put(.alice, "Notes", "n1", type: "Note", set: [
            "title=Hello, world",
            "equation=a=b=c",
            "unicode=héllo ✓ 日本",
            "empty=",
            "count:int=42",
            "negative:int=-9223372036854775808",
            "ratio:double=2.5",
            "small:double=-0.125",
            "done:bool=true",
            "off:bool=false",
            "when:date=2026-11-22T10:30:00Z",
            "day:date=2026-11-22",
            "precise:date=2026-11-22T10:30:00.250Z",
            "offset:date=2026-11-22T12:30:00+02:00",
            "blob:bytes=aGVsbG8=",
            "file:bytes=@\(blobPath)",
            "other:ref=n0",
            "nums:[int]=1,2,3",
            "tags:[string]=a\\,b,c,d\\\\e",
            "flags:[bool]=true,false,true",
            "ratios:[double]=1.5,2.25",
            "dates:[date]=2026-01-01,2026-01-02T03:04:05Z",
            "refs:[ref]=n2,n3",
        ], secret: [
            "pin=1234",
            "code:int=7",
            "words:[string]=x\\,y,z",
            "key:bytes=AAECAw==",
            "expiry:date=2030-05-06T07:08:09Z",
        ])
        let got = try team.get(.alice, "Notes", "n1")
        expectRecordShape(got)
        expectSavedShape(put, of: got)

        #expect(got["zone"] as? String == "Notes")
        #expect(got["name"] as? String == "n1")
        #expect(got["type"] as? String == "Note")
        #expect(got["creator"] as? String == team.id(.alice))
        #expect(got["modifier"] as? String == team.id(.alice))
        let created = try #require(isoDate(got["created"])), modified = try #require(isoDate(got["modified"]))
        #expect(created >= started && created <= Date().addingTimeInterval(5), "created \(created)")
        #expect(modified >= created)

        let v = values(got)
        #expect(Set(v.keys) == ["title", "equation", "unicode", "empty", "count", "negative", "ratio", "small", "done", "off", "when",
                                "day", "precise", "offset", "blob", "file", "other", "nums", "tags", "flags", "ratios", "dates", "refs"])
        #expect(json(v, "title") == .string("Hello, world"))
        #expect(json(v, "equation") == .string("a=b=c"))
        #expect(json(v, "unicode") == .string("héllo ✓ 日本"))
        #expect(json(v, "empty") == .string(""))
        #expect(json(v, "count") == .int(42))
        #expect(json(v, "negative") == .int(Int64.min))
        #expect(json(v, "ratio") == .double(2.5))
        #expect(json(v, "small") == .double(-0.125))
        #expect(json(v, "done") == .bool(true))
        #expect(json(v, "off") == .bool(false))
        #expect(isoDate(v["when"]) == utcDate(2026, 11, 22, 10, 30), "\(v["when"] ?? "nil")")
        #expect(isoDate(v["day"]) == utcDate(2026, 11, 22), "\(v["day"] ?? "nil")")
        #expect(isoDate(v["precise"]) == utcDate(2026, 11, 22, 10, 30, 0, milliseconds: 250), "\(v["precise"] ?? "nil")")
        #expect(isoDate(v["offset"]) == utcDate(2026, 11, 22, 10, 30), "\(v["offset"] ?? "nil")")
        #expect(json(v, "blob") == .string("aGVsbG8="))
        #expect(Data(base64Encoded: v["file"] as? String ?? "") == blob, "the @path bytes differ from the file")
        #expect(json(v, "other") == .string("n0"))
        #expect(json(v, "nums") == .array([.int(1), .int(2), .int(3)]))
        #expect(json(v, "tags") == .array([.string("a,b"), .string("c"), .string("d\\e")]))
        #expect(json(v, "flags") == .array([.bool(true), .bool(false), .bool(true)]))
        #expect(json(v, "ratios") == .array([.double(1.5), .double(2.25)]))
        #expect((v["dates"] as? [Any])?.map(isoDate) == [utcDate(2026, 1, 1), utcDate(2026, 1, 2, 3, 4, 5)], "\(v["dates"] ?? "nil")")
        #expect(json(v, "refs") == .array([.string("n2"), .string("n3")]))

        let s = secrets(got)
        #expect(Set(s.keys) == ["pin", "code", "words", "key", "expiry"])
        #expect(json(s, "pin") == .string("1234"))
        #expect(json(s, "code") == .int(7))
        #expect(json(s, "words") == .array([.string("x,y"), .string("z")]))
        #expect(json(s, "key") == .string("AAECAw=="))
        #expect(isoDate(s["expiry"]) == utcDate(2030, 5, 6, 7, 8, 9))

        // The documented `types` map tells the types apart where JSON cannot.
        let t = types(got)
        let expectedTypes: [String: String] = [
            "title": "string", "count": "int", "ratio": "double", "done": "bool", "when": "date", "blob": "bytes",
            "file": "bytes", "other": "ref", "nums": "[int]", "tags": "[string]", "flags": "[bool]", "ratios": "[double]",
            "dates": "[date]", "refs": "[ref]", "pin": "string", "code": "int", "key": "bytes", "expiry": "date",
        ]
        for (field, type) in expectedTypes {
            #expect(t[field] as? String == type, "field \(field): type \(t[field] ?? "nil"), expected \(type)")
        }
    }

    @Test("record get without --json shows the plain and decrypted values")
    func getText() throws {
        try team.put(.alice, "Notes", "n1", type: "Note", set: ["title=Visible-Title"], secret: ["pin=Decrypted-7731"])
        let r = try team.ok(.alice, ["record", "get", "Notes", "n1"])
        #expect(r.out.contains("Visible-Title"))
        #expect(r.out.contains("Decrypted-7731"))
        #expect(r.out.contains("n1"))
    }

    @Test("--parent names the parent record")
    func parent() throws {
        try team.put(.alice, "Notes", "n1", type: "Note", set: ["title=top"])
        let child = try team.put(.alice, "Notes", "n2", type: "Note", set: ["title=child"], extra: ["--parent", "n1"])
        #expect(child["parent"] as? String == "n1")
        #expect(try team.get(.alice, "Notes", "n2")["parent"] as? String == "n1")
        #expect(json(try team.get(.alice, "Notes", "n1"), "parent") == .null)
    }

    @Test("a field first saved plain cannot be saved secret (or with another type): 65, the record unchanged",
          arguments: [
            ["--secret", "title=Changed"],
            ["--set", "title:int=5"],
            ["--set", "title:[string]=a,b"],
            ["--secret", "count:int=5"],
            ["--set", "count=five"],
            ["--set", "count:double=1.5"],
            ["--set", "pin=plain now"],
            ["--secret", "pin:int=1"],
          ])
    func fixedFieldKinds(change: [String]) throws {
        try team.put(.alice, "Notes", "n1", type: "Note", set: ["title=Original", "count:int=1"], secret: ["pin=0000"])
        let before = try team.get(.alice, "Notes", "n1")
        try team.fails(.alice, ["record", "put", "Notes", "n1", "--type", "Note", "--merge"] + change, 65)
        try team.fails(.alice, ["record", "put", "Notes", "n1", "--type", "Note"] + change, 65)
        #expect(JSON(try team.get(.alice, "Notes", "n1")) == JSON(before), "the record changed after a refused save")
        // The kinds are fixed for the record type: another record of the type is held to them too.
        try team.fails(.alice, ["record", "put", "Notes", "n2", "--type", "Note"] + change, 65)
        try team.fails(.alice, ["record", "get", "Notes", "n2"], 66)
    }

    @Test("field kinds are fixed per record type: another type may use the same field name differently")
    func kindsPerType() throws {
        try team.put(.alice, "Notes", "n1", type: "Note", set: ["title=plain"])
        let other = try team.put(.alice, "Notes", "t1", type: "Task", set: ["title:int=3"])
        #expect(json(values(other), "title") == .int(3))
    }

    @Test("an empty list keeps the element type it was written with")
    func emptyTypedList() throws {
        let first = try team.put(.alice, "Notes", "n1", type: "Note", set: ["nums:[int]="])
        #expect(json(values(first), "nums") == .array([]))
        #expect(types(first)["nums"] as? String == "[int]", "an empty [int] list was saved as \(types(first)["nums"] ?? "nil")")
        // The field's type was fixed as [int] by that first save.
        let second = try team.run(.alice, team.putArguments("Notes", "n2", type: "Note", set: ["nums:[int]=1,2"]) + ["--json"])
        expectSuccess(second)
    }

    @Test("a refused save fixes no empty list's type (a field error, a stale --if-match)")
    func refusedSaveFixesNoEmptyList() throws {
        let first = try team.put(.alice, "Notes", "n1", type: "Note", set: ["title=x"])
        _ = try team.put(.alice, "Notes", "n1", type: "Note", set: ["title=y"])
        try team.fails(.alice, team.putArguments("Notes", "n4", type: "Note", set: ["e:[int]=", "title:int=1"]), 65)
        try team.fails(.alice, team.putArguments("Notes", "n1", type: "Note", set: ["e:[bool]=", "title=z"],
                                                 extra: ["--if-match", try #require(first["changeTag"] as? String)]), 75)
        let later = try team.put(.alice, "Notes", "n5", type: "Note", set: ["e:[string]=x"])
        #expect(types(later)["e"] as? String == "[string]")
    }

    @Test("--parent must name a record of the zone (66), not the record itself or one below it (65)")
    func parentChecks() throws {
        try team.fails(.alice, team.putArguments("Notes", "c2", type: "Note", set: ["t=x"], extra: ["--parent", "nosuch"]), 66, mentioning: "nosuch")
        try team.fails(.alice, team.putArguments("Notes", "c4", type: "Note", set: ["t=x"], extra: ["--parent", "c4"]), 65, mentioning: "its own parent")
        try team.put(.alice, "Notes", "a", type: "Note", set: ["t=x"])
        try team.put(.alice, "Notes", "b", type: "Note", set: ["t=x"], extra: ["--parent", "a"])
        try team.fails(.alice, team.putArguments("Notes", "a", type: "Note", set: ["t=x"], extra: ["--parent", "b"]), 65, mentioning: "cycle")
        try team.fails(.alice, ["record", "get", "Notes", "c2"], 66)
    }

    @Test("a field given twice with --set or with --secret is refused (65), not last-wins")
    func fieldGivenTwice() throws {
        try team.fails(.alice, team.putArguments("Notes", "n1", type: "Note", set: ["s=x", "s=y"]), 65, mentioning: "twice")
        try team.fails(.alice, team.putArguments("Notes", "n1", type: "Note", secret: ["p=1", "p=2"]), 65, mentioning: "twice")
        try team.fails(.alice, ["record", "get", "Notes", "n1"], 66, mentioning: "no record")
    }

    @Test("a missing zone says where to look (66)")
    func missingZoneHint() throws {
        try team.fails(.alice, ["record", "get", "Nope", "n1"], 66, mentioning: "coffer zone list")
    }

    @Test("record get's text form keeps each field on one line and quotes list items (no item passes for two)")
    func textFormIsUnambiguous() throws {
        try team.put(.alice, "Notes", "n1", type: "Note", set: ["body=line one\nline two", "tags:[string]=a,b\\,c,say \"hi\""],
                     secret: ["pin=12\u{1b}[2J34"])
        let text = try team.ok(.alice, ["record", "get", "Notes", "n1"]).out
        #expect(text.contains("  body (string) = line one\\nline two\n"))
        #expect(text.contains(#"  tags ([string]) = ["a", "b,c", "say \"hi\""]"# + "\n"))
        #expect(text.contains("  pin (string) = 12\\u{1b}[2J34\n"))
        #expect(!text.contains("\u{1b}"), "a control character reached the terminal")
    }

    // MARK: - writes print no secret

    @Test("record put prints encrypted fields by name only, in text and --json (a write prints no secret)")
    func putPrintsNoSecret() throws {
        let secret = "Put-Canary-\(UUID().uuidString)"
        let args = team.putArguments("Notes", "n1", type: "Note", set: ["title=Visible"],
                                     secret: ["pin=\(secret)", "list:[string]=a,\(secret)", "blob:bytes=\(Data(secret.utf8).base64EncodedString())"])
        let text = try team.ok(.alice, args)
        #expect(!text.out.contains(secret) && !text.out.contains(Data(secret.utf8).base64EncodedString()), "\(text)")
        #expect(text.out.contains("Encrypted fields:\n  blob (bytes)\n  list ([string])\n  pin (string)\n"), "\(text)")
        #expect(text.out.contains("  title (string) = Visible\n"), "\(text)")

        let json = try team.ok(.alice, args + ["--json"])
        #expect(!json.out.contains(secret) && !json.out.contains(Data(secret.utf8).base64EncodedString()), "\(json)")
        let object = try jsonObject(json)
        #expect(object["encryptedFields"] as? [String] == ["blob", "list", "pin"], "\(object)")
        #expect(object["encryptedValues"] == nil, "\(object)")
        // --merge and --if-match print the merged record the same way.
        let tag = try #require(object["changeTag"] as? String)
        let merged = try team.ok(.alice, team.putArguments("Notes", "n1", type: "Note", set: ["title=Again"], extra: ["--merge", "--if-match", tag, "--json"]))
        #expect(!merged.out.contains(secret), "\(merged)")
        #expect(try jsonObject(merged)["encryptedFields"] as? [String] == ["blob", "list", "pin"])
        // The command whose job it is shows it.
        #expect(try team.ok(.alice, ["record", "get", "Notes", "n1"]).out.contains(secret))
    }

    @Test("import, delete, rekey and share create --record print no secret value")
    func otherWritesPrintNoSecret() throws {
        let secret = "Write-Canary-\(UUID().uuidString)"
        let line = #"{"name": "i1", "type": "Note", "values": {"t": "x"}, "encryptedValues": {"pin": "\#(secret)"}}"#
        let file = try team.sandbox.write("import.jsonl", line + "\n")
        var runs = [try team.ok(.alice, ["record", "import", "Notes", file]), try team.ok(.alice, ["record", "import", "Notes", file, "--json"])]
        try team.put(.alice, "Notes", "n2", type: "Note", secret: ["pin=\(secret)"])
        runs.append(try team.ok(.alice, ["zone", "rekey", "Notes"]))
        runs.append(try team.ok(.alice, ["share", "create", "Notes", "--record", "i1", "--into", "Shared"]))
        runs.append(try team.ok(.alice, ["record", "delete", "Notes", "n2"]))
        for r in runs {
            #expect(!r.out.contains(secret) && !r.err.contains(secret), "\(r)")
        }
        #expect(try team.ok(.alice, ["record", "get", "Shared", "i1"]).out.contains(secret))
    }

    // MARK: - change tags

    @Test("--if-match with a stale tag fails with 75 and changes nothing; with the current tag it saves")
    func ifMatch() throws {
        let first = try team.put(.alice, "Notes", "n1", type: "Note", set: ["title=v1"])
        let tag1 = try #require(first["changeTag"] as? String)
        let second = try team.put(.alice, "Notes", "n1", type: "Note", set: ["title=v2"])
        let tag2 = try #require(second["changeTag"] as? String)
        #expect(tag1 != tag2, "a save must change the change tag")

        try team.fails(.alice, team.putArguments("Notes", "n1", type: "Note", set: ["title=v3"], extra: ["--if-match", tag1]), 75)
        try team.fails(.alice, team.putArguments("Notes", "n1", type: "Note", set: ["title=v3"], extra: ["--if-match", tag1, "--merge"]), 75)
        let unchanged = try team.get(.alice, "Notes", "n1")
        #expect(json(values(unchanged), "title") == .string("v2"))
        #expect(unchanged["changeTag"] as? String == tag2)

        let third = try team.put(.alice, "Notes", "n1", type: "Note", set: ["title=v3"], extra: ["--if-match", tag2])
        #expect(json(values(third), "title") == .string("v3"))
        let tag3 = try #require(third["changeTag"] as? String)
        #expect(tag3 != tag2)
        let fourth = try team.put(.alice, "Notes", "n1", type: "Note", set: ["extra=1"], extra: ["--if-match", tag3, "--merge"])
        #expect(json(values(fourth), "title") == .string("v3"))
        #expect(json(values(fourth), "extra") == .string("1"))
    }

    @Test("concurrent --merge saves of one record, new then existing, all exit 0 and all keep their fields")
    func concurrentMerges() throws {
        let team = self.team
        for round in 0..<2 { // round 0 creates the record, round 1 merges into it
            let statuses = Mutex<[Int32]>([])
            DispatchQueue.concurrentPerform(iterations: 8) { i in
                let r = try? team.run(.alice, team.putArguments("Notes", "shared-doc", type: "Doc", set: ["f\(round)\(i):int=\(i)"], extra: ["--merge"]))
                statuses.withLock { $0.append(r?.status ?? -1) }
            }
            #expect(statuses.withLock { $0 } == Array(repeating: 0, count: 8), "round \(round)")
        }
        let fields = Set((try team.get(.alice, "Notes", "shared-doc")["values"] as? [String: Any] ?? [:]).keys)
        #expect(fields == Set((0..<2).flatMap { round in (0..<8).map { "f\(round)\($0)" } }))
    }

    @Test("--merge keeps the fields not given; without it the record becomes exactly the fields given")
    func merge() throws {
        try team.put(.alice, "Notes", "n1", type: "Note", set: ["a=1", "b=2"], secret: ["s=keep-me"])
        let merged = try team.put(.alice, "Notes", "n1", type: "Note", set: ["b=20", "c=30"], extra: ["--merge"])
        #expect(JSON(values(merged)) == .object(["a": .string("1"), "b": .string("20"), "c": .string("30")]))
        let got = try team.get(.alice, "Notes", "n1")
        #expect(JSON(secrets(got)) == .object(["s": .string("keep-me")]))
        expectSavedShape(merged, of: got)

        let replaced = try team.put(.alice, "Notes", "n1", type: "Note", set: ["c=300"])
        #expect(JSON(values(replaced)) == .object(["c": .string("300")]))
        #expect(replaced["encryptedFields"] as? [String] == [])
        #expect(JSON(secrets(try team.get(.alice, "Notes", "n1"))) == .object([:]))
    }

    @Test("modifier is the user who saved last; creator stays")
    func creatorAndModifier() throws {
        try team.put(.alice, "Notes", "n1", type: "Note", set: ["t=1"])
        try team.share(.alice, "Notes", with: [(.bob, "read-write")])
        let byBob = try team.put(.bob, "Notes@\(Who.alice.email)", "n1", type: "Note", set: ["t=2"])
        #expect(byBob["creator"] as? String == team.id(.alice))
        #expect(byBob["modifier"] as? String == team.id(.bob))
        let seen = try team.get(.alice, "Notes", "n1")
        #expect(seen["creator"] as? String == team.id(.alice))
        #expect(seen["modifier"] as? String == team.id(.bob))
        #expect(seen["zone"] as? String == "Notes")
    }

    // MARK: - not found

    @Test("a missing zone is 66 for put and get; a missing record is 66 for get and delete")
    func notFound() throws {
        try team.fails(.alice, team.putArguments("Nowhere", "n1", type: "Note", set: ["a=1"]), 66, mentioning: "Nowhere")
        try team.fails(.alice, ["record", "get", "Nowhere", "n1"], 66, mentioning: "Nowhere")
        try team.fails(.alice, ["record", "get", "Notes", "missing"], 66, mentioning: "missing")
        try team.fails(.alice, ["record", "delete", "Notes", "missing"], 66, mentioning: "missing")
        try team.fails(.alice, ["record", "get", "Notes@nobody@example.com", "n1"], 66)
    }

    // MARK: - malformed values and limits

    @Test("a malformed field value fails with 65 and saves nothing", arguments: [
        "count:int=abc", "count:int=1.5", "count:int=99999999999999999999", "d:date=yesterday", "d:date=2026-13-45",
        "b:bytes=!!!", "f:bool=yes", "r:double=nan", "r:double=abc", "x:[int]=1,x", "x:[date]=2026-01-01,never",
        "t:unknown=1", "noequals", "=novalue", ":int=5",
    ])
    func malformedValue(field: String) throws {
        try team.fails(.alice, team.putArguments("Notes", "n1", type: "Note", set: [field]), 65)
        try team.fails(.alice, team.putArguments("Notes", "n1", type: "Note", secret: [field]), 65)
        try team.fails(.alice, ["record", "get", "Notes", "n1"], 66)
    }

    @Test("a malformed field fails the whole put: an existing record keeps its fields")
    func malformedKeepsRecord() throws {
        try team.put(.alice, "Notes", "n1", type: "Note", set: ["title=kept", "count:int=1"])
        let before = try team.get(.alice, "Notes", "n1")
        try team.fails(.alice, team.putArguments("Notes", "n1", type: "Note", set: ["title=new", "count:int=abc"]), 65)
        #expect(JSON(try team.get(.alice, "Notes", "n1")) == JSON(before))
    }

    @Test("a record over 1 MiB fails with 65 and is not saved; a 700 KB one is saved whole")
    func sizeLimit() throws {
        let big = try team.sandbox.write("big.bin", randomBytes(1_100_000))
        try team.fails(.alice, team.putArguments("Notes", "big", type: "Blob", set: ["data:bytes=@\(big)"]), 65)
        try team.fails(.alice, team.putArguments("Notes", "big", type: "Blob", secret: ["data:bytes=@\(big)"]), 65)
        try team.fails(.alice, ["record", "get", "Notes", "big"], 66)

        let content = randomBytes(700_000)
        let fits = try team.sandbox.write("fits.bin", content)
        try team.put(.alice, "Notes", "fits", type: "Blob", set: ["data:bytes=@\(fits)"])
        #expect(Data(base64Encoded: values(try team.get(.alice, "Notes", "fits"))["data"] as? String ?? "") == content)
        try team.put(.alice, "Notes", "sfits", type: "SBlob", secret: ["data:bytes=@\(fits)"])
        #expect(Data(base64Encoded: secrets(try team.get(.alice, "Notes", "sfits"))["data"] as? String ?? "") == content)
    }

    @Test("the size limit is the same for a plain and a secret field: 900,000 bytes fit in 1 MiB either way")
    func sizeLimitPlainAndSecretAlike() throws {
        let content = randomBytes(900_000)
        let file = try team.sandbox.write("900k.bin", content)
        let secret = try team.run(.alice, team.putArguments("Notes", "s", type: "SBlob", secret: ["data:bytes=@\(file)"]))
        let plain = try team.run(.alice, team.putArguments("Notes", "p", type: "PBlob", set: ["data:bytes=@\(file)"]))
        #expect(secret.status == plain.status, "the same 900,000 bytes: secret → \(secret.status), plain → \(plain.status)\n\(plain)")
        expectSuccess(plain)
        expectSuccess(secret)
    }

    @Test("@path of a missing file fails and saves nothing")
    func bytesFromMissingFile() throws {
        let missing = team.sandbox.path("missing.bin")
        let r = try team.run(.alice, team.putArguments("Notes", "n1", type: "Note", set: ["data:bytes=@\(missing)"]))
        expectFailure(r, 66, mentioning: missing)
        try team.fails(.alice, ["record", "get", "Notes", "n1"], 66)
    }

    @Test("an empty record name fails with 65")
    func emptyName() throws {
        try team.fails(.alice, team.putArguments("Notes", "", type: "Note", set: ["a=1"]), 65)
    }

    @Test("a record keeps its type: putting the name with another type fails with 65")
    func typeChange() throws {
        try team.put(.alice, "Notes", "n1", type: "Note", set: ["a=1"])
        try team.fails(.alice, team.putArguments("Notes", "n1", type: "Task", set: ["a=1"]), 65)
        #expect(try team.get(.alice, "Notes", "n1")["type"] as? String == "Note")
    }

    // MARK: - unlocking

    @Test("record commands need the vault: a wrong passphrase fails with 77, none with 64, and nothing is saved")
    func passphrase() throws {
        try team.put(.alice, "Notes", "n1", type: "Note", set: ["a=1"])
        let put = team.putArguments("Notes", "n2", type: "Note", set: ["a=2"])
        let wrong = ["COFFER_PASSPHRASE": CofferProcess.wrongPassphrase]
        expectFailure(try team.run(.alice, put, env: wrong), 77)
        expectFailure(try team.run(.alice, ["record", "get", "Notes", "n1"], env: wrong), 77)
        expectFailure(try team.run(.alice, ["record", "delete", "Notes", "n1"], env: wrong), 77)
        let args = put + ["--vault", team.vault(.alice), "--store", team.store]
        expectFailure(try team.sandbox.coffer(args), 64)
        try team.fails(.alice, ["record", "get", "Notes", "n2"], 66)
        #expect(try team.get(.alice, "Notes", "n1")["name"] as? String == "n1")
    }

    // MARK: - delete

    @Test("record delete removes the record; a second delete fails with 66")
    func delete() throws {
        try team.put(.alice, "Notes", "n1", type: "Note", set: ["a=1"])
        try team.put(.alice, "Notes", "n2", type: "Note", set: ["a=2"])
        try team.ok(.alice, ["record", "delete", "Notes", "n1"])
        try team.fails(.alice, ["record", "get", "Notes", "n1"], 66)
        try team.fails(.alice, ["record", "delete", "Notes", "n1"], 66)
        #expect(try team.get(.alice, "Notes", "n2")["name"] as? String == "n2")
    }

    @Test("record delete --if-match: a stale tag fails with 75 and keeps the record; the current tag deletes")
    func deleteIfMatch() throws {
        let first = try team.put(.alice, "Notes", "n1", type: "Note", set: ["a=1"])
        let stale = try #require(first["changeTag"] as? String)
        let second = try team.put(.alice, "Notes", "n1", type: "Note", set: ["a=2"])
        let current = try #require(second["changeTag"] as? String)
        try team.fails(.alice, ["record", "delete", "Notes", "n1", "--if-match", stale], 75)
        #expect(json(values(try team.get(.alice, "Notes", "n1")), "a") == .string("2"))
        try team.ok(.alice, ["record", "delete", "Notes", "n1", "--if-match", current])
        try team.fails(.alice, ["record", "get", "Notes", "n1"], 66)
    }
}

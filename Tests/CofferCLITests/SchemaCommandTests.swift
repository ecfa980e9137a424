import CofferTestSupport
import Foundation
import Testing
#if canImport(Glibc)
import Glibc
#endif

/// `coffer schema …`, the types `record put` takes from the schema, the notes of a write that
/// grows it, and `--where` operators: on a local store and through a server.
@Suite("coffer schema, and the schema in record put and query")
struct SchemaCommandTests {
    /// A team on a local store, or working through a `coffer serve` of the sandbox's.
    static func withTeam<R>(server: Bool, _ users: [Who] = [.alice, .bob], _ body: (Team) async throws -> R) async throws -> R {
        guard server else { return try await body(try Team(users)) }
        let sandbox = try Sandbox()
        let process = try await ServerProcess.start(store: sandbox.path("server.sqlite"), in: sandbox)
        do {
            let team = try Team(users, sandbox: sandbox, server: process.url)
            try team.exchangeCards(users)
            let result = try await body(team)
            await process.stop()
            return result
        } catch {
            await process.stop(SIGKILL)
            throw error
        }
    }

    static let schemaText = """
        RECORD TYPE Note (
            title STRING QUERYABLE,
            body  STRING ENCRYPTED,
            due   TIMESTAMP,
            n     INT64,
            done  BOOL,
            raw   BYTES,
            link  REFERENCE,
            tags  LIST<STRING>,
            pins  LIST<INT64> ENCRYPTED
        );
        RECORD TYPE Task ( title STRING )
        """

    @Test("show, export and import round trip; import is idempotent and refuses conflicts", arguments: [false, true])
    func roundTrip(server: Bool) async throws {
        try await Self.withTeam(server: server) { team in
            try team.createZone(.alice, "Notes")
            let file = team.sandbox.path("schema.txt")
            try Data(Self.schemaText.utf8).write(to: URL(fileURLWithPath: file))
            let imported = try team.json(.alice, ["schema", "import", "Notes", file])
            #expect((imported["added"] as? [Any])?.count == 10, "\(imported)")
            #expect(imported["unchanged"] as? Int == 0)
            // Again: nothing changes.
            let again = try team.json(.alice, ["schema", "import", "Notes", file])
            #expect((again["added"] as? [Any])?.isEmpty == true && again["unchanged"] as? Int == 10, "\(again)")
            let shown = try team.json(.alice, ["schema", "show", "Notes"])
            #expect(json(shown, "zone") == JSON("Notes"))
            let types = try #require(shown["types"] as? [[String: Any]])
            #expect(types.map { $0["name"] as? String } == ["Note", "Task"])
            let fields = try #require(types[0]["fields"] as? [[String: Any]])
            let due = try #require(fields.first { $0["name"] as? String == "due" })
            #expect(JSON(due) == JSON(["name": "due", "type": "date", "encrypted": false, "queryable": true] as [String: Any]))
            let pins = try #require(fields.first { $0["name"] as? String == "pins" })
            #expect(JSON(pins) == JSON(["name": "pins", "type": "[int]", "encrypted": true, "queryable": false] as [String: Any]))
            let only = try team.json(.alice, ["schema", "show", "Notes", "--type", "Task"])
            #expect((only["types"] as? [[String: Any]])?.map { $0["name"] as? String } == ["Task"])
            try team.fails(.alice, ["schema", "show", "Notes", "--type", "Nope"], 66, mentioning: "Nope")
            let text = try team.ok(.alice, ["schema", "show", "Notes"]).out
            #expect(text.contains("Note (9 fields)") && text.contains("pins"), "\(text)")
            // Exported, imported into another zone, exported again: the same file.
            let exported = try team.ok(.alice, ["schema", "export", "Notes"]).out
            #expect(exported.contains("RECORD TYPE Note (") && exported.contains("pins  LIST<INT64> ENCRYPTED"), "\(exported)")
            let out = team.sandbox.path("out.txt")
            try team.ok(.alice, ["schema", "export", "Notes", "--output", out])
            #expect(try String(contentsOfFile: out, encoding: .utf8) == exported)
            try team.fails(.alice, ["schema", "export", "Notes", "--output", out], 73)
            try team.createZone(.alice, "Copy")
            try team.ok(.alice, ["schema", "import", "Copy", out])
            #expect(try team.ok(.alice, ["schema", "export", "Copy"]).out == exported)
            // A conflicting file: 65 at its place, and nothing of it is added.
            let conflicting = team.sandbox.path("conflict.txt")
            try Data("RECORD TYPE Note (\n    fresh STRING,\n    due STRING\n)\n".utf8).write(to: URL(fileURLWithPath: conflicting))
            try team.fails(.alice, ["schema", "import", "Notes", conflicting], 65, mentioning: "\(conflicting):3:5: field 'due' of Note is plain TIMESTAMP")
            #expect(!(try team.ok(.alice, ["schema", "export", "Notes"]).out.contains("fresh")))
            try team.fails(.alice, ["schema", "validate", conflicting, "--zone", "Notes"], 65, mentioning: ":3:5:")
            // Only the owner imports, even a read-write participant.
            try team.share(.alice, "Notes", with: [(.bob, "read-write")])
            try team.fails(.bob, ["schema", "import", "Notes@alice@example.com", out], 77, mentioning: "owner")
            let bobsView = try team.json(.bob, ["schema", "show", "Notes@alice@example.com"])
            #expect((bobsView["types"] as? [Any])?.count == 2)
        }
    }

    @Test("validate checks a file alone, with one error line at LINE:COLUMN")
    func validate() throws {
        let sandbox = try Sandbox()
        let good = sandbox.path("good.txt"), bad = sandbox.path("bad.txt")
        try Data(Self.schemaText.utf8).write(to: URL(fileURLWithPath: good))
        // No vault, no store, no passphrase: a file alone.
        let ok = try sandbox.coffer(["schema", "validate", good])
        expectSuccess(ok)
        #expect(ok.out.contains("valid (2 record types, 10 fields)"), "\(ok)")
        let okJSON = try jsonObject(try sandbox.coffer(["schema", "validate", good, "--json"]))
        #expect(okJSON["valid"] as? Bool == true && okJSON["fields"] as? Int == 10)
        for (text, place, message) in [
            ("RECORD TYPE Note (\n  title STRNG\n)", "2:9", "unknown type 'STRNG'"),
            ("RECORD TYPE Note ( a STRING ENCRYPTED QUERYABLE )", "1:39", "cannot be QUERYABLE"),
            ("RECORD TYPE Note ( a STRING )\ngarbage", "2:1", "expected RECORD TYPE"),
            ("RECORD TYPE Note ( a STRING, a INT64 )", "1:30", "declared twice"),
        ] {
            try Data(text.utf8).write(to: URL(fileURLWithPath: bad))
            let r = try sandbox.coffer(["schema", "validate", bad])
            expectError(r, 65, mentioning: "error: \(bad):\(place): ")
            #expect(r.err.contains(message), "\(r)")
        }
        try Data([0xff, 0xfe]).write(to: URL(fileURLWithPath: bad))
        expectError(try sandbox.coffer(["schema", "validate", bad]), 65, mentioning: "UTF-8")
        expectError(try sandbox.coffer(["schema", "validate", sandbox.path("missing.txt")]), 66)
    }

    @Test("record put takes a field's type from the schema", arguments: [false, true])
    func putInfersTypes(server: Bool) async throws {
        try await Self.withTeam(server: server, [.alice]) { team in
            try team.createZone(.alice, "Notes")
            let file = team.sandbox.path("schema.txt")
            try Data(Self.schemaText.utf8).write(to: URL(fileURLWithPath: file))
            try team.ok(.alice, ["schema", "import", "Notes", file])
            try team.put(.alice, "Notes", "other", type: "Note", set: ["title=x"])
            let blob = team.sandbox.path("blob.bin")
            try Data([0, 1, 2]).write(to: URL(fileURLWithPath: blob))
            let put = try team.put(.alice, "Notes", "n1", type: "Note",
                                   set: ["title=Hello", "due=2026-01-01", "n=42", "done=true", "raw=@\(blob)", "link=other", "tags=a,b"],
                                   secret: ["body=sealed", "pins=1,2"])
            #expect(json(put, "newFields") == JSON([String]()) && json(put, "newType") == JSON(false), "\(put)")
            let got = try team.get(.alice, "Notes", "n1")
            #expect(json(got, "types") == JSON(["title": "string", "due": "date", "n": "int", "done": "bool", "raw": "bytes", "link": "ref",
                                                "tags": "[string]", "body": "string", "pins": "[int]"]))
            #expect(nested(got, "values", "n") == JSON(42) && nested(got, "values", "done") == JSON(true))
            #expect(nested(got, "values", "raw") == JSON("AAEC") && nested(got, "values", "tags") == JSON(["a", "b"]))
            #expect(isoDate((got["values"] as? [String: Any])?["due"]) == utcDate(2026, 1, 1))
            #expect(nested(got, "encryptedValues", "pins") == JSON([1, 2]))
            // A value that is not the schema's type: 65 naming the field and the type.
            try team.fails(.alice, team.putArguments("Notes", "n2", type: "Note", set: ["due=tomorrow"]), 65, mentioning: "field 'due' of Note as date")
            try team.fails(.alice, team.putArguments("Notes", "n2", type: "Note", set: ["n=many"]), 65, mentioning: "as int")
            let hidden = try team.fails(.alice, team.putArguments("Notes", "n2", type: "Note", secret: ["pins=one-secret"]), 65, mentioning: "pins")
            #expect(!hidden.err.contains("one-secret"), "a secret was shown\n\(hidden)")
            // An explicit type that disagrees is refused as before; one the schema agrees with saves.
            try team.fails(.alice, team.putArguments("Notes", "n2", type: "Note", set: ["n:string=many"]), 65)
            try team.put(.alice, "Notes", "n2", type: "Note", set: ["n:int=7"])
            // An empty list of a list field.
            try team.put(.alice, "Notes", "n3", type: "Note", set: ["tags="])
            #expect(nested(try team.get(.alice, "Notes", "n3"), "values", "tags") == JSON([String]()))
            // Queries find the typed values.
            let found = try team.json(.alice, ["record", "query", "Notes", "--type", "Note", "--where", "n >= 40"])
            #expect((found["records"] as? [[String: Any]])?.map { $0["name"] as? String } == ["n1"])
        }
    }

    @Test("a write that adds types or fields says so, with did-you-mean; --strict refuses it", arguments: [false, true])
    func newTypesAndFields(server: Bool) async throws {
        try await Self.withTeam(server: server, [.alice]) { team in
            try team.createZone(.alice, "Notes")
            let first = try team.run(.alice, team.putArguments("Notes", "a", type: "Note", set: ["title=x"], extra: ["--json"]))
            expectSuccess(first)
            #expect(schemaNotes(first) == [#"note: new record type "Note" in zone Notes, with field "title""#], "\(first)")
            #expect(json(try jsonObject(first), "newType") == JSON(true))
            let typo = try team.run(.alice, team.putArguments("Notes", "b", type: "Note", set: ["titel=y"], extra: ["--json"]))
            expectSuccess(typo)
            #expect(schemaNotes(typo) == [#"note: new field "titel" on type Note (did you mean "title"?)"#], "\(typo)")
            let object = try jsonObject(typo)
            #expect(json(object, "newFields") == JSON(["titel"]) && json(object, "newType") == JSON(false))
            let typeTypo = try team.run(.alice, team.putArguments("Notes", "c", type: "Nte", set: ["title=z"]))
            #expect(schemaNotes(typeTypo) == [#"note: new record type "Nte" in zone Notes, with field "title" (did you mean "Note"?)"#], "\(typeTypo)")
            // Nothing new, no note.
            let known = try team.run(.alice, team.putArguments("Notes", "d", type: "Note", set: ["title=w"]))
            #expect(known.status == 0 && known.err.isEmpty, "\(known)")
            // --strict refuses, and saves nothing.
            try team.fails(.alice, team.putArguments("Notes", "e", type: "Note", set: ["tittle=v"], extra: ["--strict"]), 65,
                           mentioning: #"new field "tittle" on type Note (did you mean "title"?)"#)
            try team.fails(.alice, ["record", "get", "Notes", "e"], 66)
            #expect(!(try team.ok(.alice, ["schema", "export", "Notes"]).out.contains("tittle")))
            try team.put(.alice, "Notes", "e", type: "Note", set: ["title=v"], extra: ["--strict"])
            // record import names what it adds; with --strict it saves nothing of such a file.
            let lines = team.sandbox.path("import.jsonl")
            try Data(#"{"name": "i1", "type": "Note", "values": {"title": "t", "body2": "b"}, "encryptedValues": {}}"#.utf8 + [0x0a])
                .write(to: URL(fileURLWithPath: lines))
            try team.fails(.alice, ["record", "import", "Notes", lines, "--strict"], 65, mentioning: #"new field "body2" on type Note"#)
            try team.fails(.alice, ["record", "get", "Notes", "i1"], 66)
            let imported = try team.run(.alice, ["record", "import", "Notes", lines, "--json"])
            expectSuccess(imported)
            #expect(schemaNotes(imported) == [#"note: new field "body2" on type Note"#], "\(imported)")
            #expect(json(try jsonObject(imported), "newFields") == JSON([["type": "Note", "field": "body2"]]))
        }
    }

    @Test("drop-field and drop-type: refused while used, allowed after, then redefinable; owner only", arguments: [false, true])
    func drops(server: Bool) async throws {
        try await Self.withTeam(server: server) { team in
            try team.createZone(.alice, "Notes")
            try team.put(.alice, "Notes", "a", type: "Note", set: ["title=x", "titel=typo"])
            try team.put(.alice, "Notes", "b", type: "Note", set: ["titel=typo"], secret: ["pin=1"])
            try team.share(.alice, "Notes", with: [(.bob, "read-write")])
            let bobs = "Notes@alice@example.com"
            try team.fails(.alice, ["schema", "drop-field", "Notes", "--type", "Note", "--field", "titel"], 65, mentioning: "2 records")
            try team.fails(.alice, ["schema", "drop-field", "Notes", "--type", "Note", "--field", "pin"], 65, mentioning: "1 record")
            try team.fails(.alice, ["schema", "drop-type", "Notes", "--type", "Note"], 65, mentioning: "2 records")
            try team.fails(.alice, ["schema", "drop-field", "Notes", "--type", "Note", "--field", "nope"], 66)
            try team.fails(.alice, ["schema", "drop-type", "Notes", "--type", "Nope"], 66)
            // A read-write participant may write records, not drop fields.
            try team.fails(.bob, ["schema", "drop-field", bobs, "--type", "Note", "--field", "titel"], 77, mentioning: "owner")
            try team.fails(.bob, ["schema", "drop-type", bobs, "--type", "Note"], 77, mentioning: "owner")
            // Once no record uses it, it goes; then the name takes another type.
            try team.put(.alice, "Notes", "a", type: "Note", set: ["title=x"])
            try team.put(.bob, bobs, "b", type: "Note", set: ["title=y"])
            let dropped = try team.json(.alice, ["schema", "drop-field", "Notes", "--type", "Note", "--field", "titel"])
            #expect(JSON(dropped) == JSON(["zone": "Notes", "type": "Note", "field": "titel"]))
            #expect(!(try team.ok(.alice, ["schema", "export", "Notes"]).out.contains("titel")))
            try team.put(.bob, bobs, "c", type: "Note", set: ["titel:int=3"])
            #expect(nested(try team.get(.alice, "Notes", "c"), "types", "titel") == JSON("int"))
            // A whole type.
            for name in ["a", "b", "c"] { try team.ok(.alice, ["record", "delete", "Notes", name]) }
            try team.ok(.alice, ["schema", "drop-type", "Notes", "--type", "Note"])
            #expect(try team.json(.alice, ["schema", "show", "Notes"])["types"] as? [Any] != nil)
            #expect((try team.json(.alice, ["schema", "show", "Notes"])["types"] as? [Any])?.isEmpty == true)
            try team.put(.alice, "Notes", "n", type: "Note", secret: ["title=now sealed"])
            #expect(nested(try team.get(.bob, bobs, "n"), "encryptedValues", "title") == JSON("now sealed"))
            for who in [Who.alice, .bob] { try team.ok(who, ["audit"]) }
        }
    }

    @Test("record query names an operator it does not have", arguments: [
        ("title =~ x", "unknown operator \"=~\" in --where 'title =~ x'; use one of = != < <= > >= ^="),
        ("title == x", "unknown operator \"==\""),
        ("title contains x", "unknown operator \"contains\""),
        ("title", "is not 'FIELD OP VALUE'"),
        ("= x", "is not 'FIELD OP VALUE'"),
    ])
    func unknownOperator(_ condition: String, _ message: String) throws {
        let team = try Team([.alice])
        try team.createZone(.alice, "Notes")
        try team.put(.alice, "Notes", "a", type: "Note", set: ["title=~x", "n:int=3"])
        try team.fails(.alice, ["record", "query", "Notes", "--type", "Note", "--where", condition], 64, mentioning: message)
        // The value after a space may begin with an operator's character.
        let found = try team.json(.alice, ["record", "query", "Notes", "--type", "Note", "--where", "title = ~x", "--where", "n>=3"])
        #expect((found["records"] as? [[String: Any]])?.count == 1)
    }
}

/// The value at `key` of the object at `outer` of `object`.
private func nested(_ object: [String: Any], _ outer: String, _ key: String) -> JSON {
    JSON((object[outer] as? [String: Any])?[key])
}

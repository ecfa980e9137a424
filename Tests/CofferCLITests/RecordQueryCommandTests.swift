import Foundation
import Testing

/// `coffer record query`: operators on plain fields, sorting, pages with a cursor, and refusals.
@Suite("coffer record query")
struct RecordQueryCommandTests {
    let team: Team

    /// Seven fruits of type Item: n (int) 1…7, name, cat (odd/even), score (double), a secret.
    static let fruits = ["apple", "banana", "apricot", "cherry", "blueberry", "avocado", "date"]

    init() throws {
        team = try Team([.alice])
        try team.createZone(.alice, "Q")
        for (i, fruit) in Self.fruits.enumerated() {
            let n = i + 1
            try team.put(.alice, "Q", "r\(n)", type: "Item",
                         set: ["n:int=\(n)", "name=\(fruit)", "cat=\(n % 2 == 0 ? "even" : "odd")", "score:double=\(Double(n) / 2)"],
                         secret: ["s=secret-\(n)"])
        }
        // Another type with the same fields: never in an Item query.
        try team.put(.alice, "Q", "o1", type: "Other", set: ["n:int=3", "name=apple"])
    }

    /// `record query Q --type Item ARGS --json`: the records array.
    func query(_ args: [String], type: String = "Item", sourceLocation: SourceLocation = #_sourceLocation) throws -> [[String: Any]] {
        let object = try team.json(.alice, ["record", "query", "Q", "--type", type] + args, sourceLocation: sourceLocation)
        return try #require(object["records"] as? [[String: Any]], "no 'records' array: \(object)", sourceLocation: sourceLocation)
    }

    func whereNames(_ condition: String, sourceLocation: SourceLocation = #_sourceLocation) throws -> Set<String> {
        Set(recordNames(try query(["--where", condition], sourceLocation: sourceLocation)))
    }

    static let operatorCases: [(String, Set<String>)] = [
        ("n = 3", ["r3"]),
        ("n != 3", ["r1", "r2", "r4", "r5", "r6", "r7"]),
        ("n < 3", ["r1", "r2"]),
        ("n <= 3", ["r1", "r2", "r3"]),
        ("n > 5", ["r6", "r7"]),
        ("n >= 5", ["r5", "r6", "r7"]),
        ("n=3", ["r3"]),
        ("n>=6", ["r6", "r7"]),
        ("n = 100", []),
        ("name = cherry", ["r4"]),
        ("name != cherry", ["r1", "r2", "r3", "r5", "r6", "r7"]),
        ("name < b", ["r1", "r3", "r6"]),
        ("name >= c", ["r4", "r7"]),
        ("name ^= ap", ["r1", "r3"]),
        ("name ^= b", ["r2", "r5"]),
        ("name ^= z", []),
        ("cat = even", ["r2", "r4", "r6"]),
        ("score > 2.5", ["r6", "r7"]),
        ("score <= 1", ["r1", "r2"]),
    ]

    @Test("each operator on plain fields", arguments: operatorCases)
    func operators(condition: String, expected: Set<String>) throws {
        #expect(try whereNames(condition) == expected, "--where '\(condition)'")
    }

    @Test("several --where conditions must all hold")
    func conjunction() throws {
        let records = try query(["--where", "n >= 2", "--where", "n < 6", "--where", "cat = odd"])
        #expect(Set(recordNames(records)) == ["r3", "r5"])
    }

    @Test("--json: records have the record get shape, with the secret decrypted")
    func jsonShape() throws {
        let records = try query(["--where", "n = 4"])
        try #require(records.count == 1)
        let record = records[0]
        expectRecordShape(record)
        #expect(JSON(record) == JSON(try team.get(.alice, "Q", "r4")), "a query result differs from record get")
        #expect(json(record["encryptedValues"] as? [String: Any] ?? [:], "s") == .string("secret-4"))
        #expect(json(record["values"] as? [String: Any] ?? [:], "n") == .int(4))
        #expect(record["type"] as? String == "Item")
    }

    @Test("a query with no matches is an empty records array")
    func noMatches() throws {
        #expect(try query(["--where", "n > 100"]).isEmpty)
        #expect(try query([], type: "Nothing").isEmpty)
    }

    // MARK: - sort

    @Test("--sort FIELD:desc and --sort FIELD order the results")
    func sort() throws {
        #expect(recordNames(try query(["--sort", "n:desc"])) == ["r7", "r6", "r5", "r4", "r3", "r2", "r1"])
        #expect(recordNames(try query(["--sort", "n"])) == ["r1", "r2", "r3", "r4", "r5", "r6", "r7"])
        #expect(recordNames(try query(["--sort", "name"])) == ["r1", "r3", "r6", "r2", "r5", "r4", "r7"])
        #expect(recordNames(try query(["--sort", "score:desc", "--where", "cat = even"])) == ["r6", "r4", "r2"])
        #expect(recordNames(try query(["--sort", "cat", "--sort", "n:desc"])) == ["r6", "r4", "r2", "r7", "r5", "r3", "r1"])
    }

    // MARK: - pages

    /// The cursor `record query` printed on stderr (`… --cursor TOKEN`), if any.
    func cursor(in stderr: String) -> String? {
        let words = stderr.split(whereSeparator: { $0 == " " || $0 == "\n" }).map(String.init)
        guard let at = words.firstIndex(of: "--cursor"), at + 1 < words.count else { return nil }
        return words[at + 1]
    }

    @Test("--limit prints a cursor on stderr; --cursor continues; all pages give every match exactly once")
    func pagesWithCursorOnStderr() throws {
        var seen = [String](), pages = [[String]]()
        var next: String?
        repeat {
            var args = ["record", "query", "Q", "--type", "Item", "--where", "n >= 2", "--sort", "n:desc", "--limit", "2"]
            if let next { args += ["--cursor", next] }
            let r = try team.run(.alice, args)
            expectSuccessWithNotes(r)
            try #require(r.status == 0)
            // The first word of each result line is the record name.
            let page = r.outLines.compactMap { $0.split(separator: " ").first.map(String.init) }.filter { $0.hasPrefix("r") }
            pages.append(page)
            seen += page
            next = cursor(in: r.err)
            if next != nil { #expect(page.count == 2, "a page before the last is full: \(page)\n\(r)") }
            try #require(pages.count <= 10, "the cursor never ends")
        } while next != nil
        #expect(seen == ["r7", "r6", "r5", "r4", "r3", "r2"], "pages \(pages)")
        #expect(pages.first == ["r7", "r6"])
    }

    @Test("--limit with --json: cursor and moreComing; following the cursor yields every match exactly once")
    func pagesJSON() throws {
        var seen = [String]()
        var cursor: String?
        var pages = 0
        repeat {
            var args = ["record", "query", "Q", "--type", "Item", "--sort", "n", "--limit", "3"]
            if let cursor { args += ["--cursor", cursor] }
            let page = try team.json(.alice, args)
            let records = try #require(page["records"] as? [[String: Any]])
            #expect(records.count <= 3)
            seen += recordNames(records)
            cursor = page["cursor"] as? String
            #expect(page["moreComing"] as? Bool == (cursor != nil), "\(page)")
            if pages == 0 {
                #expect(recordNames(records) == ["r1", "r2", "r3"])
                #expect(cursor != nil, "the first page of 7 with --limit 3 must have a cursor")
            }
            pages += 1
            try #require(pages <= 10, "the cursor never ends")
        } while cursor != nil
        #expect(seen == ["r1", "r2", "r3", "r4", "r5", "r6", "r7"])
    }

    @Test("--limit larger than the matches: no cursor")
    func limitLargerThanMatches() throws {
        let r = try team.run(.alice, ["record", "query", "Q", "--type", "Item", "--where", "cat = even", "--limit", "5"])
        expectSuccess(r)
        #expect(cursor(in: r.err) == nil)
        let object = try team.json(.alice, ["record", "query", "Q", "--type", "Item", "--where", "cat = even", "--limit", "5"])
        #expect(json(object, "cursor") == .null)
        #expect(object["moreComing"] as? Bool == false)
        #expect((object["records"] as? [Any])?.count == 3)
    }

    @Test("--limit outside 1...10000 is a bad command line (64), for record query and changes", arguments: ["0", "-1", "10001", "x"])
    func limitOutOfRange(limit: String) throws {
        try team.fails(.alice, ["record", "query", "Q", "--type", "Item", "--limit", limit], 64, mentioning: "limit")
        try team.fails(.alice, ["changes", "Q", "--limit", limit], 64, mentioning: "limit")
    }

    @Test("a malformed cursor fails with 65")
    func badCursor() throws {
        try team.fails(.alice, ["record", "query", "Q", "--type", "Item", "--limit", "2", "--cursor", "garbage"], 65)
    }

    // MARK: - refusals

    @Test("a query on an encrypted field fails with 65 (not an empty result)", arguments: ["s = secret-1", "s != x", "s ^= secret"])
    func encryptedField(condition: String) throws {
        try team.fails(.alice, ["record", "query", "Q", "--type", "Item", "--where", condition], 65, mentioning: "s")
        try team.fails(.alice, ["record", "query", "Q", "--type", "Item", "--where", condition, "--json"], 65)
    }

    @Test("sorting on an encrypted field fails with 65")
    func sortEncrypted() throws {
        try team.fails(.alice, ["record", "query", "Q", "--type", "Item", "--sort", "s"], 65)
    }

    @Test("an unknown field fails with 65", arguments: ["color = red", "N = 3", "n2 = 3"])
    func unknownField(condition: String) throws {
        try team.fails(.alice, ["record", "query", "Q", "--type", "Item", "--where", "n > 0", "--where", condition], 65)
    }

    @Test("sorting on an unknown field fails with 65")
    func sortUnknown() throws {
        try team.fails(.alice, ["record", "query", "Q", "--type", "Item", "--sort", "color"], 65)
    }

    @Test("a value that is not of the field's type fails with 65", arguments: ["n = abc", "n > 1.5", "score < x"])
    func wrongValueType(condition: String) throws {
        try team.fails(.alice, ["record", "query", "Q", "--type", "Item", "--where", condition], 65)
    }

    @Test("a query in a missing zone fails with 66")
    func missingZone() throws {
        try team.fails(.alice, ["record", "query", "Nowhere", "--type", "Item"], 66)
    }
}

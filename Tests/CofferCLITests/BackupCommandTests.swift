import CofferTestSupport
import Foundation
import Testing
#if canImport(Glibc)
import Glibc
#endif

/// `coffer backup` and `coffer restore`: a sealed snapshot of everything a user owns or reads,
/// put back into an empty store exactly as it was; and export/import for migration.
@Suite("coffer backup / restore, export --all, import --create-zone and --resume")
struct BackupCommandTests {
    // MARK: - Helpers

    /// Runs coffer as `who` on the store (or server) `target` instead of the team's.
    @discardableResult
    static func run(_ team: Team, _ who: Who, on target: String, _ arguments: [String], env: [String: String] = [:]) throws -> CofferResult {
        let flag = target.hasPrefix("http") ? "--server" : "--store"
        return try team.sandbox.coffer(arguments + ["--vault", team.vault(who), flag, target], env: withPassphrase.merging(env) { $1 })
    }

    /// `record get --json` of every record of `zone`, by name, on `target`.
    static func records(_ team: Team, _ who: Who, on target: String, zone: String) throws -> [String: JSON] {
        let export = try run(team, who, on: target, ["record", "export", zone])
        expectSuccessWithNotes(export)
        var result = [String: JSON]()
        for line in try jsonLines(export) {
            let name = try #require(line["name"] as? String)
            let got = try run(team, who, on: target, ["record", "get", zone, name, "--json"])
            expectSuccess(got)
            result[name] = JSON(try jsonObject(got))
        }
        return result
    }

    /// Alice's Notes (records with plain and secret fields, a parent, a deletion, one written by
    /// Bob) shared read-write with Bob, who owns Ideas.
    static func fill(_ team: Team) throws {
        try team.createZone(.alice, "Notes")
        try team.put(.alice, "Notes", "n1", type: "Note", set: ["title=Shopping", "count:int=3", "when:date=2026-11-22T10:30:00.250Z"],
                     secret: ["body=eggs, milk"])
        try team.put(.alice, "Notes", "n2", type: "Note", set: ["title=Child"], secret: ["body=inner"], extra: ["--parent", "n1"])
        try team.put(.alice, "Notes", "gone", type: "Note", set: ["title=Temporary"])
        try team.ok(.alice, ["record", "delete", "Notes", "gone"])
        if team.server != nil { try team.exchangeCards([.alice, .bob]) }
        try team.share(.alice, "Notes", with: [(.bob, "read-write")])
        try team.put(.bob, "Notes@\(team.id(.alice))", "fromBob", type: "Note", set: ["title=Bob's"], secret: ["body=by bob"])
        try team.createZone(.bob, "Ideas")
        try team.put(.bob, "Ideas", "i1", type: "Idea", set: ["title=Mine"], secret: ["body=bob only"])
    }

    func fileMode(_ path: String) throws -> Int {
        try #require(try FileManager.default.attributesOfItem(atPath: path)[.posixPermissions] as? Int)
    }

    // MARK: - Backup and restore, locally

    @Test("a restore killed at random points leaves every zone or none, and running it again finishes it")
    func restoreKilledIsAllOrNothing() async throws {
        let team = try Team([.alice])
        for zone in ["A", "B", "C", "D"] {
            try team.createZone(.alice, zone)
            for i in 0..<30 { try team.put(.alice, zone, "r\(i)", type: "Note", set: ["title=\(zone)\(i)"], secret: ["body=secret \(i)"]) }
        }
        let file = team.sandbox.path("all.backup")
        expectSuccess(try Self.run(team, .alice, on: team.store, ["backup", "--output", file]))
        let executable = try CofferProcess.executableURL().path
        var seen = Set<Int>()
        for attempt in 0..<12 {
            let target = team.sandbox.path("killed-\(attempt).sqlite")
            let restore = try ChildProcess.Running(executable, ["restore", file, "--yes", "--vault", team.vault(.alice), "--store", target],
                                                   environment: team.sandbox.baseEnvironment.merging(withPassphrase) { $1 },
                                                   directory: team.sandbox.root.path, timeout: 120)
            try await Task.sleep(for: .milliseconds(Int.random(in: 0...400)))
            _ = await restore.stop(SIGKILL)
            // Killed before the store's tables were made, the file holds no zone table.
            func count(_ sql: String) throws -> Int { Int(try SQLiteShell.run(target, sql).trimmingCharacters(in: .whitespacesAndNewlines)) ?? -1 }
            let exists = FileManager.default.fileExists(atPath: target)
            let made = try exists && count("SELECT count(*) FROM sqlite_schema WHERE name = 'zone'") == 1
            let zones = made ? try count("SELECT count(*) FROM zone") : 0
            #expect(zones == 0 || zones == 4, "a killed restore left \(zones) of 4 zones")
            seen.insert(zones)
            if zones == 0 {
                // Again, to the end.
                expectSuccess(try Self.run(team, .alice, on: target, ["restore", file, "--yes"]))
            }
            let list = try Self.run(team, .alice, on: target, ["zone", "list", "--json"])
            let listed = try jsonObject(list)["zones"] as? [Any]
            #expect(list.status == 0 && listed?.count == 4, "\(list)")
        }
        print("restores killed: zone counts seen \(seen.sorted())")
    }

    @Test("backup → restore into a new store: audit clean (but for a zone the backup lacks), records, tags, creators and dates identical; the shared zone works for both users")
    func roundTripLocal() throws {
        let team = try Team([.alice, .bob])
        try Self.fill(team)
        let file = team.sandbox.path("alice.backup")
        let made = try team.json(.alice, ["backup", "--output", file])
        #expect(made["zones"] as? Int == 1 && made["records"] as? Int == 3, "\(made)")
        #expect((made["bytes"] as? Int ?? 0) > 0 && made["contacts"] as? Int == 2, "\(made)")
        #expect(try fileMode(file) == 0o600)
        // Sealed: no plain value or name is in the file.
        let bytes = try team.sandbox.read(file)
        for text in ["eggs, milk", "Shopping", "Notes", "fromBob"] {
            #expect(bytes.range(of: Data(text.utf8)) == nil, "'\(text)' is readable in the backup")
        }
        // Bob's backup holds his zone and the zone Alice shares with him.
        let bobFile = team.sandbox.path("bob.backup")
        #expect(try team.json(.bob, ["backup", "--output", bobFile])["zones"] as? Int == 2)

        let restored = team.sandbox.path("restored.sqlite")
        let r = try Self.run(team, .alice, on: restored, ["restore", file, "--json"])
        expectSuccess(r)
        let summary = try jsonObject(r)
        #expect(summary["tookStoreID"] as? Bool == true && summary["records"] as? Int == 3, "\(summary)")
        // Identical records, as each user reads them, and a clean audit for both.
        #expect(try Self.records(team, .alice, on: restored, zone: "Notes") == Self.records(team, .alice, on: team.store, zone: "Notes"))
        let shared = "Notes@\(team.id(.alice))"
        let bobsOld = try Self.records(team, .bob, on: team.store, zone: shared)
        let bobsNew = try Self.records(team, .bob, on: restored, zone: shared)
        #expect(bobsNew == bobsOld)
        if case .object(let fromBob)? = bobsNew["fromBob"] { #expect(fromBob["creator"] == JSON(team.id(.bob))) } else { Issue.record("no fromBob") }
        let aliceAudit = try Self.run(team, .alice, on: restored, ["audit", "--json"])
        expectSuccess(aliceAudit)
        #expect(objects(try jsonObject(aliceAudit), "findings").isEmpty, "\(aliceAudit)")
        // Bob's audit is clean but for his own zone "Ideas", which Alice's backup does not hold:
        // the restored store (the old store's id) does not have it, and his marks say he saw it.
        let bobAudit = try Self.run(team, .bob, on: restored, ["audit", "--json"])
        #expect(bobAudit.status == 1, "\(bobAudit)")
        let bobFindings = objects(try jsonObject(bobAudit), "findings")
        #expect(bobFindings.count == 1 && bobFindings.first?["owner"] as? String == team.id(.bob)
                && (bobFindings.first?["message"] as? String)?.contains("is not in this store") == true, "\(bobAudit)")
        // The change feed (deleted names, tokens that name the store) is as before; the share URL too.
        let changes = try Self.run(team, .alice, on: restored, ["changes", "Notes", "--json"])
        expectSuccess(changes)
        #expect(JSON(try jsonObject(changes)) == JSON(try team.json(.alice, ["changes", "Notes"])))
        let url = try Self.run(team, .alice, on: restored, ["share", "url", "Notes"])
        #expect(url.out == (try team.ok(.alice, ["share", "url", "Notes"])).out)
        // Bob's backup, restored into a store of its own, holds Alice's zone for him too.
        let bobs = team.sandbox.path("bob-restored.sqlite")
        expectSuccess(try Self.run(team, .bob, on: bobs, ["restore", bobFile]))
        #expect(try Self.records(team, .bob, on: bobs, zone: shared) == bobsOld)
        #expect(try Self.records(team, .bob, on: bobs, zone: "Ideas") == Self.records(team, .bob, on: team.store, zone: "Ideas"))
    }

    @Test("a tampered backup (a byte flipped, cut short, grown) is refused with 65 and writes nothing; another user's vault is refused with 77")
    func tamperedAndForeign() throws {
        let team = try Team([.alice, .bob])
        try team.createZone(.alice, "Notes")
        try team.put(.alice, "Notes", "n1", type: "Note", set: ["title=One"], secret: ["body=secret"])
        let file = team.sandbox.path("alice.backup")
        try team.ok(.alice, ["backup", "--output", file])
        let good = [UInt8](try team.sandbox.read(file))
        var variants = [(String, [UInt8])]()
        for offset in [9, 20, 60, 100, 200, good.count / 2, good.count - 70, good.count - 1] {
            var flipped = good
            flipped[offset] ^= 0x01
            variants.append(("byte \(offset) flipped", flipped))
        }
        variants.append(("cut short", Array(good.dropLast(1))))
        variants.append(("cut to half", Array(good.prefix(good.count / 2))))
        variants.append(("grown", good + [0]))
        for (what, bytes) in variants {
            let path = try team.sandbox.write("tampered.backup", Data(bytes))
            let target = team.sandbox.path("t.sqlite")
            let r = try Self.run(team, .alice, on: target, ["restore", path, "--yes"])
            expectFailure(r, 65)
            #expect(!team.sandbox.exists(target), "\(what): a store was made\n\(r)")
        }
        let notBackup = try team.sandbox.write("not.backup", "hello")
        expectFailure(try Self.run(team, .alice, on: team.sandbox.path("t.sqlite"), ["restore", notBackup]), 65, mentioning: "not a Coffer backup")
        // Bob's vault does not open Alice's backup.
        let r = try Self.run(team, .bob, on: team.sandbox.path("t.sqlite"), ["restore", file, "--yes"])
        expectFailure(r, 77, mentioning: "vault that made it")
        #expect(!team.sandbox.exists(team.sandbox.path("t.sqlite")))
        // A missing backup file is 66.
        expectFailure(try Self.run(team, .alice, on: team.sandbox.path("t.sqlite"), ["restore", team.sandbox.path("nowhere")]), 66)
    }

    @Test("restore into a store that has zones is refused with 73; --output onto a file is 73 unless --force")
    func nonEmptyAndOverwrite() throws {
        let team = try Team([.alice, .bob])
        try team.createZone(.alice, "Notes")
        let file = team.sandbox.path("alice.backup")
        try team.ok(.alice, ["backup", "--output", file])
        try team.fails(.alice, ["backup", "--output", file], 73, mentioning: "--force")
        let before = try team.sandbox.read(file)
        try team.ok(.alice, ["backup", "--output", file, "--force"])
        #expect(try team.sandbox.read(file) != before, "--force wrote a new backup")
        #expect(try fileMode(file) == 0o600)
        // The team's own store has the zone; another user's zone in a store counts too.
        try team.fails(.alice, ["restore", file], 73, mentioning: "not empty")
        let other = team.sandbox.path("other.sqlite")
        expectSuccess(try Self.run(team, .bob, on: other, ["zone", "create", "BobsOwn"]))
        expectFailure(try Self.run(team, .alice, on: other, ["restore", file]), 73, mentioning: "not empty")
        // A store the backup was restored into: again, the restore finishes with nothing to
        // write; once its zone was deleted there, it is refused (the store's record of the
        // restore would otherwise pass for the zones being there).
        let restored = team.sandbox.path("restored.sqlite")
        expectSuccess(try Self.run(team, .alice, on: restored, ["restore", file]))
        let again = try Self.run(team, .alice, on: restored, ["restore", file])
        expectSuccessWithNotes(again)
        #expect(again.err.contains("nothing was written again"), "\(again)")
        expectSuccess(try Self.run(team, .alice, on: restored, ["zone", "delete", "Notes", "--yes"]))
        let deleted = try Self.run(team, .alice, on: restored, ["restore", file, "--yes"])
        #expect(deleted.status == 73 && deleted.out.isEmpty && deleted.err.contains("error: this backup was restored into this store before"), "\(deleted)")
        // Files left by the failed writes: none.
        let leftovers = try FileManager.default.contentsOfDirectory(atPath: team.sandbox.root.path).filter { $0.contains(".tmp-") }
        #expect(leftovers.isEmpty, "\(leftovers)")
    }

    @Test("an older backup is a rollback: refused without a terminal or --yes (64, nothing written); with --yes the marks are reset and reads work")
    func rollback() throws {
        let team = try Team([.alice])
        try team.createZone(.alice, "Notes")
        try team.put(.alice, "Notes", "n1", type: "Note", set: ["title=One"])
        let file = team.sandbox.path("old.backup")
        try team.ok(.alice, ["backup", "--output", file])
        for i in 2...4 { try team.put(.alice, "Notes", "n\(i)", type: "Note", set: ["title=\(i)"]) }
        let target = team.sandbox.path("restored.sqlite")
        let refused = try Self.run(team, .alice, on: target, ["restore", file])
        expectFailure(refused, 64, mentioning: "--yes")
        #expect(refused.err.contains("Notes: backup at sequence 2, you last saw 5 (3 entries older)"), "\(refused)")
        #expect(!team.sandbox.exists(target), "a refused restore made a store")
        // Declined on a terminal: nothing written either.
        let executable = try CofferProcess.executableURL().path
        func onTerminal(typing answer: String) throws -> CofferResult {
            let command = [executable, "restore", file, "--vault", team.vault(.alice), "--store", target].joined(separator: " ")
            return try team.sandbox.shell("(sleep 1; printf '%s\\n' \"$1\") | script -qec \"$0\" /dev/null", [command, answer], env: withPassphrase)
        }
        let declined = try onTerminal(typing: "n")
        #expect(declined.status == 64 && declined.out.contains("[y/N]"), "\(declined)")
        #expect(!team.sandbox.exists(target))
        let accepted = try onTerminal(typing: "y")
        #expect(accepted.status == 0 && accepted.out.contains("marks reset to sequence 2"), "\(accepted)")
        // The restored store reads without a rollback error, and audits clean.
        #expect(try Self.records(team, .alice, on: target, zone: "Notes").keys.sorted() == ["n1"])
        expectSuccess(try Self.run(team, .alice, on: target, ["record", "get", "Notes", "n1"]))
        expectSuccess(try Self.run(team, .alice, on: target, ["audit"]))
        // The old store, now newer than the marks, still reads (its log extends the backup's).
        try team.ok(.alice, ["record", "get", "Notes", "n4"])
        // --yes without a terminal, into another new store.
        let second = team.sandbox.path("second.sqlite")
        // (Reading the old store took the marks to its head again.)
        let again = try Self.run(team, .alice, on: second, ["restore", file, "--yes", "--json"])
        expectSuccessWithNotes(again)
        #expect(again.err.contains("warning: Notes: backup at sequence 2, you last saw 5 (3 entries older)"), "\(again)")
        #expect(objects(try jsonObject(again), "zones").first?["marksReset"] as? Bool == true)
        // A backup at what the user saw is no rollback: nothing to confirm, the marks stay.
        let current = team.sandbox.path("current.backup")
        try team.ok(.alice, ["backup", "--output", current])
        let third = try Self.run(team, .alice, on: team.sandbox.path("third.sqlite"), ["restore", current])
        expectSuccess(third)
        #expect(third.out.contains("Restored Notes: 5 log entries, 4 records (backup at sequence 5, you last saw 5)."), "\(third)")
    }

    // MARK: - Through a server

    @Test("through a server: backup, then restore onto another server; audit clean, records identical; a store with your zones is refused")
    func throughServer() async throws {
        let sandbox = try Sandbox()
        let first = try await ServerProcess.start(store: sandbox.path("first.sqlite"), in: sandbox)
        let second = try await ServerProcess.start(store: sandbox.path("second.sqlite"), in: sandbox)
        defer {
            kill(first.process.pid, SIGKILL)
            kill(second.process.pid, SIGKILL)
        }
        let team = try Team([.alice, .bob], sandbox: sandbox, server: first.url)
        try Self.fill(team)
        let file = sandbox.path("alice.backup")
        try team.ok(.alice, ["backup", "--output", file])
        #expect(try fileMode(file) == 0o600)
        let bobFile = sandbox.path("bob.backup")
        try team.ok(.bob, ["backup", "--output", bobFile])

        let r = try Self.run(team, .alice, on: second.url, ["restore", file, "--json"])
        expectSuccess(r)
        #expect(try jsonObject(r)["tookStoreID"] as? Bool == false)
        #expect(try Self.records(team, .alice, on: second.url, zone: "Notes") == Self.records(team, .alice, on: first.url, zone: "Notes"))
        // Bob, on the new server: the shared zone as before; his own zone back from his backup,
        // while Alice's zone is hers to restore (skipped).
        let shared = "Notes@\(team.id(.alice))"
        #expect(try Self.records(team, .bob, on: second.url, zone: shared) == Self.records(team, .bob, on: first.url, zone: shared))
        let bobs = try Self.run(team, .bob, on: second.url, ["restore", bobFile, "--json"])
        expectSuccess(bobs)
        let bobSummary = try jsonObject(bobs)
        #expect(objects(bobSummary, "zones").map { $0["zone"] as? String } == ["Ideas"] && objects(bobSummary, "skipped").count == 1, "\(bobSummary)")
        #expect(try Self.records(team, .bob, on: second.url, zone: "Ideas") == Self.records(team, .bob, on: first.url, zone: "Ideas"))
        for who in [Who.alice, .bob] {
            let audit = try Self.run(team, who, on: second.url, ["audit", "--json"])
            expectSuccess(audit)
            #expect(objects(try jsonObject(audit), "findings").isEmpty, "\(audit)")
        }
        // Again onto the server that has her zones as the backup holds them, as a restore of
        // it left them (one stopped after its write, say): nothing is written again, and it
        // finishes. Once she has another zone there: refused.
        let again = try Self.run(team, .alice, on: second.url, ["restore", file])
        expectSuccessWithNotes(again)
        #expect(again.err.contains("nothing was written again"), "\(again)")
        #expect(try Self.records(team, .alice, on: second.url, zone: "Notes") == Self.records(team, .alice, on: first.url, zone: "Notes"))
        expectSuccess(try Self.run(team, .alice, on: second.url, ["zone", "create", "Later"]))
        expectFailure(try Self.run(team, .alice, on: second.url, ["restore", file]), 73, mentioning: "not empty")
        // Export --all and import through the server too.
        let folder = sandbox.path("exported")
        try team.ok(.alice, ["record", "export", "--all", "--output", folder])
        #expect(try fileMode(folder + "/Notes.jsonl") == 0o600)
    }

    @Test("through a server: a restore killed at random points leaves every zone or none, and running it again finishes it, sending only what the server lacks")
    func restoreKilledThroughServerIsAllOrNothing() async throws {
        let team = try Team([.alice])
        // Two zones of 1,000 records each: several batches of rows each.
        for zone in ["A", "B"] {
            let lines = (0..<1_000).map { #"{"name": "r\#($0)", "type": "Note", "values": {"title": "\#(zone) \#($0)"}, "encryptedValues": {"body": "secret \#($0)"}}"# }
            let input = team.sandbox.path("\(zone).jsonl")
            try Data((lines.joined(separator: "\n") + "\n").utf8).write(to: URL(fileURLWithPath: input))
            try team.ok(.alice, ["record", "import", zone, input, "--create-zone"])
        }
        let file = team.sandbox.path("all.backup")
        expectSuccess(try Self.run(team, .alice, on: team.store, ["backup", "--output", file]))
        let expected = try ["A", "B"].map { try Self.run(team, .alice, on: team.store, ["record", "export", $0]).out.split(separator: "\n").sorted() }
        let executable = try CofferProcess.executableURL().path
        let shell = try #require(["/usr/bin/sqlite3", "/usr/local/bin/sqlite3", "/bin/sqlite3"].first { FileManager.default.isExecutableFile(atPath: $0) },
                                 "the sqlite3 shell is not installed")
        func count(_ storePath: String, _ sql: String) -> Int {
            guard let run = try? ChildProcess.run(shell, ["-batch", storePath, sql], environment: ProcessInfo.processInfo.environment, timeout: 10),
                  run.status == 0 else { return 0 }
            return Int(String(decoding: run.stdout, as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines)) ?? 0
        }
        var cutWhileSending = 0
        for attempt in 0..<6 {
            let storePath = team.sandbox.path("server-\(attempt).sqlite")
            let server = try await ServerProcess.start(store: storePath, in: team.sandbox)
            defer { kill(server.process.pid, SIGKILL) }
            let restore = try ChildProcess.Running(executable, ["restore", file, "--yes", "--vault", team.vault(.alice), "--server", server.url],
                                                   environment: team.sandbox.baseEnvironment.merging(withPassphrase) { $1 },
                                                   directory: team.sandbox.root.path, timeout: 120)
            // Killed once the server's stage holds a number of parts that grows with the attempt
            // (whatever the machine's load): part way through sending, or, the last times, about
            // when the parts are all there and the commit goes.
            let threshold = 1 + attempt
            let deadline = ContinuousClock.now + .seconds(90)
            while count(storePath, "SELECT count(*) FROM server_stage") < threshold && count(storePath, "SELECT count(*) FROM zone") == 0
                    && ContinuousClock.now < deadline {
                try await Task.sleep(for: .milliseconds(5))
            }
            let killed = await restore.stop(SIGKILL)
            // What the killed run left: no zone, or every zone whole.
            let list = try Self.run(team, .alice, on: server.url, ["zone", "list", "--json"])
            let counts = ((try? jsonObject(list))?["zones"] as? [[String: Any]] ?? []).compactMap { $0["records"] as? Int }
            #expect(counts.isEmpty || counts == [1_000, 1_000], "attempt \(attempt): a killed restore left \(counts)")
            let staged = count(storePath, "SELECT count(*) FROM server_stage")
            if counts.isEmpty && staged > 0 { cutWhileSending += 1 }
            // Run again, it finishes, sending only the parts the stage lacks.
            let again = try Self.run(team, .alice, on: server.url, ["restore", file, "--yes"])
            expectSuccessWithNotes(again)
            if killed.status != 0 && counts.isEmpty {
                #expect(!again.err.contains("nothing was written again"), "attempt \(attempt): \(again)")
                #expect(count(storePath, "SELECT count(*) FROM server_stage") == 0, "attempt \(attempt): the commit left the stage")
            } else {
                #expect(again.err.contains("nothing was written again"), "attempt \(attempt): \(again)")
            }
            for (zone, lines) in zip(["A", "B"], expected) {
                let export = try Self.run(team, .alice, on: server.url, ["record", "export", zone])
                #expect(export.out.split(separator: "\n").sorted() == lines, "attempt \(attempt), zone \(zone): \(counts)")
            }
            let audit = try Self.run(team, .alice, on: server.url, ["audit", "--json"])
            let findings = objects(try jsonObject(audit), "findings")
            #expect(audit.status == 0 && findings.isEmpty, "attempt \(attempt): \(audit)")
        }
        print("restores through a server killed while sending: \(cutWhileSending) of 6")
        #expect(cutWhileSending > 0, "no kill fell while the parts were sent")
    }

    // MARK: - Export and import for migration

    @Test("export --output FILE and --all --output DIR: files 0600, the folder 0700, never over a file without --force; import --create-zone")
    func exportAllAndImportCreateZone() throws {
        let team = try Team([.alice, .bob])
        try Self.fill(team)
        let single = team.sandbox.path("notes.jsonl")
        let one = try team.json(.alice, ["record", "export", "Notes", "--output", single])
        #expect(one["records"] as? Int == 3, "\(one)")
        #expect(try fileMode(single) == 0o600)
        try team.fails(.alice, ["record", "export", "Notes", "--output", single], 73, mentioning: "--force")
        try team.ok(.alice, ["record", "export", "Notes", "--output", single, "--force"])
        // Standard output still works as before.
        #expect(try jsonLines(try team.ok(.alice, ["record", "export", "Notes"])).count == 3)

        let folder = team.sandbox.path("out/all")
        try team.fails(.bob, ["record", "export", "--all", "--output", folder], 66)
        try FileManager.default.createDirectory(atPath: team.sandbox.path("out"), withIntermediateDirectories: true)
        let all = try team.json(.bob, ["record", "export", "--all", "--output", folder])
        #expect(all["records"] as? Int == 4, "\(all)")
        #expect(try fileMode(folder) == 0o700)
        let sharedFile = "Notes@\(team.id(.alice)).jsonl"
        #expect(try FileManager.default.contentsOfDirectory(atPath: folder).sorted() == ["Ideas.jsonl", sharedFile].sorted())
        for name in ["Ideas.jsonl", sharedFile] { #expect(try fileMode(folder + "/" + name) == 0o600) }
        try team.fails(.bob, ["record", "export", "--all", "--output", folder], 73, mentioning: "--force")
        try team.ok(.bob, ["record", "export", "--all", "--output", folder, "--force"])
        try team.fails(.bob, ["record", "export", "--all"], 64)
        try team.fails(.bob, ["record", "export", "Ideas", "--all", "--output", folder], 64)

        // Into a fresh store: without --create-zone the error says to pass it; with it, the zone
        // (and the store) is made and holds the records.
        let fresh = team.sandbox.path("fresh.sqlite")
        expectFailure(try Self.run(team, .bob, on: fresh, ["record", "import", "Ideas", folder + "/Ideas.jsonl"]), 66, mentioning: "no store")
        expectSuccess(try Self.run(team, .bob, on: fresh, ["zone", "create", "Other"]))
        let missing = try Self.run(team, .bob, on: fresh, ["record", "import", "Ideas", folder + "/Ideas.jsonl"])
        expectFailure(missing, 66, mentioning: "--create-zone")
        // --create-zone also makes a store that does not exist.
        let newer = team.sandbox.path("newer.sqlite")
        expectSuccess(try Self.run(team, .bob, on: newer, ["record", "import", "Ideas", folder + "/Ideas.jsonl", "--create-zone"]))
        let created = try Self.run(team, .bob, on: fresh, ["record", "import", "Ideas", folder + "/Ideas.jsonl", "--create-zone", "--json"])
        expectSuccess(created)
        #expect(try jsonObject(created)["createdZone"] as? Bool == true)
        let copied = try Self.run(team, .bob, on: fresh, ["record", "get", "Ideas", "i1", "--json"])
        expectSuccess(copied)
        #expect(json(try jsonObject(copied), "encryptedValues") == JSON(["body": "bob only"]))
        // A second time the zone is there: --create-zone changes nothing, the records are replaced.
        let again = try Self.run(team, .bob, on: fresh, ["record", "import", "Ideas", folder + "/Ideas.jsonl", "--create-zone", "--json"])
        expectSuccess(again)
        #expect(try jsonObject(again)["createdZone"] as? Bool == false)
        // A file that does not import leaves no zone behind.
        let bad = try team.sandbox.write("bad.jsonl", "{\"name\": \"x\"}\n")
        expectFailure(try Self.run(team, .bob, on: fresh, ["record", "import", "Nope", bad, "--create-zone"]), 65)
        let list = try Self.run(team, .bob, on: fresh, ["zone", "list"])
        #expect(!list.out.contains("Nope"), "\(list)")
    }

    // MARK: - Interrupted imports

    /// `count` records of about 600 bytes each, as JSON lines.
    static func importFile(_ team: Team, _ name: String, count: Int, range: Range<Int>? = nil) throws -> String {
        let lines = (range ?? 0..<count).map { i in
            "{\"name\": \"r\(String(format: "%05d", i))\", \"type\": \"Item\", \"values\": {\"n\": \(i), \"pad\": \"\(String(repeating: "x", count: 500))\"}, \"encryptedValues\": {\"s\": \"secret \(i)\"}}"
        }
        return try team.sandbox.write(name, lines.joined(separator: "\n") + "\n")
    }

    /// The CPU time (user + system, in clock ticks) of a process so far.
    static func cpuTicks(_ pid: pid_t) -> Int? {
        guard let stat = try? String(contentsOfFile: "/proc/\(pid)/stat", encoding: .utf8),
              let close = stat.lastIndex(of: ")") else { return nil }
        let fields = stat[stat.index(after: close)...].split(separator: " ")
        guard fields.count > 13, let user = Int(fields[11]), let system = Int(fields[12]) else { return nil }
        return user + system
    }

    @Test("SIGINT during an import stops after a whole batch (exit 130, 'stopped after N of M'); --resume saves the rest once, keeping what was saved")
    func interruptedImport() async throws {
        let team = try Team([.alice])
        try team.createZone(.alice, "Bulk")
        let total = 12_000
        let file = try Self.importFile(team, "bulk.jsonl", count: total)
        let sqlite = try #require(["/usr/bin/sqlite3", "/usr/local/bin/sqlite3", "/bin/sqlite3"].first { FileManager.default.isExecutableFile(atPath: $0) })
        func count() throws -> Int {
            Int(try SQLiteShell.run(team.store, "SELECT count(*) FROM record").trimmingCharacters(in: .whitespacesAndNewlines)) ?? -1
        }
        // A shell starts the import, waits until its first batch is in the store (the store's
        // readers do not block its writer), then sends SIGINT while many batches are still to
        // come. The shell, a process of its own, keeps time however busy this test process is.
        let script = """
            set -m
            "$0" record import Bulk "$1" --vault "$2" --store "$3" &
            pid=$!
            n=0
            while [ "$("$4" "$3" 'SELECT count(*) FROM record' 2>/dev/null || echo 0)" = 0 ] && [ $n -lt 6000 ]; do sleep 0.02; n=$((n+1)); done
            kill -INT $pid
            wait $pid
            echo "status=$?"
            """
        let run = try await ChildProcess.run("/bin/sh", ["-c", script, try CofferProcess.executableURL().path, file, team.vault(.alice), team.store, sqlite],
                                       environment: team.sandbox.baseEnvironment.merging(withPassphrase) { $1 }, timeout: 300)
        let stopped = (status: Int32(String(decoding: run.stdout, as: UTF8.self).split(separator: "=").last
                                        .flatMap { Int32($0.trimmingCharacters(in: .whitespacesAndNewlines)) } ?? -1),
                       stderr: run.stderr)
        let err = String(decoding: stopped.stderr, as: UTF8.self)
        #expect(stopped.status == 130, "\(err)")
        let saved = try count()
        #expect(saved > 0 && saved < total && saved % 400 == 0, "whole batches only: \(saved) records saved\n\(err)")
        #expect(err.contains("Stopped after \(saved) of \(total) records") && err.contains("error: stopped after \(saved) of \(total) records"), "\(err)")
        #expect(err.contains("--resume"), "\(err)")
        let tagsBefore = try SQLiteShell.run(team.store, "SELECT name, seq FROM record ORDER BY name")

        let resumed = try team.json(.alice, ["record", "import", "Bulk", file, "--resume"])
        #expect(resumed["skipped"] as? Int == saved && resumed["imported"] as? Int == total - saved, "\(resumed)")
        let names = try SQLiteShell.run(team.store, "SELECT count(*), count(DISTINCT name) FROM record").trimmingCharacters(in: .whitespacesAndNewlines)
        #expect(names == "\(total)|\(total)")
        // The records saved before keep their change tags (they were left out, not saved again).
        let before = Set(tagsBefore.split(separator: "\n"))
        let after = Set(try SQLiteShell.run(team.store, "SELECT name, seq FROM record ORDER BY name").split(separator: "\n"))
        #expect(before.count == saved && before.isSubset(of: after), "records saved before were saved again")
        expectSuccess(try team.run(.alice, ["audit"]))
    }

    @Test("--resume through a server: the lines already there are left out, a changed one is saved again, the rest is saved")
    func resumeThroughServer() async throws {
        try await ServerCommandTests.withServer([.alice]) { team, _ in
            try team.createZone(.alice, "Bulk")
            let part = try Self.importFile(team, "part.jsonl", count: 900, range: 0..<450)
            try team.ok(.alice, ["record", "import", "Bulk", part])
            let kept = try team.get(.alice, "Bulk", "r00001")
            try team.put(.alice, "Bulk", "r00002", type: "Item", set: ["n:int=-1"])
            let whole = try Self.importFile(team, "whole.jsonl", count: 900)
            let resumed = try team.json(.alice, ["record", "import", "Bulk", whole, "--resume"])
            #expect(resumed["skipped"] as? Int == 449 && resumed["imported"] as? Int == 451, "\(resumed)")
            #expect(JSON(try team.get(.alice, "Bulk", "r00001")) == JSON(kept), "a record left out kept its tag and dates")
            #expect(json(try team.get(.alice, "Bulk", "r00002"), "values") != JSON(["n": -1]), "the changed record was saved again")
            #expect(try jsonLines(try team.ok(.alice, ["record", "export", "Bulk"])).count == 900)
        }
    }

    // MARK: - PostgreSQL

    @Test("restore into an empty PostgreSQL database: it takes the backup's store id; audit clean, records identical",
          .enabled(if: ScratchDatabase.enabled, "COFFER_TEST_POSTGRES=skip: the PostgreSQL tests are left out"))
    func restoreIntoPostgres() throws {
        let database = try ScratchDatabase(prefix: "coffer_backup")
        defer { database.drop() }
        let target = try #require(URLComponents(string: database.url))
        let team = try Team([.alice, .bob])
        try Self.fill(team)
        let file = team.sandbox.path("alice.backup")
        try team.ok(.alice, ["backup", "--output", file])
        let restored = try Self.run(team, .alice, on: target.string!, ["restore", file, "--json"])
        expectSuccess(restored)
        #expect(try jsonObject(restored)["tookStoreID"] as? Bool == true)
        #expect(try Self.records(team, .alice, on: target.string!, zone: "Notes") == Self.records(team, .alice, on: team.store, zone: "Notes"))
        expectSuccess(try Self.run(team, .alice, on: target.string!, ["audit"]))
        let url1 = try Self.run(team, .alice, on: target.string!, ["share", "url", "Notes"])
        #expect(url1.out == (try team.ok(.alice, ["share", "url", "Notes"])).out)
        // Again into the database it was restored into, unchanged: nothing is written again, and
        // it finishes. Once the database has another zone: refused.
        let again = try Self.run(team, .alice, on: target.string!, ["restore", file])
        expectSuccessWithNotes(again)
        #expect(again.err.contains("nothing was written again"), "\(again)")
        expectSuccess(try Self.run(team, .alice, on: target.string!, ["zone", "create", "Later"]))
        expectFailure(try Self.run(team, .alice, on: target.string!, ["restore", file]), 73)
    }
}

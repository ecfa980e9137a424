import ArgumentParser
import CofferStore
import Foundation

extension Coffer {
    struct Audit: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Verify the store as the acting user; with --plaintext, prove a text is nowhere at rest.",
            discussion: """
                Checks every zone you can open: the owner's signature on its share and membership entries, every \
                commit (signature, hash chain, the writer's permission at that membership), every record (its hash \
                in its commit, its encrypted values opening). --plaintext TEXT (repeatable) scans the store's files \
                (database, WAL, shared memory) for TEXT as UTF-8, UTF-16, base64 and hex; --plaintext-file FILE \
                (repeatable, '-' for standard input once) reads the texts from a file, one a line (a line ending \
                is \\n or \\r\\n; empty lines are skipped). Exits 1 when anything fails.

                --heads writes the heads of the zone logs you verified (each zone you can open, verified now), \
                signed with your key, to standard output or --output FILE. Another user who can open the same \
                zones runs --compare FILE with it: an entry that one of you saw and the other's log does not have \
                (a fork, or entries hidden from one of you) is a finding, and the command exits 1.

                Both cover every zone of your marks (the newest entry you verified, per zone, kept beside your \
                vault), not only those the store lists: a marked zone the store no longer shows you is a finding, \
                unless its log, verified, says you may no longer read it, you deleted it, or the store kept its \
                owner's signed deletion and it verifies against your mark (the mark is then closed). So is a zone \
                of the compared file that the store does not show you, unless its log here says it is not shared \
                with you, or its owner's signed deletion verifies against the file's head.
                """)

        @Option(name: .customLong("plaintext"), help: ArgumentHelp(
            "A text that must not appear in the store's files. It is visible to other local users (ps) and kept in shell history; prefer --plaintext-file.",
            valueName: "text"))
        var plaintextArguments: [String] = []
        @Option(name: .customLong("plaintext-file"), help: ArgumentHelp(
            "A file of texts that must not appear in the store's files, one a line ('-': standard input).", valueName: "file"))
        var plaintextFiles: [String] = []
        @Flag(name: .customLong("heads"), help: "Write the heads of the zone logs you verified, signed, for another user's --compare.")
        var heads = false
        @Option(name: .customLong("output"), help: ArgumentHelp("With --heads: the file to write (not one that exists).", valueName: "file"))
        var output: String?
        @Option(name: .customLong("compare"), help: ArgumentHelp("Compare another user's --heads file with the logs you verify here.",
                                                                  valueName: "file"))
        var compare: String?
        @OptionGroup var global: GlobalOptions

        /// The most a --plaintext-file may hold.
        static let maxFileBytes = 1 << 20

        func validate() throws {
            let plaintext = !plaintextArguments.isEmpty || !plaintextFiles.isEmpty
            if [heads, compare != nil, plaintext].filter({ $0 }).count > 1 {
                throw CLIError.usage("--heads, --compare and --plaintext are separate audits; give one of them")
            }
            if output != nil && !heads { throw CLIError.usage("--output goes with --heads") }
            if plaintextArguments.contains(where: \.isEmpty) { throw CLIError.usage("--plaintext needs a text to look for; an empty one is found everywhere") }
            if plaintextFiles.filter({ $0 == "-" }).count > 1 { throw CLIError.usage("standard input ('-') can be read for one --plaintext-file only") }
        }

        /// The texts of a --plaintext-file: its lines (without `\n` or `\r\n`), empty ones skipped.
        static func texts(inFile path: String) throws -> [String] {
            let flag = "--plaintext-file"
            let bytes = try InputFile.read(path, flag: flag, limit: maxFileBytes)
            let source = path == "-" ? "standard input" : path
            // Split as bytes: as Characters, "\r\n" is one that is not "\n".
            let lines = try bytes.split(separator: 0x0a, omittingEmptySubsequences: false)
                .map { $0.last == 0x0d ? $0.dropLast() : $0 }
                .filter { !$0.isEmpty }
                .map { line in
                    guard let text = String(validating: line, as: UTF8.self) else {
                        throw CLIError(ExitStatus.dataError, "\(flag): \(source) is not UTF-8 text")
                    }
                    return text
                }
            guard !lines.isEmpty else {
                throw CLIError.usage("\(flag): \(source) holds no text to look for (one a line; empty lines are skipped)")
            }
            return lines
        }

        func run() async throws {
            if heads { return try await writeHeads() }
            if let compare { return try await compareHeads(compare) }
            if !plaintextArguments.isEmpty || !plaintextFiles.isEmpty { try global.requireLocal("audit --plaintext") }
            let plaintexts = try plaintextArguments + plaintextFiles.flatMap(Self.texts(inFile:))
            let context = try await SessionContext(global, createStore: false)
            let progress = isatty(STDERR_FILENO) != 0 && !global.json
            let report = try await context.session.audit(plaintexts: plaintexts) { step in
                if progress { Output.err(Data("\rAuditing \(step)\u{1b}[K".utf8)) }
            }
            if progress { Output.err(Data("\r\u{1b}[K".utf8)) }
            let checked: [String: Any] = ["zones": report.zones, "shares": report.shares, "memberships": report.memberships,
                                          "commits": report.commits, "records": report.records, "files": report.files,
                                          "bytesScanned": report.bytesScanned, "plaintexts": plaintexts.count,
                                          "marks": report.marks]
            if global.json {
                try RecordOutput.printJSON([
                    "findings": report.findings.map(Self.json),
                    "checked": checked,
                    "ok": report.findings.isEmpty,
                ] as [String: Any])
            } else {
                func count(_ n: Int, _ one: String, _ many: String) -> String { "\(n) \(n == 1 ? one : many)" }
                Output.line("Checked " + [count(report.zones, "zone", "zones"), count(report.shares, "share", "shares"),
                                          count(report.memberships, "membership entry", "membership entries"),
                                          count(report.commits, "commit", "commits"), count(report.records, "record", "records")].joined(separator: ", ")
                            + (plaintexts.isEmpty ? "." : "; scanned \(count(report.files, "file", "files")) (\(report.bytesScanned) bytes) for \(count(plaintexts.count, "text", "texts"))."))
                for f in report.findings {
                    Output.line("FAIL \(f.kind.rawValue) \(f.zone.map { "\($0.name): " } ?? "")\(f.subject): \(f.message)")
                }
                Output.line(report.findings.isEmpty ? "No problems found." : "\(count(report.findings.count, "problem", "problems")) found.")
            }
            if !report.findings.isEmpty { throw ExitCode(ExitStatus.failure) }
        }
        /// A finding as JSON: a zone the store does not show is named by its uid (in `subject`),
        /// with its owner.
        static func json(_ f: AuditFinding) -> [String: Any] {
            let owner: String? = f.zone?.ownerID ?? f.zoneOwnerID
            return ["kind": f.kind.rawValue, "zone": f.zone?.name ?? NSNull(), "owner": owner ?? NSNull(),
                    "subject": f.subject, "message": f.message]
        }

        /// --heads: the verified heads, signed, to standard output or --output.
        func writeHeads() async throws {
            let context = try await SessionContext(global, createStore: false)
            let file = try await context.session.verifiedHeads().encoded()
            guard try Output.file(file, to: output), let output else { return }
            let count = try ZoneHeads(decoding: file).heads.count // read back: what was written verifies
            if global.json {
                try RecordOutput.printJSON(["file": output, "zones": count] as [String: Any])
            } else {
                Output.line("Wrote the heads of \(count == 1 ? "1 zone" : "\(count) zones") to \(output)")
            }
        }

        /// --compare FILE: another user's heads against the logs verified here.
        func compareHeads(_ path: String) async throws {
            let bytes = try InputFile.read(path, flag: "--compare", limit: 64 << 20)
            let context = try await SessionContext(global, createStore: false)
            let result: HeadsComparison
            do {
                result = try await context.session.compareHeads(Data(bytes))
            } catch let e as StoreError {
                throw CLIError(ErrorReporter.status(for: e.code), e.message)
            }
            let who = (try? await context.session.store.contact(matching: result.other.userID)).map { "\($0.name) (\($0.userID))" }
                ?? result.other.userID
            if global.json {
                try RecordOutput.printJSON([
                    "user": result.other.userID,
                    "compared": result.compared,
                    "notHere": result.notHere,
                    "findings": result.findings.map(Self.json),
                    "checked": ["zones": result.compared, "notHere": result.notHere, "marks": result.marks],
                    "ok": result.findings.isEmpty,
                ] as [String: Any])
            } else {
                func zones(_ n: Int) -> String { n == 1 ? "1 zone" : "\(n) zones" }
                Output.line("Compared \(zones(result.compared)) with the heads of \(who) (written \(result.other.created))"
                            + (result.notHere > 0 ? "; \(zones(result.notHere)) of theirs you cannot open here." : "."))
                for f in result.findings {
                    Output.line("FAIL \(f.kind.rawValue) \(f.zone.map { "\($0.name): " } ?? "")\(f.subject): \(f.message)")
                }
                Output.line(result.findings.isEmpty ? "No fork found." : "\(result.findings.count == 1 ? "1 problem" : "\(result.findings.count) problems") found.")
            }
            if !result.findings.isEmpty { throw ExitCode(ExitStatus.failure) }
        }
    }
}

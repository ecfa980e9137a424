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
                (database, WAL, shared memory) for TEXT as UTF-8, UTF-16, base64 and hex. Exits 1 when anything fails.
                """)

        @Option(name: .customLong("plaintext"), help: ArgumentHelp("A text that must not appear in the store's files.", valueName: "text"))
        var plaintexts: [String] = []
        @OptionGroup var global: GlobalOptions

        func validate() throws {
            if plaintexts.contains(where: \.isEmpty) { throw CLIError.usage("--plaintext needs a text to look for; an empty one is found everywhere") }
        }

        func run() async throws {
            let context = try SessionContext(global, createStore: false)
            let progress = isatty(STDERR_FILENO) != 0 && !global.json
            let report = try await context.session.audit(plaintexts: plaintexts) { step in
                if progress { FileHandle.standardError.write(Data("\rAuditing \(step)\u{1b}[K".utf8)) }
            }
            if progress { FileHandle.standardError.write(Data("\r\u{1b}[K".utf8)) }
            let checked: [String: Any] = ["zones": report.zones, "shares": report.shares, "memberships": report.memberships,
                                          "commits": report.commits, "records": report.records, "files": report.files,
                                          "bytesScanned": report.bytesScanned, "plaintexts": plaintexts.count]
            if global.json {
                try RecordOutput.printJSON([
                    "findings": report.findings.map { f -> [String: Any] in
                        ["kind": f.kind.rawValue, "zone": f.zone?.name ?? NSNull(), "owner": f.zone?.ownerID ?? NSNull(),
                         "subject": f.subject, "message": f.message]
                    },
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
    }
}

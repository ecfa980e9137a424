import ArgumentParser
import CofferStore
import CofferVault
import Foundation
#if canImport(Glibc)
import Glibc
#endif

extension Coffer {
    struct RestoreCommand: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "restore",
            abstract: "Put a backup made with 'coffer backup' into an empty store, exactly as it was.",
            discussion: """
                Needs the vault that made the backup. Records, change tags, creators, dates and signed logs go back \
                as they were (nothing is signed again); a local store (--store) takes the backup's store id, and is \
                made if missing. Through a server (--server) the server checks the batches, applies them at once, and \
                only zones you own go back. A store that has zones is refused (73). A restore is all or nothing: \
                killed at any point, it leaves every zone or none, and run again finishes.

                A backup older than what you saw of a zone takes it back: restore shows how far for each zone and \
                resets your marks to the backup's heads only once you confirm on a terminal, or with --yes. \
                Without a terminal and without --yes it refuses (64) before writing anything.
                """)

        @Argument(help: ArgumentHelp("The backup file.", valueName: "file")) var file: String
        @Flag(name: .customLong("yes"), help: "Reset your marks of zones the backup takes back without asking.")
        var yes = false
        @OptionGroup var quiet: QuietOption
        @OptionGroup var global: GlobalOptions

        /// The largest backup file read (the whole file is held in memory while it is checked).
        static let maxFileBytes = 1 << 40

        func run() async throws {
            try global.checkPostgresStore()
            let throughServer = try global.serverURL() != nil
            let bytes = try InputFile.read(file, flag: "restore", limit: Self.maxFileBytes)
            let vault = try global.openVault()
            let backup = try Backup(sealed: Array(bytes), vault: vault)

            // How far back each zone goes, against what this user saw: confirmed before anything is written.
            let checks = try backup.markChecks(against: vault.marks)
                .filter { !throughServer || $0.zone.ownerID == vault.identity.userID }
            let rollbacks = checks.filter(\.isRollback)
            let me = vault.identity.userID
            if !rollbacks.isEmpty && !yes {
                let zones = rollbacks.count == 1 ? "1 zone" : "\(rollbacks.count) zones"
                guard let tty = Terminal.open() else {
                    throw CLIError.usage("the backup takes \(zones) back before what you saw (\(rollbacks.map { Self.describe($0, me: me) }.joined(separator: "; "))); "
                                         + "nothing was written. Pass --yes to restore it and reset your marks to the backup's heads")
                }
                defer { tty.close() }
                for check in checks { tty.write(Self.describe(check, me: me) + "\n") }
                guard tty.confirm("The backup takes \(zones) back before what you saw. Restore it and reset your marks of \(rollbacks.count == 1 ? "it" : "them") to the backup's heads? [y/N] ") else {
                    throw CLIError.usage("restore not confirmed; nothing was written")
                }
            } else {
                for check in rollbacks { Output.note("warning: \(Self.describe(check, me: me)); your marks of it go back to the backup's head") }
            }

            let store = try await global.openStore(create: true) { vault }
            let session = try await store.openSession(vault: vault)
            let progress = isatty(STDERR_FILENO) != 0 && !global.json
            let result = try await session.restore(backup, resettingMarks: true) { step in
                if progress { Output.err(Data("\rRestore: \(step)\u{1b}[K".utf8)) }
            }
            if progress { Output.err(Data("\r\u{1b}[K".utf8)) }
            if result.foundWritten {
                Output.note("the store had every zone of this backup already, as the backup holds it (a restore stopped after its write); nothing was written again")
            }
            try? session.saveMarks()
            let reset = Set(result.marksReset)
            quiet.apply()
            if global.json {
                struct Zone: Encodable { let zone: String, owner: String, sequence: Int64, entries: Int, records: Int, marksReset: Bool }
                struct Skipped: Encodable { let zone: String, owner: String, reason: String }
                struct Finding: Encodable { let kind: String, zone: String?, subject: String, message: String }
                struct Restored: Encodable {
                    let file: String, created: Date, storeID: String, tookStoreID: Bool, zones: [Zone], skipped: [Skipped], records: Int, contacts: Int
                    let findings: [Finding]
                }
                try Output.json(Restored(
                    file: file, created: backup.created, storeID: backup.storeID.map { String(format: "%02x", $0) }.joined(), tookStoreID: result.tookStoreID,
                    zones: result.restored.map { Zone(zone: $0.zone.name, owner: $0.zone.ownerID, sequence: $0.headSeq, entries: $0.entries, records: $0.records,
                                                      marksReset: reset.contains($0.zone)) },
                    skipped: result.skipped.map { Skipped(zone: $0.zone.name, owner: $0.zone.ownerID, reason: $0.reason) },
                    records: result.restored.reduce(0) { $0 + $1.records }, contacts: result.contacts,
                    findings: result.findings.map { Finding(kind: $0.kind.rawValue, zone: $0.zone?.name, subject: $0.subject, message: $0.message) }))
            } else {
                for zone in result.restored {
                    let standing = checks.first { $0.zone == zone.zone }.map { " (\(Self.standing($0)))" } ?? ""
                    Output.line("Restored \(Self.name(zone.zone, me: me)): \(zone.entries) log entries, \(zone.records == 1 ? "1 record" : "\(zone.records) records")\(standing)\(reset.contains(zone.zone) ? "; your marks reset to sequence \(zone.headSeq)" : "").")
                }
                for skipped in result.skipped { Output.line("Skipped \(Self.name(skipped.zone, me: me)): \(skipped.reason).") }
                Output.line("Restored \(result.restored.count == 1 ? "1 zone" : "\(result.restored.count) zones") and \(Output.count(result.contacts, "contact card")) from the backup of \(Output.iso(backup.created))\(result.tookStoreID ? "; the store took the backup's store id" : "").")
                for finding in result.findings { Output.note("finding: \(Output.oneLine(finding.message))") }
            }
            if !result.findings.isEmpty {
                throw CLIError(ExitStatus.failure, "the restored zones do not verify (\(result.findings.count) findings above); run 'coffer audit'")
            }
        }

        static func name(_ zone: ZoneID, me: String) -> String { zone.ownerID == me ? zone.name : "\(zone.name)@\(zone.ownerID)" }

        /// "Notes: backup at sequence 12, you last saw 15 (3 entries older)".
        static func describe(_ check: Backup.MarkCheck, me: String) -> String {
            "\(name(check.zone, me: me)): \(standing(check))"
        }

        /// "backup at sequence 12, you last saw 15 (3 entries older)".
        static func standing(_ check: Backup.MarkCheck) -> String {
            let head = "backup at sequence \(check.backupSeq)"
            switch check.standing {
            case .current:
                return check.seenSeq.map { "\(head), you last saw \($0)" } ?? "\(head), you have not seen it before"
            case .older(let entries):
                return "\(head), you last saw \(check.seenSeq ?? 0) (\(entries == 1 ? "1 entry" : "\(entries) entries") older)"
            case .forked:
                return "\(head), but you saw another entry \(check.seenSeq ?? 0) (another history of the zone)"
            case .deleted:
                return "\(head), but you deleted the zone since"
            }
        }
    }
}

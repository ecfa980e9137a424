import ArgumentParser
import CofferStore
import Foundation

extension Coffer {
    struct BackupCommand: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "backup",
            abstract: "Write a sealed backup of every zone you own or take part in, read from one state of the store.",
            discussion: """
                The file holds each zone whole (its signed log, wrapped keys, share, schema, deleted names and \
                records as sealed) and the store's contact cards. It is encrypted so that only your vault opens it \
                and signed with your key, so that any change is refused: keep the vault and its passphrase (or a key \
                file) too, somewhere else. Without them the backup is useless, and nobody can recover it. \
                Restore it with 'coffer restore FILE' into an empty store. See Docs/Backup.md.
                """)

        @Option(name: .customLong("output"), help: ArgumentHelp("The backup file to write (mode 0600; not one that exists, unless --force).", valueName: "file"))
        var output: String
        @Flag(name: .customLong("force"), help: "Replace the file if it exists (once the new backup is complete).")
        var force = false
        @OptionGroup var quiet: QuietOption
        @OptionGroup var global: GlobalOptions

        func validate() throws {
            if output.isEmpty || output == "-" { throw CLIError.usage("a backup is written to a file: give --output FILE") }
        }

        func run() async throws {
            // Before any passphrase prompt or work: a file that is there stays.
            try PrivateFile.checkTarget(output, force: force)
            let context = try await SessionContext(global, createStore: false)
            let progress = isatty(STDERR_FILENO) != 0 && !global.json
            // The file is written as the store is read; it takes its name only once it is whole.
            let file = try PrivateFile(output, force: force)
            let backup = try await context.session.writeBackup(to: file) { step in
                if progress { Output.err(Data("\rBackup: \(step)\u{1b}[K".utf8)) }
            }
            if progress { Output.err(Data("\r\u{1b}[K".utf8)) }
            try file.commit()
            quiet.apply()
            if global.json {
                struct Written: Encodable {
                    let file: String, zones: Int, records: Int, contacts: Int, bytes: Int
                    let created: Date
                    let heads: [Head]
                }
                struct Head: Encodable { let zone: String, owner: String, sequence: Int64, records: Int }
                try Output.json(Written(file: output, zones: backup.zones.count, records: backup.recordCount, contacts: backup.contactCount,
                                        bytes: backup.bytes, created: backup.created,
                                        heads: backup.zones.map { Head(zone: $0.zone.name, owner: $0.zone.ownerID, sequence: $0.headSeq, records: $0.records) }))
                return
            }
            for zone in backup.zones {
                let name = zone.zone.ownerID == context.session.userID ? zone.zone.name : "\(zone.zone.name)@\(context.displayName(zone.zone.ownerID))"
                Output.line("  \(name): sequence \(zone.headSeq), \(zone.records == 1 ? "1 record" : "\(zone.records) records")")
            }
            let zones = backup.zones.count == 1 ? "1 zone" : "\(backup.zones.count) zones"
            Output.line("Wrote a backup of \(zones) (\(Output.count(backup.recordCount, "record")), \(Output.count(backup.contactCount, "contact card"))) to \(output): \(backup.bytes) bytes, sealed to your vault.")
            Output.line("It opens only with this vault: keep the vault and its passphrase (or a key file) too, away from this machine.")
        }
    }
}

extension PrivateFile: BackupSink {
    func write(_ bytes: [UInt8]) throws { try write(Data(bytes)) }
}

import ArgumentParser
import CofferStore
import Foundation

extension Coffer.RecordCommand {
    struct Export: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Write every record of a zone as JSON lines of the 'record get' shape, decrypted (for migration).",
            discussion: """
                The output holds the decrypted secrets: keep it as safe as the vault. It prints to standard output, \
                or writes FILE with --output (mode 0600); --all --output DIR writes one file per zone you own or take \
                part in: DIR/NAME.jsonl for your zones, DIR/NAME@OWNER.jsonl (the owner's user id) for shared ones \
                (a character other than a letter, a digit, '.', '_', '-' or '@' in a name is written %XX). DIR is \
                made (mode 0700) if missing. An existing file is refused (73) unless --force. 'record import ZONE \
                FILE --create-zone' reads a file back; records get new change tags and dates there. For a copy that \
                keeps them, use 'coffer backup'. With --server, a change of yours the server refused is written in \
                place of the server's version of that record, flagged "refused" with why.
                """)

        @Argument(help: "The zone (not with --all).") var zone: String?
        @Flag(name: .customLong("all"), help: "Every zone you own or take part in, one file each in the folder --output names.")
        var all = false
        @Option(name: .customLong("output"), help: ArgumentHelp("The file to write (with --all: the folder).", valueName: "path"))
        var output: String?
        @Flag(name: .customLong("force"), help: "Replace files that exist.")
        var force = false
        @OptionGroup var global: GlobalOptions

        func validate() throws {
            if all {
                if zone != nil { throw CLIError.usage("give a zone or --all, not both") }
                if output == nil || output == "-" { throw CLIError.usage("--all writes one file per zone: give the folder with --output DIR") }
            } else if zone == nil {
                throw CLIError.usage("give the zone to export, or --all --output DIR")
            }
            if output?.isEmpty == true { throw CLIError.usage("--output was given an empty path") }
            if force && output == nil { throw CLIError.usage("--force goes with --output") }
        }

        func run() async throws {
            if all { return try await exportAll() }
            guard let zone else { return }
            if let output, output != "-" {
                try PrivateFile.checkTarget(output, force: force)
            }
            let context = try await SessionContext(global, createStore: false, readsLocally: true)
            let named = try await context.zoneID(naming: zone)
            // Changes the server refused are exported in place of the records they change,
            // flagged; of a zone gone from the replica (deleted upstream, or the user removed),
            // they are all there is to export.
            let refused = try await context.refusedChanges(in: named)
            let export: ((Data) throws -> Void) async throws -> Int
            do {
                let zoneID = try await context.zone(zone)
                export = { write in try await context.db(zoneID).exportRecords(in: zoneID, refused: refused, to: write) }
            } catch let error as StoreError where !refused.isEmpty && [.zoneNotFound, .permissionFailure].contains(error.code) {
                export = { write in try context.db(named).exportRefused(refused, in: named, to: write) }
                Output.note("warning: zone '\(named.name)' is gone from the server for you (\(Output.oneLine(error.message))); only your refused changes are exported")
            }
            let zoneID = named
            guard let output, output != "-" else {
                let count = try await export { Output.out($0) }
                if isatty(STDERR_FILENO) != 0 { Output.note("Exported \(count) records from \(zoneID.name).") }
                return
            }
            let file = try PrivateFile(output, force: force)
            let count = try await export { try file.write($0) }
            try file.commit()
            if global.json {
                try RecordOutput.printJSON(["zone": zoneID.name, "owner": zoneID.ownerID, "file": output, "records": count] as [String: Any])
            } else {
                Output.line("Exported \(count == 1 ? "1 record" : "\(count) records") of \(zoneID.name) to \(output) (decrypted: keep it as safe as the vault).")
            }
        }

        /// `--all --output DIR`: one file per zone, every target checked before anything is written.
        func exportAll() async throws {
            guard let folder = output else { return }
            var isFolder: ObjCBool = false
            if FileManager.default.fileExists(atPath: folder, isDirectory: &isFolder), !isFolder.boolValue {
                throw CLIError(ExitStatus.alreadyExists, "\(folder) is a file; --all writes into a folder")
            }
            let context = try await SessionContext(global, createStore: false, readsLocally: true)
            let me = context.session.userID
            let zones = try await context.db.zones() + context.session.sharedDatabase.zones()
            // Zones gone from the replica whose refused changes it keeps get a file of those.
            let refused = try await context.replica?.refusedChanges() ?? []
            var gone = [ZoneID]()
            for change in refused where !zones.contains(where: { $0.id == change.zone }) && !gone.contains(change.zone) { gone.append(change.zone) }
            let targets = (zones.map(\.id) + gone).map { zone in
                (zone, URL(fileURLWithPath: folder).appendingPathComponent(Self.fileName(zone, me: me)).path)
            }
            for (_, path) in targets { try PrivateFile.checkTarget(path, force: force) }
            if !isFolder.boolValue {
                guard mkdir(folder, 0o700) == 0 || errno == EEXIST else {
                    let reason = String(cString: strerror(errno))
                    if errno == ENOENT { throw CLIError(ExitStatus.notFound, "the folder above \(folder) does not exist") }
                    throw CLIError(ExitStatus.failure, "cannot make the folder \(folder): \(reason)")
                }
                _ = chmod(folder, 0o700)
            }
            var written = [[String: Any]]()
            var total = 0
            for (zoneID, path) in targets {
                let file = try PrivateFile(path, force: force)
                let mine = refused.filter { $0.zone == zoneID }
                let count = gone.contains(zoneID) ? try context.db(zoneID).exportRefused(mine, in: zoneID) { try file.write($0) }
                    : try await context.db(zoneID).exportRecords(in: zoneID, refused: mine) { try file.write($0) }
                try file.commit()
                total += count
                written.append(["zone": zoneID.name, "owner": zoneID.ownerID, "file": path, "records": count])
                if !global.json {
                    Output.line("Exported \(count == 1 ? "1 record" : "\(count) records") of \(zoneID.ownerID == me ? zoneID.name : "\(zoneID.name)@\(context.displayName(zoneID.ownerID))") to \(path)")
                }
            }
            if global.json {
                try RecordOutput.printJSON(["folder": folder, "zones": written, "records": total] as [String: Any])
            } else {
                Output.line("Exported \(total) records of \(targets.count == 1 ? "1 zone" : "\(targets.count) zones") to \(folder) (decrypted: keep it as safe as the vault).")
            }
        }

        /// `NAME.jsonl` for a zone of `me`'s, `NAME@OWNERID.jsonl` for another's; bytes other
        /// than letters, digits, `.`, `_`, `-` (and `@` between name and owner) as `%XX`, and a
        /// leading `.` too, so that a zone name never makes a path or a hidden file.
        static func fileName(_ zone: ZoneID, me: String) -> String {
            var name = ""
            for byte in zone.name.utf8 {
                let safe = (byte >= 0x30 && byte <= 0x39) || (byte >= 0x41 && byte <= 0x5a) || (byte >= 0x61 && byte <= 0x7a)
                    || byte == 0x5f || byte == 0x2d || (byte == 0x2e && !name.isEmpty)
                name += safe ? String(UnicodeScalar(byte)) : String(format: "%%%02X", byte)
            }
            return (zone.ownerID == me ? name : "\(name)@\(zone.ownerID)") + ".jsonl"
        }
    }
}

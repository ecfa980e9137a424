import ArgumentParser
import CofferStore
import Foundation

extension Coffer {
    /// `coffer sync [--watch]`: brings the replica up to the server's state.
    struct Sync: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Pull every zone the server shows you into your replica, and push your pending changes.",
            discussion: """
                Each zone's new log entries and the records they still list are fetched, verified as any read \
                is, and stored in your replica (--replica, default DATA/coffer/replicas/STORE-ID/USER-ID.sqlite), \
                from where record reads, lists, queries, exports and schemas are served, also offline. Then the \
                changes you made offline are pushed: each merged with the server's version (changes to different \
                fields of a record merge; where both changed the same field, the server's version is kept and yours \
                is listed by 'coffer conflict list' — conflicts are counted, not failures), signed, and confirmed \
                once the server's verified log holds them. A change the server refuses (you lost write access, the \
                zone went away) is kept and shown by 'coffer status' (exit 77). A zone \
                that fails (its log does not verify or does not extend what your replica holds) is reported and \
                the others go on; the command then exits with the worst zone's code (65, then 77, then 69). With \
                --watch it keeps syncing, woken by the server's changes, and reconnects after the server goes \
                away. Needs --server (or COFFER_SERVER); without one it is a usage error (64).
                """)

        @Flag(help: "Keep syncing, woken by the server's changes; reconnect when the server goes away.") var watch = false
        @OptionGroup var global: GlobalOptions

        func run() async throws {
            guard let server = try global.serverURL() else { throw CLIError.usage("sync works with --server (or COFFER_SERVER)") }
            if global.offline { throw CLIError.usage("sync needs the server: give it without --offline") }
            let vault = try global.openVault()
            let replica = try await global.openReplica(server: server, vault: vault)
            guard watch else {
                defer { try? replica.session.saveMarks() }
                guard replica.isOnline else {
                    throw CLIError(ExitStatus.unavailable, "\(Output.oneLine(replica.offlineReason ?? "the server cannot be reached")); nothing was synced")
                }
                let status = try await syncOnce(replica)
                if status != 0 { throw ExitCode(status) }
                return
            }
            try await watchChanges(SyncEngine(replica: replica, logger: CLILog.logger))
        }

        /// `--watch`: runs the library's sync engine and prints its events as they come: each
        /// zone once, then each zone that changed; failures, the server going away and coming
        /// back on stderr.
        private func watchChanges(_ engine: SyncEngine) async throws {
            let userID = engine.replica.session.userID
            let label = { (zone: ZoneID) in zone.ownerID == userID ? zone.name : "\(zone.name)@\(zone.ownerID)" }
            let running = Task { try await engine.run() }
            defer { running.cancel() }
            if !engine.replica.isOnline {
                Output.note("warning: \(Output.oneLine(engine.replica.offlineReason ?? "the server cannot be reached")); trying again")
            }
            var shown = Set<ZoneID>()
            for await event in engine.events {
                switch event {
                case .fetched(let zone):
                    guard zone.entries > 0 || shown.insert(zone.zone).inserted else { continue }
                    shown.insert(zone.zone)
                    Output.line("\(label(zone.zone)): \(Self.describe(zone))")
                case .zoneRemoved(let zone, let why):
                    Output.line("\(label(zone)): dropped from your replica (\(why))")
                case .refused(let zone, let error):
                    Output.note("error: \(label(zone)): \(Output.oneLine(error.message))")
                case .offline(let reason, let delay):
                    Output.note("warning: \(Output.oneLine(reason)); trying again in \(delay.components.seconds) s")
                case .online:
                    Output.note("the server answers again")
                case .sent(let zone, let count):
                    Output.line("\(label(zone)): pushed \(Output.count(count, "pending change"))")
                case .conflict(let conflict):
                    Output.note("conflict: \(label(conflict.zone)) \(conflict.name): your offline change and the server's version both changed it (\(conflict.kind)); the server's version is kept, yours is under 'coffer conflict list'")
                case .changeRefused(let zone, let name, let why):
                    Output.note("refused: \(label(zone)) \(name): \(Output.oneLine(why)); your change is kept under 'coffer status'")
                }
            }
        }

        static func describe(_ zone: PulledZone) -> String {
            let news = zone.entries == 0 ? "up to date" : "\(zone.entries == 1 ? "1 new entry" : "\(zone.entries) new entries"), \(Output.count(zone.records, "record")) fetched, \(zone.deletions) deleted"
            return "\(news) (confirmed entry \(zone.headSeq))"
        }

        /// One pull of every zone; prints what it did and returns the exit status (0, or the
        /// worst failed zone's).
        private func syncOnce(_ replica: Replica) async throws -> Int32 {
            let terminal = isatty(STDERR_FILENO) != 0 && !global.json
            let userID = replica.session.userID
            let label = { @Sendable (zone: ZoneID) in zone.ownerID == userID ? zone.name : "\(zone.name)@\(zone.ownerID)" }
            // On a terminal, one line on stderr says how far the sync has come.
            let show = { @Sendable (step: SyncProgress) in
                guard terminal else { return }
                switch step {
                case .pulling(let zone, let records):
                    Output.err(Data("\rSyncing \(label(zone)): \(Output.count(records, "record")) fetched\u{1b}[K".utf8))
                case .pushing(let zone, let sent, let total):
                    Output.err(Data("\rPushing \(label(zone)): \(sent) of \(Output.count(total, "change")) sent\u{1b}[K".utf8))
                }
            }
            // The line is cleared before the report (or an error) is printed.
            var cleared = false
            let clear = { if terminal && !cleared { Output.err(Data("\r\u{1b}[K".utf8)); cleared = true } }
            defer { clear() }
            let report = try await replica.pull(progress: show)
            try replica.session.saveMarks()
            let pushed = try await replica.push(progress: show)
            try replica.session.saveMarks()
            clear()
            let failed = report.failed + pushed.failed
            if global.json {
                struct Pulled: Encodable { let zone: String, confirmedSeq: Int64, entries: Int, records: Int, deleted: Int }
                struct Failed: Encodable { let zone: String, error: String, code: Int32 }
                struct Dropped: Encodable { let zone: String, why: String }
                struct Pushed: Encodable { let zone: String, changes: Int }
                struct Conflict: Encodable { let zone: String, name: String, kind: String }
                struct Refused: Encodable { let zone: String, name: String, why: String }
                struct Report: Encodable {
                    let synced: [Pulled], failed: [Failed], dropped: [Dropped], pushed: [Pushed], conflicts: [Conflict], refused: [Refused], lost: Int
                    let server: String, replica: String
                }
                try Output.json(Report(
                    synced: report.pulled.map { Pulled(zone: label($0.zone), confirmedSeq: $0.headSeq, entries: $0.entries, records: $0.records, deleted: $0.deletions) },
                    failed: failed.map { Failed(zone: label($0.zone), error: $0.error.message, code: ErrorReporter.status(for: $0.error.code)) },
                    dropped: report.dropped.map { Dropped(zone: label($0.zone), why: $0.why) },
                    pushed: pushed.confirmed.map { Pushed(zone: label($0.zone), changes: $0.count) },
                    conflicts: pushed.conflicts.map { Conflict(zone: label($0.zone), name: $0.name, kind: $0.kind) },
                    refused: pushed.refused.map { Refused(zone: label($0.zone), name: $0.name, why: $0.why) }, lost: pushed.lost,
                    server: replica.origin, replica: replica.path.path))
            } else {
                for zone in report.pulled { Output.line("\(label(zone.zone)): \(Self.describe(zone))") }
                for dropped in report.dropped { Output.line("\(label(dropped.zone)): dropped from your replica (\(dropped.why))") }
                for zone in pushed.zonesCreated { Output.line("\(label(zone)): created on the server") }
                for zone in pushed.zonesJoined {
                    Output.line("\(label(zone)): the server already had a zone of this name of yours; its copy replaced the one made here, and your changes went to it")
                }
                for (zone, count) in pushed.confirmed { Output.line("\(label(zone)): pushed \(Output.count(count, "pending change"))") }
                for failed in report.failed { Output.note("error: \(label(failed.zone)): \(Output.oneLine(failed.error.message))") }
                SessionContext.notePushed(pushed, replica: replica)
            }
            return Self.worst(failed.map { ErrorReporter.status(for: $0.error.code) } + (pushed.refused.isEmpty ? [] : [ExitStatus.denied])
                              + (pushed.lost > 0 ? [ExitStatus.dataError] : []))
        }

        /// The exit status of a sync whose zones failed with `statuses`: 65 first, then 77,
        /// then 69, then any other.
        static func worst(_ statuses: [Int32]) -> Int32 {
            for status in [ExitStatus.dataError, ExitStatus.denied, ExitStatus.unavailable] where statuses.contains(status) { return status }
            return statuses.first ?? 0
        }
    }

    /// `coffer status`: the replica's zones and the server's reachability.
    struct Status: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Show each zone of your replica: confirmed head, pending changes, conflicts, refusals, last sync.",
            discussion: """
                Reads your replica (it pulls nothing; 'coffer sync' does) and tries the server for at most a \
                second to say whether it is reachable. Needs --server (or COFFER_SERVER); without one it is a \
                usage error (64). PENDING counts your changes kept offline and not pushed yet, CONFLICTS those \
                whose record the server changed too ('coffer conflict list'), REFUSED those the server refused \
                (kept, readable).
                """)

        @OptionGroup var global: GlobalOptions

        func run() async throws {
            guard let server = try global.serverURL() else { throw CLIError.usage("status works with --server (or COFFER_SERVER)") }
            let replica = try await global.openReplica(server: server, vault: try global.openVault())
            let zones = try await replica.status()
            let label = { (zone: ZoneID) in zone.ownerID == replica.session.userID ? zone.name : "\(zone.name)@\(zone.ownerID)" }
            if global.json {
                struct Zone: Encodable {
                    let zone: String, owner: String, confirmedSeq: Int64, pending: Int, conflicts: Int, refused: Int
                    let lastSync: String?, findings: [String], rotationsPending: Int, ownerStatementAge: Int?
                }
                struct Report: Encodable { let zones: [Zone], serverReachable: Bool, server: String, replica: String }
                try Output.json(Report(zones: zones.map {
                    Zone(zone: $0.zone.name, owner: $0.zone.ownerID, confirmedSeq: $0.confirmedSeq, pending: $0.pending,
                         conflicts: $0.conflicts, refused: $0.refused,
                         lastSync: $0.lastSync.map(Output.iso), findings: $0.findings, rotationsPending: 0, ownerStatementAge: nil)
                }, serverReachable: replica.isOnline, server: replica.origin, replica: replica.path.path))
                return
            }
            Output.line("server: \(replica.origin) (\(replica.isOnline ? "reachable" : "not reachable"))")
            Output.line("replica: \(replica.path.path)")
            guard !zones.isEmpty else {
                Output.line("No zones in the replica yet; run 'coffer sync'.")
                return
            }
            Table.print([["ZONE", "CONFIRMED", "PENDING", "CONFLICTS", "REFUSED", "LAST SYNC"]] + zones.map {
                [label($0.zone), "\($0.confirmedSeq)", "\($0.pending)", "\($0.conflicts)", "\($0.refused)",
                 $0.lastSync.map(Output.iso) ?? "never"]
            })
            for zone in zones where !zone.findings.isEmpty {
                for finding in zone.findings { Output.note("warning: \(label(zone.zone)): \(Output.oneLine(finding))") }
            }
        }
    }
}

import ArgumentParser
import CofferStore
import Foundation

extension Coffer.ShareCommand {
    struct Create: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Share a zone you own and print its URL.",
            discussion: """
                With --record, only those records and their children (by parent) are shared: they move into \
                the zone named by --into (created if needed, or an existing share's zone), which is shared.
                """)

        @Argument(help: "The zone.") var zone: String
        @Option(help: "A title for participants.") var title: String = ""
        @Option(name: .customLong("public"), help: "Who may join with the URL alone: none, read-only, read-write.")
        var publicPermission: SharePermission = .none
        @Option(name: .customLong("record"), help: ArgumentHelp("Share only this record and its children (repeatable).", valueName: "name"))
        var records: [String] = []
        @Option(help: ArgumentHelp("With --record: the zone they move into.", valueName: "zone")) var into: String?
        @OptionGroup var global: GlobalOptions

        func validate() throws {
            if !records.isEmpty && into == nil { throw CLIError.usage("--record needs --into ZONE: shared records move into a zone of their own") }
            if records.isEmpty && into != nil { throw CLIError.usage("--into goes with --record") }
        }

        func run() async throws {
            let context = try await SessionContext(global, createStore: false)
            let zoneID = try await context.zone(zone)
            let share: Share
            if let into {
                share = try await context.session.share(records: records, in: zoneID, intoZoneNamed: into, title: title,
                                                        publicPermission: publicPermission)
            } else {
                share = try await context.session.share(zone: zoneID, title: title, publicPermission: publicPermission)
            }
            if global.json {
                try RecordOutput.printJSON(["url": share.url, "zone": share.zoneID.name] as [String: Any])
            } else {
                Output.line(share.url)
                if isatty(STDERR_FILENO) != 0 {
                    Output.note("Shared zone \(share.zoneID.name). Add people with 'coffer share add \(share.zoneID.name) --participant WHO --permission read-only' and send them this URL.")
                }
            }
        }
    }
}

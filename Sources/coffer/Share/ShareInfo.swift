import ArgumentParser
import CofferStore
import Foundation

extension Coffer.ShareCommand {
    struct Show: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Title, owner, URL, public permission and participants of a share.")

        @Argument(help: "The zone.") var zone: String
        @OptionGroup var global: GlobalOptions

        func run() async throws {
            let context = try await SessionContext(global, createStore: false)
            try ShareOutput.print(try await context.session.fetchShare(in: try await context.zone(zone)), context: context, json: global.json)
        }
    }

    struct URL: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Print the share URL (with its link secret when the share is public).")

        @Argument(help: "The zone.") var zone: String
        @OptionGroup var global: GlobalOptions

        func run() async throws {
            let context = try await SessionContext(global, createStore: false)
            let share = try await context.session.fetchShare(in: try await context.zone(zone))
            if global.json { try RecordOutput.printJSON(["url": share.url, "zone": share.zoneID.name] as [String: Any]) } else { Output.line(share.url) }
        }
    }

    struct List: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Shares you own and shares you take part in (or are invited to).")

        @OptionGroup var global: GlobalOptions

        func run() async throws {
            let context = try await SessionContext(global, createStore: false)
            let shares = try await context.session.fetchShares()
            let me = context.session.userID
            func myStatus(_ s: Share) -> String {
                s.participants.first { $0.userID == me }.map { $0.role == .owner ? "owner" : "\($0.status) \($0.permission)" } ?? "-"
            }
            if global.json {
                try RecordOutput.printJSON(["shares": shares.map { s -> [String: Any] in
                    var o = ShareOutput.json(s, context: context)
                    o["mine"] = s.zoneID.ownerID == me
                    o["myStatus"] = myStatus(s)
                    return o
                }] as [String: Any])
                return
            }
            if shares.isEmpty { Output.line("No shares."); return }
            Table.print([["ZONE", "OWNER", "TITLE", "PUBLIC", "PARTICIPANTS", "YOU"]] + shares.map { s in
                [s.zoneID.ownerID == me ? s.zoneID.name : "\(s.zoneID.name)@\(context.displayName(s.zoneID.ownerID))",
                 context.displayName(s.zoneID.ownerID), s.title.isEmpty ? "-" : s.title, s.publicPermission.description,
                 String(s.participants.filter { $0.role != .owner && $0.status != .removed }.count), myStatus(s)]
            })
        }
    }
}

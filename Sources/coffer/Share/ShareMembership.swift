import ArgumentParser
import CofferStore

extension Coffer.ShareCommand {
    struct Accept: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Accept a share URL as the acting user.")

        @Argument(help: "The share URL.") var url: String
        @OptionGroup var global: GlobalOptions

        func run() async throws {
            let context = try SessionContext(global, createStore: false)
            let share = try await context.session.acceptShare(url: url)
            let me = context.session.userID
            let mine = share.participants.first { $0.userID == me }
            let owner = share.participants[0]
            let ownerRef = owner.email ?? owner.userID
            if global.json {
                try RecordOutput.printJSON(["zone": "\(share.zoneID.name)@\(ownerRef)", "owner": share.zoneID.ownerID,
                                            "permission": mine?.permission.description ?? share.publicPermission.description] as [String: Any])
                return
            }
            Output.line("Accepted \(share.title.isEmpty ? "the share" : "'\(share.title)'") from \(owner.name ?? owner.userID): zone \(share.zoneID.name)@\(ownerRef) (\(mine?.permission.description ?? share.publicPermission.description)).")
        }
    }

    struct Leave: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Stop taking part in a share (as a participant).")

        @Argument(help: "The zone, as NAME@OWNER.") var zone: String
        @OptionGroup var global: GlobalOptions

        func run() async throws {
            let context = try SessionContext(global, createStore: false)
            let id = try context.zone(zone)
            try await context.session.leaveShare(zone: id)
            if global.json { try Output.json(["left": id.name, "owner": id.ownerID]); return }
            Output.line("You left the share of \(id.name).")
        }
    }

    struct Stop: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "End a share you own; your records stay, unshared, under a new key.")

        @Argument(help: "The zone.") var zone: String
        @OptionGroup var global: GlobalOptions

        func run() async throws {
            let context = try SessionContext(global, createStore: false)
            let id = try context.zone(zone)
            try await context.session.stopSharing(zone: id)
            if global.json { try Output.json(["stopped": id.name]); return }
            Output.line("Stopped sharing \(id.name). Its records stay, under a new zone key.")
        }
    }
}

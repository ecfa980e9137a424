import ArgumentParser
import CofferStore
import Foundation

extension Coffer {
    struct ShareCommand: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "share",
            abstract: "Share zones: participants read-only or read-write, by name or by link.",
            subcommands: [Create.self, Add.self, Permission.self, Public.self, Remove.self, Show.self, URL.self,
                          List.self, Accept.self, Leave.self, Stop.self]
        )
    }
}

extension SharePermission: ExpressibleByArgument {
    public init?(argument: String) { self.init(name: argument) }
    public static var allValueStrings: [String] { allCases.map(\.description) }
}

/// A participant's permission: read-only or read-write (never none).
struct ParticipantPermission: ExpressibleByArgument {
    let value: SharePermission
    init?(argument: String) {
        guard let p = SharePermission(name: argument), p != .none else { return nil }
        value = p
    }
    static var allValueStrings: [String] { ["read-only", "read-write"] }
}

/// Printing shares.
enum ShareOutput {
    static func json(_ share: Share, context: SessionContext) -> [String: Any] {
        [
            "zone": share.zoneID.ownerID == context.session.userID ? share.zoneID.name : "\(share.zoneID.name)@\(share.zoneID.ownerID)",
            "url": share.url,
            "title": share.title,
            "owner": share.zoneID.ownerID,
            "publicPermission": share.publicPermission.description,
            "version": share.version,
            "keyEpoch": share.keyEpoch,
            "participants": share.participants.map { p -> [String: Any] in
                ["user": p.userID, "name": p.name ?? NSNull(), "email": p.email ?? NSNull(), "role": p.role.description,
                 "permission": p.permission.description, "status": p.status.description, "left": p.left]
            },
        ]
    }

    static func text(_ share: Share, context: SessionContext) {
        Output.fields([
            ("Zone", share.zoneID.name),
            ("Title", share.title.isEmpty ? "-" : share.title),
            ("Owner", context.displayName(share.zoneID.ownerID)),
            ("URL", share.url),
            ("Public", share.publicPermission.description),
            ("Key epoch", String(share.keyEpoch)),
        ])
        Output.line("Participants:")
        Table.print([["USER", "USER ID", "ROLE", "PERMISSION", "STATUS"]] + share.participants.map {
            [($0.name ?? "?") + ($0.email.map { " <\($0)>" } ?? ""), $0.userID, $0.role.description, $0.permission.description,
             $0.status.description + ($0.left ? " (left)" : "")]
        })
    }

    static func print(_ share: Share, context: SessionContext, json: Bool) throws {
        if json { try RecordOutput.printJSON(self.json(share, context: context)) } else { text(share, context: context) }
    }
}

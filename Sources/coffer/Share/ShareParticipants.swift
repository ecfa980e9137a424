import ArgumentParser
import CofferStore

extension Coffer.ShareCommand {
    struct Add: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Invite a contact (email, user id or name); the zone key is wrapped to them.")

        @Argument(help: "The zone.") var zone: String
        @Option(help: "Who: email, user id or contact name.") var participant: String
        @Option(help: "read-only or read-write.") var permission: ParticipantPermission
        @OptionGroup var quiet: QuietOption
        @OptionGroup var global: GlobalOptions

        func run() async throws {
            let context = try await SessionContext(global, createStore: false)
            // Say whom the name matched: anyone with a vault can put a card with any email in the store.
            let invited = try await context.contact(matching: participant)
            let share = try await context.session.addParticipant(invited.userID, permission: permission.value, to: try await context.zone(zone))
            quiet.apply()
            if global.json { try ShareOutput.print(share, context: context, json: true); return }
            Output.line("Invited \(invited.name)\(invited.email.map { " <\($0)>" } ?? "") (\(permission.value)): user id \(invited.userID), fingerprint \(invited.fingerprint).")
            Output.line("Compare the fingerprint with them (aloud, or by another channel), then send them the URL: \(share.url)")
        }
    }

    struct Permission: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Change a participant's permission.")

        @Argument(help: "The zone.") var zone: String
        @Option(help: "Who: email, user id or contact name.") var participant: String
        @Option(help: "read-only or read-write.") var permission: ParticipantPermission
        @OptionGroup var quiet: QuietOption
        @OptionGroup var global: GlobalOptions

        func run() async throws {
            let context = try await SessionContext(global, createStore: false)
            let share = try await context.session.setPermission(permission.value, for: try await context.contact(matching: participant).userID, in: try await context.zone(zone))
            quiet.apply()
            if global.json { try ShareOutput.print(share, context: context, json: true); return }
            Output.line("\(participant) now has \(permission.value) access.")
        }
    }

    struct Public: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Set who may join with the URL alone.",
            discussion: "Going public removes pending named participants; back to none removes everyone who joined by the link and rotates the key.")

        @Argument(help: "The zone.") var zone: String
        @Argument(help: "none, read-only or read-write.") var permission: SharePermission
        @OptionGroup var quiet: QuietOption
        @OptionGroup var global: GlobalOptions

        func run() async throws {
            let context = try await SessionContext(global, createStore: false)
            let zoneID = try await context.zone(zone)
            let pending = try await context.session.fetchShare(in: zoneID).participants.filter { $0.role == .privateUser && $0.status == .pending }
            let share = try await context.session.setPublicPermission(permission, in: zoneID)
            quiet.apply()
            if global.json { try ShareOutput.print(share, context: context, json: true); return }
            Output.line("Public permission: \(permission). URL: \(share.url)")
            let dropped = pending.filter { p in !share.participants.contains { $0.userID == p.userID && $0.role == .privateUser } }
            if !dropped.isEmpty {
                Output.line("Removed the invitations not yet accepted (a public share admits by its link): "
                            + dropped.map { context.displayName($0.userID) }.joined(separator: ", ") + ". They can join with the URL.")
            }
        }
    }

    struct Remove: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Remove a participant; the zone key is rotated so they open nothing written after.")

        @Argument(help: "The zone.") var zone: String
        @Option(help: "Who: email, user id or contact name.") var participant: String
        @OptionGroup var quiet: QuietOption
        @OptionGroup var global: GlobalOptions

        func run() async throws {
            let context = try await SessionContext(global, createStore: false)
            let share = try await context.session.removeParticipant(try await context.contact(matching: participant).userID, from: try await context.zone(zone))
            quiet.apply()
            if global.json { try ShareOutput.print(share, context: context, json: true); return }
            Output.line("Removed \(participant). The zone key was rotated (epoch \(share.keyEpoch)); run 'coffer zone rekey \(zone)' to re-seal older records too.")
        }
    }
}

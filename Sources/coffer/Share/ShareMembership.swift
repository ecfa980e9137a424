import ArgumentParser
import CofferStore
import Foundation

extension Coffer.ShareCommand {
    struct Accept: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Accept a share URL as the acting user.",
            discussion: """
                A URL with a link secret (after '#') is a secret: given as an argument, it is visible to other local \
                users (ps) and kept in shell history. Pass '-' and give the URL on standard input instead \
                (coffer share accept - < url.txt).
                """)

        @Argument(help: ArgumentHelp("The share URL, or '-' to read it from standard input (safer: an argument is visible to other local users and in shell history).",
                                     valueName: "url"))
        var url: String
        @Flag(help: "Pin the owner's card in your vault (as 'contact add' does), so that ZONE@THEIR-EMAIL names the zone. On a terminal, accept asks.")
        var pin = false
        @OptionGroup var quiet: QuietOption
        @OptionGroup var global: GlobalOptions

        /// The longest standard input taken as a share URL (a URL is at most 200 bytes).
        static let maxInputBytes = 4096

        /// The URL argument, or the one line on standard input for `-` (surrounding spaces and the
        /// line ending dropped).
        func shareURL() throws -> String {
            guard url == "-" else { return url }
            let bytes = try InputFile.read("-", flag: "share accept", limit: Self.maxInputBytes, hiddenPrompt: "Share URL: ")
            guard let text = String(validating: bytes, as: UTF8.self)?.trimmingCharacters(in: .whitespacesAndNewlines) else {
                throw CLIError(ExitStatus.dataError, "standard input is not UTF-8 text; give one share URL on it")
            }
            guard !text.isEmpty else { throw CLIError(ExitStatus.dataError, "no share URL on standard input; pipe it in, e.g. 'coffer share accept - < url.txt'") }
            guard !text.contains(where: \.isNewline) else {
                throw CLIError(ExitStatus.dataError, "standard input holds more than one line; give one share URL")
            }
            return text
        }

        func run() async throws {
            let url = try shareURL()
            let context = try await SessionContext(global, createStore: false)
            let share = try await context.session.acceptShare(url: url)
            let me = context.session.userID
            let mine = share.participants.first { $0.userID == me }
            let owner = share.participants[0]
            // The zone's owner, as its signed first log entry names them: compare the fingerprint
            // with theirs. From now on this user's marks pin that owner for the zone.
            let fingerprint = (try? await context.contact(matching: owner.userID).fingerprint) ?? "unknown"
            let permission = mine?.permission.description ?? share.publicPermission.description
            // A name or an email names the owner only once their card is pinned: offer to pin it.
            var pinned = context.session.hasPinned(userID: owner.userID)
            if !pinned, pin || askToPin(owner: owner, fingerprint: fingerprint, zone: share.zoneID.name) {
                try await context.session.pinContact(userID: owner.userID)
                pinned = true
            }
            let ownerRef = pinned ? owner.email ?? owner.userID : owner.userID
            quiet.apply()
            if global.json {
                try RecordOutput.printJSON(["zone": "\(share.zoneID.name)@\(ownerRef)", "owner": share.zoneID.ownerID,
                                            "ownerName": owner.name ?? "", "ownerEmail": owner.email ?? "", "ownerFingerprint": fingerprint,
                                            "ownerPinned": pinned, "permission": permission] as [String: Any])
                return
            }
            Output.line("Accepted \(share.title.isEmpty ? "the share" : "'\(share.title)'") from \(owner.name ?? owner.userID): zone \(share.zoneID.name)@\(ownerRef) (\(permission)).")
            Output.line("Owner: \(owner.name ?? "-") <\(owner.email ?? "no email")>, user id \(owner.userID), fingerprint \(fingerprint)")
            Output.line("Compare the fingerprint with the owner's own ('coffer vault show' on their side) before you trust what they share.")
            if !pinned, let handle = owner.email ?? owner.name {
                Output.line("Their card is not pinned in your vault: name the zone \(share.zoneID.name)@\(owner.userID), or accept with --pin to name it \(share.zoneID.name)@\(handle).")
            }
        }

        /// On a terminal, asks whether to pin the owner's card; false without one (a script).
        func askToPin(owner: Share.Participant, fingerprint: String, zone: String) -> Bool {
            guard !global.json, let tty = Terminal.open() else { return false }
            defer { tty.close() }
            let who = "\(owner.name ?? owner.userID)\(owner.email.map { " <\($0)>" } ?? "")"
            return tty.confirm("Pin \(who)'s card (fingerprint \(fingerprint)) in your vault, so that \(zone)@\(owner.email ?? owner.name ?? owner.userID) names this zone? Compare the fingerprint with theirs first. [y/N] ")
        }
    }

    struct Leave: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Stop taking part in a share (as a participant).")

        @Argument(help: "The zone, as NAME@OWNER.") var zone: String
        @OptionGroup var quiet: QuietOption
        @OptionGroup var global: GlobalOptions

        func run() async throws {
            let context = try await SessionContext(global, createStore: false)
            let id = try await context.zone(zone)
            try await context.session.leaveShare(zone: id)
            quiet.apply()
            if global.json { try Output.json(["left": id.name, "owner": id.ownerID]); return }
            Output.line("You left the share of \(id.name).")
        }
    }

    struct Stop: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "End a share you own; your records stay, unshared, under a new key.")

        @Argument(help: "The zone.") var zone: String
        @OptionGroup var quiet: QuietOption
        @OptionGroup var global: GlobalOptions

        func run() async throws {
            let context = try await SessionContext(global, createStore: false)
            let id = try await context.zone(zone)
            try await context.session.stopSharing(zone: id)
            quiet.apply()
            if global.json { try Output.json(["stopped": id.name]); return }
            Output.line("Stopped sharing \(id.name). Its records stay, under a new zone key.")
        }
    }
}

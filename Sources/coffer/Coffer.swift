import ArgumentParser
import Foundation
import Logging

/// `coffer`: keys, records and shares from the shell. Each subcommand lives in its own
/// file; all logic is in the library modules.
struct Coffer: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "coffer",
        abstract: "An encrypted record store with end-to-end encrypted sharing.",
        discussion: """
            Every command acts as the user whose vault is opened (--vault, COFFER_VAULT). The passphrase \
            comes from COFFER_PASSPHRASE, --passphrase-file (COFFER_PASSPHRASE_FILE), a key file \
            (--key-file, COFFER_KEY_FILE), or a prompt on the terminal; never from a flag.

            Exit codes: 0 ok, 1 other failure, 64 bad command line or no passphrase, 65 malformed or \
            tampered input, 66 not found, 69 the store's server cannot be reached, 73 already exists, 75 conflict \
            or busy, 77 wrong passphrase or not allowed, 130 or 143 stopped by Ctrl-C (SIGINT) or SIGTERM.
            """,
        version: "0.1.0",
        subcommands: [VaultCommand.self, ContactCommand.self, ZoneCommand.self, RecordCommand.self, SchemaCommand.self, ShareCommand.self, Changes.self, Sync.self, Status.self, ConflictCommand.self,
                      Audit.self, BackupCommand.self, RestoreCommand.self, Unlock.self, Lock.self, ServerCommand.self, Serve.self, Demo.self, AgentRun.self]
    )
}

@main
enum CofferMain {
    static func main() async {
        let level: Logger.Level
        switch ProcessInfo.processInfo.environment["COFFER_LOG_LEVEL"] {
        case nil, "": level = .error
        case let name?:
            guard let known = Logger.Level(rawValue: name.lowercased()) else {
                let names = Logger.Level.allCases.map(\.rawValue).joined(separator: ", ")
                ErrorReporter.fail(ExitStatus.usage, "COFFER_LOG_LEVEL is '\(name)'; use one of \(names)")
            }
            level = known
        }
        LoggingSystem.bootstrap { label in
            var handler = StreamLogHandler.standardError(label: label)
            handler.logLevel = level
            return handler
        }
        // The arguments as the shell gave them: Swift's `CommandLine.arguments` replaces bytes that
        // are not UTF-8 with U+FFFD, which would then be saved as if typed.
        for i in 1..<Int(CommandLine.argc) where CommandLine.unsafeArgv[i].map({ String(validatingCString: $0) == nil }) ?? false {
            ErrorReporter.exit(with: CLIError.usage("argument \(i) is not valid UTF-8 text"))
        }
        do {
            var command = try Coffer.parseAsRoot()
            if var asyncCommand = command as? AsyncParsableCommand {
                try await asyncCommand.run()
            } else {
                try command.run()
            }
            await SessionContext.pullWrittenZones()
            SessionContext.finish()
        } catch {
            ErrorReporter.exit(with: error)
        }
    }
}

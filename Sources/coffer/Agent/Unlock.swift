import ArgumentParser
import CofferVault
import Foundation

extension Coffer {
    struct Unlock: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Unlock the vault once: an agent keeps its key in memory, so later commands need no passphrase.",
            discussion: """
                Asks for the passphrase (or takes a key file) as any command does, never from the agent, \
                then starts a background agent that holds the vault key until --for runs out (default \
                15m), 'coffer lock', or SIGTERM/SIGINT/SIGHUP. Commands of this user on this vault then \
                get the key from it, unless --key-file or --passphrase-file is given. An agent already \
                running for the vault is replaced. Its socket is in $XDG_RUNTIME_DIR/coffer/ (or \
                /tmp/coffer-UID/), mode 0600; it answers only processes of this user. When /tmp/coffer-UID \
                is another user's (or a symbolic link, or not mode 0700), the socket goes to \
                ~/.cache/coffer/agent/ ($XDG_CACHE_HOME/coffer/agent/) instead, with a note on standard \
                error, and later commands look there too.
                """)

        @Option(name: .customLong("for"), help: ArgumentHelp("How long the agent keeps the key: 30s, 15m, 2h, 1h30m (1s to 24h).", valueName: "duration"))
        var duration: AgentDuration?

        @Flag(help: "Say whether an agent holds this vault's key, and until when; asks for nothing.")
        var status = false

        @OptionGroup var global: VaultOptions

        func validate() throws {
            if status && duration != nil { throw CLIError.usage("give --status or --for, not both") }
        }

        func run() async throws {
            if status { return try AgentStatusReport.print(global) }
            let lifetime = duration ?? .standard
            try global.requireVault()
            let environment = global.environment
            // A folder that is not safe fails before the passphrase is asked for.
            let runtime = AgentRuntime(environment: environment)
            try AgentUnlock.mapErrors { try runtime.prepareFolder() }
            if let note = runtime.note { Output.err(Data((note + "\n").utf8)) }
            let vault = try global.openVault(agent: false)
            let realPath = try AgentUnlock.mapErrors { try AgentRuntime.realPath(ofVault: vault.url.path) }
            let replaced = try AgentUnlock.lock(vaultAt: vault.url, environment: environment)
            let agent = try AgentLauncher.start(vault: realPath, key: vault.vaultKey, seconds: lifetime.seconds, environment: environment)
            if global.json {
                struct Unlocked: Encodable {
                    let vault: String, socket: String, pid: Int32, expires: Date, seconds: Int, replaced: Bool
                }
                try Output.json(Unlocked(vault: realPath, socket: agent.socket, pid: agent.pid, expires: agent.expires,
                                         seconds: lifetime.seconds, replaced: replaced))
            } else {
                Output.line("Unlocked \(realPath) until \(Output.iso(agent.expires)) (\(lifetime.text)): commands of yours on this vault get its key from the agent (pid \(agent.pid)) without a passphrase.")
                if replaced { Output.line("The agent that held it before was stopped.") }
                Output.line("'coffer lock' forgets the key sooner.")
            }
        }
    }
}

/// `coffer unlock --status`.
enum AgentStatusReport {
    static func print(_ global: VaultOptions) throws {
        try global.requireVault()
        let status: AgentStatus?
        let vault: String
        do {
            let client = try VaultAgentClient(vault: global.vaultURL.path, environment: global.environment)
            vault = client.vault
            do { status = try client.status() } catch let e as AgentError where e.code == .notRunning { status = nil }
        } catch let e as AgentError {
            throw AgentUnlock.cliError(e)
        }
        if global.json {
            struct Status: Encodable { let vault: String, unlocked: Bool, pid: Int32?, expires: Date? }
            try Output.json(Status(vault: vault, unlocked: status != nil, pid: status?.pid, expires: status?.expires))
        } else if let status {
            let left = max(0, Int(status.expires.timeIntervalSinceNow.rounded()))
            Output.line("Unlocked: an agent (pid \(status.pid)) holds the key of \(vault) until \(Output.iso(status.expires)) (\(AgentDuration(seconds: left).text) left).")
        } else {
            Output.line("Locked: no agent holds the key of \(vault).")
        }
    }
}

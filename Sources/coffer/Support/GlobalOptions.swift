import ArgumentParser
import CofferCrypto
import CofferStore
import CofferVault
import Foundation
import Logging

/// Where the store is: the flags of commands that read or write one.
struct StoreFlags: ParsableArguments {
    @Option(name: .customLong("store"), help: ArgumentHelp("The store: an SQLite file (only zone create and contact add create a missing one), or a PostgreSQL database as postgres://USER@HOST[:PORT]/DB or postgres://USER@/DB?host=/socket/dir.", valueName: "path|url"))
    var storePath: String?

    @Option(name: .customLong("server"), help: ArgumentHelp("Work through a Coffer server (coffer serve) instead of a local store, with a local replica of the zones you read; the vault stays local.", valueName: "url"))
    var server: String?

    @Option(name: .customLong("replica"), help: ArgumentHelp("With --server: the replica file (default DATA/coffer/replicas/STORE-ID/USER-ID.sqlite).", valueName: "path"))
    var replicaPath: String?

    @Flag(help: "With --server: do not try the server; reads come from the replica.")
    var offline = false
}

/// Who acts, and how output is shaped: the flags of every command that opens a vault.
struct UserFlags: ParsableArguments {
    @Option(name: .customLong("vault"), help: ArgumentHelp("The acting user's vault file.", valueName: "path"))
    var vaultPath: String?

    @Option(name: .customLong("passphrase-file"), help: ArgumentHelp("Read the vault passphrase from the first line of a file.", valueName: "path"))
    var passphraseFile: String?

    @Option(name: .customLong("key-file"), help: ArgumentHelp("Unlock the vault with a key file instead of a passphrase.", valueName: "path"))
    var keyFile: String?

    @Option(help: ArgumentHelp("Take the store or server, vault and key file from this profile of the config file (COFFER_PROFILE).", valueName: "name"))
    var profile: String?

    @Flag(help: "Machine-readable output on stdout.")
    var json = false
}

/// The options every store command accepts, among its own arguments.
struct GlobalOptions: ParsableArguments, CommandOptions {
    @OptionGroup var storeFlags: StoreFlags
    @OptionGroup var userFlags: UserFlags

    /// Set by a command that reads a local store whatever COFFER_SERVER says (`zone push`).
    var localOnly = false

    enum CodingKeys: CodingKey { case storeFlags, userFlags }

    func validate() throws { try ErrorReporter.keepingStatus(validateOptions) }
}

/// The options of a command that works on the vault alone: the store flags are accepted (a
/// shell alias may add them to every command) but not listed in its help, since they change nothing.
struct VaultOptions: ParsableArguments, CommandOptions {
    @OptionGroup(visibility: .hidden) var storeFlags: StoreFlags
    @OptionGroup var userFlags: UserFlags

    var localOnly: Bool { false }

    func validate() throws { try ErrorReporter.keepingStatus(validateOptions) }
}

/// What ``GlobalOptions`` and ``VaultOptions`` share: finding the vault, the store and the profile.
protocol CommandOptions {
    var storeFlags: StoreFlags { get }
    var userFlags: UserFlags { get }
    var localOnly: Bool { get }
}

extension CommandOptions {
    var storePath: String? { storeFlags.storePath }
    var server: String? { storeFlags.server }
    var offline: Bool { storeFlags.offline }
    var vaultPath: String? { userFlags.vaultPath }
    var passphraseFile: String? { userFlags.passphraseFile }
    var keyFile: String? { userFlags.keyFile }
    var json: Bool { userFlags.json }

    /// The process environment, with the chosen profile's settings for what it does not set
    /// (see ``ConfigFile``): flags win over both.
    var environment: [String: String] {
        let environment = ProcessInfo.processInfo.environment
        guard let profile = try? ConfigFile.profile(named: userFlags.profile, environment: environment) else { return environment }
        return profile.overlaid(on: environment)
    }

    /// A path flag given empty is a mistake (an unset shell variable, say), not a request for the
    /// default: `--store ""` would otherwise act on the default store.
    func validateOptions() throws {
        _ = try ConfigFile.profile(named: userFlags.profile, environment: ProcessInfo.processInfo.environment)
        for (flag, value) in [("--store", storePath), ("--vault", vaultPath), ("--passphrase-file", passphraseFile), ("--key-file", keyFile),
                              ("--replica", storeFlags.replicaPath)]
        where value?.isEmpty == true {
            throw CLIError.usage("\(flag) was given an empty path")
        }
        // Only the flag: a COFFER_STORE of another kind does not stop commands that need no store.
        if storePath != nil { try checkPostgresStore() }
        if storePath != nil && server != nil { throw CLIError.usage("give --store or --server, not both") }
        if server != nil { _ = try serverURL() }
        if storeFlags.replicaPath != nil || offline, try serverURL() == nil {
            throw CLIError.usage("\(offline ? "--offline" : "--replica") works with --server (or COFFER_SERVER)")
        }
    }

    /// The replica file `--replica` or `COFFER_REPLICA` names; nil for the default path.
    var replicaURL: URL? {
        guard let path = storeFlags.replicaPath ?? environment["COFFER_REPLICA"], !path.isEmpty else { return nil }
        return URL(fileURLWithPath: path)
    }

    /// Opens the replica of the server the command works through (see ``Replica``): connected
    /// unless `--offline`, waiting at most a second for the server.
    func openReplica(server: URL, vault: Vault) async throws -> Replica {
        try await Replica.open(server: server, vault: vault, path: replicaURL, dataFolder: Self.defaultFolder(environment), offline: offline,
                               logger: CLILog.logger)
    }

    /// The Coffer server the command works through: `--server`, else `COFFER_SERVER` unless
    /// `--store` names a local store. Checked before any passphrase prompt.
    func serverURL() throws -> URL? {
        if localOnly { return nil }
        let (source, value): (String, String)
        if let server { (source, value) = ("--server", server) } else if storePath == nil, let env = environment["COFFER_SERVER"], !env.isEmpty {
            (source, value) = ("COFFER_SERVER", env)
        } else {
            return nil
        }
        guard let url = URL(string: value), let scheme = url.scheme?.lowercased(), ["http", "https"].contains(scheme), url.host?.isEmpty == false,
              url.user == nil, url.password == nil, url.query == nil, url.fragment == nil else {
            throw CLIError.usage("\(source) takes a server's http:// or https:// URL, such as http://127.0.0.1:8080")
        }
        return url
    }

    /// Fails with 64 for a command that works only on a local store's files, when a server is given.
    func requireLocal(_ what: String) throws {
        if try serverURL() != nil { throw CLIError.usage("\(what) works on a local store's files, not through --server or COFFER_SERVER") }
    }

    /// The PostgreSQL database that `--store` or `COFFER_STORE` names, if it names one. Its URL is
    /// checked (a password in it is refused: it would stand in argv and shell history) before any
    /// passphrase prompt: for `--store` when the command line is parsed, for both when a command
    /// opens its store.
    func postgresStore() throws -> PostgresURL? {
        if try serverURL() != nil { return nil }
        let (source, value) = storePath.map { ("--store", $0) } ?? ("COFFER_STORE", environment["COFFER_STORE"] ?? "")
        guard PostgresURL.isPostgresURL(value.lowercased()) else { return nil }
        do {
            return try PostgresURL(value)
        } catch let error as StoreError {
            throw CLIError.usage("\(source): \(error.message)")
        }
    }

    /// Checks a `postgres://` store's URL (see ``postgresStore()``).
    func checkPostgresStore() throws { _ = try postgresStore() }

    /// `$XDG_DATA_HOME/coffer` or `~/.local/share/coffer`.
    static func defaultFolder(_ env: [String: String]) -> URL {
        if let xdg = env["XDG_DATA_HOME"], !xdg.isEmpty {
            return URL(fileURLWithPath: xdg).appendingPathComponent("coffer")
        }
        let home = env["HOME"].map { URL(fileURLWithPath: $0) } ?? FileManager.default.homeDirectoryForCurrentUser
        return home.appendingPathComponent(".local/share/coffer")
    }

    var vaultURL: URL {
        if let p = vaultPath ?? environment["COFFER_VAULT"], !p.isEmpty { return URL(fileURLWithPath: p) }
        return Self.defaultFolder(environment).appendingPathComponent("vault.coffer")
    }

    var storeURL: URL {
        if let p = storePath ?? environment["COFFER_STORE"], !p.isEmpty { return URL(fileURLWithPath: p) }
        return Self.defaultFolder(environment).appendingPathComponent("store.sqlite")
    }

    /// Creates the default data folder (mode 0700) when a default path is used.
    func ensureFolder(for url: URL) throws {
        let folder = url.deletingLastPathComponent()
        if folder.path == Self.defaultFolder(environment).path, !FileManager.default.fileExists(atPath: folder.path) {
            try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true,
                                                    attributes: [.posixPermissions: 0o700])
        }
    }

    /// How to unlock: a key file (flag, then env) or a passphrase (file flag, env file, env, prompt).
    func unlock() throws -> VaultUnlock {
        if keyFile != nil && passphraseFile != nil {
            throw CLIError.usage("give either --key-file or --passphrase-file, not both")
        }
        if let keyPath = keyFile ?? (passphraseFile == nil ? environment["COFFER_KEY_FILE"] : nil), !keyPath.isEmpty {
            return try VaultUnlock.keyFile(at: URL(fileURLWithPath: keyPath))
        }
        return .passphrase(try Passphrase.read(fileFlag: passphraseFile, environment: environment,
                                               prompt: "Passphrase for \(vaultURL.path): "))
    }

    /// Fails with 66 unless a file is at ``vaultURL``.
    func requireVault() throws {
        guard FileManager.default.fileExists(atPath: vaultURL.path) else {
            throw CLIError(ExitStatus.notFound, "no vault at \(vaultURL.path); create one with 'coffer vault init --name NAME' or pass --vault")
        }
    }

    /// Opens the acting user's vault: with the key of the unlock agent (`coffer unlock`) when one
    /// holds it and neither --key-file nor --passphrase-file is given (and `agent` is true), else
    /// as ``unlock()`` says.
    func openVault() throws -> Vault { try openVault(agent: true) }

    func openVault(agent: Bool) throws -> Vault {
        try requireVault()
        if agent, keyFile == nil, passphraseFile == nil, let vault = AgentUnlock.openVault(at: vaultURL, environment: environment) {
            return vault
        }
        return try Vault.open(at: vaultURL, unlock: unlock(), logger: CLILog.logger)
    }

    /// Opens the store. Only a command that writes something new into a store may `create` it
    /// (and the default folder). For any other, a missing store is a mistyped `--store` or
    /// `COFFER_STORE`: it fails with 66 rather than leaving an empty store behind. An empty file
    /// counts as missing (setting it up would write).
    func openStore(create: Bool, vault: () throws -> Vault) async throws -> Store {
        if let server = try serverURL() {
            return try await Store(server: server, vault: try vault(), logger: CLILog.logger)
        }
        if let postgres = try postgresStore() {
            // The database must exist; Coffer sets up its tables on first use.
            return try await Store(postgres: postgres, password: PostgresPassword.lookup(for: postgres), logger: CLILog.logger)
        }
        let url = storeURL
        if create {
            try ensureFolder(for: url)
            let store = try Store(path: url.path, create: true, logger: CLILog.logger)
            SessionContext.opened(store)
            return store
        }
        try requireStore()
        do {
            let store = try Store(path: url.path, create: false, logger: CLILog.logger)
            SessionContext.opened(store)
            return store
        } catch let error as StoreError where error.code == .unknownItem && !FileManager.default.fileExists(atPath: url.path) {
            throw noStore("") // removed since it was looked at
        }
    }

    /// Fails with 66 unless a store file with something in it is at ``storeURL``.
    func requireStore() throws {
        if try postgresStore() != nil || serverURL() != nil { return }
        let size = (try? FileManager.default.attributesOfItem(atPath: storeURL.path))?[.size] as? Int
        guard let size else { throw noStore("") }
        guard size > 0 else { throw noStore(" (the file is empty)") }
    }

    private func noStore(_ detail: String) -> CLIError {
        CLIError(ExitStatus.notFound,
                 "no store at \(storeURL.path)\(detail); check --store or COFFER_STORE, or create one with 'coffer zone create NAME'")
    }
}

/// The CLI's logger.
enum CLILog {
    /// Where the library logs for the CLI: stderr, at `COFFER_LOG_LEVEL` (errors only by default).
    static let logger = Logger(label: "coffer")
}

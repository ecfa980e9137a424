import Foundation
import CofferCrypto
import CofferStore
import TOMLKit

/// The config file, `$XDG_CONFIG_HOME/coffer/config.toml` (`~/.config/coffer/config.toml`):
/// named profiles, each a store or a server, a vault, and a key file or passphrase file.
///
/// ```toml
/// default = "work"                 # the profile used when none is chosen (optional)
///
/// [profile.work]
/// server = "https://coffer.example.com"
/// vault = "~/keys/work.coffer"
/// key-file = "~/keys/work.cofferkey"
///
/// [profile.home]
/// store = "~/notes.sqlite"         # or postgres://USER@HOST/DB
/// ```
///
/// A profile is chosen by `--profile NAME`, else `COFFER_PROFILE`, else `default`. Its settings
/// stand in for the environment variables (`COFFER_STORE`, `COFFER_SERVER`, `COFFER_VAULT`,
/// `COFFER_KEY_FILE`, `COFFER_PASSPHRASE_FILE`) that are not set, so flags and environment
/// variables win over it. The file holds no secret. Unknown keys, tables and values of the wrong
/// kind are refused: a typo would otherwise act on another store.
enum ConfigFile {
    /// One profile's settings.
    struct Profile: Equatable {
        var store: String?
        var server: String?
        var vault: String?
        var keyFile: String?
        var passphraseFile: String?

        /// `environment` with this profile's settings where it sets nothing of the same kind: where
        /// the store is (store or server) and how to unlock (key file, passphrase file, passphrase)
        /// are each one choice, taken whole from the environment when it makes it.
        func overlaid(on environment: [String: String]) -> [String: String] {
            var result = environment
            func isSet(_ name: String) -> Bool { !(environment[name] ?? "").isEmpty }
            if !isSet("COFFER_STORE") && !isSet("COFFER_SERVER") {
                if let store { result["COFFER_STORE"] = store }
                if let server { result["COFFER_SERVER"] = server }
            }
            if !isSet("COFFER_VAULT"), let vault { result["COFFER_VAULT"] = vault }
            if !isSet("COFFER_KEY_FILE") && !isSet("COFFER_PASSPHRASE_FILE") && !isSet("COFFER_PASSPHRASE") {
                if let keyFile { result["COFFER_KEY_FILE"] = keyFile }
                if let passphraseFile { result["COFFER_PASSPHRASE_FILE"] = passphraseFile }
            }
            return result
        }
    }

    static let keys = ["store", "server", "vault", "key-file", "passphrase-file"]

    /// `$XDG_CONFIG_HOME/coffer/config.toml`, or `~/.config/coffer/config.toml`.
    static func url(_ environment: [String: String]) -> URL {
        if let xdg = environment["XDG_CONFIG_HOME"], !xdg.isEmpty {
            return URL(fileURLWithPath: xdg).appendingPathComponent("coffer/config.toml")
        }
        let home = environment["HOME"].map { URL(fileURLWithPath: $0) } ?? FileManager.default.homeDirectoryForCurrentUser
        return home.appendingPathComponent(".config/coffer/config.toml")
    }

    /// The profile `flag`, `COFFER_PROFILE` or the file's `default` names; nil when none is named.
    /// - Throws: ``CLIError`` 64 for a profile the file does not have (or no file), 65 for a file
    ///   that does not parse or holds what this page does not describe.
    static func profile(named flag: String?, environment: [String: String]) throws -> Profile? {
        let url = url(environment)
        let chosen = flag ?? environment["COFFER_PROFILE"].flatMap { $0.isEmpty ? nil : $0 }
        let source = flag != nil ? "--profile" : "COFFER_PROFILE"
        guard FileManager.default.fileExists(atPath: url.path) else {
            if let chosen { throw CLIError.usage("\(source) names profile '\(chosen)', but there is no config file at \(url.path)") }
            return nil
        }
        let file = try load(url)
        guard let name = chosen ?? file.defaultProfile else { return nil }
        guard let profile = file.profiles[name] else {
            let known = file.profiles.keys.sorted()
            let origin = chosen == nil ? "the config file's default" : source
            throw CLIError.usage("\(origin) names profile '\(name)', which \(url.path) does not have"
                                 + (known.isEmpty ? "" : " (profiles: \(known.joined(separator: ", ")))"))
        }
        return profile
    }

    /// The parsed file, read once per process.
    private static let cache = Locked<[String: (profiles: [String: Profile], defaultProfile: String?)]>([:])

    static func load(_ url: URL) throws -> (profiles: [String: Profile], defaultProfile: String?) {
        if let cached = cache.withLock({ $0[url.path] }) { return cached }
        guard let data = FileManager.default.contents(atPath: url.path), let text = String(data: data, encoding: .utf8) else {
            throw CLIError(ExitStatus.dataError, "cannot read \(url.path) as UTF-8 text")
        }
        let parsed = try parse(text, path: url.path, folder: url.deletingLastPathComponent())
        cache.withLock { $0[url.path] = parsed }
        return parsed
    }

    /// Parses the file's text. Relative paths are relative to `folder` (the file's), `~/` is the home folder.
    static func parse(_ text: String, path: String, folder: URL) throws -> (profiles: [String: Profile], defaultProfile: String?) {
        let table: TOMLTable
        do { table = try TOMLTable(string: text) } catch let error as TOMLParseError {
            throw CLIError(ExitStatus.dataError, "\(path):\(error.source.begin.line):\(error.source.begin.column): \(error.description)")
        }
        func bad(_ what: String) -> CLIError { CLIError(ExitStatus.dataError, "\(path): \(what)") }
        var defaultProfile: String?
        var profiles = [String: Profile]()
        for key in table.keys {
            switch key {
            case "default":
                guard let name = table[key]?.string else { throw bad("'default' takes a profile name in quotes") }
                defaultProfile = name
            case "profile":
                guard let all = table[key]?.table else { throw bad("'profile' must be tables such as [profile.work]") }
                for name in all.keys {
                    guard let entry = all[name]?.table else { throw bad("profile.\(name) must be a table ([profile.\(name)])") }
                    profiles[name] = try profile(entry, name: name, folder: folder, bad: bad)
                }
            default:
                throw bad("unknown key '\(key)'; the file has 'default' and [profile.NAME] tables")
            }
        }
        return (profiles, defaultProfile)
    }

    private static func profile(_ entry: TOMLTable, name: String, folder: URL, bad: (String) -> CLIError) throws -> Profile {
        var profile = Profile()
        for key in entry.keys {
            guard keys.contains(key) else {
                throw bad("unknown key '\(key)' in [profile.\(name)]; a profile has \(keys.joined(separator: ", "))")
            }
            guard let value = entry[key]?.string, !value.isEmpty else { throw bad("\(key) in [profile.\(name)] takes a non-empty string") }
            switch key {
            case "store": profile.store = PostgresURL.isPostgresURL(value.lowercased()) ? value : expand(value, folder: folder)
            case "server": profile.server = value
            case "vault": profile.vault = expand(value, folder: folder)
            case "key-file": profile.keyFile = expand(value, folder: folder)
            default: profile.passphraseFile = expand(value, folder: folder)
            }
        }
        if profile.store != nil && profile.server != nil { throw bad("[profile.\(name)] names both a store and a server; keep one") }
        if profile.keyFile != nil && profile.passphraseFile != nil { throw bad("[profile.\(name)] names both a key file and a passphrase file; keep one") }
        return profile
    }

    /// `~/x` in the home folder, a relative path in `folder`, an absolute one as it is.
    static func expand(_ path: String, folder: URL) -> String {
        if path == "~" || path.hasPrefix("~/") {
            let home = ProcessInfo.processInfo.environment["HOME"].flatMap { $0.isEmpty ? nil : $0 }
                ?? FileManager.default.homeDirectoryForCurrentUser.path
            return home + path.dropFirst()
        }
        if path.hasPrefix("/") { return path }
        return folder.appendingPathComponent(path).path
    }
}

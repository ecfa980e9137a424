import ArgumentParser
import CofferCrypto

extension Coffer {
    struct VaultCommand: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "vault",
            abstract: "Create and use your vault: identity keys and keychain-like items.",
            subcommands: [Init.self, Show.self, ExportContact.self, Passwd.self, Keyfile.self, ItemCommand.self]
        )
    }
}

/// The Argon2id cost of a vault's passphrase.
enum KDFPreset: String, ExpressibleByArgument, CaseIterable {
    case min, interactive, moderate, sensitive

    var parameters: Argon2id.Parameters {
        switch self {
        case .min: return .min
        case .interactive: return .interactive
        case .moderate: return .moderate
        case .sensitive: return .sensitive
        }
    }

    static func name(of parameters: Argon2id.Parameters) -> String {
        allCases.first { $0.parameters == parameters }?.rawValue ?? "custom"
    }

    /// The values `--help` and completions list: `min` is accepted but only for tests, so not advertised.
    static var allValueStrings: [String] { ["interactive", "moderate", "sensitive"] }

    /// What choosing `min` prints on stderr.
    static let minWarning = "warning: the min Argon2id preset is for tests only; use it for throwaway vaults"

    /// Prints ``minWarning`` when this is `min`.
    func warnIfForTestsOnly() {
        if self == .min { Output.note(Self.minWarning) }
    }
}

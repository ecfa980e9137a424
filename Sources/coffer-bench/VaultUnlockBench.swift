import ArgumentParser
import CofferCrypto
import CofferVault
import Foundation

/// Time to open a vault, per Argon2id preset and by key file.
struct VaultUnlockBench: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "vault",
        abstract: "Vault unlock time per KDF preset and by key file (median of several opens).")

    @Option(help: "Opens per preset (sensitive uses at most 3).") var runs = 5
    @Flag(help: "Skip the sensitive preset (1 GiB of memory).") var skipSensitive = false
    @Flag(help: "One JSON object on stdout.") var json = false

    func run() async throws {
        let folder = try Clock.temporaryFolder("coffer-bench-vault")
        defer { try? FileManager.default.removeItem(at: folder) }
        let passphrase = SecureBytes(copying: Array("benchmark passphrase".utf8))
        var presets: [(String, Argon2id.Parameters)] = [("min", .min), ("interactive", .interactive), ("moderate", .moderate)]
        if !skipSensitive { presets.append(("sensitive", .sensitive)) }
        var results: [String: Any] = [:]
        var keyFileVault: URL?
        for (name, parameters) in presets {
            let url = folder.appendingPathComponent("\(name).coffer")
            let vault = try Vault.create(at: url, name: "Bench", passphrase: passphrase, kdf: parameters)
            if name == "min" {
                try vault.addKeyFile(at: folder.appendingPathComponent("bench.key"))
                keyFileVault = url
            }
            let n = name == "sensitive" ? min(runs, 3) : runs
            let times = try (0..<n).map { _ in try Clock.seconds { _ = try Vault.open(at: url, passphrase: passphrase) } }
            results[name] = ["medianMilliseconds": Clock.median(times) * 1000, "runs": n,
                             "opsLimit": parameters.opsLimit, "memoryKiB": parameters.memoryKiB]
            if !json { print(name.padding(toLength: 12, withPad: " ", startingAt: 0) + String(format: " %8.1f ms  (Argon2id %d passes, %d KiB, median of %d)",
                                    Clock.median(times) * 1000, parameters.opsLimit, parameters.memoryKiB, n)) }
        }
        if let keyFileVault {
            let unlock = try VaultUnlock.keyFile(at: folder.appendingPathComponent("bench.key"))
            let n = max(runs, 20)
            let times = try (0..<n).map { _ in try Clock.seconds { _ = try Vault.open(at: keyFileVault, unlock: unlock) } }
            results["keyFile"] = ["medianMilliseconds": Clock.median(times) * 1000, "runs": n]
            if !json { print("key file    " + String(format: " %8.3f ms  (BLAKE2b slot key, median of %d)", Clock.median(times) * 1000, n)) }
        }
        if json { Clock.emitJSON(["vaultUnlock": results, "libsodium": CryptoLibrary.version]) }
    }
}

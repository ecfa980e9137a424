import ArgumentParser
import CofferCrypto
import Foundation

/// The cost of signed writes, per commit and per record: the writer hashes each record version
/// (BLAKE2b over its fields, plain JSON and ~1.1 KB sealed bytes), hashes the entry list and
/// signs once (Ed25519); a reader verifies the signature once per commit and re-hashes each record.
struct SigningBench: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "signing",
        abstract: "Cost of signed writes: record hashing, one Ed25519 signature per 400-record commit, verification.")

    @Option(help: "Commits to sign and verify.") var commits = 2000
    @Flag(help: "One JSON object on stdout.") var json = false

    func run() async throws {
        let key = Ed25519.PrivateKey()
        let sealed = SecureRandom.bytes(count: 1133), plain = Array(#"{"count":3,"date":1700000000.0,"title":"bravo delta echo echo lumen ju"}"#.utf8)
        let header = [UInt8](repeating: 7, count: 150)
        var hashes = [[UInt8]]()
        let recordHashes = 400 * 50
        let hashSeconds = Clock.seconds {
            for _ in 0..<recordHashes {
                let h = header.withUnsafeBytes { hb in plain.withUnsafeBytes { pb in sealed.withUnsafeBytes { sb in BLAKE2b.hash(parts: [hb, pb, sb]) } } }
                if hashes.count < 400 { hashes.append(h) }
            }
        }
        let entries = hashes.flatMap { $0 }
        var signatures = [[UInt8]]()
        var message = [UInt8]()
        let signSeconds = Clock.seconds {
            for i in 0..<commits {
                message = Array("coffer.commit.v1".utf8) + BigEndian.bytes(UInt64(i)) + [UInt8](repeating: 1, count: 120) + BLAKE2b.hash(entries)
                signatures.append(key.signature(for: message))
            }
        }
        var ok = 0
        let verifySeconds = Clock.seconds {
            for (i, signature) in signatures.enumerated() {
                let m = Array("coffer.commit.v1".utf8) + BigEndian.bytes(UInt64(i)) + [UInt8](repeating: 1, count: 120) + BLAKE2b.hash(entries)
                if key.publicKey.isValidSignature(signature, for: m) { ok += 1 }
            }
        }
        guard ok == commits else { throw ValidationError("verification failed") }
        let perHash = hashSeconds / Double(recordHashes) * 1e6
        let perSign = signSeconds / Double(commits) * 1e6, perVerify = verifySeconds / Double(commits) * 1e6
        let result: [String: Any] = [
            "recordHashMicroseconds": (perHash * 100).rounded() / 100,
            "commitSignMicroseconds": (perSign * 10).rounded() / 10,
            "commitVerifyMicroseconds": (perVerify * 10).rounded() / 10,
            "perRecordWriteMicroseconds400": ((perHash + perSign / 400) * 100).rounded() / 100,
            "perRecordReadMicroseconds400": ((perHash + perVerify / 400) * 100).rounded() / 100,
            "commits": commits, "libsodium": CryptoLibrary.version,
        ]
        if json { Clock.emitJSON(result); return }
        print(String(format: "record version hash     %8.2f µs (1.1 KB sealed + plain JSON + fields)", perHash))
        print(String(format: "commit signature        %8.1f µs (entry-list hash + Ed25519 sign, 400 entries)", perSign))
        print(String(format: "commit verification     %8.1f µs (entry-list hash + Ed25519 verify)", perVerify))
        print(String(format: "per record, 400/commit  %8.2f µs to write, %.2f µs to read", perHash + perSign / 400, perHash + perVerify / 400))
    }
}

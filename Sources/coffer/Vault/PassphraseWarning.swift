import CofferCrypto
import CofferVault

/// The warning `vault init` and `vault passwd` print on stderr for a weak new passphrase
/// (`PassphraseStrength`): an estimate and its reasons, never the passphrase. It does not refuse.
enum PassphraseWarning {
    static func warnIfWeak(_ passphrase: SecureBytes) {
        let estimate = PassphraseStrength(passphrase)
        guard estimate.isWeak else { return }
        let reasons = estimate.reasons.isEmpty ? "" : "; " + estimate.reasons.joined(separator: "; ")
        Output.note("warning: this passphrase is weak (about \(estimate.bits) bits\(reasons)): whoever copies the vault file can try guesses offline; a passphrase of five or more random words is far stronger")
    }
}

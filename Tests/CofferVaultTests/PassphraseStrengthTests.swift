import CofferCrypto
@testable import CofferVault
import Foundation
import Testing

/// The estimate behind the weak-passphrase warning, on known values.
@Suite struct PassphraseStrengthTests {
    func estimate(_ text: String) -> PassphraseStrength { PassphraseStrength(SecureBytes(copying: Array(text.utf8))) }

    @Test("length × log2(pool), with runs and repeats counted a quarter")
    func formula() {
        #expect(estimate("abcdefghijkl").bits == Int((1 + 11 * 0.25) * log2(26.0)))
        #expect(estimate("qzmxnwbvlpeu").bits == Int(12 * log2(26.0)))
        #expect(estimate("qzmxnwbvlpeU7!").bits == Int(14 * log2(95.0)))
        #expect(estimate("aaaa").bits == Int(1.75 * log2(26.0)))
        #expect(estimate("ééé").bits == Int(1.5 * log2(100.0)))
        #expect(estimate("Quokka-LANTERN-4471-vellum-passphrase").isWeak == false)
    }

    @Test("common passwords: 10 bits, plus the ending's estimate; case does not matter")
    func common() {
        #expect(estimate("password").bits == 10)
        #expect(estimate("PassWord").bits == 10)
        #expect(estimate("dragon99").bits == 10 + Int(1.25 * log2(10.0)))
        #expect(estimate("dragonfly").reasons.allSatisfy { !$0.contains("common") })
        #expect(estimate("letmein").reasons.contains("it is one of the most common passwords"))
    }

    @Test("reasons never quote the passphrase")
    func reasonsQuoteNothing() {
        for text in ["hunter2", "Password123!", "zzzzzzzzzz", "abc"] {
            #expect(estimate(text).isWeak)
            #expect(estimate(text).reasons.allSatisfy { !$0.contains(text) })
        }
    }
}

import CofferCrypto
import Foundation

/// A rough estimate of how hard a new passphrase is to guess, for a warning (never a refusal).
///
/// ```swift
/// let estimate = PassphraseStrength(passphrase)
/// if estimate.isWeak { print("about \(estimate.bits) bits; \(estimate.reasons.joined(separator: ", "))") }
/// ```
///
/// The passphrase is read in place, in its guarded memory; nothing of it is copied or kept, and
/// the reasons never quote it. The estimate:
/// - the pool is the sum of the character classes used: lowercase 26, uppercase 26, digits 10,
///   ASCII symbols and space 33, anything else (non-ASCII characters) 100;
/// - each character counts 1, except one that repeats the one before it or continues a run of
///   consecutive letters or digits (`abc`, `321`), which counts 1/4;
/// - bits = counted length × log2(pool);
/// - a passphrase that is one of a short list of very common passwords (compared ignoring
///   case) is about 10 bits; one of them followed only by digits and symbols (`Password123!`)
///   is 10 bits plus that ending's own estimate.
///
/// Under ``weakBelow`` bits it is weak. The estimate overrates words that people choose
/// (`correct horse battery staple` scores high), so its silence is no promise; its warning is.
package struct PassphraseStrength: Sendable {
    /// Estimates under this many bits are weak.
    package static let weakBelow = 50

    /// The estimate, in whole bits.
    package let bits: Int
    /// Why it is low, in words that do not quote the passphrase.
    package let reasons: [String]

    package var isWeak: Bool { bits < Self.weakBelow }

    package init(_ passphrase: SecureBytes) {
        var reasons = [String]()
        var bits = passphrase.withUnsafeBytes { Self.estimate(UnsafeRawBufferPointer($0)) }
        let count = passphrase.withUnsafeBytes { Self.characterCount($0) }
        let common = passphrase.withUnsafeBytes { Self.commonPrefixLength($0) }
        if let common {
            if common == passphrase.count {
                bits = min(bits, 10)
                reasons.append("it is one of the most common passwords")
            } else {
                let ending = passphrase.withUnsafeBytes { Self.estimate(UnsafeRawBufferPointer(rebasing: $0[common...])) }
                bits = min(bits, 10 + ending)
                reasons.append("it is a common password with digits or symbols added")
            }
        }
        if passphrase.withUnsafeBytes({ Self.hasRunsOrRepeats($0) }) { reasons.append("it repeats characters or runs in sequence") }
        if count < 12 { reasons.append("it has only \(count) characters") }
        self.bits = Int(bits.rounded(.down))
        self.reasons = reasons
    }

    // MARK: - The estimate

    private enum CharacterClass: CaseIterable {
        case lower, upper, digit, symbol, other
        var size: Double {
            switch self {
            case .lower, .upper: return 26
            case .digit: return 10
            case .symbol: return 33
            case .other: return 100
            }
        }

        init(_ byte: UInt8) {
            switch byte {
            case UInt8(ascii: "a")...UInt8(ascii: "z"): self = .lower
            case UInt8(ascii: "A")...UInt8(ascii: "Z"): self = .upper
            case UInt8(ascii: "0")...UInt8(ascii: "9"): self = .digit
            case 0x20...0x7e: self = .symbol
            default: self = .other
            }
        }
    }

    /// Whether the byte starts a character (it is not a UTF-8 continuation byte).
    private static func startsCharacter(_ byte: UInt8) -> Bool { byte & 0xC0 != 0x80 }

    private static func characterCount(_ raw: UnsafeRawBufferPointer) -> Int {
        raw.reduce(0) { $0 + (startsCharacter($1) ? 1 : 0) }
    }

    /// Whether `byte` repeats `previous` or is one away from it within letters or digits.
    private static func continuesRun(_ byte: UInt8, after previous: UInt8?) -> Bool {
        guard let previous else { return false }
        if byte == previous { return true }
        let a = CharacterClass(byte), b = CharacterClass(previous)
        guard a == b, a == .lower || a == .upper || a == .digit else { return false }
        return byte == previous &+ 1 || byte == previous &- 1
    }

    private static func estimate(_ raw: UnsafeRawBufferPointer) -> Double {
        var used = Set<CharacterClass>()
        var length = 0.0
        var previous: UInt8?
        for byte in raw where startsCharacter(byte) {
            used.insert(CharacterClass(byte))
            length += continuesRun(byte, after: previous) ? 0.25 : 1
            previous = byte
        }
        let pool = used.reduce(0) { $0 + $1.size }
        return pool > 1 ? length * log2(pool) : 0
    }

    private static func hasRunsOrRepeats(_ raw: UnsafeRawBufferPointer) -> Bool {
        var previous: UInt8?
        var runs = 0
        for byte in raw where startsCharacter(byte) {
            if continuesRun(byte, after: previous) { runs += 1 }
            previous = byte
        }
        return runs >= 2
    }

    /// The length of the common password that the passphrase starts with, if the rest is only
    /// digits and ASCII symbols (or nothing).
    private static func commonPrefixLength(_ raw: UnsafeRawBufferPointer) -> Int? {
        var best: Int?
        for word in commonPasswords where word.count <= raw.count && word.count > (best ?? 0) {
            var matches = true
            for (i, letter) in word.enumerated() {
                var byte = raw[i]
                if (UInt8(ascii: "A")...UInt8(ascii: "Z")).contains(byte) { byte += 32 }
                if byte != letter { matches = false; break }
            }
            guard matches else { continue }
            let restIsEnding = raw[word.count...].allSatisfy { byte in
                let kind = CharacterClass(byte)
                return kind == .digit || kind == .symbol
            }
            if restIsEnding { best = word.count }
        }
        return best
    }

    /// Very common passwords (from the published lists of leaked ones), lowercase.
    private static let commonPasswords: [[UInt8]] = [
        "password", "passw0rd", "p@ssword", "p@ssw0rd", "123456", "12345678", "123456789", "1234567890", "111111", "000000",
        "654321", "121212", "123123", "666666", "7777777", "qwerty", "qwertyuiop", "qwerty123", "asdfgh", "asdfghjkl", "zxcvbnm",
        "1q2w3e4r", "1qaz2wsx", "qazwsx", "zaq12wsx", "abc123", "abcdef", "letmein", "welcome", "monkey", "dragon", "master",
        "shadow", "sunshine", "princess", "football", "baseball", "soccer", "hockey", "iloveyou", "trustno1", "superman",
        "batman", "starwars", "pokemon", "charlie", "michael", "jennifer", "jordan", "hunter", "hunter2", "secret", "freedom",
        "whatever", "admin", "administrator", "root", "toor", "login", "guest", "test", "changeme", "default", "access",
        "summer", "winter", "spring", "autumn", "flower", "cookie", "coffee", "cheese", "banana", "orange", "purple",
        "silver", "golden", "diamond", "computer", "internet", "google", "samsung", "killer", "pepper", "ginger", "matrix",
        "liverpool", "chelsea", "arsenal", "love", "loveme", "lovely", "family", "hello", "hello123", "opensesame",
        "passphrase", "correcthorsebatterystaple", "mustang", "ninja", "solo", "tigger", "buster", "maggie",
    ].map { Array($0.utf8) }
}

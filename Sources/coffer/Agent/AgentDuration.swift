import ArgumentParser

/// How long `coffer unlock --for` keeps the key: a number and a unit, `s`, `m` or `h`, or
/// several of them (`1h30m`); from 1 second to 24 hours.
struct AgentDuration: ExpressibleByArgument, Equatable {
    static let maximum = 24 * 3600
    static let standard = AgentDuration(seconds: 15 * 60)

    let seconds: Int

    init(seconds: Int) { self.seconds = seconds }

    init?(argument: String) {
        var total = 0, number = 0, digits = 0
        for character in argument {
            if let digit = character.wholeNumberValue, character.isASCII {
                number = number * 10 + digit
                digits += 1
                guard digits <= 6 else { return nil }
                continue
            }
            let unit: Int
            switch character {
            case "s": unit = 1
            case "m": unit = 60
            case "h": unit = 3600
            default: return nil
            }
            guard digits > 0 else { return nil }
            total += number * unit
            number = 0
            digits = 0
        }
        guard digits == 0, (1...Self.maximum).contains(total) else { return nil }
        seconds = total
    }

    static var defaultCompletionKind: CompletionKind { .default }

    /// `2h`, `15m`, `1h30m`, `45s`.
    var text: String {
        let h = seconds / 3600, m = seconds % 3600 / 60, s = seconds % 60
        var out = ""
        if h > 0 { out += "\(h)h" }
        if m > 0 { out += "\(m)m" }
        if s > 0 || out.isEmpty { out += "\(s)s" }
        return out
    }
}

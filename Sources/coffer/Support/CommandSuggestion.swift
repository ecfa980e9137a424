import ArgumentParser

/// "Did you mean" for a misspelled subcommand: `coffer record gte` names `get`.
enum CommandSuggestion {
    /// The message for the first word of `arguments` that is not a subcommand where one is
    /// expected, or nil when the command words are all known (the parser's own message is then
    /// the right one). Stops at the first option: words after it are not command words.
    static func forArguments(_ arguments: [String]) -> String? {
        var command: any ParsableCommand.Type = Coffer.self
        var path = ["coffer"]
        for word in arguments {
            if word.hasPrefix("-") { return nil }
            let subcommands = command.configuration.subcommands
            if subcommands.isEmpty || word == "help" { return nil }
            guard let next = subcommands.first(where: { names(of: $0).contains(word) }) else {
                let candidates = subcommands.flatMap { names(of: $0) }
                let known = subcommands.map { name(of: $0) }.joined(separator: ", ")
                let prefix = "unknown command '\(word)' for '\(path.joined(separator: " "))'"
                if let close = closest(to: word, among: candidates) {
                    return "\(prefix); did you mean '\(close)'? (commands: \(known))"
                }
                return "\(prefix); the commands are \(known)"
            }
            command = next
            path.append(name(of: next))
        }
        return nil
    }

    private static func name(of command: any ParsableCommand.Type) -> String {
        command.configuration.commandName ?? command._commandName
    }

    private static func names(of command: any ParsableCommand.Type) -> [String] {
        [name(of: command)] + command.configuration.aliases
    }

    /// The candidate nearest to `word` by edit distance, if it is near enough to be a slip:
    /// at most one edit for short words, two for longer ones; or a word the candidate begins with.
    static func closest(to word: String, among candidates: [String]) -> String? {
        let limit = word.count <= 4 ? 1 : 2
        let scored = candidates.map { ($0, editDistance(word.lowercased(), $0.lowercased())) }
        if let best = scored.filter({ $0.1 <= limit }).min(by: { $0.1 < $1.1 }) { return best.0 }
        if word.count >= 2, let prefixed = candidates.first(where: { $0.hasPrefix(word.lowercased()) }) { return prefixed }
        return nil
    }

    /// Optimal string alignment distance: insertions, deletions, substitutions and swaps of two
    /// neighbouring characters each cost one.
    static func editDistance(_ a: String, _ b: String) -> Int {
        let a = Array(a), b = Array(b)
        if a.isEmpty { return b.count }
        if b.isEmpty { return a.count }
        var d = [[Int]](repeating: [Int](repeating: 0, count: b.count + 1), count: a.count + 1)
        for i in 0...a.count { d[i][0] = i }
        for j in 0...b.count { d[0][j] = j }
        for i in 1...a.count {
            for j in 1...b.count {
                let cost = a[i - 1] == b[j - 1] ? 0 : 1
                d[i][j] = min(d[i - 1][j] + 1, d[i][j - 1] + 1, d[i - 1][j - 1] + cost)
                if i > 1, j > 1, a[i - 1] == b[j - 2], a[i - 2] == b[j - 1] {
                    d[i][j] = min(d[i][j], d[i - 2][j - 2] + 1)
                }
            }
        }
        return d[a.count][b.count]
    }
}

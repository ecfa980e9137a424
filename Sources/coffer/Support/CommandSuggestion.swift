import ArgumentParser
import CofferStore

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
                let shown = subcommands.filter { $0.configuration.shouldDisplay }
                let candidates = shown.flatMap { names(of: $0) }
                let known = shown.map { name(of: $0) }.joined(separator: ", ")
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

    /// The candidate nearest to `word`, if it is near enough to be a slip (see
    /// ``SchemaDelta/closest(to:among:)``: the same edit distance as schema names), or one that
    /// begins with `word`.
    static func closest(to word: String, among candidates: [String]) -> String? {
        if let near = SchemaDelta.closest(to: word, among: candidates) { return near }
        if word.count >= 2, let prefixed = candidates.first(where: { $0.hasPrefix(word.lowercased()) }) { return prefixed }
        return nil
    }
}

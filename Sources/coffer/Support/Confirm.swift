import Foundation

/// Yes-or-no questions for commands that destroy or roll back data.
enum Confirm {
    /// Whether a person can answer: standard input and standard error are a terminal.
    static var canAsk: Bool { isatty(STDIN_FILENO) != 0 && isatty(STDERR_FILENO) != 0 }

    /// Asks `question` on stderr and reads the answer from the terminal: true only for `y` or `yes`.
    static func ask(_ question: String) -> Bool {
        FileHandle.standardError.write(Data("\(question) [y/N] ".utf8))
        guard let answer = readLine(strippingNewline: true) else { return false }
        return ["y", "yes"].contains(answer.trimmingCharacters(in: .whitespaces).lowercased())
    }
}

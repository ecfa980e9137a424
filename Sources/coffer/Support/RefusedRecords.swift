import CofferStore

/// Records a read left out because they fail verification (`QueryResult.refused`,
/// `ZoneChanges.refused`). A read prints what verified, then ends with an error naming them, so
/// that a script notices tampering; `--allow-refused` turns the error into warnings.
enum RefusedRecords {
    /// Records named in the error before the rest are only counted.
    static let namesShown = 3

    /// After a read printed what verified: nothing when `refused` is empty; a `warning:` line on
    /// stderr per refused record when `allowed`; otherwise throws the error (65) that names them.
    static func check(_ refused: [String: StoreError], allowed: Bool) throws {
        guard !refused.isEmpty else { return }
        let names = refused.keys.sorted()
        if allowed {
            for name in names {
                Output.note("warning: \(Output.oneLine(refused[name]!.message)) (left out; run 'coffer audit')")
            }
            return
        }
        throw error(names)
    }

    /// `1 record failed verification and was left out: 'a'; …` or `5 records … : 'a', 'b', 'c' and 2 more; …`.
    static func error(_ names: [String]) -> CLIError {
        let shown = names.prefix(namesShown).map { "'\($0)'" }.joined(separator: ", ")
            + (names.count > namesShown ? " and \(names.count - namesShown) more" : "")
        let counted = names.count == 1 ? "1 record failed verification and was left out" : "\(names.count) records failed verification and were left out"
        return CLIError(ExitStatus.dataError,
                        "\(counted): \(shown); run 'coffer audit' to see why, or pass --allow-refused to accept the output without them")
    }
}

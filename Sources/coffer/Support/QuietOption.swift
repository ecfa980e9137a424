import ArgumentParser
import Foundation

/// `--quiet` for commands that write: nothing on stdout on success, for scripts that need only
/// the exit status. Errors and warnings still go to stderr.
struct QuietOption: ParsableArguments {
    @Flag(name: [.customShort("q"), .long], help: "Print nothing on success; errors still go to stderr.")
    var quiet = false

    /// Called once the write is done: from here on, standard output goes to /dev/null.
    func apply() {
        guard quiet else { return }
        let null = open("/dev/null", O_WRONLY)
        if null >= 0 {
            dup2(null, STDOUT_FILENO)
            close(null)
        }
    }
}

import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// Reads what a flag names: a file, or standard input for `-`. At most `limit` bytes are taken
/// (more is refused, so `/dev/zero` cannot hang a command); a FIFO with no writer reads as empty.
/// Errors name the flag and the path, never the content.
enum InputFile {
    /// The bytes of `path` (`-`: standard input). `flag` names what asked, for errors
    /// (`--secret-file pin=PATH`). Missing file or folder: 66; over `limit`: 65; another failure to
    /// read (permission, not a directory): 1. With a `hiddenPrompt`, `-` on a terminal asks for one
    /// line with echo off (what a person types there is a secret), without its line ending.
    static func read(_ path: String, flag: String, limit: Int, hiddenPrompt: String? = nil) throws -> [UInt8] {
        if path == "-", let hiddenPrompt, isatty(STDIN_FILENO) != 0, let tty = Terminal.open() {
            defer { tty.close() }
            return try tty.readHidden(prompt: hiddenPrompt, what: "line typed").withUnsafeBytes { Array($0) }
        }
        let fd: Int32
        if path == "-" {
            fd = STDIN_FILENO
        } else {
            // Non-blocking, so that opening a FIFO does not wait for a writer; reads block again below.
            fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK)
            guard fd >= 0 else {
                let reason = String(cString: strerror(errno))
                if errno == ENOENT { throw CLIError(ExitStatus.notFound, "\(flag): no file at \(path)") }
                throw CLIError(ExitStatus.failure, "\(flag): cannot read \(path): \(reason)")
            }
            var st = stat()
            if fstat(fd, &st) == 0, (st.st_mode & S_IFMT) == S_IFDIR {
                close(fd)
                throw CLIError(ExitStatus.notFound, "\(flag): \(path) is a folder; give a file")
            }
            _ = fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) & ~O_NONBLOCK)
        }
        defer { if fd != STDIN_FILENO { close(fd) } }
        var bytes = [UInt8]()
        var chunk = [UInt8](repeating: 0, count: 65_536)
        defer { for i in chunk.indices { chunk[i] = 0 } }
        while true {
            let n = chunk.withUnsafeMutableBytes { Glibc.read(fd, $0.baseAddress!, $0.count) }
            if n < 0 {
                if errno == EINTR { continue }
                let reason = String(cString: strerror(errno))
                for i in bytes.indices { bytes[i] = 0 }
                throw CLIError(ExitStatus.failure, "\(flag): cannot read \(path == "-" ? "standard input" : path): \(reason)")
            }
            if n == 0 { return bytes }
            bytes += chunk[0..<n]
            if bytes.count > limit {
                for i in bytes.indices { bytes[i] = 0 }
                throw CLIError(ExitStatus.dataError,
                               "\(flag): \(path == "-" ? "standard input" : path) holds more than \(limit) bytes")
            }
        }
    }

    /// `bytes` as UTF-8 text without one trailing line ending (`\n` or `\r\n`), or nil when they
    /// are not UTF-8.
    static func text(_ bytes: [UInt8]) -> String? {
        var end = bytes.count
        if end > 0, bytes[end - 1] == 0x0a {
            end -= 1
            if end > 0, bytes[end - 1] == 0x0d { end -= 1 }
        }
        return String(validating: bytes[0..<end], as: UTF8.self)
    }
}

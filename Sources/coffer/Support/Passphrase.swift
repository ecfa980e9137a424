import CofferCrypto
import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// Reads passphrases: from a file, from the environment, or from the terminal without echo.
/// Never from a command-line flag.
enum Passphrase {
    static let maxBytes = 4096

    /// The passphrase from `--passphrase-file`, `COFFER_PASSPHRASE_FILE`, `COFFER_PASSPHRASE`,
    /// or a prompt (confirmed twice when `confirm`). Exit 64 when none can be read.
    static func read(fileFlag: String?, environment: [String: String], prompt: String,
                     confirm: Bool = false, envName: String = "COFFER_PASSPHRASE",
                     fileEnvName: String? = "COFFER_PASSPHRASE_FILE") throws -> SecureBytes {
        if let path = fileFlag ?? fileEnvName.flatMap({ environment[$0] }), !path.isEmpty {
            return try fromFile(path)
        }
        if let value = environment[envName] {
            guard !value.isEmpty else { throw CLIError.usage("\(envName) is set but empty") }
            return SecureBytes(copying: Array(value.utf8))
        }
        guard let tty = Terminal.open() else {
            let file = envName == "COFFER_PASSPHRASE" ? "use --passphrase-file" : fileEnvName.map { "set \($0)" } ?? "use a file"
            throw CLIError.usage("a passphrase is needed: set \(envName), \(file), or run on a terminal")
        }
        defer { tty.close() }
        let first = try tty.readHidden(prompt: prompt)
        if confirm {
            let second = try tty.readHidden(prompt: "Repeat the passphrase: ")
            guard first == second else { throw CLIError.usage("the passphrases do not match") }
        }
        guard first.count > 0 else { throw CLIError.usage("the passphrase is empty") }
        return first
    }

    /// The first line of a file (without its line ending).
    static func fromFile(_ path: String) throws -> SecureBytes {
        var isFolder: ObjCBool = false
        if FileManager.default.fileExists(atPath: path, isDirectory: &isFolder), isFolder.boolValue {
            throw CLIError(ExitStatus.notFound, "the passphrase file \(path) is a folder; give a file whose first line is the passphrase")
        }
        guard let handle = FileHandle(forReadingAtPath: path) else {
            throw CLIError(ExitStatus.notFound, "cannot read the passphrase file \(path)")
        }
        defer { try? handle.close() }
        let data = (try? handle.read(upToCount: maxBytes + 2)) ?? Data()
        var bytes = Array(data.prefix { $0 != 0x0a })
        if bytes.last == 0x0d { bytes.removeLast() }
        defer { for i in bytes.indices { bytes[i] = 0 } }
        guard !bytes.isEmpty else { throw CLIError.usage("the passphrase file \(path) has an empty first line") }
        guard bytes.count <= maxBytes else { throw CLIError.usage("the passphrase in \(path) is longer than \(maxBytes) bytes") }
        return SecureBytes(copying: bytes)
    }
}

/// The controlling terminal, used for prompts only when a person is there to answer.
struct Terminal {
    let fd: Int32

    /// The terminal, if stdin or stderr is one and `/dev/tty` opens.
    static func open() -> Terminal? {
        guard isatty(STDIN_FILENO) != 0 || isatty(STDERR_FILENO) != 0 else { return nil }
        let fd = Glibc.open("/dev/tty", O_RDWR | O_CLOEXEC)
        guard fd >= 0 else { return nil }
        return Terminal(fd: fd)
    }

    func close() { _ = Glibc.close(fd) }

    func write(_ text: String) {
        let bytes = Array(text.utf8)
        _ = bytes.withUnsafeBytes { Glibc.write(fd, $0.baseAddress!, $0.count) }
    }

    /// Reads one line with echo off, into guarded memory. `what` names it in an error.
    func readHidden(prompt: String, what: String = "passphrase") throws -> SecureBytes {
        write(prompt)
        var saved = termios()
        let haveAttributes = tcgetattr(fd, &saved) == 0
        if haveAttributes {
            var quiet = saved
            quiet.c_lflag &= ~tcflag_t(ECHO)
            quiet.c_lflag |= tcflag_t(ICANON)
            _ = tcsetattr(fd, TCSAFLUSH, &quiet)
        }
        defer {
            if haveAttributes { _ = tcsetattr(fd, TCSAFLUSH, &saved) }
            write("\n")
        }
        var length = 0
        var tooLong = false
        let buffer = SecureBytes(count: Passphrase.maxBytes) { out in
            var byte: UInt8 = 0
            while true {
                let n = Glibc.read(fd, &byte, 1)
                if n < 0 && errno == EINTR { continue }
                if n <= 0 || byte == 0x0a { break }
                if byte == 0x0d { continue }
                if length == out.count { tooLong = true; continue }
                out[length] = byte
                length += 1
            }
            byte = 0
        }
        guard !tooLong else { throw CLIError.usage("the \(what) is longer than \(Passphrase.maxBytes) bytes") }
        return buffer.slice(0..<length)
    }
}

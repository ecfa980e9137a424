import CofferStore
import CofferVault
import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// Writing results: text for people, one JSON document for scripts.
enum Output {
    /// `message` made safe for one line on a terminal: a value a user gave may hold a newline or
    /// an escape sequence. Newline, carriage return and tab become `\n`, `\r`, `\t`; every other
    /// control character (C0, DEL, C1) and the Unicode line and paragraph separators become
    /// `\u{…}`. Errors and the text form of values go through it, so each stays one line.
    static func oneLine(_ message: String) -> String {
        var result = ""
        for scalar in message.unicodeScalars {
            switch scalar.value {
            case 0x0a: result += "\\n"
            case 0x0d: result += "\\r"
            case 0x09: result += "\\t"
            case 0x00..<0x20, 0x7f...0x9f, 0x2028, 0x2029:
                result += "\\u{" + String(scalar.value, radix: 16) + "}"
            default: result.unicodeScalars.append(scalar)
            }
        }
        return result
    }

    static func line(_ text: String = "") {
        out(Data((text + "\n").utf8))
    }

    static func note(_ text: String) {
        err(Data((text + "\n").utf8))
    }

    /// Writes `data` to standard output, whole. When the reader went away (a pipe into `head`
    /// that has what it wanted), the command ends as command-line tools do: by SIGPIPE (exit
    /// status 141), quietly, with no error and no crash, whatever the process's own handling
    /// of SIGPIPE (its HTTP client ignores it).
    static func out(_ data: Data) { data.withUnsafeBytes { out($0) } }

    /// Bytes on standard output, as they are (see ``out(_:)-(Data)``).
    static func out(_ bytes: UnsafeRawBufferPointer) {
        guard !write(bytes, to: STDOUT_FILENO) else { return }
        signal(SIGPIPE, SIG_DFL)
        var pipe = sigset_t()
        sigemptyset(&pipe)
        sigaddset(&pipe, SIGPIPE)
        pthread_sigmask(SIG_UNBLOCK, &pipe, nil)
        raise(SIGPIPE)
        _exit(141)
    }

    /// Writes `data` to standard error, whole; nothing more when it is gone.
    static func err(_ data: Data) { data.withUnsafeBytes { _ = write($0, to: STDERR_FILENO) } }

    /// Writes all of `bytes` to `fd`; false when the reader went away (EPIPE). Other errors end
    /// the write: nothing more can be said on that stream.
    private static func write(_ bytes: UnsafeRawBufferPointer, to fd: Int32) -> Bool {
        guard var base = bytes.baseAddress else { return true }
        var left = bytes.count
        while left > 0 {
            let n = Glibc.write(fd, base, left)
            if n > 0 {
                base += n
                left -= n
            } else if n < 0, errno == EINTR {
                continue
            } else {
                return !(n < 0 && errno == EPIPE)
            }
        }
        return true
    }

    static func json<T: Encodable>(_ value: T) throws {
        var data = try jsonData(value)
        data.append(0x0a)
        out(data)
    }

    /// `value` as the pretty JSON that ``json(_:)`` prints (sorted keys, ISO 8601 dates).
    static func jsonData<T: Encodable>(_ value: T) throws -> Data {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.prettyPrinted, .sortedKeys, .withoutEscapingSlashes]
        encoder.dateEncodingStrategy = .iso8601
        return try encoder.encode(value)
    }

    /// Aligned `label: value` lines.
    static func fields(_ pairs: [(String, String)]) {
        let width = pairs.map { $0.0.count }.max() ?? 0
        for (label, value) in pairs {
            line(label + ":" + String(repeating: " ", count: width - label.count + 1) + value)
        }
    }

    static func iso(_ date: Date) -> String { ISODate.formatSeconds(date) }

    /// "1 record", "3 records": `count` and `noun`, plural with an s unless it is one.
    static func count(_ count: Int, _ noun: String) -> String { count == 1 ? "1 \(noun)" : "\(count) \(noun)s" }

    /// Writes `data` to standard output, or to the file `output` names, which must not exist
    /// (73): what `--output` means for a command that prints a file. Returns whether it wrote a file.
    @discardableResult
    static func file(_ data: Data, to output: String?) throws -> Bool {
        guard let output else {
            out(data)
            return false
        }
        let url = URL(fileURLWithPath: output)
        guard !FileManager.default.fileExists(atPath: url.path) else {
            throw CLIError(ExitStatus.alreadyExists, "\(output) already exists; choose another file")
        }
        do { try data.write(to: url, options: .withoutOverwriting) } catch {
            throw CLIError(ExitStatus.failure, "cannot write \(output): \(error.localizedDescription)")
        }
        return true
    }
}

/// The `vault show` JSON shape.
struct IdentityJSON: Encodable {
    let userID: String
    let name: String
    let email: String?
    let fingerprint: String
    let signingKey: String
    let boxKey: String

    init(_ identity: UserIdentity) {
        userID = identity.userID
        name = identity.name
        email = identity.email
        fingerprint = identity.fingerprint
        signingKey = Data(identity.signingKey.rawRepresentation).base64EncodedString()
        boxKey = Data(identity.boxKey.rawRepresentation).base64EncodedString()
    }

    enum CodingKeys: String, CodingKey { case userID, name, email, fingerprint, signingKey, boxKey }

    func encode(to encoder: any Encoder) throws {
        var c = encoder.container(keyedBy: CodingKeys.self)
        try c.encode(userID, forKey: .userID)
        try c.encode(name, forKey: .name)
        try c.encode(email, forKey: .email) // null when absent: the key always exists
        try c.encode(fingerprint, forKey: .fingerprint)
        try c.encode(signingKey, forKey: .signingKey)
        try c.encode(boxKey, forKey: .boxKey)
    }
}

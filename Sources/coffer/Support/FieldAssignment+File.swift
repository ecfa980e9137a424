import CofferStore

extension FieldAssignment {
    /// A `--secret-file key[:TYPE]=PATH` argument, before its file is read.
    struct SecretFile {
        let key: String
        /// The type written (`key:TYPE=PATH`), nil when none was: the zone's schema gives it then,
        /// or `string` for a field it does not have.
        let type: FieldType?
        /// The file, or `-` for standard input.
        let path: String

        /// How errors name it.
        var flag: String { "field '\(key)' (--secret-file)" }
    }

    /// Parses `key=PATH` or `key:TYPE=PATH` (`-` for standard input). The argument holds no
    /// secret, so errors quote it.
    static func secretFile(_ text: String) throws -> SecretFile {
        let (key, type, path) = try split(text, hidden: false, flag: "--secret-file", form: "key=PATH or key:TYPE=PATH")
        guard !path.isEmpty else {
            throw CLIError(ExitStatus.dataError, "'\(text.prefix(60))' names no file: use key=PATH or key:TYPE=PATH ('-' for standard input)")
        }
        return SecretFile(key: key, type: type, path: path)
    }

    /// Reads a `--secret-file` field's value, at most a record's size (`-` on a terminal: one line,
    /// typed with echo off). `bytes` takes the file's bytes exactly; every other type reads the file as UTF-8 text without one trailing line
    /// ending (`\n` or `\r\n`) and parses that text as `--secret` parses what follows `=`. No error
    /// quotes the content.
    static func read(_ file: SecretFile) throws -> [UInt8] {
        try InputFile.read(file.path, flag: file.flag, limit: Limits.maxRecordBytes, hiddenPrompt: "Value of the encrypted field '\(file.key)': ")
    }

    /// The value of a `--secret-file` field read as `bytes` (``read(_:)``), as `type`: the type
    /// written, else the one the zone's schema has (`schemaType`), else `string`. The bytes are
    /// zeroed once used.
    static func value(_ file: SecretFile, bytes: inout [UInt8], schemaType: FieldType?, recordType: String) throws -> (key: String, value: RecordValue, type: FieldType) {
        defer { for i in bytes.indices { bytes[i] = 0 } }
        let type = file.type ?? schemaType ?? .string
        if type == .bytes { return (file.key, .bytes(bytes), type) }
        guard let text = InputFile.text(bytes) else {
            let source = file.path == "-" ? "standard input" : file.path
            throw CLIError(ExitStatus.dataError,
                           "field '\(file.key)' (encrypted): \(source) is not UTF-8 text; for its raw bytes use \(file.key):bytes=\(file.path)")
        }
        do {
            return (file.key, try value(text, as: type, key: file.key, encrypted: true), type)
        } catch let error as CLIError where error.status == ExitStatus.dataError && file.type == nil && schemaType != nil {
            throw CLIError(error.status, error.message
                + " (the zone's schema has field '\(file.key)' of \(recordType) as \(type); write key:TYPE=PATH to give a type)")
        }
    }
}

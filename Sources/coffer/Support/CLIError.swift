import ArgumentParser
import CofferCrypto
import CofferStore
import CofferVault
import Foundation

/// The exit codes of the CLI contract.
enum ExitStatus {
    static let failure: Int32 = 1
    static let usage: Int32 = 64
    static let dataError: Int32 = 65
    static let notFound: Int32 = 66
    static let unavailable: Int32 = 69
    static let alreadyExists: Int32 = 73
    static let conflict: Int32 = 75
    static let denied: Int32 = 77
}

/// An error the CLI itself raises, with its exit code.
struct CLIError: Error, CustomStringConvertible {
    var description: String { message }

    let status: Int32
    let message: String

    init(_ status: Int32, _ message: String) {
        self.status = status
        self.message = message
    }

    static func usage(_ message: String) -> CLIError { CLIError(ExitStatus.usage, message) }
}

/// Turns any error into one `error:` line on stderr and the documented exit code.
enum ErrorReporter {
    static func exit(with error: any Error) -> Never {
        SessionContext.finish()
        if let e = error as? ExitCode, e != .success, e != .validationFailure {
            Foundation.exit(e.rawValue) // the command already said why
        }
        let (status, message) = describe(validationError.withLock { $0 } ?? error)
        if let status, let message {
            fail(status, message)
        }
        // Argument parser errors: help and version print as usual; parse errors become one line, exit 64.
        let code = Coffer.exitCode(for: error)
        if code == .success || error is CleanExit {
            Coffer.exit(withError: error)
        }
        // A system error a command met while running (not the command line's fault): its own
        // words, exit 1. (Errors from parsing and `validate()` reach here wrapped by the parser.)
        if error is CocoaError || error is POSIXError || error is DecodingError || error is EncodingError {
            fail(ExitStatus.failure, (error as NSError).localizedDescription)
        }
        if let suggestion = CommandSuggestion.forArguments(Array(CommandLine.arguments.dropFirst())) {
            fail(ExitStatus.usage, suggestion)
        }
        let text = Coffer.message(for: error)
            .split(separator: "\n").map { $0.trimmingCharacters(in: .whitespaces) }.filter { !$0.isEmpty }
            .joined(separator: "; ")
        fail(ExitStatus.usage, "\(text) (see 'coffer help')")
    }

    /// An error a `validate()` threw: the parser keeps only its text, so it is kept here with its exit status.
    private static let validationError = Locked<(any Error)?>(nil)

    /// Runs a `validate()` body, keeping the error it throws for ``exit(with:)``.
    static func keepingStatus(_ body: () throws -> Void) throws {
        do { try body() } catch {
            validationError.withLock { $0 = error }
            throw error
        }
    }

    /// Whether errors are one JSON object (`--json` among the arguments, before any `--`):
    /// decided from the raw arguments, so that a command line the parser refuses gets the same form.
    static let json: Bool = {
        let arguments = CommandLine.arguments.dropFirst()
        return arguments.prefix { $0 != "--" }.contains("--json")
    }()

    /// Writes the error line, `error: …` or with `--json` `{"error": "…", "code": N}`, and exits with `status`.
    static func fail(_ status: Int32, _ message: String) -> Never {
        let line = Output.oneLine(message)
        if json, let object = try? JSONSerialization.data(withJSONObject: ["error": line, "code": Int(status)] as [String: Any],
                                                            options: [.sortedKeys, .withoutEscapingSlashes]) {
            Output.err(object + Data("\n".utf8))
        } else {
            Output.err(Data("error: \(line)\n".utf8))
        }
        Foundation.exit(status)
    }


    static func describe(_ error: any Error) -> (Int32?, String?) {
        switch error {
        case let e as CLIError:
            return (e.status, e.message)
        case let e as VaultError:
            return (status(for: e.code), e.message)
        case let e as StoreError where e.code == .zoneNotFound:
            return (status(for: e.code), e.message + "; 'coffer zone list' shows your zones and those shared with you")
        case let e as StoreError:
            return (status(for: e.code), e.message)
        case let e as CryptoError:
            return (ExitStatus.dataError, e.description)
        default:
            return (nil, nil)
        }
    }

    static func status(for code: VaultError.Code) -> Int32 {
        switch code {
        case .notFound, .itemNotFound: return ExitStatus.notFound
        case .alreadyExists: return ExitStatus.alreadyExists
        case .malformed, .integrityFailure, .invalidArguments: return ExitStatus.dataError
        case .wrongPassphrase, .wrongKeyFile, .unprotectedKeyFile: return ExitStatus.denied
        case .changedOnDisk, .busy: return ExitStatus.conflict
        case .io: return ExitStatus.failure
        }
    }

    static func status(for code: StoreError.Code) -> Int32 {
        switch code {
        case .unknownItem, .zoneNotFound, .referenceViolation: return ExitStatus.notFound
        case .alreadyExists: return ExitStatus.alreadyExists
        case .invalidArguments, .limitExceeded, .integrityFailure: return ExitStatus.dataError
        case .serverRecordChanged, .busy: return ExitStatus.conflict
        case .permissionFailure, .wrongPassphrase: return ExitStatus.denied
        case .changeTokenExpired: return ExitStatus.dataError
        case .partialFailure, .internalError: return ExitStatus.failure
        case .serviceUnavailable: return ExitStatus.unavailable
        case .notSupported: return ExitStatus.usage
        }
    }
}

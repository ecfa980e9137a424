/// An error from the store. Its ``code`` mirrors CloudKit's `CKError.Code`; its ``message``
/// says what went wrong and what to do, and never holds a secret or a decrypted value.
public struct StoreError: Error, Sendable, CustomStringConvertible {
    public enum Code: Sendable, Equatable {
        /// A save with a stale change tag (CKError `.serverRecordChanged`).
        case serverRecordChanged
        /// No such zone (CKError `.zoneNotFound`).
        case zoneNotFound
        /// No such record, contact, share or participant (CKError `.unknownItem`).
        case unknownItem
        /// The acting user may not do this (CKError `.permissionFailure`).
        case permissionFailure
        /// A change token that can no longer be served (CKError `.changeTokenExpired`).
        case changeTokenExpired
        /// Over a size or count limit (CKError `.limitExceeded`): split and retry.
        case limitExceeded
        /// Some items of a batch failed (CKError `.partialFailure`).
        case partialFailure
        /// Malformed input: a name, a value, a token (CKError `.invalidArguments`).
        case invalidArguments
        /// Stored data fails authentication or a signature check.
        case integrityFailure
        /// The vault did not unlock.
        case wrongPassphrase
        /// A record's new parent is not a record of its zone (CKError `.referenceViolation`).
        case referenceViolation
        /// The thing being created exists already (a zone).
        case alreadyExists
        /// The database stayed locked by another writer.
        case busy
        /// The database or file system failed.
        case internalError
        /// The store's server (PostgreSQL) cannot be reached or stopped answering
        /// (CKError `.serviceUnavailable`): try again later.
        case serviceUnavailable
        /// The store's backend cannot do this (a PostgreSQL store: an audit's scan for plaintext
        /// in the store's files, which it has none of here).
        case notSupported
    }

    public let code: Code
    public let message: String
    /// The error underneath (a GRDB `DatabaseError`, a `CryptoError`), when there is one.
    public let underlying: (any Error & Sendable)?

    /// For `.serverRecordChanged`: the record as stored now, to merge with and save again.
    public let serverRecord: Record?
    /// For `.partialFailure`: the error of each record that failed, by record name. The other
    /// records of an atomic batch were not saved either.
    public let partialErrors: [String: StoreError]

    public init(_ code: Code, _ message: String, underlying: (any Error & Sendable)? = nil,
                serverRecord: Record? = nil, partialErrors: [String: StoreError] = [:]) {
        self.code = code
        self.message = message
        self.underlying = underlying
        self.serverRecord = serverRecord
        self.partialErrors = partialErrors
    }

    public var description: String { message }
}

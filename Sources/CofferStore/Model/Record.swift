import Foundation

/// A zone's identity: its name and its owner's user id.
public struct ZoneID: Sendable, Hashable, CustomStringConvertible {
    public let name: String
    public let ownerID: String

    public init(name: String, ownerID: String) {
        self.name = name
        self.ownerID = ownerID
    }

    public var description: String { "\(name)@\(ownerID)" }
}

/// A zone as listed: identity and facts about it.
public struct Zone: Sendable, Hashable {
    public let id: ZoneID
    /// When the zone was made, from its signed first log entry (for a zone upgraded from a
    /// store without a log: when it was upgraded).
    public let created: Date
    /// The current key epoch (1 until the key is rotated), from the signed log.
    public let keyEpoch: Int64
    /// The sequence of the newest entry of the zone's verified log.
    public let sequence: Int64
    /// The number of record rows the store holds for the zone: a count of rows, not checked
    /// against the log (`coffer audit` checks every row).
    public let recordCount: Int
}

/// A record: a type, a name in a zone, plain `values` (queryable) and `encryptedValues`
/// (sealed under the zone key at rest), as CloudKit's `CKRecord`.
///
/// ```swift
/// var note = Record(type: "Note", name: "groceries", zone: zone)
/// note.values["title"] = "Shopping"
/// note.encryptedValues["body"] = "eggs, milk"
/// note = try await session.privateDatabase.save(note)
/// ```
///
/// The system fields (`changeTag`, `creatorID`, dates) are set by the store on save.
public struct Record: Sendable, Hashable {
    public let recordType: String
    public let name: String
    public let zoneID: ZoneID
    /// The parent record's name in the same zone, if any (a plain reference).
    public var parent: String?
    public var values: [String: RecordValue]
    public var encryptedValues: [String: RecordValue]

    /// The version tag of the stored record this value came from; nil for a new record.
    public internal(set) var changeTag: String?
    public internal(set) var creatorID: String?
    public internal(set) var modifierID: String?
    public internal(set) var created: Date?
    public internal(set) var modified: Date?
    /// The key epoch the encrypted values were sealed under.
    public internal(set) var keyEpoch: Int64?
    /// The transaction author string the last writer set (Core Data's `transactionAuthor`), from the signed commit.
    public internal(set) var transactionAuthor: String?

    /// The values as fetched, to compute the keys a caller changed (`.changedKeys` policy).
    var fetchedValues: [String: RecordValue]?
    var fetchedEncryptedValues: [String: RecordValue]?

    public init(type: String, name: String, zone: ZoneID, parent: String? = nil) {
        // Room for a few fields each, so that setting them one by one does not regrow the tables.
        self.init(type: type, name: name, zone: zone, parent: parent,
                  values: .init(minimumCapacity: 4), encryptedValues: .init(minimumCapacity: 4))
    }

    /// A record with its values already built (records read from the store).
    init(type: String, name: String, zone: ZoneID, parent: String?, values: [String: RecordValue], encryptedValues: [String: RecordValue]) {
        self.recordType = type
        self.name = name
        self.zoneID = zone
        self.parent = parent
        self.values = values
        self.encryptedValues = encryptedValues
    }

    /// Keys whose value differs from the fetched record (all keys for a new record).
    public var changedKeys: Set<String> {
        func diff(_ now: [String: RecordValue], _ then: [String: RecordValue]?) -> Set<String> {
            guard let then else { return Set(now.keys) }
            return Set(now.keys.filter { now[$0] != then[$0] }).union(then.keys.filter { now[$0] == nil })
        }
        return diff(values, fetchedValues).union(diff(encryptedValues, fetchedEncryptedValues))
    }

    public static func == (lhs: Record, rhs: Record) -> Bool {
        lhs.recordType == rhs.recordType && lhs.name == rhs.name && lhs.zoneID == rhs.zoneID && lhs.parent == rhs.parent
            && lhs.values == rhs.values && lhs.encryptedValues == rhs.encryptedValues && lhs.changeTag == rhs.changeTag
    }

    public func hash(into hasher: inout Hasher) {
        hasher.combine(zoneID)
        hasher.combine(name)
        hasher.combine(changeTag)
    }
}

extension Record: CustomStringConvertible {
    /// Names and types only: encrypted values never appear in a description.
    public var description: String {
        "Record(\(recordType) '\(name)' in \(zoneID.name), tag \(changeTag ?? "new"), plain: \(values.keys.sorted()), encrypted: \(encryptedValues.keys.sorted()) redacted)"
    }
}

/// How a save treats a record that changed since it was fetched (CloudKit's `CKModifyRecordsOperation.RecordSavePolicy`).
public enum SavePolicy: Sendable {
    /// Fail with `.serverRecordChanged` unless the change tag matches the stored record. The default.
    case ifServerRecordUnchanged
    /// Write only the keys this value changed, over the stored record, whatever its tag.
    case changedKeys
    /// Overwrite the stored record with this value, whatever its tag.
    case allKeys
}

extension Record {
    /// Makes this value a replacement for the stored version at `tag` (HTTP's If-Match): with
    /// the default save policy the save fails with `.serverRecordChanged` unless the stored
    /// record is still at `tag`. Throws `.invalidArguments` when `tag` is not a change tag.
    public mutating func setChangeTag(_ tag: String) throws {
        _ = try ChangeTag.parse(tag)
        changeTag = tag
    }
}

extension Record {
    /// Checks names, field keys, value shapes and the size limit without saving, so a caller
    /// can reject bad input before any write. Schema agreement is checked on save.
    public func validate() throws {
        _ = try RecordWriter.check(self, zone: zoneID)
    }
}

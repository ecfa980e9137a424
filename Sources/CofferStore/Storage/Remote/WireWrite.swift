import CofferCrypto
import Foundation

/// A ``StorageSnapshot/Write`` as a Coffer server's API carries it in a `records/modify` batch:
/// an operation name and its fields. A log entry travels as its signed body and signature (the
/// server decodes the entry and hashes it itself); a record version as its stamp and bytes; a
/// zone as its uid (`zone`, see ``ZoneNames``), also for the zone a batch creates. Decoding
/// refuses an unknown operation, a field it does not take and a missing one.
package struct WireWrite: Codable, Sendable, Equatable {
    package var op: String
    package var zone: Data?
    package var uid: Data?
    package var owner: String?
    package var name: String?
    package var created: Double?
    package var users: [String]?
    package var user: String?
    package var reason: String?
    package var head: Int64?
    package var body: Data?
    package var signature: Data?
    package var entries: Data?
    package var names: Data?
    package var epoch: Int64?
    package var bytes: Data?
    package var secret: Data?
    package var recordType: String?
    package var field: String?
    package var valueType: String?
    package var encrypted: Bool?
    package var version: WireVersion?
    package var storedSeq: Int64?
    package var keep: Bool?
    package var seq: Int64?
    package var label: String?
    package var time: Double?
    package var card: Data?
    package var email: String?
    package var signingKey: Data?
    package var boxKey: Data?
    package var cardCreated: String?

    package init(op: String) { self.op = op }

    /// The write on the wire, its zone named by its uid (a zone it creates by the uid it
    /// creates it with; a deletion notice by the zone's uid alone: the server takes its name and
    /// owner from the zone it has).
    package init(_ write: StorageSnapshot.Write, _ zones: ZoneNames) throws {
        self.init(op: "")
        var zone: Int64?
        switch write {
        case .insertZone(_, let u, let id, let c):
            op = "zones/create"; self.zone = Data(u); owner = id.ownerID; name = id.name; created = c
        case .deleteZone(let z): op = "zones/delete"; zone = z
        case .touchZone(let z): op = "zones/touch"; zone = z
        case .zoneGone(let row, let u, let r): op = "zones/gone"; self.zone = Data(row.uid); users = u.sorted(); reason = r
        case .zoneBack(let row, let u): op = "zones/back"; self.zone = Data(row.uid); user = u
        case .appendLog(let z, let h, _, let b, let s, _, let e, let n):
            op = "log/append"; zone = z; head = h; body = Data(b); signature = Data(s); entries = e.map { Data($0) }; names = n.map { Data($0) }
        case .wrappedKey(let z, let e, let m, let w): op = "keys/insert"; zone = z; epoch = e; user = m; bytes = Data(w)
        case .storeWrappedKey(let z, let e, let m, let w): op = "keys/store"; zone = z; epoch = e; user = m; bytes = Data(w)
        case .deleteWrappedKeys(let z, let m): op = "keys/delete"; zone = z; user = m
        case .storeChainedKey(let z, let e, let s): op = "keys/chain"; zone = z; epoch = e; bytes = Data(s)
        case .deleteOlderKeys(let z, let e): op = "keys/deleteOlder"; zone = z; epoch = e
        case .storeShareLink(let z, let e, let k, let s): op = "shares/link"; zone = z; epoch = e; bytes = Data(k); secret = Data(s)
        case .deleteShareLink(let z): op = "shares/unlink"; zone = z
        case .setZoneMembers(let z, let m, let s): op = "zones/members"; zone = z; users = m.sorted(); uid = s.map { Data($0) }
        case .addZoneMember(let z, let u): op = "zones/addMember"; zone = z; user = u
        case .fieldSchema(let z, let t, let f, let s):
            op = "schema/insert"; zone = z; recordType = t; field = f; valueType = s.type.description; encrypted = s.encrypted
        case .dropFieldSchema(let z, let t, let f): op = "schema/drop"; zone = z; recordType = t; field = f
        case .insertRecord(let z, let v): op = "records/insert"; zone = z; version = WireVersion(v)
        case .replaceRecord(let z, let v, let s, let k): op = "records/replace"; zone = z; version = WireVersion(v); storedSeq = s; keep = k
        case .deleteRecord(let z, let n, let s): op = "records/delete"; zone = z; name = n; storedSeq = s
        case .addTombstone(let z, let n, let s, let a, let l, let t): op = "tombstones/add"; zone = z; name = n; seq = s; user = a; label = l; time = t
        case .removeTombstone(let z, let n): op = "tombstones/remove"; zone = z; name = n
        case .compactTombstones(let z, let t): op = "tombstones/compact"; zone = z; seq = t
        case .contact(let u, let n, let e, let sk, let bk, let c, let cc, let a):
            op = "contacts/publish"; user = u; name = n; email = e; signingKey = Data(sk); boxKey = Data(bk); card = Data(c); cardCreated = cc; time = a
        }
        if let zone { self.zone = try zones.uid(zone) }
    }

    /// The write, or `.invalidArguments` naming what is wrong. Its zone is the row id `names`
    /// gives its uid (for a zone it creates, the one reserved for it); a deletion notice's zone
    /// is the row `row` gives its uid. A log entry's body is decoded and hashed here: nothing
    /// the client says about it is taken.
    package func write(_ zones: ZoneNames, row: (_ uid: [UInt8]) throws -> ZoneRow) throws -> StorageSnapshot.Write {
        func field<T>(_ value: T?, _ key: String) throws -> T {
            guard let value else { throw StoreError(.invalidArguments, "operation \(op) lacks '\(key)'") }
            return value
        }
        func bytes(_ value: Data?, _ key: String) throws -> [UInt8] { Array(try field(value, key)) }
        let uidOfZone = try self.zone.map { uid -> [UInt8] in
            guard uid.count == ZoneNames.uidCount else { throw StoreError(.invalidArguments, "operation \(op): a zone uid is \(ZoneNames.uidCount) bytes") }
            return Array(uid)
        }
        try checkFields()
        let zone = try uidOfZone.map { try zones.rowID($0) }
        let write: StorageSnapshot.Write
        switch op {
        case "zones/create":
            try Names.validateZone(try field(name, "name"))
            write = .insertZone(rowID: try field(zone, "zone"), uid: try field(uidOfZone, "zone"),
                                id: ZoneID(name: try field(name, "name"), ownerID: try field(owner, "owner")), created: try field(created, "created"))
        case "zones/delete": write = .deleteZone(rowID: try field(zone, "zone"))
        case "zones/touch": write = .touchZone(rowID: try field(zone, "zone"))
        case "zones/gone":
            write = .zoneGone(try row(try field(uidOfZone, "zone")), users: Set(try field(users, "users")), reason: try field(reason, "reason"))
        case "zones/back": write = .zoneBack(try row(try field(uidOfZone, "zone")), user: try field(user, "user"))
        case "log/append":
            let b = try bytes(body, "body"), s = try bytes(signature, "signature")
            guard let entry = LogEntry.decode(b) else { throw StoreError(.invalidArguments, "a log entry that is malformed") }
            guard s.count == Ed25519.signatureByteCount else { throw StoreError(.invalidArguments, "a log entry's signature is \(Ed25519.signatureByteCount) bytes") }
            write = .appendLog(zoneRowID: try field(zone, "zone"), head: try field(head, "head"), entry: entry, body: b, signature: s,
                               hash: LogEntry.hash(body: b, signature: s), entries: entries.map(Array.init), names: names.map(Array.init))
        case "keys/insert":
            write = .wrappedKey(zoneRowID: try field(zone, "zone"), epoch: try field(epoch, "epoch"), memberID: try field(user, "user"),
                                wrapped: try bytes(self.bytes, "bytes"))
        case "keys/store":
            write = .storeWrappedKey(zoneRowID: try field(zone, "zone"), epoch: try field(epoch, "epoch"), memberID: try field(user, "user"),
                                     wrapped: try bytes(self.bytes, "bytes"))
        case "keys/delete": write = .deleteWrappedKeys(zoneRowID: try field(zone, "zone"), memberID: user)
        case "keys/chain": write = .storeChainedKey(zoneRowID: try field(zone, "zone"), epoch: try field(epoch, "epoch"), sealed: try bytes(self.bytes, "bytes"))
        case "keys/deleteOlder": write = .deleteOlderKeys(zoneRowID: try field(zone, "zone"), before: try field(epoch, "epoch"))
        case "shares/link":
            write = .storeShareLink(zoneRowID: try field(zone, "zone"), epoch: try field(epoch, "epoch"), sealedKey: try bytes(self.bytes, "bytes"),
                                    sealedSecret: try bytes(secret, "secret"))
        case "shares/unlink": write = .deleteShareLink(zoneRowID: try field(zone, "zone"))
        case "zones/members":
            write = .setZoneMembers(zoneRowID: try field(zone, "zone"), members: Set(try field(users, "users")), shareUID: uid.map(Array.init))
        case "zones/addMember": write = .addZoneMember(zoneRowID: try field(zone, "zone"), userID: try field(user, "user"))
        case "schema/insert":
            guard let type = FieldType(name: try field(valueType, "valueType")) else { throw StoreError(.invalidArguments, "a field of unknown type") }
            write = .fieldSchema(zoneRowID: try field(zone, "zone"), recordType: try field(recordType, "recordType"), field: try field(self.field, "field"),
                                 schema: FieldSchema(type: type, encrypted: try field(encrypted, "encrypted")))
        case "schema/drop":
            write = .dropFieldSchema(zoneRowID: try field(zone, "zone"), recordType: try field(recordType, "recordType"), field: try field(self.field, "field"))
        case "records/insert": write = .insertRecord(zoneRowID: try field(zone, "zone"), try field(version, "version").version())
        case "records/replace":
            write = .replaceRecord(zoneRowID: try field(zone, "zone"), try field(version, "version").version(), storedSeq: try field(storedSeq, "storedSeq"),
                                   keep: try field(keep, "keep"))
        case "records/delete":
            try Names.validateRecord(try field(name, "name"))
            write = .deleteRecord(zoneRowID: try field(zone, "zone"), name: try field(name, "name"), storedSeq: try field(storedSeq, "storedSeq"))
        case "tombstones/add":
            try Names.validateRecord(try field(name, "name"))
            write = .addTombstone(zoneRowID: try field(zone, "zone"), name: try field(name, "name"), seq: try field(seq, "seq"), authorID: try field(user, "user"),
                                  label: label, time: try field(time, "time"))
        case "tombstones/remove":
            try Names.validateRecord(try field(name, "name"))
            write = .removeTombstone(zoneRowID: try field(zone, "zone"), name: try field(name, "name"))
        case "tombstones/compact": write = .compactTombstones(zoneRowID: try field(zone, "zone"), through: try field(seq, "seq"))
        case "contacts/publish":
            write = .contact(userID: try field(user, "user"), name: try field(name, "name"), email: email, signingKey: try bytes(signingKey, "signingKey"),
                             boxKey: try bytes(boxKey, "boxKey"), card: try bytes(card, "card"), cardCreated: try field(cardCreated, "cardCreated"),
                             added: try field(time, "time"))
        default: throw StoreError(.invalidArguments, "unknown write operation '\(Names.printable(op))'")
        }
        guard try WireWrite(write, zones) == self else { throw StoreError(.invalidArguments, "operation \(op) carries fields it does not take") }
        return write
    }
}

extension WireWrite {
    /// Refuses a field out of its range or form, whichever operation carries it: a sequence,
    /// head, epoch or change tag is not negative; a user, owner or member is a user id; a record
    /// type and a field are identifiers; a record version's stamp as ``WireVersion/version()``
    /// checks it.
    fileprivate func checkFields() throws {
        func refuse(_ key: String, _ rule: String) -> StoreError { StoreError(.invalidArguments, "operation \(op): '\(key)' \(rule)") }
        for (key, value) in [("head", head), ("epoch", epoch), ("storedSeq", storedSeq), ("seq", seq)] {
            if let value, value < 0 { throw refuse(key, "is not negative") }
        }
        for (key, value) in [("owner", owner), ("user", user)] {
            if let value, !UserIDs.isValid(value) { throw refuse(key, "is a user id (32 lowercase hexadecimal digits)") }
        }
        if let users, !users.allSatisfy(UserIDs.isValid) { throw refuse("users", "are user ids (32 lowercase hexadecimal digits)") }
        if let recordType { try Names.validateRecordType(recordType) }
        if let field { try Names.validateFieldKey(field) }
    }
}

/// A zone row on the wire: the zone named by its uid, never by the server's row id.
package struct WireZone: Codable, Sendable, Equatable {
    package var uid: Data
    package var owner: String
    package var name: String
    package var sequence: Int64
    package var created: Double
    package var logFormat: Int64

    package init(_ row: ZoneRow) {
        uid = Data(row.uid); owner = row.id.ownerID; name = row.id.name; sequence = row.sequence
        created = row.created.timeIntervalSince1970; logFormat = row.logFormat
    }

    /// The row, under the row id `names` gives its uid.
    package func row(_ zones: ZoneNames) throws -> ZoneRow {
        guard uid.count == ZoneNames.uidCount else { throw StoreError(.integrityFailure, "zone '\(Names.printable(name))' has a damaged row: the store was changed") }
        return ZoneRow(rowID: try zones.rowID(Array(uid)), uid: Array(uid), id: ZoneID(name: name, ownerID: owner), sequence: sequence,
                       created: Date(timeIntervalSince1970: created), logFormat: logFormat)
    }
}

/// A record version (a ``SealedVersion`` to write, or a ``StoredRow`` read) on the wire.
package struct WireVersion: Codable, Sendable, Equatable {
    package var name: String
    package var type: String
    package var parent: String?
    package var seq: Int64
    package var epoch: Int64
    package var membershipSeq: Int64
    package var creator: String
    package var modifier: String
    package var created: Double
    package var modified: Double
    package var plain: Data
    /// The plain values' type codes (written versions only: a stored row does not keep them).
    package var plainTypes: Data?
    package var sealed: Data?

    package init(_ v: SealedVersion) {
        let s = v.stamp
        name = s.name; type = s.type; parent = s.parent; seq = s.seq; epoch = s.epoch; membershipSeq = s.membershipSeq
        creator = s.creatorID; modifier = s.modifierID; created = s.created; modified = s.modified
        plain = Data(v.plain); plainTypes = Data(v.plainTypes); sealed = v.sealed.map { Data($0) }
    }

    package init(_ row: StoredRow) {
        name = row.name; type = row.type; parent = row.parent; seq = row.seq; epoch = row.epoch; membershipSeq = row.membershipSeq
        creator = row.creatorID; modifier = row.modifierID; created = row.created; modified = row.modified
        let count = row.plainCount
        (plain, sealed) = row.withBytes { bytes in (Data(bytes.prefix(count)), row.hasSealed ? Data(bytes.dropFirst(count)) : nil) }
    }

    package var stamp: VersionStamp {
        VersionStamp(name: name, type: type, parent: parent, seq: seq, epoch: epoch, membershipSeq: membershipSeq, creatorID: creator,
                     modifierID: modifier, created: created, modified: modified)
    }

    /// The version to write. Its digest is left zero: the server never takes a client's hash,
    /// and the backends do not store it.
    package func version() throws -> SealedVersion {
        guard let plainTypes else { throw StoreError(.invalidArguments, "a record version lacks its plain types") }
        try Names.validateRecord(name)
        if let parent { try Names.validateRecord(parent) }
        try Names.validateRecordType(type)
        guard seq >= 0, epoch >= 0, membershipSeq >= 0 else { throw StoreError(.invalidArguments, "a record version's sequences and epoch are not negative") }
        guard UserIDs.isValid(creator), UserIDs.isValid(modifier) else { throw StoreError(.invalidArguments, "a record version's creator and modifier are user ids") }
        return SealedVersion(stamp: stamp, plain: Array(plain), plainTypes: Array(plainTypes), sealed: sealed.map(Array.init), digest: .zero)
    }

    /// The row, its bytes copied once (straight from the decoded values).
    package var row: StoredRow {
        plain.withUnsafeBytes { plain in
            RecordReader.withOptionalBytes(sealed) { sealed in
                StoredRow.make((name, type, parent, epoch, seq, membershipSeq, creator, modifier, created, modified), plain: plain, sealed: sealed)
            }
        }
    }
}

extension WireVersion {
    /// The keys of its stored properties, in their order (see ``WireBinary/Members``).
    static let wireKeys = ["name", "type", "parent", "seq", "epoch", "membershipSeq", "creator", "modifier", "created", "modified", "plain",
                           "plainTypes", "sealed"]

    /// Writes the version in the binary encoding in one pass: the bytes `encode(to:)` writes
    /// through the keyed container (an absent optional left out), without a lookup of each
    /// member's type.
    func write(to w: WireBinary.Writer) throws {
        let keys = Self.wireKeys
        let open = w.open(.object)
        func key(_ index: Int) throws { try w.text(keys[index], path: []) }
        try key(0); try w.string(name, path: [])
        try key(1); try w.string(type, path: [])
        if let parent { try key(2); try w.string(parent, path: []) }
        try key(3); w.int(seq)
        try key(4); w.int(epoch)
        try key(5); w.int(membershipSeq)
        try key(6); try w.string(creator, path: [])
        try key(7); try w.string(modifier, path: [])
        try key(8); try w.double(created, path: [])
        try key(9); try w.double(modified, path: [])
        try key(10); try w.data(plain, path: [])
        if let plainTypes { try key(11); try w.data(plainTypes, path: []) }
        if let sealed { try key(12); try w.data(sealed, path: []) }
        try w.close(open, path: [])
    }

    /// Reads a version in the binary encoding in one pass, as `init(from:)` reads it from any decoder.
    init(wire decoder: WireBinary.ValueDecoder) throws {
        let m = try WireBinary.Members(decoder, keys: Self.wireKeys)
        name = try m.string(0)
        type = try m.string(1)
        parent = try m.string(ifPresent: 2)
        seq = try m.int(3)
        epoch = try m.int(4)
        membershipSeq = try m.int(5)
        creator = try m.string(6)
        modifier = try m.string(7)
        created = try m.double(8)
        modified = try m.double(9)
        plain = try m.value(Data.self, 10)
        plainTypes = try m.value(ifPresent: Data.self, 11)
        sealed = try m.value(ifPresent: Data.self, 12)
    }
}

extension WireWrite {
    /// The keys of its stored properties, in their order (see ``WireBinary/Members``).
    static let wireKeys = ["op", "zone", "uid", "owner", "name", "created", "users", "user", "reason", "head", "body", "signature", "entries",
                           "names", "epoch", "bytes", "secret", "recordType", "field", "valueType", "encrypted", "version", "storedSeq", "keep",
                           "seq", "label", "time", "card", "email", "signingKey", "boxKey", "cardCreated"]

    /// Writes the write in the binary encoding in one pass: the bytes `encode(to:)` writes
    /// through the keyed container (an absent optional left out).
    func write(to w: WireBinary.Writer) throws {
        let keys = Self.wireKeys
        let open = w.open(.object)
        func key(_ index: Int) throws { try w.text(keys[index], path: []) }
        func string(_ index: Int, _ value: String?) throws { if let value { try key(index); try w.string(value, path: []) } }
        func data(_ index: Int, _ value: Data?) throws { if let value { try key(index); try w.data(value, path: []) } }
        func int(_ index: Int, _ value: Int64?) throws { if let value { try key(index); w.int(value) } }
        func double(_ index: Int, _ value: Double?) throws { if let value { try key(index); try w.double(value, path: []) } }
        func bool(_ index: Int, _ value: Bool?) throws { if let value { try key(index); w.tag(value ? .yes : .no) } }
        try string(0, op)
        try data(1, zone)
        try data(2, uid)
        try string(3, owner)
        try string(4, name)
        try double(5, created)
        if let users { try key(6); try w.value(users, path: []) }
        try string(7, user)
        try string(8, reason)
        try int(9, head)
        try data(10, body)
        try data(11, signature)
        try data(12, entries)
        try data(13, names)
        try int(14, epoch)
        try data(15, bytes)
        try data(16, secret)
        try string(17, recordType)
        try string(18, field)
        try string(19, valueType)
        try bool(20, encrypted)
        if let version { try key(21); try version.write(to: w) }
        try int(22, storedSeq)
        try bool(23, keep)
        try int(24, seq)
        try string(25, label)
        try double(26, time)
        try data(27, card)
        try string(28, email)
        try data(29, signingKey)
        try data(30, boxKey)
        try string(31, cardCreated)
        try w.close(open, path: [])
    }

    /// Reads a write in the binary encoding in one pass, as `init(from:)` reads it from any decoder.
    init(wire decoder: WireBinary.ValueDecoder) throws {
        let m = try WireBinary.Members(decoder, keys: Self.wireKeys)
        op = try m.string(0)
        zone = try m.value(ifPresent: Data.self, 1)
        uid = try m.value(ifPresent: Data.self, 2)
        owner = try m.string(ifPresent: 3)
        name = try m.string(ifPresent: 4)
        created = try m.double(ifPresent: 5)
        users = try m.value(ifPresent: [String].self, 6)
        user = try m.string(ifPresent: 7)
        reason = try m.string(ifPresent: 8)
        head = try m.int(ifPresent: 9)
        body = try m.value(ifPresent: Data.self, 10)
        signature = try m.value(ifPresent: Data.self, 11)
        entries = try m.value(ifPresent: Data.self, 12)
        names = try m.value(ifPresent: Data.self, 13)
        epoch = try m.int(ifPresent: 14)
        bytes = try m.value(ifPresent: Data.self, 15)
        secret = try m.value(ifPresent: Data.self, 16)
        recordType = try m.string(ifPresent: 17)
        field = try m.string(ifPresent: 18)
        valueType = try m.string(ifPresent: 19)
        encrypted = try m.bool(ifPresent: 20)
        version = try m.value(ifPresent: WireVersion.self, 21)
        storedSeq = try m.int(ifPresent: 22)
        keep = try m.bool(ifPresent: 23)
        seq = try m.int(ifPresent: 24)
        label = try m.string(ifPresent: 25)
        time = try m.double(ifPresent: 26)
        card = try m.value(ifPresent: Data.self, 27)
        email = try m.string(ifPresent: 28)
        signingKey = try m.value(ifPresent: Data.self, 29)
        boxKey = try m.value(ifPresent: Data.self, 30)
        cardCreated = try m.string(ifPresent: 31)
    }
}

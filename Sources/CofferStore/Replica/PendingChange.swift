import CofferCrypto
import CofferVault
import Foundation

/// One offline write kept in a replica until a push signs it: an unsigned intent. It holds the
/// record's new fields, the fields it sets, and the confirmed version it was made from (its
/// `base`), so that a push merges it three ways (see ``PendingMerge``).
///
/// Sealed with XChaCha20-Poly1305 under ``Vault/pendingChangesKey()``, with associated data
/// `"coffer.change\0" ‖ store id (16) ‖ user id ‖ number (u64)`: a row moved to another number,
/// store or user does not open. Plaintext (integers big-endian; strings as a length and UTF-8,
/// one byte of length for short ones, four for values):
///
/// | bytes | field |
/// | --- | --- |
/// | 1 | format (`1`) |
/// | 1 | kind: `1` save, `2` delete |
/// | 16 | zone uid |
/// | 1 + n, 1 + n | zone name, owner id |
/// | 1 + n | record name |
/// | 8 | time made (IEEE 754 bits of seconds since 1970) |
/// | 1 (+ fields) | `1` and the base (the confirmed record it was made from), or `0` for none |
/// | 1 (+ fields) | `1` and the new record, or `0` (a delete) |
/// | 2 + keys | the keys it sets (count, then each, sorted) |
///
/// Fields: record type (1 + n), parent (`1` and 1 + n, or `0`), change tag (1 + n, empty for
/// none), plain values and encrypted values (each 4 + n, ``SealedValuesCodec``).
package struct PendingChange: Sendable, Equatable {
    package enum Kind: UInt8, Sendable {
        case save = 1
        case delete = 2
    }

    /// A record's fields as a change keeps them.
    package struct Fields: Sendable, Equatable {
        package var type: String
        package var parent: String?
        package var changeTag: String?
        package var values: [String: RecordValue]
        package var encryptedValues: [String: RecordValue]

        init(_ record: Record) {
            type = record.recordType
            parent = record.parent
            changeTag = record.changeTag
            values = record.values
            encryptedValues = record.encryptedValues
        }

        init(type: String, parent: String?, changeTag: String?, values: [String: RecordValue], encryptedValues: [String: RecordValue]) {
            self.type = type
            self.parent = parent
            self.changeTag = changeTag
            self.values = values
            self.encryptedValues = encryptedValues
        }

        /// The field `key` as set: its value and whether it is encrypted; nil when absent.
        func field(_ key: String) -> (value: RecordValue, encrypted: Bool)? {
            if let v = values[key] { return (v, false) }
            if let v = encryptedValues[key] { return (v, true) }
            return nil
        }

        /// These fields with `keys` taken from `other` (a key `other` lacks is removed).
        func setting(_ keys: [String], from other: Fields) -> Fields {
            var out = self
            out.type = other.type
            out.parent = other.parent
            for key in keys {
                out.values[key] = other.values[key]
                out.encryptedValues[key] = other.encryptedValues[key]
            }
            return out
        }

        func record(name: String, zone: ZoneID) -> Record {
            var record = Record(type: type, name: name, zone: zone, parent: parent, values: values, encryptedValues: encryptedValues)
            record.changeTag = changeTag
            return record
        }
    }

    package var number: UInt64
    package var kind: Kind
    package var zoneUID: [UInt8]
    package var zone: ZoneID
    package var name: String
    package var time: Double
    /// The confirmed record the change was made from; nil when the name held none.
    package var base: Fields?
    /// The record as the change leaves it; nil for a delete.
    package var local: Fields?
    /// The keys the change sets (all of the record's, and the base's, for a full replace).
    package var setKeys: [String]

    static let format: UInt8 = 1
    static let domain = Array("coffer.change".utf8) + [0]

    static func associatedData(storeID: [UInt8], userID: String, number: UInt64) -> [UInt8] {
        domain + storeID + Array(userID.utf8) + BigEndian.bytes(number)
    }

    /// The id the commit that confirms this change carries: the first 16 bytes of BLAKE2b-256
    /// of `"coffer.change-id\0" ‖ the id key ‖ store id ‖ number`.
    static func id(number: UInt64, storeID: [UInt8], idKey: SymmetricKey) -> [UInt8] {
        let prefix = Array("coffer.change-id".utf8) + [0]
        let bytes = idKey.withUnsafeBytes { prefix + Array($0) } + storeID + BigEndian.bytes(number)
        return Array(BLAKE2b.hash(bytes).prefix(LogEntry.changeIDLength))
    }

    func sealed(key: SymmetricKey, storeID: [UInt8], userID: String) throws -> [UInt8] {
        var w = ByteWriter()
        w.u8(Self.format)
        w.u8(kind.rawValue)
        w.append(zoneUID)
        w.short(zone.name)
        w.short(zone.ownerID)
        w.short(name)
        w.u64(time.bitPattern)
        Self.write(base, into: &w)
        Self.write(local, into: &w)
        w.u16(setKeys.count)
        for key in setKeys.sorted() { w.short(key) }
        let box = try XChaCha20Poly1305.seal(w.bytes, using: key, authenticating: Self.associatedData(storeID: storeID, userID: userID, number: number))
        return box.combined
    }

    private static func write(_ fields: Fields?, into w: inout ByteWriter) {
        guard let fields else { w.u8(0); return }
        w.u8(1)
        w.short(fields.type)
        if let parent = fields.parent { w.u8(1); w.short(parent) } else { w.u8(0) }
        w.short(fields.changeTag ?? "")
        let plain = SealedValuesCodec.encode(fields.values), sealed = SealedValuesCodec.encode(fields.encryptedValues)
        w.u32(plain.count)
        w.append(plain)
        w.u32(sealed.count)
        w.append(sealed)
    }

    /// Opens a sealed change; nil for one that does not authenticate as `number` of this store
    /// and user, or is not exactly one well-formed change.
    static func open(_ sealed: [UInt8], number: UInt64, key: SymmetricKey, storeID: [UInt8], userID: String) -> PendingChange? {
        guard let box = try? XChaCha20Poly1305.SealedBox(combined: sealed),
              let plaintext = try? XChaCha20Poly1305.open(box, using: key, authenticating: associatedData(storeID: storeID, userID: userID, number: number))
        else { return nil }
        return plaintext.withUnsafeBytes { raw -> PendingChange? in
            var r = RawReader(raw, what: "pending change")
            do {
                guard try r.u8() == format, let kind = Kind(rawValue: try r.u8()) else { return nil }
                let uid = Array(try r.take(16))
                let zone = ZoneID(name: try r.short(), ownerID: try r.short())
                let name = try r.short()
                let time = Double(bitPattern: try r.u64())
                let base = try readFields(&r), local = try readFields(&r)
                var keys = [String]()
                for _ in 0..<Int(try r.u16()) { keys.append(try r.short()) }
                guard r.remaining == 0, time.isFinite, (kind == .save) == (local != nil) else { return nil }
                return PendingChange(number: number, kind: kind, zoneUID: uid, zone: zone, name: name, time: time, base: base, local: local, setKeys: keys)
            } catch {
                return nil
            }
        }
    }

    private static func readFields(_ r: inout RawReader) throws -> Fields? {
        switch try r.u8() {
        case 0: return nil
        case 1: break
        default: throw r.fail("fields flag")
        }
        let type = try r.short()
        let parent: String?
        switch try r.u8() {
        case 0: parent = nil
        case 1: parent = try r.short()
        default: throw r.fail("parent flag")
        }
        let tag = try r.short()
        let plain = try SealedValuesCodec.decode(Array(try r.take(Int(try r.u32()))))
        let sealed = try SealedValuesCodec.decode(Array(try r.take(Int(try r.u32()))))
        return Fields(type: type, parent: parent, changeTag: tag.isEmpty ? nil : tag, values: plain, encryptedValues: sealed)
    }

    /// The record as this change leaves it (nil for a delete), as reads of the replica show it:
    /// no change tag yet, modified by `modifier` when the change was made.
    func record(modifier: String) -> Record? {
        guard var record = local?.record(name: name, zone: zone) else { return nil }
        record.changeTag = nil
        record.modified = Date(timeIntervalSince1970: time)
        record.modifierID = modifier
        return record
    }
}

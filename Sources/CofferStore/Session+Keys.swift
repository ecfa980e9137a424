import CofferCrypto
import Foundation
import GRDB

extension Session {
    /// The zone key of `epoch`, unwrapped with this user's X25519 key on first use and cached.
    /// - Throws: `.permissionFailure` when the key is not wrapped to this user;
    ///   `.integrityFailure` when the wrapped key does not open.
    func zoneKey(_ db: GRDB.Database, zone: ZoneRow, epoch: Int64) throws -> SymmetricKey {
        if let key = zoneKeys.withLock({ $0[zone.rowID]?[epoch] }) { return key }
        guard let wrapped = try Data.fetchOne(db, sql: "SELECT wrapped_key FROM zone_key WHERE zone_id = ? AND epoch = ? AND member_id = ?",
                                              arguments: [zone.rowID, epoch, userID]) else {
            throw StoreError(.permissionFailure, "you hold no key for zone '\(zone.id.name)' (epoch \(epoch))")
        }
        let key: SymmetricKey
        do {
            key = try SymmetricKey(bytes: SealedBoxWrap.open(Array(wrapped), with: vault.boxKey))
        } catch {
            throw StoreError(.integrityFailure, "the key of zone '\(zone.id.name)' wrapped to you does not open: the store was changed",
                             underlying: error as? CryptoError)
        }
        zoneKeys.withLock { $0[zone.rowID, default: [:]][epoch] = key }
        return key
    }

    /// Forgets cached keys and schemas of a zone (after it is deleted).
    func forget(zoneRowID: Int64) {
        zoneKeys.withLock { _ = $0.removeValue(forKey: zoneRowID) }
        schemas.withLock { cache in cache = cache.filter { $0.key.zoneRowID != zoneRowID } }
    }

    /// Associated data of a record's sealed values: store id, zone uid, owner, record name,
    /// record type and epoch, each length-prefixed. Moving a ciphertext to another record,
    /// zone, store or epoch makes it fail to open.
    static func associatedData(storeID: [UInt8], zone: ZoneRow, name: String, type: String, epoch: Int64) -> [UInt8] {
        var ad = [UInt8]()
        ad.reserveCapacity(96 + name.utf8.count + type.utf8.count)
        ad.append(contentsOf: "coffer.record.v1".utf8)
        func framed(_ bytes: some Collection<UInt8>) {
            let n = bytes.count
            ad.append(contentsOf: [UInt8(n >> 8 & 0xff), UInt8(n & 0xff)])
            ad.append(contentsOf: bytes)
        }
        framed(storeID)
        framed(zone.uid)
        framed(zone.id.ownerID.utf8)
        framed(name.utf8)
        framed(type.utf8)
        ad.append(contentsOf: BigEndian.bytes(UInt64(epoch)))
        return ad
    }
}

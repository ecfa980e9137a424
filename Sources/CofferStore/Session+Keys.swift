import CofferCrypto
import Foundation
import GRDB

extension Session {
    /// The zone key of `epoch`: unwrapped with this user's X25519 key when one is wrapped to
    /// them, or else opened from the key chain (each old key is sealed under the next epoch's
    /// key). Cached for the session. The current key of a shared zone is checked against the
    /// owner-signed commitment.
    /// - Throws: `.permissionFailure` when no key is reachable; `.integrityFailure` when a
    ///   wrapped or chained key does not open or does not match the commitment.
    func zoneKey(_ db: GRDB.Database, zone: ZoneRow, epoch: Int64, share: ShareContent? = nil) throws -> SymmetricKey {
        if let key = zoneKeys.withLock({ $0[zone.rowID]?[epoch] }) { return key }
        let key: SymmetricKey
        if let wrapped = try Data.fetchOne(db, sql: "SELECT wrapped_key FROM zone_key WHERE zone_id = ? AND epoch = ? AND member_id = ?",
                                           arguments: [zone.rowID, epoch, userID]) {
            do {
                key = try Self.unwrapZoneKey(Array(wrapped), zone: zone, epoch: epoch, with: vault.boxKey)
            } catch {
                throw StoreError(.integrityFailure, "the key of zone '\(zone.id.name)' wrapped to you does not open: the store was changed",
                                 underlying: error as? CryptoError)
            }
        } else if epoch < zone.currentEpoch,
                  let sealed = try Data.fetchOne(db, sql: "SELECT sealed_key FROM zone_key_chain WHERE zone_id = ? AND epoch = ?",
                                                 arguments: [zone.rowID, epoch]) {
            let newer = try zoneKey(db, zone: zone, epoch: epoch + 1, share: share)
            do {
                let envelope = try Envelope(bytes: Array(sealed))
                guard Int64(envelope.keyID) == epoch + 1 else { throw CryptoError.authenticationFailure }
                key = try SymmetricKey(bytes: envelope.openSecret(using: newer, authenticating: Self.chainAD(zone: zone, epoch: epoch)))
            } catch {
                throw StoreError(.integrityFailure, "the key chain of zone '\(zone.id.name)' is damaged at epoch \(epoch)",
                                 underlying: error as? CryptoError)
            }
        } else {
            throw StoreError(.permissionFailure, "you hold no key for zone '\(zone.id.name)' (epoch \(epoch))")
        }
        if let share, share.epoch == epoch,
           ShareContent.commitment(to: key, zoneUID: zone.uid, epoch: epoch) != share.keyCommitment {
            throw StoreError(.integrityFailure, "the key of zone '\(zone.id.name)' does not match its owner's signed commitment")
        }
        zoneKeys.withLock { $0[zone.rowID, default: [:]][epoch] = key }
        return key
    }

    /// Wraps a zone key to a member: `crypto_box_seal` of `"CZK1"` ‖ zone uid ‖ epoch ‖ key, so a
    /// wrapped key copied to another zone or epoch is refused when opened.
    static func wrapZoneKey(_ key: SymmetricKey, zoneUID: [UInt8], epoch: Int64, to recipient: X25519.PublicKey) -> [UInt8] {
        let prefix = Array("CZK1".utf8) + zoneUID + BigEndian.bytes(epoch)
        let payload = SecureBytes(count: prefix.count + SymmetricKey.byteCount) { out in
            prefix.withUnsafeBytes { out.baseAddress!.copyMemory(from: $0.baseAddress!, byteCount: prefix.count) }
            key.withUnsafeBytes { (out.baseAddress! + prefix.count).copyMemory(from: $0.baseAddress!, byteCount: $0.count) }
        }
        return SealedBoxWrap.seal(payload, to: recipient)
    }

    static func unwrapZoneKey(_ wrapped: [UInt8], zone: ZoneRow, epoch: Int64, with privateKey: X25519.PrivateKey) throws -> SymmetricKey {
        let payload = try SealedBoxWrap.open(wrapped, with: privateKey)
        let prefix = Array("CZK1".utf8) + zone.uid + BigEndian.bytes(epoch)
        guard payload.count == prefix.count + SymmetricKey.byteCount,
              payload.withUnsafeBytes({ Array($0.prefix(prefix.count)) }) == prefix else {
            throw CryptoError.authenticationFailure // a key wrapped for another zone or epoch
        }
        return try SymmetricKey(bytes: payload.slice(prefix.count..<payload.count))
    }

    /// Drops the kept row contexts of a zone (``rowContexts``): called wherever the schema or
    /// key caches they were made from change.
    func forgetRowContexts(zoneRowID: Int64) {
        rowContexts.withLock { _ = $0.removeValue(forKey: zoneRowID) }
    }

    /// Associated data of a chain link: the key of `epoch` sealed under the key of `epoch + 1`.
    static func chainAD(zone: ZoneRow, epoch: Int64) -> [UInt8] {
        Array("coffer.key-chain.v1".utf8) + zone.uid + BigEndian.bytes(Int64(epoch))
    }

    /// Forgets cached keys and schemas of a zone (after it is deleted).
    func forget(zoneRowID: Int64) {
        forgetRowContexts(zoneRowID: zoneRowID)
        zoneKeys.withLock { _ = $0.removeValue(forKey: zoneRowID) }
        commits.withLock { _ = $0.removeValue(forKey: zoneRowID) }
        memberships.withLock { _ = $0.removeValue(forKey: zoneRowID) }
        schemas.withLock { cache in cache = cache.filter { $0.key.zoneRowID != zoneRowID } }
    }

    /// Associated data of a record's sealed values: store id, zone uid, owner, record name,
    /// record type and epoch, each length-prefixed. Moving a ciphertext to another record,
    /// zone, store or epoch makes it fail to open.
    static func associatedData(storeID: [UInt8], zone: ZoneRow, name: String, type: String, epoch: Int64) -> [UInt8] {
        withAssociatedData(storeID: storeID, zone: zone, name: name, type: type, epoch: epoch) { Array($0) }
    }
}

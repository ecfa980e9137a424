import CofferCrypto
import CofferVault
import Foundation

/// A user's zone keys: unwrapped from what is wrapped to them, or opened down the key chain, and
/// believed only when they match the owner's commitment in the zone's verified log; kept (in
/// guarded memory) for the session. Also the formats of zone keys at rest: a key wrapped to a
/// member, a chain link, a commitment.
final class KeyRing: Sendable {
    let vault: Vault
    /// Zone row id → key epoch → zone key, each checked against its commitment in the log.
    let cache = Locked<[Int64: [Int64: SymmetricKey]]>([:])

    init(vault: Vault) {
        self.vault = vault
    }

    var userID: String { vault.identity.userID }

    /// The zone key of `epoch`: unwrapped with this user's X25519 key when one is wrapped to
    /// them, or else opened from the key chain (each old key is sealed under the next epoch's
    /// key). Either way it must match the owner's commitment to that epoch's key in the verified
    /// log (``ZoneState/commitments``): `crypto_box_seal` is anonymous, so anyone could wrap a key
    /// of their own to this user, and only the owner can commit to one. Cached for the session.
    /// - Throws: `.permissionFailure` when no key is reachable; `.integrityFailure` when a
    ///   wrapped or chained key does not open or does not match its commitment.
    /// With `cached` false (a state of audit's own walk), the session's cache is neither read nor filled.
    func zoneKey(_ db: any StorageTransaction, zone: ZoneRow, epoch: Int64, state: ZoneState, cached useCache: Bool = true) throws -> SymmetricKey {
        if useCache, let key = cache.withLock({ $0[zone.rowID]?[epoch] }) { return key }
        guard epoch >= 1, epoch <= state.epoch else {
            throw StoreError(.integrityFailure, "zone '\(zone.id.name)' has no key epoch \(epoch) in its log: the store was changed")
        }
        let key: SymmetricKey
        if let wrapped = try db.wrappedKey(zoneRowID: zone.rowID, epoch: epoch, memberID: userID) {
            do {
                key = try KeyRing.unwrapZoneKey(Array(wrapped), zoneUID: zone.uid, epoch: epoch, with: vault.boxKey)
            } catch {
                throw StoreError(.integrityFailure, "the key of zone '\(zone.id.name)' wrapped to you does not open: the store was changed",
                                 underlying: error as? CryptoError)
            }
        } else if epoch < state.epoch,
                  let sealed = try db.chainedKey(zoneRowID: zone.rowID, epoch: epoch) {
            let newer = try zoneKey(db, zone: zone, epoch: epoch + 1, state: state, cached: useCache)
            do {
                let envelope = try Envelope(bytes: Array(sealed))
                guard Int64(envelope.keyID) == epoch + 1 else { throw CryptoError.authenticationFailure }
                key = try SymmetricKey(bytes: envelope.openSecret(using: newer, authenticating: KeyRing.chainAD(zoneUID: zone.uid, epoch: epoch)))
            } catch {
                throw StoreError(.integrityFailure, "the key chain of zone '\(zone.id.name)' is damaged at epoch \(epoch)",
                                 underlying: error as? CryptoError)
            }
        } else {
            throw StoreError(.permissionFailure, "you hold no key for zone '\(zone.id.name)' (epoch \(epoch))")
        }
        try KeyRing.checkCommitment(key, zone: zone, epoch: epoch, state: state)
        if useCache { cache.withLock { $0[zone.rowID, default: [:]][epoch] = key } }
        return key
    }

    /// Checks, without the session's cache, that this user's key of the current epoch opens and
    /// matches the owner's commitment at `state` (for audit).
    func checkZoneKey(_ db: any StorageTransaction, zone: ZoneRow, state: ZoneState) throws {
        _ = try zoneKey(db, zone: zone, epoch: state.epoch, state: state, cached: false)
    }

    /// Throws unless `key` is the one the zone's owner committed to for `epoch`.
    static func checkCommitment(_ key: SymmetricKey, zone: ZoneRow, epoch: Int64, state: ZoneState) throws {
        guard let committed = state.commitments[epoch] else {
            // Epochs older than a migrated zone's first entry were re-sealed away: no record needs them.
            throw StoreError(.integrityFailure, "zone '\(zone.id.name)' has no commitment to a key of epoch \(epoch): the store was changed")
        }
        guard constantTimeEquals(commitment(to: key, zoneUID: zone.uid, epoch: epoch), committed) else {
            throw StoreError(.integrityFailure, "the key of zone '\(zone.id.name)' (epoch \(epoch)) is not the one its owner committed to: the store was changed")
        }
    }

    /// A commitment to a zone key that reveals nothing about it: keyed BLAKE2b-256 of a domain
    /// string, the zone uid and the epoch, under the key. Published by the owner in the log.
    static func commitment(to key: SymmetricKey, zoneUID: [UInt8], epoch: Int64) -> [UInt8] {
        BLAKE2b.keyedHash(Array("coffer.zone-key-commitment.v1".utf8) + zoneUID + BigEndian.bytes(Int64(epoch)), key: key)
            .unsafeCopiedBytes()
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

    static func unwrapZoneKey(_ wrapped: [UInt8], zoneUID: [UInt8], epoch: Int64, with privateKey: X25519.PrivateKey) throws -> SymmetricKey {
        let payload = try SealedBoxWrap.open(wrapped, with: privateKey)
        let prefix = Array("CZK1".utf8) + zoneUID + BigEndian.bytes(epoch)
        guard payload.count == prefix.count + SymmetricKey.byteCount,
              payload.withUnsafeBytes({ Array($0.prefix(prefix.count)) }) == prefix else {
            throw CryptoError.authenticationFailure // a key wrapped for another zone or epoch
        }
        return try SymmetricKey(bytes: payload.slice(prefix.count..<payload.count))
    }

    /// Keeps `key` as the zone's key of `epoch` (a key this user made or rotated to, once its
    /// transaction committed).
    func remember(_ key: SymmetricKey, zoneRowID: Int64, epoch: Int64) {
        cache.withLock { $0[zoneRowID, default: [:]][epoch] = key }
    }

    /// Keeps only `key` for the zone, as its key of `epoch` (a zone made or upgraded).
    func replace(zoneRowID: Int64, with key: SymmetricKey, epoch: Int64) {
        cache.withLock { $0[zoneRowID] = [epoch: key] }
    }

    /// Forgets the zone's keys of every epoch but `epoch` (older keys were deleted from the store).
    func keepOnly(epoch: Int64, zoneRowID: Int64) {
        cache.withLock { cache in cache[zoneRowID] = cache[zoneRowID]?.filter { $0.key == epoch } }
    }

    /// Forgets every key of the zone.
    func forget(zoneRowID: Int64) {
        cache.withLock { _ = $0.removeValue(forKey: zoneRowID) }
    }

    /// Associated data of a chain link: the key of `epoch` sealed under the key of `epoch + 1`.
    static func chainAD(zoneUID: [UInt8], epoch: Int64) -> [UInt8] {
        Array("coffer.key-chain.v1".utf8) + zoneUID + BigEndian.bytes(Int64(epoch))
    }
}

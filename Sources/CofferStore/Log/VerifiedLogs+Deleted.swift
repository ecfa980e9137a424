import CofferCrypto
import CofferVault
import Foundation

extension VerifiedLogs {
    /// Checks what the store kept of a deleted zone against this user's mark of it: the genesis
    /// is the zone's (its uid, its owner's, signed by the owner's key from their card), and the
    /// deletion is the owner's, signed by them, of the same zone, at or past the mark (directly
    /// after the mark, it names the mark's entry as the one before it). Then the zone's owner
    /// deleted it after everything this user verified: the mark is closed. Against a mark closed
    /// already (a deletion mark), the entries and their signatures only.
    /// - Returns: the deletion's sequence.
    /// - Throws: `.integrityFailure` saying why the record does not prove that.
    func verifiedDeletion(_ db: any StorageTransaction, _ kept: DeletedZoneRow, mark: ZoneMark) throws -> Int64 {
        func refuse(_ why: String) -> StoreError {
            let seen = mark.isDeletion ? "" : " (you verified its log up to entry \(mark.seq))"
            return StoreError(.integrityFailure, "\(describeZone(uid: mark.zoneUID, ownerID: mark.ownerID)) is not among your zones in this store\(seen), "
                              + "and the store's record of its deletion does not prove that its owner deleted it: \(why)")
        }
        guard kept.uid == mark.zoneUID else { throw refuse("the record is of another zone") }
        guard kept.id.ownerID == mark.ownerID else { throw refuse("the record names \(describeUser(kept.id.ownerID)) as the zone's owner") }
        let key: Ed25519.PublicKey
        do { key = try store.signingKey(db, of: mark.ownerID) } catch let error as StoreError where error.code == .unknownItem {
            throw refuse("the zone's owner is not a contact of this store")
        }
        // The genesis verified as every genesis is, and the deletion read as every stored entry
        // is, each signed by the owner's key (the entries between them are gone).
        let genesis: ZoneState, deletion: LogEntry
        do {
            genesis = try ZoneLogVerifier(uid: mark.zoneUID, zone: ZoneID(name: kept.id.name, ownerID: mark.ownerID),
                                          describe: { [self] in describeUser($0) }, key: { _ in key }).genesis(kept.genesis)
            deletion = try kept.deletion.checked(key: { _ in key }, describe: describeUser)
        } catch let refusal as ZoneState.Refusal {
            throw refuse(refusal.reason)
        }
        guard deletion.kind == .deletion else { throw refuse("its last entry is a \(deletion.kind), not a deletion") }
        guard deletion.authorID == mark.ownerID else { throw refuse("the deletion is signed by \(describeUser(deletion.authorID)), not the zone's owner") }
        guard deletion.zoneUID == mark.zoneUID else { throw refuse("the deletion is of another zone") }
        guard deletion.payload.isEmpty else { throw refuse("the deletion is malformed") }
        guard deletion.seq > genesis.base, deletion.seq > genesis.base + 1 || deletion.prev == kept.genesis.hash else {
            throw refuse("the deletion does not follow the genesis")
        }
        if mark.isDeletion { return deletion.seq }
        guard genesis.base <= mark.seq else { throw refuse("its genesis is entry \(genesis.base), after the entry you verified") }
        if genesis.base == mark.seq, kept.genesis.hash.bytes != mark.hash { throw refuse("its genesis is not the one you verified") }
        guard deletion.seq >= mark.seq else { throw refuse("the deletion is entry \(deletion.seq), before the entry you verified") }
        if deletion.seq == mark.seq, kept.deletion.hash.bytes != mark.hash { throw refuse("the deletion is not the entry \(mark.seq) you verified") }
        if deletion.seq == mark.seq + 1, deletion.prev.bytes != mark.hash { throw refuse("the deletion does not follow the entry \(mark.seq) you verified") }
        return deletion.seq
    }
}

extension VerifiedLogs {
    /// For a zone of another user that the store does not have: `.zoneNotFound` saying that its
    /// owner deleted it, when the store kept the deletion of a zone of that name and owner that
    /// this user has a mark of, and it verifies (``verifiedDeletion(_:_:mark:)``); else nil.
    func provenDeletion(_ db: any StorageTransaction, _ zoneID: ZoneID) throws -> StoreError? {
        guard zoneID.ownerID != userID, let marks = try? vault.marks.all() else { return nil }
        let theirs = marks.filter { $0.ownerID == zoneID.ownerID }
        guard !theirs.isEmpty else { return nil }
        // Each mark's read noted before any is waited for (one round where the backend fetches).
        let kept = try db.eachGathering(theirs) { mark in try db.deletedZone(uid: mark.zoneUID).map { (mark, $0) } }
        for (mark, row) in kept where row.id == zoneID {
            let seq: Int64
            do { seq = try verifiedDeletion(db, row, mark: mark) } catch is StoreError { continue }
            return StoreError(.zoneNotFound, "zone '\(zoneID.name)' was deleted by its owner, \(describeUser(zoneID.ownerID)), who signed its deletion (entry \(seq) of its log)")
        }
        return nil
    }
}

import CofferCrypto
import CofferVault
import Foundation

/// Sharing a zone: invitations, acceptance, leaving, removal (the key rotates), the public link,
/// stopping a share, and moving records into a zone of their own. Each change is a signed
/// entry of the zone's log.
struct ShareService: Sendable {
    /// The store written to, and its cards.
    let store: Store
    /// The acting user's vault: their id, the key their zone keys are wrapped to, their pinned cards.
    let vault: Vault
    /// The zone keys, rotated when someone leaves.
    let keyRing: KeyRing
    /// The zones' logs: each change is a signed entry.
    let verifiedLogs: VerifiedLogs
    /// Who may share a zone (its owner) or take part.
    let accessControl: AccessControl
    /// The schemas a move carries over.
    let schemaRegistry: SchemaRegistry
    /// Reads the records a move takes.
    let reader: RecordReader
    /// Writes the records a move puts in its new zone.
    let writer: RecordWriter
    /// Creates the zone of a move, and deletes the one it empties.
    let zoneDirectory: ZoneDirectory
    /// The kept row contexts, dropped with the keys they hold.
    let rowContexts: RowContexts

    /// The acting user's id.
    var userID: String { vault.identity.userID }
}

extension ShareService {
    // MARK: - Owner operations

    func createShare(zone zoneID: ZoneID, title: String, publicPermission: SharePermission) async throws -> Share {
        try Self.validateTitle(title)
        return try await store.write { db in
            let zone = try self.accessControl.zoneRow(db, zoneID)
            var log = try self.accessControl.requireOwner(db, zone: zone, to: "share it").log
            guard log.state.share == nil else {
                throw StoreError(.alreadyExists, "zone '\(zoneID.name)' is already shared; see 'coffer share show \(zoneID.name)'")
            }
            var share = ShareState(shareUID: SecureRandom.bytes(count: 16), title: title, publicPermission: publicPermission,
                                   linkPublicKey: nil, participants: [:])
            if publicPermission != .none {
                let key = try self.keyRing.zoneKey(db, zone: zone, epoch: log.state.epoch, state: log.state)
                share.linkPublicKey = try self.setLink(db, zone: zone, share: share, epoch: log.state.epoch, key: key, secret: .random(count: 32))
            }
            try self.writeMembership(db, zone: zone, log: &log, share: share)
            self.store.logger.info("zone shared", metadata: ["zone": "\(zoneID.name)"])
            return try self.describe(db, zone: zone, state: log.state)
        }
    }

    func addParticipant(_ who: String, permission: SharePermission, zone zoneID: ZoneID) async throws -> Share {
        guard permission != .none else { throw StoreError(.invalidArguments, "a participant's permission is read-only or read-write") }
        let contact = try await store.contact(matching: who, for: vault)
        return try await store.write { db in
            let (zone, log0, loaded) = try self.ownedShare(db, zoneID, to: "add participants")
            var log = log0, share = loaded
            guard share.publicPermission == .none else {
                throw StoreError(.invalidArguments, "named participants can be added only while the public permission is none (it is \(share.publicPermission)); run 'coffer share public \(zoneID.name) none' first")
            }
            guard contact.userID != self.userID else { throw StoreError(.invalidArguments, "you own zone '\(zoneID.name)'; you cannot be its participant") }
            if let existing = share.participants[contact.userID], existing.status != .removed {
                throw StoreError(.alreadyExists, "\(contact.name) already takes part in the share of '\(zoneID.name)' (\(existing.permission)); use 'share permission' to change it")
            }
            guard share.activeNamed.count < Limits.maxParticipants else {
                throw StoreError(.limitExceeded, "a share has at most \(Limits.maxParticipants) participants")
            }
            let epoch = log.state.epoch
            let key = try self.keyRing.zoneKey(db, zone: zone, epoch: epoch, state: log.state)
            // Wrapped to the box key of their verified card.
            let wrapped = KeyRing.wrapZoneKey(key, zoneUID: zone.uid, epoch: epoch, to: contact.identity.boxKey)
            try db.storeWrappedKey(zoneRowID: zone.rowID, epoch: epoch, memberID: contact.userID, wrapped: wrapped)
            // A former participant coming back starts over: the log drops their earlier answer.
            share.participants[contact.userID] = .init(role: .privateUser, permission: permission, status: .pending)
            try self.writeMembership(db, zone: zone, log: &log, share: share)
            return try self.describe(db, zone: zone, state: log.state)
        }
    }

    func setPermission(_ who: String, permission: SharePermission, zone zoneID: ZoneID) async throws -> Share {
        guard permission != .none else { throw StoreError(.invalidArguments, "to take away access, remove the participant") }
        let contact = try await store.contact(matching: who, for: vault)
        return try await store.write { db in
            let (zone, log0, loaded) = try self.ownedShare(db, zoneID, to: "change permissions")
            var log = log0, share = loaded
            guard let p = share.participants[contact.userID], p.status != .removed, p.role == .privateUser else {
                throw StoreError(.unknownItem, "\(contact.name) is not a participant of the share of '\(zoneID.name)'")
            }
            share.participants[contact.userID] = .init(role: p.role, permission: permission, status: p.status)
            try self.writeMembership(db, zone: zone, log: &log, share: share)
            return try self.describe(db, zone: zone, state: log.state)
        }
    }

    func setPublicPermission(_ permission: SharePermission, zone zoneID: ZoneID) async throws -> Share {
        try await store.write { db in
            let (zone, log0, loaded) = try self.ownedShare(db, zoneID, to: "change the public permission")
            var log = log0, share = loaded
            let old = share.publicPermission
            guard old != permission else { return try self.describe(db, zone: zone, state: log.state) }
            let state = log.state
            var rotation = false
            var gone = [String]()
            if old == .none {
                // CloudKit's rule: going public removes the named participants still pending.
                for (id, p) in share.participants where p.role == .privateUser && p.status == .pending && state.acceptances[id] != .accepted {
                    share.participants[id] = .init(role: p.role, permission: p.permission, status: .removed)
                    rotation = true
                }
                // A new link admits anyone who holds it: the removed entries go from the share
                // (the pending invitees just removed, as CloudKit drops them, those removed when an
                // earlier link closed, and named participants removed before), so any of them may
                // join with this link. Removals happen only while the public permission is none.
                share.participants = share.participants.filter { $0.value.status != .removed }
            }
            if permission == .none {
                // Back to none: everyone who joined by the link is removed, and the link goes.
                for (id, answer) in state.linkJoiners {
                    if answer == .accepted { gone.append(id) }
                    share.participants[id] = .init(role: .publicUser, permission: old, status: .removed)
                }
                share.linkPublicKey = nil
                try db.deleteShareLink(zoneRowID: zone.rowID)
                rotation = true
            }
            share.publicPermission = permission
            if !gone.isEmpty { try db.noteZoneGone(zone, for: Set(gone), reason: "removed") }
            if rotation {
                // Link joiners keep the new key only while the link stays.
                let joiners = permission == .none ? [] : state.linkJoiners.filter { $0.value == .accepted }.map(\.key)
                try self.rotate(db, zone: zone, log: &log, share: share, joiners: joiners)
            } else if old == .none {
                let key = try self.keyRing.zoneKey(db, zone: zone, epoch: state.epoch, state: state)
                share.linkPublicKey = try self.setLink(db, zone: zone, share: share, epoch: state.epoch, key: key, secret: .random(count: 32))
                try self.writeMembership(db, zone: zone, log: &log, share: share)
            } else {
                try self.writeMembership(db, zone: zone, log: &log, share: share)
            }
            return try self.describe(db, zone: zone, state: log.state)
        }
    }

    func removeParticipant(_ who: String, zone zoneID: ZoneID) async throws -> Share {
        let contact = try await store.contact(matching: who, for: vault)
        return try await store.write { db in
            let (zone, log0, loaded) = try self.ownedShare(db, zoneID, to: "remove participants")
            var log = log0, share = loaded
            guard share.publicPermission == .none else {
                throw StoreError(.invalidArguments, "participants can be removed only while the public permission is none; 'coffer share public \(zoneID.name) none' removes everyone who joined by the link")
            }
            guard let p = share.participants[contact.userID], p.status != .removed else {
                throw StoreError(.unknownItem, "\(contact.name) is not a participant of the share of '\(zoneID.name)'")
            }
            share.participants[contact.userID] = .init(role: p.role, permission: p.permission, status: .removed)
            if log.state.readers.contains(contact.userID) {
                try db.noteZoneGone(zone, for: Set([contact.userID]), reason: "removed")
            }
            try self.rotate(db, zone: zone, log: &log, share: share, joiners: [])
            self.store.logger.info("participant removed, zone key rotated", metadata: ["zone": "\(zoneID.name)", "epoch": "\(log.state.epoch)"])
            return try self.describe(db, zone: zone, state: log.state)
        }
    }

    func stopShare(zone zoneID: ZoneID) async throws {
        try await store.write { db in
            let (zone, log0, _) = try self.ownedShare(db, zoneID, to: "stop sharing it")
            var log = log0
            try db.noteZoneGone(zone, for: Set(log.state.readers.filter { $0 != zone.id.ownerID }), reason: "share stopped")
            try db.deleteShareLink(zoneRowID: zone.rowID)
            // From here on, the owner alone holds the key and may write: the log says so, signed.
            try self.rotate(db, zone: zone, log: &log, share: nil, joiners: [])
        }
        store.logger.info("share stopped, zone key rotated", metadata: ["zone": "\(zoneID.name)"])
    }

    // MARK: - Participant operations

    func accept(url: ShareURL) async throws -> Share {
        guard url.storeID == store.storeID else {
            throw StoreError(.unknownItem, "this share URL belongs to another store (id \(Hex.encode(url.storeID)))")
        }
        let me = userID
        return try await store.write { db in
            // The URL names the share; the zone is the one whose verified log holds that share
            // (the `share_uid` column only finds it).
            var found: (ZoneRow, ZoneLog)?
            for zone in try db.zoneRows(shareUID: url.shareUID) {
                let log = try self.verifiedLogs.zoneLog(db, zone: zone)
                guard log.state.share?.shareUID == url.shareUID else { continue }
                found = (zone, log)
                break
            }
            guard let (zone, verified) = found, let share = verified.state.share else {
                throw StoreError(.unknownItem, "no share in this store matches the URL; it may have been stopped")
            }
            var log = verified
            guard zone.id.ownerID != me else {
                throw StoreError(.invalidArguments, "you own zone '\(zone.id.name)'; there is nothing to accept")
            }
            let state = log.state
            let now = Date().timeIntervalSince1970
            if let p = share.participants[me], p.role == .privateUser {
                guard p.status != .removed else {
                    throw StoreError(.permissionFailure, "you were removed from the share of zone '\(zone.id.name)'")
                }
                _ = try self.keyRing.zoneKey(db, zone: zone, epoch: state.epoch, state: state) // wrapped to you, and the owner's
                if state.acceptances[me] != .accepted {
                    try self.writeAcceptance(db, zone: zone, log: &log, role: .privateUser, state: .accepted, proof: nil, time: now)
                }
            } else if share.publicPermission != .none, let secret = url.linkSecret {
                let signer = try Self.linkSigningKey(secret)
                guard signer.publicKey.rawRepresentation == share.linkPublicKey else {
                    throw StoreError(.permissionFailure, "the URL's link secret does not open this share (an old or altered URL)")
                }
                guard share.participants[me]?.status != .removed else {
                    throw StoreError(.permissionFailure, "you were removed from the share of zone '\(zone.id.name)'")
                }
                let key = try self.openLinkKey(db, zone: zone, state: state, secret: secret)
                let wrapped = KeyRing.wrapZoneKey(key, zoneUID: zone.uid, epoch: state.epoch, to: self.vault.boxKey.publicKey)
                try db.storeWrappedKey(zoneRowID: zone.rowID, epoch: state.epoch, memberID: me, wrapped: wrapped)
                if state.linkJoiners[me] != .accepted {
                    let proof = signer.signature(for: AcceptancePayload.proofMessage(zoneUID: zone.uid, shareUID: share.shareUID, userID: me))
                    try self.writeAcceptance(db, zone: zone, log: &log, role: .publicUser, state: .accepted, proof: proof, time: now)
                }
                try db.addZoneMember(zoneRowID: zone.rowID, userID: me)
            } else if share.participants[me]?.status == .removed {
                throw StoreError(.permissionFailure, "you were removed from the share of zone '\(zone.id.name)'")
            } else {
                throw StoreError(.permissionFailure, url.linkSecret == nil
                                 ? "you are not invited to zone '\(zone.id.name)'; ask its owner to add you, or for a public link"
                                 : "the share of zone '\(zone.id.name)' has no public link any more; ask its owner to add you")
            }
            try db.noteZoneBack(zone, for: me)
            try db.touchZone(zoneRowID: zone.rowID)
            return try self.describe(db, zone: zone, state: log.state)
        }
    }

    func leave(zone zoneID: ZoneID) async throws {
        let me = userID
        try await store.write { db in
            let zone = try self.accessControl.zoneRow(db, zoneID)
            guard zone.id.ownerID != me else {
                throw StoreError(.invalidArguments, "you own zone '\(zoneID.name)'; stop the share instead ('coffer share stop')")
            }
            let access = try self.accessControl.access(db, zone: zone)
            var log = access.log
            try self.writeAcceptance(db, zone: zone, log: &log, role: access.role, state: .left, proof: nil, time: Date().timeIntervalSince1970)
            try db.noteZoneGone(zone, for: Set([me]), reason: "left")
            try db.touchZone(zoneRowID: zone.rowID) // the owner's feed sees the share change
            if access.role == .publicUser {
                try db.deleteWrappedKeys(zoneRowID: zone.rowID, memberID: me)
            }
            let rowID = zone.rowID
            db.afterTransaction(onCommit: { [self] in
                self.keyRing.forget(zoneRowID: rowID)
                self.rowContexts.forget(zoneRowID: rowID)
            }, onRollback: {})
        }
    }

    // MARK: - Reading shares

    func loadShare(zone zoneID: ZoneID) async throws -> Share {
        try await verifiedLogs.read { db in
            let zone = try self.accessControl.zoneRow(db, zoneID)
            let state = try self.verifiedLogs.zoneState(db, zone: zone)
            guard state.share != nil else {
                if zone.id.ownerID == self.userID { throw StoreError(.unknownItem, "zone '\(zoneID.name)' is not shared") }
                throw StoreError(.zoneNotFound, "zone '\(zoneID.name)' is not shared with you")
            }
            if !self.isInvited(state) { _ = try self.accessControl.access(db, zone: zone) }
            return try self.describe(db, zone: zone, state: state)
        }
    }

    /// Shares this user owns, and shares they take part in or are invited to.
    func shares() async throws -> [Share] {
        let me = userID
        return try await verifiedLogs.read { db in
            var result = [Share]()
            for zone in try db.zoneRows(ownedByOrListing: me) {
                guard zone.logFormat == 1, let state = try? self.verifiedLogs.zoneState(db, zone: zone), state.share != nil else { continue }
                // Owners, invitees (a named participant who left is still invited: they may accept
                // again), and participants who may read now; not those removed, nor link joiners
                // who left or were removed.
                let current = zone.id.ownerID == me || self.isInvited(state) || (try? self.accessControl.access(db, zone: zone)) != nil
                if current { result.append(try self.describe(db, zone: zone, state: state)) }
            }
            return result
        }
    }

    /// Whether the acting user is a named participant of the share who was not removed.
    func isInvited(_ state: ZoneState) -> Bool {
        guard let p = state.share?.participants[userID] else { return false }
        return p.role == .privateUser && p.status == .pending
    }

    /// The public form of a zone's share at `state`, statuses from the participants' own entries.
    func describe(_ db: any StorageTransaction, zone: ZoneRow, state: ZoneState) throws -> Share {
        guard let share = state.share else { throw StoreError(.unknownItem, "zone '\(zone.id.name)' is not shared") }
        try db.prefetchContacts(userIDs: [state.ownerID] + share.participants.keys + state.linkJoiners.keys)
        func contact(_ id: String) -> (String?, String?) {
            guard let c = try? store.verifiedContact(db, userID: id) else { return (nil, nil) }
            return (c.name, c.email)
        }
        let (ownerName, ownerEmail) = contact(state.ownerID)
        var participants = [Share.Participant(userID: state.ownerID, name: ownerName, email: ownerEmail, role: .owner,
                                              permission: .readWrite, status: .accepted, left: false)]
        for (id, p) in share.participants.sorted(by: { $0.key < $1.key }) {
            var status = p.status, left = false
            if p.role == .privateUser, status == .pending {
                switch state.acceptances[id] {
                case .accepted?: status = .accepted
                case .left?: (status, left) = (.removed, true)
                case nil: break
                }
            }
            let (name, email) = contact(id)
            participants.append(.init(userID: id, name: name, email: email, role: p.role, permission: p.permission, status: status, left: left))
        }
        for (id, answer) in state.linkJoiners.sorted(by: { $0.key < $1.key }) where share.participants[id] == nil {
            let (name, email) = contact(id)
            participants.append(.init(userID: id, name: name, email: email, role: .publicUser, permission: share.publicPermission,
                                      status: answer == .accepted && share.publicPermission != .none ? .accepted : .removed,
                                      left: answer == .left))
        }
        let secret = try? linkSecret(db, zone: zone, state: state)
        let url = ShareURL(storeID: store.storeID, shareUID: share.shareUID, linkSecret: secret ?? nil)
        return Share(zoneID: zone.id, title: share.title, publicPermission: share.publicPermission, participants: participants,
                     url: url.string, version: state.ownerSeq, keyEpoch: state.epoch,
                     created: Date(timeIntervalSince1970: state.shareCreated), modified: Date(timeIntervalSince1970: state.ownerTime))
    }

    // MARK: - Internals

    func ownedShare(_ db: any StorageTransaction, _ zoneID: ZoneID, to action: String) throws -> (ZoneRow, ZoneLog, ShareState) {
        let zone = try accessControl.zoneRow(db, zoneID)
        let log = try accessControl.requireOwner(db, zone: zone, to: action).log
        guard let share = log.state.share else {
            throw StoreError(.unknownItem, "zone '\(zoneID.name)' is not shared; create a share with 'coffer share create \(zoneID.name)'")
        }
        return (zone, log, share)
    }

    /// Appends the owner's membership entry for `share` (nil: not shared), at the current key
    /// epoch or, with `newEpoch`, starting that epoch with its commitment; keeps the lookup of
    /// the zone's members current and marks the zone changed.
    func writeMembership(_ db: any StorageTransaction, zone: ZoneRow, log: inout ZoneLog, share: ShareState?,
                         newEpoch: (epoch: Int64, commitment: [UInt8])? = nil) throws {
        let payload = StatePayload(epoch: newEpoch?.epoch ?? log.state.epoch,
                                   newCommitments: newEpoch.map { [$0.epoch: $0.commitment] } ?? [:], share: share)
        var w = ByteWriter()
        payload.encode(into: &w)
        try verifiedLogs.appendEntry(db, zone: zone, log: &log, kind: .membership, payload: w.bytes, time: Date().timeIntervalSince1970)
        try Self.recordMembers(db, zone: zone, state: log.state)
        try db.touchZone(zoneRowID: zone.rowID)
    }

    /// Keeps the lookups of which zones name a user (as a participant or a link joiner) and of
    /// a share URL's zone: they only narrow searches, and every use checks the verified log.
    static func recordMembers(_ db: any StorageTransaction, zone: ZoneRow, state: ZoneState) throws {
        try db.setZoneMembers(zoneRowID: zone.rowID, members: state.lookupMembers, shareUID: state.share?.shareUID)
    }

    /// Appends this participant's acceptance entry (accepted or left) at the share's version.
    func writeAcceptance(_ db: any StorageTransaction, zone: ZoneRow, log: inout ZoneLog, role: Share.Participant.Role,
                         state: AcceptancePayload.State, proof: [UInt8]?, time: Double) throws {
        guard let share = log.state.share else { throw StoreError(.zoneNotFound, "zone '\(zone.id.name)' is not shared with you") }
        let payload = AcceptancePayload(shareUID: share.shareUID, ownerID: log.state.ownerID, version: log.state.ownerSeq, role: role,
                                        state: state, linkProof: proof)
        try verifiedLogs.appendEntry(db, zone: zone, log: &log, kind: .acceptance, payload: payload.encoded, time: time)
    }

    /// Starts a new key epoch: a new zone key wrapped to the owner, the named participants of
    /// `share` who are not removed and `joiners`, the previous key sealed under it (so history
    /// stays readable to them), every older wrapped key deleted; then the owner's membership
    /// entry for `share` with the new epoch's commitment. O(members), whatever the number of
    /// records. A share that is public gets a new link secret under the new key.
    func rotate(_ db: any StorageTransaction, zone: ZoneRow, log: inout ZoneLog, share: ShareState?, joiners: [String]) throws {
        let state = log.state
        let oldEpoch = state.epoch, newEpoch = oldEpoch + 1
        let oldKey = try keyRing.zoneKey(db, zone: zone, epoch: oldEpoch, state: state)
        let newKey = SymmetricKey()
        let link = Envelope.seal(oldKey.bytes, using: newKey, keyID: UInt32(truncatingIfNeeded: newEpoch),
                                 authenticating: KeyRing.chainAD(zoneUID: zone.uid, epoch: oldEpoch))
        try db.storeChainedKey(zoneRowID: zone.rowID, epoch: oldEpoch, sealed: link.bytes)
        var members = Set([zone.id.ownerID] + joiners)
        if let share { members.formUnion(share.activeNamed) }
        try db.prefetchContacts(userIDs: Array(members))
        try db.deleteWrappedKeys(zoneRowID: zone.rowID, memberID: nil)
        for member in members.sorted() {
            // To the box key of each member's verified card.
            let contact = try store.contactRow(db, userID: member)
            let wrapped = KeyRing.wrapZoneKey(newKey, zoneUID: zone.uid, epoch: newEpoch, to: contact.identity.boxKey)
            try db.storeWrappedKey(zoneRowID: zone.rowID, epoch: newEpoch, memberID: member, wrapped: wrapped)
        }
        try db.noteZoneEpoch(zoneRowID: zone.rowID, epoch: newEpoch)
        var next = share
        if var s = next, s.publicPermission != .none {
            s.linkPublicKey = try setLink(db, zone: zone, share: s, epoch: newEpoch, key: newKey, secret: .random(count: 32))
            next = s
        }
        try writeMembership(db, zone: zone, log: &log, share: next,
                            newEpoch: (newEpoch, KeyRing.commitment(to: newKey, zoneUID: zone.uid, epoch: newEpoch)))
        let rowID = zone.rowID
        db.afterTransaction(onCommit: { [self] in
            self.keyRing.remember(newKey, zoneRowID: rowID, epoch: newEpoch)
            self.rowContexts.forget(zoneRowID: rowID)
        }, onRollback: {})
    }

    // MARK: - The public link

    /// Stores the link material of a share for `epoch`: the zone key sealed under a key derived
    /// from the link secret (what a joiner opens), and the secret sealed under the zone key
    /// (so members can show the URL). Returns the link's public key, for the owner's entry.
    func setLink(_ db: any StorageTransaction, zone: ZoneRow, share: ShareState, epoch: Int64, key: SymmetricKey, secret: SecureBytes) throws -> [UInt8] {
        let keyID = UInt32(truncatingIfNeeded: epoch)
        let sealedKey = Envelope.seal(key.bytes, using: Self.linkSealKey(secret), keyID: keyID,
                                      authenticating: Self.linkAD(zoneUID: zone.uid, shareUID: share.shareUID))
        let sealedSecret = Envelope.seal(secret, using: key, keyID: keyID,
                                         authenticating: Self.linkSecretAD(zoneUID: zone.uid, shareUID: share.shareUID))
        try db.storeShareLink(zoneRowID: zone.rowID, epoch: epoch, sealedKey: sealedKey.bytes, sealedSecret: sealedSecret.bytes)
        return try Self.linkSigningKey(secret).publicKey.rawRepresentation
    }

    /// The link secret of the share at `state`, opened with the zone key and checked against the
    /// link's public key in the log; nil when the share has no link.
    func linkSecret(_ db: any StorageTransaction, zone: ZoneRow, state: ZoneState) throws -> SecureBytes? {
        guard let share = state.share, let published = share.linkPublicKey else { return nil }
        guard let link = try db.shareLink(zoneRowID: zone.rowID), link.epoch == state.epoch else {
            throw StoreError(.integrityFailure, "the public link of zone '\(zone.id.name)' is missing: the store was changed")
        }
        let key = try keyRing.zoneKey(db, zone: zone, epoch: state.epoch, state: state)
        let secret: SecureBytes
        do {
            secret = try Envelope(bytes: link.sealedSecret).openSecret(using: key,
                                                                          authenticating: Self.linkSecretAD(zoneUID: zone.uid, shareUID: share.shareUID))
        } catch {
            throw StoreError(.integrityFailure, "the public link of zone '\(zone.id.name)' does not open: the store was changed")
        }
        guard try Self.linkSigningKey(secret).publicKey.rawRepresentation == published else {
            throw StoreError(.integrityFailure, "the public link of zone '\(zone.id.name)' is not the one its owner published: the store was changed")
        }
        return secret
    }

    /// The zone key a link secret opens, checked against the owner's commitment.
    func openLinkKey(_ db: any StorageTransaction, zone: ZoneRow, state: ZoneState, secret: SecureBytes) throws -> SymmetricKey {
        guard let share = state.share,
              let link = try db.shareLink(zoneRowID: zone.rowID), link.epoch == state.epoch else {
            throw StoreError(.integrityFailure, "the public link of zone '\(zone.id.name)' is missing: the store was changed")
        }
        let key: SymmetricKey
        do {
            let envelope = try Envelope(bytes: link.sealedKey)
            guard Int64(envelope.keyID) == state.epoch else { throw CryptoError.authenticationFailure }
            key = try SymmetricKey(bytes: envelope.openSecret(using: Self.linkSealKey(secret),
                                                              authenticating: Self.linkAD(zoneUID: zone.uid, shareUID: share.shareUID)))
        } catch {
            throw StoreError(.integrityFailure, "the public link of zone '\(zone.id.name)' does not open with the URL's secret: the store was changed")
        }
        try KeyRing.checkCommitment(key, zone: zone, epoch: state.epoch, state: state)
        return key
    }

    /// The key that seals the zone key for link joiners.
    static func linkSealKey(_ secret: SecureBytes) -> SymmetricKey {
        KDF.deriveKey(from: try! SymmetricKey(bytes: secret), id: 1, context: "cofflink")
    }

    /// The Ed25519 key of a link: joiners sign their proof with it; the owner publishes its
    /// public half in the log, so that anyone can check a proof without the secret.
    static func linkSigningKey(_ secret: SecureBytes) throws -> Ed25519.PrivateKey {
        try Ed25519.PrivateKey(seed: KDF.deriveKey(from: try SymmetricKey(bytes: secret), id: 2, context: "cofflink").bytes)
    }

    static func linkAD(zoneUID: [UInt8], shareUID: [UInt8]) -> [UInt8] {
        Array("coffer.share-link.v2".utf8) + shareUID + zoneUID
    }

    static func linkSecretAD(zoneUID: [UInt8], shareUID: [UInt8]) -> [UInt8] {
        Array("coffer.share-link-secret.v2".utf8) + shareUID + zoneUID
    }

    static func validateTitle(_ title: String) throws {
        guard title.utf8.count <= Limits.maxShareTitleBytes, !title.containsControlCharacters else {
            throw StoreError(.invalidArguments, "a share title is at most \(Limits.maxShareTitleBytes) bytes with no control characters")
        }
    }
}

import CofferCrypto
import CofferVault
import Foundation
import GRDB

extension Session {
    // MARK: - Owner operations

    func createShare(zone zoneID: ZoneID, title: String, publicPermission: SharePermission) throws -> Share {
        try Self.validateTitle(title)
        return try store.write { db in
            let zone = try ZoneRow.fetch(db, zoneID)
            let access = try self.requireOwner(db, zone: zone, to: "share it")
            guard access.share == nil else {
                throw StoreError(.alreadyExists, "zone '\(zoneID.name)' is already shared; see 'coffer share show \(zoneID.name)'")
            }
            let key = try self.zoneKey(db, zone: zone, epoch: zone.currentEpoch)
            let now = Date().timeIntervalSince1970
            var content = ShareContent(zoneUID: zone.uid, shareUID: SecureRandom.bytes(count: 16), ownerID: self.userID, title: title,
                                       publicPermission: publicPermission, version: zone.membershipSeq + 1, epoch: zone.currentEpoch,
                                       keyCommitment: ShareContent.commitment(to: key, zoneUID: zone.uid, epoch: zone.currentEpoch),
                                       linkSealedKey: nil, linkSecretSealed: nil, entries: [], created: now, modified: now)
            if publicPermission != .none {
                Self.setLink(&content, secret: .random(count: 32), key: key)
            }
            try self.persist(db, zone: zone, content: content)
            self.store.logger.info("zone shared", metadata: ["zone": "\(zoneID.name)"])
            return try self.describe(db, zone: zone, content: content)
        }
    }

    func addParticipant(_ who: String, permission: SharePermission, zone zoneID: ZoneID) throws -> Share {
        guard permission != .none else { throw StoreError(.invalidArguments, "a participant's permission is read-only or read-write") }
        let contact = try store.contact(matching: who)
        return try store.write { db in
            let (zone, _, loaded) = try self.ownedShare(db, zoneID, to: "add participants")
            var content = loaded
            guard content.publicPermission == .none else {
                throw StoreError(.invalidArguments, "named participants can be added only while the public permission is none (it is \(content.publicPermission)); run 'coffer share public \(zoneID.name) none' first")
            }
            guard contact.userID != self.userID else { throw StoreError(.invalidArguments, "you own zone '\(zoneID.name)'; you cannot be its participant") }
            if let existing = content.entries.first(where: { $0.userID == contact.userID }), existing.status != .removed {
                throw StoreError(.alreadyExists, "\(contact.name) already takes part in the share of '\(zoneID.name)' (\(existing.permission)); use 'share permission' to change it")
            }
            let active = content.entries.filter { $0.status != .removed }.count
            guard active < Limits.maxParticipants else {
                throw StoreError(.limitExceeded, "a share has at most \(Limits.maxParticipants) participants")
            }
            let key = try self.zoneKey(db, zone: zone, epoch: zone.currentEpoch)
            let wrapped = Self.wrapZoneKey(key, zoneUID: zone.uid, epoch: zone.currentEpoch, to: contact.identity.boxKey)
            try db.execute(sql: "INSERT OR REPLACE INTO zone_key (zone_id, epoch, member_id, wrapped_key) VALUES (?, ?, ?, ?)",
                           arguments: [zone.rowID, zone.currentEpoch, contact.userID, Data(wrapped)])
            // A former participant coming back starts over: their old acceptance no longer counts.
            try db.execute(sql: "DELETE FROM share_acceptance WHERE zone_id = ? AND user_id = ?", arguments: [zone.rowID, contact.userID])
            content.entries.removeAll { $0.userID == contact.userID }
            content.entries.append(.init(userID: contact.userID, role: .privateUser, permission: permission, status: .pending, wrappedKey: wrapped))
            try self.bump(db, zone: zone, content: &content)
            return try self.describe(db, zone: zone, content: content)
        }
    }

    func setPermission(_ who: String, permission: SharePermission, zone zoneID: ZoneID) throws -> Share {
        guard permission != .none else { throw StoreError(.invalidArguments, "to take away access, remove the participant") }
        let contact = try store.contact(matching: who)
        return try store.write { db in
            let (zone, _, loaded) = try self.ownedShare(db, zoneID, to: "change permissions")
            var content = loaded
            guard let i = content.entries.firstIndex(where: { $0.userID == contact.userID && $0.status != .removed && $0.role == .privateUser }) else {
                throw StoreError(.unknownItem, "\(contact.name) is not a participant of the share of '\(zoneID.name)'")
            }
            let e = content.entries[i]
            content.entries[i] = .init(userID: e.userID, role: e.role, permission: permission, status: e.status, wrappedKey: e.wrappedKey)
            try self.bump(db, zone: zone, content: &content)
            return try self.describe(db, zone: zone, content: content)
        }
    }

    func setPublicPermission(_ permission: SharePermission, zone zoneID: ZoneID) throws -> Share {
        try store.write { db in
            let (zone, _, loaded) = try self.ownedShare(db, zoneID, to: "change the public permission")
            var content = loaded
            let old = content.publicPermission
            guard old != permission else { return try self.describe(db, zone: zone, content: content) }
            var needsRotation = false
            if old == .none {
                // CloudKit's rule: going public removes the named participants still pending.
                for (i, e) in content.entries.enumerated() where e.status == .pending {
                    let accepted = try self.acceptance(db, zone: zone, share: content, userID: e.userID)?.state == .accepted
                    if !accepted {
                        content.entries[i] = .init(userID: e.userID, role: e.role, permission: e.permission, status: .removed, wrappedKey: [])
                        needsRotation = true
                    }
                }
            }
            if permission == .none {
                // Back to none: everyone who joined by the link is removed, and the link's key is gone.
                for row in try Row.fetchAll(db, sql: "SELECT user_id FROM share_acceptance WHERE zone_id = ? AND role = ?",
                                            arguments: [zone.rowID, Share.Participant.Role.publicUser.rawValue]) {
                    let id: String = row[0]
                    if try Self.viewers(db, zone: zone).contains(id) { try Self.zoneGone(db, zone: zone, for: [id], reason: "removed") }
                    content.entries.removeAll { $0.userID == id }
                    content.entries.append(.init(userID: id, role: .publicUser, permission: old, status: .removed, wrappedKey: []))
                }
                try db.execute(sql: "DELETE FROM share_acceptance WHERE zone_id = ? AND role = ?",
                               arguments: [zone.rowID, Share.Participant.Role.publicUser.rawValue])
                content.linkSealedKey = nil
                content.linkSecretSealed = nil
                needsRotation = true
            }
            if old == .none && permission != .none {
                // A new link with a new secret admits anyone who holds it: the removed entries go
                // from the share (the pending invitees just removed, as CloudKit drops them, those
                // removed when an earlier link closed, and named participants removed before), so
                // any of them may join with this link. Removals happen only while the public
                // permission is none, so every removed entry predates this link.
                content.entries.removeAll { $0.status == .removed }
            }
            content.publicPermission = permission
            if needsRotation {
                try self.rotate(db, zone: zone, content: &content)
            } else if old == .none {
                let key = try self.zoneKey(db, zone: zone, epoch: zone.currentEpoch)
                Self.setLink(&content, secret: .random(count: 32), key: key)
            }
            if permission != .none, content.linkSecretSealed == nil {
                let current = try ZoneRow.fetch(db, zoneID)
                Self.setLink(&content, secret: .random(count: 32), key: try self.zoneKey(db, zone: current, epoch: current.currentEpoch))
            }
            try self.bump(db, zone: try ZoneRow.fetch(db, zoneID), content: &content)
            return try self.describe(db, zone: try ZoneRow.fetch(db, zoneID), content: content)
        }
    }

    func removeParticipant(_ who: String, zone zoneID: ZoneID) throws -> Share {
        let contact = try store.contact(matching: who)
        return try store.write { db in
            let (zone, _, loaded) = try self.ownedShare(db, zoneID, to: "remove participants")
            var content = loaded
            guard content.publicPermission == .none else {
                throw StoreError(.invalidArguments, "participants can be removed only while the public permission is none; 'coffer share public \(zoneID.name) none' removes everyone who joined by the link")
            }
            guard let i = content.entries.firstIndex(where: { $0.userID == contact.userID && $0.status != .removed }) else {
                throw StoreError(.unknownItem, "\(contact.name) is not a participant of the share of '\(zoneID.name)'")
            }
            let e = content.entries[i]
            content.entries[i] = .init(userID: e.userID, role: e.role, permission: e.permission, status: .removed, wrappedKey: [])
            if try Self.viewers(db, zone: zone).contains(e.userID) {
                try Self.zoneGone(db, zone: zone, for: [e.userID], reason: "removed")
            }
            try db.execute(sql: "DELETE FROM share_acceptance WHERE zone_id = ? AND user_id = ?", arguments: [zone.rowID, e.userID])
            try self.rotate(db, zone: zone, content: &content)
            let rotated = try ZoneRow.fetch(db, zoneID)
            try self.bump(db, zone: rotated, content: &content)
            self.store.logger.info("participant removed, zone key rotated", metadata: ["zone": "\(zoneID.name)", "epoch": "\(rotated.currentEpoch)"])
            return try self.describe(db, zone: rotated, content: content)
        }
    }

    func stopShare(zone zoneID: ZoneID) throws {
        try store.write { db in
            let (zone, _, _) = try self.ownedShare(db, zoneID, to: "stop sharing it")
            try Self.zoneGone(db, zone: zone, for: try Self.viewers(db, zone: zone).filter { $0 != zone.id.ownerID }, reason: "share stopped")
            try db.execute(sql: "DELETE FROM share WHERE zone_id = ?", arguments: [zone.rowID]) // participants, acceptances cascade
            var none: ShareContent?
            try self.rotate(db, zone: zone, content: &none)
            let rotated = try ZoneRow.fetch(db, zoneID)
            // From here on, the owner alone may write: the membership log says so, signed.
            try self.logMembership(db, zone: rotated, seq: rotated.membershipSeq + 1, epoch: rotated.currentEpoch, share: nil)
            try Self.touch(db, zoneRowID: zone.rowID)
        }
        store.logger.info("share stopped, zone key rotated", metadata: ["zone": "\(zoneID.name)"])
    }

    // MARK: - Participant operations

    func accept(url: ShareURL) throws -> Share {
        guard url.storeID == store.storeID else {
            throw StoreError(.unknownItem, "this share URL belongs to another store (id \(Hex.encode(url.storeID)))")
        }
        let me = userID
        return try store.write { db in
            guard let zoneRowID = try Int64.fetchOne(db, sql: "SELECT zone_id FROM share WHERE share_uid = ?", arguments: [Data(url.shareUID)]),
                  let zoneRow = try Row.fetchOne(db, sql: "SELECT * FROM zone WHERE id = ?", arguments: [zoneRowID]) else {
                throw StoreError(.unknownItem, "no share in this store matches the URL; it may have been stopped")
            }
            let zone = try ZoneRow(row: zoneRow)
            guard let (content, signature) = try ShareContent.load(db, zone: zone) else { throw StoreError(.unknownItem, "the share is gone") }
            try self.verify(db, content, signature: signature, zone: zone)
            guard zone.id.ownerID != me else {
                throw StoreError(.invalidArguments, "you own zone '\(zone.id.name)'; there is nothing to accept")
            }
            let now = Date().timeIntervalSince1970
            if let entry = content.entries.first(where: { $0.userID == me }), entry.role == .privateUser {
                guard entry.status != .removed else {
                    throw StoreError(.permissionFailure, "you were removed from the share of zone '\(zone.id.name)'")
                }
                _ = try self.zoneKey(db, zone: zone, epoch: content.epoch, share: content) // the key wrapped to you opens and matches
                try self.writeAcceptance(db, zone: zone, share: content, role: .privateUser, state: .accepted, at: now)
                try Self.zoneBack(db, zone: zone, for: me)
                try Self.touch(db, zoneRowID: zone.rowID)
            } else if content.publicPermission != .none, let secret = url.linkSecret {
                guard let sealed = content.linkSealedKey else { throw StoreError(.integrityFailure, "the share has no link key") }
                let key: SymmetricKey
                do {
                    let envelope = try Envelope(bytes: sealed)
                    guard Int64(envelope.keyID) == content.epoch else { throw CryptoError.authenticationFailure }
                    key = try SymmetricKey(bytes: envelope.openSecret(using: Self.linkKey(secret), authenticating: Self.linkAD(content)))
                } catch {
                    throw StoreError(.permissionFailure, "the URL's link secret does not open this share (an old or altered URL)")
                }
                guard ShareContent.commitment(to: key, zoneUID: zone.uid, epoch: content.epoch) == content.keyCommitment else {
                    throw StoreError(.integrityFailure, "the share's link key does not match its owner's signed commitment")
                }
                let wrapped = Self.wrapZoneKey(key, zoneUID: zone.uid, epoch: content.epoch, to: self.vault.boxKey.publicKey)
                try db.execute(sql: "INSERT OR REPLACE INTO zone_key (zone_id, epoch, member_id, wrapped_key) VALUES (?, ?, ?, ?)",
                               arguments: [zone.rowID, content.epoch, me, Data(wrapped)])
                try self.writeAcceptance(db, zone: zone, share: content, role: .publicUser, state: .accepted, at: now,
                                         linkProof: Self.linkProof(secret: secret, content: content, userID: me))
                try Self.zoneBack(db, zone: zone, for: me)
                try Self.touch(db, zoneRowID: zone.rowID)
            } else if content.entries.contains(where: { $0.userID == me && $0.status == .removed }) {
                throw StoreError(.permissionFailure, "you were removed from the share of zone '\(zone.id.name)'")
            } else {
                throw StoreError(.permissionFailure, url.linkSecret == nil
                                 ? "you are not invited to zone '\(zone.id.name)'; ask its owner to add you, or for a public link"
                                 : "the share of zone '\(zone.id.name)' has no public link any more; ask its owner to add you")
            }
            return try self.describe(db, zone: zone, content: content)
        }
    }

    func leave(zone zoneID: ZoneID) throws {
        let me = userID
        try store.write { db in
            let zone = try ZoneRow.fetch(db, zoneID)
            guard zone.id.ownerID != me else {
                throw StoreError(.invalidArguments, "you own zone '\(zoneID.name)'; stop the share instead ('coffer share stop')")
            }
            let access = try self.access(db, zone: zone)
            guard let share = access.share else { throw StoreError(.zoneNotFound, "zone '\(zoneID.name)' is not shared with you") }
            try self.writeAcceptance(db, zone: zone, share: share, role: access.role, state: .left, at: Date().timeIntervalSince1970)
            try Self.zoneGone(db, zone: zone, for: [me], reason: "left")
            try Self.touch(db, zoneRowID: zone.rowID) // the owner's feed sees the share change
            if access.role == .publicUser {
                try db.execute(sql: "DELETE FROM zone_key WHERE zone_id = ? AND member_id = ?", arguments: [zone.rowID, me])
            }
            let rowID = zone.rowID
            db.afterNextTransaction(onCommit: { [self] _ in self.forget(zoneRowID: rowID) })
        }
    }

    // MARK: - Reading shares

    func loadShare(zone zoneID: ZoneID) throws -> Share {
        try store.read { db in
            let zone = try ZoneRow.fetch(db, zoneID)
            guard let (content, signature) = try ShareContent.load(db, zone: zone) else {
                if zone.id.ownerID == self.userID { throw StoreError(.unknownItem, "zone '\(zoneID.name)' is not shared") }
                throw StoreError(.zoneNotFound, "zone '\(zoneID.name)' is not shared with you")
            }
            try self.verify(db, content, signature: signature, zone: zone)
            if !self.isInvited(content) { _ = try self.access(db, zone: zone) }
            return try self.describe(db, zone: zone, content: content)
        }
    }

    /// Shares this user owns, and shares they take part in or are invited to.
    func shares() throws -> [Share] {
        let me = userID
        return try store.read { db in
            var result = [Share]()
            let rows = try Row.fetchAll(db, sql: """
                SELECT z.* FROM share s JOIN zone z ON z.id = s.zone_id
                WHERE z.owner_id = ?
                   OR EXISTS (SELECT 1 FROM share_participant p WHERE p.zone_id = s.zone_id AND p.user_id = ?)
                   OR EXISTS (SELECT 1 FROM share_acceptance a WHERE a.zone_id = s.zone_id AND a.user_id = ?)
                ORDER BY z.owner_id = ? DESC, z.name
                """, arguments: [me, me, me, me])
            for row in rows {
                let zone = try ZoneRow(row: row)
                guard let (content, signature) = try ShareContent.load(db, zone: zone) else { continue }
                try self.verify(db, content, signature: signature, zone: zone)
                // Owners, invitees who have not answered, and participants who may read now:
                // not those removed or who left.
                // A named participant who left is still invited (they may accept again); a link
                // joiner who left or was removed is not.
                let invited = self.isInvited(content)
                let current = zone.id.ownerID == me || invited || (try? self.access(db, zone: zone)) != nil
                if current { result.append(try self.describe(db, zone: zone, content: content)) }
            }
            return result
        }
    }

    /// Whether the acting user is a pending named participant of this (already verified) share.
    func isInvited(_ content: ShareContent) -> Bool {
        content.entries.contains { $0.userID == userID && $0.status == .pending }
    }

    /// The public form of a share, statuses resolved from the participants' signed acceptances.
    func describe(_ db: GRDB.Database, zone: ZoneRow, content: ShareContent) throws -> Share {
        func contact(_ id: String) -> (String?, String?) {
            guard let c = try? store.contactRow(db, userID: id) else { return (nil, nil) }
            return (c.name, c.email)
        }
        let (ownerName, ownerEmail) = contact(content.ownerID)
        var participants = [Share.Participant(userID: content.ownerID, name: ownerName, email: ownerEmail, role: .owner,
                                              permission: .readWrite, status: .accepted, left: false)]
        var seen = Set<String>()
        for e in content.entries.sorted(by: { $0.userID < $1.userID }) {
            seen.insert(e.userID)
            var status = e.status, left = false
            if status == .pending, let a = try acceptance(db, zone: zone, share: content, userID: e.userID) {
                status = a.state == .accepted ? .accepted : .removed
                left = a.state == .left
            }
            let (name, email) = contact(e.userID)
            participants.append(.init(userID: e.userID, name: name, email: email, role: e.role, permission: e.permission, status: status, left: left))
        }
        let shareKey = try? zoneKey(db, zone: zone, epoch: content.epoch, share: content)
        let provenJoiners = try shareKey.map { Set(try validLinkJoiners(db, zone: zone, content: content, key: $0, acceptedOnly: false)) }
        for row in try Row.fetchAll(db, sql: "SELECT user_id FROM share_acceptance WHERE zone_id = ? AND role = ? ORDER BY user_id",
                                    arguments: [zone.rowID, Share.Participant.Role.publicUser.rawValue]) {
            let id: String = row[0]
            // A link acceptance without a valid proof was not made with the link: not a participant.
            if let provenJoiners, !provenJoiners.contains(id) { continue }
            guard !seen.contains(id), let a = try acceptance(db, zone: zone, share: content, userID: id) else { continue }
            let (name, email) = contact(id)
            participants.append(.init(userID: id, name: name, email: email, role: .publicUser, permission: content.publicPermission,
                                      status: a.state == .accepted && content.publicPermission != .none ? .accepted : .removed,
                                      left: a.state == .left))
        }
        var secret: SecureBytes?
        if let sealed = content.linkSecretSealed, let key = try? zoneKey(db, zone: zone, epoch: content.epoch, share: content) {
            secret = try? Envelope(bytes: sealed).openSecret(using: key, authenticating: Self.linkSecretAD(content))
        }
        let url = ShareURL(storeID: store.storeID, shareUID: content.shareUID, linkSecret: secret)
        return Share(zoneID: zone.id, title: content.title, publicPermission: content.publicPermission, participants: participants,
                     url: url.string, version: content.version, keyEpoch: content.epoch,
                     created: Date(timeIntervalSince1970: content.created), modified: Date(timeIntervalSince1970: content.modified))
    }

    // MARK: - Internals

    func ownedShare(_ db: GRDB.Database, _ zoneID: ZoneID, to action: String) throws -> (ZoneRow, ZoneAccess, ShareContent) {
        let zone = try ZoneRow.fetch(db, zoneID)
        let access = try requireOwner(db, zone: zone, to: action)
        guard let content = access.share else {
            throw StoreError(.unknownItem, "zone '\(zoneID.name)' is not shared; create a share with 'coffer share create \(zoneID.name)'")
        }
        return (zone, access, content)
    }

    /// Next membership version, new modification time, signed and saved.
    func bump(_ db: GRDB.Database, zone: ZoneRow, content: inout ShareContent) throws {
        let current = try ZoneRow.fetch(db, zone.id)
        content.version = max(content.version, current.membershipSeq) + 1
        content.modified = Date().timeIntervalSince1970
        try persist(db, zone: zone, content: content)
    }

    /// Signs and saves the share, and appends the owner-signed membership entry of its version.
    func persist(_ db: GRDB.Database, zone: ZoneRow, content: ShareContent) throws {
        let signature = vault.signingKey.signature(for: content.signedBytes)
        try content.save(db, zoneRowID: zone.rowID, signature: signature)
        verifiedShares.withLock { _ = $0.insert(BLAKE2b.hash(content.signedBytes + signature)) }
        try logMembership(db, zone: zone, seq: content.version, epoch: content.epoch, share: content)
        try Self.touch(db, zoneRowID: zone.rowID)
    }

    func writeAcceptance(_ db: GRDB.Database, zone: ZoneRow, share: ShareContent, role: Share.Participant.Role,
                         state: Acceptance.State, at: Double, linkProof: [UInt8]? = nil) throws {
        let signature = vault.signingKey.signature(for: Acceptance.signedBytes(shareUID: share.shareUID, userID: userID,
                                                                              role: role, state: state, at: at))
        try db.execute(sql: """
            INSERT OR REPLACE INTO share_acceptance (zone_id, user_id, role, state, at, signature, link_proof) VALUES (?, ?, ?, ?, ?, ?, ?)
            """, arguments: [zone.rowID, userID, role.rawValue, state.rawValue, at, Data(signature), linkProof.map { Data($0) }])
    }

    /// Proof that a link joiner held the link secret: keyed BLAKE2b-256 under the link key over
    /// the share uid and their user id. Only holders of the secret can make it; the owner checks
    /// it before wrapping any new key to a link joiner.
    static func linkProof(secret: SecureBytes, content: ShareContent, userID: String) -> [UInt8] {
        BLAKE2b.keyedHash(Array("coffer.link-proof.v1".utf8) + content.shareUID + Array(userID.utf8), key: linkKey(secret)).unsafeCopiedBytes()
    }

    /// The link joiners whose acceptance carries a valid proof for the share's current link.
    /// Needs the zone key of the share's epoch (to open the link secret); without a link, none.
    func validLinkJoiners(_ db: GRDB.Database, zone: ZoneRow, content: ShareContent, key: SymmetricKey, acceptedOnly: Bool) throws -> [String] {
        guard let sealed = content.linkSecretSealed,
              let secret = try? Envelope(bytes: sealed).openSecret(using: key, authenticating: Self.linkSecretAD(content)) else { return [] }
        return try Row.fetchAll(db, sql: "SELECT user_id, state, link_proof FROM share_acceptance WHERE zone_id = ? AND role = ?",
                                arguments: [zone.rowID, Share.Participant.Role.publicUser.rawValue]).compactMap { row in
            let id: String = row[0], state: Int = row[1]
            guard let proof = row[2] as Data?, !acceptedOnly || state == Acceptance.State.accepted.rawValue,
                  constantTimeEquals(Array(proof), Self.linkProof(secret: secret, content: content, userID: id)) else { return nil }
            return id
        }
    }

    /// Starts a new key epoch: a new zone key wrapped only to the remaining members, the previous
    /// key sealed under it (so history stays readable to them), every older wrapped key deleted.
    /// O(members), whatever the number of records. Updates `content` (epoch, commitment, wrapped
    /// keys, link) when the zone stays shared.
    func rotate(_ db: GRDB.Database, zone: ZoneRow, content: inout ShareContent) throws {
        var optional: ShareContent? = content
        try rotate(db, zone: zone, content: &optional)
        content = optional!
    }

    func rotate(_ db: GRDB.Database, zone: ZoneRow, content: inout ShareContent?) throws {
        let oldEpoch = zone.currentEpoch, newEpoch = oldEpoch + 1
        let oldKey = try zoneKey(db, zone: zone, epoch: oldEpoch)
        let newKey = SymmetricKey()
        let link = Envelope.seal(oldKey.bytes, using: newKey, keyID: UInt32(truncatingIfNeeded: newEpoch),
                                 authenticating: Self.chainAD(zone: zone, epoch: oldEpoch))
        try db.execute(sql: "INSERT OR REPLACE INTO zone_key_chain (zone_id, epoch, sealed_key) VALUES (?, ?, ?)",
                       arguments: [zone.rowID, oldEpoch, Data(link.bytes)])
        var members: [String] = [zone.id.ownerID]
        if let c = content {
            members += c.entries.filter { $0.status != .removed && $0.role == .privateUser }.map(\.userID)
            if c.publicPermission != .none {
                // Only link joiners who proved they held the link secret get the new key.
                members += try validLinkJoiners(db, zone: zone, content: c, key: oldKey, acceptedOnly: true)
            }
        }
        var wrappedTo = [String: [UInt8]]()
        try db.execute(sql: "DELETE FROM zone_key WHERE zone_id = ?", arguments: [zone.rowID])
        for member in Set(members) {
            let contact = try store.contactRow(db, userID: member)
            let wrapped = Self.wrapZoneKey(newKey, zoneUID: zone.uid, epoch: newEpoch, to: contact.identity.boxKey)
            wrappedTo[member] = wrapped
            try db.execute(sql: "INSERT INTO zone_key (zone_id, epoch, member_id, wrapped_key) VALUES (?, ?, ?, ?)",
                           arguments: [zone.rowID, newEpoch, member, Data(wrapped)])
        }
        try db.execute(sql: "UPDATE zone SET current_epoch = ? WHERE id = ?", arguments: [newEpoch, zone.rowID])
        if var c = content {
            let secret = try c.linkSecretSealed.map { try Envelope(bytes: $0).openSecret(using: oldKey, authenticating: Self.linkSecretAD(c)) }
            c.epoch = newEpoch
            c.keyCommitment = ShareContent.commitment(to: newKey, zoneUID: zone.uid, epoch: newEpoch)
            c.entries = c.entries.map { e in
                .init(userID: e.userID, role: e.role, permission: e.permission, status: e.status,
                      wrappedKey: e.status == .removed || e.role == .publicUser ? [] : (wrappedTo[e.userID] ?? []))
            }
            if let secret { Self.setLink(&c, secret: secret, key: newKey) }
            content = c
        }
        let rowID = zone.rowID
        db.afterNextTransaction(onCommit: { [self] _ in
            self.zoneKeys.withLock { $0[rowID, default: [:]][newEpoch] = newKey }
            self.forgetRowContexts(zoneRowID: rowID)
        })
    }

    static func setLink(_ content: inout ShareContent, secret: SecureBytes, key: SymmetricKey) {
        let epoch = UInt32(truncatingIfNeeded: content.epoch)
        content.linkSecretSealed = Envelope.seal(secret, using: key, keyID: epoch, authenticating: linkSecretAD(content)).bytes
        content.linkSealedKey = Envelope.seal(key.bytes, using: linkKey(secret), keyID: epoch, authenticating: linkAD(content)).bytes
    }

    static func linkKey(_ secret: SecureBytes) -> SymmetricKey {
        KDF.deriveKey(from: try! SymmetricKey(bytes: secret), id: 1, context: "cofflink")
    }

    static func linkAD(_ content: ShareContent) -> [UInt8] {
        Array("coffer.share-link.v1".utf8) + content.shareUID + content.zoneUID
    }

    static func linkSecretAD(_ content: ShareContent) -> [UInt8] {
        Array("coffer.share-link-secret.v1".utf8) + content.shareUID + content.zoneUID
    }

    static func validateTitle(_ title: String) throws {
        guard title.utf8.count <= Limits.maxShareTitleBytes, !title.unicodeScalars.contains(where: { $0.value < 0x20 }) else {
            throw StoreError(.invalidArguments, "a share title is at most \(Limits.maxShareTitleBytes) bytes with no control characters")
        }
    }
}

extension Store {
    func contactRow(_ db: GRDB.Database, userID: String) throws -> Contact {
        guard let row = try Row.fetchOne(db, sql: "SELECT * FROM contact WHERE user_id = ?", arguments: [userID]) else {
            throw StoreError(.unknownItem, "no contact with user id \(userID)")
        }
        return try Self.contact(from: row)
    }
}

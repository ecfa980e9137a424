import CofferCrypto
import CofferVault
import Foundation

/// A zone of the store's earlier format (migrations up to `v5-commit-names`): signed commits
/// and an owner-signed membership log in tables of their own, a signed share row, participants'
/// signed acceptances, and ciphertexts that bind the store's id. Read only to upgrade the zone:
/// its owner verifies it here as it stands, exactly as that format's readers did, and then signs
/// the zone's first log entry over it (`LegacyUpgrade.upgradeLegacyZones`).
struct LegacyZone {
    /// The store's transaction, for the cards and schema the checks use.
    let db: any StorageTransaction
    /// The zone's rows of the earlier format.
    let tables: LegacyTables
    let zone: ZoneRow
    /// The store, whose id the ciphertexts bind and whose cards sign the zone's entries.
    let store: Store
    /// The owner's vault: their id and the key their zone keys are wrapped to.
    let vault: Vault
    /// The zone's schema, which types its plain values.
    let schemaRegistry: SchemaRegistry

    var storeID: [UInt8] { store.storeID }
    var userID: String { vault.identity.userID }

    /// What the verification found: everything the owner's first log entry carries.
    struct Verified {
        var epoch: Int64
        var key: SymmetricKey
        var share: ShareState?
        var linkSecret: SecureBytes?
        var records: [RewrittenRecord]
    }

    struct Refused: Error {
        let reason: String
    }

    func refuse(_ why: String) -> StoreError {
        StoreError(.integrityFailure, "zone '\(zone.id.name)' cannot be upgraded: \(why); the store was changed")
    }

    // MARK: - Verify

    func verify() throws -> Verified {
        guard let counters = try tables.counters(zoneRowID: zone.rowID) else { throw refuse("its row is gone") }
        let epoch = counters.epoch, membershipSeq = counters.membershipSeq
        guard epoch >= 1, epoch < Limits.maxLogSequence else { throw refuse("its key epoch is out of range") }
        let share = try loadShare()
        guard share == nil || share!.content.epoch == epoch else { throw refuse("its share is at another key epoch than the zone") }
        let key = try key(epoch: epoch, share: share?.content)
        var verified = Verified(epoch: epoch, key: key, share: nil, linkSecret: nil, records: [])
        var memberships = [Int64: LegacyMembership]()
        var commits = [Int64: (author: String, time: Double, entries: Set<[UInt8]>)]()
        if share == nil {
            // Rows alone say nothing of who made a zone: someone who can write the store could
            // have added them. Only a zone its owner signed something of (the share, or a
            // commit) is theirs to sign a log for.
            let sequence = counters.sequence
            guard sequence > 0, sequence < Limits.maxLogSequence else {
                throw refuse("nothing in it is signed (no share and no commit), so nothing shows it is its owner's")
            }
            commits[sequence] = try commit(sequence, membershipSeq: membershipSeq, memberships: &memberships)
        }
        if let (content, _) = share {
            var participants = [String: ShareState.Participant]()
            for e in content.entries {
                participants[e.userID] = .init(role: e.role, permission: e.permission, status: e.status == .removed ? .removed : .pending)
            }
            var link: [UInt8]?
            if content.publicPermission != .none {
                guard let sealed = content.linkSecretSealed,
                      let secret = try? Envelope(bytes: sealed).openSecret(using: key, authenticating: linkSecretAD(content)) else {
                    throw refuse("its public link does not open")
                }
                verified.linkSecret = secret
                link = try ShareService.linkSigningKey(secret).publicKey.rawRepresentation
            }
            verified.share = ShareState(shareUID: content.shareUID, title: content.title, publicPermission: content.publicPermission,
                                        linkPublicKey: link, participants: participants)
        }
        var schemas = [String: [String: FieldSchema]]()
        for r in try tables.records(zoneRowID: zone.rowID) {
            let name = r.name, type = r.type, parent = r.parent, plain = r.plain, sealed = r.sealed
            let rEpoch = r.epoch, seq = r.seq, rMembership = r.membershipSeq, creator = r.creatorID, created = r.created, modified = r.modified
            if commits[seq] == nil {
                commits[seq] = try commit(seq, membershipSeq: membershipSeq, memberships: &memberships)
            }
            let commit = commits[seq]!
            let hash = Self.recordHash(zoneUID: zone.uid, name: name, type: type, parent: parent, seq: seq, epoch: rEpoch,
                                       membershipSeq: rMembership, creatorID: creator, created: created, modified: modified,
                                       plain: Array(plain.utf8), sealed: sealed.map(Array.init))
            guard commit.entries.contains(hash) else { throw refuse("record '\(name)' does not match its signed commit \(seq)") }
            var sealedPlaintext: [UInt8]?
            if let sealed {
                let rowKey = try self.key(epoch: rEpoch, share: share?.content, current: (epoch, key))
                do {
                    let envelope = try Envelope(bytes: Array(sealed))
                    guard Int64(envelope.keyID) == rEpoch else { throw CryptoError.authenticationFailure }
                    sealedPlaintext = try envelope.open(using: rowKey, authenticating: Self.associatedData(storeID: storeID, zone: zone, name: name,
                                                                                                       type: type, epoch: rEpoch))
                    _ = try SealedValuesCodec.decode(sealedPlaintext!)
                } catch {
                    throw refuse("the encrypted values of record '\(name)' fail authentication")
                }
            }
            // The plain values, typed by the zone's schema: the new version hash signs each type.
            if schemas[type] == nil { schemas[type] = try schemaRegistry.schema(db, zoneRowID: zone.rowID, recordType: type, fresh: true) }
            let schema = schemas[type] ?? [:]
            let plainTypes: [UInt8]
            do { plainTypes = try Array(plain.utf8).withUnsafeBytes { try RecordReader.typeCodes($0, schema: schema) } } catch {
                throw refuse("the plain values of record '\(name)' do not match the zone's schema")
            }
            verified.records.append(RewrittenRecord(name: name, type: type, parent: parent, plain: Array(plain.utf8), plainTypes: plainTypes,
                                                    sealedPlaintext: sealedPlaintext, creatorID: creator, modifierID: commit.author,
                                                    created: created, modified: commit.time))
        }
        return verified
    }

    // MARK: - Keys

    /// The zone key of `epoch`: wrapped to the owner, or through the key chain from `current`;
    /// the share's epoch key must match the share's signed commitment.
    func key(epoch: Int64, share: LegacyShare?, current: (Int64, SymmetricKey)? = nil) throws -> SymmetricKey {
        if let current, current.0 == epoch { return current.1 }
        let key: SymmetricKey
        if let wrapped = try db.wrappedKey(zoneRowID: zone.rowID, epoch: epoch, memberID: userID) {
            guard let opened = try? KeyRing.unwrapZoneKey(wrapped, zoneUID: zone.uid, epoch: epoch, with: vault.boxKey) else {
                throw refuse("the key of epoch \(epoch) wrapped to its owner does not open")
            }
            key = opened
        } else if let current, epoch < current.0,
                  let sealed = try db.chainedKey(zoneRowID: zone.rowID, epoch: epoch) {
            let newer = try self.key(epoch: epoch + 1, share: share, current: current)
            guard let envelope = try? Envelope(bytes: sealed), Int64(envelope.keyID) == epoch + 1,
                  let opened = try? envelope.openSecret(using: newer, authenticating: KeyRing.chainAD(zoneUID: zone.uid, epoch: epoch)),
                  let chained = try? SymmetricKey(bytes: opened) else {
                throw refuse("its key chain is damaged at epoch \(epoch)")
            }
            key = chained
        } else {
            throw refuse("its owner holds no key for epoch \(epoch)")
        }
        if let share, share.epoch == epoch, !constantTimeEquals(KeyRing.commitment(to: key, zoneUID: zone.uid, epoch: epoch), share.keyCommitment) {
            throw refuse("its key does not match its share's signed commitment")
        }
        return key
    }

    // MARK: - Commits and memberships

    func commit(_ seq: Int64, membershipSeq zoneMembership: Int64,
                memberships: inout [Int64: LegacyMembership]) throws -> (author: String, time: Double, entries: Set<[UInt8]>) {
        guard let row = try tables.commit(zoneRowID: zone.rowID, seq: seq) else { throw refuse("commit \(seq) is missing") }
        let author = row.authorID, label = row.authorLabel, membershipSeq = row.membershipSeq, epoch = row.epoch, time = row.time
        let prev = row.prevHash, entries = row.entries, signature = row.signature, names = row.names
        guard entries.count % 32 == 0 else { throw refuse("commit \(seq) is damaged") }
        let bytes = Self.commitBytes(zoneUID: zone.uid, seq: seq, membershipSeq: membershipSeq, epoch: epoch, authorID: author, authorLabel: label,
                                     time: time, prevHash: prev, entries: entries, names: names)
        guard try store.signingKey(db, of: author).isValidSignature(signature, for: bytes) else {
            throw refuse("commit \(seq) fails its author's signature")
        }
        if author != zone.id.ownerID {
            guard membershipSeq > 0, membershipSeq <= zoneMembership else { throw refuse("commit \(seq) was written by someone who could not write") }
            let entry = try membership(membershipSeq, cache: &memberships)
            guard entry.members[author] == .readWrite || entry.publicPermission == .readWrite, seq > entry.fromCommit else {
                throw refuse("commit \(seq) was written by someone who could not write")
            }
            if membershipSeq < zoneMembership {
                guard seq <= (try membership(membershipSeq + 1, cache: &memberships)).fromCommit else {
                    throw refuse("commit \(seq) claims a membership no longer in force")
                }
            }
        }
        return (author, time, Set(stride(from: 0, to: entries.count, by: 32).map { Array(entries[$0..<$0 + 32]) }))
    }

    struct LegacyMembership {
        let fromCommit: Int64
        let publicPermission: SharePermission
        let members: [String: SharePermission]
    }

    func membership(_ seq: Int64, cache: inout [Int64: LegacyMembership]) throws -> LegacyMembership {
        if let known = cache[seq] { return known }
        guard let (content, signature) = try tables.membership(zoneRowID: zone.rowID, seq: seq) else { throw refuse("membership \(seq) is missing") }
        guard try store.signingKey(db, of: zone.id.ownerID).isValidSignature(signature, for: content),
              let entry = Self.decodeMembership(content, zoneUID: zone.uid, seq: seq) else {
            throw refuse("membership \(seq) fails its owner's signature")
        }
        cache[seq] = entry
        return entry
    }

    static func decodeMembership(_ bytes: [UInt8], zoneUID: [UInt8], seq expected: Int64) -> LegacyMembership? {
        bytes.withUnsafeBytes { raw -> LegacyMembership? in
            var r = RawReader(raw, what: "membership")
            do {
                let domain = Array("coffer.membership.v1".utf8) + [0]
                guard Array(try r.take(domain.count)) == domain, Array(try r.take(16)) == zoneUID else { return nil }
                let seq = try r.i64(), fromCommit = try r.i64()
                _ = try r.i64() // epoch
                guard seq == expected, let pub = SharePermission(rawValue: Int(try r.u8())) else { return nil }
                var members = [String: SharePermission]()
                for _ in 0..<Int(try r.u32()) {
                    let id = try r.utf8(count: Int(try r.u32()))
                    guard let p = SharePermission(rawValue: Int(try r.u8())), p != .none else { return nil }
                    members[id] = p
                }
                guard r.remaining == 0 else { return nil }
                return LegacyMembership(fromCommit: fromCommit, publicPermission: pub, members: members)
            } catch {
                return nil
            }
        }
    }

    // MARK: - The share

    struct LegacyShare {
        struct Entry {
            let userID: String
            let role: Share.Participant.Role
            let permission: SharePermission
            let status: Share.Participant.Status
            let wrappedKey: [UInt8]
        }
        let shareUID: [UInt8]
        let title: String
        let publicPermission: SharePermission
        let version: Int64
        let epoch: Int64
        let keyCommitment: [UInt8]
        let linkSealedKey: [UInt8]?
        let linkSecretSealed: [UInt8]?
        let entries: [Entry]
        let created: Double
        let modified: Double
    }

    /// The share row, its participants and their wrapped keys, with the owner's signature checked.
    func loadShare() throws -> (content: LegacyShare, signature: [UInt8])? {
        guard let row = try tables.share(zoneRowID: zone.rowID) else { return nil }
        guard let permission = SharePermission(rawValue: row.publicPermission) else { throw refuse("its share is damaged") }
        let epoch = row.epoch
        var entries = [LegacyShare.Entry]()
        for p in try tables.participants(zoneRowID: zone.rowID) {
            guard let role = Share.Participant.Role(rawValue: p.role), role != .owner,
                  let perm = SharePermission(rawValue: p.permission), perm != .none,
                  let status = Share.Participant.Status(rawValue: p.status), status != .accepted else {
                throw refuse("its share is damaged")
            }
            let wrapped = try db.wrappedKey(zoneRowID: zone.rowID, epoch: epoch, memberID: p.userID)
            entries.append(.init(userID: p.userID, role: role, permission: perm, status: status,
                                 wrappedKey: status == .removed || role == .publicUser ? [] : wrapped ?? []))
        }
        let content = LegacyShare(shareUID: row.shareUID, title: row.title, publicPermission: permission, version: row.version, epoch: epoch,
                                  keyCommitment: row.keyCommitment, linkSealedKey: row.linkSealedKey, linkSecretSealed: row.linkSecretSealed,
                                  entries: entries, created: row.created, modified: row.modified)
        let signature = row.signature
        guard try store.signingKey(db, of: zone.id.ownerID).isValidSignature(signature, for: shareBytes(content)) else {
            throw refuse("its share fails its owner's signature")
        }
        return (content, signature)
    }

    func shareBytes(_ c: LegacyShare) -> [UInt8] {
        var out = Array("coffer.share.v1".utf8) + [0]
        func framed(_ bytes: [UInt8]) { out += BigEndian.bytes(UInt32(bytes.count)) + bytes }
        framed(zone.uid)
        framed(c.shareUID)
        framed(Array(zone.id.ownerID.utf8))
        framed(Array(c.title.utf8))
        out.append(UInt8(c.publicPermission.rawValue))
        out += BigEndian.bytes(Int64(c.version)) + BigEndian.bytes(Int64(c.epoch))
        framed(c.keyCommitment)
        framed(c.linkSealedKey ?? [])
        framed(c.linkSecretSealed ?? [])
        out += BigEndian.bytes(c.created.bitPattern) + BigEndian.bytes(c.modified.bitPattern)
        out += BigEndian.bytes(UInt32(c.entries.count))
        for e in c.entries.sorted(by: { $0.userID < $1.userID }) {
            framed(Array(e.userID.utf8))
            out += [UInt8(e.role.rawValue), UInt8(e.permission.rawValue), UInt8(e.status.rawValue)]
            framed(e.wrappedKey)
        }
        return out
    }

    func linkSecretAD(_ content: LegacyShare) -> [UInt8] {
        Array("coffer.share-link-secret.v1".utf8) + content.shareUID + zone.uid
    }

    // MARK: - The formats of the earlier store

    static func commitBytes(zoneUID: [UInt8], seq: Int64, membershipSeq: Int64, epoch: Int64, authorID: String, authorLabel: String?,
                            time: Double, prevHash: [UInt8], entries: [UInt8], names: [UInt8]?) -> [UInt8] {
        var out = Array((names == nil ? "coffer.commit.v1" : "coffer.commit.v2").utf8) + [0] + zoneUID
        out += BigEndian.bytes(Int64(seq)) + BigEndian.bytes(Int64(membershipSeq)) + BigEndian.bytes(Int64(epoch))
        let author = Array(authorID.utf8), label = Array((authorLabel ?? "").utf8)
        out += BigEndian.bytes(UInt32(author.count)) + author + [authorLabel == nil ? 0 : 1] + BigEndian.bytes(UInt32(label.count)) + label
        out += BigEndian.bytes(time.bitPattern) + prevHash
        out += BigEndian.bytes(UInt32(entries.count / 32)) + BLAKE2b.hash(entries)
        if let names { out += BLAKE2b.hash(names) }
        return out
    }

    /// A record version's hash in the earlier format (`"coffer.record-version.v1"`: no modifier).
    static func recordHash(zoneUID: [UInt8], name: String, type: String, parent: String?, seq: Int64, epoch: Int64, membershipSeq: Int64,
                           creatorID: String, created: Double, modified: Double, plain: [UInt8], sealed: [UInt8]?) -> [UInt8] {
        var header = Array("coffer.record-version.v1".utf8)
        func text(_ s: String) { header += BigEndian.bytes(UInt32(s.utf8.count)) + Array(s.utf8) }
        header += BigEndian.bytes(UInt32(zoneUID.count)) + zoneUID
        text(name)
        text(type)
        header.append(parent == nil ? 0 : 1)
        text(parent ?? "")
        header += BigEndian.bytes(UInt64(bitPattern: seq)) + BigEndian.bytes(UInt64(bitPattern: epoch)) + BigEndian.bytes(UInt64(bitPattern: membershipSeq))
        text(creatorID)
        header += BigEndian.bytes(created.bitPattern) + BigEndian.bytes(modified.bitPattern)
        header += BigEndian.bytes(UInt32(plain.count)) + [sealed == nil ? 0 : 1] + BigEndian.bytes(UInt32(sealed?.count ?? 0))
        return BLAKE2b.hash(header + plain + (sealed ?? []))
    }

    /// A record's associated data in the earlier format: it bound the store's id.
    static func associatedData(storeID: [UInt8], zone: ZoneRow, name: String, type: String, epoch: Int64) -> [UInt8] {
        func framed(_ b: [UInt8]) -> [UInt8] { [UInt8(b.count >> 8 & 0xff), UInt8(b.count & 0xff)] + b }
        return Array("coffer.record.v1".utf8) + framed(storeID) + framed(zone.uid) + framed(Array(zone.id.ownerID.utf8))
            + framed(Array(name.utf8)) + framed(Array(type.utf8)) + BigEndian.bytes(UInt64(bitPattern: epoch))
    }
}

import CofferCrypto
import CofferVault
import Foundation

/// The share as its owner states it in a genesis or membership entry. Participants are those
/// named by the owner: invited by name (pending until their own acceptance entry), or removed
/// (named participants and link joiners the owner took out).
package struct ShareState: Sendable, Equatable {
    package struct Participant: Sendable, Equatable {
        package let role: Share.Participant.Role
        package let permission: SharePermission
        /// `.pending` (named, not removed) or `.removed`.
        package let status: Share.Participant.Status
    }

    package let shareUID: [UInt8]
    package var title: String
    package var publicPermission: SharePermission
    /// The public half of the Ed25519 key derived from the link secret, while the public
    /// permission is not none: link joiners prove they hold the secret by signing with it.
    package var linkPublicKey: [UInt8]?
    package var participants: [String: Participant]

    package var activeNamed: [String] {
        participants.filter { $0.value.role == .privateUser && $0.value.status != .removed }.map(\.key).sorted()
    }
}

/// The payload of genesis and membership entries: the zone's key epoch, commitments to the
/// keys of epochs this entry starts, and the share (absent when the zone is not shared).
///
/// | bytes | field |
/// | --- | --- |
/// | 8 | current key epoch |
/// | 2 + 40 n | new commitments: count, then each epoch (8) and its commitment (32) |
/// | 1 | `1` shared, `0` not (nothing follows of the share then) |
/// | 16 | share uid |
/// | 4 + n | title (UTF-8) |
/// | 1 | public permission (0 none, 1 read-only, 2 read-write) |
/// | 1 (+ 32) | `1` and the link public key, or `0` |
/// | 2 + … | participants, sorted by user id: id (1 + 32), role (1 named, 2 link), permission (1, 2), status (0 pending, 2 removed) |
package struct StatePayload: Sendable, Equatable {
    package var epoch: Int64
    package var newCommitments: [Int64: [UInt8]]
    package var share: ShareState?

    package func encode(into w: inout ByteWriter) {
        w.i64(epoch)
        w.u16(newCommitments.count)
        for (epoch, commitment) in newCommitments.sorted(by: { $0.key < $1.key }) {
            w.i64(epoch)
            w.append(commitment)
        }
        guard let share else { w.u8(0); return }
        w.u8(1)
        w.append(share.shareUID)
        w.long(share.title)
        w.u8(UInt8(share.publicPermission.rawValue))
        w.optionalBytes(share.linkPublicKey)
        w.u16(share.participants.count)
        for (id, p) in share.participants.sorted(by: { $0.key < $1.key }) {
            w.short(id)
            w.u8(UInt8(p.role.rawValue))
            w.u8(UInt8(p.permission.rawValue))
            w.u8(UInt8(p.status.rawValue))
        }
    }

    static func decode(_ r: inout RawReader) throws -> StatePayload {
        let epoch = try r.i64()
        guard epoch >= 1, epoch <= Limits.maxLogSequence else { throw r.fail("epoch") }
        var commitments = [Int64: [UInt8]]()
        var last: Int64 = 0
        for _ in 0..<Int(try r.u16()) {
            let e = try r.i64()
            guard e > last, e <= Limits.maxLogSequence else { throw r.fail("commitments out of order") }
            last = e
            commitments[e] = try r.bytes(32)
        }
        switch try r.u8() {
        case 0: return StatePayload(epoch: epoch, newCommitments: commitments, share: nil)
        case 1: break
        default: throw r.fail("bad flag")
        }
        let uid = try r.bytes(16)
        let title = try r.long(max: Limits.maxShareTitleBytes)
        guard !title.containsControlCharacters else { throw r.fail("title") }
        guard let permission = SharePermission(rawValue: Int(try r.u8())) else { throw r.fail("permission") }
        let link = try r.optionalBytes(32)
        guard (link != nil) == (permission != .none) else { throw r.fail("link key") }
        let count = Int(try r.u16())
        guard count <= Limits.maxParticipants * 4 else { throw r.fail("too many participants") }
        var participants = [String: ShareState.Participant]()
        var previous = ""
        for _ in 0..<count {
            let id = try r.short()
            guard UserIDs.isValid(id), id > previous else { throw r.fail("participants out of order") }
            previous = id
            guard let role = Share.Participant.Role(rawValue: Int(try r.u8())), role != .owner,
                  let p = SharePermission(rawValue: Int(try r.u8())), p != .none,
                  let status = Share.Participant.Status(rawValue: Int(try r.u8())), status != .accepted,
                  role == .privateUser || status == .removed else { throw r.fail("participant") }
            participants[id] = .init(role: role, permission: p, status: status)
        }
        return StatePayload(epoch: epoch, newCommitments: commitments,
                            share: ShareState(shareUID: uid, title: title, publicPermission: permission, linkPublicKey: link,
                                              participants: participants))
    }
}

/// The payload of the genesis entry.
///
/// | bytes | field |
/// | --- | --- |
/// | 1 + n | zone name |
/// | … | the first state (``StatePayload``); every named participant is pending (a participant of a zone upgraded from a store without a log accepts again) |
/// | 68 | the records a zone upgraded from a store without a log holds (``RecordsSummary``; none for a new zone) |
package struct GenesisPayload: Sendable {
    package let zoneName: String
    package let state: StatePayload
    package let records: RecordsSummary

    package var encoded: [UInt8] {
        var w = ByteWriter()
        w.short(zoneName)
        state.encode(into: &w)
        records.encode(into: &w)
        return w.bytes
    }

    package static func decode(_ payload: [UInt8]) -> GenesisPayload? {
        payload.withUnsafeBytes { raw in
            var r = RawReader(raw, what: "genesis entry")
            do {
                let name = try r.short()
                guard (try? Names.validateZone(name)) != nil else { return nil }
                let state = try StatePayload.decode(&r)
                let records = try RecordsSummary.decode(&r)
                guard r.remaining == 0 else { return nil }
                return GenesisPayload(zoneName: name, state: state, records: records)
            } catch {
                return nil
            }
        }
    }
}

/// What an entry that writes records signs of them: their number and the BLAKE2b-256 of the
/// version-hash list and of the name list (the lists are stored beside the entry).
///
/// | bytes | field |
/// | --- | --- |
/// | 4 | number of version hashes |
/// | 32 | BLAKE2b-256 of the version hashes (32 bytes each, in order) |
/// | 32 | BLAKE2b-256 of the names (per entry: `0` saved or `1` deleted, length (1), name) |
package struct RecordsSummary: Sendable, Equatable {
    package let count: Int
    package let entriesHash: [UInt8]
    package let namesHash: [UInt8]

    package static let empty = RecordsSummary(entries: [], names: [])

    package init(entries: [UInt8], names: [UInt8]) {
        count = entries.count / 32
        entriesHash = BLAKE2b.hash(entries)
        namesHash = BLAKE2b.hash(names)
    }

    package init(count: Int, entriesHash: [UInt8], namesHash: [UInt8]) {
        self.count = count
        self.entriesHash = entriesHash
        self.namesHash = namesHash
    }

    package func encode(into w: inout ByteWriter) {
        w.u32(count)
        w.append(entriesHash)
        w.append(namesHash)
    }

    static func decode(_ r: inout RawReader) throws -> RecordsSummary {
        RecordsSummary(count: Int(try r.u32()), entriesHash: try r.bytes(32), namesHash: try r.bytes(32))
    }

    /// Whether stored lists are the ones this summary names.
    package func matches(entries: [UInt8]?, names: [UInt8]?) -> Bool {
        let entries = entries ?? [], names = names ?? []
        return entries.count == count * 32 && BLAKE2b.hash(entries) == entriesHash && BLAKE2b.hash(names) == namesHash
    }
}

/// The payload of commit and rewrite entries.
///
/// | bytes | field |
/// | --- | --- |
/// | 8 | key epoch the records are sealed under (the zone's current one) |
/// | 8 | sequence of the owner's latest genesis or membership entry before this one |
/// | 1 (+ 2 + n) | `1` and the transaction author label (UTF-8, at most 255 bytes), or `0` |
/// | 68 | ``RecordsSummary`` |
package struct RecordsPayload: Sendable {
    package let epoch: Int64
    package let ownerSeq: Int64
    package let label: String?
    package let records: RecordsSummary

    package var encoded: [UInt8] {
        var w = ByteWriter()
        w.i64(epoch)
        w.i64(ownerSeq)
        if let label {
            w.u8(1)
            w.u16(label.utf8.count)
            w.append(Array(label.utf8))
        } else {
            w.u8(0)
        }
        records.encode(into: &w)
        return w.bytes
    }

    package static func decode(_ payload: [UInt8]) -> RecordsPayload? {
        payload.withUnsafeBytes { raw in
            var r = RawReader(raw, what: "commit")
            do {
                let epoch = try r.i64(), ownerSeq = try r.i64()
                var label: String?
                switch try r.u8() {
                case 0: break
                case 1:
                    let n = Int(try r.u16())
                    guard n <= 255 else { return nil }
                    let text = try r.utf8(count: n)
                    guard !text.containsControlCharacters else { return nil }
                    label = text
                default: return nil
                }
                let records = try RecordsSummary.decode(&r)
                guard r.remaining == 0, epoch >= 1, ownerSeq >= 1, epoch <= Limits.maxLogSequence, ownerSeq <= Limits.maxLogSequence else { return nil }
                return RecordsPayload(epoch: epoch, ownerSeq: ownerSeq, label: label, records: records)
            } catch {
                return nil
            }
        }
    }
}

/// The payload of an acceptance entry: a participant accepts the share at the owner's version,
/// or leaves it.
///
/// | bytes | field |
/// | --- | --- |
/// | 16 | share uid |
/// | 1 + 32 | owner's user id |
/// | 8 | version: sequence of the owner's entry the share is at |
/// | 1 | role: 1 named participant, 2 link joiner |
/// | 1 | state: 1 accepted, 2 left |
/// | 1 (+ 64) | for a link joiner who accepts: `1` and the link proof, an Ed25519 signature by the link key over `"coffer.link-proof.v2\0"` ‖ zone uid ‖ share uid ‖ user id; else `0` |
package struct AcceptancePayload: Sendable {
    package enum State: UInt8, Sendable { case accepted = 1, left = 2 }

    package let shareUID: [UInt8]
    package let ownerID: String
    package let version: Int64
    package let role: Share.Participant.Role
    package let state: State
    package let linkProof: [UInt8]?

    package var encoded: [UInt8] {
        var w = ByteWriter()
        w.append(shareUID)
        w.short(ownerID)
        w.i64(version)
        w.u8(UInt8(role.rawValue))
        w.u8(state.rawValue)
        w.optionalBytes(linkProof)
        return w.bytes
    }

    package static func decode(_ payload: [UInt8]) -> AcceptancePayload? {
        payload.withUnsafeBytes { raw in
            var r = RawReader(raw, what: "acceptance")
            do {
                let uid = try r.bytes(16)
                let owner = try r.short()
                let version = try r.i64()
                guard version >= 1, version <= Limits.maxLogSequence else { return nil }
                guard UserIDs.isValid(owner), let role = Share.Participant.Role(rawValue: Int(try r.u8())), role != .owner,
                      let state = State(rawValue: try r.u8()) else { return nil }
                let proof = try r.optionalBytes(64)
                guard r.remaining == 0 else { return nil }
                return AcceptancePayload(shareUID: uid, ownerID: owner, version: version, role: role, state: state, linkProof: proof)
            } catch {
                return nil
            }
        }
    }

    /// What a link joiner signs with the link key.
    package static func proofMessage(zoneUID: [UInt8], shareUID: [UInt8], userID: String) -> [UInt8] {
        Array("coffer.link-proof.v2".utf8) + [0] + zoneUID + shareUID + Array(userID.utf8)
    }
}

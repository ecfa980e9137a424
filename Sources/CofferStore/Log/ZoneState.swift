import CofferCrypto
import Foundation

/// What a zone's verified log says at a position: its owner, key epoch and commitments, share,
/// members and their acceptances. Built by applying entries in order from the genesis; each
/// entry is checked against the state before it (who may write it, and what it may change).
/// Signatures are checked before (``ZoneLogVerifier``, which applies entries here); everything
/// else is checked here.
package struct ZoneState: Sendable {
    package let zoneUID: [UInt8]
    package let name: String
    package let ownerID: String
    /// The genesis entry's sequence.
    package let base: Int64
    /// The genesis entry's time: when the zone was made (or upgraded from a store without a log).
    package let created: Double
    package private(set) var headSeq: Int64
    package private(set) var headHash: Digest32
    /// The head entry's format: a later entry may not be of an earlier one.
    package private(set) var headFormat: LogEntry.Format
    /// The sequence and time of the owner's latest genesis or membership entry.
    package private(set) var ownerSeq: Int64
    package private(set) var ownerTime: Double
    package private(set) var epoch: Int64
    package private(set) var commitments: [Int64: [UInt8]]
    package private(set) var share: ShareState?
    /// When the current share was created (the time of the entry that created it).
    package private(set) var shareCreated: Double = 0
    /// Named participants' own answer since they were last invited.
    package private(set) var acceptances: [String: AcceptancePayload.State] = [:]
    /// Link joiners of the current link, with their own answer (a joiner's acceptance carried a
    /// valid proof of the link secret).
    package private(set) var linkJoiners: [String: AcceptancePayload.State] = [:]
    /// The sequence of the owner's deletion entry, when the log has one: it is the log's last
    /// entry, and nothing may follow it.
    package private(set) var deletionSeq: Int64?

    /// A refusal: which entry, and why.
    package struct Refusal: Error {
        package let seq: Int64
        package let reason: String
    }

    /// The state after the genesis entry of the zone whose row says `uid`, `name`, `ownerID`.
    package init(genesis entry: LogEntry, hash: Digest32, uid: [UInt8], name: String, ownerID: String) throws {
        func refuse(_ why: String) -> Refusal { Refusal(seq: entry.seq, reason: why) }
        guard entry.kind == .genesis else { throw refuse("the first entry is a \(entry.kind), not the genesis") }
        guard entry.prev == .zero else { throw refuse("the genesis names a previous entry") }
        guard entry.zoneUID == uid else { throw refuse("the genesis is of another zone") }
        guard entry.authorID == ownerID else { throw refuse("the genesis is signed by \(entry.authorID), not the zone's owner") }
        guard let genesis = GenesisPayload.decode(entry.payload) else { throw refuse("the genesis is malformed") }
        if let why = Self.formatRefusal(entry, after: nil) { throw refuse(why) }
        guard genesis.zoneName == name else { throw refuse("the genesis names zone '\(genesis.zoneName)'") }
        zoneUID = uid
        self.name = name
        self.ownerID = ownerID
        base = entry.seq
        created = entry.time
        headSeq = entry.seq
        headHash = hash
        headFormat = entry.format
        ownerSeq = entry.seq
        ownerTime = entry.time
        epoch = genesis.state.epoch
        commitments = genesis.state.newCommitments
        guard commitments[epoch] != nil, commitments.keys.allSatisfy({ $0 <= epoch }) else {
            throw refuse("the genesis does not commit to the key of epoch \(epoch)")
        }
        share = genesis.state.share
        shareCreated = entry.time
        if let share {
            guard share.participants[ownerID] == nil else { throw refuse("the owner is listed as a participant") }
        }
    }

    /// Applies the next entry: it must name this head as its previous entry and be allowed by
    /// this state. `hash` is the entry's own hash.
    package mutating func apply(_ entry: LogEntry, hash: Digest32) throws {
        func refuse(_ why: String) -> Refusal { Refusal(seq: entry.seq, reason: why) }
        guard entry.zoneUID == zoneUID else { throw refuse("the entry is of another zone") }
        if let deletionSeq { throw refuse("the zone was deleted by its owner at entry \(deletionSeq): nothing follows its deletion") }
        guard entry.seq == headSeq + 1 else { throw refuse("the entry's sequence is \(entry.seq), not \(headSeq + 1)") }
        guard entry.prev == headHash else { throw refuse("the entry does not follow entry \(headSeq) (the chain is broken)") }
        if let why = Self.formatRefusal(entry, after: headFormat) { throw refuse(why) }
        switch entry.kind {
        case .genesis:
            throw refuse("a second genesis")
        case .membership:
            guard entry.authorID == ownerID else { throw refuse("a membership entry signed by \(entry.authorID), not the owner") }
            guard let payload = entry.payload.withUnsafeBytes({ raw -> StatePayload? in
                var r = RawReader(raw, what: "membership")
                guard let p = try? StatePayload.decode(&r), r.remaining == 0 else { return nil }
                return p
            }) else { throw refuse("the membership entry is malformed") }
            try applyMembership(payload, time: entry.time, refuse: refuse)
            ownerSeq = entry.seq
            ownerTime = entry.time
        case .commit, .rewrite:
            guard let payload = RecordsPayload.decode(entry.payload) else { throw refuse("the \(entry.kind) is malformed") }
            guard payload.epoch == epoch else { throw refuse("the \(entry.kind) seals under epoch \(payload.epoch); the zone is at \(epoch)") }
            guard payload.ownerSeq == ownerSeq else {
                throw refuse("the \(entry.kind) claims membership \(payload.ownerSeq); the one in force is \(ownerSeq)")
            }
            if entry.kind == .rewrite {
                guard entry.authorID == ownerID else { throw refuse("a rewrite signed by \(entry.authorID), not the owner") }
            } else if let why = writeRefusal(entry.authorID) {
                throw refuse("a commit by \(entry.authorID), who \(why)")
            }
        case .acceptance:
            guard let payload = AcceptancePayload.decode(entry.payload) else { throw refuse("the acceptance is malformed") }
            try applyAcceptance(payload, author: entry.authorID, refuse: refuse)
        case .deletion:
            guard entry.authorID == ownerID else { throw refuse("a deletion signed by \(entry.authorID), not the owner") }
            guard entry.payload.isEmpty else { throw refuse("the deletion is malformed") }
            deletionSeq = entry.seq
        }
        headSeq = entry.seq
        headHash = hash
        headFormat = entry.format
    }

    /// Why an entry's format is refused whatever its kind, or nil: a format earlier than the
    /// head's (someone who holds an author's key from before, or a store's rows, cannot go back
    /// to a layout with fewer fields), or a signing device, which this version does not know.
    private static func formatRefusal(_ entry: LogEntry, after head: LogEntry.Format?) -> String? {
        if let head, entry.format < head { return "the entry is of format \(entry.format.rawValue), after one of format \(head.rawValue)" }
        if !entry.deviceID.isEmpty { return "the entry is signed by a device, which this version of Coffer does not know" }
        return nil
    }

    private mutating func applyMembership(_ payload: StatePayload, time: Double, refuse: (String) -> Refusal) throws {
        for (e, _) in payload.newCommitments {
            guard commitments[e] == nil else { throw refuse("the membership entry commits again to epoch \(e)") }
            guard e > epoch, e <= payload.epoch else { throw refuse("the membership entry commits to epoch \(e) out of order") }
        }
        guard payload.epoch >= epoch else { throw refuse("the key epoch goes back from \(epoch) to \(payload.epoch)") }
        commitments.merge(payload.newCommitments) { a, _ in a }
        guard commitments[payload.epoch] != nil else { throw refuse("no commitment to the key of epoch \(payload.epoch)") }
        let old = share
        if let new = payload.share {
            guard new.participants[ownerID] == nil else { throw refuse("the owner is listed as a participant") }
            if let old, old.shareUID != new.shareUID { throw refuse("the share's uid changed") }
            if old == nil { shareCreated = time }
            // An invitation (new, or after a removal) starts over: an older answer no longer counts.
            for (id, p) in new.participants where p.role == .privateUser {
                let before = old?.participants[id]
                if p.status == .removed || before == nil || before?.status == .removed || before?.role != .privateUser {
                    acceptances[id] = nil
                }
            }
            for id in acceptances.keys where new.participants[id]?.role != .privateUser { acceptances[id] = nil }
            // Joiners belong to one link: a new link, none, or a removal ends their part.
            if new.linkPublicKey == nil || new.linkPublicKey != old?.linkPublicKey {
                linkJoiners = [:]
            }
            for (id, p) in new.participants where p.status == .removed { linkJoiners[id] = nil }
        } else {
            acceptances = [:]
            linkJoiners = [:]
        }
        share = payload.share
        epoch = payload.epoch
    }

    private mutating func applyAcceptance(_ payload: AcceptancePayload, author: String, refuse: (String) -> Refusal) throws {
        guard author != ownerID else { throw refuse("an acceptance by the owner") }
        guard let share else { throw refuse("an acceptance of a zone that is not shared") }
        guard payload.shareUID == share.shareUID, payload.ownerID == ownerID else { throw refuse("an acceptance of another share") }
        guard payload.version == ownerSeq else {
            throw refuse("an acceptance of version \(payload.version); the share is at \(ownerSeq)")
        }
        switch payload.role {
        case .privateUser:
            guard payload.linkProof == nil else { throw refuse("a named participant's acceptance with a link proof") }
            guard let p = share.participants[author], p.role == .privateUser, p.status == .pending else {
                throw refuse("an acceptance by \(author), who is not invited")
            }
            if payload.state == .left, acceptances[author] != .accepted { throw refuse("\(author) leaves a share they did not accept") }
            acceptances[author] = payload.state
        case .publicUser:
            guard share.participants[author] == nil || share.participants[author]?.role == .publicUser else {
                throw refuse("a link acceptance by \(author), who is a named participant")
            }
            guard share.participants[author]?.status != .removed else { throw refuse("a link acceptance by \(author), who was removed") }
            switch payload.state {
            case .accepted:
                guard share.publicPermission != .none, let link = share.linkPublicKey,
                      let key = try? Ed25519.PublicKey(rawRepresentation: link), let proof = payload.linkProof,
                      key.isValidSignature(proof, for: AcceptancePayload.proofMessage(zoneUID: zoneUID, shareUID: share.shareUID, userID: author)) else {
                    throw refuse("a link acceptance by \(author) without a valid proof of the link")
                }
            case .left:
                guard payload.linkProof == nil, linkJoiners[author] == .accepted else {
                    throw refuse("\(author) leaves a link they did not join")
                }
            }
            linkJoiners[author] = payload.state
        case .owner:
            throw refuse("an acceptance as the owner")
        }
    }

    /// Why `userID` may not write records now, or nil when they may.
    package func writeRefusal(_ userID: String) -> String? {
        if userID == ownerID { return nil }
        guard let share else { return "is not a member (the zone is not shared)" }
        if let p = share.participants[userID], p.role == .privateUser {
            guard p.status != .removed else { return "was removed" }
            guard acceptances[userID] == .accepted else { return "has not accepted the share" }
            return p.permission == .readWrite ? nil : "has read-only permission"
        }
        guard linkJoiners[userID] == .accepted else { return "is not a member and did not join with the link" }
        return share.publicPermission == .readWrite ? nil : "joined with a read-only link"
    }

    /// Everyone who may read the zone now: the owner, named participants who accepted, and
    /// joiners of the current link.
    package var readers: [String] {
        var out = [ownerID]
        out += acceptances.filter { $0.value == .accepted }.map(\.key)
        if share?.publicPermission != SharePermission.none { out += linkJoiners.filter { $0.value == .accepted }.map(\.key) }
        return out.sorted()
    }

    /// The members a new key epoch is wrapped to: the owner, named participants who are not
    /// removed (pending or accepted), and joiners of the current link.
    package var keyHolders: [String] {
        var out = Set([ownerID])
        if let share {
            out.formUnion(share.activeNamed)
            if share.publicPermission != .none { out.formUnion(linkJoiners.filter { $0.value == .accepted }.map(\.key)) }
        }
        return out.sorted()
    }
}

extension ZoneState {
    /// Whom a zone's member lookup lists (a cache that narrows searches of the zones a user
    /// takes part in): every participant the share names, removed or not, and every link joiner.
    package var lookupMembers: Set<String> {
        Set(share?.participants.keys.map { $0 } ?? []).union(linkJoiners.keys)
    }

    /// Whether the state lists `userID` as a participant who was not removed, or as a link
    /// joiner who accepted.
    package func takesPart(_ userID: String) -> Bool {
        if let participant = share?.participants[userID], participant.status != .removed { return true }
        return linkJoiners[userID] == .accepted
    }
}

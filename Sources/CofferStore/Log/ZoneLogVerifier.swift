import CofferCrypto
import Foundation

/// The one verifier of a zone's log entries, used by every reader of a log: a client walking a
/// zone's log, a server checking a batch, replaying its store or deciding what a former member
/// may read, a restore checking a backup's zones, and a session checking a deleted zone's kept
/// entries. Each stored entry must decode at the position it is stored at, be signed by its
/// author (``StoredLogEntry/checked(key:describe:)``, when signatures are checked), and be
/// allowed by the state before it (``ZoneState``): the genesis first, by the zone's owner and
/// naming the zone, then each entry following the head.
///
/// ```swift
/// let verifier = ZoneLogVerifier(uid: row.uid, zone: row.id) { author in try keys(author) }
/// var state = try verifier.genesis(entries[0])
/// for stored in entries.dropFirst() { try verifier.apply(stored, to: &state) }
/// ```
///
/// A refusal is a ``ZoneState/Refusal`` naming the entry and why; each caller says it in its own
/// words (a client's integrity failure, a server's refused batch).
package struct ZoneLogVerifier {
    package let uid: [UInt8]
    package let zone: ZoneID
    private let key: ((String) throws -> Ed25519.PublicKey?)?
    private let describe: (String) -> String

    /// - Parameters:
    ///   - uid: the zone's uid, which its genesis must name.
    ///   - zone: the zone's name and owner, which its genesis must name and be signed by.
    ///   - describe: how a refusal names a user.
    ///   - key: an author's signing key (nil for an author who has none here, which refuses the
    ///     entry); nil to check no signature (a replay of entries whose signatures were checked
    ///     when they were stored).
    package init(uid: [UInt8], zone: ZoneID, describe: @escaping (String) -> String = { $0 },
                 key: ((String) throws -> Ed25519.PublicKey?)?) {
        self.uid = uid
        self.zone = zone
        self.key = key
        self.describe = describe
    }

    /// The state the zone's first entry starts.
    /// - Parameter signed: false to skip this entry's signature (covered by a mark).
    /// - Throws: ``ZoneState/Refusal``; an error of `key`.
    package func genesis(_ stored: StoredLogEntry, signed: Bool = true) throws -> ZoneState {
        try ZoneState(genesis: entry(stored, signed: signed), hash: stored.hash, uid: uid, name: zone.name, ownerID: zone.ownerID)
    }

    /// Checks `stored` as the entry after `state`'s head and applies it.
    /// - Throws: ``ZoneState/Refusal``; an error of `key`.
    @discardableResult
    package func apply(_ stored: StoredLogEntry, to state: inout ZoneState, signed: Bool = true) throws -> LogEntry {
        let entry = try entry(stored, signed: signed)
        try state.apply(entry, hash: stored.hash)
        return entry
    }

    /// ``genesis(_:signed:)`` when there is no state yet, else ``apply(_:to:signed:)``. On a
    /// refusal, `state` is left nil.
    @discardableResult
    package func next(_ stored: StoredLogEntry, to state: inout ZoneState?, signed: Bool = true) throws -> LogEntry {
        guard var current = state else {
            let entry = try entry(stored, signed: signed)
            state = try ZoneState(genesis: entry, hash: stored.hash, uid: uid, name: zone.name, ownerID: zone.ownerID)
            return entry
        }
        state = nil // `current` is then the state's only copy, and applying the entry does not copy it
        let entry = try apply(stored, to: &current, signed: signed)
        state = current
        return entry
    }

    private func entry(_ stored: StoredLogEntry, signed: Bool) throws -> LogEntry {
        try stored.checked(key: signed ? key : nil, describe: describe)
    }
}

import Foundation

/// Sharing, as CloudKit's `CKShare` and Core Data's `share(_:to:)`: see <doc:Sharing>.
///
/// ```swift
/// let share = try await alice.share(zone: zone, title: "Family notes")
/// _ = try await alice.addParticipant("bob@example.com", permission: .readOnly, to: zone)
/// // Bob, in his own session on the same store:
/// let accepted = try await bob.acceptShare(url: share.url)
/// let note = try await bob.sharedDatabase.record(named: "groceries", in: accepted.zoneID)
/// ```
extension Session {
    /// Shares a zone you own. With a public permission other than `.none`, the URL carries a
    /// link secret and anyone holding it may join with that permission.
    /// - Throws: `.alreadyExists` when the zone is shared already; `.permissionFailure` when you do not own it.
    public func share(zone: ZoneID, title: String = "", publicPermission: SharePermission = .none) async throws -> Share {
        try await sharing.createShare(zone: zone, title: title, publicPermission: publicPermission)
    }

    /// Moves records and their children into a zone of their own (created if needed) and shares
    /// it, or adds them to the zone of an existing share. Returns the share.
    public func share(records names: [String], in zone: ZoneID, intoZoneNamed target: String, title: String = "",
                      publicPermission: SharePermission = .none) async throws -> Share {
        let (targetID, _) = try await sharing.moveRecords(named: names, from: zone, to: target)
        if let existing = try? await sharing.loadShare(zone: targetID) { return existing }
        return try await sharing.createShare(zone: targetID, title: title, publicPermission: publicPermission)
    }

    /// Invites a contact (by email, user id or name) with a permission: the zone key is wrapped to them.
    public func addParticipant(_ who: String, permission: SharePermission, to zone: ZoneID) async throws -> Share {
        try await sharing.addParticipant(who, permission: permission, zone: zone)
    }

    /// Changes a named participant's permission.
    public func setPermission(_ permission: SharePermission, for who: String, in zone: ZoneID) async throws -> Share {
        try await sharing.setPermission(who, permission: permission, zone: zone)
    }

    /// Changes the public permission (CloudKit's rules: going public removes pending named
    /// participants; back to none removes everyone who joined by the link and rotates the key).
    public func setPublicPermission(_ permission: SharePermission, in zone: ZoneID) async throws -> Share {
        try await sharing.setPublicPermission(permission, zone: zone)
    }

    /// Removes a participant and rotates the zone key: they can open nothing written afterwards.
    public func removeParticipant(_ who: String, from zone: ZoneID) async throws -> Share {
        try await sharing.removeParticipant(who, zone: zone)
    }

    /// Ends the share: the records stay, unshared, under a new zone key.
    public func stopSharing(zone: ZoneID) async throws {
        try await sharing.stopShare(zone: zone)
    }

    /// Accepts a share URL as the acting user: as an invited participant, or through the
    /// public link. Afterwards the zone is in ``sharedDatabase``.
    public func acceptShare(url: String) async throws -> Share {
        try await sharing.accept(url: ShareURL(string: url))
    }

    /// Stops taking part in a share; the zone leaves ``sharedDatabase``.
    public func leaveShare(zone: ZoneID) async throws {
        try await sharing.leave(zone: zone)
    }

    /// The share of a zone (owner, participant, or invitee).
    public func fetchShare(in zone: ZoneID) async throws -> Share {
        try await sharing.loadShare(zone: zone)
    }

    /// Shares you own and shares you take part in or are invited to.
    public func fetchShares() async throws -> [Share] {
        try await sharing.shares()
    }

    /// The shares of one database, as Core Data's `fetchShares(in:)` for a store: in the private
    /// database the shares you own, in the shared database those you take part in or are invited to.
    public func fetchShares(in database: RecordDatabase.Scope) async throws -> [Share] {
        try await sharing.shares().filter { (database == .private) == ($0.zoneID.ownerID == userID) }
    }

    /// The shares of the given zones that exist and are visible to you.
    public func fetchShares(matching zones: [ZoneID]) async throws -> [ZoneID: Share] {
        var out = [ZoneID: Share]()
        for zone in zones {
            if let share = try? await sharing.loadShare(zone: zone) { out[zone] = share }
        }
        return out
    }

    /// Re-seals every record under the current key epoch and deletes older keys (owner only).
    public func rekey(zone: ZoneID, progress: @Sendable (_ done: Int, _ total: Int) -> Void = { _, _ in }) async throws -> Int {
        try await writer.rekeyRecords(zone: zone, progress: progress)
    }

    /// Whether you own the zone.
    public func isOwner(_ zone: ZoneID) -> Bool { zone.ownerID == userID }

    /// Whether the zone has a share.
    public func isShared(_ zone: ZoneID) async throws -> Bool {
        try await read { db in try self.verifiedLogs.zoneState(db, zone: try self.accessControl.zoneRow(db, zone)).share != nil }
    }

    /// Whether you may create, change and delete records in the zone now.
    public func canModify(zone: ZoneID) async -> Bool {
        await (try? read { db in try self.accessControl.requireWrite(db, zone: try self.accessControl.zoneRow(db, zone)) }) != nil
    }

    /// Whether you may save changes to this record.
    public func canUpdate(_ record: Record) async -> Bool { await canModify(zone: record.zoneID) }

    /// Whether you may delete this record.
    public func canDelete(_ record: Record) async -> Bool { await canModify(zone: record.zoneID) }

    /// Whether you may read the zone now.
    public func canRead(zone: ZoneID) async -> Bool {
        await (try? read { db in try self.accessControl.requireRead(db, zone: try self.accessControl.zoneRow(db, zone)) }) != nil
    }
}

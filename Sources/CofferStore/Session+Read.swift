import CofferCrypto
import CofferVault
import Foundation

extension Session {
    /// Whether `db` is a read that began before a session of this process last advanced this
    /// zone's log or mark (see ``VerifiedLogs/read(_:)``): such a read may see an older head of
    /// a chain verified further since.
    static func isLaggingRead(_ db: any StorageTransaction, zone: ZoneRow) -> Bool {
        guard let started = readStarts.withLock({ $0[ObjectIdentifier(db)] }) else { return false }
        return advances.withLock { ($0.zones[zone.uid] ?? 0) > started }
    }

    /// Runs `body` noted as a read that began at `generation` (see ``isLaggingRead(_:zone:)``).
    static func noting<D: StorageTransaction, T>(_ db: D, _ generation: Int, _ body: (D) throws -> T) throws -> T {
        let id = ObjectIdentifier(db)
        Session.readStarts.withLock { $0[id] = generation }
        defer { Session.readStarts.withLock { _ = $0.removeValue(forKey: id) } }
        return try body(db)
    }

    /// A read transaction of this session (``VerifiedLogs/read(_:)``).
    func read<T: Sendable>(_ body: @escaping @Sendable (any StorageTransaction) throws -> T) async throws -> T {
        try await verifiedLogs.read(body)
    }

    /// ``read(_:)`` on the calling thread (``VerifiedLogs/read(_:)``, its blocking form).
    @_disfavoredOverload
    func read<T: Sendable>(_ body: (any StorageTransaction) throws -> T) throws -> T {
        try verifiedLogs.read(body)
    }
}

extension VerifiedLogs {
    /// Runs a read transaction that may see an older head than this session verified, when
    /// another of its operations advanced a log after the read began (see ``zoneLog(_:zone:)``).
    /// Every read of the session goes through here; writes (which see the latest state) do not.
    func read<T: Sendable>(_ body: @escaping @Sendable (any StorageTransaction) throws -> T) async throws -> T {
        // A pinned read began when its pin was taken.
        let generation = PinnedReads.generation(of: store) ?? Session.advances.withLock { $0.counter }
        do {
            return try await store.read { db in try Session.noting(db, generation, body) }
        } catch let error as StoreError where error.underlying is VerifiedLogs.DeletedZoneSeen {
            throw await deletionRaced(error)
        }
    }

    /// ``read(_:)`` on the calling thread, for the synchronous entry points (opening a session);
    /// in async code the async form is chosen.
    @_disfavoredOverload
    func read<T: Sendable>(_ body: (any StorageTransaction) throws -> T) throws -> T {
        let generation = Session.advances.withLock { $0.counter }
        return try store.read { db in try Session.noting(db, generation) { try body($0) } }
    }
}

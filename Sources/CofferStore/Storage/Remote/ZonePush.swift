import CofferVault
import Foundation

/// Copies a zone whole from one store onto another (`coffer zone push`, and a restore onto a
/// server): reads it from one state of the source and applies it in batches the target checks.
enum ZonePush {}

extension ZonePush {
    /// Applies `batches` to `driver` as one batch, whole or not at all: a local store takes them
    /// in one transaction; a Coffer server through its stage, each batch in a request of its
    /// own, applied together by a last one (a run cut short and made again sends only what the
    /// server lacks). `progress` gets the batches done and their number, and whether the server
    /// had that one already (on a local store, once, after the transaction). With `operation`,
    /// the store records it as applied in the same transaction (see ``wasApplied(_:on:)``).
    static func applyWhole(_ batches: [[StorageSnapshot.Write]], to driver: any SnapshotDriver, operation: SnapshotOperation? = nil,
                           progress: (_ done: Int, _ total: Int, _ held: Bool) -> Void = { _, _, _ in }) async throws {
        if let remote = driver as? RemoteStorage {
            try await remote.applyStaged(batches, operation: operation?.id, progress: progress)
        } else {
            try await driver.apply(Array(batches.joined()), operation: operation)
            progress(batches.count, batches.count, false)
        }
    }

    /// Whether `store` recorded this user's `operation` as applied (see
    /// ``applyWhole(_:to:operation:progress:)``).
    static func wasApplied(_ operation: SnapshotOperation, on store: Store) async throws -> Bool {
        if case .snapshot(let driver as RemoteStorage) = store.backend { return try await driver.wasApplied(operation.id) }
        return try await store.localStorage(for: "an operation's record").wasApplied(operation)
    }

    /// The write that stores a contact card as it was added.
    static func contactWrite(card bytes: [UInt8], added: Double) throws -> StorageSnapshot.Write {
        let card = try ContactCard.verify(Data(bytes))
        let identity = card.identity
        return .contact(userID: identity.userID, name: identity.name, email: identity.email,
                        signingKey: Array(identity.signingKey.rawRepresentation), boxKey: Array(identity.boxKey.rawRepresentation),
                        card: bytes, cardCreated: card.created, added: added)
    }

    /// What `needs` read from `driver`, in one fetch.
    static func fetch(_ needs: [StorageSnapshot.Need], from driver: any SnapshotDriver, pin: (any ReadPin)? = nil) async throws -> StorageSnapshot.Tables<StoredRow> {
        guard !needs.isEmpty else { return StorageSnapshot.Tables() }
        let snapshot = StorageSnapshot(writable: false)
        if let pin { try await pin.fetch(needs, into: snapshot) } else { try await driver.fetch(needs, into: snapshot) }
        return snapshot.fetched
    }

    /// A snapshot driver over `store`'s backend.
    static func driver(of store: Store, for what: String) throws -> any SnapshotDriver {
        switch store.backend {
        case .sqlite(let sqlite): return SQLiteSnapshotDriver(storage: sqlite, logger: store.logger)
        case .postgres(let storage): return storage
        case .snapshot(let driver):
            guard what.hasSuffix("onto it") else { throw StoreError(.notSupported, "\(what) is not available on \(driver.storeDescription)") }
            return driver
        }
    }
}

import CofferCrypto
import Foundation

extension RemoteStorage {
    /// Applies `batches` on the server as one batch, whole or not at all, through the user's
    /// stage there (see ``RemoteAPI/StageRequest``): each batch is put as a part, then a commit
    /// applies them together. Parts the stage already holds as they are (put by a run that was
    /// cut short) are not sent again. `progress` gets the parts done (sent or found held) and
    /// their number after each part. `operation` (16 bytes) is the batch's operation id (the
    /// digest of its parts when nil): see ``wasApplied(_:)``.
    /// - Throws: ``SnapshotConflict`` when the server refuses the batch as a conflict; the
    ///   server's refusal of the batch (as for one `records/modify` request) otherwise.
    func applyStaged(_ batches: [[StorageSnapshot.Write]], operation: [UInt8]? = nil,
                     progress: (_ done: Int, _ total: Int, _ held: Bool) -> Void) async throws {
        for batch in batches { for case .insertZone(let handle, let uid, _, _) in batch { zones.bind(handle, to: uid) } }
        let names = requestNames()
        let held = try await stageRequest(RemoteAPI.StageRequest()).parts
        var hashes = Data()
        for (part, batch) in batches.enumerated() {
            let body = try RemoteAPI.wire(RemoteAPI.StageRequest(part: part, writes: try batch.map { try WireWrite($0, names) }))
            let hash = Data(BLAKE2b.hash(body, outputByteCount: 16))
            hashes += hash
            let isHeld = part < held.count && held[part] == hash
            if !isHeld { _ = try await sendStage(body) }
            progress(part + 1, batches.count, isHeld)
        }
        let digest = Data(BLAKE2b.hash(hashes, outputByteCount: 16))
        // The server checks and applies every part before it answers: a second a part on top of
        // the usual wait (200,000 records, 504 parts, took over 2 minutes on a busy 2-core
        // machine, where a commit sent again after 60 s was checked a second time beside it).
        let answer = try await stageRequest(RemoteAPI.StageRequest(commit: batches.count, digest: digest, operation: operation.map { Data($0) }),
                                            timeout: timeout + .seconds(batches.count))
        guard answer.applied else {
            throw StoreError(.integrityFailure, "the server at \(serverDescription) answered a commit of staged writes without applying it")
        }
    }

    /// Whether the server applied this user's batch of operation id `operation` (a commit of
    /// ``applyStaged(_:operation:progress:)``, or a `records/modify` batch).
    func wasApplied(_ operation: [UInt8]) async throws -> Bool {
        try await stageRequest(RemoteAPI.StageRequest(operation: Data(operation))).applied
    }

    private func stageRequest(_ request: RemoteAPI.StageRequest, timeout: Duration? = nil) async throws -> RemoteAPI.StageResponse {
        try await sendStage(try RemoteAPI.wire(request), timeout: timeout)
    }

    /// Sends a stage request (again, when its answer was lost: each is applied once) and
    /// decodes the answer.
    private func sendStage(_ body: Data, timeout: Duration? = nil) async throws -> RemoteAPI.StageResponse {
        var attempt = 0
        while true {
            do {
                let data = try await send("POST", RemoteAPI.Path.stage, body: body, timeout: timeout)
                do { return try RemoteAPI.decode(RemoteAPI.StageResponse.self, data, what: "stage answer") } catch let error as StoreError {
                    throw StoreError(.integrityFailure, "the server at \(serverDescription) sent a stage answer that is not valid: \(error.message)")
                }
            } catch let error as StoreError where error.underlying is LostAnswer && attempt < Self.resends {
                attempt += 1
            }
        }
    }
}

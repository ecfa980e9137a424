import CofferCrypto
import CofferStore
import Foundation

/// A user's stage on the server (see ``RemoteAPI/StageRequest``): parts of one batch, put one
/// request at a time, applied together by a commit.
extension StorageHost {
    /// How long a stage's parts are kept, in seconds.
    static let stageLifetime: Double = 7 * 24 * 3600

    /// Answers `POST /v1/records/stage`.
    package func stage(_ body: Data, userID: String) async throws -> Data {
        let request = try RemoteAPI.decode(RemoteAPI.StageRequest.self, body, what: "stage request")
        let response: RemoteAPI.StageResponse
        if let operation = request.operation, operation.count != 16 {
            throw StoreError(.invalidArguments, "a stage's operation id is 16 bytes")
        }
        switch (request.part, request.writes, request.commit, request.digest) {
        case (let part?, let writes?, nil, nil) where request.operation == nil:
            guard (0..<RemoteAPI.maxStageParts).contains(part) else {
                throw StoreError(.invalidArguments, "a stage's parts are numbered from 0 to \(RemoteAPI.maxStageParts - 1)")
            }
            guard !writes.isEmpty else { throw StoreError(.invalidArguments, "a stage's part has no writes") }
            guard writes.count <= RemoteAPI.maxWrites else {
                throw StoreError(.limitExceeded, "a stage's part carries at most \(RemoteAPI.maxWrites) writes")
            }
            try await putPart(part, body: body, userID: userID)
            response = RemoteAPI.StageResponse(parts: try await stagedParts(userID: userID), applied: false)
        case (nil, nil, let count?, let digest?):
            guard digest.count == 16 else { throw StoreError(.invalidArguments, "a stage's digest is 16 bytes") }
            guard (1...RemoteAPI.maxStageParts).contains(count) else {
                throw StoreError(.invalidArguments, "a stage commits from 1 to \(RemoteAPI.maxStageParts) parts")
            }
            try await commitStage(count, digest: Array(digest), operation: Array(request.operation ?? digest), userID: userID)
            response = RemoteAPI.StageResponse(parts: [], applied: true)
        case (nil, nil, nil, nil):
            var applied = false
            if let id = request.operation { applied = try await wasApplied(SnapshotOperation(id: Array(id), userID: userID)) }
            response = RemoteAPI.StageResponse(parts: try await stagedParts(userID: userID), applied: applied)
        default:
            throw StoreError(.invalidArguments, "a stage request puts a part (part and writes), commits (commit and digest), or asks what the stage holds (neither)")
        }
        return try RemoteAPI.answer(response, to: body)
    }

    /// Keeps part `part` of the user's stage (its request body, with its hash), replacing one
    /// of that number; forgets stages past their lifetime.
    private func putPart(_ part: Int, body: Data, userID: String) async throws {
        let now = Date().timeIntervalSince1970
        try await ledger.putStagePart(part, hash: BLAKE2b.hash(body, outputByteCount: 16), body: body, userID: userID,
                                      at: now, forgetBefore: now - Self.stageLifetime, limit: RemoteAPI.maxStageBytes)
    }

    /// The hashes of the user's stage's parts, from part 0 up to the first it lacks.
    private func stagedParts(userID: String) async throws -> [Data] {
        var held = [Data]()
        for (part, hash) in try await ledger.stageHashes(userID: userID) {
            guard part == held.count else { break }
            held.append(hash)
        }
        return held
    }

    /// Applies parts 0 to `count` - 1 of the user's stage as one batch, checked as a batch of
    /// `records/modify` is, under the operation id `operation`, then empties the stage. A commit
    /// whose batch was applied before succeeds without applying it again.
    /// - Throws: `.busy` when the stage does not hold those parts as `digest` says (another run
    ///   of the same user's replaced some); ``Conflict`` when the batch lost a race.
    private func commitStage(_ count: Int, digest: [UInt8], operation id: [UInt8], userID: String) async throws {
        let operation = SnapshotOperation(id: id, userID: userID)
        if try await wasApplied(operation) {
            try await ledger.dropStage(userID: userID)
            return
        }
        let held = try await stagedParts(userID: userID)
        /// The stage no longer holds the parts: another commit of the same batch (the first try
        /// of one whose answer was lost, or a run killed while its commit went on) applied it and
        /// emptied the stage meanwhile; or another run of the user's replaced them.
        func changed() async throws -> StoreError? {
            if try await wasApplied(operation) { return nil }
            return StoreError(.busy, "the stage does not hold the parts this commit names (another run of yours replaced them); run it again")
        }
        guard held.count >= count, BLAKE2b.hash(held[..<count].reduce(into: Data()) { $0 += $1 }, outputByteCount: 16) == digest else {
            if let error = try await changed() { throw error }
            return
        }
        var writes = [WireWrite]()
        for part in 0..<count {
            guard let body = try await ledger.stagedBody(part, userID: userID), BLAKE2b.hash(body, outputByteCount: 16) == Array(held[part]) else {
                if let error = try await changed() { throw error }
                return
            }
            let request = try RemoteAPI.decode(RemoteAPI.StageRequest.self, body, what: "stage's part")
            writes += request.writes ?? []
        }
        _ = try await apply(writes, operation: operation)
        try await ledger.dropStage(userID: userID)
        logger.info("stage committed", metadata: ["user": "\(userID)", "parts": "\(count)", "writes": "\(writes.count)"])
    }
}

import CofferCrypto
import Foundation
import GRDB
import PostgresNIO

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
        return try RemoteAPI.encoder.encode(response)
    }

    /// Keeps part `part` of the user's stage (its request body, with its hash), replacing one
    /// of that number; prunes stages past their lifetime.
    private func putPart(_ part: Int, body: Data, userID: String) async throws {
        let hash = BLAKE2b.hash(body, outputByteCount: 16)
        let now = Date().timeIntervalSince1970
        let horizon = now - Self.stageLifetime
        let limit = RemoteAPI.maxStageBytes
        let overLimit = StoreError(.limitExceeded, "a stage holds at most \(limit >> 20) MiB of parts")
        switch store.backend {
        case .sqlite(let pool):
            try await pool.write { db in
                try db.execute(sql: "DELETE FROM server_stage WHERE staged_at < ?", arguments: [horizon])
                let held = try Int.fetchOne(db, sql: "SELECT coalesce(sum(length(body)), 0) FROM server_stage WHERE user_id = ? AND part <> ?",
                                            arguments: [userID, part]) ?? 0
                guard held + body.count <= limit else { throw overLimit }
                try db.execute(sql: "INSERT OR REPLACE INTO server_stage (user_id, part, hash, body, staged_at) VALUES (?, ?, ?, ?, ?)",
                               arguments: [userID, part, Data(hash), body, now])
            }
        case .postgres(let storage):
            try await storage.connector.transaction { tx in
                try await tx.query("DELETE FROM server_stage WHERE staged_at < \(horizon)")
                let held = try await tx.query("""
                    SELECT coalesce(sum(length(body)), 0)::bigint FROM server_stage WHERE user_id = \(userID) AND part <> \(part)
                    """).first?.decode(Int64.self) ?? 0
                guard Int(held) + body.count <= limit else { throw overLimit }
                try await tx.query("""
                    INSERT INTO server_stage (user_id, part, hash, body, staged_at) VALUES (\(userID), \(part), \(Data(hash)), \(body), \(now))
                    ON CONFLICT (user_id, part) DO UPDATE SET hash = EXCLUDED.hash, body = EXCLUDED.body, staged_at = EXCLUDED.staged_at
                    """)
            }
        case .snapshot:
            preconditionFailure("a server keeps a local store")
        }
    }

    /// The hashes of the user's stage's parts, from part 0 up to the first it lacks.
    private func stagedParts(userID: String) async throws -> [Data] {
        var parts = [(part: Int, hash: Data)]()
        switch store.backend {
        case .sqlite(let pool):
            parts = try Store.readNow(pool) { db in
                try Row.fetchAll(db, sql: "SELECT part, hash FROM server_stage WHERE user_id = ? ORDER BY part", arguments: [userID])
                    .map { (part: $0[0], hash: $0[1]) }
            }
        case .postgres(let storage):
            parts = try await storage.connector.query("SELECT part, hash FROM server_stage WHERE user_id = \(userID) ORDER BY part").map { row in
                let (part, hash) = try row.decode((Int32, Data).self)
                return (Int(part), hash)
            }
        case .snapshot:
            preconditionFailure("a server keeps a local store")
        }
        var held = [Data]()
        for (part, hash) in parts {
            guard part == held.count else { break }
            held.append(hash)
        }
        return held
    }

    /// The request body of part `part` of the user's stage, if it holds one.
    private func stagedBody(_ part: Int, userID: String) async throws -> Data? {
        switch store.backend {
        case .sqlite(let pool):
            return try Store.readNow(pool) { db in
                try Data.fetchOne(db, sql: "SELECT body FROM server_stage WHERE user_id = ? AND part = ?", arguments: [userID, part])
            }
        case .postgres(let storage):
            return try await storage.connector.query("SELECT body FROM server_stage WHERE user_id = \(userID) AND part = \(part)").first?.decode(Data.self)
        case .snapshot:
            preconditionFailure("a server keeps a local store")
        }
    }

    /// Empties the user's stage.
    private func dropStage(userID: String) async throws {
        switch store.backend {
        case .sqlite(let pool):
            try await pool.write { db in try db.execute(sql: "DELETE FROM server_stage WHERE user_id = ?", arguments: [userID]) }
        case .postgres(let storage):
            try await storage.connector.query("DELETE FROM server_stage WHERE user_id = \(userID)")
        case .snapshot:
            preconditionFailure("a server keeps a local store")
        }
    }

    /// Applies parts 0 to `count` - 1 of the user's stage as one batch, checked as a batch of
    /// `records/modify` is, under the operation id `operation`, then empties the stage. A commit
    /// whose batch was applied before succeeds without applying it again.
    /// - Throws: `.busy` when the stage does not hold those parts as `digest` says (another run
    ///   of the same user's replaced some); ``Conflict`` when the batch lost a race.
    private func commitStage(_ count: Int, digest: [UInt8], operation id: [UInt8], userID: String) async throws {
        let operation = SnapshotOperation(id: id, userID: userID)
        if try await wasApplied(operation) {
            try await dropStage(userID: userID)
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
            guard let body = try await stagedBody(part, userID: userID), BLAKE2b.hash(body, outputByteCount: 16) == Array(held[part]) else {
                if let error = try await changed() { throw error }
                return
            }
            let request = try RemoteAPI.decode(RemoteAPI.StageRequest.self, body, what: "stage's part")
            writes += request.writes ?? []
        }
        _ = try await apply(writes, operation: operation)
        try await dropStage(userID: userID)
        logger.info("stage committed", metadata: ["user": "\(userID)", "parts": "\(count)", "writes": "\(writes.count)"])
    }
}

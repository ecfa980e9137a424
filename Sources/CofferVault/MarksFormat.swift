import CofferCrypto

/// Marks file format v1. `Docs/VaultFormat.md` ("Marks file") specifies it byte by byte; this
/// file is the only code that reads or writes it.
///
/// `magic ‖ version ‖ XChaCha20-Poly1305 box (nonce ‖ ciphertext ‖ tag)`, the box sealed under a
/// key derived from the identity's Ed25519 seed, with `magic ‖ version ‖ user id` as associated
/// data. Plaintext: `u32 count`, then per mark, sorted by zone uid: `zone uid (16) ‖ owner id
/// length (u8) ‖ owner id (ASCII) ‖ seq (u64, at most Int64.max) ‖ hash (32)`.
enum MarksFormat {
    static let magic: [UInt8] = Array("COFFERMK".utf8)
    static let version: UInt16 = 1
    static let headerByteCount = 10 // magic, version
    /// `crypto_kdf` context and subkey id of the marks key.
    static let keyContext = "cofmarks"
    static let keyID: UInt64 = 1
    /// The most marks a file holds.
    static let maxMarks = 100_000
    /// Every mark's size: its owner id is a user id, 32 characters.
    static let markByteCount = ZoneMark.zoneUIDByteCount + 1 + 32 + 8 + ZoneMark.hashByteCount // 89
    /// The largest file a reader accepts (`maxMarks` marks); a larger one is refused unread.
    static let maxFileSize = headerByteCount + XChaCha20Poly1305.overhead + 4 + maxMarks * markByteCount

    /// Said by every error about a damaged file.
    static let deletionNote = "deleting it loses this user's rollback protection for every zone"

    /// The marks key: `crypto_kdf` subkey 1, context `cofmarks`, of the identity's Ed25519 seed.
    /// Only the vault holds the seed, it survives passphrase changes and re-keys, and every copy
    /// of the vault derives the same key.
    static func key(signingSeed: SecureBytes) throws -> SymmetricKey {
        KDF.deriveKey(from: try SymmetricKey(bytes: signingSeed), id: keyID, context: keyContext)
    }

    static func associatedData(userID: String) -> [UInt8] {
        magic + BigEndian.bytes(version) + Array(userID.utf8)
    }

    /// The file for `marks` (any order; written sorted by zone uid).
    static func encode(_ marks: some Collection<ZoneMark>, key: SymmetricKey, userID: String) throws -> [UInt8] {
        guard marks.count <= maxMarks else {
            throw VaultError(.invalidArguments, "a marks file holds at most \(maxMarks) zones, not \(marks.count); nothing was saved")
        }
        var plaintext = BigEndian.bytes(UInt32(marks.count))
        plaintext.reserveCapacity(4 + marks.count * markByteCount)
        for mark in marks.sorted(by: { $0.zoneUID.lexicographicallyPrecedes($1.zoneUID) }) {
            plaintext += mark.zoneUID
            plaintext.append(UInt8(mark.ownerID.utf8.count))
            plaintext += Array(mark.ownerID.utf8)
            plaintext += BigEndian.bytes(mark.seq)
            plaintext += mark.hash
        }
        return try seal(plaintext, key: key, userID: userID)
    }

    /// The file around `plaintext`, sealed with a fresh nonce.
    static func seal(_ plaintext: [UInt8], key: SymmetricKey, userID: String) throws -> [UInt8] {
        let ad = associatedData(userID: userID)
        return magic + BigEndian.bytes(version) + (try XChaCha20Poly1305.seal(plaintext, using: key, authenticating: ad)).combined
    }

    /// The marks in `file`, by zone uid. Refuses (`.malformed` before authentication,
    /// `.integrityFailure` from it on) anything this version does not write.
    static func decode(_ file: [UInt8], key: SymmetricKey, userID: String, path: String) throws -> [[UInt8]: ZoneMark] {
        func damaged(_ code: VaultError.Code, _ detail: String) -> VaultError {
            VaultError(code, "the marks file \(path) \(detail); \(deletionNote)")
        }
        guard file.count <= maxFileSize else { throw damaged(.malformed, "is too large (\(file.count) bytes)") }
        guard file.count >= magic.count, Array(file[0..<magic.count]) == magic else {
            throw damaged(.malformed, "is not a Coffer marks file (bad magic)")
        }
        guard file.count >= headerByteCount + XChaCha20Poly1305.overhead else { throw damaged(.malformed, "is truncated") }
        let v = UInt16(file[8]) << 8 | UInt16(file[9])
        guard v == version else {
            throw damaged(.malformed, "has format version \(v), which this build does not read (it reads version \(version))")
        }
        let plaintext: [UInt8]
        do {
            let box = try XChaCha20Poly1305.SealedBox(combined: Array(file[headerByteCount...]))
            plaintext = try XChaCha20Poly1305.open(box, using: key, authenticating: associatedData(userID: userID))
        } catch {
            throw damaged(.integrityFailure, "fails authentication: it was changed or damaged, or belongs to another vault")
        }
        do {
            return try parse(plaintext)
        } catch let error as VaultError {
            throw damaged(.integrityFailure, "is damaged (\(error.message))")
        }
    }

    /// The authenticated plaintext's marks; every error names what is wrong.
    private static func parse(_ plaintext: [UInt8]) throws -> [[UInt8]: ZoneMark] {
        try plaintext.withUnsafeBytes { raw in
            var r = ByteReader(raw, what: "a mark", errorCode: .integrityFailure)
            let count = Int(try r.u32())
            guard count <= maxMarks else { throw VaultError(.integrityFailure, "it lists \(count) zones, over \(maxMarks)") }
            guard r.remaining == count * markByteCount else {
                throw VaultError(.integrityFailure, "it lists \(count) zones in \(r.remaining) bytes (each takes \(markByteCount))")
            }
            var marks = [[UInt8]: ZoneMark]()
            marks.reserveCapacity(count)
            var previous: [UInt8]?
            for _ in 0..<count {
                let uid = try r.bytes(ZoneMark.zoneUIDByteCount)
                if let previous {
                    guard previous != uid else { throw VaultError(.integrityFailure, "a zone appears twice") }
                    guard previous.lexicographicallyPrecedes(uid) else { throw VaultError(.integrityFailure, "its zones are not in order") }
                }
                previous = uid
                let ownerLength = Int(try r.u8())
                guard let owner = String(validating: try r.take(ownerLength), as: UTF8.self),
                      UserIdentity.isWellFormed(userID: owner) else {
                    throw VaultError(.integrityFailure, "a zone's owner is not a user id")
                }
                let seq = try r.i64()
                guard seq >= 0 else { throw VaultError(.integrityFailure, "a zone's position is over the largest a log has") }
                let hash = try r.bytes(ZoneMark.hashByteCount)
                marks[uid] = try ZoneMark(zoneUID: uid, ownerID: owner, seq: seq, hash: hash)
            }
            guard r.remaining == 0 else { throw VaultError(.integrityFailure, "it has trailing bytes") }
            return marks
        }
    }
}

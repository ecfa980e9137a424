import CofferCrypto
import CofferVault
import Foundation

/// The backup file, byte by byte (`Docs/Backup.md`, "File format"): a header, the payload
/// sealed in chunks under a file key that is sealed to the user's X25519 key, and the user's
/// Ed25519 signature over everything before it. Every integer is big-endian.
enum BackupFormat {
    static let magic = Array("COFFERBK".utf8)
    static let version: UInt8 = 1
    /// Magic, version, flags, signing key, creation time, store id, chunk size, payload length, sealed file key.
    static let headerByteCount = 8 + 1 + 1 + 32 + 8 + 16 + 4 + 8 + sealedKeyByteCount
    static let sealedKeyByteCount = SymmetricKey.byteCount + SealedBoxWrap.overhead
    static let signatureByteCount = Ed25519.signatureByteCount
    /// The plaintext bytes of each chunk but the last.
    static let chunkSize = 1 << 20
    static let chunkSizes = (1 << 12)...(1 << 24)
    /// The largest payload a file may declare (1 TiB): a bound on what a header can ask for.
    static let maxPayload: UInt64 = 1 << 40
    /// What the signature covers: this text, then the BLAKE2b-512 hash of the file before it.
    static let signatureContext = Array("coffer-backup-v1".utf8)

    // MARK: - Sealing

    /// The file: `backup` encoded, sealed and signed for `vault` (which must be its user's).
    static func seal(_ backup: Backup, by vault: Vault) throws -> [UInt8] {
        let payload = encode(backup)
        let fileKey = SymmetricKey()
        let sealedKey = SealedBoxWrap.seal(fileKey.bytes, to: vault.identity.boxKey)
        precondition(sealedKey.count == sealedKeyByteCount, "a sealed file key's size")
        var header = ByteWriter()
        header.append(magic)
        header.u8(version)
        header.u8(0)
        header.append(vault.identity.signingKey.rawRepresentation)
        header.i64(Int64((backup.created.timeIntervalSince1970 * 1000).rounded()))
        header.append(backup.storeID)
        header.u32(chunkSize)
        header.u64(UInt64(payload.count))
        header.append(sealedKey)
        var file = header.bytes
        file.reserveCapacity(headerByteCount + payload.count + (payload.count / chunkSize + 1) * XChaCha20Poly1305.overhead + signatureByteCount)
        var index: UInt64 = 0
        var start = 0
        repeat {
            let end = min(start + chunkSize, payload.count)
            let box = try XChaCha20Poly1305.seal(Array(payload[start..<end]), using: fileKey,
                                                 authenticating: header.bytes + BigEndian.bytes(index))
            file += box.combined
            index += 1
            start = end
        } while start < payload.count
        file += vault.signingKey.signature(for: signedMessage(file[...]))
        return file
    }

    static func signedMessage(_ signed: ArraySlice<UInt8>) -> [UInt8] {
        let hasher = BLAKE2b.Hasher(outputByteCount: 64)
        signed.withUnsafeBytes { hasher.update(UnsafeRawBufferPointer($0)) }
        return signatureContext + hasher.finalize()
    }

    // MARK: - Opening

    static func damaged(_ detail: String) -> StoreError {
        StoreError(.integrityFailure, "the backup file is damaged or was changed (\(detail)); nothing was restored")
    }

    /// Opens a backup file with the vault of the user who made it.
    static func open(_ file: [UInt8], vault: Vault) throws -> Backup {
        guard file.count >= magic.count, Array(file[0..<magic.count]) == magic else {
            throw StoreError(.invalidArguments, "this is not a Coffer backup file (it does not start with COFFERBK)")
        }
        guard file.count >= headerByteCount + signatureByteCount else { throw damaged("it ends early") }
        var r = BackupReader(file[0..<headerByteCount])
        _ = try r.bytes(magic.count)
        let fileVersion = try r.u8()
        guard fileVersion == version else {
            throw StoreError(.invalidArguments, "this backup file is of format version \(fileVersion); this coffer reads version \(version)")
        }
        let flags = try r.u8()
        guard flags == 0 else { throw damaged("unknown flags \(flags)") }
        let signingKey = try r.bytes(32)
        let createdMillis = try r.i64()
        let storeID = try r.bytes(16)
        let chunk = Int(try r.u32())
        let length = try r.u64()
        let sealedKey = try r.bytes(sealedKeyByteCount)
        guard chunkSizes.contains(chunk) else { throw damaged("a chunk size of \(chunk) bytes") }
        guard length >= 1, length <= maxPayload else { throw damaged("a payload of \(length) bytes") }
        let chunks = (Int(length) + chunk - 1) / chunk
        let expected = headerByteCount + Int(length) + chunks * XChaCha20Poly1305.overhead + signatureByteCount
        guard file.count == expected else {
            throw damaged(file.count < expected ? "it ends \(expected - file.count) bytes early" : "\(file.count - expected) bytes follow its end")
        }
        // The signature, by the key the header names; then whether that key is this vault's.
        let key: Ed25519.PublicKey
        do { key = try Ed25519.PublicKey(rawRepresentation: signingKey) } catch { throw damaged("its signing key is malformed") }
        let signatureStart = file.count - signatureByteCount
        guard key.isValidSignature(Array(file[signatureStart...]), for: signedMessage(file[..<signatureStart])) else {
            throw damaged("its signature does not verify")
        }
        let maker = UserIdentity.userID(for: key)
        guard signingKey == vault.identity.signingKey.rawRepresentation else {
            throw StoreError(.permissionFailure, "this backup was made by user \(maker) and is sealed to their vault; "
                             + "this vault is \(vault.identity.userID)'s: restore it with the vault that made it (\(vault.url.path) is not that vault)")
        }
        let fileKey: SymmetricKey
        do { fileKey = try SymmetricKey(bytes: try SealedBoxWrap.open(sealedKey, with: vault.boxKey)) } catch {
            throw damaged("its file key does not open with this vault")
        }
        let header = Array(file[0..<headerByteCount])
        var payload = [UInt8]()
        payload.reserveCapacity(Int(length))
        var offset = headerByteCount
        for index in 0..<chunks {
            let plain = index == chunks - 1 ? Int(length) - index * chunk : chunk
            let end = offset + plain + XChaCha20Poly1305.overhead
            do {
                let box = try XChaCha20Poly1305.SealedBox(combined: Array(file[offset..<end]))
                payload += try XChaCha20Poly1305.open(box, using: fileKey, authenticating: header + BigEndian.bytes(UInt64(index)))
            } catch {
                throw damaged("chunk \(index) does not open")
            }
            offset = end
        }
        return try decode(payload, userID: maker, created: Date(timeIntervalSince1970: Double(createdMillis) / 1000), storeID: storeID)
    }

    // MARK: - Payload

    static func encode(_ backup: Backup) -> [UInt8] {
        var w = ByteWriter()
        func blob(_ b: [UInt8]) {
            w.u32(b.count)
            w.append(b)
        }
        func optionalBlob(_ b: [UInt8]?) {
            if let b { w.u8(1); blob(b) } else { w.u8(0) }
        }
        func double(_ d: Double) { w.u64(d.bitPattern) }
        w.u32(backup.cards.count)
        for card in backup.cards {
            blob(card.card)
            double(card.added)
        }
        w.u32(backup.zones.count)
        for zone in backup.zones {
            w.long(zone.id.name)
            w.long(zone.id.ownerID)
            w.append(zone.uid)
            double(zone.created)
            w.u32(zone.log.count)
            for entry in zone.log {
                w.i64(entry.seq)
                blob(entry.body)
                blob(entry.signature)
                optionalBlob(entry.entries)
                optionalBlob(entry.names)
            }
            w.u32(zone.wrappedKeys.count)
            for key in zone.wrappedKeys {
                w.i64(key.epoch)
                w.long(key.memberID)
                blob(key.wrapped)
            }
            w.u32(zone.chainedKeys.count)
            for key in zone.chainedKeys {
                w.i64(key.epoch)
                blob(key.sealed)
            }
            if let link = zone.link {
                w.u8(1)
                w.i64(link.epoch)
                blob(link.sealedKey)
                blob(link.sealedSecret)
            } else {
                w.u8(0)
            }
            w.u32(zone.members.count)
            for member in zone.members { w.long(member) }
            optionalBlob(zone.shareUID)
            w.u32(zone.schema.count)
            for field in zone.schema {
                w.long(field.recordType)
                w.long(field.field)
                w.long(field.valueType)
                w.u8(field.encrypted ? 1 : 0)
            }
            w.u32(zone.tombstones.count)
            for tombstone in zone.tombstones {
                w.long(tombstone.name)
                w.i64(tombstone.seq)
            }
            w.u32(zone.rows.count)
            for row in zone.rows {
                let s = row.stamp
                w.long(s.name)
                w.long(s.type)
                if let parent = s.parent { w.u8(1); w.long(parent) } else { w.u8(0) }
                w.i64(s.seq)
                w.i64(s.epoch)
                w.i64(s.membershipSeq)
                w.long(s.creatorID)
                w.long(s.modifierID)
                double(s.created)
                double(s.modified)
                blob(row.plain)
                optionalBlob(row.sealed)
            }
        }
        return w.bytes
    }

    static func decode(_ payload: [UInt8], userID: String, created: Date, storeID: [UInt8]) throws -> Backup {
        var r = BackupReader(payload[...])
        func readUserID(_ what: String) throws -> String {
            let id = try r.text()
            guard UserIDs.isValid(id) else { throw damaged("\(what) is not a user id") }
            return id
        }
        var cards = [Backup.Card]()
        for _ in 0..<(try r.count()) {
            cards.append(Backup.Card(card: try r.blob(), added: try r.double()))
        }
        var zones = [ZoneCopy]()
        var seen = Set<ZoneID>(), uids = Set<[UInt8]>()
        for _ in 0..<(try r.count()) {
            let name = try r.text()
            do { try Names.validateZone(name) } catch { throw damaged("a zone name is not valid") }
            let id = ZoneID(name: name, ownerID: try readUserID("a zone's owner"))
            let uid = try r.bytes(16)
            guard seen.insert(id).inserted, uids.insert(uid).inserted else { throw damaged("zone '\(name)' appears twice") }
            let created = try r.double()
            var log = [ZoneCopy.Entry]()
            for _ in 0..<(try r.count()) {
                let seq = try r.i64()
                guard seq == Int64(log.count) + 1 else { throw damaged("zone '\(name)': log entry \(seq) out of order") }
                log.append(ZoneCopy.Entry(seq: seq, body: try r.blob(), signature: try r.blob(), entries: try r.optionalBlob(), names: try r.optionalBlob()))
            }
            guard !log.isEmpty else { throw damaged("zone '\(name)' has no log") }
            var wrapped = [ZoneCopy.WrappedKey]()
            for _ in 0..<(try r.count()) {
                wrapped.append(ZoneCopy.WrappedKey(epoch: try r.i64(), memberID: try readUserID("a key's member"), wrapped: try r.blob()))
            }
            var chained = [ZoneCopy.ChainedKey]()
            for _ in 0..<(try r.count()) { chained.append(ZoneCopy.ChainedKey(epoch: try r.i64(), sealed: try r.blob())) }
            var link: ZoneCopy.Link?
            if try r.flag() { link = ZoneCopy.Link(epoch: try r.i64(), sealedKey: try r.blob(), sealedSecret: try r.blob()) }
            var members = [String]()
            for _ in 0..<(try r.count()) { members.append(try readUserID("a member")) }
            let shareUID = try r.optionalBlob()
            var schema = [ZoneCopy.SchemaField]()
            for _ in 0..<(try r.count()) {
                let field = ZoneCopy.SchemaField(recordType: try r.text(), field: try r.text(), valueType: try r.text(), encrypted: try r.flag())
                guard FieldType(name: field.valueType) != nil else { throw damaged("zone '\(name)': a field of unknown type") }
                schema.append(field)
            }
            var tombstones = [ZoneCopy.Tombstone]()
            for _ in 0..<(try r.count()) { tombstones.append(ZoneCopy.Tombstone(name: try r.text(), seq: try r.i64())) }
            var rows = [ZoneCopy.Row]()
            for _ in 0..<(try r.count()) {
                let rowName = try r.text(), type = try r.text()
                let parent: String? = try r.flag() ? try r.text() : nil
                let stamp = VersionStamp(name: rowName, type: type, parent: parent, seq: try r.i64(), epoch: try r.i64(), membershipSeq: try r.i64(),
                                         creatorID: try readUserID("a record's creator"), modifierID: try readUserID("a record's modifier"),
                                         created: try r.double(), modified: try r.double())
                rows.append(ZoneCopy.Row(stamp: stamp, plain: try r.blob(), sealed: try r.optionalBlob()))
            }
            zones.append(ZoneCopy(id: id, uid: uid, created: created, log: log, wrappedKeys: wrapped, chainedKeys: chained, link: link,
                                  members: members, shareUID: shareUID, schema: schema, tombstones: tombstones, rows: rows))
        }
        guard r.remaining == 0 else { throw damaged("\(r.remaining) bytes follow its last zone") }
        return Backup(userID: userID, created: created, storeID: storeID, cards: cards, zones: zones)
    }
}

/// Reads a backup's fields, each checked against what is left: a malformed file is an error,
/// never a trap or an allocation it asks for.
struct BackupReader {
    private let bytes: ArraySlice<UInt8>
    private var offset: Int

    init(_ bytes: ArraySlice<UInt8>) {
        self.bytes = bytes
        offset = bytes.startIndex
    }

    var remaining: Int { bytes.endIndex - offset }

    mutating func bytes(_ n: Int) throws -> [UInt8] {
        guard n >= 0, n <= remaining else { throw BackupFormat.damaged("a field runs past its end") }
        defer { offset += n }
        return Array(bytes[offset..<offset + n])
    }

    mutating func u8() throws -> UInt8 { try bytes(1)[0] }
    mutating func u32() throws -> UInt32 { try bytes(4).reduce(0) { $0 << 8 | UInt32($1) } }
    mutating func u64() throws -> UInt64 { try bytes(8).reduce(0) { $0 << 8 | UInt64($1) } }
    mutating func i64() throws -> Int64 { Int64(bitPattern: try u64()) }
    mutating func double() throws -> Double { Double(bitPattern: try u64()) }

    /// A count of items, each at least one byte: never more than the bytes left.
    mutating func count() throws -> Int {
        let n = Int(try u32())
        guard n <= remaining else { throw BackupFormat.damaged("a count of \(n) items with \(remaining) bytes left") }
        return n
    }

    mutating func flag() throws -> Bool {
        switch try u8() {
        case 0: return false
        case 1: return true
        case let other: throw BackupFormat.damaged("a flag of \(other)")
        }
    }

    mutating func blob() throws -> [UInt8] { try bytes(Int(try u32())) }

    mutating func optionalBlob() throws -> [UInt8]? { try flag() ? try blob() : nil }

    mutating func text() throws -> String {
        guard let text = String(validating: try blob(), as: UTF8.self) else { throw BackupFormat.damaged("a text is not UTF-8") }
        return text
    }
}

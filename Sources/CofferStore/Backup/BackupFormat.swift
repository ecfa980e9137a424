import CofferCrypto
import CofferVault
import Foundation

/// Where a backup file's bytes go, in order, as ``Session/writeBackup(to:progress:)`` makes them
/// (a file being written, say): a backup of any size passes through one chunk's worth of memory.
public protocol BackupSink: AnyObject {
    func write(_ bytes: [UInt8]) throws
}

/// The backup file, byte by byte (`Docs/Backup.md`, "File format"): a header, the payload
/// sealed in chunks under a file key that is sealed to the user's X25519 key, and the user's
/// Ed25519 signature over everything before it. Every integer is big-endian.
///
/// Version 2 (written now) is made as it is read from the store: its header has no payload
/// length, each chunk's associated data says whether it is the last, and the rows of a zone end
/// with a marker rather than follow their count. Version 1 files still open.
enum BackupFormat {
    static let magic = Array("COFFERBK".utf8)
    static let version: UInt8 = 2
    static let versions: ClosedRange<UInt8> = 1...2
    /// Magic, version, flags, signing key, creation time, store id, chunk size, (version 1: payload
    /// length,) sealed file key.
    static func headerByteCount(_ version: UInt8) -> Int { 8 + 1 + 1 + 32 + 8 + 16 + 4 + (version == 1 ? 8 : 0) + sealedKeyByteCount }
    static let sealedKeyByteCount = SymmetricKey.byteCount + SealedBoxWrap.overhead
    static let signatureByteCount = Ed25519.signatureByteCount
    /// The plaintext bytes of each chunk but the last.
    static let chunkSize = 1 << 20
    static let chunkSizes = (1 << 12)...(1 << 24)
    /// The largest payload a version 1 file may declare (1 TiB): a bound on what a header can ask for.
    static let maxPayload: UInt64 = 1 << 40
    /// What the signature covers: this text, then the BLAKE2b-512 hash of the file before it.
    static let signatureContext = Array("coffer-backup-v1".utf8)

    /// Each chunk's associated data: the header, the chunk's index, and (version 2) whether it is the last.
    static func chunkData(header: [UInt8], version: UInt8, index: UInt64, last: Bool) -> [UInt8] {
        header + BigEndian.bytes(index) + (version == 1 ? [] : [last ? 1 : 0])
    }

    // MARK: - Sealing

    /// The file of a backup held in memory, sealed and signed for `vault` (its user's).
    static func seal(_ backup: Backup, by vault: Vault) throws -> [UInt8] {
        let sink = MemorySink()
        let file = try FileWriter(vault: vault, created: backup.created, storeID: backup.storeID, to: sink)
        try encode(backup, to: file.append)
        try file.finish()
        return sink.bytes
    }

    /// The payload of `backup` (current version), handed to `output` in pieces.
    static func encode(_ backup: Backup, to output: @escaping ([UInt8]) throws -> Void) throws {
        var payload = PayloadWriter(output)
        try payload.cards(backup.cards)
        try payload.zoneCount(backup.zones.count)
        for zone in backup.zones {
            try payload.zoneHead(zone)
            for row in zone.rows { try payload.row(row) }
            try payload.endRows()
        }
        try payload.flush()
    }

    /// Bytes kept in memory.
    final class MemorySink: BackupSink {
        var bytes = [UInt8]()
        func write(_ bytes: [UInt8]) throws { self.bytes += bytes }
    }

    /// Writes a file of the current version as its payload comes: the header first, each chunk
    /// once it is full, then the last chunk and the signature (``finish()``). It holds one chunk.
    final class FileWriter {
        private let sink: any BackupSink
        private let signingKey: Ed25519.PrivateKey
        private let fileKey = SymmetricKey()
        private let header: [UInt8]
        private let hasher = BLAKE2b.Hasher(outputByteCount: 64)
        private var pending = [UInt8]()
        private var index: UInt64 = 0
        /// Bytes written so far.
        private(set) var written = 0

        init(vault: Vault, created: Date, storeID: [UInt8], to sink: any BackupSink) throws {
            precondition(storeID.count == 16, "a store id is 16 bytes")
            self.sink = sink
            signingKey = vault.signingKey
            let sealedKey = SealedBoxWrap.seal(fileKey.bytes, to: vault.identity.boxKey)
            precondition(sealedKey.count == sealedKeyByteCount, "a sealed file key's size")
            var header = ByteWriter()
            header.append(magic)
            header.u8(version)
            header.u8(0)
            header.append(vault.identity.signingKey.rawRepresentation)
            header.i64(Int64((created.timeIntervalSince1970 * 1000).rounded()))
            header.append(storeID)
            header.u32(chunkSize)
            header.append(sealedKey)
            self.header = header.bytes
            try emit(header.bytes)
        }

        private func emit(_ bytes: [UInt8]) throws {
            hasher.update(bytes)
            try sink.write(bytes)
            written += bytes.count
        }

        /// Payload bytes: every full chunk but the last is sealed and written now.
        func append(_ bytes: [UInt8]) throws {
            pending += bytes
            // A chunk is sealed once more follows it: the last one is sealed by `finish()`.
            while pending.count > chunkSize {
                try seal(Array(pending[..<chunkSize]), last: false)
                pending.removeFirst(chunkSize)
            }
        }

        private func seal(_ plain: [UInt8], last: Bool) throws {
            let box = try XChaCha20Poly1305.seal(plain, using: fileKey, authenticating: chunkData(header: header, version: version, index: index, last: last))
            index += 1
            try emit(box.combined)
        }

        /// The last chunk (the payload is never empty), then the signature.
        func finish() throws {
            precondition(!pending.isEmpty, "a backup's payload is never empty")
            try seal(pending, last: true)
            pending = []
            let signature = signingKey.signature(for: signatureContext + hasher.finalize())
            try sink.write(signature)
            written += signature.count
        }
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

    /// Opens a backup file (of either version) with the vault of the user who made it.
    static func open(_ file: [UInt8], vault: Vault) throws -> Backup {
        guard file.count >= magic.count, Array(file[0..<magic.count]) == magic else {
            throw StoreError(.invalidArguments, "this is not a Coffer backup file (it does not start with COFFERBK)")
        }
        guard file.count > magic.count else { throw damaged("it ends early") }
        let fileVersion = file[magic.count]
        guard versions.contains(fileVersion) else {
            throw StoreError(.invalidArguments, "this backup file is of format version \(fileVersion); this coffer reads versions \(versions.lowerBound) to \(versions.upperBound)")
        }
        let headerBytes = headerByteCount(fileVersion)
        guard file.count >= headerBytes + signatureByteCount else { throw damaged("it ends early") }
        var r = BackupReader(file[0..<headerBytes])
        _ = try r.bytes(magic.count + 1)
        let flags = try r.u8()
        guard flags == 0 else { throw damaged("unknown flags \(flags)") }
        let signingKey = try r.bytes(32)
        let createdMillis = try r.i64()
        let storeID = try r.bytes(16)
        let chunk = Int(try r.u32())
        let declared: UInt64? = fileVersion == 1 ? try r.u64() : nil
        let sealedKey = try r.bytes(sealedKeyByteCount)
        guard chunkSizes.contains(chunk) else { throw damaged("a chunk size of \(chunk) bytes") }
        // Each chunk's plaintext size, from the declared length (version 1) or the file's (version 2).
        let sealedBytes = file.count - headerBytes - signatureByteCount
        var sizes = [Int]()
        if let length = declared {
            guard length >= 1, length <= maxPayload else { throw damaged("a payload of \(length) bytes") }
            let chunks = (Int(length) + chunk - 1) / chunk
            let expected = headerBytes + Int(length) + chunks * XChaCha20Poly1305.overhead + signatureByteCount
            guard file.count == expected else {
                throw damaged(file.count < expected ? "it ends \(expected - file.count) bytes early" : "\(file.count - expected) bytes follow its end")
            }
            sizes = (0..<chunks).map { $0 == chunks - 1 ? Int(length) - $0 * chunk : chunk }
        } else {
            let whole = chunk + XChaCha20Poly1305.overhead
            let chunks = max(1, (sealedBytes + whole - 1) / whole)
            let last = sealedBytes - (chunks - 1) * whole - XChaCha20Poly1305.overhead
            guard last >= 1 else { throw damaged("its last chunk is cut short") }
            sizes = Array(repeating: chunk, count: chunks - 1) + [last]
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
        let header = Array(file[0..<headerBytes])
        var payload = [UInt8]()
        payload.reserveCapacity(sizes.reduce(0, +))
        var offset = headerBytes
        for (index, plain) in sizes.enumerated() {
            let end = offset + plain + XChaCha20Poly1305.overhead
            do {
                let box = try XChaCha20Poly1305.SealedBox(combined: Array(file[offset..<end]))
                let data = chunkData(header: header, version: fileVersion, index: UInt64(index), last: index == sizes.count - 1)
                payload += try XChaCha20Poly1305.open(box, using: fileKey, authenticating: data)
            } catch {
                throw damaged("chunk \(index) does not open")
            }
            offset = end
        }
        return try decode(payload, version: fileVersion, userID: maker, created: Date(timeIntervalSince1970: Double(createdMillis) / 1000), storeID: storeID)
    }

    // MARK: - Payload

    /// Encodes a payload of the current version part by part, handing the bytes on as they come
    /// (in pieces of about a chunk) to `output` (a ``FileWriter``'s `append`).
    struct PayloadWriter {
        private let output: ([UInt8]) throws -> Void
        private var w = ByteWriter()

        init(_ output: @escaping ([UInt8]) throws -> Void) { self.output = output }

        private mutating func flush(atLeast: Int) throws {
            guard w.bytes.count >= atLeast else { return }
            try output(w.bytes)
            w = ByteWriter()
        }

        private mutating func blob(_ b: [UInt8]) {
            w.u32(b.count)
            w.append(b)
        }

        private mutating func optionalBlob(_ b: [UInt8]?) {
            if let b { w.u8(1); blob(b) } else { w.u8(0) }
        }

        private mutating func double(_ d: Double) { w.u64(d.bitPattern) }

        mutating func cards(_ cards: [Backup.Card]) throws {
            w.u32(cards.count)
            for card in cards {
                blob(card.card)
                double(card.added)
                try flush(atLeast: chunkSize)
            }
        }

        mutating func zoneCount(_ n: Int) throws { w.u32(n) }

        /// Everything of `zone` but its rows, which follow (``row(_:)``, then ``endRows()``).
        mutating func zoneHead(_ zone: ZoneCopy) throws {
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
                try flush(atLeast: chunkSize)
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
                try flush(atLeast: chunkSize)
            }
        }

        /// One row of the zone whose head came last: a marker, then the row.
        mutating func row(_ row: ZoneCopy.Row) throws {
            w.u8(1)
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
            try flush(atLeast: chunkSize)
        }

        /// The end of a zone's rows.
        mutating func endRows() throws { w.u8(0) }

        /// Hands on what is left.
        mutating func flush() throws { try flush(atLeast: 1) }
    }

    static func decode(_ payload: [UInt8], version: UInt8, userID: String, created: Date, storeID: [UInt8]) throws -> Backup {
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
            // Version 1 counts a zone's rows; version 2 puts a 1 before each and a 0 after the last.
            var count = version == 1 ? try r.count() : 0
            while version == 1 ? count > 0 : try r.flag() {
                count -= 1
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

import CofferCrypto

/// What a record version's row stores besides its fields' bytes, and what its version hash
/// covers with them.
package struct VersionStamp: Sendable, Equatable {
    package var name: String
    package var type: String
    package var parent: String?
    /// The log entry that wrote this version (its change tag).
    package var seq: Int64
    package var epoch: Int64
    /// The owner's log entry in force when it was written.
    package var membershipSeq: Int64
    package var creatorID: String
    package var modifierID: String
    package var created: Double
    package var modified: Double
}

/// A record version encoded, sealed and hashed: what every write path other than a save stores
/// (a save builds its rows in place, through the same sealer).
package struct SealedVersion: Sendable {
    package let stamp: VersionStamp
    /// The plain values' JSON (UTF-8).
    package let plain: [UInt8]
    /// The plain values' type codes, in key order.
    package let plainTypes: [UInt8]
    package let sealed: [UInt8]?
    /// The version hash its log entry signs.
    package let digest: Digest32

    /// The version hash of this version with an earlier version's creator and creation time
    /// (what an update keeps).
    package func digest(zoneUID: [UInt8], creatorID: String, created: Double) -> Digest32 {
        var kept = stamp
        kept.creatorID = creatorID
        kept.created = created
        return plain.withUnsafeBytes { p in
            plainTypes.withUnsafeBytes { t in
                RecordReader.withOptionalBytes(sealed) { s in RecordSealer.versionHash(zoneUID: zoneUID, kept, plain: p, plainTypes: t, sealed: s) }
            }
        }
    }
}

/// Where a record version is sealed and hashed: the associated data of its sealed values, the
/// seal, and the version hash that its log entry signs. Every write path (save, re-key, move,
/// upgrade) and every read use these, so each is defined once.
package enum RecordSealer {
    /// Seals a version's encrypted values (if any) under `key` and hashes the version.
    /// `zone` is the zone it is written to.
    /// `presealed`: this record as sealed and hashed ahead of its transaction: taken whole when
    /// its stamp is `stamp`, its sealed bytes hashed again when only its key epoch is the same,
    /// else not used.
    static func seal(_ stamp: VersionStamp, plain: [UInt8], plainTypes: [UInt8], sealedPlaintext: [UInt8]?, key: SymmetricKey,
                     zone: ZoneRow, nonces: NonceReserve? = nil, presealed: PreparedRecord.Presealed? = nil) -> SealedVersion {
        let sealed: [UInt8]?
        if let presealed, presealed.zoneUID == zone.uid, presealed.version.stamp.epoch == stamp.epoch,
           presealed.version.stamp.name == stamp.name, presealed.version.stamp.type == stamp.type,
           (presealed.version.sealed == nil) == (sealedPlaintext == nil) {
            if presealed.version.stamp == stamp { return presealed.version }
            sealed = presealed.version.sealed
        } else {
            sealed = sealedPlaintext.map { seal($0, key: key, zone: zone, name: stamp.name, type: stamp.type, epoch: stamp.epoch, nonces: nonces) }
        }
        let digest = plain.withUnsafeBytes { p in
            plainTypes.withUnsafeBytes { t in
                RecordReader.withOptionalBytes(sealed) { s in versionHash(zoneUID: zone.uid, stamp, plain: p, plainTypes: t, sealed: s) }
            }
        }
        return SealedVersion(stamp: stamp, plain: plain, plainTypes: plainTypes, sealed: sealed, digest: digest)
    }

    /// A record's encrypted values (encoded) sealed as an envelope under `key`, bound by
    /// ``withAssociatedData(zone:name:type:epoch:_:)`` to the record, its zone and the epoch.
    package static func seal(_ plaintext: [UInt8], key: SymmetricKey, zone: ZoneRow, name: String, type: String, epoch: Int64,
                     nonces: NonceReserve? = nil) -> [UInt8] {
        plaintext.withUnsafeBytes { p in
            withAssociatedData(zone: zone, name: name, type: type, epoch: epoch) { ad in
                Envelope.sealedBytes(p, using: key, keyID: UInt32(truncatingIfNeeded: epoch), authenticating: ad, nonces: nonces)
            }
        }
    }

    /// Associated data of a record's sealed values: zone uid, owner, record name, record type and
    /// epoch, each length-prefixed. Moving a ciphertext to another record, zone or epoch makes it
    /// fail to open. The zone uid is bound to its owner by the zone's first log entry, and no
    /// store id is bound, so a zone moves between stores whole.
    package static func associatedData(zone: ZoneRow, name: String, type: String, epoch: Int64) -> [UInt8] {
        withAssociatedData(zone: zone, name: name, type: type, epoch: epoch) { Array($0) }
    }

    /// ``associatedData(zone:name:type:epoch:)`` built on the stack: `"coffer.record.v2"`, then
    /// the zone uid, owner, name and type (each after a two-byte length), then the epoch.
    package static func withAssociatedData<R>(zone: ZoneRow, name: String, type: String, epoch: Int64,
                                      _ body: (UnsafeRawBufferPointer) throws -> R) rethrows -> R {
        let domain: StaticString = "coffer.record.v2"
        let owner = zone.id.ownerID
        let size = domain.utf8CodeUnitCount + 2 + zone.uid.count + 2 + owner.utf8.count + 2 + name.utf8.count + 2 + type.utf8.count + 8
        return try withUnsafeTemporaryAllocation(byteCount: size, alignment: 8) { buffer in
            var w = HeaderWriter(base: buffer.baseAddress!)
            func framed(_ bytes: UnsafeRawBufferPointer) {
                w.u8(UInt8(bytes.count >> 8 & 0xff)); w.u8(UInt8(bytes.count & 0xff)); w.bytes(bytes)
            }
            func framed(_ s: String) { var s = s; s.withUTF8 { framed(UnsafeRawBufferPointer($0)) } }
            w.bytes(UnsafeRawBufferPointer(start: domain.utf8Start, count: domain.utf8CodeUnitCount))
            zone.uid.withUnsafeBytes { framed($0) }
            framed(owner)
            framed(name)
            framed(type)
            w.u64(UInt64(bitPattern: epoch))
            precondition(w.offset == size, "associated data length")
            return try body(UnsafeRawBufferPointer(buffer))
        }
    }

    /// ``versionHash(zoneUID:name:type:parent:seq:epoch:membershipSeq:creatorID:modifierID:created:modified:plain:plainTypes:sealed:)``
    /// of a stamped version.
    package static func versionHash(zoneUID: [UInt8], _ stamp: VersionStamp, plain: UnsafeRawBufferPointer, plainTypes: UnsafeRawBufferPointer,
                            sealed: UnsafeRawBufferPointer?) -> Digest32 {
        versionHash(zoneUID: zoneUID, name: stamp.name, type: stamp.type, parent: stamp.parent, seq: stamp.seq, epoch: stamp.epoch,
                    membershipSeq: stamp.membershipSeq, creatorID: stamp.creatorID, modifierID: stamp.modifierID, created: stamp.created,
                    modified: stamp.modified, plain: plain, plainTypes: plainTypes, sealed: sealed)
    }

    /// The hash of one record version: everything a reader sees of it, plain and sealed.
    /// BLAKE2b-256 over a header of fixed-order, length-prefixed fields (domain
    /// `"coffer.record-version.v3"`, zone uid, name, type, parent, change tag, epoch, the owner's
    /// entry in force, creator, modifier, created and modified times, the lengths of what
    /// follows, and the type code of each plain field in key order:
    /// ``PlainValuesCodec/typeCodes(_:)``), then the plain values' JSON and the sealed bytes.
    /// Computed without allocating: it runs for every record written and read.
    package static func versionHash(zoneUID: [UInt8], name: String, type: String, parent: String?, seq: Int64, epoch: Int64, membershipSeq: Int64,
                            creatorID: String, modifierID: String, created: Double, modified: Double,
                            plain: UnsafeRawBufferPointer, plainTypes: UnsafeRawBufferPointer, sealed: UnsafeRawBufferPointer?) -> Digest32 {
        let domain: StaticString = "coffer.record-version.v3"
        let size = domain.utf8CodeUnitCount + 4 + zoneUID.count + 4 + name.utf8.count + 4 + type.utf8.count + 1
            + 4 + (parent?.utf8.count ?? 0) + 24 + 4 + creatorID.utf8.count + 4 + modifierID.utf8.count + 16 + 4 + 1 + 4
            + 4 + plainTypes.count
        return withUnsafeTemporaryAllocation(byteCount: size, alignment: 8) { buffer in
            var w = HeaderWriter(base: buffer.baseAddress!)
            w.bytes(UnsafeRawBufferPointer(start: domain.utf8Start, count: domain.utf8CodeUnitCount))
            w.u32(zoneUID.count)
            zoneUID.withUnsafeBytes { w.bytes($0) }
            w.text(name)
            w.text(type)
            w.u8(parent == nil ? 0 : 1)
            w.text(parent ?? "")
            w.u64(UInt64(bitPattern: seq)); w.u64(UInt64(bitPattern: epoch)); w.u64(UInt64(bitPattern: membershipSeq))
            w.text(creatorID)
            w.text(modifierID)
            w.u64(created.bitPattern); w.u64(modified.bitPattern)
            w.u32(plain.count)
            w.u8(sealed == nil ? 0 : 1)
            w.u32(sealed?.count ?? 0)
            w.u32(plainTypes.count)
            w.bytes(plainTypes)
            precondition(w.offset == size, "record hash header length")
            var digest = Digest32.zero
            withUnsafeMutableBytes(of: &digest) { BLAKE2b.hash(UnsafeRawBufferPointer(buffer), plain, sealed, into: $0) }
            return digest
        }
    }
}

/// Big-endian writes into a buffer sized in advance (headers built on the stack).
package struct HeaderWriter {
    package let base: UnsafeMutableRawPointer
    package var offset = 0

    package mutating func u8(_ v: UInt8) { base.storeBytes(of: v, toByteOffset: offset, as: UInt8.self); offset += 1 }
    package mutating func u32(_ v: Int) { base.storeBytes(of: UInt32(truncatingIfNeeded: v).bigEndian, toByteOffset: offset, as: UInt32.self); offset += 4 }
    package mutating func u64(_ v: UInt64) { base.storeBytes(of: v.bigEndian, toByteOffset: offset, as: UInt64.self); offset += 8 }
    package mutating func bytes(_ b: UnsafeRawBufferPointer) {
        if b.count > 0 { (base + offset).copyMemory(from: b.baseAddress!, byteCount: b.count) }
        offset += b.count
    }
    package mutating func text(_ s: String) {
        var s = s
        u32(s.utf8.count)
        s.withUTF8 { bytes(UnsafeRawBufferPointer($0)) }
    }
}

import CofferCrypto
import Foundation

/// Vault file format v1. `Docs/VaultFormat.md` specifies it byte by byte; this file is
/// the only code that reads or writes it.
enum VaultFormat {
    static let magic: [UInt8] = Array("COFFERVT".utf8)
    static let version: UInt16 = 1
    static let vaultIDByteCount = 16
    static let checksumByteCount = 32
    static let maxSlots = 8
    static let wrappedKeyByteCount = XChaCha20Poly1305.overhead + SymmetricKey.byteCount // 72
    /// A vault larger than this is refused before it is read.
    static let maxFileSize = 64 << 20
    static let bodyPaddingBlock = 256
    static let bodyVersion: UInt8 = 1

    /// The most Argon2id work a vault may ask for, over all its passphrase slots together:
    /// the sum of passes × memory in KiB. One slot of libsodium's sensitive preset (4 passes
    /// over 1 GiB) is exactly this much; a file asking for more is refused before any Argon2id
    /// runs, so trying a passphrase never costs more than one sensitive slot does.
    static let maxArgon2Work: UInt64 = 4 * (1 << 20)

    /// The Argon2id work of one slot's parameters (passes × memory in KiB).
    static func argon2Work(_ kdf: Argon2id.Parameters) -> UInt64 {
        UInt64(kdf.opsLimit) * UInt64(kdf.memoryKiB)
    }

    /// Refuses, before anything is derived, parameters that a vault could not be opened with.
    static func checkWritable(_ kdf: Argon2id.Parameters) throws {
        guard argon2Work(kdf) <= maxArgon2Work else {
            throw VaultError(.invalidArguments, "\(kdf) is more work than a vault may ask for (passes × memory at most \(maxArgon2Work) KiB, the sensitive preset's)")
        }
    }

    enum SlotType: UInt8 {
        case passphrase = 0x01
        case keyFile = 0x02
    }

    /// One key slot: the vault key wrapped under a key derived from a passphrase or a key file.
    struct Slot: Equatable {
        var type: SlotType
        /// Argon2id parameters; passphrase slots only.
        var kdf: Argon2id.Parameters?
        var salt: [UInt8]
        var wrappedKey: [UInt8]

        /// The slot's bytes that its wrapped key authenticates (everything but the wrapped key).
        var parameterBytes: [UInt8] {
            var w = [type.rawValue]
            if let kdf {
                w += BigEndian.bytes(kdf.opsLimit) + BigEndian.bytes(kdf.memoryKiB)
            }
            return w + salt
        }

        func encoded() -> [UInt8] { parameterBytes + wrappedKey }
    }

    struct Header: Equatable {
        var vaultID: [UInt8]
        var slots: [Slot]

        /// Header bytes including the trailing checksum.
        func encoded() -> [UInt8] {
            var out = magic + BigEndian.bytes(version) + BigEndian.bytes(UInt16(0)) + vaultID
            out.append(UInt8(slots.count))
            for slot in slots { out += slot.encoded() }
            out += BLAKE2b.hash(out, outputByteCount: checksumByteCount)
            return out
        }
    }

    /// Associated data for a slot's wrapped key: binds it to this vault and the slot's parameters.
    static func slotAssociatedData(vaultID: [UInt8], slot: Slot) -> [UInt8] {
        Array("coffer.vault.slot.v1".utf8) + vaultID + slot.parameterBytes
    }

    /// The slot key for a key file: `BLAKE2b-256` keyed with the key file's 32 bytes over
    /// `"coffer.vault.keyfile.v1" ‖ vault id ‖ salt`.
    static func keyFileSlotKey(keyFile: SymmetricKey, vaultID: [UInt8], salt: [UInt8]) -> SymmetricKey {
        let derived = BLAKE2b.keyedHash(Array("coffer.vault.keyfile.v1".utf8) + vaultID + salt, key: keyFile)
        return try! SymmetricKey(bytes: derived)
    }

    /// Parses and checks the header of `file`; returns it and the offset where the body starts.
    /// Every failure is `.malformed` (exit 65): the file is damaged or not a vault.
    static func parseHeader(_ file: [UInt8]) throws -> (Header, bodyOffset: Int) {
        guard !file.isEmpty else { throw VaultError(.malformed, "the vault file is empty") }
        guard file.count >= magic.count, Array(file[0..<magic.count]) == magic else {
            throw VaultError(.malformed, "not a Coffer vault (bad magic)")
        }
        return try file.withUnsafeBytes { raw in
            var r = ByteReader(raw, what: "the vault header")
            _ = try r.take(magic.count)
            let v = try r.u16()
            guard v == version else {
                throw VaultError(.malformed, "unsupported vault format version \(v) (this build reads version \(version))")
            }
            let flags = try r.u16()
            guard flags == 0 else { throw VaultError(.malformed, "unknown vault flags 0x\(String(flags, radix: 16))") }
            let vaultID = try r.bytes(vaultIDByteCount)
            let slotCount = Int(try r.u8())
            guard (1...maxSlots).contains(slotCount) else {
                throw VaultError(.malformed, "the vault header is damaged: \(slotCount) key slots")
            }
            var slots = [Slot]()
            var work: UInt64 = 0
            for _ in 0..<slotCount {
                guard let type = SlotType(rawValue: try r.u8()) else {
                    throw VaultError(.malformed, "the vault header is damaged: unknown key slot type")
                }
                var kdf: Argon2id.Parameters?
                if type == .passphrase {
                    let ops = try r.u32(), kib = try r.u32()
                    // Checked here, before the checksum or any allocation: a hostile header
                    // asking for 64 GiB stops at this line.
                    let parameters: Argon2id.Parameters
                    do { parameters = try Argon2id.Parameters(opsLimit: ops, memoryKiB: kib) } catch {
                        throw VaultError(.malformed, "the vault asks for Argon2id parameters outside the accepted limits (\(ops) passes, \(kib) KiB)")
                    }
                    // And all passphrase slots together, so that many costly slots stop here too.
                    work += argon2Work(parameters)
                    guard work <= maxArgon2Work else {
                        throw VaultError(.malformed, "the vault asks for more Argon2id work than a vault may (its passphrase slots add up to \(work) passes × KiB; at most \(maxArgon2Work), one slot of the sensitive preset): it is damaged or hostile")
                    }
                    kdf = parameters
                }
                let salt = try r.bytes(Argon2id.saltByteCount)
                let wrapped = try r.bytes(wrappedKeyByteCount)
                slots.append(Slot(type: type, kdf: kdf, salt: salt, wrappedKey: wrapped))
            }
            let checksumOffset = r.offset
            let checksum = try r.bytes(checksumByteCount)
            guard BLAKE2b.hash(Array(file[0..<checksumOffset]), outputByteCount: checksumByteCount) == checksum else {
                throw VaultError(.malformed, "the vault header is damaged (checksum mismatch)")
            }
            guard r.remaining >= XChaCha20Poly1305.overhead + bodyPaddingBlock else {
                throw VaultError(.malformed, "the vault file is truncated")
            }
            return (Header(vaultID: vaultID, slots: slots), r.offset)
        }
    }

    // MARK: - Body

    struct Body {
        var name: String
        var email: String?
        var created: Int64
        var signingSeed: SecureBytes
        var boxSecret: SecureBytes
        var items: [VaultItem]
    }

    /// The padded body plaintext in guarded memory.
    static func encodeBody(_ body: Body) -> SecureBytes {
        func write(_ w: inout ByteWriter) {
            w.u8(bodyVersion)
            w.string(body.name)
            w.string(body.email ?? "")
            w.i64(body.created)
            w.secret(body.signingSeed)
            w.secret(body.boxSecret)
            w.u32(UInt32(body.items.count))
            for item in body.items {
                w.bytes(item.id)
                w.u8(item.itemClass.rawValue)
                w.string(item.service)
                w.string(item.account)
                w.string(item.label)
                let attributes = item.attributes.sorted { $0.key < $1.key }
                w.u32(UInt32(attributes.count))
                for (k, v) in attributes {
                    w.string(k)
                    w.string(v)
                }
                w.i64(item.created)
                w.i64(item.modified)
                w.framedSecret(item.secret)
            }
        }
        var counter = ByteWriter(into: nil)
        write(&counter)
        let unpadded = counter.offset
        // ISO/IEC 7816-4 padding to a multiple of the block: 0x80 then zeros.
        let padded = (unpadded / bodyPaddingBlock + 1) * bodyPaddingBlock
        return SecureBytes(count: padded) { buffer in
            buffer.initializeMemory(as: UInt8.self, repeating: 0)
            var w = ByteWriter(into: buffer)
            write(&w)
            buffer[unpadded] = 0x80
        }
    }

    /// Parses a decrypted body. Failures are `.integrityFailure`: the body authenticated,
    /// so a parse error means a writer bug or a forged file.
    static func decodeBody(_ plaintext: SecureBytes) throws -> Body {
        try plaintext.withUnsafeBytes { raw in
            // Strip ISO/IEC 7816-4 padding.
            var end = raw.count
            while end > 0 && raw[end - 1] == 0 { end -= 1 }
            guard end > 0, raw[end - 1] == 0x80 else { throw VaultError(.integrityFailure, "the vault body has bad padding") }
            var r = ByteReader(UnsafeRawBufferPointer(rebasing: raw[0..<end - 1]), what: "the vault body", errorCode: .integrityFailure)
            let v = try r.u8()
            guard v == bodyVersion else { throw VaultError(.malformed, "unsupported vault body version \(v)") }
            let name = try r.string()
            let email = try r.string()
            let created = try r.i64()
            let seed = try r.secret(Ed25519.seedByteCount)
            let box = try r.secret(X25519.keyByteCount)
            let count = Int(try r.u32())
            guard count <= VaultItem.maxItems else { throw VaultError(.integrityFailure, "the vault body lists too many items") }
            var items = [VaultItem]()
            for _ in 0..<count {
                let id = try r.bytes(16)
                guard let cls = VaultItem.ItemClass(rawValue: try r.u8()) else {
                    throw VaultError(.malformed, "the vault holds an item of an unknown class")
                }
                let service = try r.string(), account = try r.string(), label = try r.string()
                let attributeCount = Int(try r.u32())
                guard attributeCount <= VaultItem.maxAttributes else { throw VaultError(.integrityFailure, "an item has too many attributes") }
                var attributes = [String: String]()
                for _ in 0..<attributeCount {
                    let k = try r.string(), value = try r.string()
                    attributes[k] = value
                }
                let created = try r.i64(), modified = try r.i64()
                let secret = try r.framedSecret(max: VaultItem.maxSecretBytes)
                items.append(VaultItem(id: id, itemClass: cls, service: service, account: account, label: label,
                                       attributes: attributes, created: created, modified: modified, secret: secret))
            }
            guard r.remaining == 0 else { throw VaultError(.integrityFailure, "the vault body has trailing bytes") }
            return Body(name: name, email: email.isEmpty ? nil : email, created: created,
                        signingSeed: seed, boxSecret: box, items: items)
        }
    }
}

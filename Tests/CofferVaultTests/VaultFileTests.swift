import CofferCrypto
import CofferTestSupport
import Foundation
import Testing
@testable import CofferVault

/// The vault file: the v1 byte layout, damaged and hostile files, size limits, atomic
/// locked writes, and two writers on one file.
@Suite("Vault file: format v1, damage, limits, atomic writes, concurrency")
struct VaultFileTests {
    // MARK: - Leftovers

    @Test("a temporary file a killed writer left beside the vault is removed by the next write; one a live writer holds, or another name's, stays")
    func leftoversOfKilledWritersGo() throws {
        try withTemporaryFolder { folder in
            let vault = try makeVault(in: folder)
            let name = vault.url.lastPathComponent
            func plant(_ file: String) throws -> String {
                let path = folder.appendingPathComponent(file).path
                #expect(FileManager.default.createFile(atPath: path, contents: Data("half a vault".utf8), attributes: [.posixPermissions: 0o600]))
                return path
            }
            let killed = try plant(".\(name).tmp-0a1b2c3d4e5f"), held = try plant(".\(name).tmp-live00000000")
            let other = try plant(".other.coffer.tmp-0a1b2c3d4e5f")
            let holder = open(held, O_RDONLY)
            defer { close(holder) }
            #expect(holder >= 0 && flock(holder, LOCK_EX | LOCK_NB) == 0)
            _ = try vault.addItem(service: "s", account: "a", secret: secure("1"))
            #expect(!FileManager.default.fileExists(atPath: killed), "a killed writer's temporary file stays")
            #expect(FileManager.default.fileExists(atPath: held), "a live writer's temporary file was removed")
            #expect(FileManager.default.fileExists(atPath: other), "another file's temporary file was removed")

            // The CLI's files wait a minute: a file as young as this one stays, an older one goes.
            let young = try plant(".backup.coffer.tmp-12345678"), old = try plant(".backup.coffer.tmp-87654321")
            try FileManager.default.setAttributes([.modificationDate: Date(timeIntervalSinceNow: -120)], ofItemAtPath: old)
            VaultFile.removeLeftovers(of: folder.appendingPathComponent("backup.coffer"), olderThan: 60)
            #expect(FileManager.default.fileExists(atPath: young) && !FileManager.default.fileExists(atPath: old))
        }
    }

    // MARK: - Layout

    @Test func formatV1Layout() throws {
        try withTemporaryFolder { folder in
            let vault = try makeVault(in: folder)
            let file = try readBytes(vault.url)
            #expect(Array(file[0..<8]) == Array("COFFERVT".utf8))
            #expect(Array(file[V1.versionOffset..<V1.versionOffset + 2]) == [0x00, 0x01])
            #expect(Array(file[V1.flagsOffset..<V1.flagsOffset + 2]) == [0x00, 0x00])
            #expect(file[V1.slotCountOffset] == 1)
            #expect(file[V1.slotTypeOffset] == 0x01, "a passphrase slot")
            #expect(Array(file[V1.opsOffset..<V1.opsOffset + 4]) == BigEndian.bytes(Argon2id.Parameters.min.opsLimit))
            #expect(Array(file[V1.memoryOffset..<V1.memoryOffset + 4]) == BigEndian.bytes(Argon2id.Parameters.min.memoryKiB))
            let headerEnd = V1.singleSlotHeaderByteCount
            #expect(headerEnd == 158)
            #expect(try bodyOffset(of: file) == headerEnd)
            #expect(Array(file[headerEnd - 32..<headerEnd]) == BLAKE2b.hash(Array(file[0..<headerEnd - 32]), outputByteCount: 32),
                    "the header ends with BLAKE2b-256 of what precedes it")
            // Body: nonce (24) ‖ ciphertext of a body padded to 256-byte blocks ‖ tag (16).
            let bodyCount = file.count - headerEnd
            #expect(bodyCount >= 24 + 256 + 16)
            #expect((bodyCount - 24 - 16) % 256 == 0)

            // The parser agrees with the object.
            let (header, _) = try VaultFormat.parseHeader(file)
            #expect(header.slots.count == 1)
            #expect(header.slots[0].type == .passphrase)
            #expect(header.slots[0].kdf == .min)
            #expect(header.encoded() == Array(file[0..<headerEnd]), "decode then encode gives the same bytes")

            // A key-file slot has no Argon2id fields: 1 + 16 + 72 bytes.
            try vault.addKeyFile(at: folder.appendingPathComponent("k.key"))
            let withKey = try readBytes(vault.url)
            #expect(withKey[V1.slotCountOffset] == 2)
            #expect(try bodyOffset(of: withKey) == headerEnd + 1 + 16 + 72)
            #expect(withKey[V1.firstSlotOffset + V1.passphraseSlotByteCount] == 0x02, "a key-file slot")
        }
    }

    @Test func bodyIsPaddedSoSmallChangesDoNotShowInTheSize() throws {
        try withTemporaryFolder { folder in
            let vault = try makeVault(in: folder)
            let size0 = try readBytes(vault.url).count
            try vault.addItem(service: "s", account: "a", secret: secure("1"))
            let size1 = try readBytes(vault.url).count
            try vault.updateItems(matching: .all, secret: secure("12345678"))
            #expect(try readBytes(vault.url).count == size1, "a few more secret bytes stay in the same 256-byte block")
            #expect((size1 - size0) % 256 == 0)
        }
    }

    @Test func everyWriteUsesAFreshNonce() throws {
        try withTemporaryFolder { folder in
            let vault = try makeVault(in: folder)
            let first = try readBytes(vault.url)
            try vault.addItem(service: "s", account: "a", secret: secure("1"))
            try vault.deleteItems(matching: .all)
            let second = try readBytes(vault.url)
            #expect(first.count == second.count)
            #expect(Array(first[158..<158 + 24]) != Array(second[158..<158 + 24]))
            #expect(Array(first[0..<158]) == Array(second[0..<158]), "the header is unchanged by item writes")
        }
    }

    // MARK: - Not a vault

    @Test func emptyFileIsMalformed() throws {
        try withTemporaryFolder { folder in
            let url = folder.appendingPathComponent("empty.coffer")
            try writeBytes([], to: url)
            expectVaultError(.malformed) { try Vault.open(at: url, passphrase: secure(testPassphrase)) }
        }
    }

    @Test(arguments: [1, 7, 8, 100, 158, 1000, 10_000])
    func randomBytesAreMalformed(count: Int) throws {
        try withTemporaryFolder { folder in
            let url = folder.appendingPathComponent("random.coffer")
            for _ in 0..<5 {
                try writeBytes(SecureRandom.bytes(count: count), to: url)
                expectVaultError(.malformed) { try Vault.open(at: url, passphrase: secure(testPassphrase)) }
                // Random bytes behind a correct magic too.
                try writeBytes(Array("COFFERVT".utf8) + SecureRandom.bytes(count: count), to: url)
                expectVaultError(.malformed) { try Vault.open(at: url, passphrase: secure(testPassphrase)) }
            }
        }
    }

    @Test func textFileIsMalformed() throws {
        try withTemporaryFolder { folder in
            let url = folder.appendingPathComponent("notes.coffer")
            try writeBytes(Array("{\"format\":\"coffer-contact\",\"version\":1}\n".utf8), to: url)
            let error = expectVaultError(.malformed) { try Vault.open(at: url, passphrase: secure(testPassphrase)) }
            #expect(error?.message.contains("magic") == true)
        }
    }

    @Test func aFolderIsNotAVault() throws {
        try withTemporaryFolder { folder in
            expectVaultError(oneOf: [.malformed, .io]) { try Vault.open(at: folder, passphrase: secure(testPassphrase)) }
        }
    }

    // MARK: - Damage

    @Test func truncatedFilesAreRefused() throws {
        try withTemporaryFolder { folder in
            let vault = try makeVault(in: folder)
            try vault.addItem(service: "svc", account: "acct", secret: secure(String(repeating: "x", count: 600)))
            let file = try readBytes(vault.url)
            let headerEnd = try bodyOffset(of: file)
            let minimumBody = XChaCha20Poly1305.overhead + VaultFormat.bodyPaddingBlock
            let url = folder.appendingPathComponent("truncated.coffer")

            // Every length inside the header, and up to the smallest possible body: damaged.
            for length in 0..<(headerEnd + minimumBody) {
                try writeBytes(Array(file[0..<length]), to: url)
                expectVaultError(.malformed, "truncated to \(length) of \(file.count) bytes") {
                    try Vault.open(at: url, passphrase: secure(testPassphrase))
                }
            }
            // Longer cuts keep an intact header: the slot opens and the body fails.
            let bodyCuts = [headerEnd + minimumBody, headerEnd + minimumBody + 1, headerEnd + 512, (headerEnd + file.count) / 2,
                            file.count - 17, file.count - 16, file.count - 1]
            for length in bodyCuts {
                try writeBytes(Array(file[0..<length]), to: url)
                expectVaultError(.integrityFailure, "truncated to \(length) of \(file.count) bytes") {
                    try Vault.open(at: url, passphrase: secure(testPassphrase))
                }
            }
            // The whole file still opens (the cuts were real).
            try writeBytes(file, to: url)
            _ = try Vault.open(at: url, passphrase: secure(testPassphrase))
        }
    }

    @Test func extraBytesAtTheEndAreRefused() throws {
        try withTemporaryFolder { folder in
            let vault = try makeVault(in: folder)
            let file = try readBytes(vault.url)
            let url = folder.appendingPathComponent("longer.coffer")
            for extra in [[UInt8(0)], [0x80], Array(repeating: 0, count: 256), SecureRandom.bytes(count: 1000)] {
                try writeBytes(file + extra, to: url)
                expectVaultError(.integrityFailure) { try Vault.open(at: url, passphrase: secure(testPassphrase)) }
            }
        }
    }

    @Test func aFlippedByteAnywhereInTheHeaderIsMalformed() throws {
        try withTemporaryFolder { folder in
            let vault = try makeVault(in: folder)
            let file = try readBytes(vault.url)
            let headerEnd = try bodyOffset(of: file)
            let url = folder.appendingPathComponent("flipped.coffer")
            for position in 0..<headerEnd {
                for mask: UInt8 in [0x01, 0x80, 0xff] {
                    var damaged = file
                    damaged[position] ^= mask
                    try writeBytes(damaged, to: url)
                    let error = expectVaultError(.malformed, "byte \(position) ^ \(mask)") {
                        try Vault.open(at: url, passphrase: secure(testPassphrase))
                    }
                    guard let message = error?.message else { continue }
                    switch position {
                    case 0..<8: #expect(message.contains("magic"), "\(position): \(message)")
                    case 8..<10: #expect(message.contains("version"), "\(position): \(message)")
                    case 10..<12: #expect(message.contains("flags"), "\(position): \(message)")
                    case 12..<28, 38..<headerEnd: #expect(message.contains("checksum"), "\(position): \(message)")
                    default: break // slot count, type and Argon2id fields: checksum, limits or layout
                    }
                }
            }
        }
    }

    @Test func aFlippedByteAnywhereInTheBodyIsAnIntegrityFailure() throws {
        try withTemporaryFolder { folder in
            let vault = try makeVault(in: folder)
            try vault.addItem(service: "svc", account: "acct", secret: secure("secret"))
            let file = try readBytes(vault.url)
            let headerEnd = try bodyOffset(of: file)
            let url = folder.appendingPathComponent("flipped.coffer")
            // Every byte of the nonce, ciphertext and tag.
            for position in headerEnd..<file.count {
                var damaged = file
                damaged[position] ^= position % 2 == 0 ? 0x01 : 0x80
                try writeBytes(damaged, to: url)
                expectVaultError(.integrityFailure, "byte \(position) of \(file.count)") {
                    try Vault.open(at: url, passphrase: secure(testPassphrase))
                }
            }
        }
    }

    @Test(arguments: [UInt16(0), 2, 3, 0x0100, 0xffff])
    func unknownVersionIsMalformedAndNamed(version: UInt16) throws {
        try withTemporaryFolder { folder in
            let vault = try makeVault(in: folder)
            var file = try readBytes(vault.url)
            let headerEnd = try bodyOffset(of: file)
            putU16(version, into: &file, at: V1.versionOffset)
            recomputeChecksum(&file, headerEnd: headerEnd) // so the version check is what fires
            try writeBytes(file, to: vault.url)
            let error = expectVaultError(.malformed) { try Vault.open(at: vault.url, passphrase: secure(testPassphrase)) }
            #expect(error?.message.contains("version \(version)") == true, "\(error?.message ?? "")")
        }
    }

    @Test func unknownFlagsAreMalformed() throws {
        try withTemporaryFolder { folder in
            let vault = try makeVault(in: folder)
            var file = try readBytes(vault.url)
            let headerEnd = try bodyOffset(of: file)
            putU16(0x0001, into: &file, at: V1.flagsOffset)
            recomputeChecksum(&file, headerEnd: headerEnd)
            try writeBytes(file, to: vault.url)
            let error = expectVaultError(.malformed) { try Vault.open(at: vault.url, passphrase: secure(testPassphrase)) }
            #expect(error?.message.contains("flags") == true)
        }
    }

    @Test(arguments: [UInt8(0), 2, 8, 9, 255])
    func wrongSlotCountIsMalformed(count: UInt8) throws {
        try withTemporaryFolder { folder in
            let vault = try makeVault(in: folder)
            var file = try readBytes(vault.url)
            let headerEnd = try bodyOffset(of: file)
            file[V1.slotCountOffset] = count
            recomputeChecksum(&file, headerEnd: headerEnd)
            try writeBytes(file, to: vault.url)
            expectVaultError(.malformed) { try Vault.open(at: vault.url, passphrase: secure(testPassphrase)) }
        }
    }

    @Test(arguments: [UInt8(0), 3, 0x7f, 0xff])
    func unknownSlotTypeIsMalformed(type: UInt8) throws {
        try withTemporaryFolder { folder in
            let vault = try makeVault(in: folder)
            var file = try readBytes(vault.url)
            let headerEnd = try bodyOffset(of: file)
            file[V1.slotTypeOffset] = type
            recomputeChecksum(&file, headerEnd: headerEnd)
            try writeBytes(file, to: vault.url)
            expectVaultError(.malformed) { try Vault.open(at: vault.url, passphrase: secure(testPassphrase)) }
        }
    }

    // MARK: - Hostile headers

    /// A header asking Argon2id for 64 GiB is refused from the header alone: no key
    /// derivation, no allocation, at once.
    @Test(.timeLimit(.minutes(1)))
    func hostileArgon2MemoryIsRefusedQuickly() throws {
        try withTemporaryFolder { folder in
            let vault = try makeVault(in: folder)
            var file = try readBytes(vault.url)
            let headerEnd = try bodyOffset(of: file)
            putU32(64 << 20, into: &file, at: V1.memoryOffset) // 64 GiB in KiB
            recomputeChecksum(&file, headerEnd: headerEnd)
            try writeBytes(file, to: vault.url)

            let clock = ContinuousClock()
            let start = clock.now
            let error = expectVaultError(.malformed) { try Vault.open(at: vault.url, passphrase: secure(testPassphrase)) }
            let elapsed = clock.now - start
            #expect(elapsed < .seconds(2), "took \(elapsed)")
            #expect(error?.message.contains("Argon2id") == true, "\(error?.message ?? "")")
            #expect(error?.message.contains("\(64 << 20)") == true, "the message names the value: \(error?.message ?? "")")
        }
    }

    static let outOfLimits: [(UInt32, UInt32)] = [
        (1, 0),                            // below the minimum memory
        (1, 7),                            // 7 KiB < 8 KiB
        (1, (1 << 20) + 1),                // just above 1 GiB
        (1, UInt32.max),
        (0, 8),                            // no passes
        (11, 8),                           // more than 10 passes
        (UInt32.max, 8),
    ]

    @Test(arguments: outOfLimits)
    func argon2ParametersOutsideTheLimitsAreRefused(ops: UInt32, memoryKiB: UInt32) throws {
        try withTemporaryFolder { folder in
            let vault = try makeVault(in: folder)
            var file = try readBytes(vault.url)
            let headerEnd = try bodyOffset(of: file)
            putU32(ops, into: &file, at: V1.opsOffset)
            putU32(memoryKiB, into: &file, at: V1.memoryOffset)
            recomputeChecksum(&file, headerEnd: headerEnd)
            try writeBytes(file, to: vault.url)
            let clock = ContinuousClock()
            let start = clock.now
            expectVaultError(.malformed) { try Vault.open(at: vault.url, passphrase: secure(testPassphrase)) }
            #expect(clock.now - start < .seconds(2))
        }
    }

    /// A vault file whose header holds `slots` passphrase slots (random salts and wrapped keys, a
    /// valid checksum) followed by a random body: what a hostile writer can make.
    static func craftedVault(_ slots: [Argon2id.Parameters]) -> [UInt8] {
        let header = VaultFormat.Header(vaultID: SecureRandom.bytes(count: VaultFormat.vaultIDByteCount), slots: slots.map {
            VaultFormat.Slot(type: .passphrase, kdf: $0, salt: SecureRandom.bytes(count: Argon2id.saltByteCount),
                             wrappedKey: SecureRandom.bytes(count: VaultFormat.wrappedKeyByteCount))
        })
        return header.encoded() + SecureRandom.bytes(count: XChaCha20Poly1305.overhead + VaultFormat.bodyPaddingBlock)
    }

    static let tooCostly: [[Argon2id.Parameters]] = [
        [try! .init(opsLimit: 10, memoryKiB: 1 << 20)],             // each value allowed, together 2.5 × sensitive
        [try! .init(opsLimit: 5, memoryKiB: 1 << 20)],              // one pass more than sensitive
        [.sensitive, .min],                                           // sensitive, and a little more
        [.sensitive, .sensitive],
        Array(repeating: .moderate, count: 6),                       // many slots, each of them fine
        Array(repeating: try! .init(opsLimit: 10, memoryKiB: 1 << 20), count: 8),
    ]

    /// More Argon2id work than one sensitive slot, over all passphrase slots, is refused when the
    /// header is parsed: at once, before any key derivation, naming the limit.
    @Test(.timeLimit(.minutes(1)), arguments: tooCostly)
    func tooCostlyHeadersAreRefusedBeforeAnyWork(_ slots: [Argon2id.Parameters]) throws {
        let file = Self.craftedVault(slots)
        let error = expectVaultError(.malformed) { try VaultFormat.parseHeader(file) }
        #expect(error?.message.contains("Argon2id work") == true, "\(error?.message ?? "")")
        #expect(error?.message.contains("\(VaultFormat.maxArgon2Work)") == true, "the message names the maximum: \(error?.message ?? "")")
        try withTemporaryFolder { folder in
            let url = folder.appendingPathComponent("hostile.coffer")
            try writeBytes(file, to: url)
            let clock = ContinuousClock()
            let start = clock.now
            expectVaultError(.malformed) { try Vault.open(at: url, passphrase: secure(testPassphrase)) }
            #expect(clock.now - start < .seconds(2), "took \(clock.now - start)")
        }
    }

    static let affordable: [[Argon2id.Parameters]] = [
        [.sensitive],                                                // the maximum, exactly
        [.moderate], [.interactive], [.min],
        [try! .init(opsLimit: 10, memoryKiB: 400 << 10)],          // 10 passes over 400 MiB: under the maximum
        Array(repeating: .interactive, count: 8),                    // 8 × 128 MiB-passes = 1 GiB-pass
        [.moderate, .moderate, .moderate, .moderate, .moderate],     // 5 × 768 MiB-passes = 3.75 GiB-passes
    ]

    @Test(arguments: affordable)
    func headersWithinTheMaximumParse(_ slots: [Argon2id.Parameters]) throws {
        let (header, _) = try VaultFormat.parseHeader(Self.craftedVault(slots))
        #expect(header.slots.map(\.kdf) == slots)
        #expect(slots.reduce(0) { $0 + VaultFormat.argon2Work($1) } <= VaultFormat.maxArgon2Work)
    }

    /// The writer keeps to the same maximum, so it never writes a vault that cannot be opened.
    @Test func writingParametersOverTheMaximumIsRefused() throws {
        let tooMuch = try Argon2id.Parameters(opsLimit: 5, memoryKiB: 1 << 20)
        try withTemporaryFolder { folder in
            let url = folder.appendingPathComponent("costly.coffer")
            let clock = ContinuousClock()
            let start = clock.now
            let error = expectVaultError(.invalidArguments) {
                try Vault.create(at: url, name: "Costly", passphrase: secure(testPassphrase), kdf: tooMuch)
            }
            #expect(clock.now - start < .seconds(2))
            #expect(error?.message.contains("sensitive") == true, "\(error?.message ?? "")")
            #expect(!FileManager.default.fileExists(atPath: url.path))

            let vault = try makeVault(in: folder)
            let before = try readBytes(vault.url)
            expectVaultError(.invalidArguments) { try vault.changePassphrase(to: secure(otherPassphrase), kdf: tooMuch) }
            expectVaultError(.invalidArguments) { try vault.rekey(passphrase: secure(otherPassphrase), kdf: tooMuch) }
            #expect(try readBytes(vault.url) == before)
        }
    }

    /// Argon2id parameters inside the limits but changed (checksum recomputed): the slot's
    /// wrapped key authenticates its parameters, so this is just a key that does not open.
    @Test func changedArgon2ParametersWithAValidChecksumDoNotOpen() throws {
        try withTemporaryFolder { folder in
            let vault = try makeVault(in: folder)
            var file = try readBytes(vault.url)
            let headerEnd = try bodyOffset(of: file)
            putU32(2, into: &file, at: V1.opsOffset)
            recomputeChecksum(&file, headerEnd: headerEnd)
            try writeBytes(file, to: vault.url)
            expectVaultError(.wrongPassphrase) { try Vault.open(at: vault.url, passphrase: secure(testPassphrase)) }
        }
    }

    /// A slot is bound to its vault: copied into another vault's header (same passphrase,
    /// checksum recomputed), it does not open, and neither does a changed vault id.
    @Test func slotsAreBoundToTheirVault() throws {
        try withTemporaryFolder { folder in
            let a = try makeVault(in: folder, file: "a.coffer")
            let b = try makeVault(in: folder, file: "b.coffer")
            let fileA = try readBytes(a.url)
            var fileB = try readBytes(b.url)
            let headerEnd = try bodyOffset(of: fileB)
            let slotRange = V1.firstSlotOffset..<V1.firstSlotOffset + V1.passphraseSlotByteCount
            fileB.replaceSubrange(slotRange, with: fileA[slotRange])
            recomputeChecksum(&fileB, headerEnd: headerEnd)
            let url = folder.appendingPathComponent("transplant.coffer")
            try writeBytes(fileB, to: url)
            expectVaultError(.wrongPassphrase) { try Vault.open(at: url, passphrase: secure(testPassphrase)) }

            var renamed = fileA
            renamed[V1.vaultIDOffset] ^= 0x01
            recomputeChecksum(&renamed, headerEnd: headerEnd)
            try writeBytes(renamed, to: url)
            expectVaultError(.wrongPassphrase) { try Vault.open(at: url, passphrase: secure(testPassphrase)) }
        }
    }

    /// Vault A's header on vault B's body: A's passphrase opens A's slot, and B's body
    /// does not authenticate under A's key and header.
    @Test func aHeaderOnAnotherVaultsBodyIsAnIntegrityFailure() throws {
        try withTemporaryFolder { folder in
            let a = try makeVault(in: folder, file: "a.coffer")
            let b = try makeVault(in: folder, file: "b.coffer")
            let fileA = try readBytes(a.url), fileB = try readBytes(b.url)
            let mixed = Array(fileA[0..<(try bodyOffset(of: fileA))]) + Array(fileB[(try bodyOffset(of: fileB))...])
            let url = folder.appendingPathComponent("mixed.coffer")
            try writeBytes(mixed, to: url)
            expectVaultError(.integrityFailure) { try Vault.open(at: url, passphrase: secure(testPassphrase)) }
        }
    }

    @Test(.timeLimit(.minutes(1)))
    func aFileOver64MiBIsRefusedBeforeReading() throws {
        try withTemporaryFolder { folder in
            let vault = try makeVault(in: folder)
            // Grow the real vault to 64 MiB + 1 byte (sparse: no disk space used).
            let handle = try FileHandle(forWritingTo: vault.url)
            try handle.truncate(atOffset: UInt64(64 << 20) + 1)
            try handle.close()
            let clock = ContinuousClock()
            let start = clock.now
            let error = expectVaultError(.malformed) { try Vault.open(at: vault.url, passphrase: secure(testPassphrase)) }
            #expect(clock.now - start < .seconds(2))
            #expect(error?.message.contains("too large") == true, "\(error?.message ?? "")")
        }
    }

    // MARK: - Atomic, locked writes

    @Test func writesLeaveNoTemporaryFilesBehind() throws {
        try withTemporaryFolder { folder in
            let keys = folder.appendingPathComponent("keys", isDirectory: true)
            try FileManager.default.createDirectory(at: keys, withIntermediateDirectories: false)
            let vault = try makeVault(in: folder)
            try vault.addItem(service: "svc", account: "acct", secret: secure("1"))
            try vault.updateItems(matching: .all, secret: secure("2"))
            try vault.addKeyFile(at: keys.appendingPathComponent("alice.key"))
            try vault.changePassphrase(to: secure(otherPassphrase))
            try vault.deleteItems(matching: .all)
            try vault.rekey(passphrase: secure(testPassphrase))
            #expect(try folderContents(folder) == ["alice.coffer", "alice.coffer.lock", "keys"])
            #expect(try folderContents(keys) == ["alice.key"])

            // Failed writes leave nothing behind either.
            expectVaultError(.itemNotFound) { try vault.deleteItems(matching: .all) }
            let other = try Vault.open(at: vault.url, passphrase: secure(testPassphrase))
            try other.addItem(service: "svc", account: "acct", secret: secure("3"))
            expectVaultError(.alreadyExists) { try vault.addItem(service: "svc", account: "acct", secret: secure("4")) }
            try other.rekey(passphrase: secure(testPassphrase))
            expectVaultError(.changedOnDisk) { try vault.addItem(service: "x", account: "y", secret: secure("5")) }
            #expect(try folderContents(folder) == ["alice.coffer", "alice.coffer.lock", "keys"])
        }
    }

    /// A change applies to the file's latest contents: a second `Vault` object (another
    /// process, say) that read the file before the first one wrote it keeps both changes.
    @Test func twoVaultObjectsOnOneFileKeepBothChanges() throws {
        try withTemporaryFolder { folder in
            let url = folder.appendingPathComponent("alice.coffer")
            _ = try makeVault(in: folder)
            let first = try Vault.open(at: url, passphrase: secure(testPassphrase))
            let second = try Vault.open(at: url, passphrase: secure(testPassphrase))

            try first.addItem(service: "first", account: "acct", secret: secure("from the first"))
            try second.addItem(service: "second", account: "acct", secret: secure("from the second"))
            let reopened = try Vault.open(at: url, passphrase: secure(testPassphrase))
            #expect(reopened.items().map(\.service) == ["first", "second"])
            #expect(try reopened.item(service: "first", account: "acct").secret == secure("from the first"))
            #expect(try reopened.item(service: "second", account: "acct").secret == secure("from the second"))
            // The second object now sees the first one's item too; the first sees its own until it writes.
            #expect(second.items().map(\.service) == ["first", "second"])
            #expect(first.items().map(\.service) == ["first"])

            // A change that conflicts with the latest contents gets its normal error and writes nothing.
            let before = try readBytes(url)
            expectVaultError(.alreadyExists) { try first.addItem(service: "second", account: "acct", secret: secure("again")) }
            #expect(try readBytes(url) == before)
            #expect(first.items().map(\.service) == ["first"], "a failed change leaves the object as it was")
            // An update or delete finds what another object added.
            #expect(try first.updateItems(matching: VaultItemQuery(service: "second"), label: "by the first") == 1)
            #expect(try second.deleteItems(matching: VaultItemQuery(service: "first")) == 1)
            let final = try Vault.open(at: url, passphrase: secure(testPassphrase))
            #expect(final.items().map(\.service) == ["second"])
            #expect(final.items().first?.label == "by the first")

            // A passphrase changed by one object applies to the file the other changed, key files kept.
            let key = folder.appendingPathComponent("alice.key")
            try first.addKeyFile(at: key)
            try second.changePassphrase(to: secure(otherPassphrase))
            #expect(second.keyFileCount == 1)
            expectVaultError(.wrongPassphrase) { try Vault.open(at: url, passphrase: secure(testPassphrase)) }
            #expect(try Vault.open(at: url, passphrase: secure(otherPassphrase)).items().map(\.service) == ["second"])
            #expect(try Vault.open(at: url, unlock: .keyFile(at: key)).identity == first.identity)
        }
    }

    /// After a re-key elsewhere, this object's vault key no longer opens the file: its changes
    /// fail clearly and write nothing. `addKeyFile` writes the key file before the vault, so the
    /// stray key file it leaves opens nothing (documented in `addKeyFile`).
    @Test func aRekeyElsewhereIsChangedOnDisk() throws {
        try withTemporaryFolder { folder in
            let url = folder.appendingPathComponent("alice.coffer")
            _ = try makeVault(in: folder)
            let first = try Vault.open(at: url, passphrase: secure(testPassphrase))
            let second = try Vault.open(at: url, passphrase: secure(testPassphrase))
            try first.rekey(passphrase: secure(otherPassphrase))
            let afterRekey = try readBytes(url)
            let keyURL = folder.appendingPathComponent("stray.key")
            for attempt: () throws -> Void in [
                { try second.addItem(service: "s", account: "a", secret: secure("x")) },
                { try second.changePassphrase(to: secure(testPassphrase)) },
                { try second.rekey(passphrase: secure(testPassphrase)) },
                { try second.addKeyFile(at: keyURL) },
            ] {
                let error = expectVaultError(.changedOnDisk) { try attempt() }
                #expect(error?.message.contains("re-keyed") == true, "\(error?.message ?? "")")
            }
            #expect(try readBytes(url) == afterRekey)
            #expect(second.items().isEmpty)
            #expect(second.keyFileCount == 0)
            if FileManager.default.fileExists(atPath: keyURL.path) {
                expectVaultError(.wrongKeyFile) { try Vault.open(at: url, unlock: .keyFile(at: keyURL)) }
            }
            // Opened again, it writes.
            let again = try Vault.open(at: url, passphrase: secure(otherPassphrase))
            try again.addItem(service: "s", account: "a", secret: secure("x"))
            #expect(again.keyFileCount == 0)
        }
    }

    @Test func aRemovedOrReplacedFileIsChangedOnDisk() throws {
        try withTemporaryFolder { folder in
            let vault = try makeVault(in: folder)
            try FileManager.default.removeItem(at: vault.url)
            expectVaultError(.changedOnDisk) { try vault.addItem(service: "s", account: "a", secret: secure("x")) }
            #expect(!FileManager.default.fileExists(atPath: vault.url.path), "a removed vault is not written back")

            // Another vault created at the same path.
            _ = try makeVault(in: folder, name: "Mallory")
            let replaced = try readBytes(vault.url)
            expectVaultError(.changedOnDisk) { try vault.addItem(service: "s", account: "a", secret: secure("x")) }
            #expect(try readBytes(vault.url) == replaced)
        }
    }

    /// 8 threads, each with its own `Vault` object opened before any of them writes (so each
    /// is stale after the first write), add 4 items each with no retry: all 32 are kept.
    @Test(.timeLimit(.minutes(1)))
    func concurrentWritersLoseNothing() throws {
        try withTemporaryFolder { folder in
            let url = folder.appendingPathComponent("alice.coffer")
            _ = try makeVault(in: folder)
            let writers = 8, itemsEach = 4
            let vaults = try (0..<writers).map { _ in try Vault.open(at: url, passphrase: secure(testPassphrase)) }
            let failures = onThreads(writers) { w in
                for i in 0..<itemsEach {
                    try vaults[w].addItem(service: "writer-\(w)", account: "item-\(i)", secret: secure("\(w).\(i)"))
                }
            }
            #expect(failures.isEmpty, "\(failures)")
            let final = try Vault.open(at: url, passphrase: secure(testPassphrase))
            #expect(final.items().count == writers * itemsEach)
            for w in 0..<writers {
                for i in 0..<itemsEach {
                    #expect(try final.item(service: "writer-\(w)", account: "item-\(i)").secret == secure("\(w).\(i)"))
                }
            }
            #expect(try folderContents(folder) == ["alice.coffer", "alice.coffer.lock"])
        }
    }

    /// A writer waits for another process's lock, then writes; held past the bound, it gives up
    /// with `.busy` and writes nothing. The wait sleeps between tries (it does not spin).
    @Test(.timeLimit(.minutes(1)))
    func aHeldLockIsWaitedForThenBusy() throws {
        try withTemporaryFolder { folder in
            let vault = try makeVault(in: folder)
            let lockPath = VaultFile.lockPath(forVault: vault.url)
            // Held briefly: the write waits, then goes through.
            let holder = try LockHolder(lockPath)
            let released = Thread.detach(after: 0.3) { holder.release() }
            let clock = ContinuousClock()
            var start = clock.now
            try vault.addItem(service: "waited", account: "a", secret: secure("x"))
            #expect(clock.now - start >= .milliseconds(250))
            released.wait()
            #expect(try Vault.open(at: vault.url, passphrase: secure(testPassphrase)).items().count == 1)

            // Held throughout: `.busy` after the bound, naming the vault, nothing written.
            let stuck = try LockHolder(lockPath)
            defer { stuck.release() }
            let before = try readBytes(vault.url)
            let cpuBefore = threadCPUSeconds()
            start = clock.now
            let error = expectVaultError(.busy) {
                try VaultFile.withExclusiveLock(lockPath, guarding: "the vault at \(vault.url.path)", timeout: 0.5) {
                    Issue.record("ran without the lock")
                }
            }
            let waited = clock.now - start
            #expect(waited >= .milliseconds(500) && waited < .seconds(3), "waited \(waited)")
            #expect(threadCPUSeconds() - cpuBefore < 0.25, "the wait used the CPU: it spins")
            #expect(error?.message.contains(vault.url.path) == true, "\(error?.message ?? "")")
            #expect(error?.message.contains("0.5 s") == true, "\(error?.message ?? "")")
            #expect(try readBytes(vault.url) == before)
            #expect(VaultFile.lockWait == 10)
        }
    }

    /// Several creators racing for one path: exactly one wins, the others get `.alreadyExists`.
    @Test func concurrentCreatesHaveOneWinner() async throws {
        try await withTemporaryFolder { folder in
            let url = folder.appendingPathComponent("race.coffer")
            let results = await withTaskGroup(of: Result<String, VaultError>.self) { group in
                for i in 0..<6 {
                    group.addTask {
                        do {
                            let v = try Vault.create(at: url, name: "Creator \(i)", passphrase: secure(testPassphrase), kdf: .min)
                            return .success(v.identity.userID)
                        } catch let e as VaultError {
                            return .failure(e)
                        } catch {
                            return .failure(VaultError(.io, "\(error)"))
                        }
                    }
                }
                var all = [Result<String, VaultError>]()
                for await r in group { all.append(r) }
                return all
            }
            let winners = results.compactMap { try? $0.get() }
            #expect(winners.count == 1)
            for case .failure(let e) in results { #expect(e.code == .alreadyExists, "\(e.code): \(e.message)") }
            let onDisk = try Vault.open(at: url, passphrase: secure(testPassphrase))
            #expect(winners.first == onDisk.identity.userID)
        }
    }
}

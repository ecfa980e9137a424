import CofferCrypto
import CofferTestSupport
import Foundation
import Testing
@testable import CofferVault

/// The marks file beside a vault: high-water marks per zone, merged across processes, never
/// going down but by `reset`, sealed under a key derived from the identity.
@Suite("Marks: high-water marks per zone, beside the vault")
struct MarkBookTests {
    static let ownerA = "0123456789abcdef0123456789abcdef"
    static let ownerB = "fedcba9876543210fedcba9876543210"

    /// Zone `n`'s uid: 16 bytes of `n`.
    static func zone(_ n: UInt8) -> [UInt8] { [UInt8](repeating: n, count: 16) }

    /// A mark of zone `n` at `seq`, its hash made from `variant` and `seq`.
    static func mark(_ n: UInt8, _ seq: Int64, owner: String = ownerA, variant: UInt8 = 0) -> ZoneMark {
        try! ZoneMark(zoneUID: zone(n), ownerID: owner, seq: seq,
                      hash: BLAKE2b.hash([variant, n] + BigEndian.bytes(seq)))
    }

    static func marksURL(_ vault: Vault) -> URL { URL(fileURLWithPath: vault.url.path + ".marks") }

    static func inode(_ url: URL) throws -> UInt64 {
        try #require(try FileManager.default.attributesOfItem(atPath: url.path)[.systemFileNumber] as? UInt64)
    }

    // MARK: - Round trip and format

    @Test func roundTrip() throws {
        try withTemporaryFolder { folder in
            let vault = try makeVault(in: folder)
            let marks = [Self.mark(3, 1), Self.mark(1, 5), Self.mark(2, 0, owner: Self.ownerB)]
            #expect(vault.marks.url.path == vault.url.path + ".marks")
            for mark in marks { vault.marks.advance(to: mark) }
            #expect(vault.marks.hasUnsavedChanges)
            try vault.marks.save()
            #expect(!vault.marks.hasUnsavedChanges)

            let url = Self.marksURL(vault)
            let file = try readBytes(url)
            #expect(try permissions(url) & 0o777 == 0o600)
            #expect(Array(file[0..<8]) == Array("COFFERMK".utf8))
            #expect(Array(file[8..<10]) == [0x00, 0x04])
            #expect(file.count == 10 + 24 + 4 + 3 * 89 + 4 + 4 + 4 + 16, "header, nonce, count, three marks of 89 bytes, no pins, no stores, no queues, tag")
            for mark in marks {
                #expect(!containsSubsequence(file, mark.hash), "a mark's hash is in the file in the clear")
                #expect(!containsSubsequence(file, Array(mark.ownerID.utf8)))
            }

            let again = try Vault.open(at: vault.url, passphrase: secure(testPassphrase))
            #expect(try again.marks.all() == marks.sorted { $0.zoneUID.lexicographicallyPrecedes($1.zoneUID) })
            #expect(try again.marks.mark(forZone: Self.zone(2)) == marks[2])
            #expect(try again.marks.mark(forZone: Self.zone(9)) == nil)
            #expect(!again.marks.hasUnsavedChanges)
        }
    }

    /// The key comes from the identity's seed: the file opens after a passphrase change and a
    /// re-key, when the vault is unlocked with a key file, and from a copy of the vault.
    @Test func theMarksOpenWithAnyCopyAndAnyUnlockOfTheVault() throws {
        try withTemporaryFolder { folder in
            let vault = try makeVault(in: folder)
            vault.marks.advance(to: Self.mark(1, 42))
            try vault.marks.save()
            let keyURL = folder.appendingPathComponent("alice.key")
            try vault.addKeyFile(at: keyURL)
            let copy = folder.appendingPathComponent("copy.coffer")
            try copyFile(vault.url, to: copy)
            try copyFile(Self.marksURL(vault), to: URL(fileURLWithPath: copy.path + ".marks"))

            try vault.changePassphrase(to: secure(otherPassphrase))
            #expect(try Vault.open(at: vault.url, passphrase: secure(otherPassphrase)).marks.mark(forZone: Self.zone(1))?.seq == 42)
            #expect(try Vault.open(at: vault.url, unlock: .keyFile(at: keyURL)).marks.mark(forZone: Self.zone(1))?.seq == 42)
            try vault.rekey(passphrase: secure(testPassphrase))
            #expect(try Vault.open(at: vault.url, passphrase: secure(testPassphrase)).marks.mark(forZone: Self.zone(1))?.seq == 42)
            #expect(try Vault.open(at: copy, unlock: .keyFile(at: keyURL)).marks.mark(forZone: Self.zone(1))?.seq == 42)
        }
    }

    // MARK: - Merging and concurrency

    /// Two books of one vault (two processes) advance different zones and the same zone; both
    /// save: the file has each zone's highest mark, and on equal seq the first saved stays.
    @Test func twoBooksMergeTheirMarks() throws {
        try withTemporaryFolder { folder in
            let vault = try makeVault(in: folder)
            let a = try Vault.open(at: vault.url, passphrase: secure(testPassphrase)).marks
            let b = try Vault.open(at: vault.url, passphrase: secure(testPassphrase)).marks
            a.advance(to: Self.mark(1, 5))
            a.advance(to: Self.mark(3, 2))
            a.advance(to: Self.mark(4, 7, variant: 1))
            b.advance(to: Self.mark(2, 7))
            b.advance(to: Self.mark(3, 9))
            b.advance(to: Self.mark(4, 7, variant: 2))
            try a.save()
            try b.save()
            let expected = [Self.mark(1, 5), Self.mark(2, 7), Self.mark(3, 9), Self.mark(4, 7, variant: 1)]
            #expect(try MarkBook(vault: vault).all() == expected)
            // Each book now holds the merged marks: b took a's zone 1 and kept a's copy of zone 4.
            #expect(try b.all() == expected)
            #expect(try a.mark(forZone: Self.zone(1)) == Self.mark(1, 5))

            // a still knows zone 3 at 2: its advance to 4 is kept in memory, but the save keeps 9.
            a.advance(to: Self.mark(3, 4))
            #expect(a.hasUnsavedChanges)
            try a.save()
            #expect(try a.mark(forZone: Self.zone(3)) == Self.mark(3, 9))
            #expect(try MarkBook(vault: vault).mark(forZone: Self.zone(3)) == Self.mark(3, 9))
        }
    }

    /// 8 threads, each with its own book (as 8 processes), save 20 rounds each of their own zone
    /// and of one shared zone: nothing is lost, every zone ends at its highest seq.
    @Test(.timeLimit(.minutes(1)))
    func concurrentSavesLoseNothing() throws {
        try withTemporaryFolder { folder in
            let vault = try makeVault(in: folder)
            let books = try (0..<8).map { _ in try Vault.open(at: vault.url, passphrase: secure(testPassphrase)).marks }
            let failures = onThreads(8) { i in
                for round in 0..<20 {
                    books[i].advance(to: Self.mark(UInt8(i + 1), Int64(round)))
                    books[i].advance(to: Self.mark(100, Int64(round * 8 + i), variant: UInt8(i)))
                    try books[i].save()
                }
            }
            #expect(failures.isEmpty, "\(failures)")
            let all = try MarkBook(vault: vault).all()
            #expect(all == (1...8).map { Self.mark(UInt8($0), 19) } + [Self.mark(100, 19 * 8 + 7, variant: 7)])
            #expect(try folderContents(folder) == ["alice.coffer", "alice.coffer.lock", "alice.coffer.marks", "alice.coffer.marks.lock"])
        }
    }

    // MARK: - Up only, but for reset

    @Test func aMarkNeverGoesDownThroughAdvanceOrSave() throws {
        try withTemporaryFolder { folder in
            let vault = try makeVault(in: folder)
            let book = vault.marks
            book.advance(to: Self.mark(1, 10))
            book.advance(to: Self.mark(1, 5))
            book.advance(to: Self.mark(1, 10, variant: 9)) // same seq, another hash: not kept
            #expect(try book.mark(forZone: Self.zone(1)) == Self.mark(1, 10))
            try book.save()
            book.advance(to: Self.mark(1, 3))
            #expect(!book.hasUnsavedChanges)
            #expect(try book.mark(forZone: Self.zone(1)) == Self.mark(1, 10))

            // Another book advances lower before it has read the file: its save keeps the file's.
            let other = try MarkBook(vault: vault)
            other.advance(to: Self.mark(1, 4))
            #expect(other.hasUnsavedChanges)
            try other.save()
            #expect(!other.hasUnsavedChanges)
            #expect(try other.mark(forZone: Self.zone(1)) == Self.mark(1, 10))
            #expect(try MarkBook(vault: vault).mark(forZone: Self.zone(1)) == Self.mark(1, 10))

            // Higher goes up.
            book.advance(to: Self.mark(1, 11))
            try book.save()
            #expect(try MarkBook(vault: vault).mark(forZone: Self.zone(1)) == Self.mark(1, 11))
        }
    }

    @Test func resetSetsExactlyAndSavesAtOnce() throws {
        try withTemporaryFolder { folder in
            let vault = try makeVault(in: folder)
            let book = vault.marks
            book.advance(to: Self.mark(1, 10))
            book.advance(to: Self.mark(2, 20))
            try book.save()
            book.advance(to: Self.mark(1, 12)) // unsaved, and overruled by the reset
            book.advance(to: Self.mark(3, 30)) // unsaved, saved by the reset

            try book.reset(zone: Self.zone(1), to: Self.mark(1, 3))
            #expect(!book.hasUnsavedChanges)
            #expect(try book.mark(forZone: Self.zone(1)) == Self.mark(1, 3))
            #expect(try MarkBook(vault: vault).all() == [Self.mark(1, 3), Self.mark(2, 20), Self.mark(3, 30)])

            try book.reset(zone: Self.zone(2), to: nil)
            #expect(try book.mark(forZone: Self.zone(2)) == nil)
            #expect(try MarkBook(vault: vault).all() == [Self.mark(1, 3), Self.mark(3, 30)])

            // After a reset, marks go up from the new value.
            book.advance(to: Self.mark(1, 4))
            try book.save()
            #expect(try MarkBook(vault: vault).mark(forZone: Self.zone(1)) == Self.mark(1, 4))

            expectVaultError(.invalidArguments) { try book.reset(zone: Self.zone(1), to: Self.mark(2, 1)) }
            expectVaultError(.invalidArguments) { try book.reset(zone: [1, 2, 3], to: nil) }
            expectVaultError(.invalidArguments) { try book.mark(forZone: []) }
        }
    }

    // MARK: - Refusals

    /// A saved file with two marks, and the vault it belongs to.
    static func savedFile(in folder: URL) throws -> (Vault, [UInt8]) {
        let vault = try makeVault(in: folder)
        vault.marks.advance(to: mark(1, 5))
        vault.marks.advance(to: mark(2, 6, owner: ownerB))
        try vault.marks.save()
        return (vault, try readBytes(marksURL(vault)))
    }

    /// Expects a book of `vault` to refuse its marks file, saying what deleting it costs.
    @discardableResult
    static func expectRefused(_ vault: Vault, oneOf codes: [VaultError.Code] = [.malformed, .integrityFailure],
                              _ comment: Comment? = nil, sourceLocation: SourceLocation = #_sourceLocation) -> VaultError? {
        let error = expectVaultError(oneOf: codes, comment, sourceLocation: sourceLocation) {
            try MarkBook(vault: vault).mark(forZone: zone(1))
        }
        #expect(error?.message.contains("deleting it loses this user's rollback protection for every zone") == true,
                "\(error?.message ?? "")", sourceLocation: sourceLocation)
        #expect(error?.message.contains(marksURL(vault).path) == true, "names the file", sourceLocation: sourceLocation)
        return error
    }

    @Test func flippingAnyByteIsRefused() throws {
        try withTemporaryFolder { folder in
            let (vault, file) = try Self.savedFile(in: folder)
            let url = Self.marksURL(vault)
            for index in file.indices {
                for mask: UInt8 in [0x01, 0x80] {
                    var bad = file
                    bad[index] ^= mask
                    try writeBytes(bad, to: url)
                    Self.expectRefused(vault, "byte \(index) ^ \(mask)")
                }
            }
            // A damaged file is not saved over: the save fails and leaves it.
            var bad = file
            bad[file.count - 1] ^= 1
            try writeBytes(bad, to: url)
            let book = try MarkBook(vault: vault)
            book.advance(to: Self.mark(9, 1))
            expectVaultError(.integrityFailure) { try book.save() }
            #expect(try readBytes(url) == bad)
        }
    }

    @Test func truncatedOrExtendedFilesAreRefused() throws {
        try withTemporaryFolder { folder in
            let (vault, file) = try Self.savedFile(in: folder)
            for length in 0..<file.count {
                try writeBytes(Array(file.prefix(length)), to: Self.marksURL(vault))
                Self.expectRefused(vault, "\(length) bytes")
            }
            try writeBytes(file + [0], to: Self.marksURL(vault))
            Self.expectRefused(vault, oneOf: [.integrityFailure])
        }
    }

    @Test func aWrongMagicOrAnUnknownVersionIsNamed() throws {
        try withTemporaryFolder { folder in
            let (vault, file) = try Self.savedFile(in: folder)
            var magic = file
            magic.replaceSubrange(0..<8, with: Array("COFFERVT".utf8))
            try writeBytes(magic, to: Self.marksURL(vault))
            #expect(Self.expectRefused(vault, oneOf: [.malformed])?.message.contains("not a Coffer marks file") == true)
            for version: UInt16 in [0, 5, 0x0100, 0xffff] {
                var other = file
                putU16(version, into: &other, at: 8)
                try writeBytes(other, to: Self.marksURL(vault))
                #expect(Self.expectRefused(vault, oneOf: [.malformed])?.message.contains("version \(version)") == true)
            }
        }
    }

    @Test func aFileOfAnotherUsersVaultDoesNotOpen() throws {
        try withTemporaryFolder { folder in
            let (alice, _) = try Self.savedFile(in: folder)
            let bob = try makeVault(in: folder, file: "bob.coffer", name: "Bob")
            bob.marks.advance(to: Self.mark(1, 99))
            try bob.marks.save()
            try copyFile(Self.marksURL(bob), to: Self.marksURL(alice))
            let error = Self.expectRefused(alice, oneOf: [.integrityFailure])
            #expect(error?.message.contains("another vault") == true, "\(error?.message ?? "")")
        }
    }

    @Test(.timeLimit(.minutes(1)))
    func aFileOverTheMaximumIsRefusedUnread() throws {
        try withTemporaryFolder { folder in
            let (vault, _) = try Self.savedFile(in: folder)
            let handle = try FileHandle(forWritingTo: Self.marksURL(vault))
            try handle.truncate(atOffset: UInt64(MarksFormat.maxFileSize + 1)) // sparse
            try handle.close()
            let clock = ContinuousClock()
            let start = clock.now
            #expect(Self.expectRefused(vault, oneOf: [.malformed])?.message.contains("too large") == true)
            #expect(clock.now - start < .seconds(2))
            #expect(MarksFormat.maxFileSize == 10 + 40 + 4 + 100_000 * 89 + 4 + 1_000 * (1 + 255 + 16) + 4 + 100_000 * (16 + 1 + 8 * 16)
                    + 4 + 64 * (16 + 8 + 8 + 4 + 10_000 * 8 + 32 + 32))
        }
    }

    /// Files sealed with the right key, but holding what the writer never writes.
    static let craftedContents: [(String, [UInt8])] = {
        func entry(_ n: UInt8, owner: String = ownerA, seq: UInt64 = 1) -> [UInt8] {
            let owner = Array(owner.utf8)
            return zone(n) + [UInt8(owner.count)] + owner + BigEndian.bytes(seq) + [UInt8](repeating: 7, count: 32)
        }
        func list(_ entries: [[UInt8]], count: UInt32? = nil) -> [UInt8] {
            BigEndian.bytes(count ?? UInt32(entries.count)) + entries.flatMap { $0 }
        }
        return [
            ("a zone twice", list([entry(1), entry(1)])),
            ("zones out of order", list([entry(2), entry(1)])),
            ("an uppercase owner id", list([entry(1, owner: ownerA.uppercased())])),
            ("a short owner id", list([entry(1, owner: String(ownerA.dropLast()))])),
            ("a long owner id", list([entry(1, owner: ownerA + "0")])),
            ("an owner id that is not hex", list([entry(1, owner: "g" + ownerA.dropFirst())])),
            ("a seq over Int64.max", list([entry(1, seq: UInt64(Int64.max) + 1)])),
            ("a trailing byte", list([entry(1)]) + [0]),
            ("a missing byte", Array(list([entry(1)]).dropLast())),
            ("a count over the entries", list([entry(1)], count: 2)),
            ("a count under the entries", list([entry(1), entry(2)], count: 1)),
            ("a count over the maximum", list([], count: 100_001)),
            ("no count", []),
        ]
    }()

    @Test(arguments: craftedContents)
    func contentTheWriterNeverWritesIsRefused(_ what: String, _ plaintext: [UInt8]) throws {
        try withTemporaryFolder { folder in
            let vault = try makeVault(in: folder)
            let key = try MarksFormat.key(signingSeed: vault.read { $0.body.signingSeed })
            try writeBytes(try MarksFormat.seal(plaintext, key: key, userID: vault.identity.userID), to: Self.marksURL(vault))
            Self.expectRefused(vault, oneOf: [.integrityFailure], Comment(rawValue: what))
            // The same file with a well-formed content opens: the refusal is the content's.
            let good = BigEndian.bytes(UInt32(1)) + Self.mark(1, 1).zoneUID + [32] + Array(Self.ownerA.utf8)
                + BigEndian.bytes(UInt64(1)) + Self.mark(1, 1).hash
            try writeBytes(try MarksFormat.seal(good, key: key, userID: vault.identity.userID), to: Self.marksURL(vault))
            #expect(try MarkBook(vault: vault).all() == [Self.mark(1, 1)])
        }
    }

    // MARK: - Server pins

    static let storeA = [UInt8](repeating: 0xa1, count: 16)
    static let storeB = [UInt8](repeating: 0xb2, count: 16)

    /// First contact pins; the same origin with the same id is known; the origin with another
    /// id, or the id at another origin, is refused and pins nothing; forgetting drops the pin.
    @Test func serverPins() throws {
        try withTemporaryFolder { folder in
            let vault = try makeVault(in: folder)
            let a = "http://127.0.0.1:8080", b = "https://coffer.example.com:443/api"
            #expect(try vault.marks.checkPin(origin: a, storeID: Self.storeA) == .pinned)
            #expect(try vault.marks.checkPin(origin: a, storeID: Self.storeA) == .known)
            #expect(try vault.marks.checkPin(origin: a, storeID: Self.storeB) == .otherStore(pinned: Self.storeA))
            #expect(try vault.marks.checkPin(origin: b, storeID: Self.storeA) == .pinnedElsewhere(origin: a))
            #expect(try vault.marks.pins() == [ServerPin(origin: a, storeID: Self.storeA)])
            // Another process of the user's sees the pin, and its marks keep it.
            let other = try MarkBook(vault: vault)
            other.advance(to: Self.mark(1, 1))
            try other.save()
            #expect(try other.checkPin(origin: b, storeID: Self.storeB) == .pinned)
            let again = try Vault.open(at: vault.url, passphrase: secure(testPassphrase))
            #expect(try again.marks.pins().map(\.origin) == [a, b])
            #expect(try again.marks.all() == [Self.mark(1, 1)])
            #expect(try again.marks.forgetPin(origin: a) == ServerPin(origin: a, storeID: Self.storeA))
            #expect(try again.marks.forgetPin(origin: a) == nil)
            #expect(try again.marks.checkPin(origin: "https://coffer.example.org:443", storeID: Self.storeA) == .pinned,
                    "after forgetting, the id pins anew elsewhere")
            #expect(try MarkBook(vault: vault).pins().count == 2)
            expectVaultError(.invalidArguments) { try vault.marks.checkPin(origin: "ftp://x", storeID: Self.storeA) }
            expectVaultError(.invalidArguments) { try vault.marks.checkPin(origin: a, storeID: [1, 2]) }
        }
    }

    // MARK: - Stores zones were verified in

    /// Each zone notes the stores it was verified in; books merge them as they merge marks; a
    /// zone noted in more stores than are kept keeps the newest; a reset that removes the mark
    /// drops them; a file of an earlier version (no stores) opens, its zones of no store.
    @Test func storesOfZones() throws {
        try withTemporaryFolder { folder in
            let vault = try makeVault(in: folder)
            let a = try Vault.open(at: vault.url, passphrase: secure(testPassphrase)).marks
            let b = try Vault.open(at: vault.url, passphrase: secure(testPassphrase)).marks
            a.advance(to: Self.mark(1, 5), in: Self.storeA)
            b.advance(to: Self.mark(1, 5), in: Self.storeB) // the same mark, seen in another store
            b.advance(to: Self.mark(2, 1))
            #expect(b.hasUnsavedChanges)
            try a.save()
            try b.save()
            let fresh = try MarkBook(vault: vault)
            #expect(Set(try fresh.stores(ofZone: Self.zone(1))) == [Self.storeA, Self.storeB])
            #expect(try fresh.stores(ofZone: Self.zone(2)).isEmpty)
            // Noting a store already noted changes nothing.
            fresh.advance(to: Self.mark(1, 5), in: Self.storeA)
            #expect(!fresh.hasUnsavedChanges)
            // At most 8 stores a zone: the newest stay.
            let many = (0..<10).map { [UInt8](repeating: UInt8(0x10 + $0), count: 16) }
            for id in many { fresh.advance(to: Self.mark(3, 1), in: id) }
            try fresh.save()
            #expect(try MarkBook(vault: vault).stores(ofZone: Self.zone(3)) == Array(many.suffix(8)).sorted { $0.lexicographicallyPrecedes($1) })
            try fresh.reset(zone: Self.zone(1), to: nil)
            #expect(try MarkBook(vault: vault).stores(ofZone: Self.zone(1)).isEmpty)
            // A version 2 file (marks, no pins, no stores) opens, and is written as version 4.
            let key = try MarksFormat.key(signingSeed: vault.read { $0.body.signingSeed })
            let v2 = BigEndian.bytes(UInt32(1)) + Self.mark(1, 1).zoneUID + [32] + Array(Self.ownerA.utf8) + BigEndian.bytes(UInt64(1))
                + Self.mark(1, 1).hash + BigEndian.bytes(UInt32(0))
            try writeBytes(try MarksFormat.seal(v2, key: key, userID: vault.identity.userID, version: 2), to: Self.marksURL(vault))
            let old = try MarkBook(vault: vault)
            #expect(try old.stores(ofZone: Self.zone(1)).isEmpty)
            old.advance(to: Self.mark(1, 1), in: Self.storeA)
            try old.save()
            let written = try Data(contentsOf: Self.marksURL(vault))
            #expect(written[9] == 4)
            #expect(try MarkBook(vault: vault).stores(ofZone: Self.zone(1)) == [Self.storeA])
        }
    }

    /// Store sections of version 3 files that the writer never writes.
    static let craftedStores: [(String, [UInt8])] = {
        func id(_ n: UInt8, count: Int = 16) -> [UInt8] { [UInt8](repeating: n, count: count) }
        let zone = id(1)
        var nine = zone + [9]
        for n in 1...9 { nine += id(UInt8(n)) }
        return [
            ("stores of a zone without a mark", id(9) + [1] + id(0xa1)),
            ("a zone in no store", zone + [0]),
            ("a zone in nine stores", nine),
            ("stores out of order", zone + [2] + id(0xb2) + id(0xa1)),
            ("a store id cut short", zone + [1] + id(0xa1, count: 15)),
        ]
    }()

    /// Version 3 files sealed with the right key, but with stores the writer never writes.
    @Test(arguments: craftedStores)
    func craftedStoresAreRefused(_ what: String, _ section: [UInt8]) throws {
        try withTemporaryFolder { folder in
            let vault = try makeVault(in: folder)
            let key = try MarksFormat.key(signingSeed: vault.read { $0.body.signingSeed })
            let marks = BigEndian.bytes(UInt32(1)) + Self.mark(1, 1).zoneUID + [32] + Array(Self.ownerA.utf8) + BigEndian.bytes(UInt64(1))
                + Self.mark(1, 1).hash + BigEndian.bytes(UInt32(0))
            try writeBytes(try MarksFormat.seal(marks + BigEndian.bytes(UInt32(1)) + section, key: key, userID: vault.identity.userID, version: 3),
                           to: Self.marksURL(vault))
            Self.expectRefused(vault, oneOf: [.integrityFailure], Comment(rawValue: what))
            // With a well-formed section, the same file opens.
            let good = [UInt8](repeating: 1, count: 16) + [1] + [UInt8](repeating: 0xa1, count: 16)
            try writeBytes(try MarksFormat.seal(marks + BigEndian.bytes(UInt32(1)) + good, key: key, userID: vault.identity.userID, version: 3),
                           to: Self.marksURL(vault))
            #expect(try MarkBook(vault: vault).stores(ofZone: Self.zone(1)) == [[UInt8](repeating: 0xa1, count: 16)])
        }
    }

    /// Version 2 files sealed with the right key, but with pins the writer never writes.
    @Test(arguments: [
        ("pins out of order", [("http://b:1", [UInt8](repeating: 1, count: 16)), ("http://a:1", [UInt8](repeating: 2, count: 16))], [UInt8]()),
        ("an origin that is not http", [("ftp://a:1", [UInt8](repeating: 1, count: 16))], []),
        ("an origin with a space", [("http://a b:1", [UInt8](repeating: 1, count: 16))], []),
        ("a trailing byte", [("http://a:1", [UInt8](repeating: 1, count: 16))], [0]),
    ] as [(String, [(String, [UInt8])], [UInt8])])
    func craftedPinsAreRefused(_ what: String, _ pins: [(String, [UInt8])], _ trailing: [UInt8]) throws {
        try withTemporaryFolder { folder in
            let vault = try makeVault(in: folder)
            let key = try MarksFormat.key(signingSeed: vault.read { $0.body.signingSeed })
            var plaintext = BigEndian.bytes(UInt32(0)) + BigEndian.bytes(UInt32(pins.count))
            for (origin, id) in pins { plaintext += [UInt8(origin.utf8.count)] + Array(origin.utf8) + id }
            plaintext += trailing
            try writeBytes(try MarksFormat.seal(plaintext, key: key, userID: vault.identity.userID, version: 2), to: Self.marksURL(vault))
            Self.expectRefused(vault, oneOf: [.integrityFailure], Comment(rawValue: what))
        }
    }

    @Test func zoneMarksAreChecked() {
        let uid = Self.zone(1), hash = [UInt8](repeating: 0, count: 32)
        expectVaultError(.invalidArguments) { try ZoneMark(zoneUID: Array(uid.dropLast()), ownerID: Self.ownerA, seq: 0, hash: hash) }
        expectVaultError(.invalidArguments) { try ZoneMark(zoneUID: uid, ownerID: Self.ownerA.uppercased(), seq: 0, hash: hash) }
        expectVaultError(.invalidArguments) { try ZoneMark(zoneUID: uid, ownerID: "alice", seq: 0, hash: hash) }
        expectVaultError(.invalidArguments) { try ZoneMark(zoneUID: uid, ownerID: Self.ownerA, seq: -1, hash: hash) }
        expectVaultError(.invalidArguments) { try ZoneMark(zoneUID: uid, ownerID: Self.ownerA, seq: 0, hash: hash + [0]) }
        #expect((try? ZoneMark(zoneUID: uid, ownerID: Self.ownerA, seq: 0, hash: hash)) != nil)
    }

    // MARK: - Fixture

    /// `Keys/vault-v1-min.coffer.marks`: the marks of the vault fixture `vault-v1-min.coffer`
    /// (Fixture Alice), format v1. Must keep opening with this build.
    static let fixtureFile = "vault-v1-min.coffer.marks"
    static let fixtureVault = "vault-v1-min.coffer"
    static let fixturePassphrase = "throwaway fixture passphrase v1-min"
    static let fixtureMarks: [ZoneMark] = [
        try! ZoneMark(zoneUID: Array(0x00...0x0f), ownerID: "a0c6f2d5642152e45ed513e1c32e448b", seq: 7,
                      hash: BLAKE2b.hash(Array("coffer marks fixture 1".utf8))),
        try! ZoneMark(zoneUID: Array(0xf0...0xff), ownerID: "f590a7ac0a6faa86397330194f1b0313", seq: 0,
                      hash: BLAKE2b.hash(Array("coffer marks fixture 2".utf8))),
    ]

    @Test func theFixtureOpens() throws {
        let keys = VaultFixtureTests.keysFolder
        let original = try readBytes(keys.appendingPathComponent(Self.fixtureFile))
        try withTemporaryFolder { folder in
            let url = folder.appendingPathComponent(Self.fixtureVault)
            try copyFile(keys.appendingPathComponent(Self.fixtureVault), to: url)
            try writeBytes(original, to: URL(fileURLWithPath: url.path + ".marks"))
            #expect(Array(original[0..<10]) == Array("COFFERMK".utf8) + [0, 1])
            let vault = try Vault.open(at: url, passphrase: secure(Self.fixturePassphrase))
            #expect(try vault.marks.all() == Self.fixtureMarks)
            #expect(try vault.marks.mark(forZone: Array(0x00...0x0f))?.seq == 7)
            // This build writes over it, and reads back what it wrote.
            vault.marks.advance(to: try ZoneMark(zoneUID: Array(0x00...0x0f), ownerID: Self.fixtureMarks[0].ownerID, seq: 8,
                                                 hash: Self.fixtureMarks[0].hash))
            try vault.marks.save()
            #expect(try MarkBook(vault: vault).mark(forZone: Array(0x00...0x0f))?.seq == 8)
        }
        #expect(try readBytes(keys.appendingPathComponent(Self.fixtureFile)) == original, "Keys/ was not modified")
    }

    /// Writes the fixture. Run once, on purpose:
    /// `COFFER_WRITE_FIXTURES=1 swift test --filter MarkBookTests/writeFixture`. Never replaces it.
    @Test(.enabled(if: ProcessInfo.processInfo.environment["COFFER_WRITE_FIXTURES"] == "1",
                   "writes the marks fixture in Keys/ only when COFFER_WRITE_FIXTURES=1"))
    func writeFixture() throws {
        let keys = VaultFixtureTests.keysFolder
        let target = keys.appendingPathComponent(Self.fixtureFile)
        guard !FileManager.default.fileExists(atPath: target.path) else {
            Issue.record("Keys/\(Self.fixtureFile) exists; fixtures are never replaced")
            return
        }
        try withTemporaryFolder { folder in
            let url = folder.appendingPathComponent(Self.fixtureVault)
            try copyFile(keys.appendingPathComponent(Self.fixtureVault), to: url)
            let vault = try Vault.open(at: url, passphrase: secure(Self.fixturePassphrase))
            for mark in Self.fixtureMarks { vault.marks.advance(to: mark) }
            try vault.marks.save()
            try copyFile(vault.marks.url, to: target)
        }
    }

    // MARK: - I/O only when needed

    /// Opening a vault does not touch its marks: a damaged marks file goes unnoticed until the
    /// book is used, advancing touches nothing, and no marks file or lock appears.
    @Test func theBookDoesNoIOBeforeFirstUse() throws {
        try withTemporaryFolder { folder in
            let vault = try makeVault(in: folder)
            vault.marks.advance(to: Self.mark(1, 1))
            #expect(vault.marks.hasUnsavedChanges)
            #expect(try folderContents(folder) == ["alice.coffer", "alice.coffer.lock"])

            try writeBytes(Array("not a marks file".utf8), to: Self.marksURL(vault))
            let opened = try Vault.open(at: vault.url, passphrase: secure(testPassphrase))
            opened.marks.advance(to: Self.mark(2, 2))
            #expect(try folderContents(folder) == ["alice.coffer", "alice.coffer.lock", "alice.coffer.marks"])
            expectVaultError(.malformed) { try opened.marks.mark(forZone: Self.zone(2)) }
        }
    }

    /// Reading, and saving what the file already holds, neither writes the marks file nor takes
    /// its lock when nothing was advanced; the vault file is not touched at all.
    @Test func aReadOnlyUseNeverWritesTheFile() throws {
        try withTemporaryFolder { folder in
            let (vault, file) = try Self.savedFile(in: folder)
            let url = Self.marksURL(vault)
            try FileManager.default.removeItem(atPath: url.path + ".lock")
            let inode = try Self.inode(url)
            let vaultBytes = try readBytes(vault.url)

            let reader = try Vault.open(at: vault.url, passphrase: secure(testPassphrase)).marks
            #expect(try reader.all().count == 2)
            #expect(try reader.mark(forZone: Self.zone(1)) == Self.mark(1, 5))
            reader.advance(to: Self.mark(1, 5, variant: 3)) // equal seq: not kept
            reader.advance(to: Self.mark(2, 1, owner: Self.ownerB))
            #expect(!reader.hasUnsavedChanges)
            try reader.save()
            #expect(!FileManager.default.fileExists(atPath: url.path + ".lock"), "a read took the marks lock")

            // A book that advanced before reading saves only to find the file ahead: no write.
            let behind = try MarkBook(vault: vault)
            behind.advance(to: Self.mark(1, 2))
            try behind.save()
            #expect(try readBytes(url) == file)
            #expect(try Self.inode(url) == inode, "the marks file was rewritten")
            #expect(try readBytes(vault.url) == vaultBytes)
        }
    }

    /// The marks have their own lock: a process holding the vault's lock does not stop them;
    /// one holding the marks lock is waited for.
    @Test(.timeLimit(.minutes(1)))
    func marksUseTheirOwnLock() throws {
        try withTemporaryFolder { folder in
            let vault = try makeVault(in: folder)
            let vaultLock = try LockHolder(VaultFile.lockPath(forVault: vault.url))
            defer { vaultLock.release() }
            let clock = ContinuousClock()
            var start = clock.now
            vault.marks.advance(to: Self.mark(1, 1))
            try vault.marks.save()
            #expect(clock.now - start < .seconds(2))

            let marksLock = try LockHolder(Self.marksURL(vault).path + ".lock")
            let released = Thread.detach(after: 0.3) { marksLock.release() }
            start = clock.now
            vault.marks.advance(to: Self.mark(1, 2))
            try vault.marks.save()
            #expect(clock.now - start >= .milliseconds(250))
            released.wait()
            #expect(try MarkBook(vault: vault).mark(forZone: Self.zone(1)) == Self.mark(1, 2))
        }
    }

    @Test("a replica's pending-change queue: numbers issued once, finished for good, kept across books and merged under the lock")
    func pendingChangeQueues() throws {
        try withTemporaryFolder { folder in
            let vault = try makeVault(in: folder)
            let other = [UInt8](repeating: 0xb2, count: 16)
            #expect(try vault.marks.intents(ofStore: Self.storeA) == IntentMarks())
            let numbers = try vault.marks.updateIntents(ofStore: Self.storeA) { q in
                q.queueHash = Array(repeating: 7, count: 32)
                return [try q.issue(), try q.issue(), try q.issue(), try q.issue()]
            }
            #expect(numbers == [1, 2, 3, 4])
            // Another book (another process) issues on from where the file is.
            #expect(try MarkBook(vault: vault).updateIntents(ofStore: Self.storeA) { try $0.issue() } == 5)
            try vault.marks.updateIntents(ofStore: Self.storeA) { try $0.finish([2, 4]) }
            var q = try MarkBook(vault: vault).intents(ofStore: Self.storeA)
            #expect(q.issued == 5 && q.finishedThrough == 0 && q.finishedAbove == [2, 4])
            #expect(q.queueHash == Array(repeating: 7, count: 32))
            #expect(q.isFinished(2) && !q.isFinished(1) && q.isLive(1) && !q.isLive(6) && q.liveCount == 3)
            try vault.marks.updateIntents(ofStore: Self.storeA) { try $0.finish([1]) }
            q = try vault.marks.intents(ofStore: Self.storeA)
            #expect(q.finishedThrough == 2 && q.finishedAbove == [4], "a finished prefix is compacted")
            #expect(throws: VaultError.self) { try vault.marks.updateIntents(ofStore: Self.storeA) { try $0.finish([9]) } }
            #expect(try vault.marks.intents(ofStore: other) == IntentMarks(), "queues are per store")
            // Zone marks and queues live side by side.
            vault.marks.advance(to: Self.mark(1, 3))
            try vault.marks.save()
            #expect(try MarkBook(vault: vault).intents(ofStore: Self.storeA).issued == 5)
            #expect(try MarkBook(vault: vault).mark(forZone: Self.zone(1)) == Self.mark(1, 3))
            // A queue's finished numbers out of order (written by a hand that holds the key) are refused.
            let key = try MarksFormat.key(signingSeed: vault.read { $0.body.signingSeed })
            let bad = BigEndian.bytes(UInt32(0)) + BigEndian.bytes(UInt32(0)) + BigEndian.bytes(UInt32(0)) + BigEndian.bytes(UInt32(1)) + Self.storeA
                + BigEndian.bytes(UInt64(5)) + BigEndian.bytes(UInt64(0)) + BigEndian.bytes(UInt32(2)) + BigEndian.bytes(UInt64(4)) + BigEndian.bytes(UInt64(2))
                + [UInt8](repeating: 0, count: 64)
            try writeBytes(try MarksFormat.seal(bad, key: key, userID: vault.identity.userID, version: 4), to: Self.marksURL(vault))
            #expect(Self.expectRefused(vault, oneOf: [.integrityFailure])?.message.contains("out of order") == true)
        }
    }
}

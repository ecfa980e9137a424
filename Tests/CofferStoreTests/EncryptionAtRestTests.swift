import CofferCrypto
import CofferTestSupport
import CofferVault
import CofferStoreTestSupport
import Foundation
import GRDB
import Testing
@testable import CofferStore

/// Saves distinctive values in encrypted fields and searches the raw bytes of the store's
/// files for them in every likely encoding. A plain canary, saved the same way in a plain
/// field, must be found: that proves the scan reads the right files.
@Suite("Encryption at rest")
struct EncryptionAtRestTests {
    /// One value to look for, with every byte form it could take on disk.
    struct Canary: CustomStringConvertible {
        let label: String
        let forms: [(String, [UInt8])]
        var description: String { label }

        static func string(_ s: String, label: String) -> Canary {
            let utf8 = Array(s.utf8)
            var forms: [(String, [UInt8])] = [("UTF-8", utf8)]
            forms.append(("UTF-16LE", s.utf16.flatMap { [UInt8($0 & 0xff), UInt8($0 >> 8)] }))
            forms.append(("UTF-16BE", s.utf16.flatMap { [UInt8($0 >> 8), UInt8($0 & 0xff)] }))
            forms.append(("JSON-escaped", Array(s.unicodeScalars.map { $0.isASCII ? String($0) : String(format: "\\u%04x", $0.value) }.joined().utf8)))
            forms += bytesForms(utf8)
            return Canary(label: label, forms: forms)
        }

        static func bytes(_ b: [UInt8], label: String) -> Canary {
            var forms: [(String, [UInt8])] = [("raw", b)]
            forms.append(("UTF-16LE of bytes", b.flatMap { [$0, 0] }))
            forms.append(("UTF-16BE of bytes", b.flatMap { [0, $0] }))
            forms += bytesForms(b)
            return Canary(label: label, forms: forms)
        }

        static func int(_ v: Int64, label: String) -> Canary {
            let be = BigEndian.bytes(UInt64(bitPattern: v))
            let le = Array(be.reversed())
            let decimal = String(v)
            var forms: [(String, [UInt8])] = [
                ("decimal", Array(decimal.utf8)),
                ("decimal UTF-16LE", decimal.utf16.flatMap { [UInt8($0 & 0xff), UInt8($0 >> 8)] }),
                ("decimal UTF-16BE", decimal.utf16.flatMap { [UInt8($0 >> 8), UInt8($0 & 0xff)] }),
                ("int64 BE", be), ("int64 LE", le),
                ("hex", Array(String(UInt64(bitPattern: v), radix: 16).utf8)),
                ("HEX", Array(String(UInt64(bitPattern: v), radix: 16, uppercase: true).utf8)),
            ]
            forms += bytesForms(be).map { ("BE " + $0.0, $0.1) }
            forms += bytesForms(le).map { ("LE " + $0.0, $0.1) }
            return Canary(label: label, forms: forms)
        }

        /// Hex in both cases, and base64 (standard and URL-safe) at each of the three
        /// alignments the bytes could have inside a longer encoded run.
        static func bytesForms(_ b: [UInt8]) -> [(String, [UInt8])] {
            var forms: [(String, [UInt8])] = [
                ("hex", Array(Hex.encode(b).utf8)),
                ("HEX", Array(Hex.encode(b).uppercased().utf8)),
            ]
            for shift in 0..<3 {
                let encoded = Data(Array(repeating: 0, count: shift) + b).base64EncodedString()
                let chars = Array(encoded.utf8)
                let start = (shift * 8 + 5) / 6
                let end = ((shift + b.count) * 8) / 6
                guard end > start + 4 else { continue }
                let core = Array(chars[start..<end])
                forms.append(("base64+\(shift)", core))
                forms.append(("base64url+\(shift)", core.map { $0 == UInt8(ascii: "+") ? UInt8(ascii: "-") : $0 == UInt8(ascii: "/") ? UInt8(ascii: "_") : $0 }))
            }
            return forms
        }

        /// The forms found in `haystack`.
        func found(in haystack: [UInt8]) -> [String] {
            forms.filter { containsSubsequence(haystack, $0.1) }.map(\.0)
        }
    }

    /// The raw bytes of the database, -wal and -shm files (those that exist), by suffix.
    static func storeFiles(_ path: String) -> [(String, [UInt8])] {
        ["", "-wal", "-shm", "-journal"].compactMap { suffix in
            guard let data = FileManager.default.contents(atPath: path + suffix) else { return nil }
            return (suffix.isEmpty ? "db" : suffix, Array(data))
        }
    }

    /// Every encrypted canary must be absent from every file.
    static func expectAbsent(_ canaries: [Canary], in path: String, when: String, sourceLocation: SourceLocation = #_sourceLocation) {
        let files = storeFiles(path)
        #expect(files.contains { $0.0 == "db" }, sourceLocation: sourceLocation)
        for (file, bytes) in files {
            for canary in canaries {
                let hits = canary.found(in: bytes)
                #expect(hits.isEmpty, "\(when): encrypted \(canary) found in \(file) as \(hits)", sourceLocation: sourceLocation)
            }
        }
    }

    static func foundAnywhere(_ canary: Canary, in path: String) -> [String] {
        storeFiles(path).flatMap { file, bytes in canary.found(in: bytes).map { "\(file):\($0)" } }
    }

    struct Canaries {
        let text: String
        let unicodeText: String
        let int: Int64
        let smallInt: Int64
        let bytes: [UInt8]
        let listItem: String
        let plain: String
        let plainInt: Int64

        init() {
            text = "enc-" + randomLetters(28)
            unicodeText = "Geheimnis-" + randomLetters(12) + "-秘密-🔐-" + randomLetters(8)
            int = Int64.random(in: 1_000_000_000_000_000...Int64.max)
            smallInt = -Int64.random(in: 1_000_000_000_000...9_000_000_000_000)
            bytes = SecureRandom.bytes(count: 48)
            listItem = "item-" + randomLetters(24)
            plain = "plain-" + randomLetters(28)
            plainInt = Int64.random(in: 1_000_000_000_000_000...Int64.max)
        }

        var encrypted: [Canary] {
            [.string(text, label: "text"), .string(unicodeText, label: "unicode text"), .int(int, label: "int"),
             .int(smallInt, label: "negative int"), .bytes(bytes, label: "bytes"), .string(listItem, label: "list item")]
        }

        func record(_ name: String, in zone: ZoneID) -> CofferStore.Record {
            makeRecord("Vault", name, in: zone, plain: ["label": .string(plain), "serial": .int(plainInt)], encrypted: [
                "text": .string(text), "unicode": .string(unicodeText), "pin": .int(int), "balance": .int(smallInt),
                "key": .bytes(bytes), "items": .list([.string(listItem), .string("other")]),
            ])
        }
    }

    @Test("encrypted canaries never reach the database, WAL or shm; a plain canary does")
    func canaries() async throws {
        try await withTemporaryFolder { folder async throws in
            let path = storePath(in: folder)
            let canaries = Canaries()
            let vault = try makeVault(in: folder)
            do {
                let store = try Store(path: path)
                let alice = try store.session(vault: vault)
                let zone = try await alice.privateDatabase.createZone(named: "Secrets")
                // Saved, updated (a second version in the WAL), and saved in a batch with others.
                var record = try await alice.privateDatabase.save(canaries.record("one", in: zone))
                record.values["label"] = .string(canaries.plain + "-v2")
                _ = try await alice.privateDatabase.save(record)
                _ = try await alice.privateDatabase.modify(saving: (0..<50).map { canaries.record("many\($0)", in: zone) }, in: zone)
                // Read paths too (a query and fetches).
                _ = try await alice.privateDatabase.query(Query(recordType: "Vault", predicates: [.init("label", .equal, .string(canaries.plain))]), in: zone)
                _ = try await alice.privateDatabase.records(named: ["one", "many1"], in: zone)

                #expect(FileManager.default.fileExists(atPath: path + "-wal"))
                let wal = try #require(FileManager.default.contents(atPath: path + "-wal"))
                #expect(wal.count > 0)
                Self.expectAbsent(canaries.encrypted, in: path, when: "open")
                let plainHits = Self.foundAnywhere(.string(canaries.plain, label: "plain"), in: path)
                #expect(plainHits.contains { $0.hasSuffix("UTF-8") }, "the plain canary must be visible: \(plainHits)")
                let plainIntHits = Self.foundAnywhere(.int(canaries.plainInt, label: "plain int"), in: path)
                #expect(plainIntHits.contains { $0.hasSuffix("decimal") }, "the plain int must be visible: \(plainIntHits)")

                // Checkpoint into the main file while open.
                try await store.dbPool.writeWithoutTransaction { db in _ = try db.checkpoint(.truncate) }
                Self.expectAbsent(canaries.encrypted, in: path, when: "after checkpoint")
                #expect(!Self.foundAnywhere(.string(canaries.plain, label: "plain"), in: path).isEmpty)
            }
            // The store is closed (every reference dropped).
            Self.expectAbsent(canaries.encrypted, in: path, when: "closed")
            #expect(!Self.foundAnywhere(.string(canaries.plain, label: "plain"), in: path).isEmpty)

            // Reopen and read: still readable, still nothing on disk.
            let store = try Store(path: path)
            let alice = try store.session(vault: vault)
            let one = try await alice.privateDatabase.record(named: "one", in: alice.privateDatabase.zoneID(named: "Secrets"))
            #expect(one.encryptedValues["text"] == .string(canaries.text))
            #expect(one.encryptedValues["pin"] == .int(canaries.int))
            #expect(one.encryptedValues["key"] == .bytes(canaries.bytes))
            Self.expectAbsent(canaries.encrypted, in: path, when: "reopened")
        }
    }

    @Test("after deleting a record and a zone holding canaries, still nothing; the deleted plain canary is wiped")
    func afterDeletion() async throws {
        try await withTemporaryFolder { folder async throws in
            let path = storePath(in: folder)
            let canaries = Canaries()
            let vault = try makeVault(in: folder)
            do {
                let store = try Store(path: path)
                let alice = try store.session(vault: vault)
                let db = alice.privateDatabase
                let kept = try await db.createZone(named: "Kept")
                let doomed = try await db.createZone(named: "Doomed")
                _ = try await db.save(canaries.record("r", in: kept))
                _ = try await db.save(canaries.record("r", in: doomed))
                try await db.delete(recordNamed: "r", in: kept)
                Self.expectAbsent(canaries.encrypted, in: path, when: "after deleting a record")
                try await db.deleteZone(doomed)
                Self.expectAbsent(canaries.encrypted, in: path, when: "after deleting a zone")
                #expect(try await db.zones().map(\.id) == [kept])
            }
            Self.expectAbsent(canaries.encrypted, in: path, when: "closed after deletions")
            // secure_delete: once checkpointed and closed, the plain values of deleted rows are gone too.
            let plainHits = Self.foundAnywhere(.string(canaries.plain, label: "plain"), in: path)
            #expect(plainHits.isEmpty, "deleted plain canary still on disk: \(plainHits)")
        }
    }

    @Test("a deleted record's plain values leave the store file and its write-ahead log at once, while the store is open; the rest at close")
    func deletedValuesLeaveTheWriteAheadLog() async throws {
        try await withTemporaryFolder { folder async throws in
            let path = storePath(in: folder)
            let canaries = Canaries()
            let vault = try makeVault(in: folder)
            let store = try Store(path: path)
            let db = try store.session(vault: vault).privateDatabase
            let zone = try await db.createZone(named: "Kept")
            _ = try await db.save(canaries.record("r", in: zone))
            _ = try await db.save(makeRecord("Vault", "other", in: zone, plain: ["label": .string("other")]))
            #expect(!Self.foundAnywhere(.string(canaries.plain, label: "plain"), in: path).isEmpty, "the plain control is not found: the scan is blind")
            try await db.delete(recordNamed: "r", in: zone)
            let hits = Self.foundAnywhere(.string(canaries.plain, label: "plain"), in: path)
            #expect(hits.isEmpty, "a deleted plain value is still on disk while the store is open: \(hits)")
            Self.expectAbsent(canaries.encrypted, in: path, when: "after deleting a record, the store open")

            // A replaced plain value: gone once the log is truncated (at close, or when the CLI's command ends).
            let replaced = "Replaced-\(UUID().uuidString)"
            var other = try await db.record(named: "other", in: zone)
            other.values["label"] = .string(replaced)
            other = try await db.save(other)
            other.values["label"] = .string("newer")
            _ = try await db.save(other)
            store.truncateWriteAheadLog()
            let left = Self.foundAnywhere(.string(replaced, label: "replaced"), in: path)
            #expect(left.isEmpty, "a replaced plain value is still on disk once the log was truncated: \(left)")
        }
    }

    @Test("the records of one batch (nonces drawn for the batch at once) and of the next batch all carry different nonces")
    func batchNoncesDiffer() async throws {
        try await withStore { f async throws in
            let zone = try await f.db.createZone(named: "Z")
            let value = "same-" + randomLetters(20)
            func nonces() async throws -> [[UInt8]] {
                // Envelope header (5 bytes), then the 24-byte nonce.
                try await f.store.dbPool.read { db in try Data.fetchAll(db, sql: "SELECT sealed FROM record") }.map { Array($0[5..<29]) }
            }
            let first = (0..<120).map { makeRecord("Note", "r\($0)", in: zone, encrypted: ["s": .string(value)]) }
            let saved = try await f.db.modify(saving: first, in: zone).saved
            let batch1 = try await nonces()
            // Saved again in one batch: new nonces again, none reused from the first batch.
            _ = try await f.db.modify(saving: saved, in: zone)
            let batch2 = try await nonces()
            _ = try await f.db.modify(saving: (0..<40).map { makeRecord("Note", "s\($0)", in: zone, encrypted: ["s": .string(value)]) }, in: zone)
            let batch3 = try await nonces().filter { !batch2.contains($0) }
            #expect(batch1.count == 120 && batch2.count == 120 && batch3.count == 40)
            let all = Set(batch1 + batch2 + batch3)
            #expect(all.count == 280)
            #expect(!all.contains([UInt8](repeating: 0, count: 24)))
            for record in try await f.db.records(named: (0..<120).map { "r\($0)" }, in: zone).values {
                #expect(try record.get().encryptedValues["s"] == .string(value))
            }
        }
    }

    @Test("equal encrypted values in two records have different ciphertexts")
    func noEqualityLeak() async throws {
        try await withStore { f async throws in
            let zone = try await f.db.createZone(named: "Z")
            let value = "same-" + randomLetters(20)
            _ = try await f.db.save(makeRecord("Note", "a", in: zone, encrypted: ["s": .string(value)]))
            _ = try await f.db.save(makeRecord("Note", "b", in: zone, encrypted: ["s": .string(value)]))
            var c = try await f.db.save(makeRecord("Note", "c", in: zone, encrypted: ["s": .string(value)]))
            c = try await f.db.save(c) // same values, saved again: a new nonce
            let blobs = try await f.store.dbPool.read { db in try Data.fetchAll(db, sql: "SELECT sealed FROM record ORDER BY name") }
            #expect(blobs.count == 3)
            #expect(Set(blobs).count == 3)
            // Same-length values pad to the same bucket: the blobs have equal lengths.
            #expect(Set(blobs.map(\.count)).count == 1)
            // Different short lengths fall into one bucket too.
            _ = try await f.db.save(makeRecord("Note", "d", in: zone, encrypted: ["s": "x"]))
            _ = try await f.db.save(makeRecord("Note", "e", in: zone, encrypted: ["s": .string(String(repeating: "y", count: 40))]))
            let lengths = try await f.store.dbPool.read { db in
                try Int.fetchAll(db, sql: "SELECT length(sealed) FROM record WHERE name IN ('d', 'e')")
            }
            #expect(lengths.count == 2 && lengths[0] == lengths[1])
            #expect(lengths.first == 64 + Envelope.overhead)
        }
    }

    @Test("plain values stay where queries find them; encrypted values leave no trace in plain columns or the schema")
    func plainColumns() async throws {
        try await withStore { f async throws in
            let zone = try await f.db.createZone(named: "Z")
            let secret = "hidden-" + randomLetters(20)
            _ = try await f.db.save(makeRecord("Note", "n", in: zone, plain: ["title": "shown"], encrypted: ["body": .string(secret)]))
            let row = try #require(try await f.store.dbPool.read { db in try Row.fetchOne(db, sql: "SELECT * FROM record") })
            #expect(row["plain"] as String == #"{"title":"shown"}"#)
            for column in row.columnNames where column != "sealed" {
                let value = row[column] as DatabaseValue
                #expect(!"\(value)".contains(secret), "\(column)")
            }
            let everything = try await f.store.dbPool.read { db in
                try String.fetchAll(db, sql: "SELECT quote(sql) FROM sqlite_master WHERE sql IS NOT NULL")
                    + String.fetchAll(db, sql: "SELECT field || value_type FROM field_schema")
            }
            #expect(!everything.joined().contains(secret))
        }
    }
}

import CofferStoreTestSupport
import Foundation
import Testing
@testable import CofferStore

/// The server API's binary encoding (Sources/CofferStore/Storage/Remote/WireBinary.swift): what
/// it encodes decodes to the same value; a body it did not write is refused with
/// `.invalidArguments`, never a crash; the server takes it and answers in kind.
@Suite("server API bodies: the binary encoding")
struct WireBinaryTests {
    struct Inner: Codable, Equatable { var a: Int; var b: String? }
    struct Outer: Codable, Equatable { var items: [Inner]; var name: String; var blob: Data?; var ratio: Double?; var flag: Bool? }
    /// A type that nests itself, for the depth limit.
    final class Node: Codable { var child: Node?; init(child: Node?) { self.child = child } }

    static let version: WireVersion = {
        let fields: [String: Any] = ["name": "n1", "type": "Note", "seq": 7, "epoch": 1, "membershipSeq": 2, "creator": "alice", "modifier": "bob",
                                     "created": 1.5, "modified": 2.25, "plain": Data([1, 2, 3]).base64EncodedString(), "plainTypes": Data([9]).base64EncodedString(),
                                     "sealed": Data(repeating: 0xfe, count: 300).base64EncodedString()]
        return try! JSONDecoder().decode(WireVersion.self, from: try! JSONSerialization.data(withJSONObject: fields))
    }()

    /// A record's insert, its version with a parent.
    static func sampleWrite() -> WireWrite {
        var version = Self.version
        version.parent = "p0"
        var write = WireWrite(op: "records/insert")
        write.zone = Data(repeating: 5, count: 16)
        write.version = version
        write.keep = true
        return write
    }

    /// A read's answer with rows, entries, and a value known to be missing.
    static func sampleAnswer() -> RemoteAPI.ReadResponse {
        var tables = WireTables()
        let zone = Data(repeating: 5, count: 16)
        tables.records = [.init(k: zone, v: [.init(k: "n1", v: .init(value: version)), .init(k: "gone", v: .init(value: nil))])]
        tables.heads = [.init(k: zone, v: .init(value: .init(seq: 9, hash: Data(repeating: 1, count: 32))))]
        tables.logs = [.init(k: zone, v: .init(after: 0, entries: [.init(StoredLogEntry(seq: 1, body: [1, 2], signature: Array(repeating: 3, count: 64), entries: nil, names: [4]))]))]
        tables.zoneMembers = [.init(k: zone, v: ["alice", "bob"])]
        return RemoteAPI.ReadResponse(tables: tables, moved: true, pin: nil)
    }

    func refusal<T: Codable>(_ type: T.Type, _ body: Data) -> String? {
        do {
            _ = try RemoteAPI.decode(type, body, what: "body")
            return nil
        } catch let error as StoreError {
            #expect(error.code == .invalidArguments)
            return error.message
        } catch {
            return "\(error)"
        }
    }

    /// A body of one value: the magic and `bytes`.
    static func body(_ bytes: [UInt8]) -> Data { Data(WireBinary.magic + bytes) }
    static func u32(_ n: Int) -> [UInt8] { withUnsafeBytes(of: UInt32(n).littleEndian) { Array($0) } }
    static func text(_ s: String) -> [UInt8] { u32(s.utf8.count) + Array(s.utf8) }
    static func string(_ s: String) -> [UInt8] { [5] + text(s) }
    static func int(_ n: Int64) -> [UInt8] { [3] + withUnsafeBytes(of: n.littleEndian) { Array($0) } }
    static func array(_ items: [[UInt8]]) -> [UInt8] { let c = items.flatMap { $0 }; return [7] + u32(c.count) + c }
    static func object(_ members: [(String, [UInt8])]) -> [UInt8] { let c = members.flatMap { text($0.0) + $0.1 }; return [8] + u32(c.count) + c }

    @Test("what it encodes decodes to the same value: a read's answer, a batch, nulls and bytes; a body starts with its magic")
    func roundTrip() throws {
        let answer = Self.sampleAnswer()
        let data = try RemoteAPI.wire(answer)
        let asJSON = try RemoteAPI.encoder.encode(answer)
        #expect(WireBinary.isBinary(data) && !WireBinary.isBinary(asJSON))
        let back = try RemoteAPI.decode(RemoteAPI.ReadResponse.self, data, what: "read")
        // The same value: the same JSON.
        #expect(try RemoteAPI.encoder.encode(back) == asJSON)
        // Bytes travel as themselves: the sealed row is in the body as is.
        #expect(data.range(of: Data(repeating: 0xfe, count: 300)) != nil)

        let write = Self.sampleWrite()
        let batch = RemoteAPI.ModifyRequest(operation: Data(repeating: 7, count: 16), writes: [write, WireWrite(op: "zones/touch")])
        let decoded = try RemoteAPI.decode(RemoteAPI.ModifyRequest.self, try RemoteAPI.wire(batch), what: "batch")
        #expect(decoded.writes == batch.writes && decoded.operation == batch.operation)

        let outer = Outer(items: [Inner(a: -3, b: nil), Inner(a: Int.max, b: "é\u{0}x")], name: "", blob: Data(), ratio: -0.0, flag: false)
        #expect(try WireBinary.decode(Outer.self, from: WireBinary.encode(outer)) == outer)
        // A null where an optional is: absent.
        let withNull = Self.body(Self.object([("items", Self.array([])), ("name", Self.string("n")), ("blob", [0])]))
        #expect(try WireBinary.decode(Outer.self, from: withNull) == Outer(items: [], name: "n", blob: nil, ratio: nil, flag: nil))
    }

    @Test("a body it did not write is refused, naming why: unknown or repeated keys, wrong types, lengths past their container, trailing bytes, bad text, non-finite numbers, deep nesting")
    func refusesWhatItDoesNotKnow() throws {
        let good: [(String, [UInt8])] = [("items", Self.array([Self.object([("a", Self.int(1))])])), ("name", Self.string("n"))]
        #expect(refusal(Outer.self, Self.body(Self.object(good))) == nil)
        #expect(refusal(Outer.self, Self.body(Self.object(good + [("extra", [0])])))?.contains("an unknown field 'extra'") == true)
        let inner = Self.array([Self.object([("a", Self.int(1)), ("c", Self.int(2))])])
        #expect(refusal(Outer.self, Self.body(Self.object([("items", inner), ("name", Self.string("n"))])))?.contains("an unknown field 'c'") == true)
        #expect(refusal(Outer.self, Self.body(Self.object(good + [("name", Self.string("m"))])))?.contains("twice") == true)
        #expect(refusal(Outer.self, Self.body(Self.object([("items", Self.array([])), ("name", Self.int(5))])))?.contains("wrong type") == true)
        #expect(refusal(Outer.self, Self.body(Self.object([("items", Self.array([]))])))?.contains("no 'name'") == true)
        #expect(refusal(Outer.self, Self.body(Self.object(good) + [0]))?.contains("bytes after the value") == true)
        #expect(refusal(Outer.self, Self.body([9]))?.contains("unknown value tag") == true)
        // A length that runs past its container (the object's, not just the body's end).
        let long = Self.object([("items", [7] + Self.u32(1_000) + Self.int(1)), ("name", Self.string("n"))])
        #expect(refusal(Outer.self, Self.body(long))?.contains("runs past") == true)
        // Text that is not UTF-8, in a value and in a key.
        #expect(refusal(Outer.self, Self.body(Self.object([("items", Self.array([])), ("name", [5] + Self.u32(2) + [0xc3, 0x28])])))?.contains("UTF-8") == true)
        #expect(refusal(Outer.self, Self.body([8] + Self.u32(7) + Self.u32(2) + [0xff, 0xfe] + [0]))?.contains("UTF-8") == true)
        // ASCII up to a byte that is not (ASCII text is taken without the validating initializer).
        #expect(refusal(Outer.self, Self.body(Self.object([("items", Self.array([])), ("name", [5] + Self.u32(3) + [0x61, 0x62, 0xff])])))?.contains("UTF-8") == true)
        // Numbers: not finite, or out of the type's range.
        let nan = [4] + withUnsafeBytes(of: Double.nan.bitPattern.littleEndian) { Array($0) }
        #expect(refusal(Outer.self, Self.body(Self.object(good + [("ratio", nan)])))?.contains("not finite") == true)
        struct Small: Codable { var n: Int8 }
        #expect(refusal(Small.self, Self.body(Self.object([("n", Self.int(300))])))?.contains("wrong type") == true)
        // A body without the magic is read as JSON (and this is not JSON).
        #expect(refusal(Outer.self, Data(Self.object(good))) != nil)
        // Nesting past 64 containers.
        var deep = Self.object([])
        for _ in 0..<100 { deep = Self.object([("child", deep)]) }
        #expect(refusal(Node.self, Self.body(deep))?.contains("nested over 64") == true)
        var shallow = Self.object([])
        for _ in 0..<20 { shallow = Self.object([("child", shallow)]) }
        #expect(refusal(Node.self, Self.body(shallow)) == nil)
    }

    /// `T` decoded from a body by `Codable`'s keyed containers, as every type but the bulk ones is.
    static func viaCodable<T: Decodable>(_ type: T.Type, _ data: Data) throws -> T {
        guard WireBinary.isBinary(data) else { throw WireBinary.corrupt([], "not a binary body") }
        return try data.withUnsafeBytes { raw in
            let reader = WireBinary.Reader(raw)
            guard try reader.end(of: 4, within: raw.count, nil) == raw.count else { throw WireBinary.corrupt([], "bytes after the value") }
            return try T(from: WireBinary.ValueDecoder(reader: reader, at: 4, node: nil, depth: 1))
        }
    }

    /// The outcome of a decoding, as a value or as the line an error is reported with.
    static func outcome<T: Decodable>(_ decode: () throws -> T) -> Result<T, WireError> {
        Result { try decode() }.mapError { WireError(line: RemoteAPI.describe($0, binary: true)) }
    }
    struct WireError: Error, Equatable { let line: String }

    @Test("a record version and a write, read in one pass, decode as Codable decodes them: the same value, or the same refusal for every cut and changed byte")
    func onePassAsCodable() throws {
        // The keys it reads are the types' stored properties, in order.
        #expect(Mirror(reflecting: Self.version).children.map(\.label) == WireVersion.wireKeys.map { Optional($0) })
        #expect(Mirror(reflecting: WireWrite(op: "x")).children.map(\.label) == WireWrite.wireKeys.map { Optional($0) })
        var write = Self.sampleWrite()
        let version = try #require(write.version)
        write.users = ["alice", "bob"]
        write.head = 3
        write.time = 1.5
        write.encrypted = false
        write.label = "é"
        let bodies = [try WireBinary.encode(write), try WireBinary.encode(version)]
        // Written in one pass, a version and a write have the bytes Codable writes, with or
        // without their optionals.
        func viaCodable(_ value: some Encodable) throws -> [UInt8] {
            let codable = WireBinary.Writer()
            codable.bytes = WireBinary.magic
            let encoder = WireBinary.ValueEncoder(writer: codable, codingPath: [])
            try value.encode(to: encoder)
            try codable.close(try #require(encoder.opened), path: [])
            return codable.bytes
        }
        var bare = version
        (bare.parent, bare.plainTypes, bare.sealed) = (nil, nil, nil)
        for sample in [version, bare] {
            #expect(Array(try WireBinary.encode(sample)) == (try viaCodable(sample)))
            #expect(try WireBinary.decode(WireVersion.self, from: WireBinary.encode(sample)) == sample)
        }
        // Every member of a write set, one after another, and none but `op`.
        var full = write
        (full.zone, full.uid, full.owner, full.name, full.created, full.user, full.reason) = (Data([1]), Data([2]), "o", "n", 2.5, "u", "r")
        (full.body, full.signature, full.entries, full.names, full.epoch, full.bytes, full.secret) = (Data([3]), Data([4]), Data([5]), Data([6]), 9, Data([7]), Data([8]))
        (full.recordType, full.field, full.valueType, full.storedSeq, full.keep, full.seq) = ("T", "f", "string", 4, true, 5)
        (full.card, full.email, full.signingKey, full.boxKey, full.cardCreated) = (Data([9]), "e@x", Data([10]), Data([11]), "2026")
        #expect(Mirror(reflecting: full).children.allSatisfy { child in (child.value as Any?).map { "\($0)" } != "nil" })
        for sample in [write, full, WireWrite(op: "zones/touch")] {
            #expect(Array(try WireBinary.encode(sample)) == (try viaCodable(sample)))
            #expect(try WireBinary.decode(WireWrite.self, from: WireBinary.encode(sample)) == sample)
        }
        #expect(try WireBinary.decode(WireWrite.self, from: bodies[0]) == write)
        #expect(try WireBinary.decode(WireVersion.self, from: bodies[1]) == version)
        var generator = SystemRandomNumberGenerator()
        for (index, data) in bodies.enumerated() {
            var variants = (0..<data.count).map { data.prefix($0) }
            for _ in 0..<4_000 {
                var changed = data
                changed[Int.random(in: 4..<data.count, using: &generator)] = UInt8.random(in: 0...255, using: &generator)
                variants.append(changed)
            }
            for variant in variants {
                if index == 0 {
                    #expect(Self.outcome { try WireBinary.decode(WireWrite.self, from: variant) } == Self.outcome { try Self.viaCodable(WireWrite.self, variant) })
                } else {
                    #expect(Self.outcome { try WireBinary.decode(WireVersion.self, from: variant) } == Self.outcome { try Self.viaCodable(WireVersion.self, variant) })
                }
            }
        }
        // And what the keyed container refuses, named the same way.
        let object = Self.object([("op", Self.string("zones/touch")), ("keep", Self.string("yes"))])
        #expect(refusal(WireWrite.self, Self.body(object))?.contains("wrong type at .keep") == true)
        #expect(refusal(WireWrite.self, Self.body(Self.object([("keep", [2])])))?.contains("no 'op'") == true)
        #expect(refusal(WireWrite.self, Self.body(Self.object([("op", Self.string("a")), ("op", Self.string("b"))])))?.contains("the field 'op' twice") == true)
        #expect(refusal(WireWrite.self, Self.body(Self.object([("op", Self.string("a")), ("opp", [0])])))?.contains("an unknown field 'opp'") == true)
    }

    @Test("every cut and every changed byte of a real body is refused or decoded, never a crash")
    func cutsAndFlips() throws {
        let data = try RemoteAPI.wire(Self.sampleAnswer())
        for length in 0..<data.count {
            #expect(refusal(RemoteAPI.ReadResponse.self, data.prefix(length)) != nil, "a body cut at \(length) bytes was taken")
        }
        var generator = SystemRandomNumberGenerator()
        for _ in 0..<3_000 {
            var changed = data
            let at = Int.random(in: 4..<data.count, using: &generator)
            changed[at] = UInt8.random(in: 0...255, using: &generator)
            _ = refusal(RemoteAPI.ReadResponse.self, changed)
        }
    }

    @Test("the server takes binary bodies and answers in kind; JSON bodies still get JSON; a hostile binary body is a 400", arguments: [TestBackend.server])
    func serverAnswersInKind(_ backend: TestBackend) async throws {
        try await withServer(backend) { fixture in
            let vault = try await fixture.user("Alice", "alice@example.com").vault
            let request = RemoteAPI.ReadRequest(needs: [], basis: RemoteAPI.Basis())
            let binary = try await fixture.signedData(vault, "POST", RemoteAPI.Path.read, body: try RemoteAPI.wire(request))
            #expect(binary.status == 200 && binary.contentType == RemoteAPI.binaryType && WireBinary.isBinary(binary.body))
            #expect(try RemoteAPI.decode(RemoteAPI.ReadResponse.self, binary.body, what: "read").moved == false)
            let json = try await fixture.signedData(vault, "POST", RemoteAPI.Path.read, body: try RemoteAPI.encoder.encode(request))
            #expect(json.status == 200 && json.contentType == "application/json" && !WireBinary.isBinary(json.body))
            // A batch with a field no write has: refused, as in JSON.
            let hostile = Self.body(Self.object([("operation", [6] + Self.u32(16) + Array(repeating: 1, count: 16)),
                                                 ("writes", Self.array([Self.object([("op", Self.string("zones/touch")), ("sneaky", Self.int(1))])]))]))
            let refused = try await fixture.signed(vault, "POST", RemoteAPI.Path.modify, body: hostile)
            #expect(refused.status == 400 && refused.body["code"] as? String == "invalidArguments", "\(refused.body)")
            #expect((refused.body["message"] as? String)?.contains("unknown field 'sneaky'") == true, "\(refused.body)")
        }
    }
}

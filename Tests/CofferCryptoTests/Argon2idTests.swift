import CofferTestSupport
import Foundation
import Testing
@testable import CofferCrypto

/// Only `.min` is used for derivations, plus a single `.interactive` run. The moderate and
/// sensitive presets are checked by value, never run (256 MiB / 1 GiB).
@Suite("Argon2id")
struct Argon2idTests {
    static let salt = (0..<16).map { UInt8($0) } // 000102...0f
    static let passphrase = "correct horse battery staple"

    static func derive(_ passphrase: String, salt: [UInt8] = salt, parameters: Argon2id.Parameters = .min) throws -> [UInt8] {
        try Argon2id.deriveKey(passphrase: SecureBytes(copying: Array(passphrase.utf8)), salt: salt, parameters: parameters)
            .bytes.unsafeCopiedBytes()
    }

    @Test("known answer at .min (t=1, m=8 KiB, p=1), cross-checked with OpenSSL's Argon2id")
    func knownAnswerMin() throws {
        #expect(hexString(try Self.derive(Self.passphrase))
            == "d17ea6341ca93da6079ea2f64dc4aa31dd1aaf9caa67fb42ac4afd0714706f26")
        #expect(hexString(try Self.derive(""))
            == "31ed41e2d73f27fdfe4eb4bec651341e58ba43477051c6fe4adad735d82ee08a")
    }

    @Test("known answer at .interactive (t=2, m=64 MiB), the only interactive run")
    func knownAnswerInteractive() throws {
        #expect(hexString(try Self.derive(Self.passphrase, parameters: .interactive))
            == "c05ce4c4dd7e0e45ee6011cc59d068ade47df1b01fc0cf9cd4678bdf68a5b7b0")
    }

    @Test("deterministic for the same passphrase, salt and parameters")
    func deterministic() throws {
        let pass = SecureBytes(copying: Array("hunter2".utf8))
        let salt = SecureRandom.bytes(count: Argon2id.saltByteCount)
        let k1 = try Argon2id.deriveKey(passphrase: pass, salt: salt, parameters: .min)
        let k2 = try Argon2id.deriveKey(passphrase: pass, salt: salt, parameters: .min)
        #expect(k1 == k2)
        #expect(k1.bytes.count == 32)
    }

    @Test("a different salt gives a different key")
    func differentSalt() throws {
        let a = try Self.derive(Self.passphrase)
        let b = try Self.derive(Self.passphrase, salt: flipping(Self.salt, at: 15, mask: 0x01))
        #expect(a != b)
    }

    @Test("a different passphrase gives a different key")
    func differentPassphrase() throws {
        let a = try Self.derive(Self.passphrase)
        #expect(a != (try Self.derive(Self.passphrase + " ")))
        #expect(a != (try Self.derive("Correct horse battery staple")))
    }

    @Test("different parameters give a different key")
    func differentParameters() throws {
        let a = try Self.derive(Self.passphrase)
        #expect(a != (try Self.derive(Self.passphrase, parameters: Argon2id.Parameters(opsLimit: 2, memoryKiB: 8))))
        #expect(a != (try Self.derive(Self.passphrase, parameters: Argon2id.Parameters(opsLimit: 1, memoryKiB: 16))))
    }

    @Test("a salt of the wrong length is malformed input", arguments: [0, 8, 15, 17, 32])
    func wrongSaltLength(_ length: Int) {
        let error = #expect(throws: CryptoError.self) {
            try Argon2id.deriveKey(passphrase: SecureBytes(copying: Array("pw".utf8)),
                                   salt: [UInt8](repeating: 1, count: length), parameters: .min)
        }
        #expect(error?.isMalformedInput == true, "\(String(describing: error))")
    }

    @Test("Parameters outside the limits are refused with parametersOutOfRange",
          arguments: [
              (UInt32(0), UInt32(8)), // no pass
              (11, 8), // more than 10 passes
              (UInt32.max, 8),
              (1, (1 << 20) + 1), // above 1 GiB
              (1, UInt32.max),
              (1, 7), // below libsodium's 8 KiB minimum
              (1, 0),
          ] as [(UInt32, UInt32)])
    func parametersOutOfRange(_ ops: UInt32, _ kib: UInt32) {
        let error = #expect(throws: CryptoError.self) {
            try Argon2id.Parameters(opsLimit: ops, memoryKiB: kib)
        }
        #expect(error?.isParametersOutOfRange == true, "\(String(describing: error))")
    }

    @Test("Parameters at the edges of the limits are accepted",
          arguments: [(UInt32(1), UInt32(8)), (10, 8), (1, 1 << 20), (10, 1 << 20), (3, 262_144)] as [(UInt32, UInt32)])
    func parametersAtEdges(_ ops: UInt32, _ kib: UInt32) throws {
        let p = try Argon2id.Parameters(opsLimit: ops, memoryKiB: kib)
        #expect(p.opsLimit == ops)
        #expect(p.memoryKiB == kib)
    }

    @Test("limits and presets have libsodium's values and lie inside the limits")
    func presets() throws {
        #expect(Argon2id.limits.ops == 1...10)
        #expect(Argon2id.limits.memoryKiB == 8...(1 << 20))
        #expect(Argon2id.saltByteCount == 16)
        let expected: [(Argon2id.Parameters, UInt32, UInt32)] = [
            (.min, 1, 8),
            (.interactive, 2, 65_536),
            (.moderate, 3, 262_144),
            (.sensitive, 4, 1_048_576),
        ]
        for (preset, ops, kib) in expected {
            #expect(preset.opsLimit == ops)
            #expect(preset.memoryKiB == kib)
            // Every preset passes the checked initialiser (deriveKey re-checks it).
            #expect(try Argon2id.Parameters(opsLimit: preset.opsLimit, memoryKiB: preset.memoryKiB) == preset)
        }
        #expect(Argon2id.Parameters.moderate.description == "Argon2id(passes: 3, memory: 262144 KiB)")
    }
}

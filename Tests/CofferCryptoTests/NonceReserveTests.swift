import Dispatch
import Foundation
import Synchronization
import Testing
@testable import CofferCrypto

@Suite("Nonce reserve")
struct NonceReserveTests {
    /// The nonce of each envelope (after the 5-byte header).
    static func nonce(of sealed: [UInt8]) -> [UInt8] {
        Array(sealed[Envelope.headerByteCount..<Envelope.headerByteCount + XChaCha20Poly1305.nonceByteCount])
    }

    static func seal(_ plaintext: [UInt8], _ key: SymmetricKey, _ nonces: NonceReserve?) -> [UInt8] {
        plaintext.withUnsafeBytes { p in
            Envelope.sealedBytes(p, using: key, keyID: 3, authenticating: UnsafeRawBufferPointer(start: nil, count: 0), nonces: nonces)
        }
    }

    @Test("seals with a reserve open as usual; every nonce differs, past the reserve's size too, and each is counted")
    func distinctAndOpenable() throws {
        let key = SymmetricKey()
        let reserve = NonceReserve(count: 100)
        var seen = Set<[UInt8]>()
        for i in 0..<150 { // 50 beyond the reserve: drawn singly
            let plaintext = Array("record \(i)".utf8)
            let sealed = Self.seal(plaintext, key, reserve)
            #expect(try Envelope(bytes: sealed).open(using: key) == plaintext)
            #expect(seen.insert(Self.nonce(of: sealed)).inserted)
            #expect(!Self.nonce(of: sealed).allSatisfy { $0 == 0 })
        }
        #expect(reserve.taken == 150)
        // Two reserves draw different nonces.
        let other = NonceReserve(count: 100)
        for _ in 0..<100 { #expect(seen.insert(Self.nonce(of: Self.seal([1], key, other))).inserted) }
        // An empty reserve still seals, with single draws.
        let empty = NonceReserve(count: 0)
        #expect(try Envelope(bytes: Self.seal([7], key, empty)).open(using: key) == [7])
    }

    @Test("threads sealing from one reserve never get the same nonce")
    func concurrentTakes() {
        let key = SymmetricKey()
        let reserve = NonceReserve(count: 2_000)
        let nonces = Mutex([[UInt8]]())
        DispatchQueue.concurrentPerform(iterations: 4) { worker in
            var mine = [[UInt8]]()
            for i in 0..<600 { mine.append(Self.nonce(of: Self.seal(Array("w\(worker) \(i)".utf8), key, reserve))) }
            nonces.withLock { $0 += mine }
        }
        let all = nonces.withLock { $0 }
        #expect(all.count == 2_400)
        #expect(Set(all).count == 2_400)
        #expect(reserve.taken == 2_400)
    }
}

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

    @Test("seals with a reserve open as usual; every nonce differs, across chunks too, and each is counted")
    func distinctAndOpenable() throws {
        let key = SymmetricKey()
        let reserve = NonceReserve(chunk: 64)
        var seen = Set<[UInt8]>()
        for i in 0..<150 { // three chunks
            let plaintext = Array("record \(i)".utf8)
            let sealed = Self.seal(plaintext, key, reserve)
            #expect(try Envelope(bytes: sealed).open(using: key, authenticating: [UInt8]()) == plaintext)
            #expect(seen.insert(Self.nonce(of: sealed)).inserted)
            #expect(!Self.nonce(of: sealed).allSatisfy { $0 == 0 })
        }
        #expect(reserve.taken == 150)
        // Two reserves draw different nonces.
        let other = NonceReserve()
        for _ in 0..<100 { #expect(seen.insert(Self.nonce(of: Self.seal([1], key, other))).inserted) }
        // A chunk of one draws for every seal.
        let single = NonceReserve(chunk: 1)
        for _ in 0..<3 { #expect(seen.insert(Self.nonce(of: Self.seal([7], key, single))).inserted) }
        #expect(single.taken == 3)
    }

    @Test("threads sealing from one reserve never get the same nonce")
    func concurrentTakes() {
        let key = SymmetricKey()
        let reserve = NonceReserve(chunk: 64)
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

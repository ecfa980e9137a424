import Foundation
import Testing
@testable import CofferCrypto

@Suite("Padding")
struct PaddingTests {
    @Test("ISO/IEC 7816-4 padding: exact bytes")
    func exactBytes() {
        #expect(Padding.pad([1, 2, 3], blockSize: 4) == [1, 2, 3, 0x80])
        #expect(Padding.pad([1, 2, 3, 4], blockSize: 4) == [1, 2, 3, 4, 0x80, 0, 0, 0])
        #expect(Padding.pad([], blockSize: 8) == [0x80, 0, 0, 0, 0, 0, 0, 0])
        #expect(Padding.pad([9], blockSize: 1) == [9, 0x80])
        #expect(Padding.pad([0x80], blockSize: 2) == [0x80, 0x80])
    }

    @Test("pad then unpad round-trips; the padded length is the next multiple of the block", arguments: [1, 3, 16, 64, 256])
    func roundTrip(_ blockSize: Int) throws {
        for length in 0...300 {
            let bytes = (0..<length).map { UInt8(truncatingIfNeeded: $0 &* 13 &+ 0x7f) }
            let padded = Padding.pad(bytes, blockSize: blockSize)
            #expect(padded.count == (length / blockSize + 1) * blockSize, "length \(length)")
            #expect(padded.count % blockSize == 0)
            #expect(Array(padded.prefix(length)) == bytes)
            #expect(padded[length] == 0x80)
            #expect(padded[(length + 1)...].allSatisfy { $0 == 0 })
            #expect(try Padding.unpad(padded, blockSize: blockSize) == bytes, "length \(length)")
        }
    }

    @Test("malformed padding is refused as malformed input", arguments: [
        ([UInt8](), 4),                  // empty
        ([0, 0, 0, 0], 4),               // no 0x80 marker
        ([1, 2, 3, 4], 4),               // no marker, data only
        ([1, 0x80, 1, 0], 4),            // non-zero byte after the marker
        ([0x80, 0, 0, 0, 0, 0, 0, 0], 4), // marker outside the last block
        ([1, 0x80], 4),                  // shorter than one block
        ([0x80, 0, 0, 0], 0),            // block size 0
        ([0x80, 0, 0, 0], -1),           // negative block size
        ([1, 2, 0x81, 0], 4),            // wrong marker value
    ] as [([UInt8], Int)])
    func malformed(_ bytes: [UInt8], _ blockSize: Int) {
        let error = #expect(throws: CryptoError.self) { try Padding.unpad(bytes, blockSize: blockSize) }
        #expect(error?.isMalformedInput == true, "\(String(describing: error))")
    }
}

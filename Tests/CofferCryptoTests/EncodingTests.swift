import CofferTestSupport
import Foundation
import Testing
@testable import CofferCrypto

@Suite("Hex and BigEndian")
struct EncodingTests {
    @Test("Hex.encode is lowercase, two digits a byte")
    func encode() {
        #expect(Hex.encode([UInt8]()) == "")
        #expect(Hex.encode([0x00, 0x01, 0x7f, 0x80, 0xab, 0xff]) == "00017f80abff")
        #expect(Hex.encode((0...255).map { UInt8($0) }) == hexString((0...255).map { UInt8($0) }))
    }

    @Test("Hex.decode accepts either case and round-trips")
    func decode() {
        #expect(Hex.decode("") == [])
        #expect(Hex.decode("00017f80abff") == [0x00, 0x01, 0x7f, 0x80, 0xab, 0xff])
        #expect(Hex.decode("DEADbeef") == [0xde, 0xad, 0xbe, 0xef])
        let all = (0...255).map { UInt8($0) }
        #expect(Hex.decode(Hex.encode(all)) == all)
    }

    @Test("Hex.decode refuses odd lengths and non-hex characters", arguments: ["0", "abc", "0g", "zz", " 0", "0x00", "é0", "+1"])
    func decodeRefusals(_ text: String) {
        #expect(Hex.decode(text) == nil)
    }

    @Test("BigEndian encodes most significant byte first")
    func bigEndian() {
        #expect(BigEndian.bytes(UInt16(0x0102)) == [0x01, 0x02])
        #expect(BigEndian.bytes(UInt32(0x0102_0304)) == [0x01, 0x02, 0x03, 0x04])
        #expect(BigEndian.bytes(UInt64(0x0102_0304_0506_0708)) == [1, 2, 3, 4, 5, 6, 7, 8])
        #expect(BigEndian.bytes(UInt32.max) == [0xff, 0xff, 0xff, 0xff])
        #expect(BigEndian.bytes(UInt64(0)) == [UInt8](repeating: 0, count: 8))
    }
}

import CofferCrypto
@testable import CofferVault
import Foundation
import Testing

/// The unlock agent's messages: they round-trip, and decoding refuses anything else.
@Suite struct AgentMessageTests {
    @Test func requestsRoundTrip() throws {
        for request in [AgentRequest.key(vault: "/v/a.coffer"), .status(vault: "/v/é.coffer"), .lock(vault: "/x")] {
            #expect(try AgentRequest.decode(request.encoded()) == request)
        }
    }

    @Test func answersRoundTrip() throws {
        let key = SymmetricKey()
        guard case .key(let back) = try AgentResponse.decode(AgentResponse.key(key).encoded()) else { Issue.record("not a key"); return }
        #expect(back == key)
        let status = AgentStatus(vault: "/v/a.coffer", pid: 4242, expires: Date(timeIntervalSince1970: 1_800_000_000.5))
        guard case .status(let s) = try AgentResponse.decode(AgentResponse.status(status).encoded()) else { Issue.record("not a status"); return }
        #expect(s == status)
        guard case .locked = try AgentResponse.decode(AgentResponse.locked.encoded()) else { Issue.record("not locked"); return }
        guard case .refused(.otherUser, "no") = try AgentResponse.decode(AgentResponse.refused(.otherUser, "no").encoded()) else {
            Issue.record("not refused"); return
        }
    }

    @Test("another version, an unknown kind, a short field or a byte after the end is refused")
    func strict() throws {
        let good = AgentRequest.key(vault: "/v").encoded()
        let bads: [[UInt8]] = [[], [2] + good.dropFirst(), [1, 7] + good.dropFirst(2), good + [0], Array(good.dropLast()), [1, 1, 0xff, 0xff, 0xff, 0xff]]
        for bad in bads {
            #expect(throws: AgentError.self) { try AgentRequest.decode(bad) }
        }
        let answer = AgentResponse.key(SymmetricKey()).encoded().unsafeCopiedBytes()
        let badAnswers: [[UInt8]] = [Array(answer.dropLast()), answer + [0], [1, 0x84], [1, 0xE0, 9, 0, 0, 0, 0], [0] + answer.dropFirst()]
        for bad in badAnswers {
            #expect(throws: AgentError.self) { try AgentResponse.decode(SecureBytes(copying: bad)) }
        }
    }
}

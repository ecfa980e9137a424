import CofferCrypto
import Foundation

/// A request to the unlock agent. Each names the vault (its real path), which the agent checks
/// against its own.
///
/// On the socket a message is a frame: a 4-byte big-endian length (1 to ``AgentFrame/maxBody``)
/// and the body: a version byte (1), a kind byte, then the kind's fields, big-endian; a text is a
/// 4-byte length and UTF-8. Kinds: requests `0x01` key, `0x02` status, `0x03` lock, each with the
/// vault's path; answers `0x81` key (32 bytes), `0x82` status (vault path, pid as 4 bytes,
/// expiry as 8 bytes of milliseconds since 1970), `0x83` locked (nothing), `0xE0` refused (a
/// reason byte, a message). A decoder refuses another version, an unknown kind, a field out of
/// bounds and any byte left over.
package enum AgentRequest: Equatable, Sendable {
    /// The vault key.
    case key(vault: String)
    /// Which vault, which process, until when; no key.
    case status(vault: String)
    /// Forget the key and exit.
    case lock(vault: String)

    package var vault: String {
        switch self {
        case .key(let vault), .status(let vault), .lock(let vault): return vault
        }
    }

    var kind: UInt8 {
        switch self {
        case .key: return 0x01
        case .status: return 0x02
        case .lock: return 0x03
        }
    }

    package func encoded() -> [UInt8] {
        var size = ByteWriter(into: nil)
        write(&size)
        var out = [UInt8](repeating: 0, count: size.offset)
        out.withUnsafeMutableBytes { buffer in
            var writer = ByteWriter(into: buffer)
            write(&writer)
        }
        return out
    }

    private func write(_ w: inout ByteWriter) {
        w.u8(AgentFrame.version)
        w.u8(kind)
        w.string(vault)
    }

    package static func decode(_ body: [UInt8]) throws -> AgentRequest {
        try body.withUnsafeBytes { raw in
            var r = ByteReader(raw, what: "the agent request")
            do {
                try AgentFrame.checkVersion(try r.u8())
                let kind = try r.u8()
                let vault = try r.string(max: AgentFrame.maxText)
                guard r.remaining == 0 else { throw AgentError(.malformed, "the agent request has bytes after its end") }
                switch kind {
                case 0x01: return .key(vault: vault)
                case 0x02: return .status(vault: vault)
                case 0x03: return .lock(vault: vault)
                default: throw AgentError(.malformed, "unknown agent request kind \(kind)")
                }
            } catch let e as VaultError {
                throw AgentError(.malformed, e.message)
            }
        }
    }
}

/// Why the agent refused a request.
package enum AgentRefusal: UInt8, Sendable {
    /// The peer runs as another user than the agent.
    case otherUser = 1
    /// The request names another vault than the agent's.
    case otherVault = 2
    /// The request does not follow the protocol.
    case malformed = 3
}

/// What the agent says about itself: never the key.
package struct AgentStatus: Sendable, Equatable {
    package let vault: String
    package let pid: Int32
    /// When the agent forgets the key and exits.
    package let expires: Date

    package init(vault: String, pid: Int32, expires: Date) {
        self.vault = vault
        self.pid = pid
        self.expires = expires
    }
}

/// An answer of the agent.
package enum AgentResponse: Sendable {
    case key(SymmetricKey)
    case status(AgentStatus)
    case locked
    case refused(AgentRefusal, String)

    /// The body, in guarded memory (it may hold the key).
    package func encoded() -> SecureBytes {
        var size = ByteWriter(into: nil)
        write(&size)
        return SecureBytes(count: size.offset) { buffer in
            var writer = ByteWriter(into: buffer)
            write(&writer)
        }
    }

    private func write(_ w: inout ByteWriter) {
        w.u8(AgentFrame.version)
        switch self {
        case .key(let key):
            w.u8(0x81)
            w.secret(key.bytes)
        case .status(let status):
            w.u8(0x82)
            w.string(status.vault)
            w.u32(UInt32(bitPattern: status.pid))
            w.i64(Int64((status.expires.timeIntervalSince1970 * 1000).rounded()))
        case .locked:
            w.u8(0x83)
        case .refused(let reason, let message):
            w.u8(0xE0)
            w.u8(reason.rawValue)
            w.string(String(message.utf8.prefix(AgentFrame.maxText)) ?? "refused")
        }
    }

    /// Decodes a body read into guarded memory; the key stays in it.
    package static func decode(_ body: SecureBytes) throws -> AgentResponse {
        try body.withUnsafeBytes { raw in
            var r = ByteReader(raw, what: "the agent's answer")
            do {
                try AgentFrame.checkVersion(try r.u8())
                let kind = try r.u8()
                let response: AgentResponse
                switch kind {
                case 0x81:
                    response = .key(try SymmetricKey(bytes: try r.secret(SymmetricKey.byteCount)))
                case 0x82:
                    let vault = try r.string(max: AgentFrame.maxText)
                    let pid = Int32(bitPattern: try r.u32())
                    let millis = try r.i64()
                    response = .status(AgentStatus(vault: vault, pid: pid, expires: Date(timeIntervalSince1970: Double(millis) / 1000)))
                case 0x83:
                    response = .locked
                case 0xE0:
                    guard let reason = AgentRefusal(rawValue: try r.u8()) else {
                        throw AgentError(.malformed, "the agent's answer has an unknown refusal reason")
                    }
                    response = .refused(reason, try r.string(max: AgentFrame.maxText))
                default:
                    throw AgentError(.malformed, "unknown agent answer kind \(kind)")
                }
                guard r.remaining == 0 else { throw AgentError(.malformed, "the agent's answer has bytes after its end") }
                return response
            } catch let e as VaultError {
                throw AgentError(.malformed, e.message)
            } catch let e as CryptoError {
                throw AgentError(.malformed, "the agent's answer holds a malformed key: \(e)")
            }
        }
    }
}

/// Frames on the agent's socket: a 4-byte big-endian length, then the body.
package enum AgentFrame {
    static let version: UInt8 = 1
    /// The largest body either side accepts.
    package static let maxBody = 8192
    /// The longest text field (a vault path, a message).
    static let maxText = 4096

    static func checkVersion(_ version: UInt8) throws {
        guard version == Self.version else {
            throw AgentError(.malformed, "agent protocol version \(version) is not supported (this coffer speaks version \(Self.version))")
        }
    }
}

import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// Yes-or-no questions, for commands that destroy or roll back data.
extension Terminal {
    /// Asks a yes-or-no question; true only for an answer of `y` or `yes` (any case).
    func confirm(_ question: String) -> Bool {
        write(question)
        var line = [UInt8]()
        var byte: UInt8 = 0
        while line.count < 64 {
            let n = Glibc.read(fd, &byte, 1)
            if n < 0 && errno == EINTR { continue }
            if n <= 0 || byte == 0x0a { break }
            line.append(byte)
        }
        let answer = String(decoding: line, as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines).lowercased()
        return answer == "y" || answer == "yes"
    }
}

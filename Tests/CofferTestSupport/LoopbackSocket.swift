import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// A TCP socket bound to a port the kernel picks on 127.0.0.1, listening when `listening`
/// (the kernel then accepts connections that nothing reads or answers); its descriptor and
/// port. The caller closes it. Nil when the kernel refuses.
public func loopbackSocket(listening: Bool) -> (fd: Int32, port: Int)? {
    let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
    guard fd >= 0 else { return nil }
    var address = sockaddr_in()
    address.sin_family = sa_family_t(AF_INET)
    address.sin_port = 0
    address.sin_addr.s_addr = inet_addr("127.0.0.1")
    var length = socklen_t(MemoryLayout<sockaddr_in>.size)
    let bound = withUnsafeMutablePointer(to: &address) {
        $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { pointer in
            bind(fd, pointer, length) == 0 && (!listening || listen(fd, 16) == 0) && getsockname(fd, pointer, &length) == 0
        }
    }
    guard bound else { close(fd); return nil }
    return (fd, Int(UInt16(bigEndian: address.sin_port)))
}

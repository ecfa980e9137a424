import CofferCrypto
import Foundation

/// How a server's API names zones: by their 16-byte uid, which a zone's genesis binds to its
/// owner and name, never by a row id of the server's store. Each side turns uids into row ids of
/// its own at the wire: a server into its store's (``StorageHost``), a client into handles it
/// gives out (``ZoneHandles``). So a request means the same zone at any server, and nothing a
/// server hands out addresses a zone.
package struct ZoneNames {
    /// The uid of a zone the engine knows by `rowID`.
    package let uid: (_ rowID: Int64) throws -> [UInt8]
    /// The row id of the zone whose uid is `uid` (16 bytes: the wire's decoders check).
    package let rowID: (_ uid: [UInt8]) throws -> Int64

    package init(uid: @escaping (_ rowID: Int64) throws -> [UInt8], rowID: @escaping (_ uid: [UInt8]) throws -> Int64) {
        self.uid = uid
        self.rowID = rowID
    }

    package func uid(_ rowID: Int64) throws -> Data { Data(try uid(rowID)) }

    /// The row id of a uid that came off the wire: `.invalidArguments` unless it is 16 bytes.
    package func rowID(wire uid: Data, _ what: @autoclosure () -> String) throws -> Int64 {
        guard uid.count == ZoneNames.uidCount else { throw StoreError(.invalidArguments, "\(what()): a zone uid is \(ZoneNames.uidCount) bytes") }
        return try rowID(Array(uid))
    }

    package static let uidCount = 16
}

/// A client's names for a server's zones: a handle (the row id its engine uses) per zone uid,
/// given out as zones are first seen, and for zones the client is about to create. Handles
/// live as long as the client's connection to the server.
package final class ZoneHandles: Sendable {
    private struct Table {
        package var byUID = [[UInt8]: Int64]()
        package var byHandle = [Int64: [UInt8]]()
        package var next: Int64 = 1
    }
    private let table = Locked(Table())

    /// The handle of the zone `uid`, given out now if it has none.
    package func handle(_ uid: [UInt8]) -> Int64 {
        table.withLock { t in
            if let known = t.byUID[uid] { return known }
            let handle = t.next
            t.next += 1
            t.byUID[uid] = handle
            t.byHandle[handle] = uid
            return handle
        }
    }

    /// A handle for a zone not created yet (its uid is bound when its creation is sent).
    package func reserve() -> Int64 {
        table.withLock { t in
            defer { t.next += 1 }
            return t.next
        }
    }

    /// Binds a reserved handle to the uid of the zone created under it (a batch made again
    /// after a conflict may create it with another uid: the last one sent stands).
    package func bind(_ handle: Int64, to uid: [UInt8]) {
        table.withLock { t in
            if let bound = t.byHandle[handle], bound != uid, t.byUID[bound] == handle { t.byUID[bound] = nil }
            t.byHandle[handle] = uid
            t.byUID[uid] = handle
        }
    }

    /// The uid of a handle; nil for one reserved and not yet bound.
    package func uid(_ handle: Int64) -> [UInt8]? { table.withLock { $0.byHandle[handle] } }
}

import CofferCrypto
import Foundation

extension Session {
    /// Drops the kept row contexts of a zone (``rowContexts``): called wherever the schema or
    /// key caches they were made from change.
    func forgetRowContexts(zoneRowID: Int64) {
        rowContexts.withLock { _ = $0.removeValue(forKey: zoneRowID) }
    }

    /// Forgets cached keys, logs and schemas of a zone (after it is deleted).
    func forget(zoneRowID: Int64) {
        forgetRowContexts(zoneRowID: zoneRowID)
        keyRing.forget(zoneRowID: zoneRowID)
        commits.withLock { _ = $0.removeValue(forKey: zoneRowID) }
        logs.withLock { _ = $0.removeValue(forKey: zoneRowID) }
        schemas.withLock { cache in cache = cache.filter { $0.key.zoneRowID != zoneRowID } }
    }
}

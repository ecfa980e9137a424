import CofferCrypto
import Foundation

extension ZoneDirectory {
    /// Zones shared with this user that they accepted and may read now.
    func sharedZones() async throws -> [Zone] { try await sharedZoneAccess().zones }

    /// ``sharedZones()``, and the zones shared with this user that are refused because their log
    /// fails verification (`.integrityFailure`): left out of the list, reported by `audit`.
    func sharedZoneAccess() async throws -> (zones: [Zone], refused: [(ZoneID, StoreError)]) {
        let me = userID
        return try await verifiedLogs.read { db in
            var refused = [(ZoneID, StoreError)]()
            let zones = try db.eachGathering(db.zoneRows(sharedWith: me)) { zone, recordCount -> Zone? in
                let access: ZoneAccess
                do { access = try self.accessControl.access(db, zone: zone) } catch let error as StoreError where error.code == .integrityFailure {
                    refused.append((zone.id, error))
                    return nil
                } catch let miss as any StorageMiss {
                    throw miss
                } catch {
                    return nil // invited but not accepted, removed, left, link turned off: not this user's to read
                }
                return Zone(id: zone.id, created: Date(timeIntervalSince1970: access.state.created), keyEpoch: access.state.epoch, sequence: access.state.headSeq,
                            recordCount: recordCount)
            }
            return (zones, refused)
        }
    }
}

import Foundation

/// What a Coffer server read for a client's snapshot (``StorageSnapshot/Tables``), on the wire:
/// each table as a list of key–value pairs (`k`, `v`), left out when empty, a zone's tables keyed
/// by its uid (see ``ZoneNames``). The client believes none of it until the engine has checked it
/// against signed data, as with any backend.
package struct WireTables: Codable, Sendable {
    package struct Pair<K: Codable & Sendable, V: Codable & Sendable>: Codable, Sendable {
        package var k: K
        package var v: V
    }
    package struct Head: Codable, Sendable { var seq: Int64; var hash: Data }
    package struct Entry: Codable, Sendable {
        package var seq: Int64, body: Data, signature: Data, entries: Data?, names: Data?
        package init(_ e: StoredLogEntry) {
            seq = e.seq; body = Data(e.body); signature = Data(e.signature); entries = e.entries.map { Data($0) }; names = e.names.map { Data($0) }
        }
        package var stored: StoredLogEntry {
            StoredLogEntry(seq: seq, body: Array(body), signature: Array(signature), entries: entries.map(Array.init), names: names.map(Array.init))
        }
    }
    package struct Log: Codable, Sendable { var after: Int64; var entries: [Entry] }
    package struct Counted: Codable, Sendable { var zone: WireZone; var count: Int }
    package struct SchemaRow: Codable, Sendable { var field: String; var valueType: String; var encrypted: Bool }
    package struct Card: Codable, Sendable { var card: Data; var added: Double }
    package struct Named: Codable, Sendable { var seq: Int64; var name: String }
    package struct Deleted: Codable, Sendable { var owner: String; var name: String; var reason: String }
    /// What the server kept of a deleted zone: its owner and name, its genesis and its deletion.
    package struct Kept: Codable, Sendable {
        package var owner: String, name: String, genesis: Data, genesisSignature: Data, deletion: Data, deletionSignature: Data
    }
    package struct Page: Codable, Sendable { var plan: WirePlan; var names: [String]; var more: Bool; var last: [WireSortValue]? }
    package struct Link: Codable, Sendable { var epoch: Int64; var sealedKey: Data; var sealedSecret: Data }
    package struct Columns: Codable, Sendable { var user: String; var name: String; var email: String?; var signingKey: Data; var boxKey: Data; var cardCreated: String }
    package struct Counter: Codable, Sendable { var current: Int64; var compacted: Int64 }
    /// An optional value that is present in its table (`.some(nil)`: known to be missing).
    package struct Maybe<V: Codable & Sendable>: Codable, Sendable { var value: V? }

    /// A zone, by its uid.
    package typealias Z = Data
    package var zones: [Pair<String, Maybe<WireZone>>]?
    package var ownedZones: [Pair<String, [Counted]>]?
    package var heads: [Pair<Z, Maybe<Head>>]?
    package var logs: [Pair<Z, Log>]?
    package var entries: [Pair<Z, [Pair<Int64, Maybe<Entry>>]>]?
    package var wrappedKeys: [Pair<Z, [Pair<Int64, [Pair<String, Data>]>]>]?
    package var chainedKeys: [Pair<Z, [Pair<Int64, Data>]>]?
    package var schemaRows: [Pair<Z, [Pair<String, [SchemaRow]>]>]?
    package var contacts: [Pair<String, Maybe<Card>>]?
    package var contactSearches: [Pair<String, [String]>]?
    package var records: [Pair<Z, [Pair<String, Maybe<WireVersion>>]>]?
    package var pages: [Pair<Z, [Pair<String, [String]>]>]?
    package var childNames: [Pair<Z, [Pair<String, [String]>]>]?
    package var tombstoneFlags: [Pair<Z, Bool>]?
    package var zoneDetails: [Z]?
    package var compacted: [Pair<Z, Int64>]?
    package var uids: [Pair<Data, Bool>]?
    package var deletedZones: [Pair<Data, Maybe<Kept>>]?
    package var changePages: [Pair<Z, [Pair<String, [String]>]>]?
    package var tombstonePages: [Pair<Z, [Pair<String, [Named]>]>]?
    package var tombstoneCounts: [Pair<Z, [Pair<Int64, Int>]>]?
    package var counter: Counter?
    package var changedZones: [Pair<String, [Pair<Int64, [WireZone]>]>]?
    package var zoneTombstones: [Pair<String, [Deleted]>]?
    package var queries: [Pair<Z, [Page]>]?
    package var shareLinks: [Pair<Z, Maybe<Link>>]?
    package var shareZones: [Pair<Data, [WireZone]>]?
    package var zoneShareUIDs: [Pair<Z, Maybe<Data>>]?
    package var zoneMembers: [Pair<Z, [String]>]?
    package var contactColumns: [Columns]?
    package var logHashes: [Pair<Z, [Pair<Int64, Data>]>]?
    package var tombstoneLists: [Pair<Z, [Pair<String, Int64>]>]?
    package var listingZones: [Pair<String, [WireZone]>]?
    package var sharedZones: [Pair<String, [Counted]>]?
    package var changedSharedZones: [Pair<String, [Pair<Int64, [WireZone]>]>]?

    /// A zone id as a table key: its owner and name, which a NUL cannot be part of.
    package static func key(_ id: ZoneID) -> String { "\(id.ownerID)\u{0}\(id.name)" }
    package static func zoneID(_ key: String) throws -> ZoneID {
        let parts = key.split(separator: "\u{0}", maxSplits: 1, omittingEmptySubsequences: false)
        guard parts.count == 2 else { throw StoreError(.integrityFailure, "the server sent a zone key that is malformed") }
        return ZoneID(name: String(parts[1]), ownerID: String(parts[0]))
    }
}

private func pairs<K: Comparable, V, WK, WV>(_ d: [K: V], _ k: (K) throws -> WK, _ v: (V) throws -> WV) rethrows -> [WireTables.Pair<WK, WV>]? {
    d.isEmpty ? nil : try d.sorted { $0.key < $1.key }.map { WireTables.Pair(k: try k($0.key), v: try v($0.value)) }
}
private func pairs<K: Comparable, V>(_ d: [K: V]) -> [WireTables.Pair<K, V>]? { pairs(d, { $0 }, { $0 }) }
private func dict<WK, WV, K: Hashable, V>(_ p: [WireTables.Pair<WK, WV>]?, _ k: (WK) throws -> K, _ v: (WV) throws -> V) rethrows -> [K: V] {
    var d = [K: V]()
    for pair in p ?? [] { d[try k(pair.k)] = try v(pair.v) }
    return d
}
private func dict<K: Hashable, V>(_ p: [WireTables.Pair<K, V>]?) -> [K: V] { dict(p, { $0 }, { $0 }) }
private func data(_ b: [UInt8]) -> Data { Data(b) }
private func bytes(_ d: Data) -> [UInt8] { Array(d) }

extension WireTables {
    /// The tables on the wire, each zone named by its uid.
    package init(_ t: StorageSnapshot.Tables<StoredRow>, _ names: ZoneNames) throws {
        func z(_ rowID: Int64) throws -> Data { try names.uid(rowID) }
        zones = pairs(t.zones.mapKeys(Self.key), { $0 }, { Maybe(value: $0.map(WireZone.init)) })
        ownedZones = pairs(t.ownedZones, { $0 }, { $0.map { Counted(zone: WireZone($0.zone), count: $0.recordCount) } })
        heads = try pairs(t.heads, z, { Maybe(value: $0.map { Head(seq: $0.seq, hash: Data($0.hash.bytes)) }) })
        logs = try pairs(t.logs, z, { Log(after: $0.after, entries: $0.entries.map(Entry.init)) })
        entries = try pairs(t.entries, z, { pairs($0, { $0 }, { Maybe(value: $0.map(Entry.init)) }) ?? [] })
        wrappedKeys = try pairs(t.wrappedKeys, z, { pairs($0, { $0 }, { pairs($0, { $0 }, data) ?? [] }) ?? [] })
        chainedKeys = try pairs(t.chainedKeys, z, { pairs($0, { $0 }, data) ?? [] })
        schemaRows = try pairs(t.schemaRows, z, { pairs($0, { $0 }, { $0.map { SchemaRow(field: $0.field, valueType: $0.valueType, encrypted: $0.encrypted) } }) ?? [] })
        contacts = pairs(t.contacts, { $0 }, { Maybe(value: $0.map { Card(card: Data($0.card), added: $0.added) }) })
        contactSearches = pairs(t.contactSearches)
        records = try pairs(t.records, z, { pairs($0, { $0 }, { Maybe(value: $0.map(WireVersion.init)) }) ?? [] })
        pages = try pairs(t.pages, z, { pairs($0) ?? [] })
        childNames = try pairs(t.childNames, z, { pairs($0, { $0 }, { $0.sorted() }) ?? [] })
        tombstoneFlags = try pairs(t.tombstoneFlags, z, { $0 })
        zoneDetails = t.zoneDetails.isEmpty ? nil : try t.zoneDetails.sorted().map(z)
        compacted = try pairs(t.compacted, z, { $0 })
        uids = t.uids.isEmpty ? nil : t.uids.map { Pair(k: Data($0.key), v: $0.value) }
        deletedZones = t.deletedZones.isEmpty ? nil : t.deletedZones.map { uid, row in
            Pair(k: Data(uid), v: Maybe(value: row.map {
                Kept(owner: $0.id.ownerID, name: $0.id.name, genesis: Data($0.genesis.body), genesisSignature: Data($0.genesis.signature),
                     deletion: Data($0.deletion.body), deletionSignature: Data($0.deletion.signature))
            }))
        }
        changePages = try pairs(t.changePages, z, { pairs($0) ?? [] })
        tombstonePages = try pairs(t.tombstonePages, z, { pairs($0, { $0 }, { $0.map { Named(seq: $0.seq, name: $0.name) } }) ?? [] })
        tombstoneCounts = try pairs(t.tombstoneCounts, z, { pairs($0) ?? [] })
        counter = t.counter.map { Counter(current: $0.current, compacted: $0.compacted) }
        changedZones = pairs(t.changedZones, { $0 }, { pairs($0, { $0 }, { $0.map(WireZone.init) }) ?? [] })
        zoneTombstones = pairs(t.zoneTombstones, { $0 }, { $0.map { Deleted(owner: $0.zoneID.ownerID, name: $0.zoneID.name, reason: $0.reason) } })
        queries = try pairs(t.queries, z, { $0.map { Page(plan: WirePlan($0.key), names: $0.value.names, more: $0.value.more,
                                                            last: $0.value.lastSortValues.map { $0.map(WireSortValue.init) }) } })
        shareLinks = try pairs(t.shareLinks, z, { Maybe(value: $0.map { Link(epoch: $0.epoch, sealedKey: Data($0.sealedKey), sealedSecret: Data($0.sealedSecret)) }) })
        shareZones = t.shareZones.isEmpty ? nil : t.shareZones.map { Pair(k: Data($0.key), v: $0.value.map(WireZone.init)) }
        zoneShareUIDs = try pairs(t.zoneShareUIDs, z, { Maybe(value: $0.map(data)) })
        zoneMembers = try pairs(t.zoneMembers, z, { $0.sorted() })
        contactColumns = t.contactColumns.map { $0.map { Columns(user: $0.userID, name: $0.name, email: $0.email, signingKey: Data($0.signingKey),
                                                                  boxKey: Data($0.boxKey), cardCreated: $0.cardCreated) } }
        logHashes = try pairs(t.logHashes, z, { pairs($0, { $0 }, data) ?? [] })
        tombstoneLists = try pairs(t.tombstoneLists, z, { pairs($0) ?? [] })
        listingZones = pairs(t.listingZones, { $0 }, { $0.map(WireZone.init) })
        sharedZones = pairs(t.sharedZones, { $0 }, { $0.map { Counted(zone: WireZone($0.zone), count: $0.recordCount) } })
        changedSharedZones = pairs(t.changedSharedZones, { $0 }, { pairs($0, { $0 }, { $0.map(WireZone.init) }) ?? [] })
    }

    /// The tables, each zone under the row id `names` gives its uid, with every value of a shape
    /// no server of Coffer sends refused.
    package func tables(_ names: ZoneNames) throws -> StorageSnapshot.Tables<StoredRow> {
        func z(_ uid: Data) throws -> Int64 {
            guard uid.count == ZoneNames.uidCount else { throw StoreError(.integrityFailure, "the server named a zone by a uid that is not \(ZoneNames.uidCount) bytes") }
            return try names.rowID(Array(uid))
        }
        func digest(_ d: Data) throws -> Digest32 {
            guard d.count == 32 else { throw StoreError(.integrityFailure, "the server sent a hash that is not 32 bytes") }
            return Digest32(d)
        }
        func counted(_ list: [Counted]) throws -> [(zone: ZoneRow, recordCount: Int)] { try list.map { (try $0.zone.row(names), $0.count) } }
        func rows(_ list: [WireZone]) throws -> [ZoneRow] { try list.map { try $0.row(names) } }
        var t = StorageSnapshot.Tables<StoredRow>()
        t.zones = try dict(zones, Self.zoneID, { try $0.value.map { try $0.row(names) } })
        t.ownedZones = try dict(ownedZones, { $0 }, counted)
        t.heads = try dict(heads, z, { try $0.value.map { (seq: $0.seq, hash: try digest($0.hash)) } })
        t.logs = try dict(logs, z, { (after: $0.after, entries: $0.entries.map(\.stored)) })
        t.entries = try dict(entries, z, { dict($0, { $0 }, { $0.value.map(\.stored) }) })
        t.wrappedKeys = try dict(wrappedKeys, z, { dict($0, { $0 }, { dict($0, { $0 }, bytes) }) })
        t.chainedKeys = try dict(chainedKeys, z, { dict($0, { $0 }, bytes) })
        t.schemaRows = try dict(schemaRows, z, { dict($0, { $0 }, { $0.map { (field: $0.field, valueType: $0.valueType, encrypted: $0.encrypted) } }) })
        t.contacts = dict(contacts, { $0 }, { $0.value.map { (card: Array($0.card), added: $0.added) } })
        t.contactSearches = dict(contactSearches)
        t.records = try dict(records, z, { dict($0, { $0 }, { $0.value.map(\.row) }) })
        t.pages = try dict(pages, z, { dict($0) })
        t.childNames = try dict(childNames, z, { dict($0, { $0 }, { Set($0) }) })
        t.tombstoneFlags = try dict(tombstoneFlags, z, { $0 })
        t.zoneDetails = Set(try (zoneDetails ?? []).map(z))
        t.compacted = try dict(compacted, z, { $0 })
        t.uids = dict(uids, bytes, { $0 })
        for pair in deletedZones ?? [] {
            let uid = Array(pair.k)
            t.deletedZones[uid] = .some(pair.v.value.map {
                DeletedZoneRow(uid: uid, id: ZoneID(name: $0.name, ownerID: $0.owner), genesisBody: Array($0.genesis), genesisSignature: Array($0.genesisSignature),
                               deletionBody: Array($0.deletion), deletionSignature: Array($0.deletionSignature))
            })
        }
        t.changePages = try dict(changePages, z, { dict($0) })
        t.tombstonePages = try dict(tombstonePages, z, { dict($0, { $0 }, { $0.map { (seq: $0.seq, name: $0.name) } }) })
        t.tombstoneCounts = try dict(tombstoneCounts, z, { dict($0) })
        t.counter = counter.map { (current: $0.current, compacted: $0.compacted) }
        t.changedZones = try dict(changedZones, { $0 }, { try dict($0, { $0 }, rows) })
        t.zoneTombstones = dict(zoneTombstones, { $0 }, { $0.map { DeletedZone(zoneID: ZoneID(name: $0.name, ownerID: $0.owner), reason: $0.reason) } })
        t.queries = try dict(queries, z, { pages in
            var list = [QueryPlan: StorageSnapshot.QueryPage]()
            for page in pages {
                list[try page.plan.plan()] = StorageSnapshot.QueryPage(names: page.names, more: page.more, lastSortValues: try page.last.map { try $0.map { try $0.value() } })
            }
            return list
        })
        t.shareLinks = try dict(shareLinks, z, { $0.value.map { (epoch: $0.epoch, sealedKey: Array($0.sealedKey), sealedSecret: Array($0.sealedSecret)) } })
        t.shareZones = try dict(shareZones, bytes, rows)
        t.zoneShareUIDs = try dict(zoneShareUIDs, z, { $0.value.map(bytes) })
        t.zoneMembers = try dict(zoneMembers, z, { Set($0) })
        t.contactColumns = contactColumns.map { $0.map { (userID: $0.user, name: $0.name, email: $0.email, signingKey: Array($0.signingKey),
                                                          boxKey: Array($0.boxKey), cardCreated: $0.cardCreated) } }
        t.logHashes = try dict(logHashes, z, { dict($0, { $0 }, bytes) })
        t.tombstoneLists = try dict(tombstoneLists, z, { dict($0) })
        t.listingZones = try dict(listingZones, { $0 }, rows)
        t.sharedZones = try dict(sharedZones, { $0 }, counted)
        t.changedSharedZones = try dict(changedSharedZones, { $0 }, { try dict($0, { $0 }, rows) })
        return t
    }
}

private extension Dictionary {
    func mapKeys<K: Hashable>(_ f: (Key) -> K) -> [K: Value] {
        var d = [K: Value]()
        for (k, v) in self { d[f(k)] = v }
        return d
    }
}

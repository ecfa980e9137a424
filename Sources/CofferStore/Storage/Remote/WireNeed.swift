import Foundation

/// A ``StorageSnapshot/Need`` as a Coffer server's API carries it: an operation name (`op`,
/// after CloudKit Web Services where one fits: `records/lookup`, `records/query`,
/// `changes/zone`, `changes/database`, `zones/lookup`…) and the fields that operation takes.
/// A zone is named by its uid (`zone`, 16 bytes; see ``ZoneNames``). Decoding refuses an
/// unknown operation, a field it does not take and a missing one.
package struct WireNeed: Codable, Sendable {
    package var op: String
    package var zone: Data?
    package var owner: String?
    package var name: String?
    package var user: String?
    package var email: String?
    package var names: [String]?
    package var after: Int64?
    package var afterName: String?
    package var seq: Int64?
    package var limit: Int?
    package var uid: Data?
    package var since: Int64?
    package var owned: Bool?
    package var plan: WirePlan?

    package init(op: String) { self.op = op }

    /// The need, its zone named by the row id `names` gives its uid, or `.invalidArguments`
    /// naming what is wrong.
    package func need(_ zones: ZoneNames) throws -> StorageSnapshot.Need {
        func field<T>(_ value: T?, _ key: String) throws -> T {
            guard let value else { throw StoreError(.invalidArguments, "operation \(op) lacks '\(key)'") }
            return value
        }
        // Numbers in their ranges, whichever operation carries them: a sequence, epoch or
        // counter is not negative, a limit is from 1 to 2^31 - 1.
        let zone = try self.zone.map { try zones.rowID(wire: $0, "operation \(op)") }
        for (key, value) in [("after", after), ("seq", seq), ("since", since)] {
            if let value, value < 0 { throw StoreError(.invalidArguments, "operation \(op): '\(key)' is not negative") }
        }
        if let limit, !(1...Int(Int32.max)).contains(limit) {
            throw StoreError(.invalidArguments, "operation \(op): 'limit' is from 1 to \(Int32.max)")
        }
        let need: StorageSnapshot.Need
        switch op {
        case "zones/lookup": need = .zone(ZoneID(name: try field(name, "name"), ownerID: try field(owner, "owner")))
        case "zones/list": need = .ownedZones(try field(owner, "owner"))
        case "zones/exists": need = .zoneUID(Array(try field(uid, "uid")))
        case "zones/deleted": need = .deletedZone(uid: Array(try field(uid, "uid")))
        case "zones/listing": need = .listingZones(userID: try field(user, "user"))
        case "zones/shared": need = .sharedZones(memberID: try field(user, "user"))
        case "shares/zones": need = .shareZones(shareUID: Array(try field(uid, "uid")))
        case "log/entries": need = .log(zoneRowID: try field(zone, "zone"), after: try field(after, "after"))
        case "log/entry": need = .logEntry(zoneRowID: try field(zone, "zone"), seq: try field(seq, "seq"))
        case "log/hashes": need = .logHashes(zoneRowID: try field(zone, "zone"))
        case "contacts/lookup": need = .contact(try field(user, "user"))
        case "contacts/search": need = .contactIDs(email: email, name: name)
        case "contacts/list": need = .contactColumns
        case "records/lookup": need = .records(zoneRowID: try field(zone, "zone"), names: try field(names, "names"))
        case "records/page": need = .page(zoneRowID: try field(zone, "zone"), after: try field(afterName, "afterName"), limit: try field(limit, "limit"))
        case "records/sealedPage":
            need = .sealedPage(zoneRowID: try field(zone, "zone"), before: try field(seq, "seq"), after: try field(afterName, "afterName"),
                               limit: try field(limit, "limit"))
        case "records/all": need = .allRows(zoneRowID: try field(zone, "zone"))
        case "records/children": need = .children(zoneRowID: try field(zone, "zone"), parent: try field(name, "name"))
        case "records/childrenOfAny": need = .childrenOfAny(zoneRowID: try field(zone, "zone"), parents: try field(names, "names"))
        case "records/ancestors": need = .ancestors(zoneRowID: try field(zone, "zone"), of: try field(name, "name"))
        case "records/query": need = .query(zoneRowID: try field(zone, "zone"), plan: try field(plan, "plan").plan())
        case "records/hasTombstones": need = .tombstones(zoneRowID: try field(zone, "zone"))
        case "records/tombstones": need = .tombstoneList(zoneRowID: try field(zone, "zone"))
        case "records/tombstoneCount": need = .tombstoneCount(zoneRowID: try field(zone, "zone"), through: try field(seq, "seq"))
        case "changes/zone":
            need = .changes(zoneRowID: try field(zone, "zone"), afterSeq: try field(after, "after"), afterName: afterName,
                            limit: try field(limit, "limit"))
        case "changes/database/counter": need = .counter
        case "changes/database": need = .changedZones(ownerID: try field(owner, "owner"), since: try field(since, "since"))
        case "changes/database/shared": need = .changedSharedZones(memberID: try field(user, "user"), since: try field(since, "since"))
        case "changes/database/deleted":
            need = .zoneTombstones(userID: try field(user, "user"), since: try field(since, "since"), owned: try field(owned, "owned"))
        default: throw StoreError(.invalidArguments, "unknown read operation '\(Names.printable(op))'")
        }
        guard try WireNeed(need, zones) == self else { throw StoreError(.invalidArguments, "operation \(op) carries fields it does not take") }
        return need
    }

    /// The need on the wire, its zone named by its uid. A zone's row id is reserved by each
    /// side on its own: `.newZoneID` never crosses.
    package init(_ need: StorageSnapshot.Need, _ zones: ZoneNames) throws {
        self.init(op: "")
        var zone: Int64?
        switch need {
        case .zone(let id): op = "zones/lookup"; name = id.name; owner = id.ownerID
        case .ownedZones(let o): op = "zones/list"; owner = o
        case .newZoneID: throw StoreError(.internalError, "a zone's row id is not asked of a server")
        case .zoneUID(let u): op = "zones/exists"; uid = Data(u)
        case .deletedZone(let u): op = "zones/deleted"; uid = Data(u)
        case .listingZones(let u): op = "zones/listing"; user = u
        case .sharedZones(let u): op = "zones/shared"; user = u
        case .shareZones(let u): op = "shares/zones"; uid = Data(u)
        case .log(let z, let a): op = "log/entries"; zone = z; after = a
        case .logEntry(let z, let s): op = "log/entry"; zone = z; seq = s
        case .logHashes(let z): op = "log/hashes"; zone = z
        case .contact(let u): op = "contacts/lookup"; user = u
        case .contactIDs(let e, let n): op = "contacts/search"; email = e; name = n
        case .contactColumns: op = "contacts/list"
        case .records(let z, let n): op = "records/lookup"; zone = z; names = n
        case .page(let z, let a, let l): op = "records/page"; zone = z; afterName = a; limit = l
        case .sealedPage(let z, let b, let a, let l): op = "records/sealedPage"; zone = z; seq = b; afterName = a; limit = l
        case .allRows(let z): op = "records/all"; zone = z
        case .children(let z, let p): op = "records/children"; zone = z; name = p
        case .childrenOfAny(let z, let p): op = "records/childrenOfAny"; zone = z; names = p
        case .ancestors(let z, let n): op = "records/ancestors"; zone = z; name = n
        case .query(let z, let p): op = "records/query"; zone = z; plan = WirePlan(p)
        case .tombstones(let z): op = "records/hasTombstones"; zone = z
        case .tombstoneList(let z): op = "records/tombstones"; zone = z
        case .tombstoneCount(let z, let t): op = "records/tombstoneCount"; zone = z; seq = t
        case .changes(let z, let s, let n, let l): op = "changes/zone"; zone = z; after = s; afterName = n; limit = l
        case .counter: op = "changes/database/counter"
        case .changedZones(let o, let s): op = "changes/database"; owner = o; since = s
        case .changedSharedZones(let u, let s): op = "changes/database/shared"; user = u; since = s
        case .zoneTombstones(let u, let s, let o): op = "changes/database/deleted"; user = u; since = s; owned = o
        }
        self.zone = try zone.map { try zones.uid($0) }
    }
}

extension StorageSnapshot.Need {
    /// The zone the need reads under, by row id, if any (a server checks its reader may read it).
    package var zoneRowID: Int64? {
        switch self {
        case .log(let z, _), .logEntry(let z, _), .logHashes(let z), .records(let z, _), .page(let z, _, _), .sealedPage(let z, _, _, _),
             .allRows(let z), .children(let z, _), .childrenOfAny(let z, _), .ancestors(let z, _), .query(let z, _), .tombstones(let z),
             .tombstoneList(let z), .tombstoneCount(let z, _), .changes(let z, _, _, _):
            z
        case .zone, .ownedZones, .newZoneID, .zoneUID, .listingZones, .sharedZones, .shareZones, .contact, .contactIDs, .contactColumns,
             .counter, .changedZones, .changedSharedZones, .zoneTombstones, .deletedZone:
            nil
        }
    }
}

extension WireNeed: Equatable {}

/// A ``QueryPlan`` on the wire.
package struct WirePlan: Codable, Sendable, Equatable {
    package struct Predicate: Codable, Sendable, Equatable {
        package var field: String, type: String, comparison: String, value: WireSortValue
    }
    package struct Sort: Codable, Sendable, Equatable {
        package var field: String, type: String, ascending: Bool
    }
    package var recordType: String
    package var predicates: [Predicate]
    package var sorts: [Sort]
    package var afterValues: [WireSortValue]?
    package var afterName: String?
    package var limit: Int?

    package init(_ plan: QueryPlan) {
        recordType = plan.recordType
        predicates = plan.predicates.map { Predicate(field: $0.field, type: $0.type.description, comparison: $0.comparison.rawValue, value: WireSortValue($0.value)) }
        sorts = plan.sorts.map { Sort(field: $0.field, type: $0.type.description, ascending: $0.ascending) }
        afterValues = plan.after.map { $0.values.map(WireSortValue.init) }
        afterName = plan.after?.name
        limit = plan.limit
    }

    package func plan() throws -> QueryPlan {
        func type(_ name: String) throws -> FieldType {
            guard let type = FieldType(name: name), type.isQueryable else { throw StoreError(.invalidArguments, "a query on a field of unknown type") }
            return type
        }
        try Names.validateRecordType(recordType)
        for field in predicates.map(\.field) + sorts.map(\.field) where !Names.isIdentifier(field) {
            throw StoreError(.invalidArguments, "a query on a field whose name is not valid")
        }
        if let limit, !(1...(Limits.maxQueryLimit + 1)).contains(limit) {
            throw StoreError(.invalidArguments, "a query limit is between 1 and \(Limits.maxQueryLimit)")
        }
        guard (afterValues == nil) == (afterName == nil), (afterValues?.count ?? sorts.count) == sorts.count else {
            throw StoreError(.invalidArguments, "a query's position does not match its sort keys")
        }
        return QueryPlan(
            recordType: recordType,
            predicates: try predicates.map { p in
                guard let comparison = Query.Comparison(rawValue: p.comparison) else { throw StoreError(.invalidArguments, "unknown comparison") }
                let value = try p.value.value()
                guard value != .null else { throw StoreError(.invalidArguments, "a query compares with no value") }
                return QueryPlan.Predicate(field: p.field, type: try type(p.type), comparison: comparison, value: value)
            },
            sorts: try sorts.map { QueryPlan.Sort(field: $0.field, type: try type($0.type), ascending: $0.ascending) },
            after: try afterValues.map { QueryPlan.Position(values: try $0.map { try $0.value() }, name: afterName ?? "") },
            limit: limit)
    }
}

/// A ``QueryCursor/SortValue`` on the wire: exactly one of its fields, or none for null.
package struct WireSortValue: Codable, Sendable, Equatable {
    package var int: Int64?
    package var double: Double?
    package var text: String?

    init(_ value: QueryCursor.SortValue) {
        switch value {
        case .null: break
        case .int(let v): int = v
        case .double(let v): double = v
        case .text(let v): text = v
        }
    }

    func value() throws -> QueryCursor.SortValue {
        switch (int, double, text) {
        case (nil, nil, nil): return .null
        case (let v?, nil, nil): return .int(v)
        case (nil, let v?, nil): return .double(v)
        case (nil, nil, let v?): return .text(v)
        default: throw StoreError(.invalidArguments, "a sort value has more than one form")
        }
    }
}

import CofferCrypto
import Foundation

/// What `audit` found.
public struct AuditFinding: Sendable, Hashable {
    public enum Kind: String, Sendable {
        /// The zone's log (an entry, the chain, or what this user saw before).
        case log
        /// A cached column or table that disagrees with the verified log.
        case cache
        /// A zone key that does not open or does not match its commitment.
        case key
        /// A contact whose stored card does not verify, or whose row disagrees with its card.
        case contact
        case share, membership, commit, record, plaintext
    }
    public let kind: Kind
    public let zone: ZoneID?
    /// The record, entry or file concerned.
    public let subject: String
    public let message: String
    /// The owner of a zone that this finding names by its uid only (a zone the store does not
    /// show, so its name is not known here); nil otherwise.
    public var zoneOwnerID: String? = nil
}

/// The result of ``Session/audit(plaintexts:progress:)``.
public struct AuditReport: Sendable {
    public var findings: [AuditFinding] = []
    /// Zones checked, their shares, owner entries (genesis and membership), record entries
    /// (commits and rewrites), acceptances, records, and the files scanned.
    public var zones = 0, shares = 0, memberships = 0, commits = 0, acceptances = 0, records = 0, files = 0, bytesScanned = 0
    /// The zones of this user's marks (those not closed by a deletion) looked for in the store.
    public var marks = 0
}

extension Session {
    /// Verifies everything this user can open, as a reader would and more: each zone's whole log
    /// from its genesis (every chain link, every signature, what each entry may change) and that
    /// it extends what this user saw before; the caches that repeat the log; the zone key; every
    /// record (its version in a signed entry, its encrypted values opening); and, from the names
    /// each record entry signs, rows rolled back, put back after a deletion, or deleted from the
    /// file. With `plaintexts`, also scans the store's files (database, WAL, shared memory) for
    /// each text in UTF-8, UTF-16, base64 and hex, and reports where one appears.
    public func audit(plaintexts: [String] = [], progress: @Sendable (String) -> Void = { _ in }) async throws -> AuditReport {
        var report = AuditReport()
        let owned = try await zoneDirectory.ownedZoneAccess()
        let shared = try await zoneDirectory.sharedZoneAccess()
        // Zones refused by reads (a log that fails verification or does not extend what this
        // user saw) are audited too: `zone list` leaves them out, audit says why.
        if !plaintexts.isEmpty, !store.isSQLite {
            throw StoreError(.notSupported, "scanning for plaintext reads the store's own files, and \(store.isPostgres ? "a PostgreSQL store" : "a store on a server") has none on this machine")
        }
        await report.findings += try read { db in try self.auditor.auditContacts(db) }
        let listed = owned.zones.map(\.id) + owned.refused.map(\.0) + shared.zones.map(\.id) + shared.refused.map(\.0)
        // Every zone this user verified before, whatever the store lists now: a zone the list
        // leaves out is not thereby left out of the audit.
        let marked = try await zoneDirectory.unlistedMarkedZones(listed: listed)
        report.marks = marked.checked
        report.findings += marked.findings
        // Every zone from one state of the store, read a page of records at a time.
        try await store.withPinnedReads {
            for zone in listed {
                progress("zone \(zone.name)")
                let part = try await auditor.auditZone(zone) { progress("zone \(zone.name): \($0) records") }
                report.findings += part.findings
                report.zones += part.zones
                report.shares += part.shares
                report.memberships += part.memberships
                report.commits += part.commits
                report.acceptances += part.acceptances
                report.records += part.records
            }
        }
        if !plaintexts.isEmpty {
            let paths = [store.url.path, store.url.path + "-wal", store.url.path + "-shm"].filter { FileManager.default.fileExists(atPath: $0) }
            for path in paths {
                progress("scanning \(path)")
                guard let data = FileManager.default.contents(atPath: path) else { continue }
                report.files += 1
                report.bytesScanned += data.count
                for text in plaintexts {
                    for (form, needle) in PlaintextForms.forms(of: text) where data.range(of: needle) != nil {
                        report.findings.append(AuditFinding(kind: .plaintext, zone: nil, subject: URL(fileURLWithPath: path).lastPathComponent,
                                                            message: "the text (\(text.count) characters) appears in \(form) in \(URL(fileURLWithPath: path).lastPathComponent)"))
                        break
                    }
                }
            }
        }
        return report
    }

    /// How many record rows an audit reads and checks at a time.
    static let auditPage = 500

}

/// A zone's audit between its log and its rows (see ``Auditor/beginZoneAudit(_:_:)``).
struct ZoneAudit: Sendable {
    let zone: ZoneRow
    var report = AuditReport()
    /// The verified log; nil when it could not be read, and then rows are not checked.
    var log: ZoneLog?
    /// The last entry of the log as stored when it was read.
    var head: (seq: Int64, hash: Digest32)?
    /// Each name's latest entry in the log.
    var latest = [String: LatestVersion]()
    /// Each row checked: its name's entry.
    var live = [String: Int64]()
    /// The entry through which deletions were compacted, and the change feed's deletions.
    var compacted: Int64 = 0
    var tombstones = [String: Int64]()

    init(zone: ZoneRow) { self.zone = zone }

    mutating func finding(_ kind: AuditFinding.Kind, _ subject: String, _ message: String) {
        report.findings.append(AuditFinding(kind: kind, zone: zone.id, subject: subject, message: message))
    }

    /// One record row, in name order, with its entry and what opening it found wrong (see
    /// ``Auditor/failure(of:)``).
    mutating func check(name: String, seq: Int64, failure: String?) {
        report.records += 1
        live[name] = seq // its entry
        if let failure { finding(.record, name, failure) }
    }

    /// The checks across all rows, once every row went through ``check(name:seq:failure:)``:
    /// the report.
    mutating func finish() -> AuditReport {
        // Each row must be its name's latest version in the log, and each name the log last saved
        // must have its row: a row put back, rolled back to an older signed version, or deleted
        // from the file passes the per-row check, not this one.
        for (name, seq) in live.sorted(by: { $0.key < $1.key }) {
            do { try VerifiedLogs.checkLatest(name: name, seq: seq, zone: zone, latest: latest) } catch {
                finding(.record, name, (error as? StoreError)?.message ?? "\(error)")
            }
        }
        for (name, last) in latest.sorted(by: { $0.key < $1.key }) where !last.deleted && live[name] == nil {
            finding(.record, name, "record '\(name)', saved by entry \(last.seq), is not in the file: it was deleted there")
        }
        // The change feed finds deletions through `record_tombstone`: each name the log last
        // deleted (after the compacted history) must have one at that entry, and each one must
        // be its name's latest deletion, or a reader's feed misses or misdates a deletion.
        for (name, last) in latest.sorted(by: { $0.key < $1.key }) where last.deleted && last.seq > compacted && tombstones[name] != last.seq {
            finding(.cache, name, "record '\(Names.printable(name))' was deleted by entry \(last.seq), but the change feed's list of deletions "
                    + (tombstones[name].map { "dates it at entry \($0)" } ?? "does not have it"))
        }
        for (name, seq) in tombstones.sorted(by: { $0.key < $1.key }) where latest[name] != LatestVersion(seq: seq, deleted: true) {
            guard latest[name].map({ !$0.deleted || $0.seq <= compacted }) ?? true else { continue } // reported above
            finding(.cache, name, "the change feed lists a deletion of record '\(Names.printable(name))' at entry \(seq) that is not its latest entry in the log")
        }
        return report
    }
}

/// The byte forms in which a text could sit in a file.
public enum PlaintextForms {
    public static func forms(of text: String) -> [(String, Data)] {
        let utf8 = Data(text.utf8)
        var forms: [(String, Data)] = [("UTF-8", utf8)]
        if let le = text.data(using: .utf16LittleEndian), le.count >= 4 { forms.append(("UTF-16LE", le)) }
        if let be = text.data(using: .utf16BigEndian), be.count >= 4 { forms.append(("UTF-16BE", be)) }
        // base64 at each of the three alignments: drop the characters that depend on neighbours.
        for shift in 0..<3 {
            let padded = Data(repeating: 0, count: shift) + utf8
            var b64 = Array(padded.base64EncodedString().utf8)
            let skipFront = shift == 0 ? 0 : (shift * 4 + 2) / 3
            let keep = (padded.count / 3) * 4
            guard keep > skipFront + 4 else { continue }
            b64 = Array(b64[skipFront..<keep])
            forms.append(("base64", Data(b64)))
        }
        forms.append(("hex", Data(Hex.encode(utf8).utf8)))
        forms.append(("HEX", Data(Hex.encode(utf8).uppercased().utf8)))
        return forms
    }
}

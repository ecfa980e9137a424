import CofferCrypto
import Foundation
import GRDB

/// What `audit` found.
public struct AuditFinding: Sendable, Hashable {
    public enum Kind: String, Sendable {
        case share, membership, commit, record, plaintext
    }
    public let kind: Kind
    public let zone: ZoneID?
    /// The record, commit or file concerned.
    public let subject: String
    public let message: String
}

/// The result of ``Session/audit(plaintexts:)``.
public struct AuditReport: Sendable {
    public var findings: [AuditFinding] = []
    public var zones = 0, shares = 0, memberships = 0, commits = 0, records = 0, files = 0, bytesScanned = 0
}

extension Session {
    /// Verifies everything this user can open: each zone's share signature, every owner-signed
    /// membership entry, every commit (signature, hash chain, writer's permission), and every
    /// record (its hash in its commit, its encrypted values opening). With `plaintexts`, also
    /// scans the store's files (database, WAL, shared memory) for each text in UTF-8, UTF-16,
    /// base64 and hex, and reports where one appears.
    public func audit(plaintexts: [String] = [], progress: @Sendable (String) -> Void = { _ in }) async throws -> AuditReport {
        var report = AuditReport()
        let shared = try sharedZoneAccess()
        // A zone shared with this user whose share fails verification cannot be opened to check
        // further: it is a finding (and `zone list` leaves it out).
        for (zone, error) in shared.refused {
            report.zones += 1
            report.findings.append(AuditFinding(kind: .share, zone: zone, subject: "share", message: "\(error)"))
        }
        let zones = try ownedZones() + shared.zones
        for zone in zones {
            progress("zone \(zone.id.name)")
            let part: AuditReport = try store.read { db in
                var report = AuditReport()
                let row = try ZoneRow.fetch(db, zone.id)
                report.zones += 1
                func finding(_ kind: AuditFinding.Kind, _ subject: String, _ error: Error) {
                    report.findings.append(AuditFinding(kind: kind, zone: zone.id, subject: subject, message: "\(error)"))
                }
                if let (content, signature) = try ShareContent.load(db, zone: row) {
                    report.shares += 1
                    do { try verify(db, content, signature: signature, zone: row) } catch { finding(.share, "share", error) }
                }
                for seq in try Int64.fetchAll(db, sql: "SELECT seq FROM membership_log WHERE zone_id = ? ORDER BY seq", arguments: [row.rowID]) {
                    report.memberships += 1
                    do { _ = try membership(db, zone: row, seq: seq) } catch { finding(.membership, "membership \(seq)", error) }
                }
                var previous = [UInt8](repeating: 0, count: 32)
                // Each name's latest entry in the signed log (version 2 commits name their entries).
                var latest = [String: (seq: Int64, deleted: Bool)]()
                for commit in try Row.fetchAll(db, sql: "SELECT seq, prev_hash, hash, entries, names FROM zone_commit WHERE zone_id = ? ORDER BY seq",
                                               arguments: [row.rowID]) {
                    report.commits += 1
                    let seq: Int64 = commit[0]
                    if let names = commit[4] as Data? {
                        if let named = CommitBuilder.parseNames(Array(names), entries: (commit[3] as Data).count / 32) {
                            for entry in named { latest[entry.name] = (seq, entry.deleted) }
                        } else {
                            report.findings.append(AuditFinding(kind: .commit, zone: zone.id, subject: "commit \(seq)",
                                                                message: "commit \(seq) of zone '\(zone.id.name)' has a damaged list of names"))
                        }
                    }
                    if Array(commit[1] as Data) != previous {
                        report.findings.append(AuditFinding(kind: .commit, zone: zone.id, subject: "commit \(seq)",
                                                            message: "commit \(seq) does not follow the one before it (the chain of commits is broken)"))
                    }
                    previous = Array(commit[2] as Data)
                    do { _ = try verifiedCommit(db, zone: row, seq: seq) } catch { finding(.commit, "commit \(seq)", error) }
                }
                let statement = try db.makeStatement(sql: "SELECT \(Self.recordColumns) FROM record WHERE zone_id = ? ORDER BY name")
                let rows = try Row.fetchCursor(statement, arguments: [row.rowID])
                var live = [String: Int64]()
                while let record = try rows.next() {
                    report.records += 1
                    live[record[0]] = record[6] // its commit
                    do { _ = try decodeRecord(db, zone: row, row: record) } catch { finding(.record, record[0], error) }
                }
                // Each row must be its name's latest version in the log, and each name the log last
                // saved must have its row: a row put back, rolled back to an older signed version, or
                // deleted from the file passes the per-row check, not this one.
                func logFinding(_ name: String, _ message: String) {
                    report.findings.append(AuditFinding(kind: .record, zone: zone.id, subject: name, message: message))
                }
                for (name, seq) in live.sorted(by: { $0.key < $1.key }) {
                    guard let last = latest[name], last.seq > seq else { continue }
                    logFinding(name, last.deleted
                        ? "record '\(name)' was deleted by commit \(last.seq), but its version of commit \(seq) is in the file: it was put back"
                        : "record '\(name)' is its version of commit \(seq), but commit \(last.seq) wrote a later one: it was rolled back in the file")
                }
                for (name, last) in latest.sorted(by: { $0.key < $1.key }) where !last.deleted && live[name] == nil {
                    logFinding(name, "record '\(name)', saved by commit \(last.seq), is not in the file: it was deleted there")
                }
                return report
            }
            report.findings += part.findings
            report.zones += part.zones
            report.shares += part.shares
            report.memberships += part.memberships
            report.commits += part.commits
            report.records += part.records
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

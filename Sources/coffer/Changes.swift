import ArgumentParser
import CofferStore
import Foundation

extension Coffer {
    struct Changes: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Changed records and deleted names of a zone since a token, or changed and deleted zones of a database.",
            discussion: """
                Without --since, from the beginning. Pass the printed token as --since next time; while \
                moreComing is true, ask again at once. --follow keeps watching and prints each new page as one \
                JSON line (with --json) or as text, until interrupted; it sees other processes' commits. When the \
                server goes away (a Coffer server restarting, PostgreSQL), --follow says so on stderr and tries again, \
                after 1 s and then twice as long each time (at most 30 s), resuming where it was. A changed \
                record that fails verification (tampered) is left out: the page is printed with its token, then \
                the command fails with exit 65 naming the records left out (--follow stops there), unless \
                --allow-refused is given.
                """)

        @Argument(help: "The zone (NAME or NAME@OWNER).") var zone: String?
        @Option(help: "private or shared: list zone changes of a database instead.") var database: RecordDatabase.Scope?
        @Option(help: ArgumentHelp("The token a previous call printed.", valueName: "token")) var since: String?
        @Option(parsing: .unconditional, help: "At most this many changes per page (zone changes), 1 to 10000; default 100.") var limit: Int?
        @Flag(help: "Keep watching and print new changes as they come.") var follow = false
        @Flag(help: "Exit 0 (and keep following) even when records that fail verification were left out (each is named in a warning on stderr).")
        var allowRefused = false
        @OptionGroup var global: GlobalOptions

        var pageSize: Int { limit ?? 100 }

        func validate() throws {
            if (zone == nil) == (database == nil) { throw CLIError.usage("give either a ZONE or --database private|shared") }
            if let limit, limit < 1 || limit > 10_000 { throw CLIError.usage("--limit is between 1 and 10000") }
            if database != nil && limit != nil { throw CLIError.usage("--limit applies to a zone's changes, not to --database") }
            if database != nil && allowRefused { throw CLIError.usage("--allow-refused applies to a zone's changes, not to --database") }
        }

        func run() async throws {
            let token = try since.map { try ChangeToken(string: $0) }
            // A zone's changes, read once, come from the replica (pulled first when the server
            // answers), with the changes kept offline flagged as pending.
            let context = try await SessionContext(global, createStore: false, readsLocally: zone != nil && !follow)
            if let database {
                let db = database == .private ? context.session.privateDatabase : context.session.sharedDatabase
                if follow {
                    var position = token
                    try await reconnecting {
                        for try await page in db.databaseChangeStream(since: position) {
                            try printDatabase(page, context: context, streaming: true)
                            position = page.token
                        }
                    }
                    return
                }
                try printDatabase(try await db.databaseChanges(since: token), context: context, streaming: false)
                return
            }
            let zoneID = try await context.zone(zone!)
            let db = context.db(zoneID)
            if follow {
                var position = token
                try await reconnecting {
                    // Catch up first, then watch.
                    while true {
                        let page = try await db.changes(in: zoneID, since: position, limit: pageSize)
                        try printZone(page, context: context, streaming: true)
                        position = page.token
                        if !page.moreComing { break }
                    }
                    for try await page in db.changeStream(in: zoneID, since: position, limit: pageSize) {
                        try printZone(page, context: context, streaming: true)
                        position = page.token
                    }
                }
                return
            }
            let page = try await db.changes(in: zoneID, since: token, limit: pageSize)
            try writeZone(page, context: context, streaming: false, pending: try await context.replica?.pendingRecords(in: zoneID) ?? [])
            try RefusedRecords.check(page.refused, allowed: allowRefused)
        }

        /// Runs `follow` until it ends; when the store's server (a Coffer server, PostgreSQL) goes
        /// away, says so on stderr and runs it again, after 1 s, then twice as long each time up
        /// to 30 s, as `tail -F` waits for a file to come back. `follow` resumes from the last
        /// page it printed. Any other error ends it.
        func reconnecting(_ follow: () async throws -> Void) async throws {
            var delay = 1
            while true {
                do {
                    try await follow()
                    return
                } catch let error as StoreError where error.code == .serviceUnavailable {
                    Output.note("warning: \(Output.oneLine(error.message)); following again in \(delay) s")
                    try await Task.sleep(for: .seconds(delay))
                    delay = min(delay * 2, 30)
                }
            }
        }

        /// Prints a page (its token last), then fails if it left out records that fail verification.
        func printZone(_ page: ZoneChanges, context: SessionContext, streaming: Bool) throws {
            try writeZone(page, context: context, streaming: streaming)
            try RefusedRecords.check(page.refused, allowed: allowRefused)
        }

        /// `pending`: with a replica, the changes kept offline (not in the page: a token names
        /// confirmed positions only), each record as it leaves it, or nil for a delete.
        func writeZone(_ page: ZoneChanges, context: SessionContext, streaming: Bool, pending: [(name: String, record: Record?)] = []) throws {
            if global.json {
                var w = JSONWriter(pretty: !streaming)
                w.beginObject()
                w.key("changed")
                w.beginArray()
                for r in page.changed { try RecordOutput.write(r, context: context, transactionAuthor: true, into: &w) }
                w.endArray()
                w.key("deleted")
                w.beginArray()
                for d in page.deleted { w.string(d.name) }
                w.endArray()
                w.key("deletions")
                w.beginArray()
                for d in page.deleted {
                    w.beginObject()
                    w.key("author"); w.string(d.authorID)
                    w.key("deleted"); w.string(Output.iso(d.deleted))
                    w.key("name"); w.string(d.name)
                    w.key("transactionAuthor"); if let author = d.transactionAuthor { w.string(author) } else { w.null() }
                    w.endObject()
                }
                w.endArray()
                w.key("moreComing"); w.bool(page.moreComing)
                if !pending.isEmpty {
                    w.key("pending")
                    w.beginArray()
                    for (_, record) in pending { if let record { try RecordOutput.write(record, context: context, into: &w) } }
                    w.endArray()
                    w.key("pendingDeleted")
                    w.beginArray()
                    for (name, record) in pending where record == nil { w.string(name) }
                    w.endArray()
                }
                w.key("refused")
                w.beginArray()
                for name in page.refused.keys.sorted() { w.string(name) }
                w.endArray()
                w.key("token"); w.string(page.token.string)
                w.endObject()
                RecordOutput.print(w)
                return
            }
            // Names and labels come from the store: one line each, whatever they hold.
            for r in page.changed {
                Output.line(Output.oneLine("changed \(r.name) (\(r.recordType)) tag \(r.changeTag ?? "-") by \(context.displayName(r.modifierID))"
                                           + (r.transactionAuthor.map { " [\($0)]" } ?? "")))
            }
            for d in page.deleted {
                Output.line(Output.oneLine("deleted \(d.name) by \(context.displayName(d.authorID))" + (d.transactionAuthor.map { " [\($0)]" } ?? "")))
            }
            for (name, record) in pending {
                Output.line(Output.oneLine(record.map { "pending changed \(name) (\($0.recordType)), not synced yet" } ?? "pending deleted \(name), not synced yet"))
            }
            // Every page, streamed or not, ends with its token: the place to resume from.
            Output.line("token: \(page.token.string)")
            Output.line("more coming: \(page.moreComing ? "yes" : "no")")
        }

        func printDatabase(_ page: DatabaseChanges, context: SessionContext, streaming: Bool) throws {
            func ref(_ z: ZoneID) -> String { z.ownerID == context.session.userID ? z.name : "\(z.name)@\(z.ownerID)" }
            if global.json {
                let object: [String: Any] = [
                    "changed": page.changed.map(ref),
                    "deleted": page.deleted.map { ["zone": ref($0.zoneID), "reason": $0.reason] },
                    "token": page.token.string,
                    "moreComing": page.moreComing,
                ]
                Output.out(try RecordOutput.data(object, pretty: !streaming) + Data("\n".utf8))
                return
            }
            for z in page.changed { Output.line("changed \(ref(z))") }
            for d in page.deleted { Output.line("deleted \(ref(d.zoneID)) (\(d.reason))") }
            if !streaming {
                Output.line("token: \(page.token.string)")
                Output.line("more coming: no")
            }
        }
    }
}

extension RecordDatabase.Scope: ExpressibleByArgument {}

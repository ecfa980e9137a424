import ArgumentParser
import CofferStore
import Foundation

extension Coffer.RecordCommand {
    struct Query: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Find records of a type by their plain fields.",
            discussion: """
                OP is one of = != < <= > >= ^= (begins with): the whole run of the characters = ! < > ^ ~ after \
                the field, so a value that begins with one of them needs a space before it. Encrypted fields cannot be queried or sorted. A matching \
                record that fails verification (tampered) is left out: the records that verified are printed, then \
                the command fails with exit 65 naming the records left out, unless --allow-refused is given.
                """)

        @Argument(help: "The zone.") var zone: String
        @Option(help: "The record type.") var type: String
        @Option(name: .customLong("where"), help: ArgumentHelp("A condition 'FIELD OP VALUE' (all must hold).", valueName: "condition"))
        var conditions: [String] = []
        @Option(help: ArgumentHelp("Sort by a plain field, ascending, or FIELD:desc.", valueName: "field[:desc]"))
        var sort: [String] = []
        @Option(parsing: .unconditional, help: "At most this many records, 1 to 10000 (a cursor for the next page is printed).") var limit: Int?
        @Option(help: ArgumentHelp("Continue from the cursor a previous page printed.", valueName: "token")) var cursor: String?
        @Flag(help: "Exit 0 even when records that fail verification were left out (each is named in a warning on stderr).")
        var allowRefused = false
        @OptionGroup var global: GlobalOptions

        static let operators: [(String, CofferStore.Query.Comparison)] = [
            ("!=", .notEqual), ("<=", .lessThanOrEqual), (">=", .greaterThanOrEqual), ("^=", .beginsWith),
            ("=", .equal), ("<", .lessThan), (">", .greaterThan),
        ]

        func validate() throws {
            if let limit, !(1...Limits.maxQueryLimit).contains(limit) { throw CLIError.usage("--limit is between 1 and \(Limits.maxQueryLimit)") }
        }

        func run() async throws {
            let context = try await SessionContext(global, createStore: false, readsLocally: true)
            let zoneID = try await context.zone(zone)
            let schema = try await context.db(zoneID).schema(of: type, in: zoneID)
            var query = CofferStore.Query(recordType: type, limit: limit)
            for condition in conditions {
                query.predicates.append(try Self.predicate(condition, schema: schema, type: type))
            }
            for s in sort {
                let parts = s.split(separator: ":", maxSplits: 1).map(String.init)
                guard parts.count == 1 || (parts.count == 2 && ["asc", "desc"].contains(parts[1])) else {
                    throw CLIError.usage("--sort takes FIELD, FIELD:asc or FIELD:desc, not '\(s)'")
                }
                query.sort.append(.init(parts[0], ascending: parts.count == 1 || parts[1] == "asc"))
            }
            let result = try await context.db(zoneID).query(query, in: zoneID, cursor: try cursor.map(QueryCursor.init(token:)))
            if global.json {
                // Streamed in pieces of about 1 MiB: a page of 10,000 records is 16 MB of JSON.
                var w = JSONWriter(pretty: true, capacity: (1 << 20) + 65_536)
                try RecordJSON.write(result, schema: schema, userID: context.session.userID, into: &w, flush: RecordOutput.write)
                RecordOutput.print(w)
                try RefusedRecords.check(result.refused, allowed: allowRefused)
                return
            }
            if result.records.isEmpty { Output.line("No records match.") }
            for record in result.records {
                let plain = record.values.keys.sorted().map { "\($0)=\(RecordOutput.display(record.values[$0]!))" }
                let sealed = record.encryptedValues.keys.sorted().map { "\($0)=\(RecordOutput.display(record.encryptedValues[$0]!))" }
                Output.line(([record.name, "[\(record.changeTag ?? "-")]"] + plain + (sealed.isEmpty ? [] : ["| secret:"] + sealed)).joined(separator: " "))
            }
            if let next = result.cursor {
                Output.note("More records: add --cursor \(next.token)")
            }
            try RefusedRecords.check(result.refused, allowed: allowRefused)
        }

        /// The characters an operator is made of: after the field, the whole run of them is the
        /// operator (`title =~ x` names `=~`, never `=` and a value `~ x`).
        static let operatorCharacters: Set<Character> = ["=", "!", "<", ">", "^", "~"]
        static let operatorList = "= != < <= > >= ^="

        static func predicate(_ text: String, schema: [String: FieldSchema], type: String) throws -> CofferStore.Query.Predicate {
            func notCondition() -> CLIError {
                CLIError.usage("--where '\(Output.oneLine(text))' is not 'FIELD OP VALUE' with OP one of \(operatorList)")
            }
            var rest = Substring(text).drop(while: { $0.isWhitespace })
            let field = String(rest.prefix(while: { $0.isASCII && ($0.isLetter || $0.isNumber || $0 == "_") }))
            guard !field.isEmpty else { throw notCondition() }
            rest = rest.dropFirst(field.count).drop(while: { $0.isWhitespace })
            let symbol = String(rest.prefix(while: { operatorCharacters.contains($0) }))
            if symbol.isEmpty {
                // A word in the operator's place (`title contains x`) is an operator Coffer does not have.
                let word = rest.prefix(while: { !$0.isWhitespace })
                if !word.isEmpty, word.count < rest.count {
                    throw CLIError.usage("unknown operator \"\(Output.oneLine(String(word)))\" in --where '\(Output.oneLine(text))'; use one of \(operatorList)")
                }
                throw notCondition()
            }
            guard let comparison = operators.first(where: { $0.0 == symbol })?.1 else {
                throw CLIError.usage("unknown operator \"\(symbol)\" in --where '\(Output.oneLine(text))'; use one of \(operatorList)")
            }
            let raw = rest.dropFirst(symbol.count).trimmingCharacters(in: .whitespaces)
            guard let spec = schema[field] else {
                throw CLIError(ExitStatus.dataError, "\(type) has no field '\(field)' in this zone")
            }
            guard !spec.encrypted else {
                throw CLIError(ExitStatus.dataError, "field '\(field)' is encrypted; encrypted fields cannot be queried")
            }
            let valueType: FieldType = spec.type.isList ? spec.type.scalar : spec.type
            return .init(field, comparison, try FieldAssignment.value(raw, as: valueType, key: field))
        }
    }
}

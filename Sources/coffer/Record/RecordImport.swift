import ArgumentParser
import CofferStore
import Foundation

extension Coffer.RecordCommand {
    struct Import: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Save records from JSON lines of the 'record get' shape, in atomic batches of up to 400.",
            discussion: """
                Each line needs name, type, values and encryptedValues; parent and types are optional, and the \
                other keys of 'record get' are ignored. JSON numbers, strings, booleans and lists map to int or \
                double, string, bool and list, unless 'types' or the zone's schema says otherwise (a date as an \
                ISO 8601 string, bytes as base64, a ref as a name). The whole file is checked before anything is \
                saved; records that exist are replaced.
                """)

        @Argument(help: "The zone.") var zone: String
        @Argument(help: ArgumentHelp("The JSON lines file ('-' for stdin).", valueName: "file")) var file: String
        @OptionGroup var global: GlobalOptions

        static let knownKeys: Set<String> = ["zone", "name", "type", "parent", "changeTag", "values", "encryptedValues", "types",
                                             "creator", "modifier", "created", "modified", "keyEpoch"]

        func run() async throws {
            let data: Data
            if file == "-" {
                data = FileHandle.standardInput.readDataToEndOfFile()
            } else {
                guard let read = FileManager.default.contents(atPath: file) else {
                    throw CLIError(ExitStatus.notFound, "cannot read \(file)")
                }
                data = read
            }
            let context = try SessionContext(global)
            let zoneID = try context.zone(zone)

            // Parse and check every line first: a malformed file saves nothing.
            var records = [Record]()
            var schemas = [String: [String: FieldSchema]]()
            var names = Set<String>()
            // Field kinds as the zone's schema fixes them, extended by the file as it goes: a
            // line that disagrees with the zone or with an earlier line is refused before any save.
            var kinds = [String: [String: FieldSchema]]()
            var newEmptyLists = [(String, String, FieldType, Bool)]()
            for (index, line) in data.split(separator: 0x0a, omittingEmptySubsequences: false).enumerated() {
                let lineNumber = index + 1
                let trimmed = line.drop { $0 == 0x20 || $0 == 0x09 || $0 == 0x0d }
                if trimmed.isEmpty { continue }
                do {
                    let (record, declared) = try await Self.parse(Data(line), zone: zoneID, context: context, schemas: &schemas)
                    guard names.insert(record.name).inserted else {
                        throw CLIError(ExitStatus.dataError, "record '\(record.name)' appears twice")
                    }
                    if kinds[record.recordType] == nil {
                        kinds[record.recordType] = (try? await context.db.schema(of: record.recordType, in: zoneID)) ?? [:]
                    }
                    for (fields, encrypted) in [(record.values, false), (record.encryptedValues, true)] {
                        for (key, value) in fields {
                            let type: FieldType
                            if case .list(let items) = value, items.isEmpty {
                                type = kinds[record.recordType]?[key]?.type ?? declared[key] ?? value.fieldType
                            } else {
                                type = value.fieldType
                            }
                            if let known = kinds[record.recordType]?[key] {
                                guard known.encrypted == encrypted else {
                                    throw CLIError(ExitStatus.dataError, "field '\(key)' of \(record.recordType) is \(known.encrypted ? "encrypted" : "plain") (fixed by the zone or an earlier line), not \(encrypted ? "encrypted" : "plain")")
                                }
                                guard known.type == type else {
                                    throw CLIError(ExitStatus.dataError, "field '\(key)' of \(record.recordType) has type \(known.type) (fixed by the zone or an earlier line), not \(type)")
                                }
                            } else {
                                if case .list(let items) = value, items.isEmpty {
                                    guard declared[key] != nil else {
                                        throw CLIError(ExitStatus.dataError, "field '\(key)' is a new empty list; give its type in 'types' (for example \"[int]\")")
                                    }
                                    newEmptyLists.append((record.recordType, key, type, encrypted))
                                }
                                kinds[record.recordType, default: [:]][key] = FieldSchema(type: type, encrypted: encrypted)
                            }
                        }
                    }
                    records.append(record)
                } catch let e as CLIError {
                    throw CLIError(e.status, "line \(lineNumber): \(e.message); nothing was imported")
                } catch let e as StoreError {
                    throw CLIError(ErrorReporter.status(for: e.code), "line \(lineNumber): \(e.message); nothing was imported")
                }
            }

            for (recordType, field, type, encrypted) in newEmptyLists {
                try await context.db.defineField(field, of: recordType, type: type, encrypted: encrypted, in: zoneID)
            }
            // Save in atomic batches: at most 400 records and well under the 2 MiB batch limit.
            let progress = isatty(STDERR_FILENO) != 0
            var imported = 0, batches = 0, start = 0
            while start < records.count {
                var end = start, bytes = 0
                while end < records.count, end - start < Limits.maxBatchRecords {
                    let size = Self.estimatedSize(records[end])
                    if end > start && bytes + size > Limits.maxBatchBytes * 3 / 4 { break }
                    bytes += size
                    end += 1
                }
                do {
                    _ = try await context.db.modify(saving: Array(records[start..<end]), in: zoneID, policy: .allKeys)
                } catch let e as StoreError {
                    if progress { Output.note("") }
                    let detail = e.partialErrors.isEmpty ? e.message : e.partialErrors.sorted { $0.key < $1.key }.prefix(3).map { "\($0.key): \($0.value.message)" }.joined(separator: "; ")
                    throw CLIError(ErrorReporter.status(for: e.code == .partialFailure ? (e.partialErrors.values.first?.code ?? e.code) : e.code),
                                   "\(detail) (\(imported) records in \(batches) batches were imported before this batch; batches are atomic)")
                }
                imported += end - start
                batches += 1
                start = end
                if progress {
                    FileHandle.standardError.write(Data("\rImported \(imported) of \(records.count) records".utf8))
                }
            }
            if progress { Output.note("") }
            if global.json {
                try Output.json(["imported": imported, "batches": batches])
            } else {
                let records = imported == 1 ? "1 record" : "\(imported) records"
                Output.line("Imported \(records) into \(zoneID.name) in \(batches == 1 ? "1 atomic batch" : "\(batches) atomic batches").")
            }
        }

        static func estimatedSize(_ record: Record) -> Int {
            func size(_ v: RecordValue) -> Int {
                switch v {
                case .string(let s), .reference(let s): return s.utf8.count + 8
                case .bytes(let b): return b.count * 4 / 3 + 8
                case .list(let items): return items.reduce(8) { $0 + size($1) }
                default: return 24
                }
            }
            return (Array(record.values.values) + Array(record.encryptedValues.values)).reduce(128) { $0 + size($1) }
        }

        static func parse(_ line: Data, zone: ZoneID, context: SessionContext,
                          schemas: inout [String: [String: FieldSchema]]) async throws -> (Record, [String: FieldType]) {
            guard let object = (try? JSONSerialization.jsonObject(with: line, options: [.fragmentsAllowed])) as? [String: Any] else {
                throw CLIError(ExitStatus.dataError, "not a JSON object")
            }
            if let unknown = Set(object.keys).subtracting(knownKeys).sorted().first {
                throw CLIError(ExitStatus.dataError, "unknown key '\(unknown)'")
            }
            guard let name = object["name"] as? String, let type = object["type"] as? String else {
                throw CLIError(ExitStatus.dataError, "'name' and 'type' must be strings")
            }
            guard let values = object["values"] as? [String: Any], let encrypted = object["encryptedValues"] as? [String: Any] else {
                throw CLIError(ExitStatus.dataError, "'values' and 'encryptedValues' must be objects")
            }
            var declared = [String: FieldType]()
            if let types = object["types"] {
                guard let types = types as? [String: String] else { throw CLIError(ExitStatus.dataError, "'types' must map fields to type names") }
                for (field, typeName) in types {
                    guard let t = FieldType(name: typeName) else { throw CLIError(ExitStatus.dataError, "unknown type '\(typeName)' for '\(field)'") }
                    declared[field] = t
                }
            }
            if schemas[type] == nil {
                schemas[type] = (try? await context.db.schema(of: type, in: zone)) ?? [:]
            }
            var record = Record(type: type, name: name, zone: zone)
            if let parent = object["parent"], !(parent is NSNull) {
                guard let p = parent as? String else { throw CLIError(ExitStatus.dataError, "'parent' must be a string") }
                record.parent = p
            }
            for (key, raw) in values {
                record.values[key] = try JSONValue.convert(raw, key: key, type: declared[key] ?? schemas[type]?[key]?.type)
            }
            for (key, raw) in encrypted {
                record.encryptedValues[key] = try JSONValue.convert(raw, key: key, type: declared[key] ?? schemas[type]?[key]?.type)
            }
            try record.validate()
            return (record, declared)
        }
    }
}

/// JSON values to record values, typed by a declared or schema type when there is one.
enum JSONValue {
    static func convert(_ raw: Any, key: String, type: FieldType?) throws -> RecordValue {
        func bad(_ what: String) -> CLIError { CLIError(ExitStatus.dataError, "field '\(key)': \(what)") }
        if let type {
            if case .list(let element) = type {
                guard let items = raw as? [Any] else { throw bad("expected a list of \(element)") }
                return .list(try items.map { try convert($0, key: key, type: element) })
            }
            switch (type, raw) {
            case (.string, let s as String): return .string(s)
            case (.reference, let s as String): return .reference(s)
            case (.date, let s as String):
                guard let d = FieldAssignment.parseDate(s) else { throw bad("'\(s.prefix(40))' is not an ISO 8601 date") }
                return .date(d)
            case (.bytes, let s as String):
                guard let data = Data(base64Encoded: s) else { throw bad("not base64") }
                return .bytes(Array(data))
            case (.bool, let n as NSNumber) where isBool(n): return .bool(n.boolValue)
            case (.int, let n as NSNumber) where !isBool(n):
                guard let v = exactInt(n) else { throw bad("\(n) is not a 64-bit integer") }
                return .int(v)
            case (.double, let n as NSNumber) where !isBool(n): return .double(n.doubleValue)
            case (.date, let n as NSNumber) where !isBool(n): return .date(Date(timeIntervalSince1970: n.doubleValue))
            default: throw bad("expected \(type)")
            }
        }
        switch raw {
        case let s as String: return .string(s)
        case let n as NSNumber:
            if isBool(n) { return .bool(n.boolValue) }
            if let v = exactInt(n) { return .int(v) }
            return .double(n.doubleValue)
        case let items as [Any]:
            let converted = try items.map { try convert($0, key: key, type: nil) }
            return .list(converted)
        default: throw bad("null and objects are not values")
        }
    }

    /// JSON true/false arrive as NSNumber of Objective-C type `c` (char); numbers never do.
    static func isBool(_ n: NSNumber) -> Bool {
        String(cString: n.objCType) == "c"
    }

    /// The integer a JSON number holds, if it was written without a fraction or exponent.
    static func exactInt(_ n: NSNumber) -> Int64? {
        switch String(cString: n.objCType) {
        case "i", "s", "l", "q", "I", "S", "L", "Q": return Int64(exactly: n.int64Value) == nil ? nil : n.int64Value
        default: return nil
        }
    }
}

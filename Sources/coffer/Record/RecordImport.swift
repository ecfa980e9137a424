import ArgumentParser
import CofferStore
import CofferVault
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
            let context = try SessionContext(global, createStore: false)
            let zoneID = try context.zone(zone)

            // Parse and check every line first: a malformed file saves nothing.
            var records = [Record]()
            var schemas = [String: [String: FieldSchema]]()
            var names = Set<String>()
            // Field kinds as the zone's schema fixes them, extended by the file as it goes: a
            // line that disagrees with the zone or with an earlier line is refused before any save.
            var kinds = [String: [String: FieldSchema]]()
            // Empty lists of fields the zone does not know yet, each saved with the batch of the
            // first record that has it (the record's index), so a refused batch fixes nothing.
            var newEmptyLists = [(record: Int, declaration: FieldDeclaration)]()
            var lineNumbers = [Int]()
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
                        kinds[record.recordType] = (try? await context.db(zoneID).schema(of: record.recordType, in: zoneID)) ?? [:]
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
                                    newEmptyLists.append((records.count, FieldDeclaration(key, of: record.recordType, type: type, encrypted: encrypted)))
                                }
                                kinds[record.recordType, default: [:]][key] = FieldSchema(type: type, encrypted: encrypted)
                            }
                        }
                    }
                    records.append(record)
                    lineNumbers.append(lineNumber)
                } catch let e as CLIError {
                    throw CLIError(e.status, "line \(lineNumber): \(e.message); nothing was imported")
                } catch let e as StoreError {
                    throw CLIError(ErrorReporter.status(for: e.code), "line \(lineNumber): \(e.message); nothing was imported")
                }
            }

            // A record that exists keeps its type, and a parent is in the file or in the zone:
            // checked against the zone before any save.
            let outside = Set(records.compactMap(\.parent)).subtracting(names)
            let existing = try await context.db(zoneID).recordTypes(named: records.map(\.name) + outside.sorted(), in: zoneID)
            for (i, record) in records.enumerated() {
                if let type = existing[record.name], type != record.recordType {
                    throw CLIError(ExitStatus.dataError, "line \(lineNumbers[i]): record '\(record.name)' exists as type \(type); its type cannot change to \(record.recordType) (delete it first); nothing was imported")
                }
                if let parent = record.parent, !names.contains(parent), existing[parent] == nil {
                    throw CLIError(ExitStatus.notFound, "line \(lineNumbers[i]): parent '\(parent)' of record '\(record.name)' is neither in the file nor in zone \(zoneID.name); nothing was imported")
                }
            }
            // Parents are saved before their children (a batch's parents must exist): records in
            // order of their depth below the file's roots, the file's order otherwise kept.
            let order = try Self.parentsFirst(records, lineNumbers: lineNumbers)
            var position = [Int](repeating: 0, count: records.count)
            for (new, old) in order.enumerated() { position[old] = new }
            records = order.map { records[$0] }
            newEmptyLists = newEmptyLists.map { (position[$0.record], $0.declaration) }
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
                    let declarations = newEmptyLists.filter { (start..<end).contains($0.record) }.map(\.declaration)
                    _ = try await context.db(zoneID).modify(saving: Array(records[start..<end]), in: zoneID, policy: .allKeys, declaring: declarations)
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

        /// Indexes of `records` with every record after its parent (when the parent is in the
        /// file too): by depth, then file order. A cycle of parents in the file is refused.
        static func parentsFirst(_ records: [Record], lineNumbers: [Int]) throws -> [Int] {
            var index = [String: Int](minimumCapacity: records.count)
            for (i, record) in records.enumerated() { index[record.name] = i }
            var depth = [Int?](repeating: nil, count: records.count)
            for start in records.indices where depth[start] == nil {
                var chain = [start], onChain: Set<Int> = [start]
                // Walk up to a record of known depth, or to one whose parent is not in the file.
                while let parent = records[chain.last!].parent, let up = index[parent], depth[up] == nil {
                    guard onChain.insert(up).inserted else {
                        throw CLIError(ExitStatus.dataError, "line \(lineNumbers[up]): record '\(records[up].name)' is its own ancestor through its parents in the file; nothing was imported")
                    }
                    chain.append(up)
                }
                var d = records[chain.last!].parent.flatMap { index[$0] }.flatMap { depth[$0] }.map { $0 + 1 } ?? 0
                for i in chain.reversed() {
                    depth[i] = d
                    d += 1
                }
            }
            return records.indices.sorted { (depth[$0]!, $0) < (depth[$1]!, $1) }
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
            let parsed: Any
            do { parsed = try JSONSerialization.jsonObject(with: line, options: [.fragmentsAllowed]) } catch {
                throw CLIError(ExitStatus.dataError, "not valid JSON (or a number beyond a double's range)")
            }
            guard let object = parsed as? [String: Any] else { throw CLIError(ExitStatus.dataError, "not a JSON object") }
            if let twice = JSONDuplicateKeys.first(in: line) {
                throw CLIError(ExitStatus.dataError, "the key '\(twice)' appears twice in one object")
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
                schemas[type] = (try? await context.db(zone).schema(of: type, in: zone)) ?? [:]
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
                record.encryptedValues[key] = try JSONValue.convert(raw, key: key, type: declared[key] ?? schemas[type]?[key]?.type, encrypted: true)
            }
            try record.validate()
            return (record, declared)
        }
    }
}

/// JSON values to record values, typed by a declared or schema type when there is one.
/// An encrypted field's value (`encrypted`) is never quoted in an error.
enum JSONValue {
    static func convert(_ raw: Any, key: String, type: FieldType?, encrypted: Bool = false) throws -> RecordValue {
        func bad(_ what: String) -> CLIError {
            CLIError(ExitStatus.dataError, encrypted ? "field '\(key)' (encrypted): \(what)" : "field '\(key)': \(what)")
        }
        func invalid(_ shown: String, _ problem: String) -> CLIError {
            FieldAssignment.invalidValue(key: key, shown: shown, problem: problem, encrypted: encrypted)
        }
        func int(_ n: NSNumber) throws -> Int64? {
            switch integer(n) {
            case .exact(let v): return v
            case .fractional: return nil
            case .outOfRange(let text): throw invalid(text, "is outside the 64-bit integer range")
            }
        }
        if let type {
            if case .list(let element) = type {
                guard let items = raw as? [Any] else { throw bad("expected a list of \(element)") }
                return .list(try items.map { try convert($0, key: key, type: element, encrypted: encrypted) })
            }
            switch (type, raw) {
            case (.string, let s as String): return .string(s)
            case (.reference, let s as String): return .reference(s)
            case (.date, let s as String):
                guard let d = FieldAssignment.parseDate(s) else { throw invalid("'\(s.prefix(40))'", "is not \(FieldAssignment.dateForms)") }
                return .date(d)
            case (.bytes, let s as String):
                guard let data = FieldAssignment.base64(s) else { throw bad("not base64") }
                return .bytes(Array(data))
            case (.bool, let n as NSNumber) where isBool(n): return .bool(n.boolValue)
            case (.int, let n as NSNumber) where !isBool(n):
                guard let v = try int(n) else { throw invalid("\(n)", "is not a 64-bit integer") }
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
            if let v = try int(n) { return .int(v) }
            return .double(n.doubleValue)
        case let items as [Any]:
            // JSON has one kind of number: a list of numbers that are not all integers is a [double].
            let numbers = items.compactMap { $0 as? NSNumber }.filter { !isBool($0) }
            if numbers.count == items.count, numbers.contains(where: { integer($0) == .fractional }) {
                return .list(numbers.map { .double($0.doubleValue) })
            }
            let converted = try items.map { try convert($0, key: key, type: nil, encrypted: encrypted) }
            return .list(converted)
        default: throw bad("null and objects are not values")
        }
    }

    /// JSON true/false arrive as NSNumber of Objective-C type `c` (char); numbers never do.
    static func isBool(_ n: NSNumber) -> Bool {
        String(cString: n.objCType) == "c"
    }

    /// A JSON number as an integer: exact, out of the 64-bit range, or not an integer at all.
    enum Integer: Equatable {
        case exact(Int64)
        /// Written as an integer but outside Int64; holds the number as written.
        case outOfRange(String)
        /// Written with a fraction or an exponent.
        case fractional
    }

    /// The integer a JSON number holds, if it was written without a fraction or exponent.
    /// Foundation's parser gives an unsigned `Q` above Int64.max, and an NSDecimalNumber for
    /// integers beyond UInt64 and for some near Int64.min; neither may wrap.
    static func integer(_ n: NSNumber) -> Integer {
        if let decimal = n as? NSDecimalNumber {
            let text = decimal.stringValue
            let digits = text.hasPrefix("-") ? text.dropFirst() : text[...]
            guard !digits.isEmpty, digits.utf8.allSatisfy({ $0 >= 0x30 && $0 <= 0x39 }) else { return .fractional }
            return Int64(text).map(Integer.exact) ?? .outOfRange(text)
        }
        switch String(cString: n.objCType) {
        case "i", "s", "l", "q": return .exact(n.int64Value)
        case "I", "S", "L", "Q":
            let value = n.uint64Value
            return Int64(exactly: value).map(Integer.exact) ?? .outOfRange(String(value))
        default: return .fractional
        }
    }
}

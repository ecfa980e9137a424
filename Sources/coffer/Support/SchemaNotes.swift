import CofferStore

/// The lines that name what a write adds to a zone's schema (`note: …` on stderr, or the reason
/// `--strict` refuses it).
enum SchemaNotes {
    static func describe(_ delta: SchemaDelta, zone: String) -> [String] {
        var lines = [String]()
        for type in delta.newTypes {
            let fields = delta.newFields.filter { $0.recordType == type.name }.map { quoted($0.name) }
            var line = "new record type \(quoted(type.name)) in zone \(zone)"
            if !fields.isEmpty { line += ", with \(fields.count == 1 ? "field" : "fields") \(fields.joined(separator: ", "))" }
            if let suggestion = type.suggestion { line += " (did you mean \(quoted(suggestion))?)" }
            lines.append(line)
        }
        for field in delta.newFields where !field.ofNewType {
            var line = "new field \(quoted(field.name)) on type \(field.recordType)"
            if let suggestion = field.suggestion { line += " (did you mean \(quoted(suggestion))?)" }
            lines.append(line)
        }
        return lines
    }

    private static func quoted(_ name: String) -> String { "\"\(Output.oneLine(name))\"" }
}

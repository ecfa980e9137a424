import ArgumentParser

extension Coffer {
    struct RecordCommand: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "record",
            abstract: "Records with plain (queryable) and encrypted fields.",
            discussion: """
                Fields: key=value (a string) or key:TYPE=value, TYPE one of int, double, bool, date (ISO 8601), \
                bytes (@path or base64), ref (a record name), or [TYPE] for a list (v1,v2; '\\,' is a comma). \
                --set writes a plain field, --secret an encrypted one. A field's type and encryption are fixed by \
                its first save for the record type.
                """,
            subcommands: [Put.self, Get.self, List.self, Query.self, Delete.self, Import.self, Export.self]
        )
    }
}

import CofferTestSupport
import Foundation
import Testing

/// Sources/CofferStore/CofferStore.docc/Embedding.md shows a complete program; it must be exactly Sources/coffer-example/main.swift,
/// and that program, built with the package, must run and print what the guide says.
@Suite("Embedding example")
struct EmbeddingExampleTests {
    static let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()

    /// Checks that Sources/CofferStore/CofferStore.docc/Embedding.md shows `program` (a folder of Sources) verbatim: the Swift code
    /// block that starts with the program's first line.
    static func expectGuideShows(_ program: String, sourceLocation: SourceLocation = #_sourceLocation) throws {
        let source = try String(contentsOf: root.appendingPathComponent("Sources/\(program)/main.swift"), encoding: .utf8)
        let guide = try String(contentsOf: root.appendingPathComponent("Sources/CofferStore/CofferStore.docc/Embedding.md"), encoding: .utf8)
        let firstLine = String(source.prefix { $0 != "\n" })
        let blocks = guide.components(separatedBy: "```swift\n").dropFirst().map { $0.components(separatedBy: "```").first ?? "" }
        let shown = try #require(blocks.first { $0.hasPrefix(firstLine) }, "Sources/CofferStore/CofferStore.docc/Embedding.md has no code block with \(program)",
                                 sourceLocation: sourceLocation)
        #expect(shown == source, "Sources/CofferStore/CofferStore.docc/Embedding.md differs from Sources/\(program)/main.swift; copy the file into the guide",
                sourceLocation: sourceLocation)
    }

    @Test("the guide shows the example program verbatim")
    func guideMatchesSource() throws {
        try Self.expectGuideShows("coffer-example")
    }

    @Test("the example program runs and prints the guide's output")
    func exampleRuns() throws {
        let binary = URL(fileURLWithPath: "/proc/self/exe").resolvingSymlinksInPath().deletingLastPathComponent()
            .appendingPathComponent("coffer-example")
        try #require(FileManager.default.isExecutableFile(atPath: binary.path), "coffer-example is not built next to the tests at \(binary.path)")
        let run = try ChildProcess.run(binary.path, [], environment: ProcessInfo.processInfo.environment, timeout: 60)
        let stdout = String(decoding: run.stdout, as: UTF8.self)
        let stderr = String(decoding: run.stderr, as: UTF8.self)
        #expect(run.status == 0 && !run.timedOut, "coffer-example failed: \(stderr)")
        #expect(stdout == """
            saved groceries at change tag 2
            body: eggs, milk
            query found 1 note(s)
            conflict: the store has eggs, milk, bread
            bob reads: eggs, milk, bread
            the owner sees eggs, milk, bread, coffee, saved by Bob

            """)
        // The guide quotes the same output.
        let guide = try String(contentsOf: Self.root.appendingPathComponent("Sources/CofferStore/CofferStore.docc/Embedding.md"), encoding: .utf8)
        #expect(guide.contains(stdout.trimmingCharacters(in: .newlines)))
    }

    static let postgresServer = ProcessInfo.processInfo.environment["COFFER_TEST_POSTGRES"]

    @Test("the guide shows the PostgreSQL example verbatim, and it runs as two instances on a test server and prints the guide's output",
          .enabled(if: postgresServer != "skip", "COFFER_TEST_POSTGRES=skip: the PostgreSQL tests are left out"))
    func postgresExampleRuns() throws {
        try Self.expectGuideShows("coffer-example-postgres")
        let guide = try String(contentsOf: Self.root.appendingPathComponent("Sources/CofferStore/CofferStore.docc/Embedding.md"), encoding: .utf8)

        let url = try #require(Self.postgresServer.flatMap { $0.isEmpty ? nil : $0 }, "COFFER_TEST_POSTGRES is not set: run the tests with `make test`")
        let binary = URL(fileURLWithPath: "/proc/self/exe").resolvingSymlinksInPath().deletingLastPathComponent()
            .appendingPathComponent("coffer-example-postgres")
        let run = try ChildProcess.run(binary.path, [url], environment: ProcessInfo.processInfo.environment, timeout: 60)
        let stdout = String(decoding: run.stdout, as: UTF8.self)
        #expect(run.status == 0 && !run.timedOut, "coffer-example-postgres failed: \(String(decoding: run.stderr, as: UTF8.self))")
        #expect(stdout == """
            saved groceries at change tag 2
            the other instance reads: eggs, milk
            conflict: the store has eggs, milk, bread

            """)
        #expect(guide.contains(stdout.trimmingCharacters(in: .newlines)))
    }
}

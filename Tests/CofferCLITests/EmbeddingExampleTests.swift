import CofferTestSupport
import Foundation
import Testing

/// Docs/Embedding.md shows a complete program; it must be exactly Sources/coffer-example/main.swift,
/// and that program, built with the package, must run and print what the guide says.
@Suite("Embedding example")
struct EmbeddingExampleTests {
    static let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()

    @Test("the guide shows the example program verbatim")
    func guideMatchesSource() throws {
        let source = try String(contentsOf: Self.root.appendingPathComponent("Sources/coffer-example/main.swift"), encoding: .utf8)
        let guide = try String(contentsOf: Self.root.appendingPathComponent("Docs/Embedding.md"), encoding: .utf8)
        // The program is the Swift code block that starts with the example's first line.
        let blocks = guide.components(separatedBy: "```swift\n").dropFirst().map { $0.components(separatedBy: "```").first ?? "" }
        let shown = try #require(blocks.first { $0.hasPrefix("// The example program of Docs/Embedding.md") },
                                 "Docs/Embedding.md has no code block with the example program")
        #expect(shown == source, "Docs/Embedding.md differs from Sources/coffer-example/main.swift; copy the file into the guide")
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
        let guide = try String(contentsOf: Self.root.appendingPathComponent("Docs/Embedding.md"), encoding: .utf8)
        #expect(guide.contains(stdout.trimmingCharacters(in: .newlines)))
    }

    static let postgresServer = ProcessInfo.processInfo.environment["COFFER_TEST_POSTGRES"]

    @Test("the guide shows the PostgreSQL example verbatim, and it runs as two instances on a test server and prints the guide's output",
          .enabled(if: postgresServer != "skip", "COFFER_TEST_POSTGRES=skip: the PostgreSQL tests are left out"))
    func postgresExampleRuns() throws {
        let source = try String(contentsOf: Self.root.appendingPathComponent("Sources/coffer-example-postgres/main.swift"), encoding: .utf8)
        let guide = try String(contentsOf: Self.root.appendingPathComponent("Docs/Embedding.md"), encoding: .utf8)
        let blocks = guide.components(separatedBy: "```swift\n").dropFirst().map { $0.components(separatedBy: "```").first ?? "" }
        let shown = try #require(blocks.first { $0.hasPrefix("// The PostgreSQL example program of Docs/Embedding.md") },
                                 "Docs/Embedding.md has no code block with the PostgreSQL example program")
        #expect(shown == source, "Docs/Embedding.md differs from Sources/coffer-example-postgres/main.swift; copy the file into the guide")

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

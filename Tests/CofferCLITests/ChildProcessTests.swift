import CofferTestSupport
import Foundation
import Testing

/// The tests' way of running programs (`ChildProcess`), on which every CLI test stands.
@Suite("Child processes of the tests")
struct ChildProcessTests {
    let env = ["PATH": "/usr/bin:/bin"]

    @Test("stdin reaches the child, stdout and stderr come back apart, and the exit status is kept")
    func pipesAndStatus() throws {
        let input = Data((0..<200_000).map { UInt8(truncatingIfNeeded: $0 &* 7) }) // more than a pipe buffer
        let run = try ChildProcess.run("/bin/sh", ["-c", "cat; echo oops >&2; exit 3"], environment: env, stdin: input, timeout: 30)
        #expect(run.status == 3)
        #expect(run.stdout == input)
        #expect(run.stderr == Data("oops\n".utf8))
        #expect(!run.timedOut)
    }

    @Test("the child starts in the folder given, with only the environment given")
    func folderAndEnvironment() throws {
        let run = try ChildProcess.run("/bin/sh", ["-c", "pwd; env | sort"], environment: ["ONLY": "this"], directory: "/usr", timeout: 30)
        #expect(String(decoding: run.stdout, as: UTF8.self) == "/usr\nONLY=this\nPWD=/usr\n")
    }

    @Test("the child holds no descriptor of the tests' beyond its three standard ones")
    func noInheritedDescriptors() throws {
        let held = (0..<20).compactMap { _ in FileHandle(forReadingAtPath: "/dev/null") } // not close-on-exec
        defer { for handle in held { try? handle.close() } }
        // `ls` opens the folder itself as one more descriptor, so it lists four.
        let run = try ChildProcess.run("/bin/ls", ["/proc/self/fd"], environment: env, timeout: 30)
        #expect(String(decoding: run.stdout, as: UTF8.self) == "0\n1\n2\n3\n")
    }

    @Test("a child that runs too long is killed and reported as timed out; a signal shows as 128 + its number")
    func timeoutAndSignal() throws {
        let started = Date()
        let run = try ChildProcess.run("/bin/sleep", ["30"], environment: env, timeout: 0.5)
        #expect(run.timedOut)
        #expect(run.status == 128 + 9)
        #expect(Date().timeIntervalSince(started) < 20)
    }

    @Test("the suspending form gives the same result")
    func suspending() async throws {
        let run = try await ChildProcess.run("/bin/sh", ["-c", "echo hi"], environment: env, timeout: 30)
        #expect(run.status == 0 && run.stdout == Data("hi\n".utf8))
    }
}

import CofferStoreTestSupport
import Foundation
import GRDB
import Synchronization
import Testing

@testable import CofferStore

@Suite("Commit hooks: work after a write transaction commits")
struct CommitHooksTests {
    final class Counter: Sendable {
        let value = Mutex(0)
        func bump() { value.withLock { $0 += 1 } }
        var count: Int { value.withLock { $0 } }
    }

    struct Planned: Error {}

    func queue() throws -> DatabaseQueue {
        let queue = try DatabaseQueue()
        try queue.write { db in try db.execute(sql: "CREATE TABLE t (id INTEGER PRIMARY KEY, v TEXT)") }
        return queue
    }

    @Test("work runs once its transaction commits, and never when it rolls back")
    func commitAndRollback() throws {
        let db = try queue(), hooks = CommitHooks(), counter = Counter()
        try db.write { db in
            try db.execute(sql: "INSERT INTO t (v) VALUES ('a')")
            hooks.afterCommit(db) { counter.bump() }
            #expect(counter.count == 0) // not before the commit
        }
        #expect(counter.count == 1)
        #expect(throws: Planned.self) {
            try db.write { db in
                try db.execute(sql: "INSERT INTO t (v) VALUES ('b')")
                hooks.afterCommit(db) { counter.bump() }
                throw Planned()
            }
        }
        #expect(counter.count == 1)
        // What the rolled-back transaction queued does not run with the next one.
        try db.write { db in try db.execute(sql: "INSERT INTO t (v) VALUES ('c')") }
        #expect(counter.count == 1)
        try db.write { db in
            hooks.afterCommit(db) { counter.bump() }
            hooks.afterCommit(db) { counter.bump() }
        }
        #expect(counter.count == 3)
    }

    @Test("two sessions' hooks on one connection each run their own work")
    func twoHooks() throws {
        let db = try queue(), first = CommitHooks(), second = CommitHooks(), a = Counter(), b = Counter()
        try db.write { db in first.afterCommit(db) { a.bump() } }
        try db.write { db in second.afterCommit(db) { b.bump() } }
        try db.write { db in first.afterCommit(db) { a.bump() } }
        #expect(a.count == 2 && b.count == 1)
    }

    /// GRDB drops every cached statement that can delete rows when an observer is added: one
    /// observer per write made every save compile its deleting statements again.
    @Test("queuing work on every write keeps the connection's cached deleting statements")
    func statementCacheKept() throws {
        let db = try queue(), hooks = CommitHooks(), counter = Counter()
        try db.write { db in hooks.afterCommit(db) { counter.bump() } } // registers the observer
        let sql = "DELETE FROM t WHERE id = ?"
        let first = try db.write { db in try db.cachedStatement(sql: sql) }
        for i in 0..<3 {
            try db.write { db in
                try db.cachedStatement(sql: sql).execute(arguments: [i])
                hooks.afterCommit(db) { counter.bump() }
            }
        }
        let later = try db.write { db in try db.cachedStatement(sql: sql) }
        #expect(first === later)
        #expect(counter.count == 4)
        // GRDB's own per-transaction hook, for contrast, does drop it.
        try db.write { db in db.afterNextTransaction(onCommit: { _ in }) }
        let after = try db.write { db in try db.cachedStatement(sql: sql) }
        #expect(after !== later)
    }
}

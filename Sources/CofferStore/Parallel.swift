import Dispatch
import Foundation
import Synchronization

/// A value the producer of a ``Pipeline`` sets once, before it publishes the first input, for
/// work that started before the value was known. Helpers read it in place (no copy, no
/// reference count touched) after acquiring an input; publishing orders the write before
/// their reads.
final class LateValue<Value>: @unchecked Sendable {
    private let pointer = UnsafeMutablePointer<Value>.allocate(capacity: 1)
    private var isSet = false

    init() {}

    /// Sets the value (once, on the producer thread, before publishing).
    func set(_ value: Value) {
        precondition(!isSet, "a late value is set once")
        pointer.initialize(to: value)
        isSet = true
    }

    var value: Value {
        unsafeAddress { UnsafePointer(pointer) }
    }

    deinit {
        if isSet { pointer.deinitialize(count: 1) }
        pointer.deallocate()
    }
}

/// Spreads the per-record crypto of a batch (sealing and hashing on writes; hashing, opening
/// and decoding on reads) over the machine's other cores while the database thread does the
/// SQLite work. See `Docs/Performance.md` ("Where the time goes").
enum Parallel {
    /// Helper threads to use besides the calling one: one less than the active cores, at most 3.
    /// `COFFER_HELPERS` overrides it (0 turns the helpers off), for measurements.
    static let helpers = ProcessInfo.processInfo.environment["COFFER_HELPERS"].flatMap { Int($0) }.map { max(0, min(8, $0)) }
        ?? max(0, min(3, ProcessInfo.processInfo.activeProcessorCount - 1))
    /// Below this many items the hand-off costs more than it saves: everything stays on the caller.
    static let threshold = 8
    /// How long a helper thread keeps looking for work after its last block before it parks.
    /// Waking a parked thread costs tens of microseconds on a virtual machine (the idle vCPU
    /// must be interrupted), as much as decoding several records; a read or a batch that comes
    /// within this window finds its helper awake. The cost is up to this much spinning of one
    /// core after each burst of work.
    /// Set by ``Store/helperSpinWindow``; `COFFER_HELPER_SPIN_US` gives the starting value (in
    /// microseconds; 0 parks at once), for measurements.
    static var spinNanoseconds: UInt64 { spinWindow.load(ordering: .relaxed) }
    static let maxSpinNanoseconds: UInt64 = 100_000_000
    private static let spinWindow = Atomic<UInt64>(
        ProcessInfo.processInfo.environment["COFFER_HELPER_SPIN_US"].flatMap { UInt64($0) }.map { min($0, 100_000) * 1000 }
            ?? 2_000_000)

    /// Sets the spin window, clamped to 0...100 ms.
    static func setSpin(_ window: Duration) {
        let (seconds, attoseconds) = min(max(window, .zero), .nanoseconds(Int64(maxSpinNanoseconds))).components
        spinWindow.store(UInt64(seconds) * 1_000_000_000 + UInt64(attoseconds / 1_000_000_000), ordering: .relaxed)
    }
}

/// Work a helper thread can join: a ``Pipeline``.
protocol HelpedWork: AnyObject, Sendable {
    /// Computes unclaimed blocks until none is left (or the work is cancelled).
    func help(worker: Int)
}

/// The helper threads (``Parallel/helpers`` of them, started at first use, kept for the life of
/// the process), shared by every pipeline. Each pipeline is offered to every helper once; a
/// helper that runs out of work spins for ``Parallel/spinNanoseconds`` looking for more, then
/// parks until a pipeline is offered.
final class HelperThreads: @unchecked Sendable {
    static let shared = HelperThreads(count: Parallel.helpers)

    private struct Offer {
        let work: any HelpedWork
        /// Helpers that have not taken this offer yet.
        var takers: Set<Int>
    }
    private struct State {
        var offers = [Offer]()
        var parked = 0
        var started = false
    }
    private let count: Int
    private let state = Mutex(State())
    /// `state.offers.count`, for looking without the lock while spinning.
    private let pending = Atomic<Int>(0)
    private let wake = DispatchSemaphore(value: 0)

    private init(count: Int) {
        self.count = count
    }

    /// Offers `work` to every helper (each calls its `help(worker:)` once, with its own index).
    func offer(_ work: any HelpedWork) {
        guard count > 0 else { return }
        let (start, wakeups) = state.withLock { state -> (Bool, Int) in
            state.offers.append(Offer(work: work, takers: Set(1...count)))
            pending.store(state.offers.count, ordering: .releasing)
            let start = !state.started
            state.started = true
            let wakeups = state.parked
            state.parked = 0
            return (start, wakeups)
        }
        if start {
            for worker in 1...count {
                let thread = Thread { [self] in run(worker: worker) }
                thread.name = "coffer-helper-\(worker)"
                thread.qualityOfService = .userInitiated
                thread.start()
            }
        }
        for _ in 0..<wakeups { wake.signal() }
    }

    /// Runs `body` once on a helper thread (on the calling thread when there is none): for
    /// freeing memory the helpers allocated, in their own allocator arena.
    func run(_ body: @escaping @Sendable () -> Void) {
        guard count > 0 else { body(); return }
        offer(OneShot(body))
    }

    private final class OneShot: HelpedWork, @unchecked Sendable {
        private let body: @Sendable () -> Void
        private let done = Atomic<Bool>(false)
        init(_ body: @escaping @Sendable () -> Void) { self.body = body }
        func help(worker: Int) {
            if done.compareExchange(expected: false, desired: true, ordering: .relaxed).exchanged { body() }
        }
    }

    /// The next offer this helper has not taken, if any.
    private func take(worker: Int) -> (any HelpedWork)? {
        guard pending.load(ordering: .acquiring) > 0 else { return nil }
        return state.withLock { state in
            guard let i = state.offers.firstIndex(where: { $0.takers.contains(worker) }) else { return nil }
            let work = state.offers[i].work
            state.offers[i].takers.remove(worker)
            if state.offers[i].takers.isEmpty {
                state.offers.remove(at: i)
                pending.store(state.offers.count, ordering: .releasing)
            }
            return work
        }
    }

    private func run(worker: Int) {
        var idleSince = DispatchTime.now().uptimeNanoseconds
        while true {
            if let work = take(worker: worker) {
                work.help(worker: worker)
                idleSince = DispatchTime.now().uptimeNanoseconds
                continue
            }
            if DispatchTime.now().uptimeNanoseconds - idleSince < Parallel.spinNanoseconds {
                sched_yield()
                continue
            }
            // Park, unless an offer came in meanwhile (checked under the lock `offer` takes).
            let park = state.withLock { state -> Bool in
                guard !state.offers.contains(where: { $0.takers.contains(worker) }) else { return false }
                state.parked += 1
                return true
            }
            if park { wake.wait() }
            idleSince = DispatchTime.now().uptimeNanoseconds
        }
    }
}

/// A fixed number of slots: the calling thread publishes inputs in order, helper threads claim
/// and transform them in blocks, in order, as they are published, and the calling thread takes
/// the outputs in order, transforming itself any block no helper has claimed yet. Progress never
/// depends on a helper being scheduled; helpers that start late find nothing left and stop.
///
/// Publishing, claiming and readiness are atomics (no lock): the producer writes an input,
/// then publishes it with a release store; a helper acquires the count before reading inputs,
/// and releases the block's ready flag after writing its outputs. Blocks of several items keep
/// threads off each other's cache lines.
final class Pipeline<Input: Sendable, Output: Sendable>: HelpedWork, @unchecked Sendable {
    private static var block: Int { 8 }
    private let capacity: Int
    private let blocks: Int
    /// The transform, given the input and the worker running it: 0 for the producer, 1… for helpers.
    private let work: @Sendable (Input, Int) -> Output
    private let inputs: UnsafeMutablePointer<Input?>
    private let outputs: UnsafeMutablePointer<Output?>
    private let ready: UnsafeMutablePointer<Atomic<Bool>>
    private let published = Atomic<Int>(0)
    private let claimed = Atomic<Int>(0) // blocks
    private let closed = Atomic<Bool>(false)
    /// Helpers between deciding to claim a block and finishing it.
    private let busy = Atomic<Int>(0)
    /// Inputs published so far (the producer's view of `published`).
    private(set) var count = 0
    /// Blocks computed by helpers (the rest by the producer): logged at trace level.
    let helperBlocks = Atomic<Int>(0)
    private var started = false

    /// `capacity` bounds the inputs.
    init(capacity: Int, work: @escaping @Sendable (Input, Int) -> Output) {
        self.capacity = max(capacity, 1)
        blocks = (self.capacity + Self.block - 1) / Self.block
        self.work = work
        inputs = .allocate(capacity: self.capacity)
        inputs.initialize(repeating: nil, count: self.capacity)
        outputs = .allocate(capacity: self.capacity)
        outputs.initialize(repeating: nil, count: self.capacity)
        ready = .allocate(capacity: blocks)
        for b in 0..<blocks { (ready + b).initialize(to: Atomic(false)) }
    }

    /// Every input published at once, the pipeline closed.
    convenience init(_ all: [Input], work: @escaping @Sendable (Input, Int) -> Output) {
        self.init(capacity: all.count, work: work)
        for (i, input) in all.enumerated() { inputs[i] = input }
        count = all.count
        published.store(all.count, ordering: .releasing)
        closed.store(true, ordering: .releasing)
        startHelpers()
    }

    deinit {
        inputs.deinitialize(count: capacity)
        inputs.deallocate()
        outputs.deinitialize(count: capacity)
        outputs.deallocate()
        for b in 0..<blocks { _ = (ready + b).move() }
        ready.deallocate()
    }

    var isFull: Bool { count == capacity }

    /// Publishes the next input (producer thread only).
    func push(_ input: Input) {
        precondition(count < capacity, "pipeline full")
        inputs[count] = input
        count += 1
        published.store(count, ordering: .releasing)
        if count == Parallel.threshold { startHelpers() }
    }

    /// No more inputs (producer thread only).
    func close() {
        closed.store(true, ordering: .releasing)
    }

    /// Stops the work early (the producer gave up, for example on an error): helpers claim
    /// nothing more. No output may be taken afterwards.
    func cancel() {
        close()
        claimed.store(blocks, ordering: .sequentiallyConsistent)
    }

    /// ``cancel()``, then waits until no helper is inside a block: for inputs that refer to
    /// memory the producer frees once it returns.
    func cancelAndWait() {
        cancel()
        var spins = 0
        while busy.load(ordering: .sequentiallyConsistent) > 0 { Self.backoff(&spins) }
    }

    /// Starts the helpers before the inputs are published (producer thread), for a producer
    /// that knows many are coming but has other work first: the helpers are awake by the time
    /// it publishes. The pipeline must then be closed or cancelled on every path.
    func start() {
        guard capacity >= Parallel.threshold else { return }
        startHelpers(early: true)
    }

    private func startHelpers(early: Bool = false) {
        guard !started, early || count >= Parallel.threshold, Parallel.helpers > 0 else { return }
        started = true
        HelperThreads.shared.offer(self)
    }

    /// Transforms block `b`, whose inputs up to `end` are published.
    private func compute(block b: Int, end: Int, worker: Int) {
        for i in b * Self.block..<end { outputs[i] = work(inputs[i]!, worker) }
        ready[b].store(true, ordering: .releasing)
    }

    func help(worker: Int) {
        var spins = 0
        while true {
            // Claim the next block only once it is published (or the stream is closed), so that
            // the producer, once it takes outputs, shares the remaining blocks instead of waiting.
            let b = claimed.load(ordering: .relaxed)
            guard b < blocks else { return }
            let full = min((b + 1) * Self.block, capacity)
            let isClosed = closed.load(ordering: .acquiring)
            let available = published.load(ordering: .acquiring)
            if available >= full || isClosed {
                let end = min(full, available)
                guard end > b * Self.block else { return } // closed, nothing left
                // Counted busy before claiming, so that `cancelAndWait()` cannot miss a block
                // claimed just before the cancel.
                busy.wrappingAdd(1, ordering: .sequentiallyConsistent)
                if claimed.compareExchange(expected: b, desired: b + 1, ordering: .sequentiallyConsistent).exchanged {
                    compute(block: b, end: end, worker: worker)
                    helperBlocks.wrappingAdd(1, ordering: .relaxed)
                    spins = 0
                }
                busy.wrappingSubtract(1, ordering: .sequentiallyConsistent)
            } else {
                Self.backoff(&spins)
            }
        }
    }

    /// The output of input `i` (producer thread, once the pipeline is closed; each `i` once,
    /// in order).
    func take(_ i: Int) -> Output {
        precondition(i < count && closed.load(ordering: .relaxed), "outputs are taken once every input is published")
        let b = i / Self.block
        var spins = 0
        while !ready[b].load(ordering: .acquiring) {
            // While a helper has `b`, compute the next unclaimed block, even one further on: it
            // is needed soon. Every input is published by now, so a block is complete.
            let next = claimed.load(ordering: .relaxed)
            let end = min((next + 1) * Self.block, count)
            if next < blocks, end > next * Self.block,
               claimed.compareExchange(expected: next, desired: next + 1, ordering: .relaxed).exchanged {
                compute(block: next, end: end, worker: 0)
            } else {
                Self.backoff(&spins)
            }
        }
        inputs[i] = nil
        return outputs[i].take()! // moved out, not copied
    }

    /// Every output in order (producer thread): closes the pipeline first.
    func takeAll() -> [Output] {
        close()
        return (0..<count).map(take)
    }

    /// Spins briefly, then yields, then sleeps ever longer (up to a millisecond): the wait is
    /// usually a few microseconds, but a helper started early may wait for the write lock.
    private static func backoff(_ spins: inout Int) {
        spins += 1
        if spins < 64 { return }
        if spins < 2048 { sched_yield(); return }
        usleep(UInt32(min(20 << min((spins - 2048) / 64, 6), 1000)))
    }
}

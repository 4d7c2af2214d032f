@_spi(CourierInternals) import CourierCore
import CourierTransport

/// The session's limit on transfers running at once (`maximumConcurrentTasks`), across all its
/// engines: a transfer runs when a place is free, and otherwise waits for one that ends,
/// higher priorities first and in arrival order within one. Any engine thread admits and
/// releases; the state is guarded by a lock.
final class AdmissionQueue<Item: AnyObject & Sendable>: Sendable {
    /// One priority's waiting items, in arrival order (`start` is the first not yet taken).
    private struct Line {
        var waiting: [Item] = []
        var start = 0

        var count: Int { waiting.count - start }

        mutating func take() -> Item? {
            guard start < waiting.count else { return nil }
            let next = waiting[start]
            start += 1
            if start > 64, start * 2 > waiting.count {
                waiting.removeFirst(start)
                start = 0
            }
            return next
        }
    }

    private struct State {
        var running = 0
        /// By priority, lowest first.
        var lines = Array(repeating: Line(), count: RequestPriority.allCases.count)
    }

    let limit: Int
    private let state = Locked(State())

    /// A queue that lets `limit` (at least 1) run at once.
    init(limit: Int) {
        self.limit = max(1, limit)
    }

    /// Takes a place for `item` and returns true, or queues it (false): its turn comes with a
    /// later `release()`.
    func admit(_ item: Item, priority: RequestPriority = .normal) -> Bool {
        state.withLock { state in
            guard state.running < limit else {
                state.lines[priority.rawValue].waiting.append(item)
                return false
            }
            state.running += 1
            return true
        }
    }

    /// An admitted item ended: its place goes to the next waiting item, returned to be run
    /// (it holds the place now), or is freed when nothing waits.
    func release() -> Item? {
        state.withLock { state in
            for index in state.lines.indices.reversed() {
                if let next = state.lines[index].take() { return next }
            }
            state.running = max(0, state.running - 1)
            return nil
        }
    }

    /// Takes `item` off the queue if it waits there (it was cancelled, or its deadline came):
    /// true when it did. Linear in the items waiting at its priority.
    func remove(_ item: Item, priority: RequestPriority) -> Bool {
        state.withLock { state in
            let line = priority.rawValue
            guard let index = state.lines[line].waiting[state.lines[line].start...].firstIndex(where: { $0 === item })
            else { return false }
            state.lines[line].waiting.remove(at: index)
            return true
        }
    }

    /// The items still waiting, taken off the queue (the session ends).
    func drain() -> [Item] {
        state.withLock { state in
            defer { state.lines = Array(repeating: Line(), count: RequestPriority.allCases.count) }
            return state.lines.reversed().flatMap { $0.waiting[$0.start...] }
        }
    }

    /// How many run now, and how many wait (for tests).
    var counts: (running: Int, waiting: Int) {
        state.withLock { state in (state.running, state.lines.reduce(0) { $0 + $1.count }) }
    }
}

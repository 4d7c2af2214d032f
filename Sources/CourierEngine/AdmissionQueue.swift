@_spi(CourierInternals) import CourierCore

/// The session's limit on transfers running at once (`maximumConcurrentTasks`), across all its
/// engines: a transfer runs when a place is free, and otherwise waits, in arrival order, for
/// one that ends. Any engine thread admits and releases; the state is guarded by a lock.
final class AdmissionQueue<Item: AnyObject & Sendable>: Sendable {
    private struct State {
        var running = 0
        var waiting: [Item] = []
        var start = 0
    }

    let limit: Int
    private let state = Locked(State())

    /// A queue that lets `limit` (at least 1) run at once.
    init(limit: Int) {
        self.limit = max(1, limit)
    }

    /// Takes a place for `item` and returns true, or queues it (false): its turn comes with a
    /// later `release()`.
    func admit(_ item: Item) -> Bool {
        state.withLock { state in
            guard state.running < limit else {
                state.waiting.append(item)
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
            guard state.start < state.waiting.count else {
                state.running = max(0, state.running - 1)
                return nil
            }
            let next = state.waiting[state.start]
            state.start += 1
            if state.start > 64, state.start * 2 > state.waiting.count {
                state.waiting.removeFirst(state.start)
                state.start = 0
            }
            return next
        }
    }

    /// The items still waiting, taken off the queue (the session ends).
    func drain() -> [Item] {
        state.withLock { state in
            defer {
                state.waiting.removeAll()
                state.start = 0
            }
            return Array(state.waiting[state.start...])
        }
    }

    /// How many run now, and how many wait (for tests).
    var counts: (running: Int, waiting: Int) {
        state.withLock { ($0.running, $0.waiting.count - $0.start) }
    }
}

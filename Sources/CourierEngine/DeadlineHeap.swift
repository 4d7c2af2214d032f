import CCurlShim

/// Something on the engine thread that waits for a time (see `DeadlineHeap`).
protocol EngineDeadline: AnyObject {
    /// The time it waits for now (monotonic nanoseconds), if any. An entry in the heap for any
    /// other time is stale and skipped.
    var deadline: UInt64? { get }
    /// The deadline came. Engine thread.
    func deadlinePassed(now: UInt64)
}

/// An engine's deadlines, earliest first: the WebSocket multi handles' timers, the WebSocket
/// connections' own (opening, closing, keep-alive pings), and the resource timeouts of
/// transfers waiting for a place in the session's queue. Entries are
/// not removed when a deadline moves: a stale one is dropped when it comes up. They hold their
/// targets weakly: a connection that has ended is freed at once, not when its last deadline
/// comes up (a minute later, for the open timeout), and never kept in a cycle with its engine.
struct DeadlineHeap {
    private struct Entry {
        var deadline: UInt64
        weak var target: (any EngineDeadline)?
    }

    private var entries: [Entry] = []

    var isEmpty: Bool { entries.isEmpty }

    /// The earliest entry's time (possibly a stale one's: the loop then wakes for nothing once).
    var earliestDeadline: UInt64? { entries.first?.deadline }

    mutating func schedule(_ target: any EngineDeadline, at deadline: UInt64) {
        entries.append(Entry(deadline: deadline, target: target))
        var child = entries.count - 1
        while child > 0 {
            let parent = (child - 1) / 2
            guard entries[child].deadline < entries[parent].deadline else { break }
            entries.swapAt(child, parent)
            child = parent
        }
    }

    /// The targets whose current deadline has come, each once.
    mutating func takeDue(now: UInt64) -> [any EngineDeadline] {
        var due: [any EngineDeadline] = []
        while let first = entries.first, first.deadline <= now {
            removeFirst()
            if let target = first.target, let current = target.deadline, current <= now,
                !due.contains(where: { $0 === target })
            {
                due.append(target)
            }
        }
        return due
    }

    mutating func removeAll() {
        entries.removeAll()
    }

    private mutating func removeFirst() {
        let last = entries.removeLast()
        guard !entries.isEmpty else { return }
        entries[0] = last
        var parent = 0
        while true {
            let left = parent * 2 + 1
            let right = left + 1
            var smallest = parent
            if left < entries.count, entries[left].deadline < entries[smallest].deadline { smallest = left }
            if right < entries.count, entries[right].deadline < entries[smallest].deadline { smallest = right }
            guard smallest != parent else { return }
            entries.swapAt(parent, smallest)
            parent = smallest
        }
    }
}

extension CurlEngine {
    /// Tells the targets whose deadline has come. Engine thread.
    func fireDeadlines() {
        let now = courier_monotonic_nanoseconds()
        guard let earliest = deadlines.earliestDeadline, earliest <= now else { return }
        for target in deadlines.takeDue(now: now) { target.deadlinePassed(now: now) }
    }
}

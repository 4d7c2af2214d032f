/// The transfers a bandwidth limit paused, and when each may go on: the engine's loop sleeps
/// no longer than the earliest deadline and releases what is due. Engine thread.
struct ThrottleSchedule<Item: AnyObject> {
    private var entries: [(deadline: UInt64, item: Item)] = []

    var isEmpty: Bool { entries.isEmpty }

    /// The earliest deadline, if anything waits.
    var earliestDeadline: UInt64? { entries.lazy.map(\.deadline).min() }

    /// `item` may go on at `deadline` (monotonic nanoseconds).
    mutating func wake(_ item: Item, at deadline: UInt64) {
        entries.append((deadline, item))
    }

    /// The items whose deadline has come by `now`, taken off the schedule, in the order they
    /// were paused.
    mutating func takeDue(now: UInt64) -> [Item] {
        guard entries.contains(where: { $0.deadline <= now }) else { return [] }
        let due = entries.filter { $0.deadline <= now }.map(\.item)
        entries.removeAll { $0.deadline <= now }
        return due
    }

    /// Takes `item` off the schedule (it ended, or its limit was lifted).
    mutating func remove(_ item: Item) {
        entries.removeAll { $0.item === item }
    }
}

@_spi(CourierInternals) import CourierCore
import Foundation
import HTTPTypes

/// A task of a manager while it runs, as ``HTTPSessionManager/tasks`` lists it: what it is,
/// what it asked for, its state, and the controls of the task itself.
public struct SessionTask: Sendable {
    /// What kind of task it is.
    ///
    /// Minor releases may add cases: a `switch` over it ends with `default`.
    public enum Kind: Sendable, Hashable {
        /// A request whose body is collected in memory (the verbs, `request`, `send`, `dataTask`).
        case data
        /// An upload (`uploadTask`, multipart `POST`).
        case upload
        /// A download to a file.
        case download
        /// A streamed response (`stream`, `bytes`, `events`).
        case stream
    }

    /// Where a task is.
    public enum State: Sendable, Hashable {
        /// Sending or receiving (or waiting for a connection).
        case running
        /// Suspended by ``suspend()``.
        case suspended
        /// Cancelled, and not yet ended.
        case canceling
    }

    /// The task's number in its session, in the order tasks were made (from 1).
    public let taskIdentifier: Int
    /// What kind of task it is.
    public let kind: Kind
    /// The method asked for.
    public let method: HTTPRequest.Method
    /// The path or URL asked for, as given (relative to the base URL when it is a path).
    public let path: String
    /// When the task was made.
    public let earliestBeginDate: Date
    /// The request its first transfer sent (after interceptors and `adapt(_:)`), as
    /// URLSession's `originalRequest`; nil until it was made (or when the cache answered).
    public let originalRequest: HTTPRequest?
    /// The request it sends now: after a redirect, the redirect's; after a retry, the retry's.
    /// As URLSession's `currentRequest`; nil until the first transfer was made.
    public let currentRequest: HTTPRequest?
    /// Its state when the list was made.
    public let state: State
    let control: TaskControl

    /// Cancels the task, as the task object's own `cancel()` does.
    public func cancel() { control.cancel() }
    /// Suspends the task's transfer.
    public func suspend() { control.suspend() }
    /// Resumes it.
    public func resume() { control.resume() }
}

/// The tasks of one manager while they run, for ``HTTPSessionManager/tasks``,
/// ``HTTPSessionManager/cancelAllTasks()`` and ``HTTPSessionManager/finishTasksAndInvalidate()``.
/// A registration is a lock and a dictionary entry; it ends when the task's work ends.
final class TaskRegistry: Sendable {
    private struct Entry {
        let kind: SessionTask.Kind
        let method: HTTPRequest.Method
        let path: String
        let control: TaskControl
        let created: Date
    }

    private struct State {
        var entries: [Int: Entry] = [:]
        var lastIdentifier = 0
        /// Why new tasks are refused; nil while the registry takes them.
        var refusal: String?
        var waiters: [CheckedContinuation<Void, Never>] = []
    }

    private let state = Locked(State())

    /// What a task made after `finishTasksAndInvalidate()` is told.
    static let finishingRefusal = "The session was told to finish its tasks and takes no new ones"

    /// Registers a task; throws `sessionInvalidated` once the session takes no new work.
    func register(
        _ kind: SessionTask.Kind, _ method: HTTPRequest.Method, _ path: String, control: TaskControl
    ) throws(CourierError) -> Int {
        // Made before the lock is taken: every request of the session registers under it.
        let entry = Entry(kind: kind, method: method, path: path, control: control, created: Date())
        let registered = state.withLock { state -> Result<Int, CourierError> in
            if let refusal = state.refusal { return .failure(Self.refusal(refusal, method, path)) }
            state.lastIdentifier += 1
            state.entries[state.lastIdentifier] = entry
            return .success(state.lastIdentifier)
        }
        return try registered.get()
    }

    /// The refusal of work the session no longer takes (`method` to `path`), or nil while it
    /// takes work: for what runs without being listed (WebSockets).
    func refusal(of method: HTTPRequest.Method, _ path: String) -> CourierError? {
        state.withLock { $0.refusal }.map { Self.refusal($0, method, path) }
    }

    private static func refusal(_ reason: String, _ method: HTTPRequest.Method, _ path: String) -> CourierError {
        .sessionInvalidated(.init(message: "\(reason) (\(method) \(path))"))
    }

    /// Takes no new tasks from now on: each is refused with `sessionInvalidated` and `reason`
    /// (the first reason given stays).
    func refuseNewTasks(_ reason: String) {
        state.withLock { state in
            if state.refusal == nil { state.refusal = reason }
        }
    }

    /// The task's work has ended.
    func finished(_ identifier: Int) {
        // The entry leaves the lock with the waiters, to be released after it.
        let (_, waiters) = state.withLock { state -> (Entry?, [CheckedContinuation<Void, Never>]) in
            let entry = state.entries.removeValue(forKey: identifier)
            guard state.refusal != nil, state.entries.isEmpty else { return (entry, []) }
            defer { state.waiters = [] }
            return (entry, state.waiters)
        }
        for waiter in waiters { waiter.resume() }
    }

    /// The running tasks, oldest first.
    var snapshot: [SessionTask] {
        state.withLock { state in
            state.entries.sorted { $0.key < $1.key }.map { identifier, entry in
                let requests = entry.control.requests
                return SessionTask(
                    taskIdentifier: identifier, kind: entry.kind, method: entry.method, path: entry.path,
                    earliestBeginDate: entry.created, originalRequest: requests.original,
                    currentRequest: requests.current,
                    state: entry.control.isCancelled ? .canceling : entry.control.isSuspended ? .suspended : .running,
                    control: entry.control)
            }
        }
    }

    /// Cancels every running task; the registry stays open.
    func cancelAll() {
        let controls = state.withLock { $0.entries.values.map(\.control) }
        for control in controls { control.cancel() }
    }

    /// Takes no new tasks from now on (refused with `reason`, unless they already were), and
    /// returns when the running ones have ended.
    func close(reason: String = finishingRefusal) async {
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            let done = state.withLock { state -> Bool in
                if state.refusal == nil { state.refusal = reason }
                guard !state.entries.isEmpty else { return true }
                state.waiters.append(continuation)
                return false
            }
            if done { continuation.resume() }
        }
    }
}

/// What a task object needs to appear in its manager's list: the registry, and what to list.
struct TaskTracking: Sendable {
    let registry: TaskRegistry
    let kind: SessionTask.Kind
    let method: HTTPRequest.Method
    let path: String

    /// A registration, or the refusal of a session that takes no new tasks.
    ///
    /// The refusal is kept boxed (`any Error`, one pointer): a request's task holds its
    /// registration across its whole transfer, and a `CourierError` stored inline made the
    /// frame that holds it 4 KiB, a slab of the task's allocator more per request in flight.
    struct Registration: Sendable {
        let registry: TaskRegistry
        let control: TaskControl
        let identifier: Int?
        let refusal: (any Error)?

        /// The task's work has ended: it leaves the list.
        func end() {
            if let identifier { registry.finished(identifier) }
        }

        /// Runs `work` while the task is listed, and ends the registration after it; throws
        /// the refusal instead when the session took no new tasks. A failure ends the task's
        /// progress sequences (a success has ended them with its last bytes): the one place
        /// every kind of task does it.
        func run<Result>(_ work: () async throws -> Result) async throws -> Result {
            defer { end() }
            do {
                if let refusal { throw refusal }
                return try await work()
            } catch {
                control.reporters.finish(succeeded: false)
                throw error
            }
        }
    }

    /// Not inlined: the typed error and the registry's `Result` would otherwise be
    /// temporaries of the async function that registers, and so part of its frame.
    @inline(never)
    func register(_ control: TaskControl) -> Registration {
        do {
            let identifier = try registry.register(kind, method, path, control: control)
            return Registration(registry: registry, control: control, identifier: identifier, refusal: nil)
        } catch {
            return Registration(registry: registry, control: control, identifier: nil, refusal: error)
        }
    }
}

extension Task where Failure == any Error {
    /// The work of a data or download task object, as its `response` awaits it: cancelling
    /// the awaiting task calls `cancel` (the object's, which stops the transfer too), unless
    /// the session owns the work (a background session's tasks outlive whoever waits).
    func result(ownedBySession: Bool, cancel: @escaping @Sendable () -> Void) async throws -> Success {
        if ownedBySession { return try await value }
        return try await withTaskCancellationHandler {
            try await value
        } onCancel: {
            cancel()
        }
    }
}

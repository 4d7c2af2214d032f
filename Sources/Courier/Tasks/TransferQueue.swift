@_spi(CourierInternals) import CourierCore
import CourierTransport
import Foundation

/// A task a `TransferQueue` can run: data tasks and downloads.
public protocol QueueableTask: Sendable {
    /// Body bytes received.
    var downloadProgress: AsyncStream<TransferProgress> { get }
    /// Request body bytes sent.
    var uploadProgress: AsyncStream<TransferProgress> { get }
    /// Cancels the task.
    func cancel()
    /// Waits until the task finished; throws its error.
    func waitUntilFinished() async throws
}

extension DataTask: QueueableTask {
    /// Waits for the response and discards it.
    public func waitUntilFinished() async throws { _ = try await response }
}

extension DownloadTask: QueueableTask {
    /// Waits for the file and discards its URL.
    public func waitUntilFinished() async throws { _ = try await response }
}

/// Runs a group of tasks a few at a time, with one progress for the group (what
/// ASINetworkQueue did).
///
/// ```swift
/// let queue = TransferQueue(maximumConcurrentTasks: 3, cancelsRemainingOnFailure: true)
/// for file in files {
///     queue.add { api.downloadTask("files/\(file)", to: folder.appendingPathComponent(file)) }
/// }
/// Task { for await progress in queue.progress { print(progress.fractionCompleted) } }
/// try await queue.waitForAll()
/// ```
///
/// A task is made (so its request starts) only when a place is free. Progress adds up the
/// bytes of every task started so far, both directions; its total grows as tasks start (it is
/// nil while a started task's total is unknown). The state is guarded by `state`.
public final class TransferQueue: Sendable {
    private struct Entry {
        var task: (any QueueableTask)?
        var download = TransferProgress(completedBytes: 0, totalBytes: 0)
        var upload = TransferProgress(completedBytes: 0, totalBytes: 0)
    }

    private struct State {
        var pending: [@Sendable () -> any QueueableTask] = []
        var entries: [Int: Entry] = [:]
        var running = 0
        var nextID = 0
        var firstError: (any Error)?
        var cancelled = false
        var idleWaiters: [CheckedContinuation<Void, Never>] = []
    }

    /// Tasks running at once.
    public let maximumConcurrentTasks: Int
    /// Whether the first failure cancels the running tasks and drops the waiting ones.
    public let cancelsRemainingOnFailure: Bool
    private let state = Locked(State())
    private let reporter = ProgressReporter()

    /// Creates a queue.
    public init(maximumConcurrentTasks: Int = 4, cancelsRemainingOnFailure: Bool = false) {
        self.maximumConcurrentTasks = max(1, maximumConcurrentTasks)
        self.cancelsRemainingOnFailure = cancelsRemainingOnFailure
    }

    /// Adds a task; `makeTask` runs when a place is free (at once if one is).
    public func add(_ makeTask: @escaping @Sendable () -> some QueueableTask) {
        let accepted = state.withLock { state -> Bool in
            guard !state.cancelled else { return false }
            state.pending.append { makeTask() }
            return true
        }
        if accepted { startWaiting() }
    }

    /// The group's progress: completed bytes of every started task against their totals.
    public var progress: AsyncStream<TransferProgress> { reporter.stream() }

    /// Waits until every task added so far has finished. Throws the first task error, if any
    /// (`CancellationError` after ``cancelAll()``).
    public func waitForAll() async throws {
        await withCheckedContinuation { continuation in
            let idle = state.withLock { state -> Bool in
                if state.running == 0 && state.pending.isEmpty { return true }
                state.idleWaiters.append(continuation)
                return false
            }
            if idle { continuation.resume() }
        }
        if let error = state.withLock({ $0.firstError }) { throw error }
    }

    /// Cancels the running tasks and drops the waiting ones.
    public func cancelAll() {
        cancelRemaining(because: CancellationError())
    }

    private func cancelRemaining(because error: any Error) {
        let tasks = state.withLock { state -> [any QueueableTask] in
            state.cancelled = true
            state.pending.removeAll()
            if state.firstError == nil { state.firstError = error }
            return state.entries.values.compactMap(\.task)
        }
        for task in tasks { task.cancel() }
        finishIfIdle()
    }

    private func startWaiting() {
        while true {
            let next = state.withLock { state -> (Int, @Sendable () -> any QueueableTask)? in
                guard !state.cancelled, state.running < maximumConcurrentTasks, !state.pending.isEmpty else {
                    return nil
                }
                state.running += 1
                let id = state.nextID
                state.nextID += 1
                state.entries[id] = Entry()
                return (id, state.pending.removeFirst())
            }
            guard let (id, makeTask) = next else { return }
            let task = makeTask()
            state.withLock { $0.entries[id]?.task = task }
            watch(task, id: id)
        }
    }

    private func watch(_ task: any QueueableTask, id: Int) {
        Task {
            await withTaskGroup(of: Void.self) { group in
                group.addTask {
                    for await value in task.downloadProgress { self.record(id: id, download: value) }
                }
                group.addTask {
                    for await value in task.uploadProgress { self.record(id: id, upload: value) }
                }
                group.addTask {
                    do {
                        try await task.waitUntilFinished()
                    } catch {
                        self.taskFailed(error)
                    }
                }
            }
            state.withLock { state in
                state.running -= 1
                state.entries[id]?.task = nil
            }
            startWaiting()
            finishIfIdle()
        }
    }

    private func taskFailed(_ error: any Error) {
        let first = state.withLock { state -> Bool in
            guard state.firstError == nil else { return false }
            state.firstError = error
            return true
        }
        if first, cancelsRemainingOnFailure { cancelRemaining(because: error) }
    }

    private func record(id: Int, download: TransferProgress? = nil, upload: TransferProgress? = nil) {
        let total = state.withLock { state -> TransferProgress in
            if let download { state.entries[id]?.download = download }
            if let upload { state.entries[id]?.upload = upload }
            var completed: Int64 = 0
            var expected: Int64? = 0
            for entry in state.entries.values {
                for part in [entry.download, entry.upload] {
                    completed += part.completedBytes
                    if let known = part.totalBytes, let sum = expected {
                        expected = sum + known
                    } else {
                        expected = nil
                    }
                }
            }
            return TransferProgress(completedBytes: completed, totalBytes: expected)
        }
        reporter.update(completedBytes: total.completedBytes, totalBytes: total.totalBytes)
    }

    private func finishIfIdle() {
        let waiters = state.withLock { state -> [CheckedContinuation<Void, Never>] in
            guard state.running == 0, state.pending.isEmpty else { return [] }
            defer { state.idleWaiters = [] }
            return state.idleWaiters
        }
        if !waiters.isEmpty { reporter.finish(succeeded: state.withLock { $0.firstError == nil }) }
        for waiter in waiters { waiter.resume() }
    }
}

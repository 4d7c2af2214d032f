@_spi(CourierInternals) import CourierCore
import Foundation

/// The end of one of a background session's tasks, delivered through
/// `HTTPSessionManager.events` as well as through the task itself.
///
/// Tasks restored in a new process (`restoredTasks()`) report here too, so a program can
/// handle every completion in one loop, whichever process started the task.
public struct SessionEvent: Sendable {
    /// How the task ended.
    public enum Outcome: Sendable {
        /// A download finished: the file is at its destination.
        case downloaded(DownloadResponse)
        /// An upload finished: the response, before any serializer.
        case uploaded(RawResponse)
        /// The task failed or was cancelled (`CancellationError`). A download's `CourierError`
        /// carries resume data when a partial file was kept.
        case failed(any Error)
    }

    /// The task's ``BackgroundTask/identifier``.
    public var taskIdentifier: UUID
    /// How it ended.
    public var outcome: Outcome
}

/// A task of a background session, as `restoredTasks()` returns it.
public enum BackgroundTask: Sendable {
    /// A download to a file.
    case download(DownloadTask)
    /// An upload from a file; its value is the response body.
    case upload(DataTask<Data>)

    /// The identifier the task had when it was first made, in whatever process.
    public var identifier: UUID {
        switch self {
        case .download(let task): task.identifier
        case .upload(let task): task.identifier
        }
    }

    /// The download, if this is one.
    public var downloadTask: DownloadTask? {
        if case .download(let task) = self { return task }
        return nil
    }

    /// The upload, if this is one.
    public var uploadTask: DataTask<Data>? {
        if case .upload(let task) = self { return task }
        return nil
    }

    /// Cancels the task for good: its journal entry and partial file are deleted.
    public func cancel() {
        switch self {
        case .download(let task): task.cancel()
        case .upload(let task): task.cancel()
        }
    }
}

/// Hands each event to every current subscriber. Guarded by its lock.
final class SessionEventHub: Sendable {
    private struct State {
        var subscribers: [Int: AsyncStream<SessionEvent>.Continuation] = [:]
        var nextKey = 0
        var finished = false
    }

    private let state = Locked(State())

    /// A new stream of the events from now on; it ends when the session does.
    func stream() -> AsyncStream<SessionEvent> {
        let (stream, continuation) = AsyncStream<SessionEvent>.makeStream()
        let key = state.withLock { state -> Int? in
            guard !state.finished else { return nil }
            defer { state.nextKey += 1 }
            state.subscribers[state.nextKey] = continuation
            return state.nextKey
        }
        guard let key else {
            continuation.finish()
            return stream
        }
        continuation.onTermination = { [weak self] _ in
            _ = self?.state.withLock { $0.subscribers.removeValue(forKey: key) }
        }
        return stream
    }

    func emit(_ event: SessionEvent) {
        let subscribers = state.withLock { Array($0.subscribers.values) }
        for subscriber in subscribers { subscriber.yield(event) }
    }

    /// Ends every stream (the session is over).
    func finish() {
        let subscribers = state.withLock { state -> [AsyncStream<SessionEvent>.Continuation] in
            state.finished = true
            defer { state.subscribers = [:] }
            return Array(state.subscribers.values)
        }
        for subscriber in subscribers { subscriber.finish() }
    }
}

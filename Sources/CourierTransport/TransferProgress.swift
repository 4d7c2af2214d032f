import CCourierSystem
@_spi(CourierInternals) import CourierCore
import HTTPTypes
import Synchronization

/// How far a transfer has come, in one direction (upload or download).
public struct TransferProgress: Sendable, Hashable, CustomStringConvertible {
    /// Bytes transferred so far (for downloads: decoded body bytes delivered).
    public var completedBytes: Int64
    /// The expected total, or nil when unknown (no `Content-Length`, or a content encoding).
    public var totalBytes: Int64?

    /// Creates a progress value.
    public init(completedBytes: Int64, totalBytes: Int64?) {
        self.completedBytes = completedBytes
        self.totalBytes = totalBytes
    }

    /// `completedBytes / totalBytes` in 0...1; 0 while the total is unknown.
    public var fractionCompleted: Double {
        guard let totalBytes, totalBytes > 0 else { return 0 }
        return min(1, max(0, Double(completedBytes) / Double(totalBytes)))
    }

    /// `512/1024 bytes (50%)`.
    public var description: String {
        if let totalBytes {
            return "\(completedBytes)/\(totalBytes) bytes (\(Int(fractionCompleted * 100))%)"
        }
        return "\(completedBytes) bytes"
    }
}

/// Fans progress updates out to any number of `AsyncStream`s, coalesced.
///
/// Updates come from the engine thread at every chunk; a subscriber sees at most one update
/// per `interval` (and always the final one), each stream buffering only the newest value, so
/// a fast transfer never floods a slow consumer. Values are monotonic because the engine is
/// the only writer. The state is guarded by the `state` lock.
package final class ProgressReporter: Sendable {
    private struct State {
        var latest = TransferProgress(completedBytes: 0, totalBytes: nil)
        var finished = false
        var lastPublished: UInt64 = 0
        var nextID = 0
        var subscribers: [Int: AsyncStream<TransferProgress>.Continuation] = [:]
    }

    private let state = Locked(State())
    private static let interval: UInt64 = 20_000_000  // 20 ms

    /// A reporter at zero bytes of an unknown total.
    package init() {}

    /// A new stream: it starts with the current value and ends after the final one.
    package func stream() -> AsyncStream<TransferProgress> {
        let (stream, continuation) = AsyncStream.makeStream(
            of: TransferProgress.self, bufferingPolicy: .bufferingNewest(1))
        let id: Int? = state.withLock { state in
            continuation.yield(state.latest)
            if state.finished {
                continuation.finish()
                return nil
            }
            let id = state.nextID
            state.nextID += 1
            state.subscribers[id] = continuation
            return id
        }
        if let id {
            continuation.onTermination = { [weak self] _ in
                _ = self?.state.withLock { $0.subscribers.removeValue(forKey: id) }
            }
        }
        return stream
    }

    /// Records progress; publishes it if the last publication is older than the interval.
    /// Streams are fed outside the lock: finishing a stream runs its termination handler,
    /// which takes the lock again.
    package func update(completedBytes: Int64, totalBytes: Int64?) {
        let (subscribers, value) = state.withLock {
            state -> ([AsyncStream<TransferProgress>.Continuation], TransferProgress) in
            guard !state.finished else { return ([], state.latest) }
            state.latest = TransferProgress(completedBytes: completedBytes, totalBytes: totalBytes)
            guard !state.subscribers.isEmpty else { return ([], state.latest) }
            let now = courier_monotonic_nanoseconds()
            guard now &- state.lastPublished >= Self.interval else { return ([], state.latest) }
            state.lastPublished = now
            return (Array(state.subscribers.values), state.latest)
        }
        for subscriber in subscribers { subscriber.yield(value) }
    }

    /// Publishes the final value and ends every stream. When `succeeded`, an unknown total
    /// becomes the completed count, so the last value reads 100%.
    package func finish(succeeded: Bool) {
        let (subscribers, value) = state.withLock {
            state -> ([AsyncStream<TransferProgress>.Continuation], TransferProgress) in
            guard !state.finished else { return ([], state.latest) }
            state.finished = true
            if succeeded, state.latest.totalBytes == nil || state.latest.totalBytes! < state.latest.completedBytes {
                state.latest.totalBytes = state.latest.completedBytes
            }
            defer { state.subscribers.removeAll() }
            return (Array(state.subscribers.values), state.latest)
        }
        for subscriber in subscribers {
            subscriber.yield(value)
            subscriber.finish()
        }
    }

    /// The most recent value.
    var latest: TransferProgress { state.withLock { $0.latest } }
}

/// The two progress reporters of a task, made with the task so that streams can be taken
/// before its transfer exists.
package struct TransferReporters: Sendable {
    package var download = ProgressReporter()
    package var upload = ProgressReporter()
    /// The first successful response head, for whoever waits for it.
    package var head = HeadReporter()

    /// Two new reporters.
    package init() {}

    package func finish(succeeded: Bool) {
        download.finish(succeeded: succeeded)
        upload.finish(succeeded: succeeded)
    }
}

/// Hands the first successful (2xx) response head of a task to whoever waits for it, as soon
/// as the transport has it. Costs one atomic load per head while nobody waits.
package final class HeadReporter: Sendable {
    private struct State {
        var head: HTTPResponse?
        var waiters: [CheckedContinuation<HTTPResponse?, Never>] = []
        var closed = false
    }

    private let state = Locked(State())
    private let wanted = Atomic<Bool>(false)

    package init() {}

    /// Whether someone waits (the transport skips building the head otherwise).
    package var isWanted: Bool { wanted.load(ordering: .relaxed) }

    /// A final head arrived. Only a 2xx one is kept, and only the first.
    package func arrived(_ head: HTTPResponse) {
        guard (200..<300).contains(head.status.code) else { return }
        let waiters = state.withLock { state -> [CheckedContinuation<HTTPResponse?, Never>] in
            guard state.head == nil, !state.closed else { return [] }
            state.head = head
            defer { state.waiters = [] }
            return state.waiters
        }
        for waiter in waiters { waiter.resume(returning: head) }
    }

    /// The task ended: waiters that got no head get nil.
    package func close() {
        let waiters = state.withLock { state -> [CheckedContinuation<HTTPResponse?, Never>] in
            state.closed = true
            defer { state.waiters = [] }
            return state.waiters
        }
        for waiter in waiters { waiter.resume(returning: nil) }
    }

    /// The head, once a successful one arrived; nil when the task ended without one (or the
    /// head came before anyone waited).
    package func wait() async -> HTTPResponse? {
        wanted.store(true, ordering: .relaxed)
        return await withCheckedContinuation { continuation in
            let ready = state.withLock { state -> HTTPResponse?? in
                if let head = state.head { return .some(head) }
                if state.closed { return .some(nil) }
                state.waiters.append(continuation)
                return nil
            }
            if let ready { continuation.resume(returning: ready) }
        }
    }
}

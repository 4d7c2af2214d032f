@_spi(CourierInternals) import CourierCore
import CourierTransport
import Foundation
import HTTPTypes

/// A request in flight whose response body is collected in memory.
///
/// Made by `HTTPSessionManager.dataTask(...)`; it starts at once. Await ``response`` (or
/// ``value``) for the result, watch ``downloadProgress`` and ``uploadProgress``, and
/// ``cancel()``, ``suspend()`` or ``resume()`` it from any context. Cancelling the Swift task
/// that awaits ``response`` cancels the transfer too.
///
/// An upload in a background session belongs to the session: cancelling the Swift task that
/// awaits it does not cancel it; only ``cancel()`` does.
public final class DataTask<Value: Sendable>: Sendable {
    /// Identifies the task; a background upload keeps it when a later process restores it.
    public let identifier: UUID
    private let control: TaskControl
    private let ownedBySession: Bool
    private let task: Task<DataResponse<Value>, any Error>

    init(
        identifier: UUID = UUID(), control: TaskControl, ownedBySession: Bool = false,
        tracking: TaskTracking, operation: @escaping @Sendable (TaskControl) async throws -> DataResponse<Value>
    ) {
        self.identifier = identifier
        self.control = control
        self.ownedBySession = ownedBySession
        let registration = tracking.register(control)
        taskIdentifier = registration.identifier
        self.task = Task {
            defer { control.reporters.head.close() }
            return try await registration.run { try await operation(control) }
        }
    }

    /// The task's number in its manager's ``HTTPSessionManager/tasks`` (nil when the session
    /// had stopped taking tasks: the task then fails with `sessionInvalidated`).
    public let taskIdentifier: Int?

    /// The status and headers of the response, as soon as a successful (2xx) head has arrived
    /// and before its body; otherwise once the task has ended: the head of the final response
    /// (also when it failed validation). Throws when the task failed without a response.
    ///
    /// ```swift
    /// let task = api.dataTask(.get, "export")
    /// let head = try await task.head          // before the body is in
    /// let body = try await task.value
    /// ```
    ///
    /// A request that is retried after a 2xx head arrived (its connection was lost mid-body)
    /// has shown that first head here.
    public var head: HTTPResponse {
        get async throws {
            if let head = await control.reporters.head.wait() { return head }
            do {
                return try await response.response
            } catch let error as CourierError {
                guard let response = error.response else { throw error }
                return response
            }
        }
    }

    /// The whole response, once it has arrived and been serialized. Throws `CourierError`, or
    /// `CancellationError` after ``cancel()``.
    public var response: DataResponse<Value> {
        get async throws { try await task.result(ownedBySession: ownedBySession, cancel: cancel) }
    }

    /// The serialized value of the response.
    public var value: Value {
        get async throws { try await response.value }
    }

    /// Download progress: body bytes received against `Content-Length`. The sequence ends
    /// after the final value.
    public var downloadProgress: AsyncStream<TransferProgress> { control.reporters.download.stream() }

    /// Upload progress: request body bytes sent. The sequence ends after the final value.
    public var uploadProgress: AsyncStream<TransferProgress> { control.reporters.upload.stream() }

    /// Cancels the task. Awaiting ``response`` throws `CancellationError` (unless it already
    /// completed). Callable any number of times, from any context.
    public func cancel() {
        control.cancel()
        task.cancel()
    }

    /// Pauses the transfer (or holds it if it has not started) until ``resume()``.
    public func suspend() { control.suspend() }

    /// Continues after ``suspend()``.
    public func resume() { control.resume() }

    /// Limits this task's bandwidth (bytes per second, each direction); nil lifts the limit.
    public func setMaximumBytesPerSecond(_ bytesPerSecond: Int64?) {
        control.setMaximumBytesPerSecond(bytesPerSecond)
    }
}

/// Links a task object to the transfer its pipeline creates later: cancel, suspend and resume
/// may arrive before the transfer exists, and are replayed on it when it does. The state is
/// guarded by the `state` lock.
///
/// Suspend, resume and the rate reach the transfer while the lock is held, so the transfer
/// sees them in the order they changed the state: the last call wins, however calls from
/// several threads interleave (a suspend handed on after the lock was released could
/// otherwise land after a later resume and leave the transfer paused for good).
final class TaskControl: Sendable {
    private struct State {
        var transfer: (any TransportTransfer)?
        /// The request of the first transfer (after interceptors).
        var originalRequest: HTTPRequest?
        var cancelled = false
        var suspended = false
        var maximumBytesPerSecond: Int64??
    }

    let reporters: TransferReporters
    private let state = Locked(State())

    init(reporters: TransferReporters = TransferReporters()) {
        self.reporters = reporters
    }

    /// Reporters nobody reads, shared by the controls of the verbs' requests: those show no
    /// progress, so they need not make three reporter objects per request.
    private static let unheardReporters = TransferReporters()

    /// A control for a request without a task object (the verbs): cancel, suspend and resume
    /// from the manager's task list; no progress.
    static func forRequest() -> TaskControl { TaskControl(reporters: unheardReporters) }

    /// Called by the pipeline right after it made the transfer, before starting it.
    func attach(_ transfer: any TransportTransfer) {
        let cancelled = state.withLock { state in
            state.transfer = transfer
            if state.originalRequest == nil { state.originalRequest = transfer.currentRequest }
            if let rate = state.maximumBytesPerSecond { transfer.setMaximumBytesPerSecond(rate) }
            if state.suspended { transfer.suspend() }
            return state.cancelled
        }
        if cancelled { transfer.cancel() }
    }

    /// The request of the task's first transfer and of its current one (a retry's, a
    /// redirect's); nil before the first transfer is made.
    var requests: (original: HTTPRequest?, current: HTTPRequest?) {
        state.withLock { ($0.originalRequest, $0.transfer?.currentRequest) }
    }

    /// Whether ``cancel()`` was called (by the caller, not by the session ending).
    var isCancelled: Bool { state.withLock { $0.cancelled } }

    /// Whether ``suspend()`` holds the task now.
    var isSuspended: Bool { state.withLock { $0.suspended } }

    func cancel() {
        let transfer = state.withLock { state in
            state.cancelled = true
            return state.transfer
        }
        if let transfer {
            transfer.cancel()
        } else {
            reporters.finish(succeeded: false)
        }
    }

    func suspend() {
        state.withLock { state in
            state.suspended = true
            state.transfer?.suspend()
        }
    }

    func resume() {
        state.withLock { state in
            state.suspended = false
            state.transfer?.resume()
        }
    }

    func setMaximumBytesPerSecond(_ rate: Int64?) {
        state.withLock { state in
            state.maximumBytesPerSecond = .some(rate)
            state.transfer?.setMaximumBytesPerSecond(rate)
        }
    }
}

@_spi(CourierInternals) import CourierCore
import CourierTransport
import Foundation
import HTTPTypes

/// Watches the lifecycle of every request of a session: set monitors in
/// `HTTPSessionConfiguration.eventMonitors`.
///
/// Each monitor gets every event of the session, in order, on a Swift task of its own: a
/// monitor that takes its time only delays its own later events, never a transfer, another
/// monitor or the libcurl engine's thread (events wait in memory until the monitor takes them).
///
/// ```swift
/// final class StatusCounter: EventMonitor {
///     let counts = Mutex<[Int: Int]>([:])
///     func handle(_ event: RequestEvent) async {
///         if case .finished(_, let response, _, _) = event.kind {
///             counts.withLock { $0[response.status.code, default: 0] += 1 }
///         }
///     }
/// }
/// ```
public protocol EventMonitor: Sendable {
    /// Handles one event. Events of one session arrive one at a time, in the order they
    /// happened.
    func handle(_ event: RequestEvent) async
}

/// Something that happened to a request.
public struct RequestEvent: Sendable {
    /// Numbers the requests of one session, from 1 (the interceptors' `RequestContext` has the
    /// same number).
    public var requestID: UInt64
    /// When it happened.
    public var date: Date
    /// What happened.
    public var kind: Kind
    /// The response body (content-decoded) on a `finished` event; nil on the others. A monitor
    /// that keeps it (`HARRecorder`) decides how much.
    public var responseBody: Data?

    /// The kind's case name (`"attemptStarted"`), for logs and for tests that compare event
    /// orders.
    package var name: String {
        switch kind {
        case .created: "created"
        case .adapted: "adapted"
        case .attemptStarted: "attemptStarted"
        case .responseHead: "responseHead"
        case .redirected: "redirected"
        case .waitingForConnectivity: "waitingForConnectivity"
        case .retryDecided: "retryDecided"
        case .finished: "finished"
        case .failed: "failed"
        case .webSocketOpened: "webSocketOpened"
        case .webSocketClosed: "webSocketClosed"
        }
    }

    /// A request's events, in the order they come: `created`; for each attempt `adapted`,
    /// `attemptStarted`, any `redirected` and `responseHead`s; after a failed attempt
    /// `retryDecided`; last `finished` or `failed`.
    ///
    /// Minor releases may add cases (`webSocketOpened` and `webSocketClosed` came that way): a
    /// `switch` over a kind ends with `default`. Courier is not built with library evolution, so
    /// `@unknown default` does not apply, and a `switch` that names every case stops compiling
    /// when one is added.
    public enum Kind: Sendable {
        /// A call made the request: the head as the manager built it, before any adaptation.
        case created(HTTPRequest)
        /// The interceptors and `adapt(_:)` returned this request for the attempt.
        case adapted(HTTPRequest, attempt: Int)
        /// The attempt was handed to the transport (or answered from the HTTP cache).
        case attemptStarted(HTTPRequest, attempt: Int)
        /// A complete response head arrived (also a redirect's).
        case responseHead(HTTPResponse, for: HTTPRequest)
        /// The transport follows a redirect: the request that got `response`, and the next.
        case redirected(from: HTTPRequest, to: HTTPRequest, response: HTTPResponse)
        /// The request could not connect because the system has no route to its host, and
        /// waits for one (`waitsForConnectivity`): it is sent again when a path appears.
        case waitingForConnectivity(HTTPRequest)
        /// After attempt `attempt` failed with `error`, the interceptors decided.
        case retryDecided(attempt: Int, error: any Error, decision: RetryDecision)
        /// The request succeeded: the final request, response and body size, with metrics.
        case finished(HTTPRequest, HTTPResponse, metrics: TransferMetrics, source: ResponseSource)
        /// The request failed (after any retries): usually a `CourierError`, or what an
        /// interceptor, `adapt(_:)`, `process(_:)` or a serializer threw. Cancellation is not
        /// reported as a failure.
        case failed(HTTPRequest, any Error, attempts: Int)
        /// A WebSocket opened: the handshake request as sent, the server's `101`, and the
        /// subprotocol it chose. (A WebSocket that fails to open ends with `failed`.)
        case webSocketOpened(HTTPRequest, HTTPResponse, subprotocol: String?)
        /// An open WebSocket ended: with the peer's close code and reason after a close
        /// handshake (the code nil when its close frame had none), or with the error that
        /// ended it (nil after a close handshake; `CancellationError` when it was cancelled).
        case webSocketClosed(HTTPRequest, code: UInt16?, reason: String, error: (any Error)?)
    }

    /// An event.
    public init(requestID: UInt64, date: Date = Date(), kind: Kind) {
        self.requestID = requestID
        self.date = date
        self.kind = kind
    }
}

/// Hands events to a session's monitors without blocking: each monitor has an unbounded queue
/// of events and one task that takes them in order, in batches.
///
/// One exception: a `LoggingMonitor`'s lines of a request are written before the request's
/// call returns. The request's last event (`finished` or `failed`) waits until such a monitor
/// has handled it (and so every event before it), so that a program's own next log line comes
/// after them and a short program that exits after its request loses none.
///
/// Response heads come from the transport's thread as recorded: they are parsed into
/// `HTTPResponse`s on the monitors' tasks, so that the engine thread only queues them.
package final class EventMonitorGroup: Sendable {
    /// An event as queued: heads not yet parsed.
    enum Pending: Sendable {
        case event(RequestEvent)
        case head(UInt64, Date, ResponseHead, for: HTTPRequest)
        case redirect(UInt64, Date, from: HTTPRequest, to: HTTPRequest, ResponseHead)
        case finished(UInt64, Date, HTTPRequest, ResponseHead, TransferMetrics, ResponseSource, Data)

        /// The event a monitor sees; nil for a head that does not parse.
        var event: RequestEvent? {
            switch self {
            case .event(let event):
                return event
            case .head(let id, let date, let head, let request):
                return RequestEvent(requestID: id, date: date, kind: .responseHead(head.response, for: request))
            case .redirect(let id, let date, let from, let to, let head):
                return RequestEvent(
                    requestID: id, date: date, kind: .redirected(from: from, to: to, response: head.response))
            case .finished(let id, let date, let request, let head, let metrics, let source, let body):
                var event = RequestEvent(
                    requestID: id, date: date,
                    kind: .finished(request, head.response, metrics: metrics, source: source))
                event.responseBody = body
                return event
            }
        }
    }

    private let queues: [MonitorQueue]
    private let consumers: [Task<Void, Never>]
    /// The queues of the monitors whose lines must be out before a call returns (loggers).
    private let flushedQueues: [MonitorQueue]

    /// A group for `monitors`; nil when there are none, so that a session without monitors
    /// builds no events.
    package init?(_ monitors: [any EventMonitor]) {
        guard !monitors.isEmpty else { return nil }
        var queues: [MonitorQueue] = []
        var consumers: [Task<Void, Never>] = []
        var flushedQueues: [MonitorQueue] = []
        for monitor in monitors {
            let queue = MonitorQueue()
            queues.append(queue)
            // A logger's lines, and a HAR recorder's entries, are out before the call returns.
            let flushed = monitor is LoggingMonitor || monitor is HARRecorder
            if flushed { flushedQueues.append(queue) }
            consumers.append(
                Task.detached {
                    while let batch = await queue.next() {
                        for pending in batch {
                            if let event = pending.event { await monitor.handle(event) }
                        }
                        queue.handled(batch.count)
                        // Events that come within the next millisecond are taken together:
                        // a monitor that keeps up costs a wakeup per batch, not per event. (Not
                        // a logger's: a request waits for its lines.)
                        if !flushed { try? await Task.sleep(for: .milliseconds(1)) }
                    }
                })
        }
        self.queues = queues
        self.consumers = consumers
        self.flushedQueues = flushedQueues
    }

    deinit {
        // The consumers drain what is queued, then end.
        for queue in queues { queue.finish() }
    }

    /// Queues `kind` for every monitor; returns at once. Callable from any thread.
    package func emit(_ requestID: UInt64, _ kind: RequestEvent.Kind) {
        enqueue(.event(RequestEvent(requestID: requestID, kind: kind)))
    }

    /// Queues `finished` for `raw`, whose head is parsed on the monitors' tasks (once, for all);
    /// returns once the loggers have written it.
    package func emitFinished(_ requestID: UInt64, _ raw: RawResponse) async {
        await enqueueLast(.finished(requestID, Date(), raw.request, raw.head, raw.metrics, raw.source, raw.data))
    }

    /// Queues `failed`; returns once the loggers have written it.
    package func emitFailed(_ requestID: UInt64, _ request: HTTPRequest, _ error: any Error, attempts: Int) async {
        await enqueueLast(.event(RequestEvent(requestID: requestID, kind: .failed(request, error, attempts: attempts))))
    }

    private func enqueue(_ pending: Pending) {
        for queue in queues { queue.append(pending) }
    }

    /// A request's last event: queued for all, and waited for by the loggers.
    private func enqueueLast(_ pending: Pending) async {
        guard !flushedQueues.isEmpty else { return enqueue(pending) }
        var marks: [(MonitorQueue, UInt64)] = []
        for queue in queues {
            let mark = queue.append(pending)
            if flushedQueues.contains(where: { $0 === queue }) { marks.append((queue, mark)) }
        }
        for (queue, mark) in marks { await queue.waitUntilHandled(mark) }
    }

    /// Waits until every monitor has handled every event queued so far, and ends the
    /// monitors' tasks: for tests and for tools that must not exit before their logs are
    /// written.
    package func finishAndWait() async {
        for queue in queues { queue.finish() }
        for consumer in consumers { await consumer.value }
    }

    /// Queues a response head the transport received (on its thread: recording it is all).
    func enqueueHead(_ requestID: UInt64, _ head: RecordedHead, for request: HTTPRequest) {
        enqueue(.head(requestID, Date(), ResponseHead(recorded: head), for: request))
    }

    /// Queues a redirect the transport followed.
    func enqueueRedirect(
        _ requestID: UInt64, from request: HTTPRequest, to next: HTTPRequest, _ head: RecordedHead
    ) {
        enqueue(.redirect(requestID, Date(), from: request, to: next, ResponseHead(recorded: head)))
    }
}

/// One monitor's events waiting to be handled: appended from any thread without blocking (a
/// lock around an array), taken a batch at a time by the monitor's task.
final class MonitorQueue: Sendable {
    private struct State {
        var events: [EventMonitorGroup.Pending] = []
        var waiter: CheckedContinuation<[EventMonitorGroup.Pending]?, Never>?
        var finished = false
        /// Events appended and events handled, counted from the start.
        var appended: UInt64 = 0
        var handled: UInt64 = 0
        /// Requests waiting until the count of handled events reaches their mark.
        var flushWaiters: [(mark: UInt64, continuation: CheckedContinuation<Void, Never>)] = []
    }

    private let state = Locked(State())

    /// Queues `pending`; returns its number (the count of events handled once it is).
    @discardableResult
    func append(_ pending: EventMonitorGroup.Pending) -> UInt64 {
        let (waiter, mark) = state.withLock {
            state -> (CheckedContinuation<[EventMonitorGroup.Pending]?, Never>?, UInt64) in
            guard !state.finished else { return (nil, 0) }
            state.appended += 1
            guard let waiter = state.waiter else {
                state.events.append(pending)
                return (nil, state.appended)
            }
            state.waiter = nil
            return (waiter, state.appended)
        }
        waiter?.resume(returning: [pending])
        return mark
    }

    /// The monitor handled `count` more events.
    func handled(_ count: Int) {
        let ready = state.withLock { state -> [CheckedContinuation<Void, Never>] in
            state.handled += UInt64(count)
            let handled = state.handled
            let ready = state.flushWaiters.filter { $0.mark <= handled }.map(\.continuation)
            state.flushWaiters.removeAll { $0.mark <= handled }
            return ready
        }
        for waiter in ready { waiter.resume() }
    }

    /// Returns once event number `mark` has been handled (at once for a finished queue's).
    func waitUntilHandled(_ mark: UInt64) async {
        await withCheckedContinuation { continuation in
            let now = state.withLock { state -> Bool in
                if state.handled >= mark || state.finished { return true }
                state.flushWaiters.append((mark, continuation))
                return false
            }
            if now { continuation.resume() }
        }
    }

    /// Ends the queue: `next()` returns what is left, then nil.
    func finish() {
        let waiter = state.withLock { state -> CheckedContinuation<[EventMonitorGroup.Pending]?, Never>? in
            state.finished = true
            defer { state.waiter = nil }
            return state.waiter
        }
        waiter?.resume(returning: nil)
    }

    /// Every event queued so far, waiting for one if there is none; nil once finished and empty.
    func next() async -> [EventMonitorGroup.Pending]? {
        await withCheckedContinuation { continuation in
            let ready = state.withLock { state -> [EventMonitorGroup.Pending]?? in
                if !state.events.isEmpty {
                    defer { state.events = [] }
                    return .some(state.events)
                }
                if state.finished { return .some(nil) }
                state.waiter = continuation
                return nil
            }
            if let ready { continuation.resume(returning: ready) }
        }
    }
}

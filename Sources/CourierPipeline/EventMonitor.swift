@_spi(CourierInternals) import CourierCore
import CourierTransport
import Foundation
import HTTPTypes
import Synchronization

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

    /// A request's events, in the order they come: `created`; for each attempt `adapted`,
    /// `attemptStarted`, any `redirected` and `responseHead`s; after a failed attempt
    /// `retryDecided`; last `finished` or `failed`.
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
        /// After attempt `attempt` failed with `error`, the interceptors decided.
        case retryDecided(attempt: Int, error: any Error, decision: RetryDecision)
        /// The request succeeded: the final request, response and body size, with metrics.
        case finished(HTTPRequest, HTTPResponse, metrics: TransferMetrics, source: ResponseSource)
        /// The request failed (after any retries): usually a `CourierError`, or what an
        /// interceptor, `adapt(_:)`, `process(_:)` or a serializer threw. Cancellation is not
        /// reported as a failure.
        case failed(HTTPRequest, any Error, attempts: Int)
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
/// Response heads come from the transport's thread as recorded: they are parsed into
/// `HTTPResponse`s on the monitors' tasks, so that the engine thread only queues them.
package final class EventMonitorGroup: Sendable {
    /// An event as queued: heads not yet parsed.
    enum Pending: Sendable {
        case event(RequestEvent)
        case head(UInt64, Date, ResponseHead, for: HTTPRequest)
        case redirect(UInt64, Date, from: HTTPRequest, to: HTTPRequest, ResponseHead)
        case finished(UInt64, Date, HTTPRequest, ResponseHead, TransferMetrics, ResponseSource)

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
            case .finished(let id, let date, let request, let head, let metrics, let source):
                return RequestEvent(
                    requestID: id, date: date,
                    kind: .finished(request, head.response, metrics: metrics, source: source))
            }
        }
    }

    private let queues: [MonitorQueue]
    private let consumers: [Task<Void, Never>]

    /// A group for `monitors`; nil when there are none, so that a session without monitors
    /// builds no events.
    package init?(_ monitors: [any EventMonitor]) {
        guard !monitors.isEmpty else { return nil }
        var queues: [MonitorQueue] = []
        var consumers: [Task<Void, Never>] = []
        for monitor in monitors {
            let queue = MonitorQueue()
            queues.append(queue)
            consumers.append(
                Task.detached {
                    while let batch = await queue.next() {
                        for pending in batch {
                            if let event = pending.event { await monitor.handle(event) }
                        }
                        // Events that come within the next millisecond are taken together:
                        // a monitor that keeps up costs a wakeup per batch, not per event.
                        try? await Task.sleep(for: .milliseconds(1))
                    }
                })
        }
        self.queues = queues
        self.consumers = consumers
    }

    deinit {
        // The consumers drain what is queued, then end.
        for queue in queues { queue.finish() }
    }

    /// Queues `kind` for every monitor; returns at once. Callable from any thread.
    package func emit(_ requestID: UInt64, _ kind: RequestEvent.Kind) {
        enqueue(.event(RequestEvent(requestID: requestID, kind: kind)))
    }

    /// Queues `finished` for `raw`, whose head is parsed on the monitors' tasks (once, for all).
    package func emitFinished(_ requestID: UInt64, _ raw: RawResponse) {
        enqueue(.finished(requestID, Date(), raw.request, raw.head, raw.metrics, raw.source))
    }

    private func enqueue(_ pending: Pending) {
        for queue in queues { queue.append(pending) }
    }

    /// Waits until every monitor has handled every event queued so far, and ends the
    /// monitors' tasks: for tests and for tools that must not exit before their logs are
    /// written.
    package func finishAndWait() async {
        for queue in queues { queue.finish() }
        for consumer in consumers { await consumer.value }
    }

    fileprivate func enqueueHead(_ requestID: UInt64, _ head: ResponseHeadParser, for request: HTTPRequest) {
        enqueue(.head(requestID, Date(), ResponseHead(recorded: head), for: request))
    }

    fileprivate func enqueueRedirect(
        _ requestID: UInt64, from request: HTTPRequest, to next: HTTPRequest, _ head: ResponseHeadParser
    ) {
        enqueue(.redirect(requestID, Date(), from: request, to: next, ResponseHead(recorded: head)))
    }
}

/// Tells a group what the transport sees (response heads, redirects), on the transport's
/// thread: queueing the recorded head is all it does there.
package final class MonitoringObserver: TransferObserver {
    private let group: EventMonitorGroup
    private let requestID: UInt64

    package init(group: EventMonitorGroup, requestID: UInt64) {
        self.group = group
        self.requestID = requestID
    }

    package func transferReceivedHead(_ head: ResponseHeadParser, for request: HTTPRequest) {
        group.enqueueHead(requestID, head, for: request)
    }

    package func transferRedirected(from request: HTTPRequest, to next: HTTPRequest, head: ResponseHeadParser) {
        group.enqueueRedirect(requestID, from: request, to: next, head)
    }
}

/// One monitor's events waiting to be handled: appended from any thread without blocking (a
/// lock around an array), taken a batch at a time by the monitor's task.
final class MonitorQueue: Sendable {
    private struct State {
        var events: [EventMonitorGroup.Pending] = []
        var waiter: CheckedContinuation<[EventMonitorGroup.Pending]?, Never>?
        var finished = false
    }

    private let state = Locked(State())

    func append(_ pending: EventMonitorGroup.Pending) {
        let waiter = state.withLock { state -> CheckedContinuation<[EventMonitorGroup.Pending]?, Never>? in
            guard !state.finished else { return nil }
            guard let waiter = state.waiter else {
                state.events.append(pending)
                return nil
            }
            state.waiter = nil
            return waiter
        }
        waiter?.resume(returning: [pending])
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

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

/// Hands events to a session's monitors without blocking: each monitor has an unbounded
/// stream of events and one task that takes them in order.
package final class EventMonitorGroup: Sendable {
    private let streams: [AsyncStream<RequestEvent>.Continuation]
    private let consumers: [Task<Void, Never>]

    /// A group for `monitors`; nil when there are none, so that a session without monitors
    /// builds no events.
    package init?(_ monitors: [any EventMonitor]) {
        guard !monitors.isEmpty else { return nil }
        var streams: [AsyncStream<RequestEvent>.Continuation] = []
        var consumers: [Task<Void, Never>] = []
        for monitor in monitors {
            let (stream, continuation) = AsyncStream<RequestEvent>.makeStream(bufferingPolicy: .unbounded)
            streams.append(continuation)
            consumers.append(
                Task.detached {
                    for await event in stream { await monitor.handle(event) }
                })
        }
        self.streams = streams
        self.consumers = consumers
    }

    deinit {
        // The consumers drain what is queued, then end.
        for stream in streams { stream.finish() }
    }

    /// Queues `kind` for every monitor; returns at once. Callable from any thread.
    package func emit(_ requestID: UInt64, _ kind: RequestEvent.Kind) {
        let event = RequestEvent(requestID: requestID, kind: kind)
        for stream in streams { stream.yield(event) }
    }

    /// Waits until every monitor has handled every event queued so far, by ending the streams:
    /// for tests and for tools that must not exit before their logs are written.
    package func finishAndWait() async {
        for stream in streams { stream.finish() }
        for consumer in consumers { await consumer.value }
    }
}

/// Tells a group what the transport sees (response heads, redirects), on the transport's
/// thread: building the event is all it does there.
package final class MonitoringObserver: TransferObserver {
    private let group: EventMonitorGroup
    private let requestID: UInt64

    package init(group: EventMonitorGroup, requestID: UInt64) {
        self.group = group
        self.requestID = requestID
    }

    package func transferReceivedHead(_ head: ResponseHeadParser, for request: HTTPRequest) {
        guard let response = head.response else { return }
        group.emit(requestID, .responseHead(response, for: request))
    }

    package func transferRedirected(from request: HTTPRequest, to next: HTTPRequest, response: HTTPResponse) {
        group.emit(requestID, .redirected(from: request, to: next, response: response))
    }
}

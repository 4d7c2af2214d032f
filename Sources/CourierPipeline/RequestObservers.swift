import CourierCore
import CourierTransport
import HTTPTypes

/// Everything that hears about one request: the session's event monitors, and the request's
/// span and metrics when a tracer or a metrics factory records them (`Telemetry.swift`).
///
/// The pipeline makes one only when something listens (`RequestPipeline.observers(_:_:)`), so
/// a request that nothing observes carries a nil and pays for none of this. Each step of the
/// pipeline is one call here; the transport tells it the response heads and redirects it sees
/// when there are monitors to tell.
package final class RequestObservers: TransferObserver {
    /// The number monitors' events carry (see `RequestContext.requestID`).
    let requestID: UInt64
    /// The session's monitors.
    let monitors: EventMonitorGroup?
    /// The request's own monitors (`RequestOptions.eventMonitors`), which hear only of it.
    let ownMonitors: EventMonitorGroup?
    /// The request's span and metrics; nil when neither records.
    let telemetry: RequestTelemetry?

    init(
        requestID: UInt64, monitors: EventMonitorGroup?, ownMonitors: EventMonitorGroup? = nil,
        telemetry: RequestTelemetry?
    ) {
        self.requestID = requestID
        self.monitors = monitors
        self.ownMonitors = ownMonitors
        self.telemetry = telemetry
    }

    /// The transport's observer for the request's transfers: this, when monitors want the
    /// heads and redirects; nil otherwise (a span alone needs neither).
    var transferObserver: (any TransferObserver)? { monitors == nil && ownMonitors == nil ? nil : self }

    /// Queues `kind` for the session's monitors and the request's own.
    private func emit(_ kind: RequestEvent.Kind) {
        monitors?.emit(requestID, kind)
        ownMonitors?.emit(requestID, kind)
    }

    func created(_ head: HTTPRequest) {
        emit(.created(head))
    }

    func adapted(_ head: HTTPRequest, attempt: Int) {
        emit(.adapted(head, attempt: attempt))
    }

    func attemptStarted(_ head: HTTPRequest, attempt: Int) {
        emit(.attemptStarted(head, attempt: attempt))
    }

    func waitingForConnectivity(_ head: HTTPRequest) {
        emit(.waitingForConnectivity(head))
    }

    func retryDecided(attempt: Int, error: any Error, decision: RetryDecision) {
        emit(.retryDecided(attempt: attempt, error: error, decision: decision))
    }

    /// A WebSocket's handshake was answered (`101`).
    func webSocketOpened(_ opening: WebSocketOpening) {
        emit(.webSocketOpened(opening.request, opening.response, subprotocol: opening.subprotocol))
    }

    /// A WebSocket opened for `handshake` ended: with the close frame it had, if any, or an
    /// error.
    func webSocketClosed(_ handshake: HTTPRequest, closure: WebSocketClosure?, error: (any Error)?) {
        emit(.webSocketClosed(handshake, code: closure?.code, reason: closure?.reason ?? "", error: error))
    }

    /// The spans of one attempt, its context injected into `request`'s head; nil without a
    /// tracer or metrics.
    func attempt(for request: inout TransferRequest) -> AttemptTelemetry? {
        telemetry?.attempt(for: &request)
    }

    /// The request succeeded with `raw`; returns once the loggers have written it.
    @inline(never)
    func finished(_ raw: RawResponse) async {
        await monitors?.emitFinished(requestID, raw)
        await ownMonitors?.emitFinished(requestID, raw)
        telemetry?.finished(raw)
    }

    /// The request failed with `error` after `attempts` attempts, or was cancelled (which
    /// monitors do not hear as a failure); returns once the loggers have written it.
    @inline(never)
    func failed(_ request: HTTPRequest, _ error: any Error, attempts: Int, cancelled: Bool) async {
        if !cancelled {
            await monitors?.emitFailed(requestID, request, error, attempts: attempts)
            await ownMonitors?.emitFailed(requestID, request, error, attempts: attempts)
        }
        telemetry?.failed(error, cancelled: cancelled)
    }

    package func transferReceivedHead(_ head: RecordedHead, for request: HTTPRequest) {
        monitors?.enqueueHead(requestID, head, for: request)
        ownMonitors?.enqueueHead(requestID, head, for: request)
    }

    package func transferRedirected(from request: HTTPRequest, to next: HTTPRequest, head: RecordedHead) {
        monitors?.enqueueRedirect(requestID, from: request, to: next, head)
        ownMonitors?.enqueueRedirect(requestID, from: request, to: next, head)
    }
}

import CourierCore
import CourierStorage
import Foundation
import HTTPTypes

/// The seam between the request pipeline and what sends requests: the libcurl engine by
/// default (`CourierEngine`), a stub in tests (`CourierTesting`).
///
/// The pipeline hands a transport a prepared ``TransferRequest`` (adapted, serialized, with its
/// credentials and options) and a ``ResponseSink`` for the body; the transport follows
/// redirects by ``RedirectPolicy``, reports progress through ``TransferReporters`` and
/// finishes with a ``TransferOutput`` or a `CourierError`. Everything above it (serializers,
/// validation, the HTTP cache, authentication challenges, interceptors, monitors) is the same
/// whichever transport runs the request.
package protocol Transport: CookieJarHost, AnyObject {
    /// A form of `fields` the transport can build once and share between the requests that
    /// send exactly those headers and no body (the engine's libcurl header list); nil when
    /// the transport has no use for one.
    func sharedHeaders(for fields: HTTPFields, acceptsCompressedResponses: Bool) -> (any Sendable)?

    /// A transfer for `request`, not yet started. `sharedHeaders` came from
    /// ``sharedHeaders(for:acceptsCompressedResponses:)`` for the request's own fields. The
    /// request is consumed: the transfer keeps it without copying its dozen references.
    func makeTransfer(
        _ request: consuming TransferRequest, reporters: TransferReporters?, sharedHeaders: (any Sendable)?,
        sink: (any ResponseSink)?, maximumBytesPerSecond: Int64?
    ) -> any TransportTransfer

    /// A WebSocket for `request` (a `GET` of the http or https URL standing for the ws or wss
    /// one, its head as the handshake sends it), not yet opened.
    func makeWebSocket(_ request: TransferRequest, parameters: WebSocketParameters) -> any WebSocketChannel

    /// Cancels every transfer and releases the transport's resources; transfers made
    /// afterwards fail with `CancellationError`. Idempotent.
    func shutdown()
}

/// One request on a transport: started once, controlled from any thread, awaited by the
/// pipeline.
package protocol TransportTransfer: AnyObject, Sendable {
    /// Sends the request, unless it was cancelled or suspended first.
    func start()
    /// Cancels; waiters get `CancellationError`. Idempotent.
    func cancel()
    /// Pauses a running transfer in both directions, or holds one that has not started.
    func suspend()
    /// Undoes ``suspend()``; starts the transfer if it was held before starting.
    func resume()
    /// This transfer's bandwidth limit in bytes per second; nil lifts it.
    func setMaximumBytesPerSecond(_ rate: Int64?)
    /// The sink answered `.pause` and can take bytes again.
    func resumeReceiving()
    /// The URL the transfer was made for (its first hop).
    var requestURL: String { get }
    /// The request of the current hop: the one the transfer was made for until a redirect is
    /// followed, then the redirect's. Any thread.
    var currentRequest: HTTPRequest { get }
    /// Whether the transfer has finished (succeeded, failed or was cancelled).
    var isFinished: Bool { get }
    /// Waits for the result. When `cancelsWithCaller`, cancelling the awaiting Swift task
    /// cancels the transfer.
    func value(cancelsWithCaller: Bool) async throws -> TransferOutput
}

extension TransportTransfer {
    /// Waits for the result; cancelling the awaiting task cancels the transfer.
    package func value() async throws -> TransferOutput {
        try await value(cancelsWithCaller: true)
    }
}

/// What sends a session's requests, when it is not the libcurl engine: set
/// `HTTPSessionConfiguration.transport` to one (for example `StubTransport` from
/// `CourierTesting`, in tests). The engine is used when it is nil.
public struct HTTPTransport: Sendable {
    package let base: any Transport

    /// A transport over `base`.
    package init(_ base: any Transport) {
        self.base = base
    }
}

/// Told what a transfer sees on the wire, on the transport's thread (the libcurl engine's):
/// implementations must return at once and never block.
package protocol TransferObserver: AnyObject, Sendable {
    /// A complete response head (not an interim 1xx one) arrived for `request`; redirects'
    /// heads too.
    func transferReceivedHead(_ head: RecordedHead, for request: HTTPRequest)
    /// The transfer follows a redirect from `request` (answered by the head `head`) to `next`.
    func transferRedirected(from request: HTTPRequest, to next: HTTPRequest, head: RecordedHead)
}

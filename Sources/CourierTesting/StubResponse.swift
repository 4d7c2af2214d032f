import Courier
import CourierCore
import Foundation
import HTTPTypes

/// What a ``StubTransport`` answers one request with: a response head and a body delivered in
/// chunks, after a delay, optionally ending in a failure; or a failure alone.
public struct StubResponse: Sendable {
    /// The status.
    public var status: HTTPResponse.Status
    /// The response's header fields. `Content-Length` is added from the body unless present
    /// (or unless the response ends in a failure).
    public var headerFields: HTTPFields
    /// The body, delivered to the session chunk by chunk (progress is reported after each).
    public var chunks: [Data]
    /// How long to wait before the response head.
    public var delay: Duration
    /// How long to wait before each chunk after the first.
    public var chunkDelay: Duration
    /// A failure instead of (when `status` is irrelevant: see ``failure(_:after:)``) or after
    /// the body: the transfer fails with it once the chunks are delivered.
    public var failure: StubFailure?
    /// Whether the head is sent before the failure (false: the transfer fails before any
    /// response, as when a connection cannot be made).
    var sendsHead = true

    /// A response with `status`, `headerFields` and a body in `chunks`.
    public init(
        status: HTTPResponse.Status = .ok, headerFields: HTTPFields = [:], chunks: [Data] = [],
        delay: Duration = .zero, chunkDelay: Duration = .zero, failure: StubFailure? = nil
    ) {
        self.status = status
        self.headerFields = headerFields
        self.chunks = chunks
        self.delay = delay
        self.chunkDelay = chunkDelay
        self.failure = failure
    }

    /// A response whose body is `body`, in one chunk.
    public init(status: HTTPResponse.Status = .ok, headerFields: HTTPFields = [:], body: Data, delay: Duration = .zero)
    {
        self.init(status: status, headerFields: headerFields, chunks: body.isEmpty ? [] : [body], delay: delay)
    }

    /// A `Content-Type: application/json` response with `json` (text) as its body.
    public static func json(_ json: String, status: HTTPResponse.Status = .ok, headerFields: HTTPFields = [:]) -> Self {
        var fields = headerFields
        if fields[.contentType] == nil { fields[.contentType] = "application/json" }
        return StubResponse(status: status, headerFields: fields, body: Data(json.utf8))
    }

    /// A `Content-Type: application/json` response with `value` encoded by `encoder`.
    public static func json(
        encoding value: some Encodable, status: HTTPResponse.Status = .ok, encoder: JSONEncoder = JSONEncoder()
    ) throws -> Self {
        var response = StubResponse(status: status, body: try encoder.encode(value))
        response.headerFields[.contentType] = "application/json"
        return response
    }

    /// A `Content-Type: text/plain; charset=utf-8` response with `text` as its body.
    public static func text(_ text: String, status: HTTPResponse.Status = .ok) -> Self {
        StubResponse(status: status, headerFields: [.contentType: "text/plain; charset=utf-8"], body: Data(text.utf8))
    }

    /// An empty response with `status`.
    public static func status(_ status: HTTPResponse.Status, headerFields: HTTPFields = [:]) -> Self {
        StubResponse(status: status, headerFields: headerFields)
    }

    /// A redirect to `location` (a 302 unless another status is given).
    public static func redirect(to location: String, status: HTTPResponse.Status = .found) -> Self {
        StubResponse(status: status, headerFields: [.location: location])
    }

    /// No response: the transfer fails with `failure` after `delay`.
    public static func failure(_ failure: StubFailure, after delay: Duration = .zero) -> Self {
        var response = StubResponse(delay: delay, failure: failure)
        response.sendsHead = false
        return response
    }
}

/// A failure a ``StubTransport`` injects: each becomes the `CourierError` the libcurl engine
/// raises for it, with the request's URL in its context.
///
/// Minor releases may add cases: a `switch` over it ends with `default`.
public enum StubFailure: Sendable {
    /// `CourierError.cannotResolveHost`.
    case cannotResolveHost
    /// `CourierError.cannotConnect` (a refused connection).
    case cannotConnect
    /// `CourierError.timedOut`.
    case timedOut
    /// `CourierError.connectionLost`: after a response's chunks, a body cut short.
    case connectionLost
    /// `CourierError.tls`.
    case tls
    /// This error, as it is.
    case error(any Error)

    /// The error for a request to `url`, with `response` and `body` (what arrived before it).
    func error(url: URL?, response: HTTPResponse?, body: Data?) -> any Error {
        func context(_ message: String) -> CourierError.Context {
            .init(url: url, response: response, body: body, message: message)
        }
        let host = url?.host ?? "the host"
        switch self {
        case .cannotResolveHost: return CourierError.cannotResolveHost(context("Cannot resolve host: \(host)"))
        case .cannotConnect: return CourierError.cannotConnect(context("Cannot connect: connection to \(host) refused"))
        case .timedOut: return CourierError.timedOut(context("Timed out: no answer from \(host)"))
        case .connectionLost: return CourierError.connectionLost(context("Connection lost: the server closed it"))
        case .tls: return CourierError.tls(context("TLS failure: the handshake with \(host) failed"))
        case .error(let error): return error
        }
    }
}

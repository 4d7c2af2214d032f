import Foundation
import HTTPTypes

/// A response as it arrived, before a response serializer turned it into a value.
public struct RawResponse: Sendable {
    /// The request as sent (after `adapt(_:)`; after redirects, the final hop's).
    public var request: HTTPRequest
    /// The response head: status and header fields (parsed into `HTTPFields` on first use).
    public var response: HTTPResponse {
        get { head.response }
        set { head = ResponseHead(parsed: newValue) }
    }
    var head: ResponseHead
    /// The body bytes (content-decoded).
    public var data: Data
    /// Timing and size figures.
    public var metrics: TransferMetrics
    /// Whether the network or the HTTP cache answered.
    public var source: ResponseSource = .network

    /// Creates a raw response.
    public init(request: HTTPRequest, response: HTTPResponse, data: Data, metrics: TransferMetrics = .init()) {
        self.request = request
        self.head = ResponseHead(parsed: response)
        self.data = data
        self.metrics = metrics
    }

    /// The URL that answered (after redirects): the final request's URL.
    public var url: URL { request.url ?? URL(string: "http://invalid/")! }
    /// The status.
    public var status: HTTPResponse.Status { head.status }
    /// The header fields.
    public var headerFields: HTTPFields { response.headerFields }
}

/// A whole response: request, status, header fields, body, the serialized value and metrics.
public struct DataResponse<Value: Sendable>: Sendable {
    /// The request as sent (after `adapt(_:)`; after redirects, the final hop's).
    public var request: HTTPRequest
    /// The response head (parsed into `HTTPFields` on first use).
    public var response: HTTPResponse {
        get { head.response }
        set { head = ResponseHead(parsed: newValue) }
    }
    var head: ResponseHead
    /// The body bytes.
    public var data: Data
    /// What the response serializer made of the body.
    public var value: Value
    /// Timing and size figures.
    public var metrics: TransferMetrics
    /// Whether the network or the HTTP cache answered.
    public var source: ResponseSource

    /// Creates a response.
    public init(raw: RawResponse, value: Value) {
        self.request = raw.request
        self.head = raw.head
        self.data = raw.data
        self.value = value
        self.metrics = raw.metrics
        self.source = raw.source
    }

    /// The URL that answered (after redirects): the final request's URL.
    public var url: URL { request.url ?? URL(string: "http://invalid/")! }
    /// The status.
    public var status: HTTPResponse.Status { head.status }
    /// The header fields.
    public var headerFields: HTTPFields { response.headerFields }
}

extension RawResponse {
    init(_ output: TransferOutput) {
        request = output.request
        head = ResponseHead(recorded: output.head)
        data = output.body
        metrics = output.metrics
    }

    /// A `CourierError.Context` carrying this response's URL, head and body.
    func errorContext(_ message: String, underlying: (any Error & Sendable)? = nil) -> CourierError.Context {
        .init(url: url, response: response, body: data, message: message, underlyingError: underlying)
    }
}

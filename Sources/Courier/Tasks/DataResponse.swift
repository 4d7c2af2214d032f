import Foundation
import HTTPTypes

/// A response as it arrived, before a response serializer turned it into a value.
public struct RawResponse: Sendable {
    /// The request as sent (after `adapt(_:)`; after redirects, the final hop's).
    public var request: HTTPRequest
    /// The response head: status and header fields.
    public var response: HTTPResponse
    /// The body bytes (content-decoded).
    public var data: Data
    /// Timing and size figures.
    public var metrics: TransferMetrics

    /// Creates a raw response.
    public init(request: HTTPRequest, response: HTTPResponse, data: Data, metrics: TransferMetrics = .init()) {
        self.request = request
        self.response = response
        self.data = data
        self.metrics = metrics
    }

    /// The URL that answered (after redirects): the final request's URL.
    public var url: URL { request.url ?? URL(string: "http://invalid/")! }
    /// The status.
    public var status: HTTPResponse.Status { response.status }
    /// The header fields.
    public var headerFields: HTTPFields { response.headerFields }
}

/// A whole response: request, status, header fields, body, the serialized value and metrics.
public struct DataResponse<Value: Sendable>: Sendable {
    /// The request as sent (after `adapt(_:)`; after redirects, the final hop's).
    public var request: HTTPRequest
    /// The response head.
    public var response: HTTPResponse
    /// The body bytes.
    public var data: Data
    /// What the response serializer made of the body.
    public var value: Value
    /// Timing and size figures.
    public var metrics: TransferMetrics

    /// Creates a response.
    public init(raw: RawResponse, value: Value) {
        self.request = raw.request
        self.response = raw.response
        self.data = raw.data
        self.value = value
        self.metrics = raw.metrics
    }

    /// The URL that answered (after redirects): the final request's URL.
    public var url: URL { request.url ?? URL(string: "http://invalid/")! }
    /// The status.
    public var status: HTTPResponse.Status { response.status }
    /// The header fields.
    public var headerFields: HTTPFields { response.headerFields }
}

extension RawResponse {
    init(_ output: TransferOutput) {
        self.init(
            request: output.request,
            response: output.head.response ?? HTTPResponse(status: .init(code: output.head.statusCode)),
            data: output.body,
            metrics: output.metrics)
    }

    /// A `CourierError.Context` carrying this response's URL, head and body.
    func errorContext(_ message: String, underlying: (any Error & Sendable)? = nil) -> CourierError.Context {
        .init(url: url, response: response, body: data, message: message, underlyingError: underlying)
    }
}

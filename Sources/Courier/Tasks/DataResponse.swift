import CourierCore
import CourierTransport
import Foundation
import HTTPTypes

/// A whole response: request, status, header fields, body, the serialized value and metrics.
public struct DataResponse<Value: Sendable>: Sendable {
    /// The request as sent (after `adapt(_:)`; after redirects, the final hop's).
    public var request: HTTPRequest
    /// The response head (parsed into `HTTPFields` on first use).
    public var response: HTTPResponse {
        get { head.response }
        set { head = ResponseHead(parsed: newValue, trailers: head.trailers) }
    }
    /// The trailer fields that came after the body (a chunked HTTP/1.1 body's trailer section,
    /// an HTTP/2 or HTTP/3 response's trailing fields): `Server-Timing`, a checksum, gRPC's
    /// status. nil when none came.
    public var trailers: HTTPFields? { head.trailers }
    var head: ResponseHead
    /// The body bytes.
    public var data: Data
    /// What the response serializer made of the body.
    public var value: Value
    /// Timing and size figures.
    public var metrics: TransferMetrics
    /// Whether the network or the HTTP cache answered.
    public var source: ResponseSource
    /// What the session's HTTP cache did with the response (RFC 9211's terms): a hit, or why
    /// the request went to the server and whether the answer was stored. nil when the cache
    /// had no part.
    public var cacheStatus: CacheStatus?

    /// Creates a response.
    public init(raw: RawResponse, value: Value) {
        self.request = raw.request
        self.head = raw.head
        self.data = raw.data
        self.value = value
        self.metrics = raw.metrics
        self.source = raw.source
        self.cacheStatus = raw.cacheStatus
    }

    /// The URL that answered (after redirects): the final request's URL. Setting it sets the
    /// request's URL.
    public var url: URL {
        get { request.url ?? URL(string: "http://invalid/")! }
        set { request.url = newValue }
    }
    /// The status.
    public var status: HTTPResponse.Status { head.status }
    /// The header fields.
    public var headerFields: HTTPFields { response.headerFields }
}

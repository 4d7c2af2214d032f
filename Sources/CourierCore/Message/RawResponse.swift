import Foundation
import HTTPTypes

/// A response as it arrived, before a response serializer turned it into a value.
public struct RawResponse: Sendable {
    /// The request as sent (after `adapt(_:)`; after redirects, the final hop's).
    public var request: HTTPRequest
    /// The response head: status and header fields (parsed into `HTTPFields` on first use).
    public var response: HTTPResponse {
        get { head.response }
        set { head = ResponseHead(parsed: newValue, trailers: head.trailers) }
    }
    /// The trailer fields that came after the body (a chunked HTTP/1.1 body's trailer section,
    /// an HTTP/2 or HTTP/3 response's trailing fields): `Server-Timing`, a checksum, gRPC's
    /// status. nil when none came.
    public var trailers: HTTPFields? { head.trailers }
    package var head: ResponseHead
    /// The body bytes (content-decoded).
    public var data: Data
    /// Timing and size figures.
    public var metrics: TransferMetrics
    /// Whether the network or the HTTP cache answered.
    public var source: ResponseSource = .network
    /// What the session's HTTP cache did with the response (RFC 9211's terms): a hit, or why
    /// the request went to the server and whether the answer was stored. nil when the cache
    /// had no part (no cache, a method or a task it does not serve, `no-store` in the request).
    public var cacheStatus: CacheStatus?

    /// Creates a raw response.
    public init(request: HTTPRequest, response: HTTPResponse, data: Data, metrics: TransferMetrics = .init()) {
        self.request = request
        self.head = ResponseHead(parsed: response)
        self.data = data
        self.metrics = metrics
    }

    /// Creates a raw response to `request` sent to `url`, as the first releases' initializer
    /// did: `url` becomes the request's URL (a raw response's ``url`` is its request's).
    @available(
        *, deprecated,
        message:
            "A raw response's URL is its request's: set the request's url and use init(request:response:data:metrics:)"
    )
    public init(request: HTTPRequest, url: URL, response: HTTPResponse, data: Data, metrics: TransferMetrics = .init())
    {
        var request = request
        request.url = url
        self.init(request: request, response: response, data: data, metrics: metrics)
    }

    /// A response whose head was recorded by a transport (parsed on first use).
    package init(request: HTTPRequest, head: ResponseHead, data: Data, metrics: TransferMetrics) {
        self.request = request
        self.head = head
        self.data = data
        self.metrics = metrics
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

extension RawResponse {
    /// A `CourierError.Context` carrying this response's URL, head and body.
    package func errorContext(_ message: String, underlying: (any Error & Sendable)? = nil) -> CourierError.Context {
        .init(url: url, response: response, body: data, message: message, underlyingError: underlying)
    }
}

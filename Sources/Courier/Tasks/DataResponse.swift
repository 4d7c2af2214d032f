@_spi(CourierInternals) import CourierCore
import CourierEngine
import CourierPipeline
import CourierSerialization
import CourierStorage
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

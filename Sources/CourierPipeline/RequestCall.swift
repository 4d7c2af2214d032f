import CourierCore
import CourierJSON
import CourierTransport
import HTTPTypes

/// Everything a call says about its request.
package struct RequestCall: Sendable {
    package var method: HTTPRequest.Method
    package var path: String
    package var parameters: JSON?
    package var headers: [String: String]
    /// Header fields given as fields (repeated names kept, in order), after `headers`: each
    /// name here replaces the session's fields of that name. For requests built elsewhere
    /// (generated OpenAPI clients).
    package var fields: HTTPFields?
    /// A body given as is: the request serializer is skipped.
    package var body: RequestBody?
    /// The `Content-Type` of `body`, unless the call's headers set one.
    package var contentType: String?
    /// Downloads, streams and large uploads: larger libcurl buffers.
    package var usesLargeBuffers = false
    package var maximumBytesPerSecond: Int64?
    /// The call's own cookie, cache, credential and interceptor choices.
    package var options: RequestOptions

    package init(
        method: HTTPRequest.Method, path: String, parameters: JSON? = nil, headers: [String: String] = [:],
        body: RequestBody? = nil, contentType: String? = nil, options: RequestOptions = RequestOptions()
    ) {
        self.method = method
        self.path = path
        self.parameters = parameters
        self.headers = headers
        self.body = body
        self.contentType = contentType
        self.options = options
    }
}

/// A call turned into a request head and body by the manager's serializer, not yet adapted.
///
/// A class: it is handed down through several `async` functions, and a reference is cheaper
/// to keep in their frames than the copies of a large value.
package final class PreparedRequest: Sendable {
    package let call: RequestCall
    package let head: HTTPRequest
    package let body: RequestBody?
    /// The session's own header fields, and the transport's shared form of them: a request
    /// that sends exactly those (the common case) reuses it.
    package let sessionFields: HTTPFields
    package let sharedHeaders: (any Sendable)?

    package init(
        call: RequestCall, head: HTTPRequest, body: RequestBody?, sessionFields: HTTPFields,
        sharedHeaders: (any Sendable)?
    ) {
        self.call = call
        self.head = head
        self.body = body
        self.sessionFields = sessionFields
        self.sharedHeaders = sharedHeaders
    }
}

extension RequestPipeline {
    /// The transfer options of one call: the session's, with the call's own choices.
    package func options(for call: RequestCall) -> SharedTransferOptions {
        let choices = call.options
        guard choices.changesTransfer else { return sharedTransferOptions }
        var options = transferOptions
        if let handlesCookies = choices.handlesCookies { options.handlesCookies = handlesCookies }
        if let timeout = choices.requestTimeout { options.idleTimeout = timeout }
        if let timeout = choices.resourceTimeout { options.totalTimeout = timeout }
        if let path = choices.unixSocketPath { options.unixSocketPath = path }
        if let waits = choices.waitsForConnectivity { options.waitsForConnectivity = waits }
        if let version = choices.httpVersion { options.httpVersion = version }
        if let socket = choices.socket { options.socket = socket }
        if let size = choices.maximumResponseSize {
            options.maximumResponseSize = size
            options.maximumBodySize = size
        }
        if let ratio = choices.maximumDecompressionRatio { options.maximumDecompressionRatio = ratio }
        if let proxy = choices.proxy { options.proxy = proxy.absoluteString }
        if let timeout = choices.connectTimeout { options.connectTimeout = timeout }
        if let tls = choices.tlsPolicy {
            // A trust evaluator the session's connections were not checked by: connections of
            // the call's own (see `TransferOptions.isolatesConnections`).
            options.isolatesConnections = tls != options.tls && tls.hasEvaluator
            options.tls = tls
        }
        if let redirects = choices.redirects {
            options.followRedirects = redirects.follows
            options.maximumRedirects = redirects.maximum
        }
        return SharedTransferOptions(options)
    }
}

@_spi(CourierInternals) import CourierCore
import CourierPipeline
import CourierTransport
import Foundation
import HTTPTypes

extension HTTPSessionManager {
    /// The body of a response from ``exchange(_:url:fields:body:options:)``.
    package enum ExchangeBody: Sendable {
        /// A successful response's body, arriving (iterate it once).
        case stream(ByteStream)
        /// The whole body of a response with a status outside 200..<300.
        case collected(Data)
    }

    /// Sends a request built elsewhere (by a generated OpenAPI client): `method` to the
    /// absolute `url`, with `fields` over the session's own (a name in `fields` replaces the
    /// session's fields of that name) and `body`, through the whole pipeline (interceptors,
    /// retry, cookies, the cache, credentials). Returns when the head of the response has
    /// arrived, whatever its status.
    ///
    /// The body of a successful response comes as a stream with backpressure. A response with
    /// another status is first a failure in the pipeline, where a retry policy may try again;
    /// when it is the last answer, it is returned with its whole body (up to the session's
    /// `maximumResponseSize`). Cancelling the calling task cancels the transfer; so does
    /// dropping the stream or cancelling the task that iterates it.
    package nonisolated func exchange(
        _ method: HTTPRequest.Method, url: String, fields: HTTPFields, body: UploadBody?,
        options: RequestOptions = RequestOptions()
    ) async throws -> (HTTPResponse, ExchangeBody) {
        var call = Call(method: method, path: url, options: options)
        call.fields = fields
        if let body {
            call.body = try body.requestBody(compressed: false)
            call.contentType = body.effectiveContentType
        }
        // libcurl's default buffers: generated clients mostly exchange small documents.
        let sink = StreamSink()
        sink.wantsHead = true
        sink.errorBodyKept = .whole(limit: configuration.maximumResponseSize)
        let control = TaskControl()
        startStreaming(call, into: sink, control: control)
        do {
            let head = try await withTaskCancellationHandler {
                try await sink.head()
            } onCancel: {
                control.cancel()
            }
            return (head, .stream(ByteStream(started: ByteStream.IteratorStorage(sink: sink, control: control))))
        } catch CourierError.unacceptableStatusCode(let context) {
            guard let response = context.response else { throw CourierError.unacceptableStatusCode(context) }
            return (response, .collected(context.body ?? Data()))
        }
    }
}

import CourierCore
import CourierPipeline
import CourierTransport
import Foundation
import HTTPTypes

extension HTTPSessionManager {
    /// The body of a response from ``relay(_:url:fields:body:options:)``.
    package enum RelayedBody: Sendable {
        /// A successful response's body, arriving (iterate it once).
        case stream(ByteStream)
        /// A body read whole: a response with a status outside 200..<300, or one whose request
        /// accepts only documents that are read whole (see `readsWhole(accepting:)`).
        case collected(Data)
    }

    /// Sends a request built elsewhere (by a generated OpenAPI client): `method` to the
    /// absolute `url`, with `fields` over the session's own (a name in `fields` replaces the
    /// session's fields of that name) and `body`, through the whole pipeline (interceptors,
    /// retry, cookies, the cache, credentials). Returns when the head of the response has
    /// arrived, whatever its status.
    ///
    /// The body of a successful response comes as a stream with backpressure, unless the
    /// request's `Accept` names only JSON, XML, plain text, HTML or form documents: those are
    /// read whole (what reads them decodes them whole anyway), on the data tasks' path, which
    /// takes no sink or stream of its own. Either way the request is among the manager's
    /// `tasks` while it runs (a data or a stream task), so `cancelAllTasks()` reaches it and
    /// `finishTasksAndInvalidate()` waits for it. A response with another status is first a
    /// failure in the pipeline, where a retry policy may try again; when it is the last answer,
    /// it is returned with its whole body (up to the session's `maximumResponseSize`).
    /// Cancelling the calling task cancels the transfer; so does dropping the stream or
    /// cancelling the task that iterates it.
    package nonisolated func relay(
        _ method: HTTPRequest.Method, url: String, fields: HTTPFields, body: UploadBody?,
        options: RequestOptions = RequestOptions()
    ) async throws -> (HTTPResponse, RelayedBody) {
        var call = Call(method: method, path: url, options: options)
        call.fields = fields
        try call.setBody(body)
        do {
            if Self.readsWhole(accepting: fields[values: .accept]) {
                let raw = try await tracked(.data, method, url) { control in
                    try await performRaw(call, register: control.attach, serialize: Self.requireSuccess)
                }
                return (raw.response, .collected(raw.data))
            }
            return try await startStream(call)
        } catch CourierError.unacceptableStatusCode(let context) {
            // The last answer had a status outside 200..<300: a response like any other here.
            guard let response = context.response else { throw CourierError.unacceptableStatusCode(context) }
            return (response, .collected(context.body ?? Data()))
        }
    }

    /// `call` started with its body going to a stream; returns when the head of a successful
    /// response has arrived (libcurl's default buffers: generated clients mostly exchange small
    /// documents).
    private nonisolated func startStream(_ call: Call) async throws -> (HTTPResponse, RelayedBody) {
        let sink = StreamSink()
        sink.wantsHead = true
        sink.errorBodyKept = .whole(limit: configuration.maximumResponseSize)
        let control = TaskControl()
        startStreaming(call, into: sink, control: control)
        let head = try await withTaskCancellationHandler {
            try await sink.head()
        } onCancel: {
            control.cancel()
        }
        return (head, .stream(ByteStream(started: ByteStream.IteratorStorage(sink: sink, control: control))))
    }

    /// Whether a response to a request with these `Accept` values is read whole: when they name
    /// only documents (JSON, XML, plain text, HTML, forms; `+json` and `+xml` types too), not
    /// when there are none, nor with a wildcard, bytes, an event stream or line-delimited JSON.
    package nonisolated static func readsWhole(accepting values: [String]) -> Bool {
        var named = false
        for value in values {
            for item in value.split(separator: ",") {
                let type = item.split(separator: ";", maxSplits: 1).first.map {
                    $0.trimmingCharacters(in: .whitespaces).lowercased()
                }
                guard let type, !type.isEmpty else { continue }
                guard Self.wholeDocumentTypes.contains(type) || type.hasSuffix("+json") || type.hasSuffix("+xml")
                else { return false }
                named = true
            }
        }
        return named
    }

    private nonisolated static let wholeDocumentTypes: Set<String> = [
        "application/json", "application/xml", "text/xml", "text/plain", "text/html",
        "application/x-www-form-urlencoded",
    ]
}

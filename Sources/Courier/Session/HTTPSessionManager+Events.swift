import CourierJSON
import CourierPipeline
import CourierSerialization
import Foundation
import HTTPTypes

extension HTTPSessionManager {
    /// Server-Sent Events from `path` (a `GET` with `Accept: text/event-stream`), as an
    /// EventSource does: events arrive as the server sends them, and when the connection ends
    /// or drops, the request is sent again after the server's `retry:` delay (else
    /// `streamOptions.reconnectionDelay`) with `Last-Event-ID`, so the server can continue
    /// where it was.
    ///
    /// ```swift
    /// for try await event in api.events("notifications") where event.event == "mention" {
    ///     show(event.data)
    /// }
    /// ```
    ///
    /// A lost, refused or timed-out connection is reconnected the same way. Reconnections that
    /// deliver no event back off (``EventStreamOptions``: a floor under `retry:`, doubling
    /// delays with jitter, a limit after which the stream fails). The sequence ends when the
    /// server answers 204 No Content, and throws when it answers another status outside
    /// 200..<300 or a `Content-Type` other than `text/event-stream` (the EventSource rules:
    /// those are not retried), when a line or an event passes its size limit
    /// (`responseTooLarge`), or when it fails in another way. Stopping the iteration, or
    /// cancelling its task, closes the connection.
    public nonisolated func events(
        _ path: String, parameters: JSON? = nil, headers: [String: String] = [:],
        options: RequestOptions = RequestOptions(), lastEventID: String? = nil,
        streamOptions: EventStreamOptions = EventStreamOptions()
    ) -> EventStream {
        events(
            .get, path, parameters: parameters, headers: headers, options: options, lastEventID: lastEventID,
            streamOptions: streamOptions)
    }

    /// ``events(_:parameters:headers:options:lastEventID:streamOptions:)`` as it was called
    /// before ``EventStreamOptions`` existed: the delay before a reconnection is now
    /// `EventStreamOptions.reconnectionDelay`. Kept, with the type it returned then, so that code
    /// written against it still compiles.
    @available(
        *, deprecated,
        message: "Pass streamOptions: EventStreamOptions(reconnectionDelay:) instead; the result is an EventStream"
    )
    public nonisolated func events(
        _ path: String, parameters: JSON? = nil, headers: [String: String] = [:],
        options: RequestOptions = RequestOptions(), lastEventID: String? = nil, reconnectionDelay: Duration
    ) -> AsyncThrowingStream<ServerSentEvent, any Error> {
        let events = events(
            path, parameters: parameters, headers: headers, options: options, lastEventID: lastEventID,
            streamOptions: EventStreamOptions(reconnectionDelay: reconnectionDelay))
        return AsyncThrowingStream { continuation in
            let task = Task {
                do {
                    for try await event in events { continuation.yield(event) }
                    continuation.finish()
                } catch {
                    continuation.finish(throwing: error)
                }
            }
            continuation.onTermination = { _ in task.cancel() }
        }
    }

    /// Server-Sent Events answering a request with any method: `parameters` go through the
    /// ``requestSerializer`` (with a `JSONRequestSerializer`, a `POST`'s JSON body), as model
    /// APIs stream their answers.
    ///
    /// ```swift
    /// api.requestSerializer = JSONRequestSerializer()
    /// let deltas = api.events(.post, "v1/chat/completions", parameters: ["model": "m", "stream": true])
    ///     .decoding(ChatDelta.self, until: "[DONE]")
    /// for try await delta in deltas { print(delta.text, terminator: "") }
    /// ```
    ///
    /// Whether a stream reconnects depends on its method (``EventStreamOptions/reconnection``):
    /// by default only idempotent requests (`GET`, `HEAD`, `OPTIONS`, `PUT`, `DELETE`) do, as in
    /// ``events(_:parameters:headers:options:lastEventID:streamOptions:)``. A `POST` is sent
    /// once: the pipeline's retries (the options' or the interceptors') may send it again only
    /// before its response has begun; once an event has arrived, a broken connection ends the
    /// stream with its error, and so does a stream that ends in the middle of an event
    /// (`connectionLost`). A clean end after a whole event ends the sequence.
    public nonisolated func events(
        _ method: HTTPRequest.Method, _ path: String, parameters: JSON? = nil, headers: [String: String] = [:],
        options: RequestOptions = RequestOptions(), lastEventID: String? = nil,
        streamOptions: EventStreamOptions = EventStreamOptions()
    ) -> EventStream {
        eventStream(
            method: method, resendable: true, headers: headers, lastEventID: lastEventID, streamOptions: streamOptions
        ) { headers in
            try self.streamingCall(method, path, parameters: parameters, body: nil, headers: headers, options: options)
        }
    }

    /// ``events(_:_:parameters:headers:options:lastEventID:streamOptions:)-(_,_,JSON?,_,_,_,_)`` with `Encodable`
    /// parameters, encoded with ``encoder`` and then serialized by the ``requestSerializer``.
    public nonisolated func events<Parameters: Encodable & Sendable>(
        _ method: HTTPRequest.Method, _ path: String, parameters: Parameters, headers: [String: String] = [:],
        options: RequestOptions = RequestOptions(), lastEventID: String? = nil,
        streamOptions: EventStreamOptions = EventStreamOptions()
    ) -> EventStream {
        eventStream(
            method: method, resendable: true, headers: headers, lastEventID: lastEventID, streamOptions: streamOptions
        ) { headers in
            try self.streamingCall(
                method, path, parameters: self.json(from: parameters), body: nil, headers: headers, options: options)
        }
    }

    /// ``events(_:_:parameters:headers:options:lastEventID:streamOptions:)-(_,_,JSON?,_,_,_,_)`` with a body given
    /// as is (data, a file, an `AsyncSequence` of bytes, a multipart form). A body from an
    /// `AsyncSequence` can be sent once, so such a stream never reconnects.
    public nonisolated func events(
        _ method: HTTPRequest.Method, _ path: String, body: UploadBody, headers: [String: String] = [:],
        options: RequestOptions = RequestOptions(), lastEventID: String? = nil,
        streamOptions: EventStreamOptions = EventStreamOptions()
    ) -> EventStream {
        eventStream(
            method: method, resendable: body.canBeSentAgain, headers: headers, lastEventID: lastEventID,
            streamOptions: streamOptions
        ) { headers in
            try self.streamingCall(method, path, parameters: nil, body: body, headers: headers, options: options)
        }
    }

    /// The event stream of every `events` call: `makeCall` builds the request with the headers
    /// of each connection (`Accept`, `Last-Event-ID`).
    private nonisolated func eventStream(
        method: HTTPRequest.Method, resendable: Bool, headers: [String: String], lastEventID: String?,
        streamOptions: EventStreamOptions, makeCall: @escaping @Sendable ([String: String]) throws -> Call
    ) -> EventStream {
        EventStream(
            connect: { headers in try await self.startedStream(makeCall(headers)) }, headers: headers,
            lastEventID: lastEventID, options: streamOptions,
            reconnects: resendable && streamOptions.reconnects(method))
    }
}

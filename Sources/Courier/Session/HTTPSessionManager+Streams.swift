import CourierCore
import CourierJSON
import CourierPipeline
import CourierTransport
import Foundation
import HTTPTypes

extension HTTPSessionManager {
    // MARK: - Byte streams

    /// Sends a request and returns as soon as the head of a successful response has arrived:
    /// its status and headers, and the body as a ``ByteStream`` to iterate once, with
    /// backpressure (a consumer that stops reading stops the transfer).
    ///
    /// ```swift
    /// let (head, body) = try await api.stream(.get, "export")
    /// print(head.headerFields[.contentType] ?? "")
    /// for try await chunk in body { consume(chunk) }
    /// ```
    ///
    /// `parameters` go through the ``requestSerializer`` as for the verbs (a query for `GET`,
    /// a form or JSON body for `POST`). A status outside 200..<300, or a failure before the
    /// head, throws here (after any retries the options or the session's interceptors allow),
    /// with the start of the body in the error's context. Dropping `body` without iterating
    /// it, or cancelling the task that iterates it, cancels the transfer. The body's typed
    /// views (`lines`, `jsonLines(as:)`, `jsonTextSequence(as:)`) read it element by element.
    public nonisolated func stream(
        _ method: HTTPRequest.Method, _ path: String, parameters: JSON? = nil, headers: [String: String] = [:],
        options: RequestOptions = RequestOptions()
    ) async throws -> (HTTPResponse, ByteStream) {
        try await startedStream(
            streamingCall(method, path, parameters: parameters, body: nil, headers: headers, options: options))
    }

    /// ``stream(_:_:parameters:headers:options:)-(_,_,JSON?,_,_)`` with `Encodable` parameters, encoded with
    /// ``encoder`` and then serialized by the ``requestSerializer`` (with a
    /// `JSONRequestSerializer`: the JSON body of a model API's request).
    public nonisolated func stream<Parameters: Encodable & Sendable>(
        _ method: HTTPRequest.Method, _ path: String, parameters: Parameters, headers: [String: String] = [:],
        options: RequestOptions = RequestOptions()
    ) async throws -> (HTTPResponse, ByteStream) {
        try await startedStream(
            streamingCall(
                method, path, parameters: json(from: parameters), body: nil, headers: headers, options: options))
    }

    /// ``stream(_:_:parameters:headers:options:)-(_,_,JSON?,_,_)`` with a body given as is: data, a file, an
    /// `AsyncSequence` of bytes or a multipart form (the request serializer is skipped). The
    /// response's head and body may arrive while the body is still being sent: a server that
    /// answers each part of the request as it reads it is read as it answers (full duplex,
    /// over HTTP/1.1 and HTTP/2).
    ///
    /// ```swift
    /// let (outgoing, writer) = AsyncStream.makeStream(of: Data.self)
    /// let (_, incoming) = try await api.stream(.post, "translate", body: .stream(outgoing))
    /// writer.yield(Data("first sentence\n".utf8))
    /// for try await line in incoming.lines { print(line) }   // while more is being sent
    /// ```
    public nonisolated func stream(
        _ method: HTTPRequest.Method, _ path: String, body: UploadBody, headers: [String: String] = [:],
        options: RequestOptions = RequestOptions()
    ) async throws -> (HTTPResponse, ByteStream) {
        try await startedStream(
            streamingCall(method, path, parameters: nil, body: body, headers: headers, options: options))
    }

    /// The response body as an `AsyncSequence` of chunks, with backpressure (see
    /// ``ByteStream``). The request is sent when iteration starts; `parameters` go through the
    /// ``requestSerializer``.
    public nonisolated func bytes(
        _ method: HTTPRequest.Method, _ path: String, parameters: JSON? = nil, headers: [String: String] = [:],
        options: RequestOptions = RequestOptions()
    ) -> ByteStream {
        lazyStream {
            try self.streamingCall(method, path, parameters: parameters, body: nil, headers: headers, options: options)
        }
    }

    /// ``bytes(_:_:parameters:headers:options:)-(_,_,JSON?,_,_)`` with `Encodable` parameters (encoded with
    /// ``encoder``, then serialized by the ``requestSerializer``).
    public nonisolated func bytes<Parameters: Encodable & Sendable>(
        _ method: HTTPRequest.Method, _ path: String, parameters: Parameters, headers: [String: String] = [:],
        options: RequestOptions = RequestOptions()
    ) -> ByteStream {
        lazyStream {
            try self.streamingCall(
                method, path, parameters: self.json(from: parameters), body: nil, headers: headers, options: options)
        }
    }

    /// ``bytes(_:_:parameters:headers:options:)-(_,_,JSON?,_,_)`` with a body given as is (see
    /// ``stream(_:_:body:headers:options:)``). Each iteration sends the request anew, so a
    /// body from an `AsyncSequence` can be iterated once.
    public nonisolated func bytes(
        _ method: HTTPRequest.Method, _ path: String, body: UploadBody, headers: [String: String] = [:],
        options: RequestOptions = RequestOptions()
    ) -> ByteStream {
        lazyStream {
            try self.streamingCall(method, path, parameters: nil, body: body, headers: headers, options: options)
        }
    }

    /// The call of a streamed response: `parameters` for the request serializer, or `body` as
    /// is; larger libcurl buffers.
    nonisolated func streamingCall(
        _ method: HTTPRequest.Method, _ path: String, parameters: JSON?, body: UploadBody?,
        headers: [String: String], options: RequestOptions
    ) throws(CourierError) -> Call {
        var call = Call(method: method, path: path, parameters: parameters, headers: headers, options: options)
        try call.setBody(body)
        call.usesLargeBuffers = true
        return call
    }

    /// `call` started, once its response's head has arrived: the head, and the body to read.
    nonisolated func startedStream(_ call: Call) async throws -> (HTTPResponse, ByteStream) {
        let sink = StreamSink()
        sink.wantsHead = true
        let control = TaskControl()
        startStreaming(call, into: sink, control: control)
        let storage = ByteStream.IteratorStorage(sink: sink, control: control)
        let head = try await withTaskCancellationHandler {
            try await sink.head()
        } onCancel: {
            control.cancel()
        }
        return (head, ByteStream(started: storage))
    }

    /// A byte stream whose call is made (and its input checked) when iteration starts; a call
    /// that cannot be made fails the first `next()`.
    nonisolated func lazyStream(_ makeCall: @escaping @Sendable () throws -> Call) -> ByteStream {
        ByteStream { sink, control in
            do {
                self.startStreaming(try makeCall(), into: sink, control: control)
            } catch {
                sink.finish(raw: nil, error: error)
            }
        }
    }

    /// Starts `call` in a task of its own, its body going to `sink` (with backpressure) and
    /// the transfer to `control`; a status outside 200..<300 fails it (in the pipeline, where
    /// a retry policy sees it).
    nonisolated func startStreaming(_ call: Call, into sink: StreamSink, control: TaskControl) {
        let registration = tracking(.stream, call.method, call.path).register(control)
        // Not `registration.run`: the sink is finished, with the answer or the error, while the
        // stream is still listed.
        Task {
            defer { registration.end() }
            do {
                if let refusal = registration.refusal { throw refusal }
                let raw = try await self.performRaw(
                    call, reporters: control.reporters, sink: sink,
                    register: { transfer in
                        sink.setResumeReceiving { [weak transfer] in
                            guard let transfer else { return }
                            transfer.resumeReceiving()
                        }
                        control.attach(transfer)
                    }, serialize: Self.requireSuccess)
                sink.finish(raw: raw, error: nil)
            } catch {
                control.reporters.finish(succeeded: false)
                sink.finish(raw: nil, error: error)
            }
        }
    }

    /// Fails a response whose status is outside 200..<300 (in the pipeline, where a retry
    /// policy sees it).
    nonisolated static func requireSuccess(_ raw: RawResponse) throws {
        guard (200..<300).contains(raw.status.code) else {
            throw CourierError.unacceptableStatusCode(raw.errorContext("Unacceptable status code \(raw.status.code)"))
        }
    }
}

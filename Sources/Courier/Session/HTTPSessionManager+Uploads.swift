import CourierCore
import CourierJSON
import CourierPipeline
import CourierSerialization
import CourierTransport
import Foundation
import HTTPTypes

/// A request body for an upload task.
public struct UploadBody: Sendable {
    enum Source: Sendable {
        case content(RequestBody.Content)
        /// A file, measured when the task starts.
        case file(URL)
        /// A body that cannot be sent (a multipart form with a malformed part header).
        case refused(CourierError)
    }

    let source: Source
    let contentType: String?

    /// The `Content-Type` the upload is sent with unless its headers name one: the given type;
    /// for a file, the type its extension suggests; otherwise `application/octet-stream`. Never
    /// none: libcurl would then send a body as `application/x-www-form-urlencoded`, and a
    /// server would parse the bytes as a form.
    var effectiveContentType: String {
        if let contentType { return contentType }
        if case .file(let url) = source { return MIMEType.forFileName(url.lastPathComponent) }
        return "application/octet-stream"
    }

    /// Bytes in memory (sent from memory without another copy); `application/octet-stream`
    /// unless `contentType` (or the call's headers) say otherwise.
    public static func data(_ data: Data, contentType: String? = nil) -> UploadBody {
        UploadBody(source: .content(.data(data)), contentType: contentType)
    }

    /// A file, read while the request is sent (constant memory) with an exact `Content-Length`;
    /// its `Content-Type` is `contentType`, else the one its extension suggests
    /// (`application/octet-stream` when unknown).
    public static func file(_ url: URL, contentType: String? = nil) -> UploadBody {
        UploadBody(source: .file(url), contentType: contentType)
    }

    /// The bytes of an `AsyncSequence`, sent with chunked transfer encoding, or with
    /// `Content-Length` when `length` is given (a sequence that then gives more or fewer bytes
    /// fails the task with `CourierError.serializationFailed`). The sequence is read only as
    /// fast as the request goes out: while 1 MiB waits to be sent, reading waits.
    public static func stream<Bytes: AsyncSequence & Sendable>(
        _ bytes: Bytes, length: Int64? = nil, contentType: String? = nil
    ) -> UploadBody where Bytes.Element == Data {
        UploadBody(source: .content(.stream(StreamBodyBridge(bytes, length: length))), contentType: contentType)
    }

    /// A multipart form (its file parts are read while the request is sent). A form with a
    /// part whose MIME type or extra header holds CR, LF or NUL fails the task with
    /// `CourierError.invalidHeader` before anything is sent.
    public static func multipart(_ form: MultipartFormData) -> UploadBody {
        if let refusal = form.refusal { return UploadBody(source: .refused(refusal), contentType: nil) }
        return UploadBody(source: .content(.segments(form.segments)), contentType: form.contentType)
    }

    /// Whether the body can be sent again (a reconnection): data, a file or a form can, the
    /// bytes of an `AsyncSequence` cannot.
    var canBeSentAgain: Bool {
        if case .content(.stream) = source { return false }
        return true
    }

    /// The body the engine sends. Files are measured here, so that a missing one fails before
    /// anything is sent.
    func requestBody(compressed: Bool) throws(CourierError) -> RequestBody {
        switch source {
        case .content(let content):
            return RequestBody(content, compressed: compressed)
        case .file(let url):
            let length = try MultipartFormData.fileLength(url)
            return RequestBody(.file(path: url.path, length: length), compressed: compressed)
        case .refused(let error):
            throw error
        }
    }
}

extension RequestCall {
    /// Makes `body` the call's body, with its content type, when there is one: every kind of
    /// call that takes an `UploadBody` (uploads, downloads, streams, requests sent as built,
    /// relayed requests) sets it here.
    mutating func setBody(_ body: UploadBody?, compressed: Bool = false) throws(CourierError) {
        guard let body else { return }
        self.body = try body.requestBody(compressed: compressed)
        contentType = body.effectiveContentType
    }
}

extension HTTPSessionManager {
    /// Starts an upload: sends `body` with `method`, and turns the response into a value with
    /// `serializer`. The task's `uploadProgress` reports the bytes sent (with a total when the
    /// length is known in advance).
    ///
    /// In a background session only files can be uploaded (`UploadBody.file`); the upload is
    /// journaled and, if the process dies, sent again by a later process's
    /// `restoredTasks()`.
    ///
    /// - Parameters:
    ///   - method: The HTTP method.
    ///   - path: A path relative to ``baseURL``, or an absolute http(s) URL.
    ///   - body: What to send: data, a file, a stream or a multipart form.
    ///   - headers: Headers for this request only; they replace session headers of the same name.
    ///   - compressed: Compress the body with gzip on the way out (`Content-Encoding: gzip`,
    ///     chunked). Only for servers that accept compressed requests.
    ///   - options: Per-request options (timeouts, redirects, retries...).
    ///   - serializer: Validates the response and produces the task's value.
    public nonisolated func uploadTask<Serializer: ResponseSerializer>(
        _ method: HTTPRequest.Method, _ path: String, body: UploadBody, headers: [String: String] = [:],
        compressed: Bool = false, options: RequestOptions = RequestOptions(), serializer: Serializer
    ) -> DataTask<Serializer.Value> {
        makeUploadTask(
            method, path, body: body, headers: headers, compressed: compressed, options: options,
            serializer: serializer)
    }

    nonisolated func makeUploadTask<Serializer: ResponseSerializer>(
        _ method: HTTPRequest.Method, _ path: String, body: UploadBody, headers: [String: String],
        compressed: Bool, options: RequestOptions = RequestOptions(), serializer: Serializer, identifier: UUID = UUID()
    ) -> DataTask<Serializer.Value> {
        let background = self.background
        return DataTask(
            identifier: identifier, control: TaskControl(), ownedBySession: background != nil,
            tracking: tracking(.upload, method, path)
        ) { control in
            do {
                var call = Call(method: method, path: path, headers: headers, options: options)
                try call.setBody(body, compressed: compressed)
                call.usesLargeBuffers = true
                if let background {
                    guard case .file(let source) = body.source else {
                        throw CourierError.unsupportedInBackgroundSession(
                            .init(message: "A background session uploads files only (UploadBody.file)"))
                    }
                    var record = BackgroundRecord(
                        identifier: identifier, kind: .upload, method: method.rawValue,
                        url: try self.urlString(of: call),
                        headers: headers)
                    record.sourceFile = source.standardizedFileURL.path
                    record.compressed = compressed
                    try await background.begin(record) { control.cancel() }
                }
                // The serializer runs after the background journal has the answer: a rejected
                // response still ends an upload that reached the server (it is not retried).
                // Otherwise the serializer runs in the pipeline, so that what it refuses (a 503)
                // may be retried.
                var value: Serializer.Value?
                let raw = try await self.performRaw(
                    call, reporters: control.reporters, register: control.attach,
                    serialize: { raw in if background == nil { value = try serializer.serialize(raw) } })
                await background?.taskEnded(identifier, control: control, .uploaded(raw))
                return DataResponse(raw: raw, value: try value ?? serializer.serialize(raw))
            } catch {
                await background?.taskEnded(identifier, control: control, .failed(error))
                throw error
            }
        }
    }

    /// Starts an upload whose response the manager's ``responseSerializer`` reads.
    public nonisolated func uploadTask(
        _ method: HTTPRequest.Method, _ path: String, body: UploadBody, headers: [String: String] = [:],
        compressed: Bool = false, options: RequestOptions = RequestOptions()
    ) -> DataTask<JSON> {
        uploadTask(
            method, path, body: body, headers: headers, compressed: compressed, options: options,
            serializer: responseSerializer)
    }

    /// Starts an upload of a file, read while the request is sent.
    public nonisolated func uploadTask(
        _ method: HTTPRequest.Method, _ path: String, fromFile file: URL, headers: [String: String] = [:],
        options: RequestOptions = RequestOptions()
    ) -> DataTask<JSON> {
        uploadTask(method, path, body: .file(file), headers: headers, options: options)
    }

    /// Starts an upload of a file, read while the request is sent, with a response serializer.
    public nonisolated func uploadTask<Serializer: ResponseSerializer>(
        _ method: HTTPRequest.Method, _ path: String, fromFile file: URL, headers: [String: String] = [:],
        options: RequestOptions = RequestOptions(), serializer: Serializer
    ) -> DataTask<Serializer.Value> {
        uploadTask(method, path, body: .file(file), headers: headers, options: options, serializer: serializer)
    }

    // MARK: - Multipart forms

    /// `POST` of a `multipart/form-data` body: `parameters` become text fields first (named as
    /// the query-string encoding names them), then the parts `constructingBody` appends.
    /// Files are streamed from disk while the request is sent.
    @discardableResult
    public nonisolated func POST<Value: Decodable & Sendable>(
        _ path: String, parameters: JSON? = nil, headers: [String: String] = [:],
        options: RequestOptions = RequestOptions(), as type: Value.Type = JSON.self,
        constructingBody: (inout MultipartFormData) throws -> Void
    ) async throws -> Value {
        try await POST(
            path, parameters: parameters, headers: headers, options: options, serializer: serializer(for: type),
            constructingBody: constructingBody)
    }

    /// `POST` of a `multipart/form-data` body, with a response serializer of your choice.
    @discardableResult
    public nonisolated func POST<Serializer: ResponseSerializer>(
        _ path: String, parameters: JSON? = nil, headers: [String: String] = [:],
        options: RequestOptions = RequestOptions(), serializer: Serializer,
        constructingBody: (inout MultipartFormData) throws -> Void
    ) async throws -> Serializer.Value {
        var form = MultipartFormData()
        if let parameters { try form.append(parameters: parameters) }
        try constructingBody(&form)
        var call = Call(
            method: .post, path: path, headers: headers, body: RequestBody(.segments(try form.checkedSegments())),
            contentType: form.contentType, options: options)
        call.usesLargeBuffers = form.contentLength > 1 << 20
        return try await perform(call, serializer: serializer).value
    }
}

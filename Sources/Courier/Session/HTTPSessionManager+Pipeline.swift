@_spi(CourierInternals) import CourierCore
import CourierJSON
import CourierPipeline
import CourierSerialization
import CourierTransport
import Foundation
import HTTPTypes

extension HTTPSessionManager {
    /// Everything a call says about its request.
    typealias Call = RequestCall

    /// The one place a call becomes a prepared request, for every kind of request (data,
    /// download, upload, stream, WebSocket, a request sent as built, a relayed one): the
    /// configuration and TLS checked, the session's header fields under the call's, the path
    /// resolved against the base URL (its user info made the call's credential), and the body
    /// set or the parameters serialized. Synchronous and nonisolated, before anything is sent.
    nonisolated func prepare(_ call: Call) throws(CourierError) -> PreparedRequest {
        if let configurationError { throw configurationError }
        if let tls = call.options.tls { try tls.validate() }
        let (serializer, session) = try settings.withLock { settings throws(CourierError) in
            (settings.requestSerializer, try settings.sessionFields(transport: transport))
        }
        var fields = session.fields
        if !call.headers.isEmpty { try RequestBuilding.apply(call.headers, to: &fields) }
        if let given = call.fields { RequestBuilding.apply(given, to: &fields) }
        var head: HTTPRequest
        if let base, let path = base.resolvePlain(call.path) {
            head = HTTPRequest(
                method: call.method, scheme: base.scheme, authority: base.authority, path: path, headerFields: fields)
        } else {
            let url = try RequestBuilding.resolve(call.path, against: baseURL)
            head = HTTPRequest(method: call.method, url: url, headerFields: fields)
            // `https://user:password@host/` (in the path or the base URL): the request head has
            // no place for the user info, so it becomes the call's credential, scoped to that
            // origin, unless the call has its own.
            if call.options.credential == nil, let credential = RequestBuilding.credential(in: url) {
                var call = call
                call.options.credential = credential
                return try prepare(call)
            }
        }
        if let body = call.body {
            if let contentType = call.contentType, head.headerFields[.contentType] == nil {
                head.headerFields[.contentType] = contentType
            }
            if body.compressed { head.headerFields[.contentEncoding] = "gzip" }
            return PreparedRequest(
                call: call, head: head, body: body, sessionFields: session.fields, sharedHeaders: session.shared)
        }
        let serialized = try serializer.serialize(head, parameters: call.parameters)
        return PreparedRequest(
            call: call, head: serialized.request, body: serialized.body.map { RequestBody(.data($0)) },
            sessionFields: session.fields, sharedHeaders: session.shared)
    }

    /// Prepares one call and runs it through the pipeline (interceptors, `adapt(_:)`, the
    /// cache, the transport, `process(_:)`): the response before serialization.
    /// `serialize` sees the response before it is returned; what it throws fails the attempt
    /// (and may be retried).
    nonisolated func performRaw(
        _ call: Call, reporters: TransferReporters? = nil, sink: (any ResponseSink)? = nil,
        register: (@Sendable (any TransportTransfer) -> Void)? = nil, serialize: (RawResponse) throws -> Void = { _ in }
    ) async throws -> RawResponse {
        let prepared = try prepare(call, sink: sink)
        return try await pipeline.perform(
            prepared, hooks: self, reporters: reporters, sink: sink, register: register, serialize: serialize)
    }

    /// Prepares, sends, processes and serializes one call.
    nonisolated func perform<Serializer: ResponseSerializer>(
        _ call: Call, serializer: Serializer, reporters: TransferReporters? = nil,
        register: (@Sendable (any TransportTransfer) -> Void)? = nil
    ) async throws -> DataResponse<Serializer.Value> {
        try await perform(prepare(call, sink: nil), serializer: serializer, reporters: reporters, register: register)
    }

    /// A data call prepared from its parts. Synchronous and not inlined, so that the call's
    /// parts stay out of the frames of the async functions that wait for the response.
    @inline(never)
    nonisolated func prepare(
        _ method: HTTPRequest.Method, _ path: String, parameters: JSON?, headers: [String: String],
        options: RequestOptions
    ) throws -> PreparedRequest {
        try prepare(
            Call(method: method, path: path, parameters: parameters, headers: headers, options: options), sink: nil)
    }

    /// Sends, processes and serializes one prepared call.
    nonisolated func perform<Serializer: ResponseSerializer>(
        _ prepared: PreparedRequest, serializer: Serializer, reporters: TransferReporters? = nil,
        register: (@Sendable (any TransportTransfer) -> Void)? = nil
    ) async throws -> DataResponse<Serializer.Value> {
        var value: Serializer.Value?
        let raw = try await pipeline.perform(
            prepared, hooks: self, reporters: reporters, register: register,
            serialize: { value = try serializer.serialize($0) })
        return DataResponse(raw: raw, value: value!)
    }

    /// The call prepared for the pipeline: ``prepare(_:)``, then the checks of a background
    /// session (which runs downloads, and uploads from files, only).
    ///
    /// Not inlined: request building is synchronous, and inlined into the async callers its
    /// temporaries would take room in their frames, which live as long as the request.
    @inline(never)
    private nonisolated func prepare(_ call: Call, sink: (any ResponseSink)?) throws -> PreparedRequest {
        let prepared = try prepare(call)
        if let background {
            try background.checkIdentifier()
            guard sink is DownloadSink || prepared.body?.isFile == true else {
                throw CourierError.unsupportedInBackgroundSession(
                    .init(message: "A background session runs downloads and uploads from files only, not data tasks"))
            }
        }
        return prepared
    }
}

/// The manager's overridable methods, as the pipeline runs them: `adapt(_:)` last among the
/// adapters of each attempt, `process(_:)` on each response before serialization.
extension HTTPSessionManager: SessionHooks {}

import CourierCore
import CourierPipeline
import CourierSerialization
import CourierTransport
import Foundation
import HTTPTypes

extension HTTPSessionManager {
    /// Sends a request you built yourself, through the same pipeline as every other call:
    /// the session's headers (a field of `request` replaces the session's fields of that name),
    /// interceptors, `adapt(_:)`, retry, the cache, cookies, credentials and monitors.
    ///
    /// A request with a scheme and an authority goes to that URL; one without (an
    /// `HTTPRequest` made with only a path) is resolved against ``baseURL`` as any path is.
    /// `body` is sent as it is (no request serializer); its content type is set unless
    /// `request` has one.
    ///
    /// ```swift
    /// var request = HTTPRequest(method: .put, scheme: "https", authority: "api.example.com", path: "/v1/users/7")
    /// request.headerFields[.contentType] = "application/json"
    /// let response = try await api.send(request, body: .data(Data(#"{"name":"Ada"}"#.utf8)))
    /// ```
    @discardableResult
    public nonisolated func send<Serializer: ResponseSerializer>(
        _ request: HTTPRequest, body: UploadBody? = nil, options: RequestOptions = RequestOptions(),
        serializer: Serializer
    ) async throws -> DataResponse<Serializer.Value> {
        let call = try call(for: request, body: body, options: options)
        return try await tracked(body == nil ? .data : .upload, call.method, call.path) { control in
            try await perform(call, serializer: serializer, register: control.attach)
        }
    }

    /// Sends a request you built yourself and returns the body as it came, after checking that
    /// the status is in 200..<300 (see ``send(_:body:options:serializer:)``).
    @discardableResult
    public nonisolated func send(
        _ request: HTTPRequest, body: UploadBody? = nil, options: RequestOptions = RequestOptions()
    ) async throws -> DataResponse<Data> {
        try await send(request, body: body, options: options, serializer: DataResponseSerializer())
    }

    /// Starts a task for a request you built yourself (see ``send(_:body:options:serializer:)``):
    /// progress, suspension and cancellation as any data task.
    public nonisolated func sendTask<Serializer: ResponseSerializer>(
        _ request: HTTPRequest, body: UploadBody? = nil, options: RequestOptions = RequestOptions(),
        serializer: Serializer
    ) -> DataTask<Serializer.Value> {
        let tracking = tracking(body == nil ? .data : .upload, request.method, request.path ?? "")
        return DataTask(control: TaskControl(), tracking: tracking) { control in
            let call = try self.call(for: request, body: body, options: options)
            return try await self.perform(
                call, serializer: serializer, reporters: control.reporters, register: control.attach)
        }
    }

    /// Sends a typed request and returns its decoded response (with the manager's
    /// ``responseSerializer`` settings for JSON, as every call that decodes).
    @discardableResult
    public nonisolated func send<Response: Decodable & Sendable>(
        _ request: Request<Response>
    ) async throws
        -> Response
    {
        try await response(for: request).value
    }

    /// Sends a typed request and returns the whole response: status, fields, body, metrics and
    /// the decoded value.
    public nonisolated func response<Response: Decodable & Sendable>(
        for request: Request<Response>
    ) async throws
        -> DataResponse<Response>
    {
        var body: RequestBody?
        var contentType: String?
        if let encodable = request.body {
            // As `Encodable` parameters are: through the manager's `encoder`, keys sorted.
            body = RequestBody(.data(try json(from: encodable).serialized()))
            contentType = "application/json"  // unless `headers` set one: the call's rule
        }
        let call = Call(
            method: request.method, path: request.pathWithQuery, headers: request.headers, body: body,
            contentType: contentType, options: request.options)
        return try await tracked(.data, call.method, call.path) { control in
            try await perform(call, serializer: serializer(for: Response.self), register: control.attach)
        }
    }

    /// The call for a request built elsewhere: its URL (or path), its fields, `body` as is.
    private nonisolated func call(
        for request: HTTPRequest, body: UploadBody?, options: RequestOptions
    )
        throws(CourierError) -> Call
    {
        let target: String
        if let scheme = request.scheme, let authority = request.authority {
            target = "\(scheme)://\(authority)\(request.path ?? "/")"
        } else if let path = request.path {
            target = path
        } else {
            throw .invalidURL(.init(message: "The request has no path"))
        }
        var call = Call(method: request.method, path: target, options: options)
        call.fields = request.headerFields
        try call.setBody(body)
        return call
    }
}

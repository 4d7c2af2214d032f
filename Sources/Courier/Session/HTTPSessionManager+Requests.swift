import CourierCore
import CourierJSON
import CourierPipeline
import CourierSerialization
import CourierTransport
import Foundation
import HTTPTypes

extension HTTPSessionManager {
    /// Sends a request and returns the whole response, serialized by `serializer`. The generic
    /// core under every verb.
    ///
    /// - Parameters:
    ///   - method: The HTTP method.
    ///   - path: A path relative to ``baseURL``, or an absolute http(s) URL.
    ///   - parameters: Encoded by ``requestSerializer`` into the query or the body.
    ///   - headers: Headers for this request only; they replace session headers of the same name.
    ///   - options: Per-request cookie, cache and credential settings.
    ///   - serializer: Validates the response and produces the value.
    @discardableResult
    public nonisolated func request<Serializer: ResponseSerializer>(
        _ method: HTTPRequest.Method, _ path: String, parameters: JSON? = nil, headers: [String: String] = [:],
        options: RequestOptions = RequestOptions(), serializer: Serializer
    ) async throws -> DataResponse<Serializer.Value> {
        try await tracked(.data, method, path) { control in
            try await perform(
                prepare(method, path, parameters: parameters, headers: headers, options: options),
                serializer: serializer, register: control.attach)
        }
    }

    /// Sends a request with a raw body (no parameter encoding) and returns the whole response.
    @discardableResult
    public nonisolated func request<Serializer: ResponseSerializer>(
        _ method: HTTPRequest.Method, _ path: String, body: Data, headers: [String: String] = [:],
        options: RequestOptions = RequestOptions(), serializer: Serializer
    ) async throws -> DataResponse<Serializer.Value> {
        try await tracked(.data, method, path) { control in
            try await perform(
                Call(method: method, path: path, headers: headers, body: RequestBody(.data(body)), options: options),
                serializer: serializer, register: control.attach)
        }
    }

    /// Starts a data task: the response collected in memory, serialized by the manager's
    /// ``responseSerializer``.
    public nonisolated func dataTask(
        _ method: HTTPRequest.Method, _ path: String, parameters: JSON? = nil, headers: [String: String] = [:],
        options: RequestOptions = RequestOptions()
    ) -> DataTask<JSON> {
        dataTask(
            method, path, parameters: parameters, headers: headers, options: options, serializer: responseSerializer)
    }

    /// Starts a data task whose response `serializer` turns into a value.
    public nonisolated func dataTask<Serializer: ResponseSerializer>(
        _ method: HTTPRequest.Method, _ path: String, parameters: JSON? = nil, headers: [String: String] = [:],
        options: RequestOptions = RequestOptions(), serializer: Serializer
    ) -> DataTask<Serializer.Value> {
        let call = Call(method: method, path: path, parameters: parameters, headers: headers, options: options)
        return DataTask(control: TaskControl(), tracking: tracking(.data, method, path)) { control in
            return try await self.perform(
                call, serializer: serializer, reporters: control.reporters, register: control.attach)
        }
    }

    /// Sends a request and returns the serialized value. The verbs call this.
    nonisolated func value<Value: Decodable & Sendable>(
        _ method: HTTPRequest.Method, _ path: String, parameters: JSON?, headers: [String: String],
        options: RequestOptions, as type: Value.Type
    ) async throws -> Value {
        try await request(
            method, path, parameters: parameters, headers: headers, options: options, serializer: serializer(for: type)
        ).value
    }
}

// MARK: - Verbs
//
// Each verb has three forms: parameters as a `JSON` value (so literals may mix types), as any
// `Encodable & Sendable` value, and with an explicit response serializer. The result type is
// `JSON` unless `as:` names a `Decodable` type (or the context asks for one).

extension HTTPSessionManager {
    /// `GET` with `JSON` parameters (in the query by default); the result decoded as `Value` (`JSON` by default).
    @discardableResult
    public nonisolated func GET<Value: Decodable & Sendable>(
        _ path: String, parameters: JSON? = nil, headers: [String: String] = [:],
        options: RequestOptions = RequestOptions(),
        as type: Value.Type = JSON.self
    ) async throws -> Value {
        try await value(.get, path, parameters: parameters, headers: headers, options: options, as: type)
    }

    /// `GET` with `Encodable` parameters.
    @discardableResult
    public nonisolated func GET<Parameters: Encodable & Sendable, Value: Decodable & Sendable>(
        _ path: String, parameters: Parameters, headers: [String: String] = [:],
        options: RequestOptions = RequestOptions(),
        as type: Value.Type = JSON.self
    ) async throws -> Value {
        try await value(.get, path, parameters: json(from: parameters), headers: headers, options: options, as: type)
    }

    /// `GET` with a response serializer of your choice.
    @discardableResult
    public nonisolated func GET<Serializer: ResponseSerializer>(
        _ path: String, parameters: JSON? = nil, headers: [String: String] = [:],
        options: RequestOptions = RequestOptions(),
        serializer: Serializer
    ) async throws -> Serializer.Value {
        try await request(
            .get, path, parameters: parameters, headers: headers, options: options, serializer: serializer
        ).value
    }

    /// `HEAD` with `JSON` parameters (in the query by default). The body is empty, so the
    /// result is `JSON.null`; use ``request(_:_:parameters:headers:options:serializer:)`` for the head.
    @discardableResult
    public nonisolated func HEAD<Value: Decodable & Sendable>(
        _ path: String, parameters: JSON? = nil, headers: [String: String] = [:],
        options: RequestOptions = RequestOptions(),
        as type: Value.Type = JSON.self
    ) async throws -> Value {
        try await value(.head, path, parameters: parameters, headers: headers, options: options, as: type)
    }

    /// `HEAD` with `Encodable` parameters.
    @discardableResult
    public nonisolated func HEAD<Parameters: Encodable & Sendable, Value: Decodable & Sendable>(
        _ path: String, parameters: Parameters, headers: [String: String] = [:],
        options: RequestOptions = RequestOptions(),
        as type: Value.Type = JSON.self
    ) async throws -> Value {
        try await value(.head, path, parameters: json(from: parameters), headers: headers, options: options, as: type)
    }

    /// `HEAD` with a response serializer of your choice.
    @discardableResult
    public nonisolated func HEAD<Serializer: ResponseSerializer>(
        _ path: String, parameters: JSON? = nil, headers: [String: String] = [:],
        options: RequestOptions = RequestOptions(),
        serializer: Serializer
    ) async throws -> Serializer.Value {
        try await request(
            .head, path, parameters: parameters, headers: headers, options: options, serializer: serializer
        ).value
    }

    /// `POST` with `JSON` parameters (a form body by default).
    @discardableResult
    public nonisolated func POST<Value: Decodable & Sendable>(
        _ path: String, parameters: JSON? = nil, headers: [String: String] = [:],
        options: RequestOptions = RequestOptions(),
        as type: Value.Type = JSON.self
    ) async throws -> Value {
        try await value(.post, path, parameters: parameters, headers: headers, options: options, as: type)
    }

    /// `POST` with `Encodable` parameters.
    @discardableResult
    public nonisolated func POST<Parameters: Encodable & Sendable, Value: Decodable & Sendable>(
        _ path: String, parameters: Parameters, headers: [String: String] = [:],
        options: RequestOptions = RequestOptions(),
        as type: Value.Type = JSON.self
    ) async throws -> Value {
        try await value(.post, path, parameters: json(from: parameters), headers: headers, options: options, as: type)
    }

    /// `POST` with a response serializer of your choice.
    @discardableResult
    public nonisolated func POST<Serializer: ResponseSerializer>(
        _ path: String, parameters: JSON? = nil, headers: [String: String] = [:],
        options: RequestOptions = RequestOptions(),
        serializer: Serializer
    ) async throws -> Serializer.Value {
        try await request(
            .post, path, parameters: parameters, headers: headers, options: options, serializer: serializer
        ).value
    }

    /// `PUT` with `JSON` parameters (a form body by default).
    @discardableResult
    public nonisolated func PUT<Value: Decodable & Sendable>(
        _ path: String, parameters: JSON? = nil, headers: [String: String] = [:],
        options: RequestOptions = RequestOptions(),
        as type: Value.Type = JSON.self
    ) async throws -> Value {
        try await value(.put, path, parameters: parameters, headers: headers, options: options, as: type)
    }

    /// `PUT` with `Encodable` parameters.
    @discardableResult
    public nonisolated func PUT<Parameters: Encodable & Sendable, Value: Decodable & Sendable>(
        _ path: String, parameters: Parameters, headers: [String: String] = [:],
        options: RequestOptions = RequestOptions(),
        as type: Value.Type = JSON.self
    ) async throws -> Value {
        try await value(.put, path, parameters: json(from: parameters), headers: headers, options: options, as: type)
    }

    /// `PUT` with a response serializer of your choice.
    @discardableResult
    public nonisolated func PUT<Serializer: ResponseSerializer>(
        _ path: String, parameters: JSON? = nil, headers: [String: String] = [:],
        options: RequestOptions = RequestOptions(),
        serializer: Serializer
    ) async throws -> Serializer.Value {
        try await request(
            .put, path, parameters: parameters, headers: headers, options: options, serializer: serializer
        ).value
    }

    /// `PATCH` with `JSON` parameters (a form body by default).
    @discardableResult
    public nonisolated func PATCH<Value: Decodable & Sendable>(
        _ path: String, parameters: JSON? = nil, headers: [String: String] = [:],
        options: RequestOptions = RequestOptions(),
        as type: Value.Type = JSON.self
    ) async throws -> Value {
        try await value(.patch, path, parameters: parameters, headers: headers, options: options, as: type)
    }

    /// `PATCH` with `Encodable` parameters.
    @discardableResult
    public nonisolated func PATCH<Parameters: Encodable & Sendable, Value: Decodable & Sendable>(
        _ path: String, parameters: Parameters, headers: [String: String] = [:],
        options: RequestOptions = RequestOptions(),
        as type: Value.Type = JSON.self
    ) async throws -> Value {
        try await value(.patch, path, parameters: json(from: parameters), headers: headers, options: options, as: type)
    }

    /// `PATCH` with a response serializer of your choice.
    @discardableResult
    public nonisolated func PATCH<Serializer: ResponseSerializer>(
        _ path: String, parameters: JSON? = nil, headers: [String: String] = [:],
        options: RequestOptions = RequestOptions(),
        serializer: Serializer
    ) async throws -> Serializer.Value {
        try await request(
            .patch, path, parameters: parameters, headers: headers, options: options, serializer: serializer
        ).value
    }

    /// `DELETE` with `JSON` parameters (in the query by default).
    @discardableResult
    public nonisolated func DELETE<Value: Decodable & Sendable>(
        _ path: String, parameters: JSON? = nil, headers: [String: String] = [:],
        options: RequestOptions = RequestOptions(),
        as type: Value.Type = JSON.self
    ) async throws -> Value {
        try await value(.delete, path, parameters: parameters, headers: headers, options: options, as: type)
    }

    /// `DELETE` with `Encodable` parameters.
    @discardableResult
    public nonisolated func DELETE<Parameters: Encodable & Sendable, Value: Decodable & Sendable>(
        _ path: String, parameters: Parameters, headers: [String: String] = [:],
        options: RequestOptions = RequestOptions(),
        as type: Value.Type = JSON.self
    ) async throws -> Value {
        try await value(.delete, path, parameters: json(from: parameters), headers: headers, options: options, as: type)
    }

    /// `DELETE` with a response serializer of your choice.
    @discardableResult
    public nonisolated func DELETE<Serializer: ResponseSerializer>(
        _ path: String, parameters: JSON? = nil, headers: [String: String] = [:],
        options: RequestOptions = RequestOptions(),
        serializer: Serializer
    ) async throws -> Serializer.Value {
        try await request(
            .delete, path, parameters: parameters, headers: headers, options: options, serializer: serializer
        ).value
    }
}

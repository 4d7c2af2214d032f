import CourierCore
import CourierJSON
import Foundation
import HTTPTypes

/// A request head plus the body a serializer produced for it.
public struct SerializedRequest: Sendable {
    /// The request head, with the query or `Content-Type` the serializer set.
    public var request: HTTPRequest
    /// The body, or nil for none.
    public var body: Data?

    /// Creates a serialized request.
    public init(request: HTTPRequest, body: Data? = nil) {
        self.request = request
        self.body = body
    }
}

/// Encodes parameters into a request: into its URL query, or into a body with a
/// `Content-Type`. Serializers run off the session actor, once per request.
public protocol RequestSerializer: Sendable {
    /// Returns `request` with `parameters` encoded into it. `parameters` is nil when the call
    /// had none; a serializer then leaves the request as it is.
    func serialize(_ request: HTTPRequest, parameters: JSON?) throws(CourierError) -> SerializedRequest
}

extension RequestSerializer {
    /// Appends `query` to the request's path, after any query already there.
    func appendingQuery(_ query: String, to request: HTTPRequest) -> HTTPRequest {
        guard !query.isEmpty else { return request }
        var request = request
        let path = request.path ?? "/"
        request.path = path + (path.contains("?") ? "&" : "?") + query
        return request
    }

    /// Sets `Content-Type` unless the caller already did.
    func settingContentType(_ value: String, on request: HTTPRequest) -> HTTPRequest {
        guard request.headerFields[.contentType] == nil else { return request }
        var request = request
        request.headerFields[.contentType] = value
        return request
    }
}

/// AFNetworking's default: parameters go into the query string for `GET`, `HEAD` and `DELETE`,
/// and into an `application/x-www-form-urlencoded` body for every other method.
public struct HTTPRequestSerializer: RequestSerializer {
    /// The methods whose parameters go into the URL query.
    public var queryMethods: Set<HTTPRequest.Method>
    /// How parameters are written, in the query and in the form body.
    public var encoding: QueryEncodingOptions

    /// Creates the serializer; `queryMethods` defaults to `GET`, `HEAD` and `DELETE`.
    public init(
        queryMethods: Set<HTTPRequest.Method> = [.get, .head, .delete], encoding: QueryEncodingOptions = .init()
    ) {
        self.queryMethods = queryMethods
        self.encoding = encoding
    }

    /// Encodes into the query or a form body, depending on the method.
    public func serialize(_ request: HTTPRequest, parameters: JSON?) throws(CourierError) -> SerializedRequest {
        guard parameters != nil else { return SerializedRequest(request: request) }
        if queryMethods.contains(request.method) {
            return try QueryRequestSerializer(encoding: encoding).serialize(request, parameters: parameters)
        }
        return try FormRequestSerializer(encoding: encoding).serialize(request, parameters: parameters)
    }
}

/// Parameters always go into the URL query string, whatever the method.
public struct QueryRequestSerializer: RequestSerializer {
    /// How parameters are written.
    public var encoding: QueryEncodingOptions

    /// Creates the serializer.
    public init(encoding: QueryEncodingOptions = .init()) {
        self.encoding = encoding
    }

    /// Appends the encoded parameters to the request's query.
    public func serialize(_ request: HTTPRequest, parameters: JSON?) throws(CourierError) -> SerializedRequest {
        guard let parameters else { return SerializedRequest(request: request) }
        return SerializedRequest(
            request: appendingQuery(try QueryStringEncoding.encode(parameters, options: encoding), to: request))
    }
}

/// Parameters always go into an `application/x-www-form-urlencoded` body, whatever the method.
public struct FormRequestSerializer: RequestSerializer {
    /// How parameters are written.
    public var encoding: QueryEncodingOptions

    /// Creates the serializer.
    public init(encoding: QueryEncodingOptions = .init()) {
        self.encoding = encoding
    }

    /// Encodes the parameters as a form body.
    public func serialize(_ request: HTTPRequest, parameters: JSON?) throws(CourierError) -> SerializedRequest {
        guard let parameters else { return SerializedRequest(request: request) }
        let body = Data(try QueryStringEncoding.encode(parameters, options: encoding).utf8)
        return SerializedRequest(
            request: settingContentType("application/x-www-form-urlencoded", on: request), body: body)
    }
}

/// Parameters go into an `application/json` body, except for `GET`, `HEAD` and `DELETE`, whose
/// parameters go into the query string (AFJSONRequestSerializer's rule: those methods have no
/// body semantics).
public struct JSONRequestSerializer: RequestSerializer {
    /// The methods whose parameters go into the URL query.
    public var queryMethods: Set<HTTPRequest.Method>
    /// Whether to indent the JSON body.
    public var prettyPrinted: Bool

    /// Creates the serializer.
    public init(queryMethods: Set<HTTPRequest.Method> = [.get, .head, .delete], prettyPrinted: Bool = false) {
        self.queryMethods = queryMethods
        self.prettyPrinted = prettyPrinted
    }

    /// Encodes the parameters as a JSON body (keys sorted), or into the query.
    public func serialize(_ request: HTTPRequest, parameters: JSON?) throws(CourierError) -> SerializedRequest {
        guard parameters != nil else { return SerializedRequest(request: request) }
        if queryMethods.contains(request.method) {
            return try QueryRequestSerializer().serialize(request, parameters: parameters)
        }
        guard let parameters else { return SerializedRequest(request: request) }
        try parameters.requireFiniteNumbers()
        return SerializedRequest(
            request: settingContentType("application/json", on: request),
            body: parameters.serialized(prettyPrinted: prettyPrinted))
    }
}

import CourierPipeline
import CourierSerialization
import CourierTransport
import Foundation
import HTTPTypes

/// A request described as a value, with the type of its response: what an API client's
/// methods return for the caller (or a subclass of the manager) to send, as Get's requests.
///
/// ```swift
/// extension Request {
///     static func user(_ id: Int) -> Request<User> { Request<User>(.get, "users/\(id)") }
///     static func rename(_ id: Int, to name: String) -> Request<User> {
///         Request<User>(.patch, "users/\(id)", body: ["name": name])
///     }
/// }
/// let user = try await api.send(.user(7))
/// ```
public struct Request<Response: Decodable & Sendable>: Sendable {
    /// The method.
    public var method: HTTPRequest.Method
    /// A path relative to the manager's base URL, or an absolute http(s) URL.
    public var path: String
    /// Query items, in order, added to the path (percent-encoded as the query serializer
    /// encodes them).
    public var query: [(name: String, value: String?)]
    /// Header fields for this request; they replace the session's fields of the same name.
    public var headers: [String: String]
    /// A body, encoded as JSON with the manager's `encoder` (`Content-Type: application/json`
    /// unless `headers` set one).
    public var body: (any Encodable & Sendable)?
    /// Per-request options.
    public var options: RequestOptions

    /// A request for `path`, with optional query items, headers, a JSON body and options.
    public init(
        _ method: HTTPRequest.Method = .get, _ path: String, query: [(name: String, value: String?)] = [],
        headers: [String: String] = [:], body: (any Encodable & Sendable)? = nil,
        options: RequestOptions = RequestOptions()
    ) {
        self.method = method
        self.path = path
        self.query = query
        self.headers = headers
        self.body = body
        self.options = options
    }

    /// The same request, expecting another response type (`Empty` to ignore the body).
    public func expecting<Other: Decodable & Sendable>(_ type: Other.Type) -> Request<Other> {
        Request<Other>(method, path, query: query, headers: headers, body: body, options: options)
    }

    /// `path` with `query` appended.
    var pathWithQuery: String {
        guard !query.isEmpty else { return path }
        let items = query.map { item in
            let name = QueryStringEncoding.escape(item.name)
            return item.value.map { name + "=" + QueryStringEncoding.escape($0) } ?? name
        }
        return path + (path.contains("?") ? "&" : "?") + items.joined(separator: "&")
    }
}

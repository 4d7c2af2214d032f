import CourierCore
import CourierJSON
import Foundation

/// What went wrong, as an API says it in an `application/problem+json` body (RFC 9457).
///
/// A failed call's error carries it when the response was one (`CourierError.problem`):
///
/// ```swift
/// do {
///     let order: Order = try await api.POST("orders", parameters: draft)
/// } catch let error as CourierError {
///     if let problem = error.problem, problem.type == "https://example.com/probs/out-of-credit" {
///         print(problem.title ?? "", problem.extensions["balance"]?.intValue ?? 0)
///     }
/// }
/// ```
///
/// A member whose value has the wrong type is left out, as the RFC asks (a `status` that is a
/// string is no status); every member the RFC does not define is in ``extensions``.
public struct ProblemDetails: Sendable, Hashable {
    /// A URI reference naming the problem type; `about:blank` when the body names none (the
    /// problem is then what the status code says).
    public var type: String
    /// A short summary of the problem type.
    public var title: String?
    /// The HTTP status code the server gave the problem, as it wrote it in the body.
    public var status: Int?
    /// An explanation of this occurrence.
    public var detail: String?
    /// A URI reference naming this occurrence.
    public var instance: String?
    /// The members the RFC does not define (`balance`, `errors`, ...), as JSON.
    public var extensions: [String: JSON]

    /// A problem from its members.
    public init(
        type: String = "about:blank", title: String? = nil, status: Int? = nil, detail: String? = nil,
        instance: String? = nil, extensions: [String: JSON] = [:]
    ) {
        self.type = type
        self.title = title
        self.status = status
        self.detail = detail
        self.instance = instance
        self.extensions = extensions
    }

    /// The problem in a JSON object; nil when `body` is not one.
    public init?(json body: Data) {
        guard let object = (try? JSON(parsing: body))?.objectValue else { return nil }
        var extensions = object
        for member in ["type", "title", "status", "detail", "instance"] { extensions[member] = nil }
        self.init(
            type: object["type"]?.stringValue ?? "about:blank", title: object["title"]?.stringValue,
            status: object["status"].flatMap { if case .int(let code) = $0 { code } else { nil } },
            detail: object["detail"]?.stringValue, instance: object["instance"]?.stringValue,
            extensions: extensions)
    }

    /// The media type of a problem in JSON.
    public static let mediaType = "application/problem+json"
}

extension CourierError {
    /// The problem the response described, when it came as `application/problem+json`
    /// (RFC 9457) with a JSON object for its body: a failed status, or a body the serializer
    /// could not take. nil for any other error.
    public var problem: ProblemDetails? {
        guard let response = context.response, let body = context.body,
            ResponseValidation.mediaType(of: response) == ProblemDetails.mediaType
        else { return nil }
        return ProblemDetails(json: body)
    }
}

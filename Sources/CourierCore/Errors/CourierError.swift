import Foundation
import HTTPTypes

/// The one error type Courier throws, apart from `CancellationError` for cancelled work.
///
/// Switch on the case to decide what to do; every case carries a ``Context`` with the request
/// URL and, where there was one, the response and the body bytes received:
///
/// ```swift
/// do {
///     let user: User = try await api.GET("users/1", as: User.self)
/// } catch CourierError.unacceptableStatusCode(let context) where context.response?.status == .notFound {
///     // no such user
/// } catch CourierError.timedOut {
///     // try again later
/// }
/// ```
///
/// Minor releases may add cases: a `switch` over a `CourierError` ends with `default` (not
/// `@unknown default`: Courier is not built with library evolution), or the cases you handle
/// are `catch` clauses before a general one, as above.
public enum CourierError: Error, Sendable {
    /// The URL could not be parsed, has no host, or is not an absolute http(s) URL.
    case invalidURL(Context)
    /// The URL, or a redirect, uses a scheme other than `http` and `https`.
    case unsupportedScheme(Context)
    /// A header name or value is not valid (for example it contains CR or LF).
    case invalidHeader(Context)
    /// The host name could not be resolved.
    case cannotResolveHost(Context)
    /// No connection could be made to the host (refused, unreachable, or the connect timeout).
    case cannotConnect(Context)
    /// The server sent nothing for longer than the request timeout, or the whole transfer took
    /// longer than the resource timeout.
    case timedOut(Context)
    /// The connection closed or failed before the whole response arrived.
    case connectionLost(Context)
    /// The TLS handshake or certificate verification failed.
    case tls(Context)
    /// The redirect limit was reached (or redirects loop).
    case tooManyRedirects(Context)
    /// The response status code is not one the response serializer accepts.
    case unacceptableStatusCode(Context)
    /// The response `Content-Type` is not one the response serializer accepts.
    case unacceptableContentType(Context)
    /// A request could not be encoded, or a response body could not be decoded.
    case serializationFailed(Context)
    /// The response body (or its decoded form) exceeded the configured limit.
    case responseTooLarge(Context)
    /// A file could not be read, written, moved or created.
    case fileSystem(Context)
    /// Another live session, in this process or another, already uses this background identifier.
    case sessionIdentifierInUse(Context)
    /// The operation is not available in a background session (for example data tasks).
    case unsupportedInBackgroundSession(Context)
    /// The session takes no new work: `finishTasksAndInvalidate()` was called.
    case sessionInvalidated(Context)
    /// The server's reply is not valid HTTP: no HTTP status line, an invalid or conflicting
    /// `Content-Length`, malformed chunked encoding, a response head over the size limits,
    /// corrupt content encoding. The message says which.
    case invalidResponse(Context)
    /// Any other transport failure reported by libcurl.
    case transport(Context)
    /// The cache policy forbade loading (`returnCacheDataDontLoad`) and nothing was stored.
    case notCached(Context)
    /// A credential could not be obtained or renewed: an `AuthenticationInterceptor`'s
    /// refresh failed (its error is the context's `underlyingError`) or was refused as one too
    /// many within its window.
    case authenticationFailed(Context)
    /// The server did not accept the WebSocket: it answered with another status than 101, or
    /// its 101 does not answer the handshake (`context.response` has the head it sent).
    case webSocketHandshakeFailed(Context)
    /// The server broke the WebSocket protocol (a masked frame, a reserved opcode or bit,
    /// invalid UTF-8 in a text message, a malformed close): Courier closed the connection
    /// with the code in `context.webSocketCloseCode` (1002, or 1007 for invalid data).
    case webSocketProtocolViolation(Context)
    /// The WebSocket is closed (or failed): nothing more can be sent on it.
    case webSocketClosed(Context)
    /// The request asks for something the libcurl Courier runs on was built without, or that
    /// does not apply to its URL (HTTP/3 only, from a libcurl without HTTP/3 or for an http
    /// URL). Nothing was sent; the message names what is missing.
    case unsupportedFeature(Context)

    /// What Courier knew when the error happened.
    public struct Context: Sendable, CustomStringConvertible {
        /// The URL of the request (after redirects, the URL that failed).
        public var url: URL?
        /// The response head, when one was received.
        public var response: HTTPResponse?
        /// The body bytes received, when any were.
        public var body: Data?
        /// A human-readable explanation.
        public var message: String
        /// The libcurl `CURLcode` when the failure came from libcurl.
        public var curlCode: Int?
        /// The error that caused this one (for example a `DecodingError`), if any.
        public var underlyingError: (any Error & Sendable)?
        /// For a download that failed part way: what `downloadTask(resumingFrom:to:)` needs to
        /// fetch only the missing bytes.
        public var resumeData: ResumeData?
        /// What went out before the failure: the transactions (redirect hops, earlier
        /// attempts, the failed one) with the figures libcurl had, when a transfer was started.
        public var metrics: TransferMetrics?
        /// For a WebSocket that failed: the close code that stands for the failure (RFC 6455
        /// section 7.4.1): the one Courier sent (1002 protocol error, 1007 invalid data, 1009
        /// message too big), or 1006 when the connection ended without a close frame.
        public var webSocketCloseCode: UInt16?

        /// Creates a context.
        public init(
            url: URL? = nil, response: HTTPResponse? = nil, body: Data? = nil, message: String,
            curlCode: Int? = nil, underlyingError: (any Error & Sendable)? = nil
        ) {
            self.url = url
            self.response = response
            self.body = body
            self.message = message
            self.curlCode = curlCode
            self.underlyingError = underlyingError
        }

        /// The message followed by the URL and status, when known.
        public var description: String {
            var text = message
            if let url { text += " (\(url.absoluteString))" }
            if let response { text += " [HTTP \(response.status.code)]" }
            return text
        }
    }

    /// The context of this error, whatever the case.
    public var context: Context {
        switch self {
        case .invalidURL(let context), .unsupportedScheme(let context), .invalidHeader(let context),
            .cannotResolveHost(let context), .cannotConnect(let context), .timedOut(let context),
            .connectionLost(let context), .tls(let context), .tooManyRedirects(let context),
            .unacceptableStatusCode(let context), .unacceptableContentType(let context),
            .serializationFailed(let context), .responseTooLarge(let context), .fileSystem(let context),
            .sessionIdentifierInUse(let context), .unsupportedInBackgroundSession(let context),
            .sessionInvalidated(let context), .invalidResponse(let context), .transport(let context),
            .notCached(let context), .authenticationFailed(let context),
            .webSocketHandshakeFailed(let context), .webSocketProtocolViolation(let context),
            .webSocketClosed(let context), .unsupportedFeature(let context):
            return context
        }
    }

    /// The request URL, when known.
    public var url: URL? { context.url }
    /// The response head, when one was received.
    public var response: HTTPResponse? { context.response }
    /// The body bytes received, when any were.
    public var body: Data? { context.body }

    /// The name of the case, as a caller would write it (`timedOut`, `invalidURL`...).
    public var kind: String {
        switch self {
        case .invalidURL: "invalidURL"
        case .unsupportedScheme: "unsupportedScheme"
        case .invalidHeader: "invalidHeader"
        case .cannotResolveHost: "cannotResolveHost"
        case .cannotConnect: "cannotConnect"
        case .timedOut: "timedOut"
        case .connectionLost: "connectionLost"
        case .tls: "tls"
        case .tooManyRedirects: "tooManyRedirects"
        case .unacceptableStatusCode: "unacceptableStatusCode"
        case .unacceptableContentType: "unacceptableContentType"
        case .serializationFailed: "serializationFailed"
        case .responseTooLarge: "responseTooLarge"
        case .fileSystem: "fileSystem"
        case .sessionIdentifierInUse: "sessionIdentifierInUse"
        case .unsupportedInBackgroundSession: "unsupportedInBackgroundSession"
        case .sessionInvalidated: "sessionInvalidated"
        case .invalidResponse: "invalidResponse"
        case .transport: "transport"
        case .notCached: "notCached"
        case .authenticationFailed: "authenticationFailed"
        case .webSocketHandshakeFailed: "webSocketHandshakeFailed"
        case .webSocketProtocolViolation: "webSocketProtocolViolation"
        case .webSocketClosed: "webSocketClosed"
        case .unsupportedFeature: "unsupportedFeature"
        }
    }

    /// Rebuilds the same case around a different context.
    package func withContext(_ transform: (inout Context) -> Void) -> CourierError {
        var context = self.context
        transform(&context)
        switch self {
        case .invalidURL: return .invalidURL(context)
        case .unsupportedScheme: return .unsupportedScheme(context)
        case .invalidHeader: return .invalidHeader(context)
        case .cannotResolveHost: return .cannotResolveHost(context)
        case .cannotConnect: return .cannotConnect(context)
        case .timedOut: return .timedOut(context)
        case .connectionLost: return .connectionLost(context)
        case .tls: return .tls(context)
        case .tooManyRedirects: return .tooManyRedirects(context)
        case .unacceptableStatusCode: return .unacceptableStatusCode(context)
        case .unacceptableContentType: return .unacceptableContentType(context)
        case .serializationFailed: return .serializationFailed(context)
        case .responseTooLarge: return .responseTooLarge(context)
        case .fileSystem: return .fileSystem(context)
        case .sessionIdentifierInUse: return .sessionIdentifierInUse(context)
        case .unsupportedInBackgroundSession: return .unsupportedInBackgroundSession(context)
        case .sessionInvalidated: return .sessionInvalidated(context)
        case .invalidResponse: return .invalidResponse(context)
        case .transport: return .transport(context)
        case .notCached: return .notCached(context)
        case .authenticationFailed: return .authenticationFailed(context)
        case .webSocketHandshakeFailed: return .webSocketHandshakeFailed(context)
        case .webSocketProtocolViolation: return .webSocketProtocolViolation(context)
        case .webSocketClosed: return .webSocketClosed(context)
        case .unsupportedFeature: return .unsupportedFeature(context)
        }
    }
}

extension CourierError: CustomStringConvertible, LocalizedError {
    /// `CourierError.<case>: <message> (<url>) [HTTP <status>]`.
    public var description: String { "CourierError.\(kind): \(context)" }

    /// The same text as ``description``, for `localizedDescription`.
    public var errorDescription: String? { description }
}

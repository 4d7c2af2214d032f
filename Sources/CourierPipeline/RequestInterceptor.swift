import CourierCore
import CourierStorage
import Foundation
import HTTPTypes

/// Changes requests before they are sent and decides whether a failed request is tried again.
///
/// Set interceptors for every request of a session (`HTTPSessionConfiguration.interceptors`)
/// or for one request (`RequestOptions.interceptors`). For each attempt, the request is
/// adapted by the session's interceptors in order, then by the request's, then by the
/// manager's `adapt(_:)` (a subclass's override), and sent. When the attempt
/// fails (the transport, `process(_:)`, validation or the response serializer threw), the
/// request's interceptors are asked first, then the session's; the first that does not answer
/// ``RetryDecision/doNotRetry`` decides.
///
/// ```swift
/// struct APIKey: RequestInterceptor {
///     let key: String
///     func adapt(_ request: HTTPRequest, context: RequestContext) async throws -> HTTPRequest {
///         var request = request
///         request.headerFields[HTTPField.Name("X-API-Key")!] = key
///         return request
///     }
/// }
/// ```
public protocol RequestInterceptor: Sendable {
    /// Returns the request to send (each attempt adapts the request as the manager built it
    /// again). Throwing fails the request with the error.
    func adapt(_ request: HTTPRequest, context: RequestContext) async throws -> HTTPRequest

    /// After attempt `context.attempt` of `request` failed with `error`: whether to try again.
    /// The default does not retry. A request whose body is a stream is never retried, nor is a
    /// cancelled request, nor a byte stream whose first chunk has reached its reader; a
    /// download that fails part way continues from the bytes on disk (`Range`, `If-Range`).
    func retry(_ request: HTTPRequest, dueTo error: any Error, context: RequestContext) async -> RetryDecision
}

extension RequestInterceptor {
    /// Returns `request` unchanged.
    public func adapt(_ request: HTTPRequest, context: RequestContext) async throws -> HTTPRequest {
        request
    }

    /// Does not retry.
    public func retry(_ request: HTTPRequest, dueTo error: any Error, context: RequestContext) async -> RetryDecision {
        .doNotRetry
    }
}

/// What an interceptor knows about the request it is asked about.
public struct RequestContext: Sendable {
    /// Numbers the requests of one session, from 1; monitors' events carry the same number.
    public var requestID: UInt64
    /// The attempt being adapted, or the one that failed: 1 for the first.
    public var attempt: Int
    /// When the request's first attempt was adapted: deadlines across attempts count from here.
    public var firstAttemptStarted: ContinuousClock.Instant
    /// When the whole call must be over (its resource timeout, from the session's configuration
    /// or the request's options); nil without one. Courier stops waiting for an interceptor at
    /// this time and fails the call with `timedOut`; an interceptor that waits for something
    /// (a token refresh) can give up at the same time.
    public var deadline: ContinuousClock.Instant?
    /// The request's body as it will be sent, for interceptors of this package that sign it
    /// (`AWSSigV4Signer`); nil without one.
    package var body: RequestBody?

    /// A context.
    public init(
        requestID: UInt64, attempt: Int, firstAttemptStarted: ContinuousClock.Instant = .now,
        deadline: ContinuousClock.Instant? = nil
    ) {
        self.requestID = requestID
        self.attempt = attempt
        self.firstAttemptStarted = firstAttemptStarted
        self.deadline = deadline
    }
}

/// An interceptor's answer after a failure.
public enum RetryDecision: Sendable, Hashable {
    /// Fail with the error (or let the next interceptor decide).
    case doNotRetry
    /// Send the request again now.
    case retry
    /// Send the request again after this delay.
    case retryAfter(Duration)
}

/// An interceptor made of closures.
///
/// ```swift
/// let traced = Interceptor(adapt: { request, _ in
///     var request = request
///     request.headerFields[HTTPField.Name("X-Request-ID")!] = UUID().uuidString
///     return request
/// })
/// ```
public struct Interceptor: RequestInterceptor {
    private let adapter: @Sendable (HTTPRequest, RequestContext) async throws -> HTTPRequest
    private let retrier: @Sendable (HTTPRequest, any Error, RequestContext) async -> RetryDecision

    /// An interceptor that adapts with `adapt` and decides retries with `retry`.
    public init(
        adapt: @escaping @Sendable (HTTPRequest, RequestContext) async throws -> HTTPRequest = { request, _ in request
        },
        retry: @escaping @Sendable (HTTPRequest, any Error, RequestContext) async -> RetryDecision = { _, _, _ in
            .doNotRetry
        }
    ) {
        self.adapter = adapt
        self.retrier = retry
    }

    /// Calls the `adapt` closure.
    public func adapt(_ request: HTTPRequest, context: RequestContext) async throws -> HTTPRequest {
        try await adapter(request, context)
    }

    /// Calls the `retry` closure.
    public func retry(_ request: HTTPRequest, dueTo error: any Error, context: RequestContext) async -> RetryDecision {
        await retrier(request, error, context)
    }
}

/// The manager's own hooks, run as the last adapter of the chain and on every response before
/// serialization. `HTTPSessionManager` implements them with its overridable
/// `adapt(_:)`, `process(_:)` and `credential(for:)`.
package protocol SessionHooks: Sendable {
    /// False when the hooks return their input unchanged (the base class): the pipeline then
    /// skips them.
    var runsHooks: Bool { get }
    /// The subclass's last word on each attempt's request.
    func adapt(_ request: HTTPRequest) async throws -> HTTPRequest
    /// The subclass's look at each response before serialization.
    func process(_ response: RawResponse) async throws -> RawResponse
    /// Answers an authentication challenge that no stored credential answers.
    func credential(for challenge: AuthenticationChallenge) async -> Credential?
}
